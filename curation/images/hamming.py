"""Exact search for every pair of 64-bit hashes (pHash) within a Hamming distance, without comparing all pairs.

Scheme: multi-index hashing with the generalised pigeonhole principle. The 64 bits are cut into m contiguous
chunks, and chunk k gets a radius r_k (r_k = -1: chunk unused) with sum(r_k) >= T - m + 1. If every chunk of a
pair differed in more than r_k bits, the pair would differ in at least sum(r_k + 1) >= T + 1 bits; so a pair
within T has some chunk k whose two values differ in at most r_k bits. Per used chunk, the hashes are grouped
by chunk value in a direct-address table (argsort plus np.bincount offsets over all 2**width values), and each
XOR mask of popcount <= r_k is one vectorised probe of every distinct chunk value against the table, never a
Python loop over hashes. Candidates are verified by XOR and np.bitwise_count over all 64 bits, so the result
is exactly brute force. A pair is reported once, at the first chunk (lowest k) whose chunk distance is <= r_k,
with no global np.unique: within a chunk a pair meets exactly one mask, and for a non-zero mask only the
smaller chunk value of the two probes (the one whose bit at the mask's highest set bit is 0).

Choice rule (`plan_chunks`): for m = 3..8 near-equal chunk widths (64 // m or one more; at most 22 bits, so the
table stays <= 32 MB), the radii are given out one step at a time to the chunk where the step adds the least
modelled cost (costs per chunk grow with the radius, so this greedy allocation is optimal for the model).
Modelled cost, for uniformly random hashes: table set-up, plus per mask a probe of every distinct chunk value
and ~n_left * n_right / 2**width candidates (halved for a self-join). The cheapest m wins unless blocked brute
force (XOR + popcount of every pair) is modelled cheaper, which happens for small n or large T. At 1M hashes
T = 8 gives three chunks of 22/21/21 bits with radius 2 each; T = 10 radii 3/3/2; T = 4 radii 1/1/0.

Why not the alternatives: a BK-tree is pointer chasing per query in Python and degenerates (deep recursion,
near-linear scans) at T ~ 8; sorted bit-permutation tables (Manku et al.) need C(blocks, T) tables and
sorts for T ~ 8; brute force is n^2 / 2 popcounts (5e11 at 1M). Multi-index hashing needs only a few hundred
vectorised probes, and its candidates are few when chunk width is near log2(n).

Costs are bounded per step (probes of at most LOOKUP_BLOCK values, candidates verified CANDIDATE_BLOCK at a
time). Inputs far from random (many hashes sharing one chunk value) raise the candidate count, never the
answer; many identical hashes are fine but their output is quadratic by nature. `workers > 1` forks worker
processes (Linux) that share the tables copy-on-write; each task is one chunk and one highest mask bit.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
from dataclasses import dataclass

import numpy as np

HASH_BITS = 64
MAX_CHUNK_BITS = 22       # table of 2**22 int64 offsets = 32 MB per chunk
LOOKUP_BLOCK = 1 << 20    # chunk values probed per numpy call; bounds the probe arrays (~8 MB each)
CANDIDATE_BLOCK = 1 << 20  # candidate pairs verified per numpy call; bounds their arrays (~8 MB each)
SMALL_BUCKET = 16         # larger buckets are expanded by searchsorted instead of one pass per rank

# Cost model, nanoseconds on one core (measured with numpy 2.2 on a 2-core VM); only their ratios matter.
SETUP_NS_PER_HASH = 150    # argsort by chunk value, gathers
SETUP_NS_PER_SLOT = 4      # bincount, cumsum and occupancy over the 2**width table
PROBE_NS_PER_VALUE = 4     # XOR, table lookup and flatnonzero per distinct chunk value per mask
VERIFY_NS_PER_CANDIDATE = 20
TASK_NS = 200_000          # fixed numpy and task overhead per mask group
BRUTE_NS_PER_PAIR = 2.5


@dataclass(frozen=True)
class Chunk:
    """Bits lo .. lo + width - 1 of the hash; pairs whose chunk values differ in <= radius bits are candidates."""

    lo: int
    width: int
    radius: int  # -1: this chunk is not searched

    @property
    def bits(self) -> np.uint64:
        return np.uint64(((1 << self.width) - 1) << self.lo)


def pairs_within(hashes: np.ndarray, threshold: int, *, workers: int = 1) -> np.ndarray:
    """Every (i, j, distance) with i < j and popcount(hashes[i] ^ hashes[j]) <= threshold, as an int64 array of shape (k, 3), sorted by (i, j)."""
    hashes, threshold = _as_hashes(hashes), _as_threshold(threshold)
    return _search(hashes, hashes, threshold, True, plan_chunks(len(hashes), len(hashes), threshold, True), workers)


def cross_pairs_within(queries: np.ndarray, reference: np.ndarray, threshold: int, *,
                       workers: int = 1) -> np.ndarray:
    """Every (query index, reference index, distance) with distance <= threshold, int64 (k, 3), sorted."""
    queries, reference, threshold = _as_hashes(queries), _as_hashes(reference), _as_threshold(threshold)
    chunks = plan_chunks(len(queries), len(reference), threshold, False)
    return _search(queries, reference, threshold, False, chunks, workers)


def brute_force_pairs(hashes: np.ndarray, threshold: int, block: int = 2048) -> np.ndarray:
    """The reference answer: all pairs by blocked XOR + popcount (quadratic; for tests and benchmarks)."""
    hashes, threshold = _as_hashes(hashes), _as_threshold(threshold)
    return _finish([_brute_rows(hashes, hashes, threshold, True, start, block)
                    for start in range(0, len(hashes), block)])


def brute_force_cross_pairs(queries: np.ndarray, reference: np.ndarray, threshold: int,
                            block: int = 2048) -> np.ndarray:
    """The reference answer for queries against reference, by blocked XOR + popcount (quadratic)."""
    queries, reference, threshold = _as_hashes(queries), _as_hashes(reference), _as_threshold(threshold)
    return _finish([_brute_rows(queries, reference, threshold, False, start, block)
                    for start in range(0, len(queries), block)])


def plan_chunks(n_left: int, n_right: int, threshold: int, self_join: bool) -> tuple[Chunk, ...] | None:
    """The chunk layout with the least modelled cost, or None when blocked brute force is modelled cheaper."""
    pairs = n_left * (n_left - 1) / 2 if self_join else n_left * n_right
    best, best_cost = None, BRUTE_NS_PER_PAIR * pairs
    for count in range(3, 9):
        chunks = _allocate_radii(_layout(count), threshold, n_left, n_right, self_join)
        cost = sum(_chunk_cost(chunk, n_left, n_right, self_join) for chunk in chunks)
        if cost < best_cost:
            best, best_cost = chunks, cost
    return best


def _layout(count: int) -> list[Chunk]:
    """`count` contiguous chunks of near-equal width covering the 64 bits, all unused for now."""
    widths = [HASH_BITS // count + (k < HASH_BITS % count) for k in range(count)]
    starts = itertools.accumulate([0] + widths[:-1])
    return [Chunk(lo, width, -1) for lo, width in zip(starts, widths)]


def _allocate_radii(chunks: list[Chunk], threshold: int, n_left: int, n_right: int,
                    self_join: bool) -> tuple[Chunk, ...]:
    """Raise radii one step at a time, cheapest step first, until sum(radius + 1) >= threshold + 1."""
    chunks = list(chunks)
    for _ in range(threshold + 1):
        def step_cost(k: int) -> float:
            chunk = chunks[k]
            if chunk.radius >= chunk.width:
                return math.inf
            raised = Chunk(chunk.lo, chunk.width, chunk.radius + 1)
            return _chunk_cost(raised, n_left, n_right, self_join) - _chunk_cost(chunk, n_left, n_right, self_join)
        k = min(range(len(chunks)), key=step_cost)
        chunks[k] = Chunk(chunks[k].lo, chunks[k].width, chunks[k].radius + 1)
    return tuple(chunks)


def _chunk_cost(chunk: Chunk, n_left: int, n_right: int, self_join: bool) -> float:
    """Modelled nanoseconds to search one chunk, for uniformly random hashes."""
    if chunk.radius < 0:
        return 0.0
    if chunk.width > MAX_CHUNK_BITS:
        return math.inf
    slots = 2 ** chunk.width
    masks = sum(math.comb(chunk.width, k) for k in range(chunk.radius + 1))
    distinct = slots * -math.expm1(-n_left / slots)
    half = 0.5 if self_join else 1.0
    per_mask = PROBE_NS_PER_VALUE * distinct * half + VERIFY_NS_PER_CANDIDATE * n_left * n_right / slots * half
    setup = SETUP_NS_PER_HASH * (n_left + (0 if self_join else n_right)) + SETUP_NS_PER_SLOT * slots
    return setup + masks * per_mask + TASK_NS * (chunk.radius > 0) * chunk.width


def _as_hashes(hashes) -> np.ndarray:
    """A contiguous 1-D uint64 array; int64 input is reinterpreted bit for bit."""
    array = np.asarray(hashes) if isinstance(hashes, np.ndarray) else np.array(hashes, dtype=np.uint64)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise TypeError(f"hashes must be a 1-D integer array, got {array.dtype} with shape {array.shape}")
    if array.dtype.itemsize == 8:
        return np.ascontiguousarray(array).view(np.uint64)
    if array.dtype.kind == "i" and array.size and array.min() < 0:
        raise ValueError("narrow signed hashes must not be negative")
    return array.astype(np.uint64)


def _as_threshold(threshold: int) -> int:
    """The threshold as an int in 0..64 (distances never exceed 64)."""
    if int(threshold) != threshold or threshold < 0:
        raise ValueError(f"threshold must be a non-negative integer, got {threshold!r}")
    return min(int(threshold), HASH_BITS)


def _finish(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate (i, j, distance) rows and sort them by (i, j)."""
    parts = [part for part in parts if len(part)]
    if not parts:
        return np.empty((0, 3), dtype=np.int64)
    rows = np.concatenate(parts)
    return rows[np.lexsort((rows[:, 1], rows[:, 0]))]


def _brute_rows(left: np.ndarray, right: np.ndarray, threshold: int, self_join: bool, start: int,
                block: int) -> np.ndarray:
    """Pairs of left[start:start + block] with right (self-join: with right[j] for j > i only)."""
    rows = left[start:start + block]
    parts = []
    for col in range(start if self_join else 0, len(right), block):
        distance = np.bitwise_count(rows[:, None] ^ right[None, col:col + block])
        i, j = np.nonzero(distance <= threshold)
        if self_join and col == start:
            i, j = i[i < j], j[i < j]
        parts.append(np.stack([i + start, j + col, distance[i, j]], axis=1).astype(np.int64))
    return np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)


@dataclass
class _Table:
    """Hashes grouped by one chunk's value: sorted positions offsets[v] .. offsets[v + 1] - 1 hold value v."""

    order: np.ndarray          # int64 input index of each sorted position (sorted by chunk value)
    sorted_hashes: np.ndarray  # hashes[order], so verification gathers are near-sequential
    sorted_values: np.ndarray  # int64 chunk value of each sorted position
    offsets: np.ndarray        # int64, length 2**width + 1
    occupied: np.ndarray       # bool per chunk value; 1 byte per slot keeps probe lookups in cache


def _build_table(hashes: np.ndarray, chunk: Chunk) -> _Table:
    """Group the hashes by the value of one chunk (argsort plus bincount offsets)."""
    values = ((hashes >> np.uint64(chunk.lo)) & np.uint64((1 << chunk.width) - 1)).astype(np.intp)
    counts = np.bincount(values, minlength=1 << chunk.width)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    order = np.argsort(values)
    return _Table(order, hashes[order], values[order], offsets, counts > 0)


@dataclass
class _Job:
    """Everything a task needs; module-level so forked workers inherit it instead of receiving a copy."""

    left: np.ndarray
    right: np.ndarray
    threshold: int
    self_join: bool
    chunks: tuple[Chunk, ...] | None
    left_tables: list[_Table | None]
    right_tables: list[_Table | None]


_JOBS: dict[int, _Job] = {}


def _search(left: np.ndarray, right: np.ndarray, threshold: int, self_join: bool,
            chunks: tuple[Chunk, ...] | None, workers: int) -> np.ndarray:
    """Run the search with the given chunk layout (None: blocked brute force), over `workers` processes."""
    if len(left) == 0 or len(right) == 0:
        return np.empty((0, 3), dtype=np.int64)
    if chunks is None:
        tasks = [(_brute_task, start) for start in range(0, len(left), 2048)]
        left_tables = right_tables = []
    else:
        assert sum(chunk.radius + 1 for chunk in chunks) >= threshold + 1, "pigeonhole bound not met"
        left_tables = [_build_table(left, chunk) if chunk.radius >= 0 else None for chunk in chunks]
        right_tables = left_tables if self_join else [
            _build_table(right, chunk) if chunk.radius >= 0 else None for chunk in chunks]
        tasks = _probe_tasks(chunks)
    job = _Job(left, right, threshold, self_join, chunks, left_tables, right_tables)
    token = id(job)
    _JOBS[token] = job
    try:
        return _finish(_run([(fn, token, arg) for fn, arg in tasks], workers))
    finally:
        del _JOBS[token]


def _probe_tasks(chunks: tuple[Chunk, ...]) -> list[tuple]:
    """One task per used chunk and highest mask bit (-1: the zero mask), largest first for load balance."""
    tasks = []
    for index, chunk in enumerate(chunks):
        if chunk.radius >= 0:
            tops = [-1] + (list(range(chunk.width)) if chunk.radius > 0 else [])
            tasks += [(_probe_task, (index, top)) for top in tops]
    def mask_count(task: tuple) -> int:
        index, top = task[1]
        return 1 if top < 0 else sum(math.comb(top, ones) for ones in range(chunks[index].radius))
    return sorted(tasks, key=mask_count, reverse=True)


def _run(tasks: list[tuple], workers: int) -> list[np.ndarray]:
    """Run (function, token, argument) tasks here, or over forked processes that inherit `_JOBS`."""
    if workers <= 1 or len(tasks) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [_call(task) for task in tasks]
    with multiprocessing.get_context("fork").Pool(min(workers, len(tasks))) as pool:
        return list(pool.imap_unordered(_call, tasks))


def _call(task: tuple) -> np.ndarray:
    fn, token, arg = task
    return fn(_JOBS[token], arg)


def _brute_task(job: _Job, start: int) -> np.ndarray:
    return _brute_rows(job.left, job.right, job.threshold, job.self_join, start, 2048)


def _masks(radius: int, top: int) -> np.ndarray:
    """Chunk-local XOR masks of popcount <= radius whose highest set bit is `top` (top = -1: only the zero mask)."""
    if top < 0:
        return np.zeros(1, dtype=np.intp)
    masks = [(1 << top) | sum(1 << bit for bit in bits)
             for ones in range(radius) for bits in itertools.combinations(range(top), ones)]
    return np.array(masks, dtype=np.intp)


def _probe_task(job: _Job, arg: tuple[int, int]) -> np.ndarray:
    """Verified pairs of one chunk whose chunk values differ by a mask with highest set bit `top` (-1: zero mask)."""
    index, top = arg
    left, right = job.left_tables[index], job.right_tables[index]
    if top < 0 and job.self_join:
        every = np.arange(len(left.order))
        return _verify_all(job, index, every, left.sorted_hashes, _same_bucket_candidates(left))
    positions = np.arange(len(left.order))
    if job.self_join:
        # Of buckets v and v ^ mask only the one with bit `top` clear probes, so each pair is met once.
        positions = np.flatnonzero((left.sorted_values >> top) & 1 == 0)
    values, hashes = left.sorted_values[positions], left.sorted_hashes[positions]
    masks = _masks(job.chunks[index].radius, top)
    # Small probe sets take several masks per numpy call, to amortise per-call overhead.
    per_call = max(1, LOOKUP_BLOCK // max(len(values), 1))
    parts = []
    for first in range(0, len(masks), per_call):
        if per_call == 1:
            probes = values ^ masks[first]
        else:
            probes = (values[None, :] ^ masks[first:first + per_call, None]).ravel()
        hits = np.flatnonzero(right.occupied[probes])
        targets = probes[hits]
        rows = hits if per_call == 1 else hits % len(values)
        candidates = _bucket_candidates(rows, right.offsets[targets], right.offsets[1:][targets])
        parts.append(_verify_all(job, index, positions, hashes, candidates))
    return np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)


def _same_bucket_candidates(table: _Table):
    """Yield (a, b) sorted positions with a < b in the same bucket: b = a + 1, then a + 2, ..."""
    a = np.arange(len(table.order))
    later = table.offsets[table.sorted_values + 1] - a - 1  # hashes after a in its bucket
    step = 1
    # One pass per rank; each pass yields at least one pair per remaining bucket, so passes <= candidates.
    while len(keep := np.flatnonzero(later >= step)):
        a, later = a[keep], later[keep]
        for first in range(0, len(a), CANDIDATE_BLOCK):
            yield a[first:first + CANDIDATE_BLOCK], a[first:first + CANDIDATE_BLOCK] + step
        step += 1


def _bucket_candidates(a: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Yield (a, b) pairs: each probe row a[k] with every right sorted position in start[k] .. end[k] - 1."""
    length = end - start
    heavy = np.flatnonzero(length > SMALL_BUCKET)
    if len(heavy):
        yield from _heavy_bucket_candidates(a[heavy], start[heavy], length[heavy])
        light = np.flatnonzero(length <= SMALL_BUCKET)
        a, start, length = a[light], start[light], length[light]
    # Buckets hold ~1-3 hashes when width ~ log2(n): pair by rank in the bucket, a few short numpy passes.
    # (Index arrays from a sparse flatnonzero, not boolean masks: those cost ~4 ns per element.)
    rank = 0
    while len(a):
        for first in range(0, len(a), CANDIDATE_BLOCK):
            yield a[first:first + CANDIDATE_BLOCK], start[first:first + CANDIDATE_BLOCK] + rank
        rank += 1
        keep = np.flatnonzero(length > rank)
        a, start, length = a[keep], start[keep], length[keep]


def _heavy_bucket_candidates(a: np.ndarray, start: np.ndarray, length: np.ndarray):
    """The same for long buckets (skewed input): flat candidate number k -> (probe g, place in its bucket)."""
    ends = np.cumsum(length)
    for first in range(0, int(ends[-1]), CANDIDATE_BLOCK):
        k = np.arange(first, min(int(ends[-1]), first + CANDIDATE_BLOCK))
        g = np.searchsorted(ends, k, side="right")
        yield a[g], start[g] + k - (ends[g] - length[g])


def _verify_all(job: _Job, index: int, positions: np.ndarray, hashes: np.ndarray, candidates) -> np.ndarray:
    parts = [_verify(job, index, positions, hashes, rows, b) for rows, b in candidates]
    return np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)


def _verify(job: _Job, index: int, positions: np.ndarray, hashes: np.ndarray, rows: np.ndarray,
            b: np.ndarray) -> np.ndarray:
    """Rows (i, j, distance) for candidates: probe row `rows` (left sorted position positions[rows], hash
    hashes[rows]) against right sorted position b."""
    left, right = job.left_tables[index], job.right_tables[index]
    xor = hashes[rows] ^ right.sorted_hashes[b]
    distance = np.bitwise_count(xor)
    hit = np.flatnonzero(distance <= job.threshold)
    rows, b, xor, distance = rows[hit], b[hit], xor[hit], distance[hit]
    first = np.ones(len(hit), dtype=bool)
    for chunk in job.chunks[:index]:
        # Already reported at an earlier chunk: each pair counts only at its first qualifying chunk.
        if chunk.radius >= 0:
            first &= np.bitwise_count(xor & chunk.bits) > chunk.radius
    i, j = left.order[positions[rows[first]]], right.order[b[first]]
    if job.self_join:
        i, j = np.minimum(i, j), np.maximum(i, j)
    return np.stack([i, j, distance[first].astype(np.int64)], axis=1)
