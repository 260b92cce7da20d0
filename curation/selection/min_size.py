"""category_min_size: drop items of image categories with fewer than a minimum number of items.

MultiVerse (Sec. 3.1) dropped categories under 50 images (213 images, 1.80%).
"""

from __future__ import annotations

from collections import Counter

from benchcurate.curation.engine.stage import Keyed, SetStage, StageConfig, StageContext, decision_field
from benchcurate.schemas import Drop, Keep, Sample, Verdict


class MinSizeConfig(StageConfig):
    min_items_per_category: int = decision_field(50, ge=1, description="categories below this are dropped")


def category_of(item: Sample) -> str:
    return item.categories.image_main or "uncategorised"


def category_view(item: Sample, cfg: object = None) -> Keyed:
    return Keyed(item.id, category_of(item))


def select(items: list[Keyed], cfg: MinSizeConfig, ctx: StageContext) -> list[Verdict]:
    sizes = Counter(item.value for item in items)
    return [
        Keep()
        if sizes[item.value] >= cfg.min_items_per_category
        else Drop(
            reason="category_too_small",
            detail={
                "category": item.value,
                "category_size": sizes[item.value],
                "min_items_per_category": cfg.min_items_per_category,
            },
        )
        for item in items
    ]


STAGE = SetStage(
    name="category_min_size", config=MinSizeConfig, view=category_view, select=select, reasons=("category_too_small",)
)
