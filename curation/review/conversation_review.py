"""conversation_review: apply review outcomes to conversations.

- Mode `auto` accepts every item and every pending rewrite, and records that no person looked at it
  (review.mode = "auto"); the release card says so.
- Mode `human` applies the outcomes people gave in Label Studio, which `curate review pull` writes to the run
  folder (`review/outcomes.json`: per sample, accepted, rejected with reasons, or pending). MultiVerse's reviewers
  judged three criteria (natural, correct, needs the image; Sec. 3.4); a majority "no" on any rejects the item as
  `reviewer_rejected` with the criteria as reasons (`unnatural`, `incorrect`, `answerable_without_image`); each
  paraphrase rewrite is kept or rejected by its own majority (AlignMMBench reviewed every rewrite); edited
  captions, references and focus points (ConvBench's refinement) replace the drafts, and checklist items are
  kept, deleted, rewritten or added (MultiVerse reviewed its checklists). While
  any item has no outcome (not annotated yet, or a tie waiting for a second phase) the stage waits: the run
  stops there (exit 5) and a rerun after the next pull continues.

Curation never imports the annotation package: the outcomes file is the boundary.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field

from benchcurate.curation.errors import StageWaiting
from benchcurate.curation.fingerprint import sha256_file
from benchcurate.curation.stage import SetStage, StageConfig, StageContext
from benchcurate.schemas import Drop, Keep, Sample, Verdict

OUTCOMES = Path("review") / "outcomes.json"


class ReviewConfig(StageConfig):
    mode: Literal["auto", "human"] = Field("auto", description="'auto' accepts everything and says so; 'human' "
                                                               "applies Label Studio outcomes (curate review pull)")


def outcomes_digest(cfg: ReviewConfig, run_dir: Path) -> str | None:
    path = run_dir / OUTCOMES
    return sha256_file(path) if cfg.mode == "human" and path.exists() else None


def _outcomes(ctx: StageContext) -> dict[str, dict]:
    path = ctx.run_dir / OUTCOMES
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def relabel(items: list[Sample], cfg: ReviewConfig, ctx: StageContext) -> list[Sample]:
    if cfg.mode == "auto":
        return [item.model_copy(update={
            "review": item.review.model_copy(update={"status": "accepted", "mode": "auto", "reviewers": [],
                                                     "notes": "accepted without human review (auto mode)"}),
            "rewrites": [rewrite.model_copy(update={"status": "kept"}) if rewrite.status == "pending" else rewrite
                         for rewrite in item.rewrites]}) for item in items]
    outcomes = _outcomes(ctx)
    waiting = [item.id for item in items if outcomes.get(item.id, {}).get("status") not in ("accepted", "rejected")]
    ctx.summary.update({"reviewed": len(items) - len(waiting), "waiting": len(waiting)})
    if waiting:
        raise StageWaiting(f"{len(waiting)} of {len(items)} items have no review outcome yet (e.g. {waiting[0]}); "
                           f"annotate them in Label Studio, run `curate review pull`, then rerun with the same "
                           f"--run-id")
    reviewed = []
    for item in items:
        outcome = outcomes[item.id]
        review = item.review.model_copy(update={
            "status": outcome["status"], "mode": "human", "reviewers": outcome.get("reviewers", []),
            "reasons": outcome.get("reasons", []), "notes": outcome.get("notes"),
            "project": outcome.get("project"), "round": outcome.get("round"),
            "updated_at": datetime.fromisoformat(outcome["updated_at"]) if outcome.get("updated_at") else None})
        decided = outcome.get("rewrites") or {}
        rewrites = [rewrite.model_copy(update={"status": decided.get(str(index), rewrite.status)})
                    for index, rewrite in enumerate(item.rewrites)]
        reviewed.append(apply_edits(item.model_copy(update={"review": review, "rewrites": rewrites}),
                                    outcome.get("edits") or {}))
    return reviewed


def apply_edits(item: Sample, edits: dict[str, str]) -> Sample:
    """Reviewers' corrections of drafts: `caption_0`, `reference_<i>` (the i-th user turn with a reference),
    `focus_0` (one point per line, numbering removed)."""
    if not edits:
        return item
    turns = list(item.conversation)
    referenced = [index for index, turn in enumerate(turns) if turn.speaker == "user" and turn.reference]
    for name, text in edits.items():
        if name.startswith("reference_") and int(name.split("_")[1]) < len(referenced):
            position = referenced[int(name.split("_")[1])]
            turns[position] = turns[position].model_copy(update={"reference": text})
    if "focus_0" in edits:
        points = [line.strip().lstrip("0123456789.)-* ").strip() for line in edits["focus_0"].splitlines()]
        position = next((index for index, turn in enumerate(turns) if turn.focus_points), None)
        if position is not None:
            turns[position] = turns[position].model_copy(update={"focus_points": [p for p in points if p]})
    turns = _edit_checklists(turns, edits)
    return item.model_copy(update={"conversation": turns, "caption": edits.get("caption_0", item.caption)})


def _edit_checklists(turns: list, edits: dict[str, str]) -> list:
    """`check_<k>` keep/delete and `checkedit_<k>` a new question for the k-th item (user turns in order, items in
    order); `checkadd_<t>` new items `question | main | sub`, one per line, for the t-th user turn with a checklist."""
    from benchcurate.schemas import ChecklistItem
    flat = [(position, index) for position, turn in enumerate(turns) if turn.speaker == "user"
            for index in range(len(turn.checklist))]
    with_items = [position for position, turn in enumerate(turns) if turn.speaker == "user" and turn.checklist]
    lists = {position: list(turns[position].checklist) for position in with_items}
    deleted = set()
    for k, (position, index) in enumerate(flat):
        if edits.get(f"checkedit_{k}"):
            lists[position][index] = lists[position][index].model_copy(
                update={"question": edits[f"checkedit_{k}"], "source_model": "reviewer"})
        if edits.get(f"check_{k}") == "delete":
            deleted.add((position, index))
    for t, position in enumerate(with_items):
        for line in (edits.get(f"checkadd_{t}") or "").splitlines():
            parts = [part.strip() for part in line.split("|")]
            if parts[0]:
                lists[position].append(ChecklistItem(question=parts[0], main_criteria=(parts + ["", ""])[1] or "Other",
                                                     sub_criteria=(parts + ["", "", ""])[2] or "reviewer addition",
                                                     source_model="reviewer"))
    for position in with_items:
        kept = [item for index, item in enumerate(lists[position]) if (position, index) not in deleted]
        turns[position] = turns[position].model_copy(update={"checklist": kept})
    return turns


def select(items: list[Sample], cfg: ReviewConfig, ctx: StageContext) -> list[Verdict]:
    return [Drop(reason="reviewer_rejected", detail={"reasons": item.review.reasons, "reviewers": item.review.reviewers})
            if item.review.status == "rejected" else Keep() for item in items]


STAGE = SetStage(name="conversation_review", config=ReviewConfig, relabel=relabel, select=select,
                 reasons=("reviewer_rejected",), outside_input=outcomes_digest)
