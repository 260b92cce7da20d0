"""image_near_dedup: items whose pictures are near copies are grouped around the one kept; the others are dropped.

MultiVerse (Sec. 3.1) removed 13,998 of 48,100 images (29.1%) with pHash and states no threshold; ours is a
parameter (default 8). First, items matching a reference set (hashes files from `curate images hash`, earlier
release folders, or versions published on the Hub as hf://ORG/NAME@v0.1.0) are dropped as `matches_reference`,
naming the reference, to catch contamination. Then:

1. Candidates: pairs whose pHashes are within `max_hamming_distance`, found exactly in sub-quadratic time
   (`curation.images.hamming`); also, with `match_orientations`, a picture's mirror images and quarter turns
   against the others' pHashes; with `match_borders`, the pHashes of the pictures without uniform borders; with
   `match_crops`, those of their centres (`curation.images.likeness`).
2. Verification (`verify`): each candidate pair is compared on thumbnails in the pair's geometry; a pair whose
   256-bit pHashes differ by more than `max_hash256_distance`, or in which a few blocks differ far more than the
   rest (`max_local_difference`: spot the difference, a changed label, a moved object, the next video frame) is
   two items, not one: for a question about an image, that difference may be the question.
3. Groups are stars around the item kept: items in order (below); each one not yet dropped is kept, and every
   verified near copy of it not yet placed is dropped as its duplicate. An item that is near only to a dropped
   one is kept (a chain is reported in the stage's summary, not followed), so no dropped item is further than
   the threshold from the one kept in its place.
4. The order: the item with the most verified near copies first (so one star holds a whole group); among those
   as connected, `keep_rule`: `least_processed` (default) prefers the picture least worked on
   (`curation.images.survivor`: the original over a blurred, re-compressed, upscaled or contrast-boosted copy),
   then the most pixels, then the largest file; `largest` the most pixels, then the largest file. Then
   `source_priority`, then the smaller id. The decision records the rule, distances, orientation, the hash that matched and the
   verification's evidence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
from pydantic import Field

from benchcurate.curation.core.decode import ImageDecodeError
from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.fingerprint import sha256_json
from benchcurate.curation.core.hamming import cross_pairs_within, pairs_within
from benchcurate.curation.core.texts import normalise, question_text
from benchcurate.curation.engine.stage import SetStage, StageConfig, StageContext
from benchcurate.curation.images.hashfile import HashTable, read_hashes
from benchcurate.curation.images.likeness import TURNS, VIEWS, compare, orient_thumbnail, thumbnails
from benchcurate.curation.release.files import release_rows
from benchcurate.curation.release.reference import is_release, release_reference
from benchcurate.schemas import Drop, Keep, Sample, Verdict

THUMBS_NAMESPACE = "image_thumbs"  # of the run cache: 3 x 64 x 64 greyscale bytes by content sha256
PROCESSING_NAMESPACE = "image_processing"  # of the run cache: the least_processed score by content sha256
PROCESSING_STEP = 1.0  # least_processed scores closer than this (log2 units) count as equal


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


def preference(key: ImageKey, source_priority: tuple[str, ...], processing: float = 0.0) -> tuple:
    """Sort key of the keep rule: smaller is preferred (`processing`: the least_processed rule's score, or 0)."""
    rank = source_priority.index(key.source) if key.source in source_priority else len(source_priority)
    return (processing, -key.pixels, -key.size_bytes, rank, key.id)


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


def verification(pair: Candidate, thumbs: Callable[[int], np.ndarray]) -> dict[str, float]:
    """The finer comparison of a candidate pair, in the pair's geometry (i turned to match j)."""
    view = VIEWS.index(pair.view)
    first = orient_thumbnail(thumbs(pair.i)[view], pair.orientation)
    return compare(first, thumbs(pair.j)[view], pair.view).evidence()


def passes(evidence: dict, cfg: NearDedupConfig) -> bool:
    if "unverified" in evidence:  # a picture that cannot be decoded again: the pHashes decide, and it says so
        return True
    return evidence["hash256_distance"] <= cfg.max_hash256_distance and \
        evidence["local_difference"] <= cfg.max_local_difference


def star_groups(items: list[ImageKey], edges: dict[tuple[int, int], dict], cfg: NearDedupConfig,
                processing: Callable[[int], float]) -> tuple[dict[int, tuple[int, dict]], list[dict]]:
    """Each dropped item -> (the kept item it is a copy of, the pair's evidence), and the chains not followed."""
    near: dict[int, list[int]] = defaultdict(list)
    for i, j in edges:
        near[i].append(j)
        near[j].append(i)
    least = cfg.keep_rule == "least_processed"

    def rank(index: int) -> tuple:
        # the copy near the most others first, so one star holds the whole group; among equally connected copies
        # the keep rule (least_processed scores closer than PROCESSING_STEP are within their noise: a tie)
        tier = round(processing(index) / PROCESSING_STEP) if least else 0
        return (-len(near[index]), tier, *preference(items[index], cfg.source_priority))
    order = sorted(near, key=rank)
    dropped: dict[int, tuple[int, dict]] = {}
    kept: set[int] = set()
    for index in order:
        if index in dropped:
            continue
        kept.add(index)
        for other in near[index]:
            if other not in dropped and other not in kept:
                dropped[other] = (index, edges[(min(index, other), max(index, other))])
    chains = [{"kept": items[index].id, "near_dropped": items[other].id, "kept_in_place": items[dropped[other][0]].id}
              for index in sorted(kept) for other in near[index] if other in dropped and dropped[other][0] != index]
    return dropped, chains


def processing_loader(items: list[ImageKey], ctx: StageContext | None) -> Callable[[int], float]:
    """The least_processed rule's score of an item's picture (`curation.images.survivor`), from the run cache or
    computed from the file once; a file that cannot be read scores as unprocessed (0) and is said so nowhere
    else: the other rules of the order still apply."""
    from benchcurate.curation.core.decode import DEFAULT_MAX_PIXELS
    from benchcurate.curation.images.survivor import processing_score

    made: dict[int, float] = {}

    def load(index: int) -> float:
        if index not in made:
            cache = ctx.cache if ctx is not None else None
            key = f"{items[index].sha256}:v1"
            stored = cache.get(PROCESSING_NAMESPACE, key) if cache else None
            if not isinstance(stored, (int, float)):
                try:
                    stored = processing_score(Path(items[index].path), DEFAULT_MAX_PIXELS)
                except (ImageDecodeError, OSError):
                    stored = 0.0
                if cache:
                    cache.put(PROCESSING_NAMESPACE, key, stored)
            made[index] = float(stored)
        return made[index]
    return load


def thumbnail_loader(items: list[ImageKey], ctx: StageContext | None) -> Callable[[int], np.ndarray]:
    """Thumbnails of an item's picture, read from the run cache (when there is a context) or made by decoding it
    once."""
    from benchcurate.curation.core.decode import DEFAULT_MAX_PIXELS, decode_image

    made: dict[int, np.ndarray] = {}

    def load(index: int) -> np.ndarray:
        if index not in made:
            key = f"{items[index].sha256}:v2"  # v2: from a grey decode, every format reduced
            cache = ctx.cache if ctx is not None else None
            stored = cache.get_bytes_many(THUMBS_NAMESPACE, [key]).get(key) if cache else None
            if stored is None:
                decoded = decode_image(Path(items[index].path), DEFAULT_MAX_PIXELS, 256, grey=True)
                stored = thumbnails(decoded.image).tobytes()
                if cache:
                    cache.put_bytes_many(THUMBS_NAMESPACE, {key: stored})
            made[index] = np.frombuffer(stored, dtype=np.uint8).reshape(len(VIEWS), 64, 64)
        return made[index]
    return load


def near_groups(items: list[ImageKey], cfg: NearDedupConfig, thumbs: Callable[[int], np.ndarray],
                excluded: set[int] = frozenset(), processing: Callable[[int], float] = lambda index: 0.0,
                workers: int = 1) -> tuple[dict[int, tuple[int, Candidate, dict]], dict]:
    """Each dropped item -> (kept item, the way the pair matched, the verification's evidence), and the counts
    for the summary. A pair stands when one of the ways it is near passes the verification; `processing` gives
    the least_processed rule's score of an item (asked only for items with a near copy)."""
    found = candidates(items, cfg, set(excluded), workers)
    edges, pairs, rejected = {}, {}, 0
    for key, options in found.items():
        for pair in options:
            try:
                evidence = verification(pair, thumbs) if cfg.verify else {}
            except (ImageDecodeError, OSError) as error:
                evidence = {"unverified": f"{type(error).__name__}: {error}"}
            if not evidence or passes(evidence, cfg):
                edges[key], pairs[key] = evidence, pair
                break
        else:
            rejected += 1
    dropped, chains = star_groups(items, edges, cfg, processing)
    summary = {"candidate_pairs": len(found), "rejected_by_verification": rejected,
               "turned_or_trimmed_pairs": sum(1 for pair in pairs.values()
                                              if pair.orientation != "identity" or pair.view != "full"),
               "chains_not_followed": len(chains), "chains": chains[:20]}
    return {index: (kept, pairs[(min(index, kept), max(index, kept))], evidence)
            for index, (kept, evidence) in dropped.items()}, summary


def select(items: list[ImageKey], cfg: NearDedupConfig, ctx: StageContext) -> list[Verdict]:
    hashes = np.array([int(item.phash, 16) for item in items], dtype=np.uint64)
    verdicts: list[Verdict] = [Keep()] * len(items)
    contaminated = _reference_matches(items, hashes, cfg)
    for index, drop in contaminated.items():
        verdicts[index] = drop
    dropped, summary = near_groups(items, cfg, thumbnail_loader(items, ctx), set(contaminated),
                                   processing_loader(items, ctx))
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


def keys_of(table: HashTable) -> list[ImageKey]:
    """The near-duplicate search's view of each row of a hashes file (its likeness hashes when the file has them)."""
    found = []
    for row in table.rows:
        turned = row.get("phash_orientations") or ""
        found.append(ImageKey(str(row["path"]), str(row.get("sha256") or row["path"]), row["phash"],
                              (row.get("width") or 0) * (row.get("height") or 0), row.get("bytes") or 0, "", "",
                              str(row["path"]), tuple(turned.split(",")) if turned else (),
                              row.get("phash_trimmed"), row.get("phash_centre")))
    return found


def duplicate_groups(table: HashTable, cfg: NearDedupConfig, reference: HashTable | None = None,
                     workers: int = 1) -> Iterator[dict]:
    """What `curate images dups` prints: reference matches first, then groups among the rest, as
    `image_near_dedup` makes them; thumbnails for the verification are decoded from the files."""
    matched: dict[int, list[tuple[int, int]]] = {}
    if reference is not None and len(reference.hashes):
        for query, ref, dist in cross_pairs_within(table.hashes, reference.hashes, cfg.max_hamming_distance,
                                                   workers=workers):
            matched.setdefault(int(query), []).append((int(dist), int(ref)))
    by_reference: dict[int, list[dict]] = {}
    for query, hits in matched.items():
        dist, ref = min(hits)
        by_reference.setdefault(ref, []).append({"path": table.paths[query], "distance": dist})
    for ref in sorted(by_reference):
        yield {"reference": reference.paths[ref], "dropped": sorted(by_reference[ref], key=lambda d: d["path"])}
    keys = keys_of(table)
    dropped, _ = near_groups(keys, cfg, thumbnail_loader(keys, None), set(matched), processing_loader(keys, None),
                             workers)
    groups: dict[int, list[dict]] = {}
    for index, (kept, pair, evidence) in sorted(dropped.items()):
        groups.setdefault(kept, []).append({"path": table.paths[index], "distance": pair.distance,
                                            "orientation": pair.orientation, "matched_on": pair.view,
                                            **({"verification": evidence} if evidence else {})})
    for kept in sorted(groups, key=lambda index: table.paths[index]):
        yield {"kept": table.paths[kept], "dropped": groups[kept]}
