"""category_min_size: drop items of image categories with fewer than a minimum number of items.

MultiVerse (Sec. 3.1) dropped categories under 50 images (213 images, 1.80%).
"""

from __future__ import annotations

from collections import Counter

from curation.stage import SetStage, StageConfig, StageContext, decision_field
from schemas import Drop, Keep, Sample, Verdict


class MinSizeConfig(StageConfig):
    min_items_per_category: int = decision_field(50, ge=1, description="categories below this are dropped")


def category_of(item: Sample) -> str:
    return item.categories.image_main or "uncategorised"


def select(items: list[Sample], cfg: MinSizeConfig, ctx: StageContext) -> list[Verdict]:
    sizes = Counter(category_of(item) for item in items)
    return [Keep() if sizes[category_of(item)] >= cfg.min_items_per_category else
            Drop(reason="category_too_small", detail={"category": category_of(item),
                                                      "category_size": sizes[category_of(item)],
                                                      "min_items_per_category": cfg.min_items_per_category})
            for item in items]


STAGE = SetStage(name="category_min_size", config=MinSizeConfig, select=select, reasons=("category_too_small",))
