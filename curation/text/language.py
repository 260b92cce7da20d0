"""Language identification: langdetect, seeded, as ISO 639-1 codes, with a floor below which it says `unknown`.

- Scripts decide first where they are unambiguous on their own: kana means `ja`, hangul `ko`, other Han
  characters `zh` (langdetect's short-text guesses between these are poor); two such characters suffice, when
  they make at least 30% of the text counted in Han characters and words of other scripts (a Han character is
  about a word: "什么是prescriptive maintenance" is Chinese with two English terms, not French).
- Otherwise letters are what count: a text with fewer than `MIN_LETTERS` (default 6) letters is `unknown`
  rather than a guess; "How many cats?" (11 letters) still gets `en`.
- langdetect's `zh-cn` / `zh-tw` become `zh`; its generator is seeded, so a text always gets the same answer.

ProBench routed English to its single- and multi-round tracks and grouped the rest by frequency into PT, FR, ES,
DE and Other (`language_group`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache

from pydantic import Field

from benchcurate.curation.core.texts import question_text
from benchcurate.curation.engine.stage import ItemStage, StageConfig, StageContext, decision_field
from benchcurate.schemas import Drop, Keep, Sample, Scores, Verdict

MIN_LETTERS = 6
UNKNOWN = "unknown"
KANA = re.compile(r"[\u3040-\u30ff]")
HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff]")
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
OTHER_WORD = re.compile(r"[^\W\d_]+")  # a run of letters (Han characters taken out first)
PROBENCH_GROUPS = ("pt", "fr", "es", "de")


@cache
def _factory():
    from langdetect import DetectorFactory
    from langdetect.detector_factory import init_factory

    DetectorFactory.seed = 0
    init_factory()
    from langdetect import detector_factory

    return detector_factory._factory


def letters(text: str) -> int:
    return sum(unicodedata.category(char).startswith("L") for char in text)


def detect(text: str, min_letters: int = MIN_LETTERS) -> tuple[str, float]:
    """(ISO 639-1 code or 'unknown', probability)."""
    count = letters(text)
    if count >= 2 and KANA.search(text):
        return "ja", 1.0
    if count >= 2 and HANGUL.search(text):
        return "ko", 1.0
    han = len(HAN.findall(text))
    other_words = len(OTHER_WORD.findall(HAN.sub(" ", text)))
    if han >= 2 and han >= (han + other_words) * 0.3:
        return "zh", 1.0
    if count < min_letters:
        return UNKNOWN, 0.0
    from langdetect.lang_detect_exception import LangDetectException

    detector = _factory().create()
    detector.append(text)
    try:
        best = detector.get_probabilities()[0]
    except (LangDetectException, IndexError):
        return UNKNOWN, 0.0
    return best.lang.split("-")[0], round(best.prob, 4)


def detect_many(texts: Iterable[str], min_letters: int = MIN_LETTERS) -> list[tuple[str, float]]:
    return [detect(text, min_letters) for text in texts]


def language_group(code: str, groups: tuple[str, ...] = PROBENCH_GROUPS) -> str:
    """ProBench's multilingual grouping: English, each listed language, else other."""
    return code if code == "en" or code in groups else "other"


class LanguageConfig(StageConfig):
    field: str = Field("question", pattern="^(question|user_turns)$", description="the first user turn, or all")
    min_letters: int = Field(MIN_LETTERS, ge=1, description="shorter texts are 'unknown'")
    keep: list[str] = decision_field([], description="keep only these codes (e.g. [en]); empty keeps all")


def score(item: Sample, cfg: LanguageConfig, ctx: StageContext) -> Scores:
    code, probability = detect(question_text(item, cfg.field), cfg.min_letters)
    return Scores(values={"language": code, "probability": probability, "group": language_group(code)})


def decide(scores: Scores, cfg: LanguageConfig) -> Verdict:
    if cfg.keep and scores.values["language"] not in cfg.keep:
        return Drop(reason="language_not_kept", detail={"language": scores.values["language"], "keep": cfg.keep})
    return Keep()


def apply(item: Sample, scores: Scores, cfg: LanguageConfig) -> Sample:
    return item.model_copy(update={"language": scores.values["language"]})


STAGE = ItemStage(
    name="language_detect",
    config=LanguageConfig,
    score=score,
    decide=decide,
    apply=apply,
    reasons=("language_not_kept",),
    parallel="serial",
)
