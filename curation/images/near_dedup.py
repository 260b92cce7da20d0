"""image_near_dedup: items whose pictures are near copies are grouped around the one kept; the others are dropped.

MultiVerse (Sec. 3.1) removed 13,998 of 48,100 images (29.1%) with pHash and states no threshold; ours is a
parameter (default 8). First, items matching a reference set (hashes files from `curate images hash`, earlier
release folders, or versions published on the Hub as hf://ORG/NAME@v0.1.0) are dropped as `matches_reference`,
naming the reference, to catch contamination. Then:

1. Candidates: pairs whose pHashes are within `max_hamming_distance`, found exactly in sub-quadratic time
   (`curation.images.hamming`); also, with `match_orientations`, a picture's mirror images and quarter turns
   against the others' pHashes; with `match_borders`, the pHashes of the pictures without uniform borders; with
   `match_crops`, those of their centres (`curation.images.likeness`).
2. Order: items with a candidate pair in the keep rule's order: `least_processed` (default) ranks what a copy
   lost before marks of processing (`curation.images.survivor`: colour, content pixels, no frame, the orientation
   its near copies share, lossless then JPEG quality, then marks); `largest` the most pixels, then the largest
   file. Then `source_priority`, then the smaller id. Each picture is decoded once, reduced
   (`likeness.picture`), for this and for the verification.
3. Stars: each item not yet placed is kept, and each of its candidates not yet placed is verified against it
   (`verify`): whole thumbnails first, then each picture's content placed inside the other's (a crop or a frame
   moves and rescales everything) and compared on the part they share. A pair whose 256-bit pHashes differ by
   more than `max_hash256_distance`, in which a few blocks differ far more than the rest (`max_local_difference`:
   spot the difference, a changed label, a moved object, the next video frame), or whose placed content
   correlates under 0.9 (a camera shift: each shows what the other does not) is two items. An item near only a
   dropped one is kept (a chain is reported in the stage's summary, not followed). The decision records the
   rule, distances, orientation, the hash that matched and the verification's evidence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
from pydantic import Field

from benchcurate.curation.errors import UserError
from benchcurate.curation.fingerprint import sha256_json
from benchcurate.curation.images.decode import DEFAULT_MAX_PIXELS, ImageDecodeError
from benchcurate.curation.images.hamming import cross_pairs_within, pairs_within
from benchcurate.curation.images.likeness import (
    MIN_CORRELATION,
    TURNS,
    VIEWS,
    Comparison,
    Picture,
    compare_pictures,
    hash256_distance,
    orient_thumbnail,
    pack,
    picture,
    unpack,
)
from benchcurate.curation.images.survivor import rank as survivor_rank
from benchcurate.curation.release.reference import is_release, release_reference, release_rows
from benchcurate.curation.stage import SetStage, StageConfig, StageContext
from benchcurate.curation.text import normalise, question_text
from benchcurate.schemas import Drop, Keep, Sample, Verdict

PICTURES_NAMESPACE = "image_pictures"  # of the run cache: thumbnails and keep-rule traits by content sha256


class NearDedupConfig(StageConfig):
    max_hamming_distance: int = Field(8, ge=0, le=32, description="pairs at this distance or less are candidates")
    match_orientations: bool = Field(True, description="also match mirror images and quarter turns")
    match_borders: bool = Field(True, description="also match pictures with uniform borders added or removed")
    match_crops: bool = Field(False, description="also match pictures with a few percent cut from a side (compares "
                                                 "centres: a camera pan or a stereo pair can match too)")
    verify: bool = Field(True, description="compare each candidate pair on thumbnails before grouping it")
    max_hash256_distance: int = Field(40, ge=0, le=256, description="verification: 256-bit pHash distance above "
                                                                   "which a candidate pair is two pictures")
    max_local_difference: float = Field(0.27, ge=0, description="verification: a block of the normalised difference "
                                                               "this far above the median block makes two pictures")
    keep_rule: Literal["least_processed", "largest"] = Field("least_processed", description="which copy is kept")
    source_priority: tuple[str, ...] = Field((), description="source datasets to prefer, most preferred first")
    reference: tuple[str, ...] = Field((), description="hashes files (JSONL), release folders or published versions "
                                                       "(hf://ORG/NAME@v0.1.0) to check against")


class ImageKey(NamedTuple):
    """What the image dedup stages decide on: the keep rule's fields, the hashes, the item's questions, its path."""

    id: str
    sha256: str
    phash: str | None
    pixels: int
    size_bytes: int
    source: str
    questions: str = ""  # digest of the normalised user turns; "" for an image with no text yet
    path: str = ""
    turned: tuple[str, ...] = ()  # pHashes of the 7 other orientations, in TURNS order
    trimmed: str | None = None
    centre: str | None = None


def image_key(item: Sample, cfg: object = None) -> ImageKey:
    image = item.images[0]
    users = question_text(item, "user_turns")
    found = item.scores.get("image_phash") or {}
    turned = found.get("phash_orientations") or ""
    return ImageKey(item.id, image.sha256, image.phash, (image.width or 0) * (image.height or 0), image.size_bytes,
                    item.provenance.source_dataset, sha256_json(normalise(users))[:16] if users else "",
                    image.path, tuple(turned.split(",")) if turned else (),
                    found.get("phash_trimmed"), found.get("phash_centre"))


def preference(key: ImageKey, source_priority: tuple[str, ...]) -> tuple:
    """Sort key of the `largest` keep rule, and the tie-break of least_processed: smaller is preferred."""
    rank = source_priority.index(key.source) if key.source in source_priority else len(source_priority)
    return (-key.pixels, -key.size_bytes, rank, key.id)


def distance(first: str, second: str) -> int:
    return (int(first, 16) ^ int(second, 16)).bit_count()


def load_reference(location: str) -> tuple[list[str], np.ndarray]:
    """(names, hashes) of a hashes file, or of a release's `image_phash` column (a folder, or a published version
    as hf://ORG/NAME@REVISION)."""
    if is_release(location):
        release = release_reference(location)
        rows = [row for row in release_rows(release.folder, ["index", "image_phash"]) if row["image_phash"]]
        return ([f"{release.label}:{row['index']}" for row in rows],
                np.array([int(row["image_phash"], 16) for row in rows], dtype=np.uint64))
    from benchcurate.curation.images.hashfile import read_hashes

    table = read_hashes(Path(location))
    return table.paths, table.hashes


def reference_digest(cfg: NearDedupConfig, run_dir: Path | None = None) -> str:
    """Part of the stage key: each reference's identity (a release's checksums or Hub commit; a hashes file's
    size and modification time)."""
    listing = []
    for location in cfg.reference:
        path = Path(location)
        if is_release(location):
            listing.append([location, release_reference(location).identity])
        elif path.exists():
            listing.append([location, path.stat().st_size, path.stat().st_mtime_ns])
        else:
            raise UserError(f"reference {location} does not exist; pass a hashes file, a release folder or "
                            f"hf://ORG/NAME@VERSION")
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


class Candidate(NamedTuple):
    """i's picture, turned by `orientation`, near j's: `view` says which hashes matched."""

    i: int
    j: int
    distance: int
    orientation: str
    view: str


def hashes_of(values: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """(positions that have a hash, the hashes as uint64)."""
    where = np.array([k for k, value in enumerate(values) if value], dtype=np.int64)
    return where, np.array([int(values[k], 16) for k in where], dtype=np.uint64)


def candidates(items: list[ImageKey], cfg: NearDedupConfig, excluded: set[int], workers: int = 1
               ) -> dict[tuple[int, int], list[Candidate]]:
    """Every way each pair of items is near, best first: the whole picture before its trimmed or centre hashes,
    the identity before turns, then by distance (`workers` processes for each search)."""
    found: dict[tuple[int, int], list[Candidate]] = defaultdict(list)

    def add(i: int, j: int, dist: int, orientation: str, view: str) -> None:
        if i == j or i in excluded or j in excluded or items[i].questions != items[j].questions:
            return  # one picture with different questions (imported conversations) is two benchmark items
        found[(min(i, j), max(i, j))].append(Candidate(i, j, dist, orientation, view))

    views = [("full", [item.phash for item in items])]
    if cfg.match_borders:
        views.append(("trimmed", [item.trimmed for item in items]))
    if cfg.match_crops:
        views.append(("centre", [item.centre for item in items]))
    for view, values in views:
        where, hashes = hashes_of(values)
        for i, j, dist in pairs_within(hashes, cfg.max_hamming_distance, workers=workers):
            add(int(where[i]), int(where[j]), int(dist), "identity", view)
    if cfg.match_orientations:
        where, hashes = hashes_of([item.phash for item in items])
        turned_where = [k for k, item in enumerate(items) if item.turned]
        for slot, orientation in enumerate(TURNS):
            turned = np.array([int(items[k].turned[slot], 16) for k in turned_where], dtype=np.uint64)
            for i, j, dist in cross_pairs_within(turned, hashes, cfg.max_hamming_distance, workers=workers):
                add(turned_where[int(i)], int(where[j]), int(dist), orientation, "full")
    return {key: sorted(options, key=lambda pair: (VIEWS.index(pair.view), pair.orientation != "identity",
                                                    pair.distance)) for key, options in found.items()}


def passes(comparison: Comparison, how: dict, cfg: NearDedupConfig) -> bool:
    return comparison.hash256_distance <= cfg.max_hash256_distance and \
        comparison.local_difference <= cfg.max_local_difference and \
        how.get("correlation", 1.0) >= MIN_CORRELATION


def verify(options: list[Candidate], pictures: Callable[[int], Picture | None], cfg: NearDedupConfig,
           aligned: bool = True) -> tuple[Candidate, dict] | None:
    """(the way the pair matched, the evidence) when one of the ways a candidate pair is near passes the
    verification (`aligned`: also placing one picture's content in the other's), else None. Without `verify`, or
    when a picture cannot be decoded again (then said in the evidence), the pHashes decide."""
    if not cfg.verify:
        return options[0], {}
    first, second = pictures(options[0].i), pictures(options[0].j)
    if first is None or second is None:
        return options[0], {"unverified": "a picture of the pair could not be decoded"}
    for number, pair in enumerate(options):  # content placed (aligned) only in the way the pHashes match best
        a, b = (first, second) if pair.i == options[0].i else (second, first)
        for comparison, how in compare_pictures(a, b, pair.orientation, aligned and number == 0):
            if passes(comparison, how, cfg):
                return pair, {**comparison.evidence(), **how}
    return None


def near_thumbnails(pair: Candidate, pictures: Callable[[int], Picture | None], cfg: NearDedupConfig) -> bool:
    """The cheap check of a chain: the pair's whole thumbnails within `max_hash256_distance` (or no verify)."""
    first, second = pictures(pair.i), pictures(pair.j)
    if not cfg.verify or first is None or second is None:
        return True
    return hash256_distance(orient_thumbnail(first.full, pair.orientation), second.full) <= cfg.max_hash256_distance


def order_key(index: int, items: list[ImageKey], cfg: NearDedupConfig, pictures: Callable[[int], Picture | None],
              turned: set[int]) -> tuple:
    """The keep rule's sort key of an item with a near copy: smaller is kept."""
    tail = preference(items[index], cfg.source_priority)
    found = pictures(index) if cfg.keep_rule == "least_processed" else None
    return (*survivor_rank(found.traits, index in turned), *tail) if found is not None else tail


def near_groups(items: list[ImageKey], cfg: NearDedupConfig, pictures: Callable[[int], Picture | None],
                excluded: set[int] = frozenset(), workers: int = 1
                ) -> tuple[dict[int, tuple[int, Candidate, dict]], dict]:
    """Each dropped item -> (kept item, the way the pair matched, the verification's evidence), and the counts
    for the summary.

    Items with a candidate pair are taken in the keep rule's order; each not yet placed is kept, and each of its
    candidates not yet placed that passes the verification against it is dropped as its copy. Only those pairs
    are verified, and each picture is decoded once (`pictures`, asked only for items with a candidate). A kept
    item whose candidate was dropped beside another is a chain: reported (on whole thumbnails), not followed."""
    found = candidates(items, cfg, set(excluded), workers)
    near: dict[int, list[int]] = defaultdict(list)
    for i, j in found:
        near[i].append(j)
        near[j].append(i)
    turned = {index for index, others in near.items()  # matched to most of its near copies only when turned
              if 2 * sum(found[(min(index, o), max(index, o))][0].orientation != "identity" for o in others)
              > len(others)}
    keys = {index: order_key(index, items, cfg, pictures, turned) for index in near}
    dropped: dict[int, tuple[int, Candidate, dict]] = {}
    kept: set[int] = set()
    chains, verified, rejected = [], 0, 0
    for index in sorted(near, key=keys.__getitem__):
        if index in dropped:
            continue
        kept.add(index)
        for other in sorted(near[index], key=keys.__getitem__):
            if other in kept:
                continue
            options = found[(min(index, other), max(index, other))]
            if other in dropped:
                if dropped[other][0] != index and near_thumbnails(options[0], pictures, cfg):
                    chains.append({"kept": items[index].id, "near_dropped": items[other].id,
                                   "kept_in_place": items[dropped[other][0]].id})
                continue
            verified += 1
            result = verify(options, pictures, cfg)
            if result is None:
                rejected += 1
                continue
            dropped[other] = (index, *result)
    summary = {"candidate_pairs": len(found), "verified_pairs": verified, "rejected_by_verification": rejected,
               "turned_or_trimmed_pairs": sum(1 for _, pair, evidence in dropped.values()
                                              if pair.orientation != "identity"
                                              or evidence.get("compared_on", "full") != "full"),
               "chains_not_followed": len(chains), "chains": chains[:20]}
    return dropped, summary


def picture_loader(items: list[ImageKey], ctx: StageContext | None) -> Callable[[int], Picture | None]:
    """An item's Picture (thumbnails and keep-rule traits), read from the run cache (when there is a context)
    or made by decoding its file once; None for a file that cannot be decoded again."""
    made: dict[int, Picture | None] = {}

    def load(index: int) -> Picture | None:
        if index not in made:
            key = f"{items[index].sha256}:v3"  # v3: one reduced RGB decode, content thumbnail and traits
            cache = ctx.cache if ctx is not None else None
            stored = cache.get_bytes_many(PICTURES_NAMESPACE, [key]).get(key) if cache else None
            if stored is not None:
                made[index] = unpack(stored)
            else:
                try:
                    made[index] = picture(Path(items[index].path), DEFAULT_MAX_PIXELS)
                except (ImageDecodeError, OSError):
                    made[index] = None
                if cache and made[index] is not None:
                    cache.put_bytes_many(PICTURES_NAMESPACE, {key: pack(made[index])})
        return made[index]
    return load


def select(items: list[ImageKey], cfg: NearDedupConfig, ctx: StageContext) -> list[Verdict]:
    hashes = np.array([int(item.phash, 16) for item in items], dtype=np.uint64)
    verdicts: list[Verdict] = [Keep()] * len(items)
    contaminated = _reference_matches(items, hashes, cfg)
    for index, drop in contaminated.items():
        verdicts[index] = drop
    dropped, summary = near_groups(items, cfg, picture_loader(items, ctx), set(contaminated))
    ctx.summary.update(summary)
    group_sizes: dict[int, int] = defaultdict(lambda: 1)
    for kept, _, _ in dropped.values():
        group_sizes[kept] += 1
    for index, (kept, pair, evidence) in dropped.items():
        verdicts[index] = Drop(reason="near_duplicate", detail={
            "near_duplicate_of": items[kept].id, "hamming_distance": pair.distance, "orientation": pair.orientation,
            "matched_on": pair.view, **({"verification": evidence} if evidence else {}),
            "keep_rule": cfg.keep_rule, "group_size": group_sizes[kept]})
    return verdicts


STAGE = SetStage(name="image_near_dedup", config=NearDedupConfig, view=image_key, select=select,
                 reasons=("near_duplicate", "matches_reference"), outside_input=reference_digest,
                 version=3)  # 2: questions tell items of one image apart; 3: stars, verification, turns, borders
