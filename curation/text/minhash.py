"""MinHash near-duplicate groups of short texts.

1. Texts are normalised (NFKC, case, white space; `curation.text.normalise`). Equal normalised texts are
   verbatim copies and are grouped directly, whatever the thresholds.
2. Each distinct text's shingles are its words and word pairs (characters and character pairs for Chinese,
   Japanese and Korean: `curation.text.shingles`), and its signature is a MinHash over them (`minhash_rows`): each
   distinct word is hashed once (BLAKE2b), pairs are folded from their words' codes in numpy, and 128
   multiply-add-shift permutations are taken over blocks of many texts at once; Python only splits each text into
   words. Signatures are stored in the run cache by text and parameters (namespace `minhash`), so a rerun or a
   new batch computes only texts it has not seen.
3. Candidate pairs come from LSH banding over the whole signature matrix at once. The rows per band are the most
   that still make a pair *at* the threshold a candidate with probability >= 0.98 (`CANDIDATE_RECALL`): the
   exact check below removes the extra candidates, so recall near the threshold is not left to the estimate
   (datasketch's `MinHashLSH` balances misses against false candidates and finds about 3 in 4 pairs just above
   its threshold).
4. A candidate pair is a near duplicate when the exact Jaccard similarity of the two shingle sets is at least
   the threshold (so the decision never rests on the estimate); groups are connected components (union-find).
   With scopes (one per text, e.g. the image group of a question about an image), only texts of one scope are
   compared: one generic prompt asked of 55 different images is 55 items, not 54 copies.
5. In each group the kept member is the first in input order; members matching a reference text are all
   dropped, the reference being what is kept.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.grouping import UnionFind
from benchcurate.curation.core.parallel import keep_temporaries_on_heap, on_dask_worker, ordered_map
from benchcurate.curation.core.texts import normalise, shingle_units, shingles, shingles_of_normalised

DEFAULT_THRESHOLD = 0.8  # Jaccard of word and word-pair sets: a word changed in 20-25 words leaves 0.86-0.89
DEFAULT_NUM_PERM = 128
CANDIDATE_RECALL = 0.98  # the chance that LSH makes a pair exactly at the threshold a candidate
SEED = 1
SIGNATURE_CHUNK = 20_000  # texts per task
SIGNATURE_PROCESS_MIN = 400_000  # fewer missing signatures are computed here: about 30 us each, against a
# worker start-up of about 1 s
SHINGLE_BLOCK = 4_096  # units per block of texts: 4 MB of uint64 per n
GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # folds a unit into an n-gram's code before mixing
MAX_HASH = np.uint64((1 << 32) - 1)
NAMESPACE = "minhash"  # of the run cache: signatures as uint32 bytes


@dataclass(frozen=True)
class MinHashParams:
    threshold: float = DEFAULT_THRESHOLD
    num_perm: int = DEFAULT_NUM_PERM
    word_ngram: int = 2
    char_ngram: int = 2

    @property
    def key(self) -> str:
        return f"p{self.num_perm}-s{SEED}-w1to{self.word_ngram}-c1to{self.char_ngram}-mas"

    def bands(self) -> tuple[int, int]:
        """(bands, rows per band): the most rows per band (fewest false candidates) with which a pair at the
        threshold still becomes a candidate with probability CANDIDATE_RECALL, using every permutation."""
        threshold = min(self.threshold, 0.99)
        for rows in range(self.num_perm, 0, -1):
            bands = self.num_perm // rows
            if bands >= 1 and 1 - (1 - threshold**rows) ** bands >= CANDIDATE_RECALL:
                return bands, rows
        return self.num_perm, 1

    def shingles(self, text: str) -> set[str]:
        return shingles(text, self.word_ngram, self.char_ngram)


def jaccard(first: set, second: set) -> float:
    union = len(first | second)
    return len(first & second) / union if union else 1.0


def permutations(num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b), num_perm each: odd 64-bit multipliers and 64-bit offsets, drawn from a RandomState seeded SEED."""
    generator = np.random.RandomState(SEED)
    a = np.frombuffer(generator.bytes(8 * num_perm), dtype="<u8") | np.uint64(1)
    b = np.frombuffer(generator.bytes(8 * num_perm), dtype="<u8").copy()
    return a, b


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place: every input bit moves about half of the output bits."""
    values ^= values >> np.uint64(30)
    values *= np.uint64(0xBF58476D1CE4E5B9)
    values ^= values >> np.uint64(27)
    values *= np.uint64(0x94D049BB133111EB)
    values ^= values >> np.uint64(31)
    return values


def _unit_codes(units: list[str]) -> np.ndarray:
    """A 64-bit hash of each unit (the first 8 bytes of its BLAKE2b), each distinct unit hashed once."""
    index = dict.fromkeys(units)
    digests = b"".join([hashlib.blake2b(unit.encode("utf-8"), digest_size=8).digest() for unit in index])
    for position, unit in enumerate(index):
        index[unit] = position
    return np.frombuffer(digests, dtype="<u8")[
        np.fromiter(map(index.__getitem__, units), dtype=np.int64, count=len(units))
    ]


def _block_minima(codes: np.ndarray, counts: np.ndarray, sizes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Signature rows of a block of texts from their units' codes (`counts` per text, n-grams up to `sizes`)."""
    out = np.full((len(counts), len(a)), MAX_HASH, dtype=np.uint64)
    starts = np.cumsum(counts) - counts
    position = np.arange(len(codes)) - np.repeat(starts, counts)  # of each unit in its text
    owner = np.repeat(np.arange(len(counts)), counts)
    grams = codes.copy()
    for n in range(1, int(sizes.max(initial=0)) + 1):
        if n > 1:  # the n-gram starting at each unit: the (n-1)-gram folded with the next unit
            grams = _mix(grams[:-1] * GOLDEN + codes[n - 1 :])
        last = len(grams)
        valid = (position[:last] + n <= counts[owner[:last]]) & (n <= sizes[owner[:last]])
        if not valid.any():
            break
        keys = grams[valid] >> np.uint64(32)  # 32-bit keys for the multiply-add-shift family
        values = keys[:, None] * a
        values += b
        values >>= np.uint64(32)
        holders = owner[:last][valid]
        first = np.flatnonzero(np.concatenate(([True], holders[1:] != holders[:-1])))
        out[holders[first]] = np.minimum(out[holders[first]], np.minimum.reduceat(values, first, axis=0))
    return out.astype(np.uint32)


def minhash_rows(normalised: Sequence[str], num_perm: int, word_ngram: int = 2, char_ngram: int = 2) -> np.ndarray:
    """One uint32 signature row per normalised text: for each permutation (a, b), the least
    ((a * key + b) mod 2^64) >> 32 over the text's shingles (multiply-add-shift hashing of each shingle's 32-bit
    key); 2^32 - 1 throughout for a text without shingles.

    A shingle's key is its units' BLAKE2b codes folded with splitmix64 (`_mix`), so each distinct word is hashed
    once and the word pairs are made in numpy: per text, Python only splits it into words. The shingles are the
    same as `shingles_of_normalised`'s (which the exact Jaccard reads); texts are taken in blocks of about
    SHINGLE_BLOCK units."""
    a, b = permutations(num_perm)
    split = [shingle_units(text, word_ngram, char_ngram) for text in normalised]
    counts = np.fromiter((len(units) for units, _ in split), dtype=np.int64, count=len(split))
    sizes = np.fromiter((size for _, size in split), dtype=np.int64, count=len(split))
    codes = _unit_codes([unit for units, _ in split for unit in units])
    ends = np.cumsum(counts)
    starts = ends - counts
    rows = [np.zeros((0, num_perm), dtype=np.uint32)]
    first = 0
    while first < len(split):
        stop = max(first + 1, int(np.searchsorted(ends, starts[first] + SHINGLE_BLOCK, side="right")))
        rows.append(_block_minima(codes[starts[first] : ends[stop - 1]], counts[first:stop], sizes[first:stop], a, b))
        first = stop
    return np.concatenate(rows)


def _signature_chunk(job: tuple[MinHashParams, list[str]]) -> list[bytes]:
    """Signatures of some normalised texts as uint32 bytes; a plain function, so a worker process or Dask worker
    runs it."""
    keep_temporaries_on_heap()
    params, texts = job
    return [row.tobytes() for row in minhash_rows(texts, params.num_perm, params.word_ngram, params.char_ngram)]


def signatures(
    texts: Sequence[str], params: MinHashParams, cache: Cache | None, normalised: Sequence[str] | None = None
) -> tuple[np.ndarray, int]:
    """(signature matrix, one row per text, uint32; how many were computed rather than read from the cache).
    `normalised`, when given, holds the texts' normalised forms, already computed.

    Missing signatures are computed in chunks: over worker processes when there are many, over the cluster when
    the stage runs on a Dask worker, else here."""
    if normalised is None:
        normalised = [normalise(text) for text in texts]
    keys = [hashlib.sha256(f"{params.key}\0{clean}".encode()).hexdigest() for clean in normalised]
    stored = cache.get_bytes_many(NAMESPACE, sorted(set(keys))) if cache is not None else {}
    first_of: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key not in stored:
            first_of.setdefault(key, index)
    missing = sorted(first_of.items())
    if missing:
        work = [
            (params, [normalised[index] for _, index in missing[start : start + SIGNATURE_CHUNK]])
            for start in range(0, len(missing), SIGNATURE_CHUNK)
        ]
        spread = on_dask_worker() or (len(missing) >= SIGNATURE_PROCESS_MIN and (os.cpu_count() or 1) > 1)
        rows = [
            row
            for chunk in ordered_map(_signature_chunk, work, "processes" if spread else "serial", os.cpu_count() or 1)
            for row in chunk
        ]
        computed = {key: row for (key, _), row in zip(missing, rows, strict=True)}
        if cache is not None:
            cache.put_bytes_many(NAMESPACE, computed)
        stored.update(computed)
    matrix = (
        np.frombuffer(b"".join(stored[key] for key in keys), dtype=np.uint32).reshape(len(texts), params.num_perm)
        if texts
        else np.zeros((0, params.num_perm), dtype=np.uint32)
    )
    return matrix, len(missing)


def candidate_pairs(matrix: np.ndarray, bands: int, rows: int) -> set[tuple[int, int]]:
    """Pairs (i < j) whose signatures agree on every row of at least one band."""
    pairs: set[tuple[int, int]] = set()
    for band in range(bands):
        block = np.ascontiguousarray(matrix[:, band * rows : (band + 1) * rows])
        keys = block.view(np.dtype((np.void, block.dtype.itemsize * rows))).ravel()
        _, inverse = np.unique(keys, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        ranked = inverse[order]
        starts = np.flatnonzero(np.concatenate(([True], ranked[1:] != ranked[:-1])))
        sizes = np.diff(np.append(starts, len(order)))
        for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):  # buckets of two or more
            members = sorted(order[start : start + size].tolist())
            pairs.update((members[i], members[j]) for i in range(len(members)) for j in range(i + 1, len(members)))
    return pairs


@dataclass(frozen=True)
class Group:
    kept: int | None  # index in the input; None when a reference text is the one kept
    members: list[tuple[int, float]]  # (input index, Jaccard with the kept text or the reference)
    reference: int | None = None  # index in the reference list


def near_duplicate_groups(
    texts: Sequence[str],
    params: MinHashParams,
    cache: Cache | None,
    reference: Sequence[str] = (),
    scopes: Sequence[Hashable] | None = None,
    reference_scopes: Sequence[Hashable] | None = None,
) -> tuple[list[Group], dict[str, int]]:
    """Groups of two or more among `texts` (and of input texts matching a reference text), and counts. With
    `scopes` (and `reference_scopes`), texts are compared only within one scope."""
    everything = list(texts) + list(reference)
    scope = (
        (list(scopes) + list(reference_scopes or [None] * len(reference)))
        if scopes is not None
        else [None] * len(everything)
    )
    normalised = [normalise(text) for text in everything]
    forest = UnionFind(len(everything))
    first_seen: dict[tuple[Hashable, str], int] = {}
    for index, text in enumerate(normalised):  # verbatim copies, whatever the threshold
        forest.union(first_seen.setdefault((scope[index], text), index), index)
    distinct = list(first_seen.values())  # one text per scope and verbatim group
    in_scope: dict[str, dict[Hashable, int]] = defaultdict(dict)  # normalised text -> scope -> its representative
    for index in distinct:
        in_scope[normalised[index]][scope[index]] = index
    unique = list(in_scope)  # each text is signed and compared once
    first_of = {text: next(iter(in_scope[text].values())) for text in unique}
    matrix, computed = signatures([everything[first_of[text]] for text in unique], params, cache, unique)
    bands, rows = params.bands()
    candidates = candidate_pairs(matrix, bands, rows)
    made: dict[str, set[str]] = {}

    def set_of(text: str) -> set[str]:  # the exact shingle sets, of texts in a candidate pair or a group only
        if text not in made:
            made[text] = shingles_of_normalised(text, params.word_ngram, params.char_ngram)
        return made[text]

    confirmed = 0
    for first, second in candidates:
        if jaccard(set_of(unique[first]), set_of(unique[second])) < params.threshold:
            continue
        confirmed += 1
        mine, theirs = in_scope[unique[first]], in_scope[unique[second]]
        for shared in mine.keys() & theirs.keys():  # the two texts near each other within one scope
            forest.union(mine[shared], theirs[shared])
    members: dict[int, list[int]] = defaultdict(list)
    for index in range(len(everything)):
        members[forest.find(index)].append(index)
    groups = []
    n = len(texts)
    for group in members.values():
        inputs = [index for index in group if index < n]
        refs = [index - n for index in group if index >= n]
        if not inputs or (len(inputs) < 2 and not refs):
            continue
        anchor = n + refs[0] if refs else inputs[0]
        dropped = inputs if refs else inputs[1:]
        anchor_set = set_of(normalised[anchor])
        groups.append(
            Group(
                kept=None if refs else inputs[0],
                reference=refs[0] if refs else None,
                members=[(index, round(jaccard(anchor_set, set_of(normalised[index])), 4)) for index in dropped],
            )
        )
    groups.sort(key=lambda group: min(index for index, _ in group.members))
    return groups, {
        "texts": len(texts),
        "reference_texts": len(reference),
        "distinct_texts": len(unique),
        "signatures_computed": computed,
        "candidate_pairs": len(candidates),
        "near_pairs_confirmed": confirmed,
        "bands": bands,
        "rows_per_band": rows,
    }


def group_rows(groups: Iterable[Group], ids: Sequence[str], reference_ids: Sequence[str] = ()) -> list[dict]:
    """`curate text dups` rows: {"kept": id, "dropped": [{"id", "jaccard"}...]} (kept is `reference:<id>` when
    a reference text is the one kept)."""
    return [
        {
            "kept": ids[group.kept] if group.kept is not None else f"reference:{reference_ids[group.reference]}",
            "dropped": [{"id": ids[index], "jaccard": value} for index, value in group.members],
        }
        for group in groups
    ]
