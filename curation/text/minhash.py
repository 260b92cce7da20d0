"""MinHash near-duplicate groups of short texts.

1. Texts are normalised (NFKC, case, white space; `curation.text.normalise`). Equal normalised texts are
   verbatim copies and are grouped directly, whatever the thresholds.
2. Each distinct text's shingles are its words and word pairs (characters and character pairs for Chinese,
   Japanese and Korean: `curation.text.shingles`), and its signature is exactly datasketch's
   `MinHash(num_perm, seed=1)` updated with each shingle's UTF-8 (`minhash_rows`; tested value for value): each
   shingle is hashed (SHA-1, then MurmurHash3's finaliser, as datasketch does) and the affine permutations are taken in numpy over blocks of many texts at once. Signatures are stored in the run
   cache by text and parameters (namespace `minhash`) as datasketch's LeanMinHash bytes, so a rerun or a new
   batch computes only texts it has not seen, `LeanMinHash.deserialize` reads a stored one, and `lsh_index` gives
   a `MinHashLSH` banded as ours that a user's own MinHash queries.
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
import struct
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.grouping import UnionFind
from benchcurate.curation.core.parallel import keep_temporaries_on_heap, on_dask_worker, ordered_map
from benchcurate.curation.core.texts import normalise, shingles, shingles_of_normalised

DEFAULT_THRESHOLD = 0.8  # Jaccard of word and word-pair sets: a word changed in 20-25 words leaves 0.86-0.89
DEFAULT_NUM_PERM = 128
CANDIDATE_RECALL = 0.98  # the chance that LSH makes a pair exactly at the threshold a candidate
SEED = 1  # datasketch's default seed
SCHEME = "affine32"  # datasketch's default permutation scheme (since 2.0)
SIGNATURE_CHUNK = 20_000  # texts per task
SIGNATURE_PROCESS_MIN = 400_000  # fewer missing signatures are computed here: about 30 us each, against a
# worker start-up of about 1 s
SHINGLE_BLOCK = 4_096  # shingles per block of texts: 2 MB of uint32 per 128 permutations
MAX_HASH = np.uint32((1 << 32) - 1)
NAMESPACE = "minhash"  # of the run cache: signatures as datasketch's LeanMinHash bytes
# datasketch's LeanMinHash.serialize layout (native byte order): seed, -num_perm, scheme code, then the values
LEAN_HEADER = struct.Struct("@qiB")
LEAN_VALUES_AT = struct.calcsize("@qiB0I")
LEAN_AFFINE32 = 1
# MurmurHash3's 32-bit finaliser, which datasketch applies to each shingle's hash before the permutations
FMIX32 = (np.uint32(16), np.uint32(0x85EBCA6B), np.uint32(13), np.uint32(0xC2B2AE35), np.uint32(16))


@dataclass(frozen=True)
class MinHashParams:
    threshold: float = DEFAULT_THRESHOLD
    num_perm: int = DEFAULT_NUM_PERM
    word_ngram: int = 2
    char_ngram: int = 2

    @property
    def key(self) -> str:
        return f"p{self.num_perm}-s{SEED}-w1to{self.word_ngram}-c1to{self.char_ngram}-datasketch-{SCHEME}"

    def bands(self) -> tuple[int, int]:
        """(bands, rows per band): the most rows per band (fewest false candidates) with which a pair at the
        threshold still becomes a candidate with probability CANDIDATE_RECALL, using every permutation (at least
        two bands, as datasketch's MinHashLSH requires)."""
        threshold = min(self.threshold, 0.99)
        for rows in range(self.num_perm // 2, 0, -1):
            bands = self.num_perm // rows
            if 1 - (1 - threshold**rows) ** bands >= CANDIDATE_RECALL:
                return bands, rows
        return self.num_perm, 1

    def shingles(self, text: str) -> set[str]:
        return shingles(text, self.word_ngram, self.char_ngram)


def jaccard(first: set, second: set) -> float:
    union = len(first | second)
    return len(first & second) / union if union else 1.0


@lru_cache(maxsize=8)
def permutations(num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b), num_perm uint32 each: those of datasketch's `MinHash(num_perm, seed=SEED)` (taken from it)."""
    from datasketch import MinHash

    a, b = MinHash(num_perm=num_perm, seed=SEED).permutations
    return a.astype(np.uint32), b.astype(np.uint32)


def shingle_codes(shingles: Iterable[str]) -> np.ndarray:
    """datasketch's input hash of each shingle: the first 4 bytes of SHA-1 of its UTF-8 (little-endian), passed
    through MurmurHash3's 32-bit finaliser."""
    digests = b"".join([hashlib.sha1(shingle.encode("utf-8")).digest()[:4] for shingle in shingles])
    values = np.frombuffer(digests, dtype="<u4").astype(np.uint32)
    s1, m1, s2, m2, s3 = FMIX32
    values ^= values >> s1
    values *= m1
    values ^= values >> s2
    values *= m2
    values ^= values >> s3
    return values


def _block_minima(codes: np.ndarray, counts: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Signature rows of a block of texts from their shingles' codes (`counts` per text, in order)."""
    out = np.full((len(counts), len(a)), MAX_HASH, dtype=np.uint32)
    if not len(codes):
        return out
    values = codes[:, None] * a  # uint32: the wrap-around is datasketch's mod 2^32
    values += b
    holders = np.repeat(np.arange(len(counts)), counts)
    first = np.flatnonzero(np.concatenate(([True], holders[1:] != holders[:-1])))
    out[holders[first]] = np.minimum.reduceat(values, first, axis=0)
    return out


def minhash_rows(normalised: Sequence[str], num_perm: int, word_ngram: int = 2, char_ngram: int = 2) -> np.ndarray:
    """One uint32 signature row per normalised text, value for value datasketch's
    `MinHash(num_perm, seed=1)` updated with the UTF-8 of each of the text's shingles (`shingles_of_normalised`):
    per permutation the least (a * code + b) mod 2^32 over the shingles' codes (`shingle_codes`); 2^32 - 1
    throughout for a text without shingles.

    The permutations are taken in numpy over blocks of about SHINGLE_BLOCK shingles of many texts at once; per
    text, Python only makes its shingle set and hashes each shingle."""
    a, b = permutations(num_perm)
    sets = [shingles_of_normalised(text, word_ngram, char_ngram) for text in normalised]
    counts = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
    # every shingle of every text hashed: cheaper than finding the distinct ones first (measured on 50,000 texts)
    codes = shingle_codes([shingle for found in sets for shingle in found])
    ends = np.cumsum(counts)
    starts = ends - counts
    rows = [np.zeros((0, num_perm), dtype=np.uint32)]
    first = 0
    while first < len(normalised):
        stop = max(first + 1, int(np.searchsorted(ends, starts[first] + SHINGLE_BLOCK, side="right")))
        rows.append(_block_minima(codes[starts[first] : ends[stop - 1]], counts[first:stop], a, b))
        first = stop
    return np.concatenate(rows)


def lean_bytes(row: np.ndarray) -> bytes:
    """A signature row as datasketch's `LeanMinHash.serialize` writes it (`LeanMinHash.deserialize` reads it)."""
    header = LEAN_HEADER.pack(SEED, -len(row), LEAN_AFFINE32).ljust(LEAN_VALUES_AT, b"\0")
    return header + np.ascontiguousarray(row, dtype=np.uint32).tobytes()


def lean_minhash(row: np.ndarray):
    """A signature row as a `datasketch.LeanMinHash` (for a user's own datasketch code)."""
    from datasketch import LeanMinHash

    return LeanMinHash(seed=SEED, hashvalues=row, scheme=SCHEME)


def lsh_index(keys: Sequence[Hashable], matrix: np.ndarray, params: MinHashParams):
    """A `datasketch.MinHashLSH` over signature rows, banded as ours (`params.bands()`), so a user's own
    `MinHash(num_perm, seed=1)` of a text's shingles queries it and gets the candidates our search would."""
    from datasketch import MinHashLSH

    index = MinHashLSH(threshold=params.threshold, num_perm=params.num_perm, params=params.bands())
    with index.insertion_session() as session:
        for key, row in zip(keys, matrix, strict=True):
            session.insert(key, lean_minhash(row), check_duplication=False)
    return index


def _signature_chunk(job: tuple[MinHashParams, list[str]]) -> list[bytes]:
    """Signatures of some normalised texts as uint32 bytes; a plain function, so a worker process or Dask worker
    runs it."""
    keep_temporaries_on_heap()
    params, texts = job
    return [lean_bytes(row) for row in minhash_rows(texts, params.num_perm, params.word_ngram, params.char_ngram)]


def signature_key(clean: str, params: MinHashParams) -> str:
    """A normalised text's key in the run cache's `minhash` namespace."""
    return hashlib.sha256(f"{params.key}\0{clean}".encode()).hexdigest()


def signatures(
    texts: Sequence[str], params: MinHashParams, cache: Cache | None, normalised: Sequence[str] | None = None
) -> tuple[np.ndarray, int]:
    """(signature matrix, one row per text, uint32; how many were computed rather than read from the cache).
    `normalised`, when given, holds the texts' normalised forms, already computed.

    Missing signatures are computed in chunks: over worker processes when there are many, over the cluster when
    the stage runs on a Dask worker, else here."""
    if normalised is None:
        normalised = [normalise(text) for text in texts]
    keys = [signature_key(clean, params) for clean in normalised]
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
    matrix = _rows_of([stored[key] for key in keys], params.num_perm)
    return matrix, len(missing)


def _rows_of(stored: list[bytes], num_perm: int) -> np.ndarray:
    """The signature matrix of stored LeanMinHash bytes (one per row)."""
    if not stored:
        return np.zeros((0, num_perm), dtype=np.uint32)
    raw = np.frombuffer(b"".join(stored), dtype=np.uint8).reshape(len(stored), LEAN_VALUES_AT + 4 * num_perm)
    return np.ascontiguousarray(raw[:, LEAN_VALUES_AT:]).view(np.uint32)


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
