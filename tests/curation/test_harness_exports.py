"""Exports of a release to evaluation harnesses, read back the way each harness reads them."""

from __future__ import annotations

import base64
import hashlib
import json

import pandas as pd
import pytest

from benchcurate.curation.evaluation.exports.vlmevalkit import dataset_name, export_vlmevalkit
from benchcurate.curation.evaluation.release import open_release, rows
from benchcurate.curation.release.writer import write_release
from tests.helpers import SMALL, curate_in_process, finished_run


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    made = {}
    for recipe, overrides in (("multiverse", SMALL), ("alignmmbench", {})):
        tmp_path = tmp_path_factory.mktemp(recipe)
        made[recipe] = write_release(finished_run(tmp_path, recipe, recipe, images=6, overrides=overrides),
                                     tmp_path / "out")
    return made


def vlmevalkit_images(table: pd.DataFrame) -> dict[int, bytes]:
    """The image of each row as VLMEvalKit resolves it: base64, or (64 characters or fewer) another row's index."""
    cells = dict(zip(table["index"].astype(str), table["image"].astype(str)))
    return {int(index): base64.b64decode(cells[value] if len(value) <= 64 else value)
            for index, value in cells.items()}


def test_vlmevalkit_tsv_has_a_row_per_turn_with_the_gold_history_and_each_image_once(releases, tmp_path):
    release = releases["multiverse"]
    path = export_vlmevalkit(release, tmp_path)
    assert path.name == f"{dataset_name('multiverse-curated', '0.1.0')}.tsv" == "multiverse_curated_v0_1_0.tsv"
    table = pd.read_csv(path, sep="\t", keep_default_na=False)
    data = list(rows(open_release(release), "test"))
    user_turns = [(row, k, turn) for row in data for k, turn in enumerate(row["conversation"])
                  if turn["speaker"] == "user"]
    assert len(table) == len(user_turns) and list(table["index"]) == list(range(len(table)))
    assert {"index", "image", "question", "answer", "category"} <= set(table.columns)
    images = vlmevalkit_images(table)
    full = table["image"].astype(str).str.len() > 64
    assert full.sum() == len({row["image_sha256"] for row in data})  # each image stored once
    for (row, k, turn), (_, line) in zip(user_turns, table.iterrows()):
        assert hashlib.sha256(images[line["index"]]).hexdigest() == row["image_sha256"]
        assert line["raw_question"] == turn["utterance"] and line["sample_id"] == row["index"]
        assert line["answer"] == row["conversation"][k + 1]["utterance"]  # the reference: the assistant turn
        assert json.loads(line["checklist"]) == turn["checklist"]
        earlier = json.loads(line["history"])
        assert [entry["text"] for entry in earlier] == [t["utterance"] for t in row["conversation"][:k]]
        assert line["question"].endswith(turn["utterance"]) and all(e["text"] in line["question"] for e in earlier)


def test_vlmevalkit_tsv_gives_alignmmbench_rewrites_rows_of_their_own(releases, tmp_path):
    release = releases["alignmmbench"]
    table = pd.read_csv(export_vlmevalkit(release, tmp_path), sep="\t", keep_default_na=False)
    data = list(rows(open_release(release), "test"))
    expected = sum(1 + sum(1 for r in row["rewrites"] if r["status"] != "rejected") for row in data)
    assert len(table) == expected and expected > len(data)
    for row in data:
        mine = table[table["sample_id"] == row["index"]]
        question = row["conversation"][0]
        assert list(mine["variant"]) == list(range(len(mine)))
        assert set(mine["answer"]) == {question["reference"]} and mine.iloc[0]["raw_question"] == question["utterance"]


def test_the_export_command_writes_harness_formats_from_a_release(releases, tmp_path):
    done = curate_in_process(["export", "vlmevalkit", str(releases["multiverse"]), "--to", str(tmp_path / "v")])
    assert done.returncode == 0 and "--data multiverse_curated_v0_1_0" in done.stdout, done.stderr
    run_not_release = curate_in_process(["export", "vlmevalkit", str(tmp_path), "--to", str(tmp_path / "w")])
    assert run_not_release.returncode == 2 and "is not a release folder" in run_not_release.stderr
