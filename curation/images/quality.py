"""image_quality: a 1-5 quality grade per image (stored), then keep grades at or above a threshold.

MultiVerse (Sec. 3.1, App. E) graded with GPT-4o on clarity, resolution and real-world plausibility and kept
only grade 5, removing 64.77%; logos, icons and rotated images get grade 1.
"""

from __future__ import annotations

from benchcurate.curation.engine.stage import ItemStage, ModelStageConfig, StageContext, decision_field
from benchcurate.schemas import Drop, Keep, Sample, Scores, Verdict


class QualityConfig(ModelStageConfig):
    min_quality_score: int = decision_field(5, ge=1, le=5, description="keep grades >= this (paper: 5)")


def score(item: Sample, cfg: QualityConfig, ctx: StageContext) -> Scores:
    result = ctx.ask("image_quality", cfg.prompt_version, item, model=cfg.model)
    return Scores(
        values={"quality_score": result.value.quality_score, "rationale": result.value.rationale},
        generation=result.generation,
    )


def decide(scores: Scores, cfg: QualityConfig) -> Verdict:
    grade = scores.values["quality_score"]
    if grade >= cfg.min_quality_score:
        return Keep()
    return Drop(reason="low_quality", detail={"quality_score": grade, "min_quality_score": cfg.min_quality_score})


STAGE = ItemStage(
    name="image_quality",
    config=QualityConfig,
    score=score,
    decide=decide,
    reasons=("low_quality",),
    uses_model=True,
    prompts=("image_quality",),
)
