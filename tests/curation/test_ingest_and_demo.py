import hashlib
import json
from pathlib import Path

import pytest

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.demo.corpus import build_demo_corpus
from benchcurate.curation.engine.stage import StageContext
from benchcurate.curation.images import ingest
from benchcurate.curation.models.offline import OfflineBackend
from benchcurate.schemas import Drop, Keep
from tests.factories import make_image


def context(tmp_path) -> StageContext:
    return StageContext(
        run_dir=tmp_path,
        stage="image_ingest",
        run_seed=0,
        backend=OfflineBackend(),
        cache=Cache(tmp_path / "cache.sqlite"),
    )


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
    (root / "manifest.jsonl").write_text(
        json.dumps(
            {
                "path": "a.png",
                "source_dataset": "set-A",
                "source_id": "A1",
                "license": "CC-BY-4.0",
                "attribution": "someone",
            }
        )
        + "\n"
    )
    cfg = ingest.IngestConfig(input_path=str(root), default_license="CC0-1.0", exclude_paths=("outputs",))
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
    assert results["readme.md"][1] == Drop(
        reason="unsupported_extension", detail={"path": "readme.md", "suffix": ".md"}
    )


def test_ids_are_stable_and_depend_on_source_and_content(tmp_path):
    assert ingest.sample_id("s", "1", "a" * 64) == ingest.sample_id("s", "1", "a" * 64)
    assert (
        len(
            {
                ingest.sample_id("s", "1", "a" * 64),
                ingest.sample_id("t", "1", "a" * 64),
                ingest.sample_id("s", "1", "b" * 64),
            }
        )
        == 3
    )


def test_input_digest_changes_when_a_file_changes(tmp_path):
    root = tmp_path / "in"
    make_image(root / "a.png", 1)
    cfg = ingest.IngestConfig(input_path=str(root))
    before = ingest.describe_input(cfg)
    make_image(root / "b.png", 2)
    assert ingest.describe_input(cfg) != before


def test_demo_corpus_is_complete_licensed_and_rebuilt_only_when_needed(tmp_path):
    root = build_demo_corpus(tmp_path / "demo")
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines()]
    files = sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != "manifest.jsonl"
    )
    assert sorted(row["path"] for row in rows) == files and len(files) >= 60
    assert {row["license"] for row in rows} <= {"CC0-1.0", "Public-Domain"}
    assert all(row["attribution"] for row in rows)
    derived = [row for row in rows if row.get("derived_from")]
    assert len(derived) >= 8
    mtime = (root / "manifest.jsonl").stat().st_mtime_ns
    assert build_demo_corpus(tmp_path / "demo") == root and (root / "manifest.jsonl").stat().st_mtime_ns == mtime


def test_shipped_photo_licenses_match_the_files():
    from benchcurate.curation.core.fingerprint import sha256_file

    folder = Path(__file__).resolve().parents[2] / "curation" / "demo" / "photos"
    rows = [json.loads(line) for line in (folder / "LICENSES.jsonl").read_text().splitlines()]
    assert sorted(row["file"] for row in rows) == sorted(p.name for p in folder.iterdir() if p.name != "LICENSES.jsonl")
    assert all(sha256_file(folder / row["file"]) == row["sha256"] for row in rows)


def ingest_all(path: Path, tmp_path: Path, **config) -> dict:
    cfg = ingest.IngestConfig(input_path=str(path), **config)
    return {item.provenance.source_path: (item, verdict) for item, verdict in ingest.read(cfg, context(tmp_path))}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_manifest_file_lists_images_with_their_provenance(tmp_path, fmt):
    make_image(tmp_path / "pics" / "a.png", 1)
    make_image(tmp_path / "elsewhere" / "b.jpg", 2)
    rows = [
        {"path": "pics/a.png", "source": "MathVista", "license": "CC-BY-SA-4.0", "source_id": "mv-1"},
        {
            "path": str(tmp_path / "elsewhere" / "b.jpg"),
            "source": "MMMU",
            "license": "Apache-2.0",
            "source_id": "mmmu-7",
        },
        {"path": "pics/missing.png", "source": "MMMU", "license": "Apache-2.0", "source_id": "mmmu-8"},
    ]
    manifest = tmp_path / f"list.{fmt}"
    if fmt == "csv":
        lines = ["path,source,license,source_id"] + [",".join(row.values()) for row in rows]
        manifest.write_text("\n".join(lines) + "\n")
    else:
        manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    results = ingest_all(manifest, tmp_path)
    a, verdict = results[f"list.{fmt}:1"]
    assert verdict == Keep() and (a.provenance.source_dataset, a.provenance.source_id, a.provenance.license) == (
        "MathVista",
        "mv-1",
        "CC-BY-SA-4.0",
    )
    assert results[f"list.{fmt}:2"][0].provenance.source_dataset == "MMMU"
    assert results[f"list.{fmt}:3"][1].reason == "image_missing"


def test_a_manifest_row_without_a_path_is_a_clear_error(tmp_path):
    from benchcurate.curation.core.errors import UserError

    (tmp_path / "m.jsonl").write_text(json.dumps({"source": "x"}) + "\n")
    with pytest.raises(UserError, match="rows \\[1\\] have no path column"):
        ingest_all(tmp_path / "m.jsonl", tmp_path)


def test_a_hugging_face_dataset_folder_is_ingested_from_its_image_column(tmp_path):
    from datasets import Dataset, Features, Value
    from datasets import Image as ImageFeature

    pictures = [make_image(tmp_path / "src" / f"{n}.png", n) for n in range(3)]
    features = Features({"image": ImageFeature(), "uid": Value("string"), "license": Value("string")})
    rows = {
        "image": [{"bytes": p.read_bytes(), "path": p.name} for p in pictures] + [None],
        "uid": ["u0", "u1", "u2", "u3"],
        "license": ["CC0-1.0", "MIT", "", "MIT"],
    }
    Dataset.from_dict(rows, features=features).to_parquet(str(tmp_path / "ds" / "data" / "test-00000.parquet"))
    results = ingest_all(tmp_path / "ds", tmp_path, id_column="uid", default_license="CC-BY-4.0")
    assert sorted(results) == [f"data/test-00000.parquet#{row}" for row in range(4)]
    item, verdict = results["data/test-00000.parquet#1"]
    assert verdict == Keep() and item.provenance.source_id == "u1" and item.provenance.license == "MIT"
    assert results["data/test-00000.parquet#2"][0].provenance.license == "CC-BY-4.0"
    assert Path(item.images[0].path).read_bytes() == pictures[1].read_bytes()  # stored once, by content
    assert item.images[0].sha256 == hashlib.sha256(pictures[1].read_bytes()).hexdigest()
    assert results["data/test-00000.parquet#3"][1].reason == "image_missing"


def test_an_unknown_kind_of_input_file_is_a_user_error(tmp_path):
    from benchcurate.curation.core.errors import UserError

    (tmp_path / "photo.zip").write_bytes(b"PK")
    with pytest.raises(UserError, match="not a .csv or .jsonl manifest"):
        ingest_all(tmp_path / "photo.zip", tmp_path)
