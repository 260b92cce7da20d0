"""Exact search for every pair of 64-bit hashes (pHash) within a Hamming distance, without comparing all pairs.

Scheme: multi-index hashing with the generalised pigeonhole principle. The 64 bits are cut into m contiguous
chunks and chunk k gets a radius r_k (-1: chunk not searched) with sum(r_k + 1) >= T + 1. If every chunk of a
pair differed in more than r_k bits, the pair would differ in at least sum(r_k + 1) > T bits; so a pair within
T has a chunk k whose two values differ in at most r_k bits. (Plain pigeonhole, r_k = floor(T / m), is one
such choice; uneven radii cost less, e.g. T = 6 needs radii 2/1/1 rather than 2/2/2 over three chunks.)
Per searched chunk the hashes are sorted by chunk value, with direct-address tables over all 2**width values:
bucket offsets (np.bincount + cumsum), bucket length and the bucket's first hash. Each XOR mask of popcount
<= r_k is one vectorised probe of every hash against those tables (in cache-sized slices), never a Python loop
over hashes. Candidates are verified by XOR and np.bitwise_count over all 64 bits, so the result equals brute
force. Each pair is reported once, with no global np.unique:
within a chunk a pair meets exactly one mask (their chunk XOR), for a non-zero mask only the hash whose chunk
bit at the mask's highest set bit is 0 probes, and a verified pair is kept only at the first chunk (lowest k)
whose chunk distance is <= r_k.

Choice rule (`plan_chunks`): for m = 3..8 chunks of near-equal width (64 // m or one more; at most 22 bits, so
the tables of a chunk stay near 50 MB), radii are raised one step at a time on the chunk where the step adds
the least modelled cost (greedy; each further step of a chunk costs more than the last). Modelled cost,
for uniformly random hashes: table set-up, plus per mask one probe per hash and ~n_left * n_right / 2**width
candidates (both halved for a self-join). The cheapest m wins, unless blocked brute force (XOR + popcount of
all pairs) is modelled cheaper: small n or large T. At 1M hashes this gives three chunks of 22/21/21 bits with
radii 2/2/2 for T = 8 (762 masks), 3/3/2 for T = 10, 0/1/1 for T = 4.

Why this and not: a BK-tree (per-query pointer chasing in Python, most of the tree visited at T ~ 8, deep
recursion); bit-permuted sorted tables (Manku et al.: C(blocks, T) sorted copies, hundreds at T = 8); brute
force (n^2 / 2 = 5e11 popcounts at 1M). Multi-index hashing needs a few hundred vectorised probes, each
yielding few candidates when the chunk width is near log2(n).

Memory stays bounded: probes of at most LOOKUP_BLOCK hashes and candidates in blocks of CANDIDATE_BLOCK; a
chunk's tables take 24 bytes per hash plus 13 bytes per chunk value (~75 MB for 22 bits at 1M hashes). Inputs
far from uniform (many hashes sharing a chunk value) raise the candidate count, never the answer; many
identical hashes work, but their output is quadratic by nature.
`workers > 1` runs the tasks (one chunk and one highest mask bit each) in the pipeline's worker processes
(`curation.parallel`, started with spawn like every other worker: safe beside threads, paid once per process).
The hashes go to them through .npy files in a temporary folder, memory-mapped, and each worker builds the tables of
the chunks it is given once, so a task carries a few numbers, not the arrays.
"""

from __future__ import annotations

import itertools
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HASH_BITS = 64
MAX_CHUNK_BITS = 22  # 2**22 values x 13 bytes of tables (offsets, length, first hash) = 52 MB
LOOKUP_BLOCK = 1 << 15  # probes per numpy call: temporaries stay in L2 cache (several masks if few hashes)
CANDIDATE_BLOCK = 1 << 20  # candidates verified per numpy call; bounds their arrays (~8 MB each)
SMALL_BUCKET = 16  # longer buckets are expanded by searchsorted instead of one pass per rank
BRUTE_BLOCK = 1024  # rows x columns per step of the brute-force fallback (8 MB of XORs)

# Cost model in nanoseconds on one core (numpy 2.2, 2-core VM); only the ratios matter.
SETUP_NS_PER_HASH = 100  # argsort by chunk value and the sorted copies
SETUP_NS_PER_SLOT = 10  # bincount, cumsum, first-hash gather and lengths over the 2**width values
PROBE_NS_PER_HASH = 8  # per mask: XOR, table lookups, rank-0 verification, bucket-length filter
VERIFY_NS_PER_CANDIDATE = 10  # doubled when buckets average over SMALL_BUCKET hashes (searchsorted expansion)
TASK_NS = 300_000  # per (chunk, highest mask bit) task: selecting and gathering the probing hashes
BRUTE_NS_PER_PAIR = 3.0


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
    """Every (i, j, distance) with i < j and popcount(hashes[i] ^ hashes[j]) <= threshold, as an int64 array of
    shape (k, 3), sorted by (i, j)."""
    hashes, threshold = _as_hashes(hashes), _as_threshold(threshold)
    chunks = plan_chunks(len(hashes), len(hashes), threshold, self_join=True)
    return _search(hashes, hashes, threshold, True, chunks, workers)


def cross_pairs_within(queries: np.ndarray, reference: np.ndarray, threshold: int, *, workers: int = 1) -> np.ndarray:
    """Every (query index, reference index, distance) with distance <= threshold, int64 (k, 3), sorted."""
    queries, reference, threshold = _as_hashes(queries), _as_hashes(reference), _as_threshold(threshold)
    chunks = plan_chunks(len(queries), len(reference), threshold, self_join=False)
    return _search(queries, reference, threshold, False, chunks, workers)


def brute_force_pairs(hashes: np.ndarray, threshold: int, block: int = 2048) -> np.ndarray:
    """The reference answer: all pairs by blocked XOR + popcount (quadratic; for tests and benchmarks)."""
    hashes, threshold = _as_hashes(hashes), _as_threshold(threshold)
    return _finish(
        [_brute_rows(hashes, hashes, threshold, True, start, block) for start in range(0, len(hashes), block)]
    )


def brute_force_cross_pairs(
    queries: np.ndarray, reference: np.ndarray, threshold: int, block: int = 2048
) -> np.ndarray:
    """The reference answer for queries against reference, by blocked XOR + popcount (quadratic)."""
    queries, reference, threshold = _as_hashes(queries), _as_hashes(reference), _as_threshold(threshold)
    return _finish(
        [_brute_rows(queries, reference, threshold, False, start, block) for start in range(0, len(queries), block)]
    )


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
    """`count` contiguous chunks of near-equal width covering the 64 bits, none searched yet."""
    widths = [HASH_BITS // count + (k < HASH_BITS % count) for k in range(count)]
    return [Chunk(lo, width, -1) for lo, width in zip(itertools.accumulate([0] + widths[:-1]), widths)]


def _allocate_radii(
    chunks: list[Chunk], threshold: int, n_left: int, n_right: int, self_join: bool
) -> tuple[Chunk, ...]:
    """Raise radii one step at a time, cheapest step first, until sum(radius + 1) >= threshold + 1."""
    chunks = list(chunks)

    def raised(chunk: Chunk) -> Chunk:
        return Chunk(chunk.lo, chunk.width, chunk.radius + 1)

    def step_cost(chunk: Chunk) -> float:
        if chunk.radius >= chunk.width:
            return math.inf
        return _chunk_cost(raised(chunk), n_left, n_right, self_join) - _chunk_cost(chunk, n_left, n_right, self_join)

    for _ in range(threshold + 1):
        k = min(range(len(chunks)), key=lambda k: step_cost(chunks[k]))
        chunks[k] = raised(chunks[k])
    return tuple(chunks)


def _chunk_cost(chunk: Chunk, n_left: int, n_right: int, self_join: bool) -> float:
    """Modelled nanoseconds to search one chunk, for uniformly random hashes."""
    if chunk.radius < 0:
        return 0.0
    if chunk.width > MAX_CHUNK_BITS:
        return math.inf
    slots = 2**chunk.width
    masks = sum(math.comb(chunk.width, k) for k in range(chunk.radius + 1))
    half = 0.5 if self_join else 1.0
    verify_ns = VERIFY_NS_PER_CANDIDATE * (2 if n_right / slots > SMALL_BUCKET else 1)
    per_mask = half * (PROBE_NS_PER_HASH * n_left + verify_ns * n_left * n_right / slots)
    setup = SETUP_NS_PER_HASH * (n_left + (0 if self_join else n_right)) + SETUP_NS_PER_SLOT * slots
    tasks = 1 + (chunk.width if chunk.radius > 0 else 0)
    return setup + masks * per_mask + TASK_NS * tasks


def _as_hashes(hashes) -> np.ndarray:
    """A contiguous 1-D uint64 array; int64 input is reinterpreted bit for bit."""
    array = hashes if isinstance(hashes, np.ndarray) else np.array(hashes, dtype=np.uint64)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise TypeError(f"hashes must be a 1-D integer array, got {array.dtype} with shape {array.shape}")
    if array.dtype.itemsize == 8:
        return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("=")).view(np.uint64)
    if array.dtype.kind == "i" and array.size and array.min() < 0:
        raise ValueError("hashes narrower than 64 bits must not be negative")
    return array.astype(np.uint64)


def _as_threshold(threshold: int) -> int:
    """The threshold as an int in 0..64 (no distance exceeds 64)."""
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


def _brute_rows(
    left: np.ndarray, right: np.ndarray, threshold: int, self_join: bool, start: int, block: int
) -> np.ndarray:
    """Pairs of left[start:start + block] with right (self-join: with right[j] for j > i only)."""
    rows = left[start : start + block]
    parts = []
    for col in range(start if self_join else 0, len(right), block):
        distance = np.bitwise_count(rows[:, None] ^ right[None, col : col + block])
        i, j = np.nonzero(distance <= threshold)
        if self_join and col == start:
            i, j = i[i < j], j[i < j]
        parts.append(np.stack([i + start, j + col, distance[i, j].astype(np.int64)], axis=1))
    return np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)


@dataclass
class _Table:
    """Hashes sorted by one chunk's value: sorted positions offsets[v] .. offsets[v + 1] - 1 hold value v."""

    order: np.ndarray  # input index of each sorted position
    sorted_hashes: np.ndarray  # hashes[order], so verification gathers are near-sequential
    sorted_values: np.ndarray  # chunk value of each sorted position
    offsets: np.ndarray  # length 2**width + 1; int32 when it fits, to halve the cache footprint
    counts: np.ndarray  # uint8 bucket length per chunk value, saturated (only > 0 and > 1 are read)
    first_hashes: np.ndarray  # per chunk value, the first hash of its bucket (any hash if empty)


def _build_table(hashes: np.ndarray, chunk: Chunk) -> _Table:
    """Sort the hashes by the value of one chunk and index the runs of equal value."""
    values = ((hashes >> np.uint64(chunk.lo)) & np.uint64((1 << chunk.width) - 1)).astype(np.intp)
    counts = np.bincount(values, minlength=1 << chunk.width)
    offsets = np.zeros(len(counts) + 1, dtype=np.int32 if len(hashes) < 2**31 else np.int64)
    np.cumsum(counts, out=offsets[1:])
    order = np.argsort(values)
    sorted_hashes = hashes[order]
    # Padding so that offsets[v] == n (empty buckets after the last hash) still indexes a hash.
    first_hashes = np.append(sorted_hashes, np.uint64(0))[offsets[:-1]]
    counts = np.minimum(counts, 255).astype(np.uint8)
    return _Table(order, sorted_hashes, values[order], offsets, counts, first_hashes)


@dataclass
class _Job:
    """Everything a task reads; tables are built on first use, so a worker builds only those of its chunks."""

    left: np.ndarray
    right: np.ndarray
    threshold: int
    self_join: bool
    chunks: tuple[Chunk, ...] | None
    _tables: dict[tuple[str, int], _Table] = field(default_factory=dict)

    def left_table(self, index: int) -> _Table:
        if ("left", index) not in self._tables:
            self._tables["left", index] = _build_table(self.left, self.chunks[index])
        return self._tables["left", index]

    def right_table(self, index: int) -> _Table:
        if self.self_join:
            return self.left_table(index)
        if ("right", index) not in self._tables:
            self._tables["right", index] = _build_table(self.right, self.chunks[index])
        return self._tables["right", index]


def _search(
    left: np.ndarray, right: np.ndarray, threshold: int, self_join: bool, chunks: tuple[Chunk, ...] | None, workers: int
) -> np.ndarray:
    """Search with the given chunk layout (None: blocked brute force) over `workers` processes."""
    if len(left) == 0 or len(right) == 0:
        return np.empty((0, 3), dtype=np.int64)
    if chunks is None:
        tasks = [(_brute_task, start) for start in range(0, len(left), BRUTE_BLOCK)]
    else:
        if sum(chunk.radius + 1 for chunk in chunks) < threshold + 1:
            raise ValueError("chunk radii too small for the threshold: pairs could be missed")
        tasks = _probe_tasks(chunks)
    job = _Job(left, right, threshold, self_join, chunks)
    if workers <= 1 or len(tasks) <= 1:
        return _finish([function(job, arg) for function, arg in tasks])
    return _finish(_in_workers(job, tasks, workers))


def _probe_tasks(chunks: tuple[Chunk, ...]) -> list[tuple]:
    """One task per searched chunk and highest mask bit (-1: the zero mask), most masks first to balance load."""
    tasks = [
        (_probe_task, (index, top))
        for index, chunk in enumerate(chunks)
        if chunk.radius >= 0
        for top in [-1] + list(range(chunk.width if chunk.radius > 0 else 0))
    ]

    def mask_count(task: tuple) -> int:
        index, top = task[1]
        return 1 if top < 0 else sum(math.comb(top, ones) for ones in range(chunks[index].radius))

    return sorted(tasks, key=mask_count, reverse=True)


def _in_workers(job: _Job, tasks: list[tuple], workers: int) -> list[np.ndarray]:
    """Run (function, argument) tasks in worker processes that read the hashes from memory-mapped files."""
    from benchcurate.curation.core.parallel import ordered_map

    with tempfile.TemporaryDirectory(prefix="hamming-") as folder:
        np.save(Path(folder) / "left.npy", job.left)
        if not job.self_join:
            np.save(Path(folder) / "right.npy", job.right)
        spec = (folder, job.threshold, job.self_join, job.chunks)
        return list(ordered_map(_worker_task, [(spec, function, arg) for function, arg in tasks], "processes", workers))


_WORKER_JOB: dict[tuple, _Job] = {}  # in a worker process: the job of the folder it last read, with its tables


def _worker_task(task: tuple) -> np.ndarray:
    (folder, threshold, self_join, chunks), function, arg = task
    key = (folder, threshold, self_join, chunks)
    if key not in _WORKER_JOB:
        _WORKER_JOB.clear()
        left = np.load(Path(folder) / "left.npy", mmap_mode="r")
        right = left if self_join else np.load(Path(folder) / "right.npy", mmap_mode="r")
        _WORKER_JOB[key] = _Job(np.asarray(left), np.asarray(right), threshold, self_join, chunks)
    return function(_WORKER_JOB[key], arg)


def _brute_task(job: _Job, start: int) -> np.ndarray:
    """Brute-force rows of one block of left hashes."""
    return _brute_rows(job.left, job.right, job.threshold, job.self_join, start, BRUTE_BLOCK)


def _masks(radius: int, top: int) -> np.ndarray:
    """Chunk-local XOR masks of popcount <= radius whose highest set bit is `top` (top = -1: the zero mask)."""
    if top < 0:
        return np.zeros(1, dtype=np.intp)
    masks = [
        (1 << top) | sum(1 << bit for bit in bits)
        for ones in range(radius)
        for bits in itertools.combinations(range(top), ones)
    ]
    return np.array(masks, dtype=np.intp)


def _probe_task(job: _Job, arg: tuple[int, int]) -> np.ndarray:
    """Verified pairs of one chunk whose chunk values differ by a mask with highest set bit `top` (-1: zero mask)."""
    index, top = arg
    left = job.left_table(index)
    if top < 0 and job.self_join:
        every = np.arange(len(left.order))
        return _verify_all(job, index, every, left.sorted_hashes, _same_bucket_candidates(left))
    positions = np.arange(len(left.order))
    if job.self_join:
        # Of buckets v and v ^ mask only the one with bit `top` clear probes, so each pair is met once.
        positions = np.flatnonzero((left.sorted_values >> top) & 1 == 0)
    values = left.sorted_values[positions]
    masks = _masks(job.chunks[index].radius, top)
    per_call = max(1, LOOKUP_BLOCK // max(len(values), 1))
    parts = []
    # Slices of the probing hashes outside, masks inside: the slice and its temporaries stay in cache.
    for lo in range(0, len(values), LOOKUP_BLOCK):
        slice_positions, slice_values = positions[lo : lo + LOOKUP_BLOCK], values[lo : lo + LOOKUP_BLOCK]
        # Probe row r is hash slice_positions[r % len(slice_positions)] (several masks per call if few hashes).
        hashes = np.tile(left.sorted_hashes[slice_positions], min(per_call, len(masks)))
        for first in range(0, len(masks), per_call):
            probes = (slice_values[None, :] ^ masks[first : first + per_call, None]).ravel()
            parts += _probe(job, index, slice_positions, hashes, probes)
    return np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)


def _probe(job: _Job, index: int, positions: np.ndarray, hashes: np.ndarray, probes: np.ndarray) -> list:
    """Verified pairs of probe row r (hash hashes[r]) with every right hash of chunk value probes[r]."""
    right = job.right_table(index)
    length = right.counts[probes]
    # Rank 0 from the per-value first-hash table: no offset lookups, though most probed buckets are empty.
    xor = hashes[: len(probes)] ^ right.first_hashes[probes]
    distance = np.bitwise_count(xor)
    hit = np.flatnonzero((distance <= job.threshold) & (length > 0))
    parts = []
    if len(hit):
        parts.append(_rows(job, index, positions, hit, right.offsets[probes[hit]], xor[hit], distance[hit]))
    # Ranks 1 and up: only the few probes whose bucket holds more than one hash.
    more = np.flatnonzero(length > 1)
    if len(more):
        start = right.offsets[probes[more]] + 1
        for rows, b in _bucket_candidates(more, start, right.offsets[1:][probes[more]] - start):
            parts.append(_verify(job, index, positions, hashes, rows, b))
    return parts


def _same_bucket_candidates(table: _Table):
    """Yield (a, b): sorted positions a < b in the same bucket, b = a + 1, then a + 2, ..."""
    a = np.arange(len(table.order))
    later = table.offsets[1:][table.sorted_values] - a - 1  # hashes after a in its bucket
    step = 1
    # One pass per rank; each pass yields at least one pair per remaining bucket, so passes <= candidates.
    while len(keep := np.flatnonzero(later >= step)):
        a, later = a[keep], later[keep]
        for first in range(0, len(a), CANDIDATE_BLOCK):
            yield a[first : first + CANDIDATE_BLOCK], a[first : first + CANDIDATE_BLOCK] + step
        step += 1


def _bucket_candidates(rows: np.ndarray, start: np.ndarray, length: np.ndarray):
    """Yield (rows, b): probe row rows[k] against right sorted positions start[k] .. start[k] + length[k] - 1."""
    heavy = np.flatnonzero(length > SMALL_BUCKET)
    if len(heavy):
        yield from _heavy_bucket_candidates(rows[heavy], start[heavy], length[heavy])
        light = np.flatnonzero(length <= SMALL_BUCKET)
        rows, start, length = rows[light], start[light], length[light]
    # Buckets hold ~1-3 hashes when width ~ log2(n): one short pass per rank in the bucket.
    # (Index arrays from flatnonzero, not boolean masks, which cost ~4 ns per element.)
    keep, rank = np.flatnonzero(length > 0), 0
    while len(keep):
        rows, start, length = rows[keep], start[keep], length[keep]
        for first in range(0, len(rows), CANDIDATE_BLOCK):
            yield rows[first : first + CANDIDATE_BLOCK], start[first : first + CANDIDATE_BLOCK] + rank
        rank += 1
        keep = np.flatnonzero(length > rank)


def _heavy_bucket_candidates(rows: np.ndarray, start: np.ndarray, length: np.ndarray):
    """The same for long buckets (skewed input): flat candidate number k -> (probe g, place in its bucket)."""
    ends = np.cumsum(length, dtype=np.int64)
    for first in range(0, int(ends[-1]), CANDIDATE_BLOCK):
        k = np.arange(first, min(int(ends[-1]), first + CANDIDATE_BLOCK))
        g = np.searchsorted(ends, k, side="right")
        yield rows[g], start[g] + (k - (ends[g] - length[g]))


def _verify_all(job: _Job, index: int, positions: np.ndarray, hashes: np.ndarray, candidates) -> np.ndarray:
    """Verified rows of all (rows, b) candidate blocks."""
    parts = [_verify(job, index, positions, hashes, rows, b) for rows, b in candidates]
    return np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)


def _verify(
    job: _Job, index: int, positions: np.ndarray, hashes: np.ndarray, rows: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Rows (i, j, distance) of candidates: probe row rows[k] (hash hashes[rows[k]]) and right position b[k]."""
    xor = hashes[rows] ^ job.right_table(index).sorted_hashes[b]
    distance = np.bitwise_count(xor)
    hit = np.flatnonzero(distance <= job.threshold)
    if not len(hit):
        return np.empty((0, 3), dtype=np.int64)
    return _rows(job, index, positions, rows[hit], b[hit], xor[hit], distance[hit])


def _rows(
    job: _Job, index: int, positions: np.ndarray, rows: np.ndarray, b: np.ndarray, xor: np.ndarray, distance: np.ndarray
) -> np.ndarray:
    """Output rows for verified pairs (probe row, right sorted position), keeping each pair at its first chunk."""
    first = np.ones(len(rows), dtype=bool)
    for chunk in job.chunks[:index]:
        # Already reported at an earlier chunk: each pair counts only at its first qualifying chunk.
        if chunk.radius >= 0:
            first &= np.bitwise_count(xor & chunk.bits) > chunk.radius
    i = job.left_table(index).order[positions[rows[first] % len(positions)]]
    j = job.right_table(index).order[b[first]]
    if job.self_join:
        i, j = np.minimum(i, j), np.maximum(i, j)
    return np.stack([i, j, distance[first].astype(np.int64)], axis=1)
