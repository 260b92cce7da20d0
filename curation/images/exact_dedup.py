"""image_exact_dedup: items whose image bytes are identical (same sha256) keep one member; items that carry
different questions about one picture (imported conversations: ConvBench shares a few images) are not copies.

The kept member follows the near-duplicate rule (`curation.images.near_dedup.preference`); for identical bytes
that reduces to source priority, then the smallest id.
"""

from __future__ import annotations

from pydantic import Field

from benchcurate.curation.core.grouping import pick_kept
from benchcurate.curation.engine.stage import SetStage, StageConfig, StageContext
from benchcurate.curation.images.near_dedup import ImageKey, image_key, preference
from benchcurate.schemas import Drop, Keep, Verdict


class ExactDedupConfig(StageConfig):
    source_priority: tuple[str, ...] = Field((), description="source datasets to prefer, most preferred first")


def select(items: list[ImageKey], cfg: ExactDedupConfig, ctx: StageContext) -> list[Verdict]:
    by_hash: dict[tuple[str, str], list[int]] = {}
    for index, item in enumerate(items):
        by_hash.setdefault((item.sha256, item.questions), []).append(index)
    verdicts: list[Verdict] = [Keep()] * len(items)
    for group in by_hash.values():
        if len(group) < 2:
            continue
        kept = pick_kept(group, items, lambda item: preference(item, cfg.source_priority))
        for index in group:
            if index != kept:
                verdicts[index] = Drop(
                    reason="exact_duplicate", detail={"duplicate_of": items[kept].id, "sha256": items[index].sha256}
                )
    return verdicts


STAGE = SetStage(
    name="image_exact_dedup",
    config=ExactDedupConfig,
    view=image_key,
    select=select,
    reasons=("exact_duplicate",),
    version=2,
)  # 2: questions tell items of one image apart
