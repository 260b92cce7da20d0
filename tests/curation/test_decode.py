"""Every way an image file can be odd: handled correctly or dropped with its own reason."""

import numpy as np
import pytest
from PIL import Image

from benchcurate.curation.core import decode
from benchcurate.curation.core.decode import ImageDecodeError, decode_image
from tests.factories import make_image


def test_zero_byte_file_is_image_empty(tmp_path):
    (tmp_path / "e.png").write_bytes(b"")
    with pytest.raises(ImageDecodeError) as caught:
        decode_image(tmp_path / "e.png")
    assert caught.value.reason == "image_empty"


def test_truncated_jpeg_is_image_truncated(tmp_path):
    make_image(tmp_path / "a.jpg", 1, (400, 300))
    data = (tmp_path / "a.jpg").read_bytes()
    (tmp_path / "t.jpg").write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageDecodeError) as caught:
        decode_image(tmp_path / "t.jpg")
    assert caught.value.reason == "image_truncated"


def test_text_with_image_extension_is_image_unreadable(tmp_path):
    (tmp_path / "x.png").write_text("not an image")
    with pytest.raises(ImageDecodeError) as caught:
        decode_image(tmp_path / "x.png")
    assert caught.value.reason == "image_unreadable"


def test_extension_that_lies_is_decoded_by_content(tmp_path):
    make_image(tmp_path / "real.png", 2)
    (tmp_path / "liar.jpg").write_bytes((tmp_path / "real.png").read_bytes())
    assert decode_image(tmp_path / "liar.jpg").format == "PNG"


def test_pixel_limit_drops_large_images(tmp_path):
    make_image(tmp_path / "big.png", 3, (400, 400))
    with pytest.raises(ImageDecodeError) as caught:
        decode_image(tmp_path / "big.png", max_pixels=100_000)
    assert caught.value.reason == "image_too_large"
    assert decode_image(tmp_path / "big.png", max_pixels=160_000).width == 400


def test_exif_orientation_is_applied(tmp_path):
    image = Image.new("RGB", (40, 20), (255, 0, 0))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise when displayed
    image.save(tmp_path / "o.jpg", exif=exif)
    decoded = decode_image(tmp_path / "o.jpg")
    assert (decoded.width, decoded.height) == (20, 40)


def test_transparent_pixels_are_flattened_on_white(tmp_path):
    image = Image.new("RGBA", (10, 10), (0, 0, 0, 0))
    image.putpixel((0, 0), (255, 0, 0, 255))
    image.save(tmp_path / "a.png")
    pixels = np.asarray(decode_image(tmp_path / "a.png").image)
    assert tuple(pixels[5, 5]) == (255, 255, 255)
    assert tuple(pixels[0, 0]) == (255, 0, 0)


@pytest.mark.parametrize("mode", ["P", "CMYK", "L", "I;16"])
def test_other_modes_become_rgb(tmp_path, mode):
    source = make_image(tmp_path / "src.png", 4)
    converted = Image.open(source).convert(mode if mode != "I;16" else "I")
    if mode == "I;16":
        converted = Image.fromarray(np.asarray(Image.open(source).convert("L"), dtype=np.uint16) * 257)
    path = tmp_path / ("m.tif" if mode == "CMYK" else "m.png")
    converted.save(path)
    decoded = decode_image(path)
    assert decoded.image.mode == "RGB" and decoded.width == 320


def test_animated_gif_uses_first_frame(tmp_path):
    frames = [Image.new("RGB", (16, 16), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=100)
    pixel = decode_image(tmp_path / "anim.gif").image.getpixel((8, 8))
    assert pixel[0] > 200 and pixel[2] < 50


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "LA", "L", "P", "P+transparency", "I;16", "CMYK"])
def test_the_grey_decode_is_the_colour_decode_in_grey(tmp_path, mode):
    """What the hashes read (`grey`, no full-size RGB copy) against the RGB decode every other step reads."""
    rng = np.random.default_rng(7)
    colour = Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8))
    alpha = Image.fromarray(rng.integers(0, 256, (60, 80), dtype=np.uint8))
    if mode in ("RGBA", "LA"):
        image = colour.convert(mode[0] if mode == "LA" else "RGB").convert(mode)
        image.putalpha(alpha)
    elif mode == "P+transparency":
        image = colour.convert("P")
        image.info["transparency"] = 3
    elif mode == "I;16":
        image = Image.fromarray((rng.integers(0, 65536, (60, 80))).astype(np.uint16))
    else:
        image = colour.convert(mode)
    path = tmp_path / ("x.jpg" if mode == "CMYK" else "x.png")
    image.save(path, **({"transparency": 3} if mode == "P+transparency" else {}))
    grey = np.asarray(decode_image(path, grey=True).image, dtype=np.int16)
    via_rgb = np.asarray(decode_image(path).image.convert("L"), dtype=np.int16)
    assert decode_image(path, grey=True).image.mode == "L" and grey.shape == via_rgb.shape == (60, 80)
    assert np.abs(grey - via_rgb).max() <= 1


def _webp(path, kind: str):
    """A still WebP with edges, gradients and noise (lossy coding and chroma upsampling have work to do), odd sides."""
    rng = np.random.default_rng(11)
    y, x = np.mgrid[0:53, 0:75]
    pixels = np.stack([x * 3, y * 4, (x + y) * 2], axis=-1) + rng.integers(0, 40, (53, 75, 3))
    pixels[20:30, 10:40] = (250, 20, 30)
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    if "alpha" in kind:
        image.putalpha(Image.fromarray(rng.integers(0, 256, (53, 75), dtype=np.uint8)))
    exif = Image.Exif()
    if kind == "turned":
        exif[0x0112] = 6
    image.save(path, "WEBP", lossless=kind.startswith("lossless"), quality=70, exif=exif)
    return path


@pytest.mark.parametrize("kind", ["lossy", "lossless", "lossy+alpha", "lossless+alpha", "turned"])
def test_a_still_webp_is_decoded_by_libwebp_to_pillows_pixels(tmp_path, monkeypatch, kind):
    path = _webp(tmp_path / "x.webp", kind)
    with Image.open(path) as opened:
        assert decode._webp_still(path.read_bytes(), opened.mode) is not None  # the file takes libwebp's own call
    settings = [{}, {"grey": True}, {"draft_side_px": 32, "shrink_all": True, "grey": True}]
    fast = [decode_image(path, **setting) for setting in settings]
    monkeypatch.setattr(decode, "_webp_still", lambda data, mode: None)  # Pillow's load, as before
    for ours, setting in zip(fast, settings, strict=True):
        pillow = decode_image(path, **setting)
        assert (ours.width, ours.height, ours.format) == (pillow.width, pillow.height, "WEBP")
        assert ours.image.mode == pillow.image.mode and ours.image.tobytes() == pillow.image.tobytes()
    assert (fast[0].width, fast[0].height) == ((53, 75) if kind == "turned" else (75, 53))


def test_an_animated_or_truncated_webp_is_left_to_pillow(tmp_path):
    frames = [Image.new("RGB", (16, 16), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(tmp_path / "anim.webp", save_all=True, append_images=frames[1:], duration=100, lossless=True)
    assert decode._webp_still((tmp_path / "anim.webp").read_bytes(), "RGB") is None
    assert decode_image(tmp_path / "anim.webp").image.getpixel((8, 8)) == (255, 0, 0)  # the first frame
    data = _webp(tmp_path / "x.webp", "lossy").read_bytes()
    (tmp_path / "cut.webp").write_bytes(data[: len(data) * 2 // 3])
    assert decode._webp_still((tmp_path / "cut.webp").read_bytes(), "RGB") is None
    with pytest.raises(ImageDecodeError) as caught:
        decode_image(tmp_path / "cut.webp")
    assert caught.value.reason in ("image_truncated", "image_unreadable")
