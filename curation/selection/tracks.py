"""probench_tracks: ProBench's three tracks and their sizes (Sec. 2.1).

Routing (by the sample's language and its number of user turns):
- English, one user turn -> `singleround`: over-represented task fields downsampled to `single_round_total`
  (3,000) by the water-filling of field_balance; within a field the hardest first.
- English, two or more user turns -> `multi-round`: the `multi_round_interconnected` (400) hardest of those whose
  turns depend on each other, plus the `multi_round_independent` (100) hardest independent ones.
- Any other language -> `multi-linguistic`, grouped into pt, fr, es, de and other: the `per_language_group` (100)
  hardest of each group.
- Language unknown (too short to tell) -> dropped as `language_unknown`.

"Hardest" is the combined challenge rank from challenge_score (ties, and items without one, by a seeded draw).
Items not selected are dropped as `not_selected` with their track and quota.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import Field

from benchcurate.curation.engine.stage import SetStage, StageConfig, StageContext, decision_field
from benchcurate.curation.selection.balance import UNLABELLED, water_fill
from benchcurate.curation.text.language import PROBENCH_GROUPS, language_group
from benchcurate.schemas import Drop, Keep, Sample, Verdict

SINGLE, MULTI, MULTILINGUAL = "singleround", "multi-round", "multi-linguistic"


class TracksConfig(StageConfig):
    single_round_total: int = decision_field(3000, ge=0, description="paper: 3,000")
    multi_round_interconnected: int = decision_field(400, ge=0, description="paper: 400")
    multi_round_independent: int = decision_field(100, ge=0, description="paper: the 100 hardest independent")
    per_language_group: int = decision_field(100, ge=0, description="paper: 100 per group")
    language_groups: list[str] = Field(list(PROBENCH_GROUPS), description="groups besides 'other' (paper: pt fr es de)")


def track_of(item: Sample) -> str | None:
    if not item.language or item.language == "unknown":
        return None
    users = sum(turn.speaker == "user" for turn in item.conversation)
    if item.language != "en":
        return MULTILINGUAL
    return MULTI if users > 1 else SINGLE


def relabel(items: list[Sample], cfg: TracksConfig, ctx: StageContext) -> list[Sample]:
    return [item.model_copy(update={"track": track_of(item)}) for item in items]


def _rank(item: Sample) -> float:
    return float((item.scores.get("challenge_rank") or {}).get("combined", -1))


def _hardest(indices: list[int], items: list[Sample], count: int, ctx: StageContext, name: str) -> list[int]:
    rng = ctx.rng_for(name)
    shuffled = sorted(indices, key=lambda index: items[index].id)
    rng.shuffle(shuffled)
    return sorted(shuffled, key=lambda index: -_rank(items[index]))[:count]


def select(items: list[Sample], cfg: TracksConfig, ctx: StageContext) -> list[Verdict]:
    pools: dict[str, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        if item.track == SINGLE:
            pools[f"{SINGLE}/{item.categories.task_main or UNLABELLED}"].append(index)
        elif item.track == MULTI:
            independent = (item.scores.get("interdependency_check") or {}).get("independent")
            pools[f"{MULTI}/{'independent' if independent else 'interconnected'}"].append(index)
        elif item.track == MULTILINGUAL:
            pools[f"{MULTILINGUAL}/{language_group(item.language, tuple(cfg.language_groups))}"].append(index)
    single = {name: len(group) for name, group in pools.items() if name.startswith(SINGLE)}
    quotas, cap = water_fill(single, cfg.single_round_total)
    quotas |= {
        f"{MULTI}/interconnected": cfg.multi_round_interconnected,
        f"{MULTI}/independent": cfg.multi_round_independent,
    }
    quotas |= {name: cfg.per_language_group for name in pools if name.startswith(MULTILINGUAL)}
    chosen = {
        index for name, group in pools.items() for index in _hardest(group, items, quotas.get(name, 0), ctx, name)
    }
    ctx.summary.update(
        {
            "pools": {name: len(group) for name, group in sorted(pools.items())},
            "quotas": {name: quotas.get(name, 0) for name in sorted(pools)},
            "single_round_cap": cap,
        }
    )
    pool_of = {index: name for name, group in pools.items() for index in group}
    verdicts: list[Verdict] = []
    for index, item in enumerate(items):
        if item.track is None:
            verdicts.append(Drop(reason="language_unknown", detail={"language": item.language}))
        elif index in chosen:
            verdicts.append(Keep())
        else:
            pool = pool_of[index]
            verdicts.append(
                Drop(
                    reason="not_selected",
                    detail={
                        "pool": pool,
                        "quota": quotas.get(pool, 0),
                        "pool_size": len(pools[pool]),
                        "rank": _rank(item),
                    },
                )
            )
    return verdicts


STAGE = SetStage(
    name="probench_tracks",
    config=TracksConfig,
    relabel=relabel,
    select=select,
    reasons=("language_unknown", "not_selected"),
)
