"""image_category: main and sub category per image from an open vocabulary (stored, then copied to the sample).

MultiVerse (Sec. 3.1, App. E) seeds 32 categories plus "Others", which proposes a new name; 57 came out.
A proposal replaces "Others" as the main category. Names are normalised by trimming and collapsing spaces;
merging synonyms is a later step.
"""

from __future__ import annotations

from benchcurate.curation.engine.stage import ItemStage, ModelStageConfig, StageContext
from benchcurate.schemas import Categories, Drop, Keep, Sample, Scores, Verdict


class CategoryConfig(ModelStageConfig):
    """Prompt version and model only."""


def normalise(name: str | None) -> str | None:
    cleaned = " ".join((name or "").split())
    return cleaned or None


def score(item: Sample, cfg: CategoryConfig, ctx: StageContext) -> Scores:
    reply = ctx.ask("image_category", cfg.prompt_version, item, model=cfg.model)
    value = reply.value
    main = normalise(value.proposed_category) if value.category == "Others" else value.category
    return Scores(
        values={
            "category": main,
            "sub_category": normalise(value.sub_category),
            "proposed": value.category == "Others",
        },
        generation=reply.generation,
    )


def decide(scores: Scores, cfg: CategoryConfig) -> Verdict:
    if scores.values["category"] is None:
        return Drop(reason="category_missing", detail={"note": "the classifier chose Others without a proposal"})
    return Keep()


def apply(item: Sample, scores: Scores, cfg: CategoryConfig) -> Sample:
    categories = item.categories.model_copy(
        update={"image_main": scores.values["category"], "image_sub": scores.values["sub_category"]}
    )
    return item.model_copy(update={"categories": Categories.model_validate(categories.model_dump())})


STAGE = ItemStage(
    name="image_category",
    config=CategoryConfig,
    score=score,
    decide=decide,
    apply=apply,
    reasons=("category_missing",),
    uses_model=True,
    prompts=("image_category",),
)
