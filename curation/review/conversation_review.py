"""conversation_review: apply review outcomes to conversations.

- Mode `auto` accepts every item and every pending rewrite, and records that no person looked at it
  (review.mode = "auto"); the release card says so.
- Mode `human` applies what people decided in Label Studio, which `curate review pull` writes to the run folder
  (`review/record.json`, a `schemas.review.ReviewRecord`; the rules are `curation/review/policy.py`). Each
  sample goes to `reviewers` distinct people (default 2: agreement needs two). MultiVerse's reviewers judged three
  criteria (natural, correct, needs the image; Sec. 3.4): a majority "no" on any rejects the item as
  `reviewer_rejected` with the criteria as reasons (`unnatural`, `incorrect`, `answerable_without_image`); each
  paraphrase rewrite is kept or rejected by its own majority (AlignMMBench reviewed every rewrite); edited
  captions, references and focus points replace the drafts (ConvBench's refinement), and checklist items are
  kept, deleted, rewritten or added (MultiVerse reviewed its checklists). While any item has no outcome (too few
  reviews yet, or a tie or two different edits waiting for an adjudicator) the stage waits: the run stops there
  (exit 5) and a rerun after the next pull continues.

Curation never imports the annotation package: the record file is the boundary.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field

from benchcurate.curation.core.errors import StageWaiting, UserError
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.engine.stage import SetStage, StageConfig, StageContext
from benchcurate.curation.review.fields import user_turns
from benchcurate.schemas import ChecklistItem, Drop, Keep, Sample, Verdict
from benchcurate.schemas.review import ReviewRecord, SampleOutcome

RECORD = Path("review") / "record.json"
LIST_MARKER = re.compile(
    r"^\s*(?:\d{1,3}[.)]|[-*\u2022])\s+"
)  # "1. ", "2) ", "- ", "* ": not "3 faces", "2024 figures"


class ReviewConfig(StageConfig):
    mode: Literal["auto", "human"] = Field(
        "auto",
        description="'auto' accepts everything and says so; 'human' applies Label Studio outcomes (curate review pull)",
    )
    reviewers: int = Field(
        2,
        ge=1,
        le=20,
        description="distinct people who review each sample in human mode (Label "
        "Studio's overlap); a sample is decided once that many have",
    )


def outcomes_digest(cfg: ReviewConfig, run_dir: Path) -> str | None:
    path = run_dir / RECORD
    return sha256_file(path) if cfg.mode == "human" and path.exists() else None


def read_record(run_dir: Path) -> ReviewRecord | None:
    """The last pull's record, or None before the first pull."""
    path = run_dir / RECORD
    if not path.exists():
        return None
    try:
        return ReviewRecord.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise UserError(
            f"{path} is not a review record this version reads ({str(error).splitlines()[0]}); run "
            f"`curate review pull {run_dir.name}` again"
        ) from error


def relabel(items: list[Sample], cfg: ReviewConfig, ctx: StageContext) -> list[Sample]:
    if cfg.mode == "auto":
        return [
            item.model_copy(
                update={
                    "review": item.review.model_copy(
                        update={
                            "status": "accepted",
                            "mode": "auto",
                            "reviewers": [],
                            "notes": "accepted without human review (auto mode)",
                        }
                    ),
                    "rewrites": [
                        rewrite.model_copy(update={"status": "kept"}) if rewrite.status == "pending" else rewrite
                        for rewrite in item.rewrites
                    ],
                }
            )
            for item in items
        ]
    record = read_record(ctx.run_dir)
    outcomes = record.samples if record else {}
    waiting = [item.id for item in items if item.id not in outcomes or outcomes[item.id].status == "pending"]
    ctx.summary.update({"reviewed": len(items) - len(waiting), "waiting": len(waiting)})
    if waiting:
        why = outcomes[waiting[0]].waiting_for if waiting[0] in outcomes else "not pulled yet"
        raise StageWaiting(
            f"{len(waiting)} of {len(items)} items have no review outcome yet (e.g. {waiting[0]}: "
            f"{why}); annotate them in Label Studio, run `curate review pull` (and `curate review "
            f"push --phase 2` for ties), then rerun with the same --run-id"
        )
    return [apply_outcome(item, outcomes[item.id], record) for item in items]


def apply_outcome(item: Sample, outcome: SampleOutcome, record: ReviewRecord) -> Sample:
    review = item.review.model_copy(
        update={
            "status": outcome.status,
            "mode": "human",
            "reviewers": outcome.reviewers,
            "reasons": outcome.reasons,
            "notes": " | ".join(outcome.notes) or None,
            "project": record.project,
            "round": record.round,
            "updated_at": record.pulled_at,
        }
    )
    decided = {key: question.decided for key, question in outcome.questions.items()}
    rewrites = [
        rewrite.model_copy(
            update={
                "status": {"keep": "kept", "reject": "rejected"}.get(
                    decided.get(f"rewrite_{index}") or "", rewrite.status
                )
            }
        )
        for index, rewrite in enumerate(item.rewrites)
    ]
    texts = {key: text.value for key, text in outcome.texts.items() if text.value is not None}
    deleted = frozenset(key for key, value in decided.items() if key.startswith("check_") and value == "delete")
    return apply_edits(
        item.model_copy(update={"review": review, "rewrites": rewrites}), texts, deleted, outcome.additions
    )


def apply_edits(
    item: Sample,
    texts: dict[str, str],
    deleted: frozenset[str] = frozenset(),
    additions: dict[str, list[str]] | None = None,
) -> Sample:
    """Reviewers' corrections (names from curation/review/fields.py): `caption`, `reference_<t>`, `focus_<t>`
    (one point per line; a leading list marker such as "1." or "-" is removed, a leading number is not),
    `checkedit_<t>_<j>`, deleted `check_<t>_<j>` and added `checkadd_<t>` lines (`question | main | sub`).
    Text is kept as typed."""
    turns = list(item.conversation)
    for t, position in enumerate(user_turns(item)):
        turn = turns[position]
        update: dict = {}
        if f"reference_{t}" in texts:
            update["reference"] = texts[f"reference_{t}"]
        if f"focus_{t}" in texts:
            points = [LIST_MARKER.sub("", line, count=1).strip() for line in texts[f"focus_{t}"].splitlines()]
            update["focus_points"] = [point for point in points if point]
        checklist = [
            entry.model_copy(update={"question": texts[f"checkedit_{t}_{j}"], "source_model": "reviewer"})
            if f"checkedit_{t}_{j}" in texts
            else entry
            for j, entry in enumerate(turn.checklist)
            if f"check_{t}_{j}" not in deleted
        ]
        checklist += [_new_item(line) for line in (additions or {}).get(f"checkadd_{t}", [])]
        if checklist != turn.checklist:
            update["checklist"] = checklist
        turns[position] = turn.model_copy(update=update) if update else turn
    return item.model_copy(update={"conversation": turns, "caption": texts.get("caption", item.caption)})


def _new_item(line: str) -> ChecklistItem:
    question, main, sub = ([part.strip() for part in line.split("|")] + ["", ""])[:3]
    return ChecklistItem(
        question=question,
        main_criteria=main or "Other",
        sub_criteria=sub or "reviewer addition",
        source_model="reviewer",
    )


def select(items: list[Sample], cfg: ReviewConfig, ctx: StageContext) -> list[Verdict]:
    return [
        Drop(reason="reviewer_rejected", detail={"reasons": item.review.reasons, "reviewers": item.review.reviewers})
        if item.review.status == "rejected"
        else Keep()
        for item in items
    ]


STAGE = SetStage(
    name="conversation_review",
    config=ReviewConfig,
    relabel=relabel,
    select=select,
    reasons=("reviewer_rejected",),
    outside_input=outcomes_digest,
)
