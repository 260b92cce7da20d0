"""The typed record of a review pull (`<run>/review/record.json`): what each person answered, how every judgement
and every edited text was settled, and the agreement figures. The `conversation_review` stage, the HTML report,
`curate review status` and the release read it; `curation/review/policy.py` writes it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from benchcurate.schemas.sample import Strict

RECORD_SCHEMA_VERSION = 1


class ReviewerAnswers(Strict):
    """One person's valid annotation of one sample, as they submitted it."""

    reviewer: str = Field(description="label-studio-user-<id>")
    annotation_id: int
    choices: dict[str, str] = Field(default_factory=dict, description="judgement key -> answer")
    texts: dict[str, str] = Field(
        default_factory=dict,
        description="text field -> text as typed (outer blank space removed); absent or empty: left alone",
    )
    notes: str | None = None


class Adjudication(Strict):
    """An adjudicator's answer to one open question of a sample (a tie, or two different edits of a text)."""

    key: str
    adjudicator: str
    annotation_id: int
    answer: str = Field(description="the chosen answer, or the final text of a text field")


class QuestionOutcome(Strict):
    answers: dict[str, str] = Field(description="reviewer -> answer (the default for an unanswered checklist item)")
    majority: str | None = Field(description="None on a tie")
    decided: str | None = Field(description="the majority, or the adjudicator's answer to a tie; None while open")
    by: Literal["majority", "adjudication", "open"]


class TextOutcome(Strict):
    draft: str
    versions: dict[str, str] = Field(description="reviewer -> their text, for those whose text differs from the draft")
    value: str | None = Field(description="what the release gets; None while two different edits wait")
    by: Literal["edit", "adjudication", "open"]


class SampleOutcome(Strict):
    status: Literal["accepted", "rejected", "pending"]
    reasons: list[str] = Field(default_factory=list, description="reason codes of a rejection")
    waiting_for: str | None = Field(None, description="why the sample is pending, in words")
    phase: Literal[1, 2] = Field(1, description="2 when an adjudicator settled something")
    reviewers: list[str] = Field(default_factory=list, description="whose answers decided, adjudicators last")
    answers: list[ReviewerAnswers] = Field(default_factory=list)
    questions: dict[str, QuestionOutcome] = Field(default_factory=dict)
    texts: dict[str, TextOutcome] = Field(default_factory=dict, description="only fields someone edited")
    additions: dict[str, list[str]] = Field(default_factory=dict, description="checkadd_<t> -> new item lines")
    adjudications: list[Adjudication] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def open_keys(self) -> list[str]:
        """Questions and texts an adjudicator still has to settle."""
        return [key for key, outcome in self.questions.items() if outcome.by == "open"] + [
            key for key, outcome in self.texts.items() if outcome.by == "open"
        ]


class AgreementFigures(Strict):
    """Agreement on one kind of judgement over the samples with two or more answers."""

    items_with_two_or_more: int
    answers: int
    percent: float | None = Field(description="share of agreeing pairs of answers")
    fleiss_kappa: float | None = Field(description="None where undefined (see kappa_undefined) or no data")
    kappa_undefined: str | None = Field(None, description="why kappa has no value, e.g. every answer was 'yes'")


class ReviewerSummary(Strict):
    annotations: int = Field(description="valid annotations counted")
    answers: int = Field(description="judgements given")
    compared: int = Field(description="judgements on questions that were decided")
    agreed: int = Field(description="of those, equal to the decision (the majority, or the adjudicator on a tie)")
    share: float | None
    edits: int = Field(description="texts changed from the draft")
    adjudications: int = 0


class RejectedAnnotation(Strict):
    sample_id: str | None
    task_id: int
    annotation_id: int
    reviewer: str
    phase: Literal[1, 2]
    problem: str


class ReviewRecord(Strict):
    schema_version: int = RECORD_SCHEMA_VERSION
    run_id: str
    project: str
    round: int
    reviewers_required: int = Field(description="distinct people each sample needs (conversation_review.reviewers)")
    pulled_at: datetime
    samples: dict[str, SampleOutcome] = Field(description="every pushed sample, by id")
    agreement: dict[str, AgreementFigures] = Field(description="natural, correct, needs_image, rewrite, check")
    reviewers: dict[str, ReviewerSummary] = Field(description="per person (label-studio-user-<id>)")
    names: dict[str, str] = Field(
        default_factory=dict,
        description="label-studio-user-<id> -> email; for the curator's pages, never copied into a release",
    )
    rejected: list[RejectedAnnotation] = Field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(outcome.status == status for outcome in self.samples.values())
