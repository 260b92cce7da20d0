"""Near-duplicate images on our labelled set (tests/dedup_set.py): turned, framed and reworked copies match, copies
that differ in one region do not, no item is dropped through a chain; and the pieces under it, checked alone."""

from __future__ import annotations

import imagehash
import numpy as np
import pytest
from PIL import Image

from benchcurate.curation.images.likeness import (
    PIL_TRANSPOSE,
    compare,
    dihedral_hashes,
    likeness_hashes,
    thumbnails,
    trim_borders,
)
from benchcurate.curation.images.near_dedup import NearDedupConfig, near_groups
from tests import dedup_set
from tests.helpers import SHARED_DIR, shared_lock

# measured on the part of the set the tests build (5 photos and their 33 copies and hard negatives); the whole
# set's figures are in bench/results/near_dup_quality.md
RECALL_FLOORS = {"resize_down": 1.0, "recompress": 1.0, "crop_one_side": 0.7, "crop_all_sides": 0.5,
                 "thin_border": 1.0, "thick_border": 0.6, "brightness": 1.0, "format_change": 1.0, "greyscale": 1.0,
                 "mirror": 1.0, "quarter_turn": 1.0, "sharpen": 0.9, "blur": 1.0}


@pytest.fixture(scope="module")
def labelled():
    with shared_lock("dedup-set-v3"):
        entries = dedup_set.build(SHARED_DIR / "dedup-set-v3", photos=5, renders_per_kind=0)
    items = dedup_set.keys(entries)
    return entries, items, dedup_set.pictures_of(items)


def distance(first: str, second: str) -> int:
    return (int(first, 16) ^ int(second, 16)).bit_count()


def test_the_orientation_hashes_are_the_phash_of_the_turned_picture():
    for path, _ in dedup_set.sources(photos=6, renders_per_kind=0):
        image = Image.open(path).convert("RGB")
        hashes = dihedral_hashes(image)
        assert hashes["identity"] == str(imagehash.phash(image))
        for name, transpose in PIL_TRANSPOSE.items():
            if transpose is not None:  # equal up to ties at the median
                assert distance(hashes[name], str(imagehash.phash(image.transpose(transpose)))) <= 2, (path, name)


def test_a_frame_is_trimmed_and_a_picture_without_one_is_left_alone():
    photo = Image.open(dedup_set.sources(photos=1, renders_per_kind=0)[0][0]).convert("RGB")
    framed = Image.new("RGB", (photo.width + 60, photo.height + 40), (0, 0, 0))
    framed.paste(photo, (30, 20))
    assert trim_borders(photo) is photo
    assert abs(trim_borders(framed).width - photo.width) <= 2 and abs(trim_borders(framed).height - photo.height) <= 2
    grey = framed.convert("L")
    assert distance(likeness_hashes(grey)["phash_trimmed"], likeness_hashes(photo.convert("L"))["phash_trimmed"]) <= 4


def test_verification_tells_a_local_change_from_a_global_one():
    photo = Image.open(dedup_set.sources(photos=1, renders_per_kind=0)[0][0]).convert("RGB")
    rng = np.random.default_rng(0)
    darker = Image.fromarray((np.asarray(photo) * 0.8).astype(np.uint8))
    patched = photo.copy()
    patched.paste((255, 0, 255), (photo.width // 3, photo.height // 3, photo.width // 3 + photo.width // 12,
                                  photo.height // 3 + photo.height // 12))
    base = thumbnails(photo)[0]
    assert compare(base, thumbnails(darker)[0]).local_difference < NearDedupConfig().max_local_difference
    assert compare(base, thumbnails(patched)[0]).local_difference > 2 * NearDedupConfig().max_local_difference
    assert compare(base, base) == (0, 0.0) and rng is not None


def test_the_labelled_set_meets_its_floors(labelled):
    entries, items, pictures = labelled
    cfg = NearDedupConfig()
    dropped, summary = near_groups(items, cfg, pictures)
    scores = dedup_set.score(entries, items, dropped, cfg.max_hamming_distance)
    for kind, floor in RECALL_FLOORS.items():
        assert scores.recall[kind] >= floor, (kind, scores)
    assert sum(scores.negative_merges.values()) == 0 and scores.impure_groups == 0, scores
    assert scores.original_merges == 0 and summary["rejected_by_verification"] > 0
    # borders and turns are found where plain pHash misses them
    for kind in ("thick_border", "mirror", "quarter_turn"):
        assert scores.recall[kind] > scores.phash_recall[kind], (kind, scores)
    # plain pHash at the same threshold merges hard negatives the verification keeps apart
    naive, _ = near_groups(items, NearDedupConfig(verify=False, match_orientations=False, match_borders=False),
                           pictures)
    assert sum(dedup_set.score(entries, items, naive, cfg.max_hamming_distance).negative_merges.values()) > 3


def test_a_crop_is_placed_inside_its_original_and_a_camera_shift_is_not(labelled):
    """The aligned verification: a copy cut by 5% on one side lies inside its original at the cut; a view moved
    6% diagonally correlates worse wherever it is put."""
    from benchcurate.curation.images.likeness import place

    entries, items, pictures = labelled
    named = {entry.path.name: k for k, entry in enumerate(entries)}
    original = pictures(named["astronaut.png"])
    cropped = pictures(next(k for name, k in named.items() if name.startswith("astronaut__crop_one_5")))
    shifted = pictures(named["astronaut__shift_6.png"])
    ratio = (cropped.content_size[0] / original.content_size[0]) / (cropped.content_size[1] / original.content_size[1])
    window = place(original.content, cropped.content, ratio)
    assert window.correlation > 0.97 and min(window.width, window.height) == pytest.approx(0.95, abs=0.02)
    moved = place(original.content, shifted.content, 1.0)
    assert moved.correlation < window.correlation - 0.05


def test_the_keep_rule_ranks_what_a_copy_lost_before_marks_of_processing():
    from benchcurate.curation.images.survivor import Traits, rank

    original = Traits(True, 1_000_000, 0.0, True, 100, -10.0)
    assert rank(original) < rank(original._replace(colour=False, marks=-20.0))           # colour beats greyscale
    assert rank(original) < rank(original._replace(content_pixels=500_000, marks=-20.0))  # more pixels
    assert rank(original) < rank(original._replace(frame_share=0.1, marks=-20.0))        # no frame beats a frame
    assert rank(original) < rank(original, turned=True)                                  # not the turned copy
    assert rank(original._replace(lossless=False, quality=90)) < rank(original._replace(lossless=False, quality=60))
    assert rank(original) < rank(original._replace(marks=-5.0))                          # fewer marks
