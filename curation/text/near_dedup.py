"""text_near_dedup: drop questions (or whole user sides of conversations) that are near copies of another one,
or of a reference set such as an earlier release or another benchmark (ProBench Sec. 2.1: MinHash, parameters
unstated; ours are documented in `curation.text.minhash`).

Signatures are kept in the run cache (`<out>/cache/cache.sqlite`), so a rerun, a changed threshold or a new batch computes only
texts not seen before. The kept member of a group is the first in input order; every other one is dropped as
`near_duplicate_text` naming the kept id (or the reference) and the Jaccard similarity.

For questions about images, the item is the image and the question together (`scope: image`, the default): two
questions are compared only when their images are one picture (the same bytes, or pHashes within
`image_max_hamming_distance`), so one generic prompt ("what is funny about this picture?") over 55 different
images is 55 items, not 54 duplicates. `scope: text` compares every question with every other (text-only sets).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
from pydantic import Field

from benchcurate.curation.core.fingerprint import sha256_file, sha256_json
from benchcurate.curation.core.grouping import groups_from_pairs
from benchcurate.curation.core.hamming import pairs_within
from benchcurate.curation.core.jsonl import read_samples
from benchcurate.curation.core.texts import question_text, user_text
from benchcurate.curation.engine.stage import SetStage, StageConfig, StageContext
from benchcurate.curation.release.files import release_rows
from benchcurate.curation.release.reference import is_release, release_reference
from benchcurate.curation.text.minhash import (
    DEFAULT_NUM_PERM,
    DEFAULT_THRESHOLD,
    MinHashParams,
    near_duplicate_groups,
)
from benchcurate.schemas import Drop, Keep, Sample, Verdict


class TextDedupConfig(StageConfig):
    field: Literal["question", "user_turns"] = Field("question", description="the first user turn, or all of them")
    threshold: float = Field(
        DEFAULT_THRESHOLD, gt=0, le=1, description="Jaccard of shingle sets at which two texts are near copies"
    )
    num_perm: int = Field(DEFAULT_NUM_PERM, ge=16, le=1024, description="MinHash permutations")
    word_ngram: int = Field(2, ge=1, le=10, description="shingles are the words and word n-grams up to this")
    char_ngram: int = Field(2, ge=1, le=10, description="the same in characters, for Chinese, Japanese, Korean")
    scope: Literal["image", "text"] = Field(
        "image", description="image: compare questions about one picture only; text: compare all (text-only sets)"
    )
    image_max_hamming_distance: int = Field(
        8, ge=0, le=32, description="pHashes this close are one picture (scope: image)"
    )
    reference: list[str] = Field(
        default_factory=list,
        description=(
            "samples JSONL files (curate import, a stage's kept.jsonl), release folders or published versions "
            "(hf://ORG/NAME@v0.1.0) whose texts are kept over ours"
        ),
    )


def reference_digest(cfg: TextDedupConfig, run_dir: Path | None = None) -> str:
    return sha256_json(
        [
            [
                location,
                release_reference(location).identity
                if is_release(location)
                else sha256_file(Path(location))
                if Path(location).is_file()
                else None,
            ]
            for location in cfg.reference
        ]
    )


class TextKey(NamedTuple):
    """What the stage decides on: the item's id, its text, and its picture (sha256, pHash) for the scope."""

    id: str
    value: str
    sha256: str | None = None
    phash: str | None = None


def text_view(item: Sample, cfg: TextDedupConfig) -> TextKey:
    image = item.images[0] if item.images else None
    return TextKey(
        item.id, question_text(item, cfg.field), image.sha256 if image else None, image.phash if image else None
    )


def reference_keys(location: str, cfg: TextDedupConfig) -> list[TextKey]:
    """The texts of a reference: a samples JSONL, or a release's rows (folder or hf://), named `<label>:<index>`."""
    if not is_release(location):
        return [text_view(sample, cfg) for sample in read_samples(Path(location))]
    release = release_reference(location)
    keys = []
    for row in release_rows(release.folder, ["index", "conversation", "image_sha256", "image_phash"]):
        text = user_text(
            [turn["utterance"] for turn in row["conversation"] or [] if turn["speaker"] == "user"], cfg.field
        )
        keys.append(TextKey(f"{release.label}:{row['index']}", text, row["image_sha256"], row["image_phash"]))
    return keys


def image_scopes(keys: list[TextKey], max_distance: int) -> list[object]:
    """One scope per item: its picture's group (same bytes, or pHashes within `max_distance`, chained); None for
    an item without an image."""
    forest = list(range(len(keys)))
    with_hash = [k for k, key in enumerate(keys) if key.phash]
    hashes = np.array([int(keys[k].phash, 16) for k in with_hash], dtype=np.uint64)
    pairs = (
        [(with_hash[int(i)], with_hash[int(j)]) for i, j, _ in pairs_within(hashes, max_distance)]
        if len(with_hash) > 1
        else []
    )
    by_bytes: dict[str, int] = {}
    pairs += [(by_bytes.setdefault(key.sha256, k), k) for k, key in enumerate(keys) if key.sha256]
    for group in groups_from_pairs(len(keys), pairs):
        for member in group:
            forest[member] = group[0]
    return [forest[k] if keys[k].sha256 or keys[k].phash else None for k in range(len(keys))]


def select(items: list[TextKey], cfg: TextDedupConfig, ctx: StageContext) -> list[Verdict]:
    params = MinHashParams(
        threshold=cfg.threshold, num_perm=cfg.num_perm, word_ngram=cfg.word_ngram, char_ngram=cfg.char_ngram
    )
    references = [key for location in cfg.reference for key in reference_keys(location, cfg)]
    scopes = reference_scopes = None
    if cfg.scope == "image":
        every = image_scopes([*items, *references], cfg.image_max_hamming_distance)
        scopes, reference_scopes = every[: len(items)], every[len(items) :]
    groups, counts = near_duplicate_groups(
        [item.value for item in items],
        params,
        ctx.cache,
        [reference.value for reference in references],
        scopes,
        reference_scopes,
    )
    ctx.summary.update(counts)
    verdicts: list[Verdict] = [Keep() for _ in items]
    for group in groups:
        kept = items[group.kept].id if group.kept is not None else f"reference:{references[group.reference].id}"
        for index, similarity in group.members:
            verdicts[index] = Drop(reason="near_duplicate_text", detail={"kept": kept, "jaccard": similarity})
    return verdicts


STAGE = SetStage(
    name="text_near_dedup",
    config=TextDedupConfig,
    view=text_view,
    select=select,
    reasons=("near_duplicate_text",),
    outside_input=reference_digest,
    version=2,
)  # 2: words and word pairs, LSH bands for recall at the threshold, image scope
