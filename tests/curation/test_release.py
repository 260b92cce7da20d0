"""Releases from a real (in-process, offline) run: loadable offline, checksummed, never overwritten."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.engine.runner import run_all, run_stage
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.recipes import load_recipe
from benchcurate.curation.release.card import license_metadata
from benchcurate.curation.release.writer import CHECKSUM_FILE, release, write_release
from tests.factories import make_image
from tests.helpers import SMALL, prepared_run, resolve


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("release")
    run_dir = prepared_run(tmp_path, "small", overrides=SMALL)
    run_all(run_dir)
    return tmp_path, run_dir, write_release(run_dir, tmp_path / "out")


def test_release_loads_offline_with_datasets_in_a_fresh_process(released):
    _, _, folder = released
    code = (
        "import sys, json; from datasets import load_dataset; ds = load_dataset(sys.argv[1])['test']; "
        "row = ds[0]; print(json.dumps({'n': len(ds), 'size': list(row['image'].size), "
        "'speaker': row['conversation'][0]['speaker'], 'checklist': len(row['conversation'][0]['checklist'])}))"
    )
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded == {"n": 6, "size": [320, 240], "speaker": "user", "checklist": loaded["checklist"]}
    assert loaded["checklist"] > 0


def test_two_releases_with_the_same_version_load_apart_offline(released, tmp_path):
    _, _, folder = released
    other_run = prepared_run(tmp_path, "other", overrides=SMALL)
    config = RunStore(other_run).load_config()
    overrides = {**SMALL, "category_weighted_sample": {"max_items": 2}}
    smaller = resolve("multiverse", tmp_path / "out", input_path=config.input_path, run_id="other", overrides=overrides)
    RunStore(other_run).save_config(smaller)
    run_all(other_run)
    other = write_release(other_run, tmp_path / "out")
    assert other.name == folder.name == "0.1.0"
    code = (
        "import sys; from datasets import load_dataset; "
        "print(*(len(load_dataset(path)['test']) for path in sys.argv[1:]))"
    )
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(other), str(folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-3:] == ["6", "2", "6"]


def test_checksums_cover_every_file_and_match(released):
    _, _, folder = released
    listed = {}
    for line in (folder / CHECKSUM_FILE).read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != CHECKSUM_FILE}
    assert set(listed) == files and {"README.md", "manifest.json"} <= files
    assert all(hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest for name, digest in listed.items())


def test_manifest_and_card_say_the_offline_backend_produced_the_content(released):
    _, _, folder = released
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["offline_outputs"] is True and manifest["backends"] == ["offline-heuristic"]
    assert manifest["sample_count"] == 6 and manifest["review_modes"] == ["auto"]
    assert {p["prompt_id"] for p in manifest["prompts"]} == {
        "image_quality",
        "image_category",
        "persona",
        "conversation",
        "goal_task",
        "checklist",
    }
    assert next(stage["stage"] for stage in manifest["funnel"]) == "image_ingest"
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n") and "Offline heuristic outputs" in card and "image_ingest" in card


def test_versions_are_never_overwritten_and_the_next_one_is_free(released):
    tmp_path, run_dir, folder = released
    assert folder.name == "0.1.0"
    with pytest.raises(UserError, match="already exists.*never overwritten"):
        write_release(run_dir, tmp_path / "out", "0.1.0")
    other = release(run_dir, tmp_path / "out", overrides={"splits": {"test": 0.5, "validation": 0.5}})
    assert other.new and other.version == "0.1.1"
    with pytest.raises(UserError, match="not semantic"):
        write_release(run_dir, tmp_path / "out", "v2")


def test_the_same_content_again_is_the_version_that_holds_it(released):
    """A rerun of a finished run, or `curate release` of a released run, writes no new version: the rows and
    images are those of 0.1.0 (release diff would say 0 added, 0 removed, 0 changed)."""
    tmp_path, run_dir, folder = released
    versions = sorted(path.name for path in folder.parent.iterdir())
    again = release(run_dir, tmp_path / "out")
    assert not again.new and again.folder == folder
    assert sorted(path.name for path in folder.parent.iterdir()) == versions  # nothing written
    manifest = json.loads((folder / "manifest.json").read_text())
    assert len(manifest["content_sha256"]) == 64
    named = release(run_dir, tmp_path / "out", overrides={"name": "my-bench"})  # a name of its own: a new release
    assert named.new and named.folder == tmp_path / "out" / "releases" / "my-bench" / "0.1.0"
    explicit = release(run_dir, tmp_path / "out", "1.0.0")  # a version asked for by name is written
    assert explicit.new and explicit.version == "1.0.0"
    with pytest.raises(UserError, match="release name '../up' must be lower-case"):
        release(run_dir, tmp_path / "out", overrides={"name": "../up"})


def test_config_name_is_the_release_name_in_every_version_and_mixed_terms_link_a_license_file(released):
    tmp_path, run_dir, first = released
    second = write_release(run_dir, tmp_path / "out", "0.2.0")
    metas = [
        yaml.safe_load(folder.joinpath("README.md").read_text().split("\n---\n")[0][4:]) for folder in (first, second)
    ]
    assert [meta["configs"][0]["config_name"] for meta in metas] == ["multiverse-curated"] * 2
    manifest = json.loads((second / "manifest.json").read_text())
    assert manifest["licenses"] == {"unknown": 6}  # no Hub license id covers it
    assert metas[1]["license"] == "other" and metas[1]["license_link"] == "LICENSE.md"
    terms = (second / "LICENSE.md").read_text()
    assert "| unknown | 6 |" in terms and "LICENSE.md" in manifest["files"]
    assert "license_link" not in license_metadata({"CC-BY-4.0": 3})  # one Hub license: no file needed


def test_incomplete_run_cannot_be_released(tmp_path):
    run_dir = prepared_run(tmp_path, "partial", overrides=SMALL)
    run_stage(run_dir, 0)
    stages = len(load_recipe("multiverse").stages)
    with pytest.raises(UserError, match=f"incomplete \\(1 of {stages} stages done\\)"):
        write_release(run_dir, tmp_path / "out")


def test_changed_source_image_blocks_the_release(tmp_path):
    run_dir = prepared_run(tmp_path, "changed", overrides=SMALL)
    run_all(run_dir)
    make_image(tmp_path / "images" / "0.png", 99)
    with pytest.raises(UserError, match="changed or vanished"):
        write_release(run_dir, tmp_path / "out")
