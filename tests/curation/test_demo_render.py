"""Tests for the synthetic demo image renderer."""

import hashlib
from collections import Counter
from pathlib import Path

import imagehash
import numpy as np
import pytest
from PIL import Image

from benchcurate.curation.demo.render import KINDS, RenderedImage, render_demo_images

EXPECTED_COUNTS = {"bar_chart": 5, "line_chart": 4, "pie_chart": 3, "scatter_plot": 2, "document": 7, "table": 3,
                   "flowchart": 4, "tree_diagram": 3, "network_diagram": 2, "ui_screenshot": 5, "receipt": 2,
                   "icon": 1}
JPEG_KINDS = {"document", "receipt"}
CHART_KINDS = {"bar_chart", "line_chart", "pie_chart", "scatter_plot"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> list[RenderedImage]:
    return render_demo_images(tmp_path_factory.mktemp("demo") / "images")


def _pixels(item: RenderedImage) -> np.ndarray:
    with Image.open(item.path) as img:
        return np.asarray(img.convert("RGB"))


def _near_white_share(pixels: np.ndarray) -> float:
    return float((pixels > 235).all(axis=-1).mean())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_calls_write_identical_bytes(rendered, tmp_path):
    again = render_demo_images(tmp_path / "second")
    assert [r.path.name for r in again] == [r.path.name for r in rendered]
    assert [(r.kind, r.description) for r in again] == [(r.kind, r.description) for r in rendered]
    for first, second in zip(rendered, again):
        assert _sha256(first.path) == _sha256(second.path), first.path.name


def test_counts_names_and_order(rendered):
    assert len(rendered) == 41
    assert Counter(r.kind for r in rendered) == EXPECTED_COUNTS
    expected = [(kind, i) for kind in KINDS for i in range(1, EXPECTED_COUNTS[kind] + 1)]
    assert [(r.kind, int(r.path.stem.rsplit("-", 1)[1])) for r in rendered] == expected
    for r in rendered:
        suffix = ".jpg" if r.kind in JPEG_KINDS else ".png"
        assert r.path.name == f"{r.kind}-{int(r.path.stem[-2:]):02d}{suffix}"


def test_writes_only_the_listed_files(rendered):
    out_dir = rendered[0].path.parent
    assert all(r.path.parent == out_dir for r in rendered)
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(r.path.name for r in rendered)


def test_descriptions_are_single_non_empty_lines(rendered):
    for r in rendered:
        assert r.description.strip() and "\n" not in r.description, r.path.name


def test_files_open_with_expected_format_and_mode(rendered):
    for r in rendered:
        with Image.open(r.path) as img:
            assert img.format == ("JPEG" if r.kind in JPEG_KINDS else "PNG"), r.path.name
            assert img.mode == "RGB", r.path.name
            assert "exif" not in img.info, r.path.name
            img.load()


def test_shapes_by_kind(rendered):
    for r in rendered:
        with Image.open(r.path) as img:
            w, h = img.size
        if r.kind == "receipt":
            assert h > 2 * w and 330 <= w <= 400, (r.path.name, w, h)
        elif r.kind == "icon":
            assert (w, h) == (96, 96)
        elif r.kind in CHART_KINDS:
            assert w > h and 600 <= w <= 820 and 440 <= h <= 620, (r.path.name, w, h)
        elif r.kind == "document":
            assert h > w and 780 <= w <= 870 and 980 <= h <= 1120, (r.path.name, w, h)
        elif r.kind in {"table", "ui_screenshot"}:
            assert w > h, (r.path.name, w, h)


DIAGRAM_AND_TABLE_KINDS = {"table", "flowchart", "tree_diagram", "network_diagram"}


@pytest.mark.parametrize("kinds", [CHART_KINDS, {"document"}, DIAGRAM_AND_TABLE_KINDS])
def test_light_background_but_not_blank(rendered, kinds):
    for r in (r for r in rendered if r.kind in kinds):
        pixels = _pixels(r)
        assert _near_white_share(pixels) > 0.6, r.path.name
        assert (pixels < 100).all(axis=-1).sum() > 500, r.path.name  # dark text or axes are present


def _saturated_share(pixels: np.ndarray) -> float:
    pixels = pixels.astype(int)
    return float((pixels.max(axis=-1) - pixels.min(axis=-1) > 100).mean())


def test_charts_use_saturated_colours_and_diagrams_pastels(rendered):
    for r in rendered:
        if r.kind in CHART_KINDS:
            assert _saturated_share(_pixels(r)) > 0.005, r.path.name
        elif r.kind in {"flowchart", "tree_diagram", "network_diagram"}:
            assert _saturated_share(_pixels(r)) < 0.001, r.path.name


def test_ui_screenshots_have_a_coloured_top_bar(rendered):
    for r in (r for r in rendered if r.kind == "ui_screenshot"):
        bar = _pixels(r)[5:45].astype(int)
        chroma = bar.max(axis=-1) - bar.min(axis=-1)
        assert (chroma > 60).mean() > 0.7, r.path.name


def test_receipts_are_off_white_paper(rendered):
    for r in (r for r in rendered if r.kind == "receipt"):
        pixels = _pixels(r).astype(int)
        corner = pixels[:20, :20].reshape(-1, 3).mean(axis=0)
        assert corner.min() > 230 and corner[0] - corner[2] > 3, (r.path.name, corner)  # warm, not pure white
        assert (pixels < 100).all(axis=-1).sum() > 500, r.path.name


def test_icon_is_flat_with_few_colours(rendered):
    (icon,) = [r for r in rendered if r.kind == "icon"]
    with Image.open(icon.path) as img:
        colours = img.getcolors(maxcolors=256)
    assert colours is not None and 2 <= len(colours) <= 3


def test_distinct_renders_are_not_perceptual_near_duplicates(rendered):
    # The near-duplicate detector drops images within Hamming distance 8 of each other on a 64-bit pHash;
    # keep a margin so every render survives it.
    hashes = []
    for r in rendered:
        with Image.open(r.path) as img:
            hashes.append((r.path.name, imagehash.phash(img.convert("RGB"))))
    too_close = [(a_name, b_name, a_hash - b_hash)
                 for i, (a_name, a_hash) in enumerate(hashes) for b_name, b_hash in hashes[i + 1:]
                 if a_hash - b_hash < 14]
    assert not too_close, too_close
