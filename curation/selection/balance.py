"""field_balance: downsample over-represented fields to a target total (ProBench's domain balancing).

ProBench (Sec. 2.1) downsampled over-represented task fields to 3,000 single-round queries without saying how.
Ours is water-filling: find the largest per-field cap c with sum(min(size, c)) <= target; fields at or under
the cap keep every item, larger fields keep c, and the few places left over (fewer than the number of capped
fields) go one each to the largest capped fields (ties by name). Hence:

- the total is exactly min(target, items);
- only fields larger than the cap lose items, and no field ends below min(its size, floor(target / fields)):
  with k fields, a cap of floor(target / k) always fits, so c is at least that;
- a field never keeps more than a field that was larger before.

Within a field, the kept items are a uniform draw seeded by the run seed and the field name from the items
sorted by id, as in category_weighted_sample. Items without the label form their own field, "unlabelled".
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from benchcurate.curation.engine.stage import Keyed, SetStage, StageConfig, StageContext, decision_field
from benchcurate.schemas import Drop, Keep, Sample, Verdict

UNLABELLED = "unlabelled"


class BalanceConfig(StageConfig):
    target_total: int = decision_field(3000, ge=1, description="items kept at most (ProBench single-round: 3,000)")
    field: Literal["task_main", "image_main"] = decision_field("task_main", description="the label to balance")


def water_fill(sizes: dict[str, int], target: int) -> tuple[dict[str, int], int | None]:
    """(quota per field, the cap c), with quotas summing to min(target, total); cap None when nothing is cut."""
    if sum(sizes.values()) <= target:
        return dict(sizes), None
    low, high = 0, max(sizes.values())  # largest c with sum(min(size, c)) <= target
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(size, middle) for size in sizes.values()) <= target:
            low = middle
        else:
            high = middle - 1
    quotas = {name: min(size, low) for name, size in sizes.items()}
    leftover = target - sum(quotas.values())
    for name in sorted((name for name, size in sizes.items() if size > low), key=lambda n: (-sizes[n], n)):
        if leftover == 0:
            break
        quotas[name] += 1
        leftover -= 1
    return quotas, low


def field_view(item: Sample, cfg: BalanceConfig) -> Keyed:
    return Keyed(item.id, getattr(item.categories, cfg.field) or UNLABELLED)


def select(items: list[Keyed], cfg: BalanceConfig, ctx: StageContext) -> list[Verdict]:
    members: dict[str, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        members[item.value].append(index)
    sizes = {name: len(group) for name, group in sorted(members.items())}
    quotas, cap = water_fill(sizes, cfg.target_total)
    chosen: set[int] = set()
    for name, group in members.items():
        chosen.update(ctx.rng_for(name).sample(sorted(group, key=lambda index: items[index].id), quotas[name]))
    ctx.summary.update(
        {
            "field": cfg.field,
            "target_total": cfg.target_total,
            "cap": cap,
            "sizes": sizes,
            "quotas": quotas,
            "seed": ctx.run_seed,
        }
    )
    field_of = {index: name for name, group in members.items() for index in group}
    return [
        Keep()
        if index in chosen
        else Drop(
            reason="field_downsampled",
            detail={
                "field": field_of[index],
                "field_size": sizes[field_of[index]],
                "field_quota": quotas[field_of[index]],
                "cap": cap,
            },
        )
        for index in range(len(items))
    ]


STAGE = SetStage(
    name="field_balance", config=BalanceConfig, view=field_view, select=select, reasons=("field_downsampled",)
)
