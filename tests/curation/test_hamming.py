"""Exact Hamming pair search: the indexed search must return exactly the brute-force rows."""

import math
import random

import numpy as np
import pytest

from benchcurate.curation.core import hamming
from benchcurate.curation.core.hamming import (
    brute_force_cross_pairs,
    brute_force_pairs,
    cross_pairs_within,
    pairs_within,
)

SIZES = (0, 1, 2, 500, 3000)
THRESHOLDS = (0, 1, 3, 6, 8, 10, 16)


def flip_bits(rng: np.random.Generator, hashes: np.ndarray, distance: int) -> np.ndarray:
    """Copies of `hashes`, each with exactly `distance` distinct bits flipped."""
    flips = np.zeros(len(hashes), dtype=np.uint64)
    for row in range(len(hashes)):
        for bit in rng.choice(64, size=distance, replace=False):
            flips[row] |= np.uint64(1) << np.uint64(bit)
    return hashes ^ flips


def sample_hashes(seed: int, n: int, threshold: int) -> np.ndarray:
    """n hashes: random ones, copies at distance threshold - 1, threshold and threshold + 1, exact duplicates."""
    rng = np.random.default_rng(seed)
    distances = [d for d in (threshold - 1, threshold, threshold + 1, 0) if 0 <= d <= 64]
    copies = max(1, n // 12)
    base = rng.integers(0, 2**64, size=max(1, n - copies * len(distances)), dtype=np.uint64)
    parts = [base] + [flip_bits(rng, base[rng.integers(0, len(base), size=copies)], d) for d in distances]
    hashes = np.concatenate(parts)
    assert len(hashes) >= n
    return hashes[rng.permutation(len(hashes))][:n]


def python_pairs(hashes, threshold: int, reference=None) -> list[list[int]]:
    """Pure-Python double loop over Python ints: the independent oracle for the brute force."""
    left = [int(value) for value in hashes]
    right = left if reference is None else [int(value) for value in reference]
    return [
        [i, j, (a ^ b).bit_count()]
        for i, a in enumerate(left)
        for j, b in enumerate(right)
        if (reference is not None or i < j) and (a ^ b).bit_count() <= threshold
    ]


def all_layouts(n_left: int, n_right: int, threshold: int, self_join: bool, max_masks: int = 5000):
    """The layouts the planner weighs (3..8 chunks) plus plain pigeonhole radii floor(T / m), if not too slow."""
    for count in range(3, 9):
        plain = tuple(hamming.Chunk(chunk.lo, chunk.width, threshold // count) for chunk in hamming._layout(count))
        for chunks in (hamming._allocate_radii(hamming._layout(count), threshold, n_left, n_right, self_join), plain):
            if sum(math.comb(c.width, k) for c in chunks for k in range(c.radius + 1)) <= max_masks:
                yield chunks


def assert_rows_equal(found: np.ndarray, expected: np.ndarray):
    assert found.dtype == np.int64 and found.shape[1:] == (3,)
    np.testing.assert_array_equal(found, expected)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_pairs_within_equals_brute_force(n, threshold):
    for seed in range(3):
        hashes = sample_hashes(seed, n, threshold)
        expected = brute_force_pairs(hashes, threshold)
        assert_rows_equal(pairs_within(hashes, threshold), expected)
        if n >= 500 and seed == 0:
            assert_rows_equal(pairs_within(hashes, threshold, workers=2), expected)
    assert n < 500 or len(expected), "the planted near-duplicates should give pairs"


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_every_chunk_layout_equals_brute_force(threshold):
    # At these sizes the planner may pick brute force; force each index layout so the index itself is tested.
    hashes = sample_hashes(7, 1500, threshold)
    expected = brute_force_pairs(hashes, threshold)
    layouts = list(all_layouts(len(hashes), len(hashes), threshold, True))
    assert len(layouts) >= 6
    for chunks in layouts:
        assert_rows_equal(hamming._search(hashes, hashes, threshold, True, chunks, 1), expected)


def test_index_with_tiny_blocks_and_two_workers(monkeypatch):
    # Tiny probe and candidate blocks exercise the slicing, one mask per call and the long-bucket expansion.
    monkeypatch.setattr(hamming, "LOOKUP_BLOCK", 64)
    monkeypatch.setattr(hamming, "CANDIDATE_BLOCK", 37)
    monkeypatch.setattr(hamming, "SMALL_BUCKET", 1)
    hashes = sample_hashes(3, 2000, 8)
    expected = brute_force_pairs(hashes, 8)
    for chunks in all_layouts(len(hashes), len(hashes), 8, True):
        assert_rows_equal(hamming._search(hashes, hashes, 8, True, chunks, 1), expected)
    chunks = hamming._allocate_radii(hamming._layout(4), 8, len(hashes), len(hashes), True)
    assert_rows_equal(hamming._search(hashes, hashes, 8, True, chunks, 2), expected)


def test_skewed_hashes_with_long_buckets():
    # Only the low 16 bits vary: the upper chunks put every hash in one bucket (searchsorted expansion).
    rng = np.random.default_rng(5)
    hashes = rng.integers(0, 2**16, size=1200, dtype=np.uint64) | np.uint64(0xDEADBEEF12340000)
    expected = brute_force_pairs(hashes, 3)
    assert len(expected) > 5_000
    for chunks in all_layouts(len(hashes), len(hashes), 3, True):
        assert_rows_equal(hamming._search(hashes, hashes, 3, True, chunks, 1), expected)
    assert_rows_equal(pairs_within(hashes, 3), expected)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_cross_pairs_within_equals_brute_force(n, threshold):
    rng = np.random.default_rng(n + threshold)
    reference = sample_hashes(11, n, threshold)
    fresh = sample_hashes(12, n // 2, threshold)
    # Queries: new hashes, exact copies of reference rows, and copies at distance threshold of reference rows.
    copies = reference[rng.integers(0, n, size=n // 4)] if n else reference[:0]
    near = flip_bits(rng, copies, min(threshold, 64))
    queries = np.concatenate([fresh, copies, near])
    expected = brute_force_cross_pairs(queries, reference, threshold)
    assert_rows_equal(cross_pairs_within(queries, reference, threshold), expected)
    for chunks in list(all_layouts(len(queries), len(reference), threshold, False))[::3]:
        assert_rows_equal(hamming._search(queries, reference, threshold, False, chunks, 1), expected)
    if n >= 500:
        assert len(expected) >= len(copies)
        assert_rows_equal(cross_pairs_within(queries, reference, threshold, workers=2), expected)


def test_cross_pairs_with_an_empty_side():
    hashes = sample_hashes(1, 100, 4)
    empty = np.empty(0, dtype=np.uint64)
    for queries, reference in ((hashes, empty), (empty, hashes), (empty, empty)):
        for found in (cross_pairs_within(queries, reference, 4), brute_force_cross_pairs(queries, reference, 4)):
            assert found.shape == (0, 3) and found.dtype == np.int64


def test_queries_identical_to_the_reference():
    hashes = sample_hashes(2, 800, 6)
    found = cross_pairs_within(hashes, hashes, 6)
    assert_rows_equal(found, brute_force_cross_pairs(hashes, hashes, 6))
    diagonal = found[found[:, 0] == found[:, 1]]
    np.testing.assert_array_equal(diagonal[:, 0], np.arange(800))
    assert not diagonal[:, 2].any()


@pytest.mark.parametrize("seed", range(4))
def test_brute_force_equals_a_python_double_loop(seed):
    rng = random.Random(seed)
    threshold = rng.choice([0, 2, 5, 9, 20])
    hashes = sample_hashes(seed, rng.randrange(2, 70), threshold)
    reference = sample_hashes(seed + 100, rng.randrange(1, 40), threshold)
    block = rng.choice([1, 7, 2048])
    assert brute_force_pairs(hashes, threshold, block).tolist() == python_pairs(hashes, threshold)
    assert brute_force_cross_pairs(hashes, reference, threshold, block).tolist() == python_pairs(
        hashes, threshold, reference
    )


def test_two_thousand_identical_hashes():
    hashes = np.full(2000, 0x0123456789ABCDEF, dtype=np.uint64)
    expected = brute_force_pairs(hashes, 0)
    assert len(expected) == 1_999_000 and not expected[:, 2].any()
    assert_rows_equal(pairs_within(hashes, 0), expected)
    chunks = hamming._allocate_radii(hamming._layout(3), 8, 2000, 2000, True)
    assert_rows_equal(hamming._search(hashes, hashes, 8, True, chunks, 1), expected)


def test_hashes_with_the_top_bit_set():
    rng = np.random.default_rng(9)
    hashes = sample_hashes(9, 300, 5) | np.uint64(1 << 63)
    hashes[:5] = [2**64 - 1, 2**64 - 2, 2**63, 2**63 + 1, 2**64 - 1]
    expected = python_pairs(hashes, 5)
    assert_rows_equal(brute_force_pairs(hashes, 5), np.array(expected, dtype=np.int64))
    for chunks in all_layouts(len(hashes), len(hashes), 5, True):
        assert hamming._search(hashes, hashes, 5, True, chunks, 1).tolist() == expected
    assert pairs_within(hashes.view(np.int64), 5).tolist() == expected
    assert pairs_within(hashes.astype(">u8"), 5).tolist() == expected
    assert pairs_within([int(value) for value in hashes], 5).tolist() == expected
    queries = flip_bits(rng, hashes[:50], 2)
    assert cross_pairs_within(queries.view(np.int64), hashes, 5).tolist() == python_pairs(queries, 5, hashes)


def test_threshold_of_64_returns_every_pair_and_bad_input_is_refused():
    hashes = sample_hashes(4, 40, 0)
    assert len(pairs_within(hashes, 64)) == len(pairs_within(hashes, 100)) == 40 * 39 // 2
    with pytest.raises(ValueError):
        pairs_within(hashes, -1)
    with pytest.raises(TypeError):
        pairs_within(hashes.reshape(4, 10), 3)
    with pytest.raises(ValueError):
        hamming._search(hashes, hashes, 8, True, hamming._layout(3), 1)  # radii -1: bound not met


def test_plans_meet_the_pigeonhole_bound_and_index_large_inputs():
    for n in (10, 2_000, 50_000, 1_000_000, 5_000_000):
        for threshold in range(17):
            for self_join in (True, False):
                chunks = hamming.plan_chunks(n, n, threshold, self_join)
                if chunks is not None:
                    assert sum(chunk.radius + 1 for chunk in chunks) >= threshold + 1
                    assert sum(chunk.width for chunk in chunks) == 64
    assert [chunk.radius for chunk in hamming.plan_chunks(1_000_000, 1_000_000, 8, True)] == [2, 2, 2]
    assert hamming.plan_chunks(1_000_000, 1_000_000, 10, True) is not None
