"""query_filter: drop short queries and queries made mostly of stop words (ProBench Sec. 2.1; thresholds unstated).

Tokens are words (letters and digits) for space-separated languages and characters for Chinese and Japanese.
A query is dropped as `query_too_short` below `min_tokens`, and as `query_mostly_stop_words` when more than
`max_stopword_ratio` of its tokens are function words of its language (`stopwords.yaml`; the language is the
sample's, else detected; a language without a list counts no stop words). Both are decisions on stored counts.
Defaults: 3 tokens, 0.8 ("what is this?" has 3 tokens, all stop words: dropped; "what breed is this dog?" keeps).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Literal

import yaml
from pydantic import Field

from benchcurate.curation.core.texts import is_cjk, normalise, question_text
from benchcurate.curation.engine.stage import ItemStage, StageConfig, StageContext, decision_field
from benchcurate.curation.text.language import detect
from benchcurate.schemas import Drop, Keep, Sample, Scores, Verdict

WORD = re.compile(r"\w+")


@cache
def stop_words() -> dict[str, frozenset[str]]:
    data = yaml.safe_load((resources.files("benchcurate.curation.text") / "stopwords.yaml").read_text(encoding="utf-8"))
    return {language: frozenset(str(word).casefold() for word in words) for language, words in data.items()}


def tokens(text: str) -> list[str]:
    clean = normalise(text)
    if is_cjk(clean):
        return list("".join(WORD.findall(clean)))
    return WORD.findall(clean)


def stopword_ratio(text: str, language: str) -> tuple[int, float]:
    """(tokens, share of them that are stop words of `language`)."""
    found = tokens(text)
    words = stop_words().get(language, frozenset())
    if not found:
        return 0, 0.0
    return len(found), round(sum(token in words for token in found) / len(found), 4)


class QueryFilterConfig(StageConfig):
    field: Literal["question", "user_turns"] = Field("question", description="the first user turn, or all")
    min_tokens: int = decision_field(3, ge=0, description="queries with fewer tokens are dropped")
    max_stopword_ratio: float = decision_field(
        0.8, ge=0, le=1, description="queries with a larger share of stop words are dropped"
    )


def score(item: Sample, cfg: QueryFilterConfig, ctx: StageContext) -> Scores:
    text = question_text(item, cfg.field)
    language = item.language or detect(text)[0]
    count, ratio = stopword_ratio(text, language)
    return Scores(values={"tokens": count, "stopword_ratio": ratio, "language": language})


def decide(scores: Scores, cfg: QueryFilterConfig) -> Verdict:
    values = scores.values
    if values["tokens"] < cfg.min_tokens:
        return Drop(reason="query_too_short", detail={"tokens": values["tokens"], "min_tokens": cfg.min_tokens})
    if values["stopword_ratio"] > cfg.max_stopword_ratio:
        return Drop(
            reason="query_mostly_stop_words",
            detail={"stopword_ratio": values["stopword_ratio"], "max_stopword_ratio": cfg.max_stopword_ratio},
        )
    return Keep()


STAGE = ItemStage(
    name="query_filter",
    config=QueryFilterConfig,
    score=score,
    decide=decide,
    reasons=("query_too_short", "query_mostly_stop_words"),
    parallel="serial",
)
