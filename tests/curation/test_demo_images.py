"""The demo images as shipped in the package: their index, their files, the corpus built from them, its signature."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from benchcurate.curation.core.decode import decode_image
from benchcurate.curation.demo import corpus
from benchcurate.curation.demo.corpus import build_demo_corpus, corpus_signature, data_root, shipped_index
from benchcurate.curation.images.near_dedup import NearDedupConfig, distance
from benchcurate.curation.images.phash import PhashConfig, fingerprint
from tests.helpers import at_once

RENDERED = Path(str(data_root() / "rendered"))
INDEX_FIELDS = {"file", "kind", "description", "format", "width", "height", "license", "sha256"}


def _shipped_images() -> list[Path]:
    return [
        Path(str(data_root() / folder / entry["file"])) for folder in corpus.SHIPPED for entry in shipped_index(folder)
    ]


def _tree(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_demo_corpus(tmp_path_factory.mktemp("corpus") / "demo-corpus")


def test_the_index_lists_exactly_the_shipped_files_with_their_sha256():
    rows = shipped_index("rendered")
    assert sorted(row["file"] for row in rows) == sorted(p.name for p in RENDERED.iterdir() if p.name != "IMAGES.jsonl")
    assert len(rows) == 41
    for row in rows:
        assert set(row) == INDEX_FIELDS, row["file"]
        assert hashlib.sha256((RENDERED / row["file"]).read_bytes()).hexdigest() == row["sha256"], row["file"]
        assert row["license"] == "CC0-1.0" and row["kind"] and row["description"].strip(), row["file"]
        assert "\n" not in row["description"], row["file"]


def test_every_shipped_image_decodes_with_its_recorded_format_and_size():
    for row in shipped_index("rendered"):
        decoded = decode_image(RENDERED / row["file"])  # a full decode: a truncated file raises
        assert (decoded.format, decoded.width, decoded.height) == (row["format"], row["width"], row["height"])
        assert Path(row["file"]).suffix == {"PNG": ".png", "JPEG": ".jpg"}[row["format"]], row["file"]


def test_the_built_corpus_lists_every_shipped_file_with_its_provenance(built):
    rows = {row["path"]: row for row in map(json.loads, (built / "manifest.jsonl").read_text().splitlines())}
    for folder in corpus.SHIPPED:
        for entry in shipped_index(folder):
            row = rows[f"{folder}/{entry['file']}"]
            assert row["source_dataset"] and row["source_id"] == entry["file"]
            assert row["license"] == entry["license"] and row["attribution"]
            assert (built / row["path"]).read_bytes() == (data_root() / folder / entry["file"]).read_bytes()
    for entry in shipped_index("rendered"):
        assert entry["description"] in rows[f"rendered/{entry['file']}"]["attribution"]


def test_a_rebuild_elsewhere_is_byte_identical(built, tmp_path):
    again = build_demo_corpus(tmp_path / "demo-corpus")
    assert _tree(again) == _tree(built)


def test_distinct_shipped_images_are_not_near_duplicates_at_the_default_threshold():
    # Each shipped image is an original; the near-dedup stage must leave every one of them in the funnel.
    threshold = NearDedupConfig().max_hamming_distance
    hashes = {path.name: fingerprint(path, PhashConfig())["phash"] for path in _shipped_images()}
    names = list(hashes)
    close = [
        (a, b, distance(hashes[a], hashes[b]))
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if distance(hashes[a], hashes[b]) <= threshold
    ]
    assert len(hashes) == 56 and not close


@pytest.fixture
def data_copy(tmp_path, monkeypatch) -> Path:
    """A copy of the shipped demo folders that the corpus module reads instead of the package's."""
    root = tmp_path / "data"
    for folder in corpus.SHIPPED:
        shutil.copytree(data_root() / folder, root / folder)
    monkeypatch.setattr(corpus, "data_root", lambda: root)
    return root


def test_the_signature_depends_on_content_not_location(data_copy, monkeypatch):
    original = corpus_signature()
    monkeypatch.undo()
    assert corpus_signature() == original


@pytest.mark.parametrize(
    "name", ["rendered/icon-01.png", "rendered/IMAGES.jsonl", "photos/coffee.png", "photos/LICENSES.jsonl"]
)
def test_changing_any_shipped_file_changes_the_signature(data_copy, name):
    before = corpus_signature()
    (data_copy / name).write_bytes((data_copy / name).read_bytes() + b"\n")
    assert corpus_signature() != before


def test_changing_the_derivation_code_changes_the_signature(tmp_path, monkeypatch):
    before = corpus_signature()
    edited = tmp_path / "corpus.py"
    edited.write_text(Path(corpus.__file__).read_text() + "\n# an edit\n")
    monkeypatch.setattr(corpus, "__file__", str(edited))
    assert corpus_signature() != before


def test_a_changed_shipped_image_is_copied_into_an_existing_corpus(data_copy, tmp_path):
    dest = build_demo_corpus(tmp_path / "demo-corpus")
    changed = (data_copy / "photos" / "text.png").read_bytes() + b"trailing bytes"
    (data_copy / "photos" / "text.png").write_bytes(changed)
    assert (build_demo_corpus(dest) / "photos" / "text.png").read_bytes() == changed


def test_two_demo_runs_building_one_corpus_at_once_both_get_it_whole(tmp_path):
    """Two `curate run --demo` of one output folder start together: each waits for the other's corpus instead of
    clearing the folder the other is filling (both used `demo-corpus.partial`)."""
    dest = tmp_path / "demo-corpus"
    outcomes = at_once(lambda: build_demo_corpus(dest), 4)
    assert outcomes == [dest] * 4
    rows = [json.loads(line) for line in (dest / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows and all((dest / row["path"]).exists() for row in rows if not row.get("missing"))
    assert not list(tmp_path.glob("*.partial"))
