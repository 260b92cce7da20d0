"""image_near_dedup: items whose pHashes are within a Hamming distance are grouped; one per group is kept.

MultiVerse (Sec. 3.1) removed 13,998 of 48,100 images (29.1%) with pHash and states no threshold; ours is a
parameter. Groups are connected components of the pair graph, so a dropped member's distance to the kept one
can exceed the threshold through a chain. Kept member, in order: larger resolution, larger file, earlier in
`source_priority`, smaller id. Search here is exact brute force (numpy XOR and popcount, O(n^2));
it returns every pair at distance <= threshold.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from curation.grouping import groups_from_pairs, pick_kept
from curation.stage import SetStage, StageConfig, StageContext
from schemas import Drop, Keep, Sample, Verdict


class NearDedupConfig(StageConfig):
    max_hamming_distance: int = Field(8, ge=0, le=32, description="pairs at this distance or less are duplicates")
    source_priority: tuple[str, ...] = Field((), description="source datasets to prefer, most preferred first")


def preference(item: Sample, source_priority: tuple[str, ...]) -> tuple:
    """Sort key of the keep rule: smaller is preferred."""
    image = item.images[0]
    source = item.provenance.source_dataset
    rank = source_priority.index(source) if source in source_priority else len(source_priority)
    return (-(image.width or 0) * (image.height or 0), -image.size_bytes, rank, item.id)


def hamming_pairs(hashes: np.ndarray, threshold: int) -> list[tuple[int, int, int]]:
    """All (i, j, distance) with i < j and popcount(h_i XOR h_j) <= threshold."""
    bits = np.unpackbits(hashes.view(np.uint8).reshape(len(hashes), 8), axis=1)
    pairs = []
    for i in range(len(hashes) - 1):
        distances = np.count_nonzero(bits[i + 1:] != bits[i], axis=1)
        for offset in np.flatnonzero(distances <= threshold):
            pairs.append((i, i + 1 + int(offset), int(distances[offset])))
    return pairs


def distance(first: str, second: str) -> int:
    return (int(first, 16) ^ int(second, 16)).bit_count()


def select(items: list[Sample], cfg: NearDedupConfig, ctx: StageContext) -> list[Verdict]:
    hashes = np.array([int(item.images[0].phash, 16) for item in items], dtype=np.uint64)
    pairs = hamming_pairs(hashes, cfg.max_hamming_distance)
    verdicts: list[Verdict] = [Keep()] * len(items)
    for group in groups_from_pairs(len(items), ((i, j) for i, j, _ in pairs)):
        kept = pick_kept(group, items, lambda item: preference(item, cfg.source_priority))
        for index in group:
            if index != kept:
                verdicts[index] = Drop(reason="near_duplicate", detail={
                    "near_duplicate_of": items[kept].id,
                    "hamming_distance": distance(items[index].images[0].phash, items[kept].images[0].phash),
                    "group_size": len(group)})
    return verdicts


STAGE = SetStage(name="image_near_dedup", config=NearDedupConfig, select=select, reasons=("near_duplicate",))
