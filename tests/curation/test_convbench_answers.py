"""`curate export convbench RESULTS`: a ConvBench eval's answers where ConvBench's own scripts read them, checked
by reading the export the way those scripts do (row numbers, not IDs; answers per setting; pairwise.npy)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from openpyxl import load_workbook

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.evaluation.engine import evaluate, read_judgments
from benchcurate.curation.evaluation.exports.convbench import export_convbench_answers
from benchcurate.curation.evaluation.judging import cb_model_is_a
from benchcurate.curation.release.reading import open_release, rows
from benchcurate.schemas.evaluation import EvalOptions
from tests.fakes.judges import marker_world
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import curate_in_process, edited_release, eval_releases
from tests.servers import starts_server

FORMULA = "=cmd|' /C calc'!A0"


@pytest.fixture(scope="module")
@starts_server
def scored(tmp_path_factory):
    """A ConvBench release whose first question and reference start as a formula, and a curate eval of it."""
    tmp_path = tmp_path_factory.mktemp("cbanswers")

    def edit(found: list[dict]) -> list[dict]:
        first = next(turn for turn in found[0]["conversation"] if turn["speaker"] == "user")
        first["utterance"], first["reference"] = FORMULA + " " + first["utterance"], FORMULA
        return found

    release = edited_release(eval_releases()["convbench"], tmp_path / "release", edit)
    with FakeOpenAIServer(
        responder=marker_world({"candidate-vlm": 0.5}), models=("candidate-vlm", "judge-vlm")
    ) as server:
        folder = evaluate(
            EvalOptions(
                release=str(release),
                candidate={"model": "candidate-vlm", "base_url": server.base_url},
                judge={"model": "judge-vlm", "base_url": server.base_url},
                out=str(tmp_path / "evals"),
            )
        )
    return release, folder


def script_reads(part, model: str, subfolder: str, row_number: int) -> dict | None:
    """What convbencheval*.py read for sheet row `row_number` (1-based): ../VLMEvalKit/work_dirs/<model>/<k>/<i>.yaml."""
    path = part / "VLMEvalKit" / "work_dirs" / model / subfolder / f"{row_number}.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else None


def test_each_row_number_holds_that_rows_answers_in_every_setting(scored, tmp_path):
    release, folder = scored
    parts = export_convbench_answers(folder, tmp_path / "cb", rows_per_part=3)
    data = list(rows(open_release(release), "test"))
    assert len(parts) == -(-len(data) // 3) and len(data) > 3
    answers = {}
    for judgment in read_judgments(folder):
        if judgment.turn and judgment.answer:
            answers[(judgment.sample_id, judgment.setting, judgment.turn)] = judgment.answer
    mapping = pd.read_csv(tmp_path / "cb" / "rows.tsv", sep="\t", dtype=str)
    checked = 0
    for part_number, part in enumerate(parts, 1):
        sheet = pd.read_excel(part / "ConvBench.xlsx")  # as the scripts read it
        chunk = data[3 * (part_number - 1) : 3 * part_number]
        assert len(sheet) == len(chunk)
        positions = np.load(part / "ConvBenchEval" / "pairwise.npy")
        assert len(positions) >= 578  # the scripts' summary reads positions up to row 578
        for i, row in enumerate(chunk):  # the scripts: row i of the sheet, files named i + 1
            users = [turn["utterance"] for turn in row["conversation"] if turn["speaker"] == "user"]
            assert sheet["The_first_turn_instruction"][i] == users[0]  # the sheet's row is this sample
            assert positions[i] == (0 if cb_model_is_a(row["index"], "own") else 1)
            own = script_reads(part, "candidate-vlm", "0", i + 1)
            assert own == {
                f"{o}_turn_answer": answers[(row["index"], "own", t)]
                for t, o in enumerate(("first", "second", "third"), 1)
            }
            assert script_reads(part, "candidate-vlm", "1", i + 1) == {
                "second_turn_answer": answers[(row["index"], "perception", 2)],
                "third_turn_answer": answers[(row["index"], "perception", 3)],
            }
            assert script_reads(part, "candidate-vlm", "2", i + 1) == {
                "third_turn_answer": answers[(row["index"], "perception_reasoning", 3)]
            }
            line = mapping[(mapping["part"] == str(part_number)) & (mapping["row"] == str(i + 1))]
            assert list(line["sample_id"]) == [row["index"]]
            checked += 1
    assert checked == len(data)
    readme = (tmp_path / "cb" / "README.md").read_text()
    assert "api.openai-sb.com" in readme and "577" in readme and "row" in readme


def test_the_sheet_stores_formula_text_as_text(scored, tmp_path):
    _, folder = scored
    (part,) = export_convbench_answers(folder, tmp_path / "cb")
    sheet = load_workbook(part / "ConvBench.xlsx").active
    cells = [cell for row in sheet.iter_rows() for cell in row]
    assert not [cell.coordinate for cell in cells if cell.data_type == "f"]
    risky = [cell for cell in cells if isinstance(cell.value, str) and cell.value.startswith("=")]
    assert risky and all(cell.data_type == "s" and cell.quotePrefix for cell in risky)
    assert pd.read_excel(part / "ConvBench.xlsx")["first_turn_answer"][0] == FORMULA  # read back as written


def test_the_export_command_takes_a_results_folder_and_keeps_other_files(scored, tmp_path):
    _, folder = scored
    done = curate_in_process(["export", "convbench", str(folder), "--to", str(tmp_path / "cb")])
    assert done.returncode == 0 and "hard-code an API key and URL" in done.stdout, done.stderr
    again = curate_in_process(["export", "convbench", str(folder), "--to", str(tmp_path / "cb")])
    assert again.returncode == 0, again.stderr
    (tmp_path / "cb" / "mine.txt").write_text("keep")
    refused = curate_in_process(["export", "convbench", str(folder), "--to", str(tmp_path / "cb")])
    assert refused.returncode == 2 and "refusing to delete" in refused.stderr
    assert (tmp_path / "cb" / "mine.txt").exists()


@pytest.mark.slow
def test_only_a_convbench_eval_is_taken(tmp_path):
    with FakeOpenAIServer(
        responder=marker_world({"candidate-vlm": 0.5}), models=("candidate-vlm", "judge-vlm")
    ) as server:
        folder = evaluate(
            EvalOptions(
                release=str(eval_releases()["multiverse"]),
                candidate={"model": "candidate-vlm", "base_url": server.base_url},
                judge={"model": "judge-vlm", "base_url": server.base_url},
                out=str(tmp_path / "evals"),
                limit=1,
            )
        )
    with pytest.raises(UserError, match="holds a multiverse eval"):
        export_convbench_answers(folder, tmp_path / "cb")
    with pytest.raises(UserError, match="holds no results.json"):
        export_convbench_answers(tmp_path / "nothing", tmp_path / "cb")
