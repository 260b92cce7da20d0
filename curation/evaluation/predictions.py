"""Answers a harness produced, scored by `curate eval RELEASE --predictions FILE` with the paper's protocol: the
judge judges here (cache, retries, intervals, leaderboard), the model under test is not asked.

- lmms-eval: the `--log_samples` JSONL of a task `curate export lmms-eval` wrote (`<time>_samples_<task>.jsonl`):
  one line per sample, its answers in round order (the record our utils.py logs, else the round outputs). The task
  showed the model the gold history for MultiVerse and AlignMMBench, its own earlier answers for ConvBench and
  ProBench.
- VLMEvalKit: the prediction file of a TSV `curate export vlmevalkit` wrote (`<model>_<dataset>.xlsx`, or `.tsv`
  with PRED_FORMAT=tsv): one row per question with our `sample_id`, `turn`, `variant` columns kept and VLMEvalKit's
  `prediction`. Each row showed the model the gold history.

A harness answer finds its place by the key the protocol asks the model's answer by (`answer_key`), so it is
judged exactly where the protocol would have asked the model; the question it answered (the logged document's,
VLMEvalKit's `raw_question`) must be the release's, so predictions made on another release are refused. A setting the harness did not run (ConvBench's
gold-history settings from lmms-eval, its own-history setting from VLMEvalKit) is left out and counted as
`unanswered`, never as a failure or a zero; a request the harness recorded as failed is a failure.
"""

from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.extras import require
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.core.spreadsheet import inert
from benchcurate.curation.evaluation.exports.lmms_eval_utils import FAILED_REQUEST, answers_of
from benchcurate.curation.evaluation.judging import turn_items
from benchcurate.curation.evaluation.protocol import NOT_IN_PREDICTIONS, EvalFailed, EvalProtocol
from benchcurate.curation.release.reading import Release, rows
from benchcurate.schemas.evaluation import EvalOptions
from benchcurate.schemas.evaluation import Predictions as PredictionsRecord

OWN_HISTORY = {"lmms-eval": {"convbench", "probench"}, "vlmevalkit": set()}  # the rest: the gold history
HISTORY_TEXT = {
    "gold": "the release's earlier turns (its gold history) written out before each question",
    "own": "its own earlier answers before each question",
}
Key = tuple[str, int, int]  # sample id, turn, variant
Found = dict[Key, tuple[str | None, str | None]]  # -> (the answer, None when it failed; the question it answered)


@dataclass(frozen=True)
class Predictions:
    record: PredictionsRecord
    answers: dict[tuple[str, str], str | None]  # (sample id, the protocol's answer key) -> text; None: it failed

    def answer(self, sample_id: str, key: str) -> str:
        if (sample_id, key) not in self.answers:
            raise EvalFailed(NOT_IN_PREDICTIONS, f"the {self.record.harness} predictions have no answer for {key}")
        found = self.answers[(sample_id, key)]
        if found is None:
            raise EvalFailed("model_failed_in_harness", f"{self.record.harness} recorded a failed request for {key}")
        return found


def load_predictions(path: Path, release: Release, options: EvalOptions, protocol: EvalProtocol) -> Predictions:
    harness = harness_of(path)
    history = "own" if release.recipe in OWN_HISTORY[harness] else "gold"
    if release.recipe == "multiverse" and (options.history or "oracle") != "oracle":
        raise UserError(
            f"--history {options.history}: the {harness} predictions were answered with the gold history "
            f"(MultiVerse's Oracle setting); drop --history or run the model with curate eval"
        )
    items = {row["index"]: turn_items(row, release.recipe) for row in rows(release, options.split)}
    found = read_lmms_eval(path, items, release.recipe) if harness == "lmms-eval" else read_vlmevalkit(path)
    answers, other = {}, []
    for sample_id, questions in items.items():
        for item in questions:
            answer, asked = found.get((sample_id, item.turn, item.variant), (None, None))
            if asked is not None and asked not in (item.question, inert(item.question)):
                other.append(f"{sample_id} turn {item.turn}")
            elif (sample_id, item.turn, item.variant) in found:
                answers[(sample_id, protocol.answer_key(item, history))] = answer
    if other:
        raise UserError(
            f"{len(other)} answers in {path} are to other questions than release {release.name} "
            f"{release.version}'s (first: {other[0]}): they were made on another release or version"
        )
    if not answers:
        raise UserError(
            f"none of the {len(found)} answers in {path} belongs to a question of release "
            f"{release.name} {release.version} split '{options.split}': export the harness's task from "
            f"this release (curate export {harness} {release.folder})"
        )
    return Predictions(
        PredictionsRecord(
            harness=harness,
            file=str(path),
            sha256=sha256_file(path),
            history=HISTORY_TEXT[history],
            answers=len(answers),
        ),
        answers,
    )


def harness_of(path: Path) -> str:
    if path.suffix in (".jsonl", ".json"):
        return "lmms-eval"
    if path.suffix in (".xlsx", ".tsv"):
        return "vlmevalkit"
    raise UserError(
        f"--predictions {path}: give lmms-eval's --log_samples JSONL (*_samples_<task>.jsonl) or "
        f"VLMEvalKit's prediction file (<model>_<dataset>.xlsx or .tsv)"
    )


def read_lmms_eval(path: Path, items: dict[str, list], recipe: str) -> Found:
    """(sample id, turn, variant) -> (answer, question) from lmms-eval's logged samples: the sample's id and
    answers from the record our utils.py logs under each metric, else from the document and the round outputs;
    the questions from the logged document (lmms-eval logs its text fields)."""
    found: Found = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except ValueError:
            raise UserError(f"{path}:{number} is not JSON; give lmms-eval's --log_samples JSONL") from None
        record = next((value for value in sample.values() if isinstance(value, dict) and "index" in value), {})
        sample_id = record.get("index") or (sample.get("doc") or {}).get("index")
        answers = record.get("answers")
        if answers is None:
            answers = answers_of(_first_text(sample.get("filtered_resps") or sample.get("resps")))
        doc = sample.get("doc") or {}
        asked = [item.question for item in turn_items(doc, recipe)] if doc.get("conversation") else []
        for k, (item, answer) in enumerate(zip(items.get(sample_id, []), answers)):
            found[(sample_id, item.turn, item.variant)] = (
                None if answer.startswith(FAILED_REQUEST) else answer,
                asked[k] if k < len(asked) else None,
            )
    return found


def _first_text(responses: object) -> list:
    """lmms-eval logs a document's outputs as a list (of lists, per request); the first text in it."""
    while isinstance(responses, list) and responses and isinstance(responses[0], list):
        responses = responses[0]
    return responses if isinstance(responses, list) else [responses]


def read_vlmevalkit(path: Path) -> Found:
    """(sample id, turn, variant) -> (answer, question) from VLMEvalKit's prediction file of our TSV."""
    table = _xlsx_rows(path) if path.suffix == ".xlsx" else _tsv_rows(path)
    header = [str(name) for name in next(table, [])]
    missing = [name for name in ("sample_id", "turn", "variant", "prediction") if name not in header]
    if missing:
        raise UserError(
            f"{path} has no column {', '.join(missing)}: give the prediction file VLMEvalKit wrote for "
            f"a TSV of `curate export vlmevalkit` (its sample_id, turn and variant columns come back)"
        )
    column = {
        name: header.index(name)
        for name in ("sample_id", "turn", "variant", "prediction", "raw_question")
        if name in header
    }
    found: Found = {}
    for values in table:
        cell = {name: values[index] if index < len(values) else None for name, index in column.items()}
        if cell["sample_id"] in (None, ""):
            continue
        answer, asked = cell["prediction"], cell.get("raw_question")
        found[(str(cell["sample_id"]), int(float(cell["turn"])), int(float(cell["variant"])))] = (
            None if answer in (None, "") else str(answer),
            None if asked is None else str(asked),
        )
    return found


def _xlsx_rows(path: Path):
    require("xlsx", "reading VLMEvalKit's prediction workbook")
    from openpyxl import load_workbook

    try:
        book = load_workbook(path, read_only=True)
    except Exception as error:  # openpyxl raises several kinds for a file that is not a workbook
        raise UserError(f"{path} is not a readable .xlsx workbook ({type(error).__name__})") from None
    yield from book.worksheets[0].iter_rows(values_only=True)


def _tsv_rows(path: Path):
    csv.field_size_limit(sys.maxsize)  # a long answer is one cell
    with open(path, encoding="utf-8", newline="") as handle:
        yield from csv.reader(handle, delimiter="\t")
