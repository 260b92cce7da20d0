"""image_near_dedup: items whose pictures are near copies are grouped around the one kept; the others are dropped.

MultiVerse (Sec. 3.1) removed 13,998 of 48,100 images (29.1%) with pHash and states no threshold; ours is a
parameter (default 8). First, items matching a reference set (hashes files from `curate images hash`, earlier
release folders, or versions published on the Hub as hf://ORG/NAME@v0.1.0) are dropped as `matches_reference`,
naming the reference, to catch contamination. Then:

1. Candidates: pairs whose pHashes are within `max_hamming_distance`, found exactly in sub-quadratic time
   (`curation.images.hamming`); also, with `match_orientations`, a picture's mirror images and quarter turns
   against the others' pHashes; with `match_borders`, the pHashes of the pictures without uniform borders; with
   `match_crops`, those of their centres (`curation.images.likeness`).
2. Groups. Items with a candidate pair are taken in a provisional order (`least_processed`, the default: colour, the
   full size most items linked to it through candidate pairs share, no frame, most pixels, least compression,
   `order_keys`; `largest`: most pixels, then the largest file; then `source_priority`, then the smaller id). Each
   item not yet placed is a group's centre: its candidates not yet placed are verified against it, then their own
   candidates, and so on. A candidate that fails against the centre without a clear local change (twice
   `max_local_difference`, or over it and concentrated in one region: `max_local_concentration`) may pass against one
   or two copies already in the group that it is a candidate of, never one with fewer pixels or less detail (a thick
   frame against a thin one; a strongly brightened copy against a mildly brightened one).
3. Verification (`curation.images.verify`), in the turn the candidate pair says (when the two pictures' sides
   are swapped, and only a quarter turn or a transpose can match them, in such a turn: `fitting_turns`): the
   two pictures placed on each other at a fraction of a pixel
   (whole on whole, content on content, or a crop inside its original; two pictures of one size in place, or
   two pictures when they line up only moved off that grid: a video's next frame), then two pictures if each
   shows more than `max_uncovered_share` that the other does not (a camera shift, a stereo pair) or one region
   stands out by more than `max_local_difference` once tone, resampling and a pixel of misplacement are allowed
   for (spot the difference, a changed label, a moved object, the next frame of a video). Each picture is decoded once,
   reduced, for this and for the keep rule's traits (cached by content in the run cache; `curate images dups`
   reads it from the side file `curate images hash --likeness` wrote from its own decode). A candidate that
   passes and has small print is looked at again against the copy of its group on its own pixel grid, both
   decoded finer (512 pixels), and stays apart when the change there is concentrated (`finer_look`: a word
   swapped on a page, which at 256 pixels leaves no more than resampling does).
4. The copy kept (`curation.images.survivor.elect`, with `least_processed`): by what each copy lost, read from
   where it was placed on the centre (colour, pixels, the framing and orientation most copies share,
   compression), then by marks of processing measured at full size on the copies still tied. Without
   verification, or with `largest`, the centre is kept. When the copy kept is not the centre, each candidate
   that failed against the centre without a clear local change is verified once against the copy kept (a
   centre brightened until it clips cannot be placed on a sharpened copy, and no copy with less detail may
   vouch for that); those that pass bring their own candidates, verified as the others' were, and the vote is
   taken again.
The decision records the rule, pHash distance, orientation, the hash that matched and the verification's
evidence (and `verified_against` when that was another copy of the group). A candidate of a dropped item that
was not verified into its group stays, and is reported in the summary as a chain.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
from pydantic import Field

from benchcurate.curation.core.decode import DEFAULT_MAX_PIXELS, ImageDecodeError, decode_image
from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.fingerprint import sha256_json
from benchcurate.curation.core.grouping import groups_from_pairs
from benchcurate.curation.core.hamming import cross_pairs_within, pairs_within
from benchcurate.curation.core.texts import normalise, question_text
from benchcurate.curation.engine.stage import SetStage, StageConfig, StageContext
from benchcurate.curation.images.hashfile import HashTable, read_hashes
from benchcurate.curation.images.likeness import ORIENTATIONS, TURNS, VIEWS
from benchcurate.curation.images.survivor import Member, elect, provisional
from benchcurate.curation.images.verify import (
    COMPOSED,
    SMALL_PRINT,
    Picture,
    UnknownPicture,
    compare,
    finer,
    inverse,
    likeliest_turns,
    lines_up,
    oriented,
    pack,
    picture,
    same_grid_concentration,
    small_print,
    unpack,
)
from benchcurate.curation.images.verify import Verdict as PairVerdict
from benchcurate.curation.release.files import release_rows
from benchcurate.curation.release.reference import is_release, release_reference
from benchcurate.schemas import Drop, Keep, Sample, Verdict

ASPECT_SLACK = 0.25  # in the log of a picture's aspect ratio: more than a crop of 20% of a side and a frame change
MAX_TURNS = 1  # turns of a pair verified at most, the likeliest (`verify.likeliest_turns`)
MAX_TRIES_VIA_COPIES = 2  # copies in a group a candidate that failed against the centre is verified against
VIA_COPY_LIMIT = 2.0  # times max_local_difference: a candidate failing the centre by more gets no other try
VIA_DETAIL_TOLERANCE = 0.1  # log2 units: a copy with this much less fine detail than a candidate may not vouch
FINER_CONCENTRATION = 12.0  # a finer look's change concentrated more than this is a change (tests/dedup_set.py with
# every render: benign copies at most 10.3, a blurred receipt 10.0; removed objects and swapped words 15-110)
FINER_SCREEN = 5.0  # the same concentration on the fine copies first: only a pair over it is decoded finer (on the
# 1,864-file labelled set every pair over FINER_CONCENTRATION finer was over 13 here; 32 of 327 pairs were over 5)
FINER_GAIN = 2  # times the fine copy's pixels a picture must have to be looked at finer (a small icon was
# verified at its own size already)
TWIN_CORRELATION = 0.9  # of two fine copies of one size: above it they lie on one pixel grid, upright
PICTURES_NAMESPACE = "image_pictures"  # of the run cache: verify.Picture (fine copy, traits) by content sha256


class NearDedupConfig(StageConfig):
    max_hamming_distance: int = Field(8, ge=0, le=32, description="pairs at this distance or less are candidates")
    match_orientations: bool = Field(True, description="also match mirror images and quarter turns")
    match_borders: bool = Field(True, description="also match pictures with uniform borders added or removed")
    match_crops: bool = Field(
        False,
        description="also match pictures with a few percent cut from a side (compares "
        "centres: a camera pan or a stereo pair can match too)",
    )
    verify: bool = Field(True, description="place each candidate pair on each other and compare it before grouping it")
    max_local_difference: float = Field(
        0.076,
        ge=0,
        description="verification: a region standing out this far (share of the grey-level range) makes two pictures",
    )
    max_local_concentration: float = Field(
        9.0,
        ge=0,
        description="verification: a change over max_local_difference whose worst region stands out this many times "
        "the typical region's leftover is a clear local change (no other copy of the group may vouch for it)",
    )
    max_uncovered_share: float = Field(
        0.015,
        ge=0,
        le=1,
        description="verification: each picture showing this "
        "share of its content that the other does "
        "not (a camera shift) makes two pictures",
    )
    keep_rule: Literal["least_processed", "largest"] = Field("least_processed", description="which copy is kept")
    source_priority: tuple[str, ...] = Field((), description="source datasets to prefer, most preferred first")
    reference: tuple[str, ...] = Field(
        (),
        description="hashes files (JSONL), release folders or published versions "
        "(hf://ORG/NAME@v0.1.0) to check against",
    )


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
    return ImageKey(
        item.id,
        image.sha256,
        image.phash,
        (image.width or 0) * (image.height or 0),
        image.size_bytes,
        item.provenance.source_dataset,
        sha256_json(normalise(users))[:16] if users else "",
        image.path,
        tuple(turned.split(",")) if turned else (),
        found.get("phash_trimmed"),
        found.get("phash_centre"),
    )


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
        return (
            [f"{release.label}:{row['index']}" for row in rows],
            np.array([int(row["image_phash"], 16) for row in rows], dtype=np.uint64),
        )
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
            raise UserError(
                f"reference {location} does not exist; pass a hashes file, a release folder or hf://ORG/NAME@VERSION"
            )
    return sha256_json(listing)


def _reference_matches(items: list[ImageKey], hashes: np.ndarray, cfg: NearDedupConfig) -> dict[int, Drop]:
    drops: dict[int, Drop] = {}
    for location in cfg.reference:
        names, reference = load_reference(location)
        for query, ref, dist in cross_pairs_within(hashes, reference, cfg.max_hamming_distance):
            current = drops.get(int(query))
            if current is None or dist < current.detail["hamming_distance"]:
                drops[int(query)] = Drop(
                    reason="matches_reference",
                    detail={"reference": names[int(ref)], "reference_set": location, "hamming_distance": int(dist)},
                )
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


def candidates(
    items: list[ImageKey], cfg: NearDedupConfig, excluded: set[int], workers: int = 1
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
    return {
        key: sorted(options, key=lambda pair: (VIEWS.index(pair.view), pair.orientation != "identity", pair.distance))
        for key, options in found.items()
    }


class Copy(NamedTuple):
    """How a dropped item was found a copy of the kept one."""

    kept: int
    distance: int  # pHash bits between the two
    orientation: str  # the turn of the group's centre that lines it up with the copy
    view: str  # which hashes made the copy a candidate of the one it was verified against
    evidence: dict  # the verification's, and `verified_against` when that was not the kept item


def _turns(options: list[Candidate], first: int) -> list[str]:
    """The turns of item `first` that the candidate options say line it up with the other, then upright."""
    found = [pair.orientation if pair.i == first else inverse(pair.orientation) for pair in options]
    return list(dict.fromkeys([*found, "identity"]))


def verify(
    first: int, second: int, turns: list[str], pictures: Callable[[int], Picture | None], cfg: NearDedupConfig
) -> PairVerdict | None:
    """The verification of a pair (`verify.compare`, the first turned by each of `turns` in order until one
    passes, or by the MAX_TURNS likeliest of them); None when a picture cannot be decoded again. Without
    `verify`, a pass with no evidence."""
    if not cfg.verify:
        return PairVerdict(True, {}, turns[0], None)
    a, b = pictures(first), pictures(second)
    if a is None or b is None:
        return None
    best = None
    for turn in likeliest_turns(a, b, fitting_turns(a.size, b.size, turns), MAX_TURNS):
        found = compare(a, b, turn, cfg.max_local_difference, cfg.max_uncovered_share)
        if found.same:
            return found
        if best is None or (found.evidence.get("correlation") or -1) > (best.evidence.get("correlation") or -1):
            best = found
    return best


def fitting_turns(first: tuple[int, int], second: tuple[int, int], turns: list[str]) -> list[str]:
    """Of `turns` of a picture of size `first` (width, height), those under which its sides can match those of
    one of size `second`: when only a quarter turn (or a transpose) can, or only none can, the others would
    need a stretch no crop or frame makes (ASPECT_SLACK in the log of the aspect ratio). A picture symmetric
    enough for its pHash to match the other's upright is then tried turned: the likelier of the two quarter
    turns when `turns` has no turn that fits."""
    here, there = np.log(first[0] / first[1]), np.log(second[0] / second[1])
    upright, swapped = abs(here - there) <= ASPECT_SLACK, abs(here + there) <= ASPECT_SLACK
    if upright == swapped:
        return turns
    fitting = [turn for turn in turns if ORIENTATIONS[turn][0] == swapped]
    return fitting or (["rotate_90", "rotate_270"] if swapped else ["identity"])


def through_copy(centre_on_copy: PairVerdict | None, copy_on_item: PairVerdict) -> PairVerdict | None:
    """The centre of a group placed on an item that failed against the centre and passed against a copy in the
    group (a copy clipped or sharpened too far to be placed on the others may be a group's provisional centre):
    the centre's placement on the copy, then the copy's upright on the item (None when either is unknown or the
    copy is turned on the item). The keep rule then weighs the item too, not only the copies placed directly."""
    if centre_on_copy is None or centre_on_copy.placement is None or copy_on_item.placement is None:
        return None
    if copy_on_item.orientation != "identity":
        return None
    return PairVerdict(
        copy_on_item.same,
        copy_on_item.evidence,
        centre_on_copy.orientation,
        copy_on_item.placement.after(centre_on_copy.placement),
    )


def lined_up(found: PairVerdict | None) -> bool:
    """Whether a verification placed the pair, and well enough to read a change or a framing from
    (`verify.lines_up`)."""
    return found is not None and found.placement is not None and lines_up(found.same, found.evidence.get("correlation"))


def changed(found: PairVerdict | None, cfg: NearDedupConfig) -> bool:
    """Whether a failed verification lined the pair up and found a clear local change: more than twice
    `max_local_difference`, or over it and concentrated in one region (`verify.Leftover.concentration` over
    `max_local_concentration`: a swapped word, a removed object; a brightened copy's clipping is spread), or two
    pictures of one size off each other's pixel grid (`moved`: another frame, which the centre's copies frame as
    the centre does). Then no copy of the group may vouch for it: a copy blurred, shrunk or brightened hides a
    small change better than the centre does."""
    if not lined_up(found):
        return False
    if "moved" in found.evidence:  # copies of one size, not on one grid: another frame, not a copy of the centre's
        return True
    local = found.evidence.get("local_difference", 0)
    return local > VIA_COPY_LIMIT * cfg.max_local_difference or (
        local > cfg.max_local_difference and found.evidence.get("concentration", 0) > cfg.max_local_concentration
    )


def may_vouch(copy: int, candidate: int, items: list[ImageKey], pictures: Callable[[int], Picture | None]) -> bool:
    """Whether a copy in a group may be verified against in place of the centre: not one with fewer pixels or
    less fine detail than the candidate (a shrunk or blurred copy hides a small change)."""
    first, second = pictures(copy), pictures(candidate)
    return (
        first is not None
        and second is not None
        and first.traits.pixels >= 0.9 * second.traits.pixels
        and first.traits.detail >= second.traits.detail - VIA_DETAIL_TOLERANCE
    )


def _correlation(first: np.ndarray, second: np.ndarray) -> float:
    a, b = first.astype(np.float32), second.astype(np.float32)
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).mean() / max(float(a.std() * b.std()), 1e-6))


def finer_look(
    candidate: int,
    members: list[int],
    pictures: Callable[[int], Picture | None],
    detailed: Callable[[int], bool],
    concentration: Callable[[int, int], float | None],
) -> dict | None:
    """The evidence against an accepted candidate with small print (`detailed`: `verify.small_print`, and
    enough pixels for a finer copy to show more), looked at again against the first copy of its group on the
    same pixel grid (same size, upright, its fine copy lined up already): over FINER_SCREEN on the fine copies,
    then on both decoded finer (`concentration`), the change concentrated in one region more than
    FINER_CONCENTRATION times the typical region's leftover (a word swapped in small print, hidden at the fine
    copies' size among what resampling changes). None when there is no such copy or no such change."""
    found = pictures(candidate)
    if found is None:
        return None
    twins = [  # copies on its pixel grid: the cheap tests first, small print only when there is one
        (index, twin)
        for index, twin in ((index, pictures(index)) for index in members)
        if twin is not None and twin.size == found.size and twin.fine.shape == found.fine.shape
    ]
    if not twins or not detailed(candidate):
        return None
    for index, twin in twins:
        if _correlation(twin.fine, found.fine) < TWIN_CORRELATION:
            continue
        if same_grid_concentration(twin.fine, found.fine, FINER_SCREEN) <= FINER_SCREEN:  # nothing stands out here
            return None
        finer_found = concentration(index, candidate)
        if finer_found is None or finer_found <= FINER_CONCENTRATION:
            return None
        return {"finer_look_against": index, "finer_concentration": round(finer_found, 1)}
    return None


def member(
    index: int, centre: int, found: PairVerdict | None, pictures: Callable[[int], Picture | None]
) -> Member | None:
    """The keep rule's view of a verified copy, through the placement of the group's centre on it."""
    picture, base = pictures(index), pictures(centre)
    if picture is None or base is None:
        return None
    if index == centre:
        height, width = picture.fine.shape
        content = (picture.content[2] - picture.content[0]) * (picture.content[3] - picture.content[1])
        return Member(
            index, picture.traits, 1.0, (0.0, 0.0, 1.0, 1.0), round(content / (width * height), 3), "identity"
        )
    if found is None or found.placement is None:
        return None
    turned = oriented(base, found.orientation)
    placement = found.placement
    height, width = turned.fine.shape
    own_height, own_width = picture.fine.shape
    density = (
        placement.ax
        * (picture.size[0] / own_width)
        / (turned.size[0] / width)
        * placement.ay
        * (picture.size[1] / own_height)
        / (turned.size[1] / height)
    ) ** 0.5
    back = placement.inverse()
    whole = back.box((0.0, 0.0, float(own_width), float(own_height)))
    framing = tuple(round(value / side, 4) for value, side in zip(whole, (width, height, width, height)))
    content = back.box(picture.content)
    area = (content[2] - content[0]) * (content[3] - content[1]) / (width * height)
    return Member(index, picture.traits, density, framing, round(area, 3), found.orientation)


def neighbours(found: dict[tuple[int, int], list[Candidate]]) -> dict[int, list[int]]:
    """Each item of a candidate pair (`candidates`) -> the items it is near."""
    near: dict[int, list[int]] = defaultdict(list)
    for i, j in found:
        near[i].append(j)
        near[j].append(i)
    return near


def order_keys(
    near: dict[int, list[int]], items: list[ImageKey], cfg: NearDedupConfig, pictures: Callable[[int], Picture | None]
) -> dict[int, tuple]:
    """The keep rule's sort key of each item with a near copy (smaller first): the group centres' order, the
    order candidates are queued in, and the last tie-break of the vote. With `least_processed`,
    `survivor.provisional`, told whether the item's size is odd: fewer of the items linked to it through candidate
    pairs have its full size (either way up) than have another size (a tie is not odd). Most edits keep the
    original's size (a tone change, a re-save, sharpening, blurring, a turn), so the centre then lies on most of
    its copies' pixel grid; a copy with a wide frame added as the centre made a crop search of each pair."""
    traits, sizes = {}, {}  # of the items whose picture is read (the keep rule's traits, not the pictures)
    for index in near if cfg.keep_rule == "least_processed" else ():
        found = pictures(index)
        if found is not None:
            traits[index], sizes[index] = found.traits, tuple(sorted(found.size))
    odd: set[int] = set()
    if sizes:
        pairs = ((index, other) for index, others in near.items() for other in others)
        for linked in groups_from_pairs(len(items), pairs):
            shared = Counter(sizes[index] for index in linked if index in sizes)
            top = max(shared.values(), default=0)
            odd.update(index for index in linked if index in sizes and shared[sizes[index]] < top)
    keys = {}
    for index in near:
        tail = preference(items[index], cfg.source_priority)  # not the larger file in `provisional`'s place: noise
        keys[index] = (*provisional(traits[index], index in odd), *tail[2:]) if index in traits else tail
    return keys


def _relative_turn(group: dict, kept: int, index: int, centre: int) -> str:
    """The turn of the kept picture that lines it up with a dropped one, from the centre's turns onto both."""

    def turn(member: int) -> str:
        found = group[member].placement if member in group else None
        return "identity" if member == centre or found is None else found.orientation

    return COMPOSED[(inverse(turn(kept)), turn(index))]


class Found(NamedTuple):
    """A copy verified into a group."""

    placement: PairVerdict | None  # the centre placed on it (for the keep rule), when that placement was found
    option: Candidate  # the candidate pair that brought it into the group
    against: int  # the item it was verified against (the centre, or a copy in the group)
    evidence: dict


def near_groups(
    items: list[ImageKey],
    cfg: NearDedupConfig,
    pictures: Callable[[int], Picture | None],
    excluded: set[int] = frozenset(),
    workers: int = 1,
    full_size: Callable[[int], np.ndarray | None] | None = None,
) -> tuple[dict[int, Copy], dict]:
    """Each dropped item -> how it is a copy of the kept one, and the counts for the summary.

    Items with a candidate pair are taken in the order of `order_keys`; each not yet placed is the centre of a
    group: its candidates not yet placed are verified against it, then the candidates of those that pass, and
    so on (a copy that fails against the centre may pass against the copy it is a candidate of: a thick frame
    against a thin one). With `least_processed`, the group then keeps the copy that lost least
    (`survivor.elect`, reading where each copy was placed on the centre, and `full_size` pictures for the
    marks of processing), after trying the candidates that failed against the centre against it when it is
    another copy; the others are dropped. Each picture is decoded once (`pictures`)."""
    found = candidates(items, cfg, set(excluded), workers)
    near = neighbours(found)
    keys = order_keys(near, items, cfg, pictures)
    finer_copies: dict[int, np.ndarray | None] = {}  # each file decoded finer once, only for a finer look
    looked: dict[tuple[int, int], float | None] = {}
    fine_print: dict[int, bool] = {}

    def detailed(index: int) -> bool:
        if index not in fine_print:
            found = pictures(index)
            fine_print[index] = (
                found is not None
                and found.size[0] * found.size[1] >= FINER_GAIN * found.fine.size  # a finer copy shows more
                and small_print(found) >= SMALL_PRINT
            )
        return fine_print[index]

    def finer_copy(index: int) -> np.ndarray | None:
        if index not in finer_copies:
            try:
                finer_copies[index] = finer(Path(items[index].path), DEFAULT_MAX_PIXELS)
            except (ImageDecodeError, OSError):
                finer_copies[index] = None
        return finer_copies[index]

    def concentration(twin: int, candidate: int) -> float | None:
        if (twin, candidate) not in looked:
            first, second = finer_copy(twin), finer_copy(candidate)
            looked[(twin, candidate)] = (
                None if first is None or second is None else same_grid_concentration(first, second, FINER_CONCENTRATION)
            )
        return looked[(twin, candidate)]

    dropped: dict[int, Copy] = {}
    placed: set[int] = set()
    counts: dict[str, int] = defaultdict(int)
    rules: dict[str, int] = defaultdict(int)
    seen: dict[int, set[int]] = {}  # per centre: the items verified against it
    # (centre, candidate) turned away by the verification, or by the finer look: a candidate is queued once per copy
    # in the group it is near, so it is counted once per group, and not when a later try admitted it
    turned_away: set[tuple[int, int]] = set()
    finer_rejected: set[tuple[int, int]] = set()
    centre_of: dict[int, int] = {}  # each copy: its group's centre
    for centre in sorted(near, key=keys.__getitem__):
        if centre in placed:
            continue
        placed.add(centre)
        group: dict[int, Found] = {}
        direct_tries: dict[int, PairVerdict | None] = {}  # each candidate verified against the centre once
        tried: dict[int, set[int]] = defaultdict(set)  # and against at most a few copies in the group
        queue: list[tuple[int, int]] = []

        def admit(
            other: int,
            result: PairVerdict,
            against: int,
            placement: PairVerdict | None,
            option: Candidate,
            centre: int = centre,
            group: dict[int, Found] = group,
            queue: list[tuple[int, int]] = queue,
        ) -> bool:
            """`other`, verified against `against` (`result`), joins the group unless the finer look turns it
            away; its candidates not yet placed are queued, to be verified against the centre first."""
            if cfg.verify and finer_look(other, [centre, *group], pictures, detailed, concentration) is not None:
                finer_rejected.add((centre, other))
                return False
            placed.add(other)
            centre_of[other] = centre
            group[other] = Found(placement, option, against, result.evidence)
            if cfg.verify:  # the candidates of a verified copy are verified too (against the centre first)
                queue.extend((nxt, other) for nxt in sorted(near[other], key=keys.__getitem__) if nxt not in placed)
            return True

        def grow(
            centre: int = centre,
            group: dict[int, Found] = group,
            direct_tries: dict[int, PairVerdict | None] = direct_tries,
            tried: dict[int, set[int]] = tried,
            queue: list[tuple[int, int]] = queue,
        ) -> None:
            """Verify the queued candidates (against the centre, then perhaps a copy in the group) until none
            is left."""
            while queue:
                other, via = queue.pop(0)
                if other in placed:
                    continue
                options = found[(min(via, other), max(via, other))]
                turns = _turns(options, via)
                if via != centre and group[via].placement is not None:  # the centre as it lies on `via`, then on
                    turns = list(
                        dict.fromkeys(
                            [COMPOSED[(group[via].placement.orientation, turn)] for turn in turns] + ["identity"]
                        )
                    )
                if other not in direct_tries:
                    counts["verified_pairs"] += 1
                    direct_tries[other] = verify(centre, other, turns, pictures, cfg)
                direct = direct_tries[other]
                result, against = direct, centre
                if (direct is None or not direct.same) and via != centre and not changed(direct, cfg):
                    # the nearest copies in the group (pHash) that it is a candidate of, a few at most
                    for copy in sorted(
                        (
                            c
                            for c in near[other]
                            if c in group and c not in tried[other] and may_vouch(c, other, items, pictures)
                        ),
                        key=lambda c: (distance(items[c].phash, items[other].phash), keys[c]),
                    ):
                        if len(tried[other]) >= MAX_TRIES_VIA_COPIES:
                            break
                        tried[other].add(copy)
                        counts["verified_pairs"] += 1
                        pair = found[(min(copy, other), max(copy, other))]
                        result, against = verify(copy, other, _turns(pair, copy), pictures, cfg), copy
                        if result is not None and result.same:
                            break
                if result is None or not result.same:
                    turned_away.add((centre, other))
                    continue
                placement = direct if lined_up(direct) else None
                if placement is None and against != centre:  # the centre placed on it through the copy it passed
                    placement = through_copy(group[against].placement, result)
                if admit(other, result, against, placement, options[0]):
                    counts["verified_against_a_copy"] += against != centre
                else:
                    turned_away.add((centre, other))

        queue.extend((other, centre) for other in sorted(near[centre], key=keys.__getitem__))
        grow()
        seen[centre] = set(direct_tries) | {centre}
        if not group:
            continue
        kept = centre
        if cfg.keep_rule == "least_processed" and cfg.verify:
            decoded: dict[int, np.ndarray | None] = {}  # each tied copy decoded at full size once

            def at_full_size(index: int, decoded: dict[int, np.ndarray | None] = decoded) -> np.ndarray | None:
                if index not in decoded:
                    decoded[index] = full_size(index) if full_size else None
                return decoded[index]

            def vote(centre: int = centre, group: dict[int, Found] = group) -> tuple[int, str]:
                members = [
                    member(index, centre, group[index].placement if index in group else None, pictures)
                    for index in [centre, *group]
                ]
                return elect([m for m in members if m is not None], at_full_size, keys.__getitem__)

            kept, rule = vote()
            # a candidate that failed against a provisional centre edited too far to be placed on it (a clipped
            # copy), with no clear local change, gets one try against the copy kept; the copies that join bring
            # their own candidates (verified as the first were), and the vote is then taken again
            late = (
                [
                    other
                    for other, verdict in direct_tries.items()
                    if other not in placed
                    and (verdict is None or not verdict.same)  # not one the finer look turned away
                    and not changed(verdict, cfg)
                    and kept not in tried[other]
                    and (min(kept, other), max(kept, other)) in found
                ]
                if kept != centre
                else []
            )
            admitted = 0
            for other in late:
                counts["verified_pairs"] += 1
                pair = found[(min(kept, other), max(kept, other))]
                result = verify(kept, other, _turns(pair, kept), pictures, cfg)
                if result is None or not result.same:
                    continue
                if admit(other, result, kept, through_copy(group[kept].placement, result), pair[0]):
                    counts["verified_against_the_kept_copy"] += 1
                    admitted += 1
            if admitted:
                grow()
                seen[centre] |= set(direct_tries)
                kept, rule = vote()
            rules[rule] += 1
            counts["kept_other_than_centre"] += kept != centre
        for index in [centre, *group]:
            if index == kept:
                continue
            entry = group[index] if index in group else group[kept]  # the centre: as the kept one was found
            against = entry.against if index in group else centre
            evidence = {
                **entry.evidence,
                **({"verified_against": items[against].id} if against not in (kept, index) else {}),
            }
            centre_of[index] = centre
            dropped[index] = Copy(
                kept,
                distance(items[index].phash, items[kept].phash),
                _relative_turn(group, kept, index, centre),
                entry.option.view,
                evidence,
            )
    chains = [
        {"kept": items[index].id, "near_dropped": items[other].id, "kept_in_place": items[dropped[other].kept].id}
        for i, j in sorted(found)
        for index, other in ((i, j), (j, i))
        if index not in dropped and other in dropped and index not in seen[centre_of[other]]
    ]
    summary = {
        "candidate_pairs": len(found),
        "verified_pairs": counts["verified_pairs"],
        "rejected_by_verification": sum(1 for centre, other in turned_away if centre_of.get(other) != centre),
        "groups": len({copy.kept for copy in dropped.values()}),
        "verified_against_a_copy": counts["verified_against_a_copy"],
        "verified_against_the_kept_copy": counts["verified_against_the_kept_copy"],
        "rejected_by_finer_look": sum(1 for centre, other in finer_rejected if centre_of.get(other) != centre),
        "finer_copies_decoded": len(finer_copies),
        "kept_other_than_centre": counts["kept_other_than_centre"],
        "decided_by": dict(sorted(rules.items())),
        "turned_or_trimmed_pairs": sum(
            1
            for copy in dropped.values()
            if copy.orientation != "identity" or copy.evidence.get("placed", "whole") != "whole"
        ),
        "chains_not_followed": len(chains),
        "chains": chains[:20],
    }
    return dropped, summary


def picture_loader(
    items: list[ImageKey],
    ctx: StageContext | None,
    keep: int = 4096,
    stored: Callable[[int], bytes | None] | None = None,
) -> Callable[[int], Picture | None]:
    """An item's Picture, read from `stored` (`verify.pack` bytes by index, made when the file was hashed), or
    the run cache (when there is a context), or made by decoding its file once; None for a file that cannot be
    decoded again. The last `keep` are held in memory (a group's centre is asked
    for again and again; the run cache, or a decode, serves the rare one asked for after that)."""
    made: OrderedDict[int, Picture | None] = OrderedDict()

    def load(index: int) -> Picture | None:
        if index in made:
            made.move_to_end(index)
            return made[index]
        key = f"{items[index].sha256}:v7"  # v7: the fine copy's shape from the full size (verify._scaled)
        cache = ctx.cache if ctx is not None else None
        raw = stored(index) if stored is not None else None
        if raw is None and cache:
            raw = cache.get_bytes_many(PICTURES_NAMESPACE, [key]).get(key)
        found = None
        if raw is not None:
            try:
                found = unpack(raw)
            except UnknownPicture:  # written by a newer version: made again from the file
                raw = None
        if raw is None:
            try:
                found = picture(Path(items[index].path), DEFAULT_MAX_PIXELS)
            except (ImageDecodeError, OSError):
                found = None
            if cache and found is not None:
                cache.put_bytes_many(PICTURES_NAMESPACE, {key: pack(found)})
        made[index] = found
        if len(made) > keep:
            made.popitem(last=False)
        return found

    return load


def full_size_loader(items: list[ImageKey]) -> Callable[[int], np.ndarray | None]:
    """An item's picture at full size, upright, RGB (for the marks of processing of the copies still tied)."""

    def load(index: int) -> np.ndarray | None:
        try:
            return np.asarray(decode_image(Path(items[index].path), DEFAULT_MAX_PIXELS).image)
        except (ImageDecodeError, OSError):
            return None

    return load


def select(items: list[ImageKey], cfg: NearDedupConfig, ctx: StageContext) -> list[Verdict]:
    hashes = np.array([int(item.phash, 16) for item in items], dtype=np.uint64)
    verdicts: list[Verdict] = [Keep()] * len(items)
    contaminated = _reference_matches(items, hashes, cfg)
    for index, drop in contaminated.items():
        verdicts[index] = drop
    dropped, summary = near_groups(
        items, cfg, picture_loader(items, ctx), set(contaminated), full_size=full_size_loader(items)
    )
    ctx.summary.update(summary)
    group_sizes: dict[int, int] = defaultdict(lambda: 1)
    for copy in dropped.values():
        group_sizes[copy.kept] += 1
    for index, copy in dropped.items():
        verdicts[index] = Drop(
            reason="near_duplicate",
            detail={
                "near_duplicate_of": items[copy.kept].id,
                "hamming_distance": copy.distance,
                "orientation": copy.orientation,
                "matched_on": copy.view,
                **({"verification": copy.evidence} if copy.evidence else {}),
                "keep_rule": cfg.keep_rule,
                "group_size": group_sizes[copy.kept],
            },
        )
    return verdicts


STAGE = SetStage(
    name="image_near_dedup",
    config=NearDedupConfig,
    view=image_key,
    select=select,
    reasons=("near_duplicate", "matches_reference"),
    outside_input=reference_digest,
    version=20,
)  # 2: questions tell items of one image apart; 3: stars, verification, turns, borders;
# 4: placement refined to a fraction of a pixel, local change on the part both show, the copy that lost least kept;
# 5: no copy vouches for a candidate whose change is concentrated in one region; 6: the finer look at small print;
# 7: a copy placed alone sets the most pixels only when well above the others; 8: a copy verified against another
# copy is placed on the centre through it, so the keep rule weighs it; 9: a placement within half a pixel of one
# already tried is not refined or judged again (the same groups on the three labelled sets; the evidence may
# differ); a candidate failing a centre that is not the copy kept is tried against the copy kept; 10: among copies
# tied at the marks, the ones in the tone most copies share before the most grey levels; 11: a copy joining through
# the copy kept brings its own candidates; a pair whose sides only a quarter turn matches is verified turned; a
# placement correlating 0.85-0.9 is judged (a fine texture), but a change it shows is no evidence; 12: a frame is
# told from a plain background (a label on it is compared, a shifted view is not inside a framed copy), and copies on
# one grid allow only for detail both show; 13: among copies tied at the marks, any colour beats none, then the
# sharpness most copies share, and levels skipped inside the range count against a copy; 14: a pass on a placement
# lining the two up less than 0.97 is checked against the next placement (a dark picture's whole laid on a black
# frame passed before its content was tried), and a placement stretching the sides unlike both a whole copy and the
# pictures' shapes is not judged; 15: the fine copy's shape is scaled from the full size (a JPEG's draft and a PNG
# of its pixels were 296 and 297 pixels wide, so a label judged against the PNG was excused as resampling), and a
# placement is stretched beyond 5% (was 10%) and a pixel over the shorter side; 16: pictures of one size are placed
# in place, and are two pictures when they line up only moved off that grid (a next frame); whole or content on
# content, whichever correlates better, is tried first; 17: the provisional centre has the full size most items
# linked to it through candidate pairs share (not a copy with a wide frame added); 18: pictures of one size lined
# up in place within 0.995 (not 0.9995) are still refined when they pass, and a move of over 2 pixels explaining a
# fifth of the mismatch is kept (a plain wallpaper's next frame, panned 1%); 19: a failure lining the two up within
# 0.97 ends the search only once whole and content placements were both tried (a thin black frame on a dark sky);
# 20: a faintly coloured picture's copies in colour show half its colour (not 4 levels), the marks compare the copies
# of the size most tied copies have, and a copy with the chosen one's pixels ties with it


def keys_of(table: HashTable, files: list[str] | None = None) -> list[ImageKey]:
    """The near-duplicate search's view of each row of a hashes file (its likeness hashes when the file has them),
    each file read from `files` (`hashfile.located`) when given, else from its path as written."""
    found = []
    for index, row in enumerate(table.rows):
        turned = row.get("phash_orientations") or ""
        found.append(
            ImageKey(
                str(row["path"]),
                str(row.get("sha256") or row["path"]),
                row["phash"],
                (row.get("width") or 0) * (row.get("height") or 0),
                row.get("bytes") or 0,
                "",
                "",
                files[index] if files is not None else str(row["path"]),
                tuple(turned.split(",")) if turned else (),
                row.get("phash_trimmed"),
                row.get("phash_centre"),
            )
        )
    return found


def duplicate_groups(
    table: HashTable,
    cfg: NearDedupConfig,
    reference: HashTable | None = None,
    workers: int = 1,
    stored: Callable[[int], bytes | None] | None = None,
    files: list[str] | None = None,
) -> Iterator[dict]:
    """What `curate images dups` prints: reference matches first, then groups among the rest, as
    `image_near_dedup` makes them; each file with a candidate is read from `stored` (the side file of `images
    hash --likeness`: `hashfile.stored_pictures`) or else decoded once for the verification, and the copies
    still tied for the keep rule's marks once more at full size (from `files` when given: `keys_of`)."""
    matched: dict[int, list[tuple[int, int]]] = {}
    if reference is not None and len(reference.hashes):
        for query, ref, dist in cross_pairs_within(
            table.hashes, reference.hashes, cfg.max_hamming_distance, workers=workers
        ):
            matched.setdefault(int(query), []).append((int(dist), int(ref)))
    by_reference: dict[int, list[dict]] = {}
    for query, hits in matched.items():
        dist, ref = min(hits)
        by_reference.setdefault(ref, []).append({"path": table.paths[query], "distance": dist})
    for ref in sorted(by_reference):
        yield {"reference": reference.paths[ref], "dropped": sorted(by_reference[ref], key=lambda d: d["path"])}
    keys = keys_of(table, files)
    dropped, _ = near_groups(
        keys, cfg, picture_loader(keys, None, stored=stored), set(matched), workers, full_size=full_size_loader(keys)
    )
    groups: dict[int, list[dict]] = {}
    for index, copy in sorted(dropped.items()):
        groups.setdefault(copy.kept, []).append(
            {
                "path": table.paths[index],
                "distance": copy.distance,
                "orientation": copy.orientation,
                "matched_on": copy.view,
                **({"verification": copy.evidence} if copy.evidence else {}),
            }
        )
    for kept in sorted(groups, key=lambda index: table.paths[index]):
        yield {"kept": table.paths[kept], "dropped": groups[kept]}
