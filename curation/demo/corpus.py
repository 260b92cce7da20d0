"""The bundled demo corpus, materialised on demand into `<out>/demo-corpus/` (nothing is downloaded).

Contents: openly licensed photos shipped in `curation/demo/photos/` (CC0 or public domain, see its
LICENSES.jsonl), synthetic charts, documents, diagrams and screens shipped in `curation/demo/rendered/` (CC0, ours,
drawn once by `maintainer/render_demo_images.py`, see its IMAGES.jsonl), near-duplicates and exact copies derived
from both, and a few broken files, so every stage of the funnel has something to do.
A `manifest.jsonl` gives every file's source, license and, for derived files, the original.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import PIL
from PIL import Image, ImageEnhance

from benchcurate.curation.core.files import fresh_partial_folder, one_at_a_time
from benchcurate.curation.core.fingerprint import sha256_json
from benchcurate.curation.core.jsonl import text_rows

CORPUS_VERSION = 1
COMPLETE_SUFFIX = ".complete"  # `<dest>.complete` beside the corpus, so ingest never sees it
PHOTO_SOURCE = "scikit-image-sample-data"
RENDERED_SOURCE = "benchcurate-rendered"
DERIVED_SOURCE = "benchcurate-derived"
MIRROR_SOURCE = "benchcurate-mirror"
OUR_LICENSE = "CC0-1.0"
SHIPPED = {"photos": "LICENSES.jsonl", "rendered": "IMAGES.jsonl"}  # package data folder -> its index of files


def _save_jpeg(quality: int) -> Callable[[Image.Image, Path], None]:
    return lambda image, path: image.convert("RGB").save(path, format="JPEG", quality=quality)


def _save_png(image: Image.Image, path: Path) -> None:
    image.save(path, format="PNG")


def _scaled(factor: float) -> Callable[[Image.Image], Image.Image]:
    return lambda image: image.resize((round(image.width * factor), round(image.height * factor)), Image.LANCZOS)


def _cropped(fraction: float) -> Callable[[Image.Image], Image.Image]:
    def crop(image: Image.Image) -> Image.Image:
        dx, dy = round(image.width * fraction), round(image.height * fraction)
        return image.crop((dx, dy, image.width - dx, image.height - dy))

    return crop


# (original relative path, derived file name, edit, writer, what the edit is)
DERIVATIONS = (
    ("photos/chelsea.png", "chelsea-small.jpg", _scaled(0.6), _save_jpeg(85), "resized to 60%, JPEG q85"),
    ("photos/coffee.png", "coffee-q40.jpg", lambda image: image, _save_jpeg(40), "re-encoded as JPEG q40"),
    ("photos/rocket.jpg", "rocket-70.png", _scaled(0.7), _save_png, "resized to 70%, PNG"),
    (
        "photos/astronaut.png",
        "astronaut-contrast.jpg",
        lambda image: ImageEnhance.Contrast(image.convert("RGB")).enhance(1.15),
        _save_jpeg(90),
        "contrast +15%, JPEG q90",
    ),
    (
        "rendered/bar_chart-01.png",
        "bar_chart-01-bright.png",
        lambda image: ImageEnhance.Brightness(image.convert("RGB")).enhance(1.08),
        _save_png,
        "brightness +8%",
    ),
    ("rendered/document-01.jpg", "document-01-crop.jpg", _cropped(0.02), _save_jpeg(88), "2% border crop"),
    (
        "rendered/flowchart-01.png",
        "flowchart-01-gray.png",
        lambda image: image.convert("L"),
        _save_png,
        "converted to grayscale",
    ),
    (
        "rendered/ui_screenshot-01.png",
        "ui_screenshot-01-q75.jpg",
        lambda image: image,
        _save_jpeg(75),
        "re-encoded as JPEG q75",
    ),
)
EXACT_COPIES = ("photos/camera.png", "rendered/pie_chart-01.png", "rendered/table-01.png")


def data_root() -> Traversable:
    """The package folder holding the shipped demo files."""
    return resources.files("benchcurate.curation.demo")


def shipped_index(folder: str) -> list[dict]:
    """The rows of a shipped folder's index (file, license, sha256, ...), in index order."""
    text = (data_root() / folder / SHIPPED[folder]).read_text(encoding="utf-8")
    return list(text_rows(text, f"{folder}/{SHIPPED[folder]}"))


def _copy_shipped(root: Path, folder: str) -> list[dict]:
    (root / folder).mkdir()
    entries = shipped_index(folder)
    for entry in entries:
        (root / folder / entry["file"]).write_bytes((data_root() / folder / entry["file"]).read_bytes())
    return entries


def _photos(root: Path) -> list[dict]:
    return [
        {
            "path": f"photos/{entry['file']}",
            "source_dataset": PHOTO_SOURCE,
            "source_id": entry["file"],
            "license": entry["license"],
            "attribution": entry["attribution"],
        }
        for entry in _copy_shipped(root, "photos")
    ]


def _rendered(root: Path) -> list[dict]:
    # "demo generator" is kept from when these were drawn at run time: the manifest text is unchanged.
    return [
        {
            "path": f"rendered/{entry['file']}",
            "source_dataset": RENDERED_SOURCE,
            "source_id": entry["file"],
            "license": entry["license"],
            "attribution": f"benchcurate demo generator: {entry['description']}",
        }
        for entry in _copy_shipped(root, "rendered")
    ]


def _derived(root: Path, originals: dict[str, dict]) -> list[dict]:
    rows = []
    (root / "derived").mkdir()
    for original, name, edit, write, what in DERIVATIONS:
        with Image.open(root / original) as opened:
            write(edit(opened), root / "derived" / name)
        source = originals[original]
        rows.append(
            {
                "path": f"derived/{name}",
                "source_dataset": DERIVED_SOURCE,
                "source_id": name,
                "license": source["license"],
                "derived_from": source["source_id"],
                "attribution": f"{what}; original: {source['attribution']}",
            }
        )
    (root / "copies").mkdir()
    for original in EXACT_COPIES:
        name = Path(original).name
        shutil.copyfile(root / original, root / "copies" / name)
        source = originals[original]
        rows.append(
            {
                "path": f"copies/{name}",
                "source_dataset": MIRROR_SOURCE,
                "source_id": name,
                "license": source["license"],
                "derived_from": source["source_id"],
                "attribution": f"byte-identical copy; original: {source['attribution']}",
            }
        )
    return rows


def _broken(root: Path) -> list[dict]:
    folder = root / "broken"
    folder.mkdir()
    whole = (root / "rendered" / "document-02.jpg").read_bytes()
    (folder / "truncated.jpg").write_bytes(whole[: len(whole) * 2 // 5])
    (folder / "empty.png").write_bytes(b"")
    (folder / "not-an-image.png").write_text("this file has a .png name but holds text\n", encoding="utf-8")
    (folder / "notes.txt").write_text("a stray text file in an image folder\n", encoding="utf-8")
    return [
        {
            "path": f"broken/{name}",
            "source_dataset": RENDERED_SOURCE,
            "source_id": f"broken/{name}",
            "license": OUR_LICENSE,
            "attribution": f"deliberately broken demo file: {what}",
        }
        for name, what in (
            ("truncated.jpg", "first 40% of a JPEG"),
            ("empty.png", "zero bytes"),
            ("not-an-image.png", "text with an image extension"),
            ("notes.txt", "not an image file"),
        )
    ]


def corpus_signature() -> str:
    """A hash of everything the corpus is built from, so a change to any of it rebuilds the corpus."""
    shipped = {
        f"{folder}/{item.name}": hashlib.sha256(item.read_bytes()).hexdigest()
        for folder in SHIPPED
        for item in (data_root() / folder).iterdir()
        if item.is_file()
    }
    # This module's source stands for the derivations and broken files; Pillow re-encodes the derived files.
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return sha256_json(
        {"version": CORPUS_VERSION, "shipped": dict(sorted(shipped.items())), "code": code, "pillow": PIL.__version__}
    )


def build_demo_corpus(dest: Path) -> Path:
    """Write the demo corpus to `dest` unless an identical one is already there; return `dest`."""
    with one_at_a_time(dest.with_name(dest.name + ".lock")):  # two demo runs of one output folder at once
        return _build(dest)


def _build(dest: Path) -> Path:
    marker = dest.with_name(dest.name + COMPLETE_SUFFIX)
    signature = corpus_signature()
    if marker.exists() and marker.read_text(encoding="utf-8") == signature:
        return dest
    partial = fresh_partial_folder(dest)
    rows = _photos(partial) + _rendered(partial)
    rows += _derived(partial, {row["path"]: row for row in rows}) + _broken(partial)
    with open(partial / "manifest.jsonl", "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    marker.unlink(missing_ok=True)
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    marker.write_text(signature, encoding="utf-8")
    return dest
