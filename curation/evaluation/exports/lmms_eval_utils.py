"""The utils.py of an lmms-eval task exported by `curate export lmms-eval`: a benchcurate release scored the way its
paper scored models, with the paper's judge reached over the OpenAI chat-completions protocol.

This file is copied as it is into the task folder, beside `benchcurate_judging.py` (the same reading of judge
replies and the same arithmetic as `curate eval`) and `task.json` (the recipe, the judge prompts, the release).
It needs only the standard library and what lmms-eval already has (Pillow).

A document is one sample; `--limit N` counts samples. lmms-eval's OpenAI-compatible model has no multi-round chat,
so each sample runs as `generate_until_agentic` rounds, one per question, each a single user message holding the
image and the earlier turns written out:
- multiverse: the gold conversation before each turn (MultiVerse's Oracle setting);
- convbench: the model's own earlier answers (ConvBench's setting (i): S1, S2, S3, S0, R2, R1);
- probench: the model's own earlier answers, then the judge compares with the release's baseline answers, twice;
- alignmmbench: the sample's given dialogue history before the seed question and before each kept rewrite.

The judge: BENCHCURATE_JUDGE_BASE_URL, BENCHCURATE_JUDGE_MODEL, BENCHCURATE_JUDGE_API_KEY (else OPENAI_API_KEY;
local servers take any), BENCHCURATE_JUDGE_TIMEOUT (seconds, default 120). A reply it cannot read is asked for
once more, then counted under `failures`, never as a zero; `failure_reasons` says why (a judge left unconfigured
is also said once on stderr). Each logged sample keeps the model's answers, so `curate eval RELEASE --predictions
<samples.jsonl>` can score the same answers with the whole protocol.
"""

from __future__ import annotations

import base64
import io
import json
import os
import string
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
if (HERE / "benchcurate_judging.py").exists() and str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # lmms-eval loads this file by path; its sibling module is beside it
try:
    import benchcurate_judging as judging  # the exported task
except ImportError:  # inside the benchcurate package (its tests read this file there)
    from benchcurate.curation.evaluation import judging

TASK = json.loads((HERE / "task.json").read_text(encoding="utf-8")) if (HERE / "task.json").exists() else {}
FAILED_REQUEST = "[LMMS_EVAL_REQUEST_FAILED"  # how lmms-eval's model answers when its requests failed
OWN_HISTORY = {"convbench", "probench"}


class JudgeFailed(Exception):
    """'<kind>: <why>'; the kind is what `failure_reasons` counts."""


_SAID: set[str] = set()


def _say_once(message: str) -> None:
    """A problem every sample will hit, on stderr once (lmms-eval shows only the metrics)."""
    if message not in _SAID:
        _SAID.add(message)
        print(f"benchcurate task: {message}", file=sys.stderr, flush=True)


# --- the model's rounds ---------------------------------------------------------------------------------------------


def _items(doc: dict) -> list:
    return judging.turn_items(doc, TASK["recipe"])


def _prompt(doc: dict, k: int, answers: list[str]) -> str:
    items = _items(doc)
    item = items[k]
    if TASK["recipe"] in OWN_HISTORY:
        history = [
            pair
            for earlier, answer in zip(items[:k], answers)
            for pair in (("user", earlier.question), ("assistant", answer))
        ]
    else:
        history = list(item.history)
    return judging.flattened_question(history, item.question)


def doc_to_visual(doc: dict) -> list:
    return [doc["image"].convert("RGB")]


def doc_to_text(
    doc: dict, lmms_eval_specific_kwargs=None, previous_output=None, round_idx=None, previous_round_info=None
):
    """The first question (round_idx None), then each next one; after the last, every answer as one JSON list."""
    if round_idx is None:
        return _prompt(doc, 0, [])
    answers = list(previous_output or [])
    if round_idx >= len(_items(doc)):
        return None, None, True, [json.dumps(answers, ensure_ascii=False)], None
    return None, _prompt(doc, round_idx, answers), False, answers, None


def doc_to_target(doc: dict) -> str:
    return "\n\n".join(item.reference or "" for item in _items(doc))


# --- the judge ------------------------------------------------------------------------------------------------------


def _image_url(doc: dict) -> str:
    buffer = io.BytesIO()
    image = doc["image"].convert("RGB")
    image.thumbnail((1024, 1024))
    image.save(buffer, format="JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def _post(messages: list[dict]) -> str:
    base = os.environ.get("BENCHCURATE_JUDGE_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    model = os.environ.get("BENCHCURATE_JUDGE_MODEL")
    if not model:
        problem = (
            "judge_not_configured: set BENCHCURATE_JUDGE_MODEL (and BENCHCURATE_JUDGE_BASE_URL) to the judge; "
            "no sample was judged"
        )
        _say_once(problem)
        raise JudgeFailed(problem)
    key = os.environ.get("BENCHCURATE_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY") or "not-needed"
    body = json.dumps({"model": model, "messages": messages, "temperature": 0, "max_tokens": 2048}).encode()
    request = urllib.request.Request(
        f"{base}/chat/completions",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    error = None
    for attempt in range(4):
        try:
            with urllib.request.urlopen(
                request, timeout=float(os.environ.get("BENCHCURATE_JUDGE_TIMEOUT", "120"))
            ) as response:
                return json.loads(response.read())["choices"][0]["message"]["content"] or ""
        except (urllib.error.URLError, OSError, KeyError, ValueError) as problem:
            error = problem
            time.sleep(2**attempt)
    raise JudgeFailed(f"judge_unreachable: {type(error).__name__}")


def judge(prompt_id: str, variables: dict, parse, doc: dict | None = None):
    """(what `parse` read, the raw reply) from the judge; asked once more when the reply cannot be read."""
    prompt = TASK["prompts"][prompt_id]
    user = string.Template(prompt["user"]).substitute(variables)
    content = [{"type": "text", "text": user}]
    if doc is not None:
        content.append({"type": "image_url", "image_url": {"url": _image_url(doc)}})
    system = string.Template(prompt["system"]).substitute(variables).strip()
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
    raw = _post(messages)
    try:
        return parse(raw), raw
    except ValueError as error:
        retry = messages + [
            {"role": "assistant", "content": raw},
            {
                "role": "user",
                "content": (f"That reply could not be read: {error}. Reply again, in exactly the format asked for."),
            },
        ]
        raw = _post(retry)
        try:
            return parse(raw), raw
        except ValueError as again:
            raise JudgeFailed(f"judge_unreadable_reply: {again}") from again


def answers_of(results: list) -> list[str]:
    """The model's answers from the task's last round output (one JSON list of every round's answer)."""
    text = results[0] if results else ""
    try:
        found = json.loads(text)
    except (TypeError, ValueError):
        found = [text]
    return [str(answer) for answer in found] if isinstance(found, list) else [str(found)]


# --- per recipe -----------------------------------------------------------------------------------------------------


def _multiverse(doc: dict, answers: list[str]) -> dict:
    turns, failures = [], []
    for item, answer in zip(_items(doc), answers):
        checklist = [entry["question"] for entry in item.extra.get("checklist") or []]
        if answer.startswith(FAILED_REQUEST) or not checklist or not item.reference:
            failures.append("model_request_failed" if answer.startswith(FAILED_REQUEST) else "incomplete_sample")
            continue
        variables = {
            "history": judging.mv_history(item.history),
            "question": item.question,
            "reference": item.reference,
            "answer": answer,
            "checklist": judging.mv_checklist(checklist),
        }
        try:
            quality, _ = judge("judge_mv_quality", variables, judging.read_quality, doc)
            count = len(checklist)
            ticks, _ = judge(
                "judge_mv_checklist", variables, lambda text, count=count: judging.read_checklist(text, count), doc
            )
        except JudgeFailed as error:
            failures.append(str(error))
            continue
        turns.append({"turn": item.turn, **judging.mv_turn_scores(ticks, quality)})
    return {"index": doc["index"], "answers": answers, "turns": turns, "failures": failures}


def _convbench(doc: dict, answers: list[str]) -> dict:
    items = _items(doc)
    questions, references = [item.question for item in items], [item.reference or "" for item in items]
    if (
        len(items) != 3
        or not all(references)
        or not doc.get("caption")
        or len(answers) != 3
        or any(answer.startswith(FAILED_REQUEST) for answer in answers)
    ):
        return {
            "index": doc["index"],
            "answers": answers,
            "scores": [],
            "failures": ["incomplete_sample_or_failed_request"],
        }
    first = judging.cb_model_is_a(doc["index"], "own")
    mine, gold = judging.cb_transcript(questions, answers), judging.cb_transcript(questions, references)
    scores, evaluations, failures = [], [], []
    for turn in (1, 2, 3, 0):
        if turn == 0 and len(evaluations) < 3:
            failures.append("judge_missing_turn_evaluation")
            break
        variables = {
            "caption": doc["caption"],
            "conversation_a": mine if first else gold,
            "conversation_b": gold if first else mine,
            "focus": judging.cb_focus(list(items[2].extra.get("focus_points") or []), turn),
            "evaluations": judging.cb_evaluations(evaluations, 0) if turn == 0 else "",
            "target": judging.cb_target(turn),
        }
        try:
            verdict, raw = judge("judge_cb_pairwise", variables, judging.read_cb_verdict)
        except JudgeFailed as error:
            failures.append(str(error))
            continue
        evaluations.append((turn, raw))
        scores.append([judging.CB_SCORE_NAMES[("own", turn)], 100.0 if verdict == ("A" if first else "B") else 0.0])
    return {"index": doc["index"], "answers": answers, "scores": scores, "failures": failures}


def _probench(doc: dict, answers: list[str]) -> dict:
    items = _items(doc)
    baseline = [item.reference or "" for item in items]
    if not items or not all(baseline) or any(answer.startswith(FAILED_REQUEST) for answer in answers):
        return {
            "index": doc["index"],
            "answers": answers,
            "margins": [],
            "failures": ["incomplete_sample_or_failed_request"],
        }
    questions = [item.question for item in items]
    rule = judging.PB_LANGUAGE_RULE if doc.get("track") == "multi-linguistic" else ""
    margins, failures = [], []
    for order in judging.PB_ORDERS:
        first, second = (answers, baseline) if order == "model_first" else (baseline, answers)
        try:
            verdict, _ = judge(
                "judge_pb_pairwise",
                {"exchange": judging.pb_exchange(questions, first, second), "language_rule": rule},
                judging.read_pb_verdict,
                doc,
            )
        except JudgeFailed as error:
            failures.append(str(error))
            continue
        margins.append(judging.pb_margin(verdict, order))
    return {"index": doc["index"], "answers": answers, "margins": margins, "failures": failures}


def _alignmmbench(doc: dict, answers: list[str]) -> dict:
    items = _items(doc)
    ratings, failures = [], []
    task = items[0].extra.get("task") if items else None
    for item, answer in zip(items, answers):
        if answer.startswith(FAILED_REQUEST) or not item.reference:
            failures.append("incomplete_sample_or_failed_request")
            continue
        variables = {
            "history": judging.amb_history(item.history),
            "question": item.question,
            "task": task or "unlabelled",
            "reference": item.reference,
            "answer": answer,
            "rules": judging.amb_rule(TASK["prompts"]["judge_amb_rating"]["parts"], task),
        }
        try:
            rating, _ = judge("judge_amb_rating", variables, judging.read_amb_rating)
        except JudgeFailed as error:
            failures.append(str(error))
            continue
        ratings.append(float(rating))
    return {
        "index": doc["index"],
        "answers": answers,
        "ratings": ratings,
        "task": task or "unlabelled",
        "failures": failures,
    }


JUDGES = {"multiverse": _multiverse, "convbench": _convbench, "probench": _probench, "alignmmbench": _alignmmbench}
METRICS = {
    "multiverse": ("score", "checklist_completion", "quality", "per_turn"),
    "convbench": ("R1", "R2", "S1", "S2", "S3", "S0"),
    "probench": ("bradley_terry", "win_rate", "elo_online"),
    "alignmmbench": ("rating", "per_question_mean", "per_task", "rewrite_spread_ours"),
}
FAILURE_METRICS = ("failures", "failure_reasons")


def process_results(doc: dict, results: list) -> dict:
    """Judge the sample's answers; every metric of the task gets the same record, which its aggregation reads."""
    record = JUDGES[TASK["recipe"]](doc, answers_of(results))
    return dict.fromkeys((*METRICS[TASK["recipe"]], *FAILURE_METRICS), record)


# --- aggregations: the paper's numbers over all samples -------------------------------------------------------------


def _turns(records: list[dict]) -> list[dict]:
    return [turn for record in records for turn in record["turns"]]


def mv_score(records: list[dict]) -> float | None:
    return judging.rounded(judging.mean(turn["score"] for turn in _turns(records)))


def mv_checklist_completion(records: list[dict]) -> float | None:
    return judging.rounded(judging.mean(turn["checklist_completion"] for turn in _turns(records)))


def mv_quality(records: list[dict]) -> float | None:
    return judging.rounded(judging.mean(turn["quality"] for turn in _turns(records)))


def mv_per_turn(records: list[dict]) -> dict:
    numbers = sorted({turn["turn"] for turn in _turns(records)})
    return {
        str(n): judging.rounded(judging.mean(t["score"] for t in _turns(records) if t["turn"] == n)) for n in numbers
    }


def _cb(name: str):
    """The aggregation of one of ConvBench's scores (S1 ... R1) over all samples."""

    def aggregate(records: list[dict]) -> float | None:
        return judging.cb_scores(
            (score_name, value) for record in records for score_name, value in record["scores"]
        ).get(name)

    aggregate.__name__ = f"cb_{name.lower()}"
    return aggregate


cb_r1, cb_r2, cb_s1, cb_s2, cb_s3, cb_s0 = (_cb(name) for name in ("R1", "R2", "S1", "S2", "S3", "S0"))


def _tallies(records: list[dict]) -> list:
    return [judging.pb_tally(record["margins"]) for record in records if record["margins"]]


def pb_bradley_terry(records: list[dict]) -> float | None:
    return judging.rounded(judging.pb_bradley_terry(_tallies(records)), 2)


def pb_win_rate(records: list[dict]) -> float | None:
    return judging.pb_win_rate(_tallies(records))


def pb_elo_online(records: list[dict]) -> float | None:
    return judging.rounded(judging.pb_online_elo([tuple(record["margins"]) for record in records]), 2)


def amb_rating(records: list[dict]) -> float | None:
    """Table 3's Avg: the mean of the task means."""
    return judging.rounded(judging.mean(value for value in amb_per_task(records).values() if value is not None))


def amb_per_question_mean(records: list[dict]) -> float | None:
    return judging.rounded(judging.mean(rating for record in records for rating in record["ratings"]))


def amb_per_task(records: list[dict]) -> dict:
    tasks = sorted({record["task"] for record in records})
    return {
        task: judging.rounded(
            judging.mean(r for record in records if record["task"] == task for r in record["ratings"])
        )
        for task in tasks
    }


def amb_rewrite_spread_ours(records: list[dict]) -> float | None:
    """Ours, not the paper's: the mean range of a seed question's ratings over its rewrites (lower is steadier)."""
    return judging.rounded(
        judging.mean(judging.amb_spread(record["ratings"])["range"] for record in records if len(record["ratings"]) > 1)
    )


def failures(records: list[dict]) -> int:
    return sum(len(record["failures"]) for record in records)


def failure_reasons(records: list[dict]) -> dict:
    """Why judged turns have no score: per kind, how many and one message."""
    found: dict[str, dict] = {}
    for record in records:
        for failure in record["failures"]:
            kind = failure.split(":", 1)[0]
            found.setdefault(kind, {"count": 0, "example": failure})["count"] += 1
    return found
