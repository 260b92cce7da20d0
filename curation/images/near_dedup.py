"""image_near_dedup: items whose pHashes are within a Hamming distance are grouped; one per group is kept.

MultiVerse (Sec. 3.1) removed 13,998 of 48,100 images (29.1%) with pHash and states no threshold; ours is a
parameter (default 8; bench/ measures precision and recall per threshold). First, items matching a reference set
(hashes files from `curate images hash`, or earlier release folders) are dropped as `matches_reference`, naming
the reference, to catch contamination. Then groups are connected components of the pair graph among the rest,
so a dropped member's distance to the kept one can exceed the threshold through a chain. Kept member, in order:
larger resolution, larger file, earlier in `source_priority`, smaller id (dedup runs before quality scoring).
The search (`curation.images.hamming`) returns exactly the pairs brute force would, in sub-quadratic time.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
from pydantic import Field

from benchcurate.curation.errors import UserError
from benchcurate.curation.fingerprint import sha256_json
from benchcurate.curation.grouping import groups_from_pairs, pick_kept
from benchcurate.curation.images.hamming import cross_pairs_within, pairs_within
from benchcurate.curation.stage import SetStage, StageConfig, StageContext
from benchcurate.curation.text import normalise, question_text
from benchcurate.schemas import Drop, Keep, Sample, Verdict


class NearDedupConfig(StageConfig):
    max_hamming_distance: int = Field(8, ge=0, le=32, description="pairs at this distance or less are duplicates")
    source_priority: tuple[str, ...] = Field((), description="source datasets to prefer, most preferred first")
    reference: tuple[str, ...] = Field((), description="hashes files (JSONL) or release folders to check against")


class ImageKey(NamedTuple):
    """What the image dedup stages decide on: the keep rule's fields, the two hashes, and the item's questions."""

    id: str
    sha256: str
    phash: str | None
    pixels: int
    size_bytes: int
    source: str
    questions: str = ""  # digest of the normalised user turns; "" for an image with no text yet


def image_key(item: Sample, cfg: object = None) -> ImageKey:
    image = item.images[0]
    users = question_text(item, "user_turns")
    return ImageKey(item.id, image.sha256, image.phash, (image.width or 0) * (image.height or 0), image.size_bytes,
                    item.provenance.source_dataset, sha256_json(normalise(users))[:16] if users else "")


def preference(key: ImageKey, source_priority: tuple[str, ...]) -> tuple:
    """Sort key of the keep rule: smaller is preferred."""
    rank = source_priority.index(key.source) if key.source in source_priority else len(source_priority)
    return (-key.pixels, -key.size_bytes, rank, key.id)


def distance(first: str, second: str) -> int:
    return (int(first, 16) ^ int(second, 16)).bit_count()


def load_reference(location: str) -> tuple[list[str], np.ndarray]:
    """(names, hashes) of a hashes file or of a release folder's `image_phash` column."""
    path = Path(location)
    if path.is_dir():
        import pyarrow.parquet as pq

        names, hashes = [], []
        for shard in sorted(path.glob("data/*.parquet")):
            table = pq.read_table(shard, columns=["index", "image_phash"])
            for index, value in zip(table.column("index").to_pylist(), table.column("image_phash").to_pylist()):
                if value:
                    names.append(f"{path.name}:{index}")
                    hashes.append(int(value, 16))
        return names, np.array(hashes, dtype=np.uint64)
    from benchcurate.curation.images.hashfile import read_hashes

    table = read_hashes(path)
    return table.paths, table.hashes


def reference_digest(cfg: NearDedupConfig, run_dir: Path | None = None) -> str:
    """Part of the stage key: the reference files' names, sizes and modification times."""
    listing = []
    for location in cfg.reference:
        path = Path(location)
        if not path.exists():
            raise UserError(f"reference {location} does not exist; pass a hashes file or a release folder")
        files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
        listing += [[str(f), f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    return sha256_json(listing)


def _reference_matches(items: list[ImageKey], hashes: np.ndarray, cfg: NearDedupConfig) -> dict[int, Drop]:
    drops: dict[int, Drop] = {}
    for location in cfg.reference:
        names, reference = load_reference(location)
        for query, ref, dist in cross_pairs_within(hashes, reference, cfg.max_hamming_distance):
            current = drops.get(int(query))
            if current is None or dist < current.detail["hamming_distance"]:
                drops[int(query)] = Drop(reason="matches_reference", detail={
                    "reference": names[int(ref)], "reference_set": location, "hamming_distance": int(dist)})
    return drops


def select(items: list[ImageKey], cfg: NearDedupConfig, ctx: StageContext) -> list[Verdict]:
    hashes = np.array([int(item.phash, 16) for item in items], dtype=np.uint64)
    verdicts: list[Verdict] = [Keep()] * len(items)
    contaminated = _reference_matches(items, hashes, cfg)
    for index, drop in contaminated.items():
        verdicts[index] = drop
    pairs = pairs_within(hashes, cfg.max_hamming_distance)
    # two items with the same picture but different questions (imported conversations) are two benchmark items
    edges = ((int(i), int(j)) for i, j, _ in pairs if int(i) not in contaminated and int(j) not in contaminated
             and items[int(i)].questions == items[int(j)].questions)
    for group in groups_from_pairs(len(items), edges):
        kept = pick_kept(group, items, lambda item: preference(item, cfg.source_priority))
        for index in group:
            if index != kept:
                verdicts[index] = Drop(reason="near_duplicate", detail={
                    "near_duplicate_of": items[kept].id,
                    "hamming_distance": distance(items[index].phash, items[kept].phash),
                    "group_size": len(group)})
    return verdicts


STAGE = SetStage(name="image_near_dedup", config=NearDedupConfig, view=image_key, select=select,
                 reasons=("near_duplicate", "matches_reference"), outside_input=reference_digest,
                 version=2)  # 2: questions tell items of one image apart
