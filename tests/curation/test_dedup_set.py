"""Near-duplicate images on our labelled set (tests/dedup_set.py): turned, framed and reworked copies match, copies
that differ in one region do not, no item is dropped through a chain; and the pieces under it, checked alone."""

from __future__ import annotations

import imagehash
import numpy as np
import pytest
from PIL import Image, ImageFilter

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

# measured on the whole set (bench/near_dup_quality.py); these floors hold on the part the tests build
FLOORS = {"precision": 0.97, "recall": 0.85, "local_merges": 1}


@pytest.fixture(scope="module")
def labelled():
    with shared_lock("dedup-set"):
        entries = dedup_set.build(SHARED_DIR / "dedup-set", limit_per_category=1)
    items = dedup_set.keys(entries)
    return entries, items, dedup_set.thumbs_of(items), dedup_set.processing_of(items)


def distance(first: str, second: str) -> int:
    return (int(first, 16) ^ int(second, 16)).bit_count()


def test_the_orientation_hashes_are_the_phash_of_the_turned_picture():
    for path, _ in dedup_set.originals(limit_per_category=1)[:6]:
        image = Image.open(path).convert("RGB")
        hashes = dihedral_hashes(image)
        assert hashes["identity"] == str(imagehash.phash(image))
        for name, transpose in PIL_TRANSPOSE.items():
            if transpose is not None:  # equal up to ties at the median
                assert distance(hashes[name], str(imagehash.phash(image.transpose(transpose)))) <= 2, (path, name)


def test_a_frame_is_trimmed_and_a_picture_without_one_is_left_alone():
    photo = Image.open(dedup_set.originals()[0][0]).convert("RGB")
    framed = Image.new("RGB", (photo.width + 60, photo.height + 40), (0, 0, 0))
    framed.paste(photo, (30, 20))
    assert trim_borders(photo) is photo
    assert abs(trim_borders(framed).width - photo.width) <= 2 and abs(trim_borders(framed).height - photo.height) <= 2
    grey = framed.convert("L")
    assert distance(likeness_hashes(grey)["phash_trimmed"], likeness_hashes(photo.convert("L"))["phash_trimmed"]) <= 4


def test_verification_tells_a_local_change_from_a_global_one():
    photo = Image.open(dedup_set.originals()[0][0]).convert("RGB")
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
    entries, items, thumbs, processing = labelled
    dropped, summary = near_groups(items, NearDedupConfig(), thumbs, processing=processing)
    scores = dedup_set.score(entries, dropped)
    assert scores.precision >= FLOORS["precision"] and scores.recall >= FLOORS["recall"], scores
    assert scores.local_merges <= FLOORS["local_merges"], scores
    assert scores.by_kind["turned"] == 1.0 and scores.by_kind["negative"] == 0.0, scores
    # the old way (one pHash, connected components) merges most of the local copies
    naive, _ = near_groups(items, NearDedupConfig(verify=False, match_orientations=False, match_borders=False),
                           thumbs)
    assert dedup_set.score(entries, naive).local_merges > 5 * max(1, scores.local_merges)
    assert summary["rejected_by_verification"] > 0


def test_no_dropped_item_is_farther_than_the_threshold_from_the_one_kept(labelled):
    _, items, thumbs, _ = labelled
    cfg = NearDedupConfig(verify=False, match_orientations=False, match_borders=False)
    dropped, _ = near_groups(items, cfg, thumbs)
    assert dropped and all(distance(items[index].phash, items[kept].phash) <= cfg.max_hamming_distance
                           for index, (kept, _, _) in dropped.items())


def test_the_least_processed_copy_is_preferred_over_blurred_recompressed_and_upscaled_ones(tmp_path):
    from benchcurate.curation.images.survivor import processing_score

    wins, pairs = 0, 0
    for path, _ in dedup_set.originals()[:8]:  # the photos
        image = Image.open(path).convert("RGB")
        image.save(tmp_path / "original.png")
        original = processing_score(tmp_path / "original.png", 10 ** 9)
        image.filter(ImageFilter.GaussianBlur(2)).save(tmp_path / "blurred.png")
        image.save(tmp_path / "q30.jpg", quality=30)
        image.resize((image.width * 2, image.height * 2), Image.Resampling.BICUBIC).save(tmp_path / "upscaled.png")
        for copy in ("blurred.png", "q30.jpg", "upscaled.png"):
            wins += original < processing_score(tmp_path / copy, 10 ** 9)
            pairs += 1
    assert wins / pairs >= 0.8, (wins, pairs)  # the bare "most pixels" rule keeps every upscaled copy
