import hashlib
import json
from pathlib import Path

import pytest

from curation.cache import Cache
from curation.demo.corpus import build_demo_corpus
from curation.images import ingest
from curation.models.offline import OfflineBackend
from curation.stage import StageContext
from schemas import Drop, Keep
from tests.conftest import make_image


def context(tmp_path) -> StageContext:
    return StageContext(run_dir=tmp_path, stage="image_ingest", run_seed=0, backend=OfflineBackend(),
                        cache=Cache(tmp_path / "cache.sqlite"))


def test_ingest_records_provenance_hashes_and_reasons(tmp_path):
    root = tmp_path / "in"
    make_image(root / "a.png", 1)
    make_image(root / "sub" / "b.jpg", 2)
    (root / "broken.png").write_text("nope")
    (root / "readme.md").write_text("hello")
    (root / ".hidden.png").write_text("hidden")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("not read at all")
    (root / "outputs" / "runs").mkdir(parents=True)
    (root / "outputs" / "runs" / "x.png").write_text("excluded: our own output folder")
    (root / "gone.png").symlink_to(root / "missing-target.png")
    (root / "manifest.jsonl").write_text(json.dumps({"path": "a.png", "source_dataset": "set-A", "source_id": "A1",
                                                     "license": "CC-BY-4.0", "attribution": "someone"}) + "\n")
    cfg = ingest.IngestConfig(input_dir=str(root), default_license="CC0-1.0", exclude_paths=("outputs",))
    results = {item.provenance.source_path: (item, verdict) for item, verdict in ingest.read(cfg, context(tmp_path))}
    assert sorted(results) == [".hidden.png", "a.png", "broken.png", "gone.png", "readme.md", "sub/b.jpg"]
    assert results[".hidden.png"][1].reason == "hidden_file"
    assert results["gone.png"][1].reason == "not_a_regular_file" and results["gone.png"][0].images == []
    a, verdict = results["a.png"]
    assert verdict == Keep() and a.provenance.source_dataset == "set-A" and a.provenance.license == "CC-BY-4.0"
    assert a.images[0].sha256 == hashlib.sha256((root / "a.png").read_bytes()).hexdigest()
    assert a.images[0].phash is None  # decoding is image_phash's job, after exact dedup
    b, _ = results["sub/b.jpg"]
    assert b.provenance.source_dataset == "in" and b.provenance.license == "CC0-1.0"
    assert results["broken.png"][1] == Keep()
    assert results["readme.md"][1] == Drop(reason="unsupported_extension", detail={"path": "readme.md", "suffix": ".md"})


def test_ids_are_stable_and_depend_on_source_and_content(tmp_path):
    assert ingest.sample_id("s", "1", "a" * 64) == ingest.sample_id("s", "1", "a" * 64)
    assert len({ingest.sample_id("s", "1", "a" * 64), ingest.sample_id("t", "1", "a" * 64),
                ingest.sample_id("s", "1", "b" * 64)}) == 3


def test_input_digest_changes_when_a_file_changes(tmp_path):
    root = tmp_path / "in"
    make_image(root / "a.png", 1)
    cfg = ingest.IngestConfig(input_dir=str(root))
    before = ingest.describe_input(cfg)
    make_image(root / "b.png", 2)
    assert ingest.describe_input(cfg) != before


def test_demo_corpus_is_complete_licensed_and_rebuilt_only_when_needed(tmp_path):
    root = build_demo_corpus(tmp_path / "demo")
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
                   and p.name != "manifest.jsonl")
    assert sorted(row["path"] for row in rows) == files and len(files) >= 60
    assert {row["license"] for row in rows} <= {"CC0-1.0", "Public-Domain"}
    assert all(row["attribution"] for row in rows)
    derived = [row for row in rows if row.get("derived_from")]
    assert len(derived) >= 8
    mtime = (root / "manifest.jsonl").stat().st_mtime_ns
    assert build_demo_corpus(tmp_path / "demo") == root and (root / "manifest.jsonl").stat().st_mtime_ns == mtime


def test_shipped_photo_licenses_match_the_files():
    from curation.fingerprint import sha256_file

    folder = Path(__file__).resolve().parents[2] / "curation" / "demo" / "photos"
    rows = [json.loads(line) for line in (folder / "LICENSES.jsonl").read_text().splitlines()]
    assert sorted(row["file"] for row in rows) == sorted(p.name for p in folder.iterdir() if p.name != "LICENSES.jsonl")
    assert all(sha256_file(folder / row["file"]) == row["sha256"] for row in rows)


