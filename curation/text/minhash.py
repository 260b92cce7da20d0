"""MinHash near-duplicate groups of short texts, with datasketch.

1. Texts are normalised (NFKC, case, white space; `curation.text.normalise`). Equal normalised texts are
   verbatim copies and are grouped directly, whatever the thresholds.
2. Each distinct text becomes a set of shingles (its words and word pairs; characters and character pairs for
   Chinese, Japanese and Korean: `curation.text.shingles`) and a datasketch MinHash, computed with
   `MinHash.bulk` (hashing vectorised per text) instead of token-by-token updates. Signatures are stored in the
   run cache by text and parameters (namespace `minhash`), so a rerun or a new batch computes only texts it has
   not seen.
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

from benchcurate.curation.cache import Cache
from benchcurate.curation.grouping import UnionFind
from benchcurate.curation.parallel import keep_temporaries_on_heap, on_dask_worker, ordered_map
from benchcurate.curation.text import normalise, shingles

DEFAULT_THRESHOLD = 0.8   # Jaccard of word and word-pair sets: a word changed in 20-25 words leaves 0.86-0.89
DEFAULT_NUM_PERM = 128
CANDIDATE_RECALL = 0.98   # the chance that LSH makes a pair exactly at the threshold a candidate
SEED = 1
SIGNATURE_CHUNK = 2_000          # texts per task
SIGNATURE_PROCESS_MIN = 20_000   # fewer missing signatures are computed here (worker start-up costs about 1 s)
NAMESPACE = "minhash"            # of the run cache: signatures as uint32 bytes


@dataclass(frozen=True)
class MinHashParams:
    threshold: float = DEFAULT_THRESHOLD
    num_perm: int = DEFAULT_NUM_PERM
    word_ngram: int = 2
    char_ngram: int = 2

    @property
    def key(self) -> str:
        return f"p{self.num_perm}-s{SEED}-w1to{self.word_ngram}-c1to{self.char_ngram}-legacy"

    def bands(self) -> tuple[int, int]:
        """(bands, rows per band): the most rows per band (fewest false candidates) with which a pair at the
        threshold still becomes a candidate with probability CANDIDATE_RECALL, using every permutation."""
        threshold = min(self.threshold, 0.99)
        for rows in range(self.num_perm, 0, -1):
            bands = self.num_perm // rows
            if bands >= 1 and 1 - (1 - threshold ** rows) ** bands >= CANDIDATE_RECALL:
                return bands, rows
        return self.num_perm, 1

    def shingles(self, text: str) -> set[str]:
        return shingles(text, self.word_ngram, self.char_ngram)


def jaccard(first: set, second: set) -> float:
    union = len(first | second)
    return len(first & second) / union if union else 1.0


def _signature_chunk(job: tuple[MinHashParams, list[str]]) -> list[bytes]:
    """Signatures of some texts as uint32 bytes; a plain function, so a worker process or Dask worker runs it."""
    from datasketch import MinHash

    keep_temporaries_on_heap()
    params, texts = job
    sets = [[shingle.encode("utf-8") for shingle in sorted(params.shingles(text))] for text in texts]
    return [minhash.hashvalues.astype(np.uint32).tobytes()
            for minhash in MinHash.bulk(sets, num_perm=params.num_perm, seed=SEED, scheme="legacy")]


def signatures(texts: Sequence[str], params: MinHashParams, cache: Cache | None) -> tuple[np.ndarray, int]:
    """(signature matrix, one row per text, uint32; how many were computed rather than read from the cache).

    Missing signatures are computed in chunks: over worker processes when there are many, over the cluster when
    the stage runs on a Dask worker, else here."""
    keys = [hashlib.sha256(f"{params.key}\0{normalise(text)}".encode()).hexdigest() for text in texts]
    stored = cache.get_bytes_many(NAMESPACE, sorted(set(keys))) if cache is not None else {}
    missing = sorted({key: text for key, text in zip(keys, texts) if key not in stored}.items())
    if missing:
        work = [(params, [text for _, text in missing[start:start + SIGNATURE_CHUNK]])
                for start in range(0, len(missing), SIGNATURE_CHUNK)]
        spread = on_dask_worker() or (len(missing) >= SIGNATURE_PROCESS_MIN and (os.cpu_count() or 1) > 1)
        rows = [row for chunk in ordered_map(_signature_chunk, work, "processes" if spread else "serial",
                                             os.cpu_count() or 1) for row in chunk]
        computed = {key: row for (key, _), row in zip(missing, rows, strict=True)}
        if cache is not None:
            cache.put_bytes_many(NAMESPACE, computed)
        stored.update(computed)
    matrix = np.frombuffer(b"".join(stored[key] for key in keys), dtype=np.uint32).reshape(len(texts), params.num_perm) \
        if texts else np.zeros((0, params.num_perm), dtype=np.uint32)
    return matrix, len(missing)


def candidate_pairs(matrix: np.ndarray, bands: int, rows: int) -> set[tuple[int, int]]:
    """Pairs (i < j) whose signatures agree on every row of at least one band."""
    pairs: set[tuple[int, int]] = set()
    for band in range(bands):
        block = np.ascontiguousarray(matrix[:, band * rows:(band + 1) * rows])
        keys = block.view(np.dtype((np.void, block.dtype.itemsize * rows))).ravel()
        _, inverse = np.unique(keys, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        for bucket in np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1):
            if len(bucket) > 1:
                members = sorted(bucket.tolist())
                pairs.update((members[i], members[j]) for i in range(len(members))
                             for j in range(i + 1, len(members)))
    return pairs


@dataclass(frozen=True)
class Group:
    kept: int | None                          # index in the input; None when a reference text is the one kept
    members: list[tuple[int, float]]          # (input index, Jaccard with the kept text or the reference)
    reference: int | None = None              # index in the reference list


def near_duplicate_groups(texts: Sequence[str], params: MinHashParams, cache: Cache | None,
                          reference: Sequence[str] = (), scopes: Sequence[Hashable] | None = None,
                          reference_scopes: Sequence[Hashable] | None = None) -> tuple[list[Group], dict[str, int]]:
    """Groups of two or more among `texts` (and of input texts matching a reference text), and counts. With
    `scopes` (and `reference_scopes`), texts are compared only within one scope."""
    everything = list(texts) + list(reference)
    scope = (list(scopes) + list(reference_scopes or [None] * len(reference))) if scopes is not None \
        else [None] * len(everything)
    normalised = [normalise(text) for text in everything]
    forest = UnionFind(len(everything))
    first_seen: dict[tuple[Hashable, str], int] = {}
    for index, text in enumerate(normalised):              # verbatim copies, whatever the threshold
        forest.union(first_seen.setdefault((scope[index], text), index), index)
    distinct = list(first_seen.values())                   # one text per scope and verbatim group
    in_scope: dict[str, dict[Hashable, int]] = defaultdict(dict)  # normalised text -> scope -> its representative
    for index in distinct:
        in_scope[normalised[index]][scope[index]] = index
    unique = list(in_scope)                                # each text is signed and compared once
    first_of = {text: next(iter(in_scope[text].values())) for text in unique}
    matrix, computed = signatures([everything[first_of[text]] for text in unique], params, cache)
    bands, rows = params.bands()
    sets = [params.shingles(everything[first_of[text]]) for text in unique]
    candidates = candidate_pairs(matrix, bands, rows)
    confirmed = 0
    for first, second in candidates:
        if jaccard(sets[first], sets[second]) < params.threshold:
            continue
        confirmed += 1
        mine, theirs = in_scope[unique[first]], in_scope[unique[second]]
        for shared in mine.keys() & theirs.keys():          # the two texts near each other within one scope
            forest.union(mine[shared], theirs[shared])
    set_of = dict(zip(unique, sets))
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
        anchor_set = set_of[normalised[anchor]]
        groups.append(Group(kept=None if refs else inputs[0], reference=refs[0] if refs else None,
                            members=[(index, round(jaccard(anchor_set, set_of[normalised[index]]), 4))
                                     for index in dropped]))
    groups.sort(key=lambda group: min(index for index, _ in group.members))
    return groups, {"texts": len(texts), "reference_texts": len(reference), "distinct_texts": len(unique),
                    "signatures_computed": computed,
                    "candidate_pairs": len(candidates), "near_pairs_confirmed": confirmed, "bands": bands,
                    "rows_per_band": rows}


def group_rows(groups: Iterable[Group], ids: Sequence[str], reference_ids: Sequence[str] = ()) -> list[dict]:
    """`curate text dups` rows: {"kept": id, "dropped": [{"id", "jaccard"}...]} (kept is `reference:<id>` when
    a reference text is the one kept)."""
    return [{"kept": ids[group.kept] if group.kept is not None else f"reference:{reference_ids[group.reference]}",
             "dropped": [{"id": ids[index], "jaccard": value} for index, value in group.members]} for group in groups]
