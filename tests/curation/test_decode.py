"""Every way an image file can be odd: handled correctly or dropped with its own reason."""

import numpy as np
import pytest
from PIL import Image

from benchcurate.curation.images.decode import ImageDecodeError, decode_image
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
        converted = Image.fromarray((np.asarray(Image.open(source).convert("L"), dtype=np.uint16) * 257))
    path = tmp_path / ("m.tif" if mode == "CMYK" else "m.png")
    converted.save(path)
    decoded = decode_image(path)
    assert decoded.image.mode == "RGB" and decoded.width == 320


def test_animated_gif_uses_first_frame(tmp_path):
    frames = [Image.new("RGB", (16, 16), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:], duration=100)
    pixel = decode_image(tmp_path / "anim.gif").image.getpixel((8, 8))
    assert pixel[0] > 200 and pixel[2] < 50
