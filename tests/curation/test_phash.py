"""image_phash on the defective-file zoo: every case decoded correctly or dropped with its own reason."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.engine.stage import StageContext, record_scores
from benchcurate.curation.images import ingest, phash
from benchcurate.curation.images.near_dedup import distance
from benchcurate.curation.models.offline import OfflineBackend
from benchcurate.schemas import Drop, Keep
from tests.factories import make_image

PHOTOS = Path(__file__).resolve().parents[2] / "curation" / "demo" / "photos"


def context(tmp_path) -> StageContext:
    return StageContext(
        run_dir=tmp_path,
        stage="image_phash",
        run_seed=0,
        backend=OfflineBackend(),
        cache=Cache(tmp_path / "cache.sqlite"),
    )


def hash_folder(root: Path, tmp_path: Path, cfg: phash.PhashConfig | None = None) -> dict:
    """source path -> (verdict, sample after the stage), through ingest then image_phash."""
    cfg = cfg or phash.PhashConfig()
    ctx = context(tmp_path)
    results = {}
    for item, verdict in ingest.read(ingest.IngestConfig(input_path=str(root)), ctx):
        assert verdict == Keep(), item.provenance.source_path
        scores = phash.score(item, cfg, ctx)
        after = phash.apply(record_scores(item, scores, "image_phash"), scores, cfg)
        results[item.provenance.source_path] = (phash.decide(scores, cfg), after)
    return results


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """Every kind of odd file real collections hold, generated here."""
    root = tmp_path_factory.mktemp("zoo")
    good = make_image(root / "good.jpg", 1, (400, 300))
    data = good.read_bytes()
    (root / "empty.png").write_bytes(b"")
    (root / "truncated.jpg").write_bytes(data[: len(data) // 2])
    (root / "garbage.png").write_bytes(bytes(range(256)) * 8)
    (root / "png-named.jpg").write_bytes((make_image(root / "tmp" / "p.png", 2)).read_bytes())
    (root / "vector.png").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>')
    (root / "phone.jpg").write_bytes(b"\0\0\0\x18ftypheic" + b"\0" * 64)
    make_image(root / "bomb.png", 3, (3000, 2000))
    upright = Image.open(good)
    exif = Image.Exif()
    exif[0x0112] = 6
    upright.save(root / "rotated-exif.jpg", exif=exif)
    upright.convert("P", palette=Image.ADAPTIVE).save(root / "palette.png")
    upright.convert("CMYK").save(root / "cmyk.jpg")
    Image.fromarray(np.asarray(upright.convert("L"), dtype=np.uint16) * 257).save(root / "sixteen.png")
    rgba = upright.convert("RGBA")
    rgba.putalpha(255)
    rgba.save(root / "opaque-alpha.png")
    frames = [upright, upright.transpose(Image.FLIP_LEFT_RIGHT)]
    frames[0].save(root / "animated.gif", save_all=True, append_images=frames[1:], duration=50)
    (root / "tmp" / "p.png").unlink()
    (root / "tmp").rmdir()
    return root


EXPECTED = {
    "good.jpg": Keep(),
    "png-named.jpg": Keep(),
    "rotated-exif.jpg": Keep(),
    "palette.png": Keep(),
    "cmyk.jpg": Keep(),
    "sixteen.png": Keep(),
    "opaque-alpha.png": Keep(),
    "animated.gif": Keep(),
    "empty.png": "image_empty",
    "truncated.jpg": "image_truncated",
    "garbage.png": "image_unreadable",
    "vector.png": "image_unsupported_format",
    "phone.jpg": "image_unsupported_format",
    "bomb.png": "image_too_large",
}


def test_every_file_in_the_zoo_has_its_outcome(zoo, tmp_path):
    results = hash_folder(zoo, tmp_path, phash.PhashConfig(max_pixels=5_000_000))
    assert set(results) == set(EXPECTED)
    for name, expected in EXPECTED.items():
        verdict, item = results[name]
        if expected == Keep():
            assert verdict == Keep() and len(item.images[0].phash) == 16, name
        else:
            assert isinstance(verdict, Drop) and verdict.reason == expected and verdict.detail["error"], name


def test_zoo_details(zoo, tmp_path):
    results = hash_folder(zoo, tmp_path, phash.PhashConfig(max_pixels=5_000_000))
    good = results["good.jpg"][1].images[0]
    rotated = results["rotated-exif.jpg"][1].images[0]
    assert (good.width, good.height) == (400, 300) and (rotated.width, rotated.height) == (300, 400)
    assert distance(good.phash, rotated.phash) > 10  # orientation applied before hashing
    assert results["png-named.jpg"][1].images[0].format == "PNG"  # the content decides, not the suffix
    assert good.phash_algorithm.startswith("imagehash ") and "phash hash_size=8" in good.phash_algorithm
    assert distance(results["opaque-alpha.png"][1].images[0].phash, good.phash) <= 2


def test_transparent_image_hashes_like_its_visible_content(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    visible = make_image(tmp_path / "v.png", 5, (300, 300))
    on_white = Image.open(visible).convert("RGBA")
    mask = Image.new("L", on_white.size, 0)
    mask.paste(255, (50, 50, 250, 250))
    on_white.putalpha(mask)
    on_white.save(root / "transparent.png")
    flattened = Image.new("RGB", on_white.size, (255, 255, 255))
    flattened.paste(on_white, mask=mask)
    flattened.save(root / "flattened.png")
    results = hash_folder(root, tmp_path)
    assert results["transparent.png"][1].images[0].phash == results["flattened.png"][1].images[0].phash


@pytest.mark.parametrize(
    "name,size", [("big.jpg", (2048, 2048)), ("big.png", (2050, 1301)), ("alpha.png", (1030, 1800))]
)
def test_a_reduced_decode_keeps_the_hash_close_and_the_true_size(tmp_path, name, size):
    """JPEGs are drafted by libjpeg, other formats box-averaged (sides that the factor does not divide, alpha)."""
    root = tmp_path / "in"
    root.mkdir()
    with Image.open(PHOTOS / "astronaut.png") as photo:
        big = photo.convert("RGBA" if name == "alpha.png" else "RGB").resize(size)
    if name == "alpha.png":
        big.putalpha(Image.linear_gradient("L").resize(size))
    big.save(root / name, quality=92)
    full = hash_folder(root, tmp_path / "a", phash.PhashConfig(draft_side_px=None))[name][1].images[0]
    draft = hash_folder(root, tmp_path / "b", phash.PhashConfig(draft_side_px=256))[name][1].images[0]
    assert (draft.width, draft.height) == (full.width, full.height) == size
    assert distance(full.phash, draft.phash) <= 4 and "reduced to >= 256 px" in draft.phash_algorithm


def test_hashes_are_cached_by_content(tmp_path, monkeypatch):
    root = tmp_path / "in"
    make_image(root / "a.png", 1)
    first = hash_folder(root, tmp_path)
    monkeypatch.setattr(phash, "decode_image", lambda *a, **k: pytest.fail("decoded a file it had hashed"))
    assert hash_folder(root, tmp_path) == first


@pytest.mark.parametrize("name,value", [("camera.png", "bff1c1c0434e8cbc"), ("coffee.png", "bb8320376c0f3637")])
def test_phash_values_are_pinned(tmp_path, name, value):
    """Stored hashes and dedup decisions depend on these exact values (imagehash's 64-bit pHash)."""
    root = tmp_path / "in"
    root.mkdir()
    (root / name).write_bytes((PHOTOS / name).read_bytes())
    assert hash_folder(root, tmp_path)[name][1].images[0].phash == value


def test_a_resized_twin_is_a_near_duplicate_and_a_rotation_is_not(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    with Image.open(PHOTOS / "coffee.png") as image:
        image.save(root / "original.png")
        image.resize((300, 200)).convert("RGB").save(root / "small.jpg", quality=80)
        image.rotate(90, expand=True).save(root / "rotated.png")
    hashes = {name: item.images[0].phash for name, (_, item) in hash_folder(root, tmp_path).items()}
    assert distance(hashes["original.png"], hashes["small.jpg"]) <= 4
    assert distance(hashes["original.png"], hashes["rotated.png"]) > 16


def test_our_dct_steps_give_imagehash_phash_bits_on_every_format_and_decode_path(tmp_path):
    """The stored pHash is imagehash.phash of our decoded picture; the orientation hashes come from its steps redone
    (likeness.phash_block), whose bits must equal imagehash's on the same picture: real photos in every format
    and mode we decode, through the JPEG draft, the box reduction and the full decode."""
    import imagehash

    from benchcurate.curation.core.decode import decode_image
    from benchcurate.curation.images.likeness import hash_of, phash_block

    files = []
    for name in ("astronaut.png", "camera.png", "rocket.jpg", "horse.png"):
        with Image.open(PHOTOS / name) as photo:
            photo.load()
            stem = Path(name).stem
            for fmt, suffix, mode in (
                ("PNG", "png", photo.mode),
                ("JPEG", "jpg", "RGB"),
                ("WEBP", "webp", "RGB"),
                ("GIF", "gif", "P"),
                ("BMP", "bmp", "RGB"),
                ("TIFF", "tif", "RGB"),
                ("PNG", "la.png", "LA"),
                ("JPEG", "cmyk.jpg", "CMYK"),
            ):
                path = tmp_path / f"{stem}.{suffix}"
                photo.convert(mode).resize((photo.width * 2, photo.height * 2)).save(path, fmt)
                files.append(path)
    for path in files:
        for draft, shrink in ((None, False), (256, False), (256, True)):
            for grey in (True, False):
                picture = decode_image(path, draft_side_px=draft, shrink_all=shrink, grey=grey).image
                assert hash_of(phash_block(picture)) == str(imagehash.phash(picture)), (path.name, draft, grey)
