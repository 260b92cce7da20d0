"""text_near_dedup: drop questions (or whole user sides of conversations) that are near copies of another one,
or of a reference set such as an earlier release or another benchmark (ProBench Sec. 2.1: MinHash, parameters
unstated; ours are documented in `curation.text.minhash`).

Signatures are kept in the run cache (`<out>/cache/cache.sqlite`), so a rerun, a changed threshold or a new batch computes only
texts not seen before. The kept member of a group is the first in input order; every other one is dropped as
`near_duplicate_text` naming the kept id (or the reference) and the Jaccard similarity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from benchcurate.curation.fingerprint import sha256_file, sha256_json
from benchcurate.curation.jsonl import read_samples
from benchcurate.curation.stage import Keyed, SetStage, StageConfig, StageContext
from benchcurate.curation.text import question_text
from benchcurate.curation.text.minhash import (
    DEFAULT_NUM_PERM,
    DEFAULT_THRESHOLD,
    MinHashParams,
    near_duplicate_groups,
)
from benchcurate.schemas import Drop, Keep, Sample, Verdict


class TextDedupConfig(StageConfig):
    field: Literal["question", "user_turns"] = Field("question", description="the first user turn, or all of them")
    threshold: float = Field(DEFAULT_THRESHOLD, gt=0, le=1, description="Jaccard of shingle sets at which two texts "
                                                                        "are near copies")
    num_perm: int = Field(DEFAULT_NUM_PERM, ge=16, le=1024, description="MinHash permutations")
    word_ngram: int = Field(3, ge=1, le=10, description="words per shingle")
    char_ngram: int = Field(3, ge=1, le=10, description="characters per shingle for Chinese, Japanese, Korean")
    reference: list[str] = Field(default_factory=list, description="samples JSONL files (curate import, releases' "
                                                                   "kept.jsonl) whose texts are kept over ours")


def reference_digest(cfg: TextDedupConfig, run_dir: Path | None = None) -> str:
    return sha256_json([[path, sha256_file(Path(path)) if Path(path).is_file() else None] for path in cfg.reference])


def text_view(item: Sample, cfg: TextDedupConfig) -> Keyed:
    return Keyed(item.id, question_text(item, cfg.field))


def select(items: list[Keyed], cfg: TextDedupConfig, ctx: StageContext) -> list[Verdict]:
    params = MinHashParams(threshold=cfg.threshold, num_perm=cfg.num_perm, word_ngram=cfg.word_ngram,
                           char_ngram=cfg.char_ngram)
    references = [text_view(sample, cfg) for path in cfg.reference for sample in read_samples(Path(path))]
    groups, counts = near_duplicate_groups([item.value for item in items], params, ctx.cache,
                                           [reference.value for reference in references])
    ctx.summary.update(counts)
    verdicts: list[Verdict] = [Keep() for _ in items]
    for group in groups:
        kept = items[group.kept].id if group.kept is not None else f"reference:{references[group.reference].id}"
        for index, similarity in group.members:
            verdicts[index] = Drop(reason="near_duplicate_text", detail={"kept": kept, "jaccard": similarity})
    return verdicts


STAGE = SetStage(name="text_near_dedup", config=TextDedupConfig, view=text_view, select=select,
                 reasons=("near_duplicate_text",), outside_input=reference_digest)
