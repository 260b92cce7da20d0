"""category_weighted_sample: draw at most `max_items`, allocated to categories by weight, seeded.

MultiVerse (Sec. 3.1) sampled proportionally to the category distribution, capped at 1,000 images.
Allocation: each category's quota is its share of `max_items` under weight count**alpha (alpha 1 proportional,
0.5 square root, 0 uniform over categories), by largest remainder, capped at the category's size, with the
leftover handed on to categories that still have items. Within a category, items are drawn uniformly with a
generator derived from the run seed and the category name, from the items sorted by id, so the draw does
not depend on input order.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from benchcurate.curation.engine.stage import Keyed, SetStage, StageConfig, StageContext, decision_field
from benchcurate.curation.selection.min_size import category_view
from benchcurate.schemas import Drop, Keep, Verdict

WEIGHT_EXPONENT = {"proportional": 1.0, "sqrt": 0.5, "uniform": 0.0}


class WeightedSampleConfig(StageConfig):
    max_items: int = decision_field(1000, ge=1, description="sample cap (paper: 1,000)")
    weighting: Literal["proportional", "sqrt", "uniform"] = decision_field("proportional")


def allocate(sizes: dict[str, int], total: int, exponent: float) -> dict[str, int]:
    """Quotas summing to min(total, sum(sizes)), each at most its category's size."""
    quotas = dict.fromkeys(sizes, 0)
    remaining = min(total, sum(sizes.values()))
    while remaining > 0:
        open_names = sorted(name for name in sizes if quotas[name] < sizes[name])
        weights = {name: sizes[name] ** exponent for name in open_names}
        scale = remaining / sum(weights.values())
        exact = {name: weights[name] * scale for name in open_names}
        shares = {name: min(int(exact[name]), sizes[name] - quotas[name]) for name in open_names}
        leftover = remaining - sum(shares.values())
        by_remainder = sorted(open_names, key=lambda name: (-(exact[name] - int(exact[name])), name))
        for name in by_remainder:
            if leftover == 0:
                break
            if quotas[name] + shares[name] < sizes[name]:
                shares[name] += 1
                leftover -= 1
        for name, share in shares.items():
            quotas[name] += share
        remaining = min(total, sum(sizes.values())) - sum(quotas.values())
    return quotas


def select(items: list[Keyed], cfg: WeightedSampleConfig, ctx: StageContext) -> list[Verdict]:
    members: dict[str, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        members[item.value].append(index)
    quotas = allocate(
        {name: len(group) for name, group in members.items()}, cfg.max_items, WEIGHT_EXPONENT[cfg.weighting]
    )
    chosen: set[int] = set()
    for name, group in members.items():
        ordered = sorted(group, key=lambda index: items[index].id)
        chosen.update(ctx.rng_for(name).sample(ordered, quotas[name]))
    exponent = WEIGHT_EXPONENT[cfg.weighting]
    ctx.summary.update(
        {
            "weighting": cfg.weighting,
            "max_items": cfg.max_items,
            "seed": ctx.run_seed,
            "sizes": {name: len(group) for name, group in sorted(members.items())},
            "weights": {name: round(len(group) ** exponent, 6) for name, group in sorted(members.items())},
            "quotas": dict(sorted(quotas.items())),
        }
    )
    return [
        Keep()
        if index in chosen
        else Drop(
            reason="not_sampled",
            detail={
                "category": item.value,
                "category_quota": quotas[item.value],
                "category_size": len(members[item.value]),
            },
        )
        for index, item in enumerate(items)
    ]


STAGE = SetStage(
    name="category_weighted_sample",
    config=WeightedSampleConfig,
    view=category_view,
    select=select,
    reasons=("not_sampled",),
)
