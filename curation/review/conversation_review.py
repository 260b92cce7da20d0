"""conversation_review: apply review outcomes to conversations.

Mode `auto` accepts every item, and keeps every pending rewrite, and records that no person looked at it
(review.mode = "auto"); the release card says so. Human review in Label Studio (MultiVerse Sec. 3.4: natural, correct, needs the image) plugs in
here as another mode: `annotation/` writes outcomes into the run store and this stage applies them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from curation.stage import StageConfig, StageContext, TransformStage
from schemas import Keep, Sample, Verdict


class ReviewConfig(StageConfig):
    mode: Literal["auto"] = Field("auto", description="'auto' accepts everything and says so")


def generate(item: Sample, cfg: ReviewConfig, ctx: StageContext) -> list[Sample]:
    review = item.review.model_copy(update={"status": "accepted", "mode": "auto", "reviewers": [],
                                            "notes": "accepted without human review (auto mode)"})
    rewrites = [rewrite.model_copy(update={"status": "kept"}) if rewrite.status == "pending" else rewrite
                for rewrite in item.rewrites]
    return [item.model_copy(update={"review": review, "rewrites": rewrites})]


def check(item: Sample, cfg: ReviewConfig) -> Verdict:
    return Keep()


STAGE = TransformStage(name="conversation_review", config=ReviewConfig, generate=generate, check=check,
                       reasons=("reviewer_rejected",))
