"""What a paper's protocol is made of, for `curate eval`'s engine and the four protocols alike: the calls one sample
makes (the model under test answers, the judge judges), how a failed call is recorded, what a protocol must offer,
and the names its results are kept under."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from benchcurate.curation.core.errors import ModelOutputInvalid, ModelReplyTooLarge, ModelRequestRejected, UserError
from benchcurate.curation.evaluation.judging import TurnItem
from benchcurate.curation.models.base import ChatTurn, ModelRequest
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.schemas import ImageRef
from benchcurate.schemas.evaluation import EvalOptions, Interval, Judgment

CALL_FAILURES = (ModelOutputInvalid, ModelRequestRejected, ModelReplyTooLarge)
PROMPT_VERSION = 1  # the judge prompts' version every protocol uses; a new wording is v2, pinned here
ANSWER_PROMPT = "eval_answer"
NOT_IN_PREDICTIONS = "not_in_predictions"  # a turn a harness's predictions do not answer: not scored, not a failure


class EvalFailed(Exception):
    """A call of a protocol failed for this turn: recorded on the judgment as `failure`, never a silent zero."""

    def __init__(self, failure: str, detail: str, raw: str | None = None):
        super().__init__(detail)
        self.failure, self.detail, self.raw = failure, detail, raw


def call_failure(error: Exception) -> str:
    return {
        ModelOutputInvalid: "unreadable_reply",
        ModelRequestRejected: "request_rejected",
        ModelReplyTooLarge: "reply_too_large",
    }[type(error)]


@dataclass(frozen=True)
class JudgeReply:
    """What a judge call gave: its raw reply, what the parser read, and the request's text (what the judge was
    shown, kept so a person can be shown the same: `curate eval review`)."""

    raw: str
    parsed: object
    shown: str

    def record(self, **more: object) -> dict:
        return {"raw": self.raw, "read": self.parsed, "shown": self.shown, **more}


@dataclass
class Asker:
    """The calls a protocol makes for one sample: the model under test answers, the judge judges. Each call is
    seeded by the sample id and a key naming the call, so a rerun sends the same request (and hits the cache)."""

    candidate: object
    judge: object
    images: tuple[ImageRef, ...]
    sample_id: str
    baseline: object | None = None
    predictions: object | None = None  # a harness's answers (`predictions.Predictions`) instead of the candidate

    def seed(self, key: str) -> int:
        return int(hashlib.sha256(f"{self.sample_id}\0{key}".encode()).hexdigest()[:8], 16)

    def answer(self, question: str, history: list[ChatTurn], key: str, who: str = "model") -> str:
        """The answer of the model under test (or of the baseline model, `who="baseline"`) to `question` after
        `history`, the image sent with the first user turn; EvalFailed when no usable answer came back."""
        if who == "model" and self.predictions is not None:
            return self.predictions.answer(self.sample_id, key)
        backend = self.baseline if who == "baseline" else self.candidate
        try:
            return backend.complete(
                ModelRequest(
                    prompt=load_prompt(ANSWER_PROMPT, PROMPT_VERSION),
                    variables={"question": question},
                    images=self.images,
                    seed=self.seed(f"{who}\0{key}"),
                    history=tuple(history),
                )
            ).value.text
        except CALL_FAILURES as error:
            raise EvalFailed(f"{who}_{call_failure(error)}", str(error), getattr(error, "raw", None)) from error

    def judge_call(
        self,
        prompt_id: str,
        variables: dict[str, str],
        parse: Callable[[str], object],
        key: str,
        with_image: bool = True,
    ) -> JudgeReply:
        """The judge's reply to one prompt, read by `parse` (a reply it cannot read is asked for once more);
        EvalFailed when the judge failed twice."""
        prompt = load_prompt(prompt_id, PROMPT_VERSION)
        try:
            result = self.judge.complete(
                ModelRequest(
                    prompt=prompt,
                    variables=variables,
                    images=self.images if with_image else (),
                    seed=self.seed(f"{prompt_id}\0{key}"),
                    parse=parse,
                )
            )
            return JudgeReply(result.raw or "", result.parsed, prompt.render(variables).user)
        except CALL_FAILURES as error:
            raise EvalFailed(f"judge_{call_failure(error)}", str(error), getattr(error, "raw", None)) from error


def scored_by_sample(judgments: list[Judgment]) -> tuple[dict[str, list[Judgment]], list[Judgment]]:
    """The judgments that have scores, by sample and all in order (a failure counts in no mean: it is counted
    apart)."""
    found: dict[str, list[Judgment]] = {}
    for judgment in judgments:
        if not judgment.failure:
            found.setdefault(judgment.sample_id, []).append(judgment)
    return found, [judgment for group in found.values() for judgment in group]


def failed(judgment: Judgment, error: EvalFailed) -> Judgment:
    judgment.failure, judgment.detail = error.failure, error.detail
    if error.raw is not None:
        judgment.judge["failed"] = {"raw": error.raw, "read": None}
    return judgment


@dataclass
class Aggregate:
    score: float | None
    sub_scores: dict = field(default_factory=dict)
    interval: Interval | None = None
    warnings: list[str] = field(default_factory=list)


class EvalProtocol(Protocol):
    name: str
    score_name: str
    prompts: tuple[str, ...]  # the judge prompts it uses (the answer prompt is every protocol's)

    def settings(self, options: EvalOptions) -> dict[str, str | None]:
        """{history, grading, baseline} as the results file states them; UserError for options that do not apply."""
        ...

    def setting(self, options: EvalOptions) -> str:
        """The short name of the setting that changes the number (part of the results folder's name)."""
        ...

    def answer_key(self, item: TurnItem, history: str) -> str:
        """The key `judge_sample` asks the model's answer to `item` by, when the model was shown `history`
        ("gold": the release's own earlier turns; "own": its own earlier answers): how a harness's predictions
        find their place."""
        ...

    def judge_sample(self, row: dict, ask: Asker, options: EvalOptions) -> list[Judgment]: ...

    def aggregate(self, judgments: list[Judgment]) -> Aggregate: ...


def refuse_options(options: EvalOptions, protocol: str, allowed: set[str]) -> None:
    """A flag that only another recipe's protocol reads is an error here, not silently ignored."""
    flags = {"history": "--history", "grading": "--grading", "baseline": "--baseline-model"}
    for name, flag in flags.items():
        if name not in allowed and getattr(options, name) is not None:
            raise UserError(
                f"{flag} does not apply to a {protocol} release (it applies to: "
                f"{', '.join(sorted(owner for owner, names in FLAG_OWNERS.items() if name in names))})"
            )


FLAG_OWNERS = {"multiverse": {"history"}, "convbench": {"grading"}, "probench": {"baseline"}, "alignmmbench": set()}


def folder_name(model: str) -> str:
    """A model name as one path component (`org/model:tag` -> `org_model_tag`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or "model"
