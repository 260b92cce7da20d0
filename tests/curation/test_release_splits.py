"""Releases with several splits and several parquet shards, and the card's `dataset_info` that `datasets` reads."""

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
import yaml
from datasets.info import DatasetInfosDict

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.release.columns import features
from benchcurate.curation.release.verify import diff, verify
from benchcurate.curation.release.writer import CHECKSUM_FILE, assign_split, write_release
from tests.helpers import SMALL, curate_in_process, prepared_run, resolve

OFFLINE = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
HALVES = {"test": 0.5, "dev": 0.5}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("splits")
    run_dir = prepared_run(tmp_path, "splits", overrides=SMALL)
    run_all(run_dir)
    return tmp_path, run_dir


def card_metadata(folder):
    text = (folder / "README.md").read_text()
    return yaml.safe_load(text[4 : text.index("\n---\n", 4)])


def load_offline(folder) -> dict[str, list[str]]:
    """Every split's sample ids, as `datasets` loads the folder in a fresh offline process."""
    code = (
        "import sys, json; from datasets import load_dataset; d = load_dataset(sys.argv[1]); "
        "print(json.dumps({name: list(d[name]['index']) for name in d}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, env=OFFLINE, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_two_splits_in_many_shards_load_offline_and_verify(finished):
    tmp_path, run_dir = finished
    folder = write_release(
        run_dir, tmp_path / "out", "1.0.0", overrides={"splits": HALVES, "max_shard_mb": 0.001}
    )  # ~1 KB: one row per shard
    manifest = json.loads((folder / "manifest.json").read_text())
    loaded = load_offline(folder)
    assert {name: len(ids) for name, ids in loaded.items()} == manifest["splits"]
    assert set(manifest["splits"]) == {"test", "dev"} and sum(manifest["splits"].values()) == 6
    assert not set(loaded["test"]) & set(loaded["dev"])
    for name, count in manifest["splits"].items():
        shards = sorted(path.name for path in (folder / "data").glob(f"{name}-*.parquet"))
        assert shards == [f"{name}-{number:05d}-of-{count:05d}.parquet" for number in range(count)]
    assert verify(folder) == []
    meta = card_metadata(folder)
    assert [entry["split"] for entry in meta["configs"][0]["data_files"]] == ["test", "dev"]
    info = next(iter(DatasetInfosDict.from_dataset_card_data(meta).values()))
    assert info.features == features("multiverse")
    assert {name: split.num_examples for name, split in info.splits.items()} == manifest["splits"]
    assert info.download_size == sum(path.stat().st_size for path in (folder / "data").glob("*.parquet"))


def test_default_shard_size_writes_one_file_per_split(finished):
    tmp_path, run_dir = finished
    folder = write_release(run_dir, tmp_path / "out", "1.1.0")
    assert sorted(path.name for path in (folder / "data").iterdir()) == ["test-00000-of-00001.parquet"]
    assert json.loads((folder / "manifest.json").read_text())["splits"] == {"test": 6}


def test_rows_stream_out_in_row_groups_that_load_as_one_split(finished, monkeypatch):
    import pyarrow.parquet as pq

    from benchcurate.curation.release import writer

    tmp_path, run_dir = finished
    monkeypatch.setattr(writer, "ROW_GROUP_BYTES", 1)  # every row its own group
    folder = write_release(run_dir, tmp_path / "out", "1.2.0")
    (shard,) = (folder / "data").glob("*.parquet")
    assert pq.ParquetFile(shard).metadata.num_row_groups == 6
    assert {name: len(ids) for name, ids in load_offline(folder).items()} == {"test": 6}
    assert verify(folder) == []


def test_a_card_whose_split_sizes_lie_fails_verify_and_loading(finished):
    tmp_path, run_dir = finished
    folder = write_release(run_dir, tmp_path / "out", "2.0.0", overrides={"splits": HALVES})
    card = folder / "README.md"
    meta = card_metadata(folder)
    first = meta["dataset_info"]["splits"][0]
    card.write_text(
        card.read_text().replace(
            f"num_examples: {first['num_examples']}\n", f"num_examples: {first['num_examples'] + 5}\n", 1
        )
    )
    # re-sign the edited card, as someone who edits it by hand and regenerates the checksums would
    sums = folder / CHECKSUM_FILE
    sums.write_text(
        "".join(
            f"{sha256_file(card)}  README.md\n" if line.endswith("  README.md") else line + "\n"
            for line in sums.read_text().splitlines()
        )
    )
    problems = verify(folder)
    assert any("dataset_info splits" in problem and first["name"] in problem for problem in problems), problems
    code = "import sys; from datasets import load_dataset; load_dataset(sys.argv[1])"
    result = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, env=OFFLINE, timeout=120
    )
    assert result.returncode != 0 and "split" in result.stderr.lower()


def test_a_sample_keeps_its_split_when_other_samples_come_and_go(finished, tmp_path):
    _, run_dir = finished
    first = write_release(run_dir, tmp_path / "out", "1.0.0", overrides={"splits": HALVES})
    subset = prepared_run(tmp_path, "subset", overrides=SMALL)
    config = RunStore(subset).load_config()
    RunStore(subset).save_config(
        resolve(
            "multiverse",
            tmp_path / "out",
            run_id="subset",
            input_path=config.input_path,
            overrides={**SMALL, "category_weighted_sample": {"max_items": 3}},
        )
    )
    run_all(subset)
    second = write_release(subset, tmp_path / "out", "1.1.0", overrides={"splits": HALVES})
    before, after = load_offline(first), load_offline(second)
    split_before = {sample_id: name for name, ids in before.items() for sample_id in ids}
    split_after = {sample_id: name for name, ids in after.items() for sample_id in ids}
    assert len(split_after) == 3 and set(split_after) < set(split_before)
    assert all(split_before[sample_id] == name for sample_id, name in split_after.items())
    result = diff(first, second)
    assert len(result.removed) == 3 and not any("split" in fields for fields in result.changed.values())


def test_split_fractions_hold_on_many_ids():
    splits = {"test": 0.8, "validation": 0.1, "dev": 0.1}
    counts = Counter(assign_split("bench", f"sample-{number}", splits) for number in range(20_000))
    for name, fraction in splits.items():
        assert abs(counts[name] / 20_000 - fraction) < 0.015, counts
    other_release = Counter(assign_split("other-bench", f"sample-{number}", splits) for number in range(20_000))
    assert other_release != counts  # the release name is part of the hash: benchmarks do not share one cut


def test_bad_split_settings_are_errors_that_say_what_is_wrong(finished):
    tmp_path, run_dir = finished
    with pytest.raises(UserError, match="tiny.*none of the 6"):
        write_release(run_dir, tmp_path / "out", overrides={"splits": {"test": 0.999999, "tiny": 0.000001}})
    with pytest.raises(UserError, match="add up to 1"):
        write_release(run_dir, tmp_path / "out", overrides={"splits": {"test": 0.5, "dev": 0.2}})
    with pytest.raises(UserError, match="lower-case"):
        write_release(run_dir, tmp_path / "out", overrides={"splits": {"Test-1": 1.0}})


def test_the_command_line_takes_splits_and_rejects_a_malformed_one(finished):
    tmp_path, run_dir = finished
    bad = curate_in_process(["release", str(run_dir), "--split", "test", "--out", str(tmp_path / "out")], tmp_path)
    assert bad.returncode == 2 and "NAME=FRACTION" in bad.stderr
    good = curate_in_process(
        [
            "release",
            str(run_dir),
            "--version",
            "3.0.0",
            "--split",
            "test=0.5",
            "--split",
            "dev=0.5",
            "--out",
            str(tmp_path / "out"),
        ],
        tmp_path,
    )
    assert good.returncode == 0, good.stderr
    folder = tmp_path / "out" / "releases" / "multiverse-curated" / "3.0.0"
    assert good.stdout.strip() == str(folder)
    assert set(json.loads((folder / "manifest.json").read_text())["splits"]) == {"test", "dev"}
