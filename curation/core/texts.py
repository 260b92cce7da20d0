"""Text as the filters read it: normalisation, CJK detection, shingles, the question of a sample."""

from __future__ import annotations

import re
import unicodedata

from benchcurate.schemas import Sample

SPACES = re.compile(r"\s+")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def normalise(text: str) -> str:
    """Unicode NFKC, case-folded, runs of white space made one space, trimmed: copies that differ only in these
    are the same text."""
    return SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def is_cjk(text: str) -> bool:
    """Mostly Chinese, Japanese or Korean characters (over 30% of the letters), so words are not space-separated."""
    if CJK.search(text) is None:  # no CJK character at all (most texts): the count below would be 0
        return False
    letters = [char for char in text if not char.isspace() and not unicodedata.category(char).startswith("P")]
    return bool(letters) and sum(bool(CJK.match(char)) for char in letters) / len(letters) > 0.3


WORD = re.compile(r"\w+")


def shingles(text: str, word_ngram: int = 2, char_ngram: int = 2) -> set[str]:
    """Every word n-gram of the normalised text from single words up to `word_ngram` words (punctuation is not a
    word), or every character n-gram up to `char_ngram` characters (spaces and punctuation removed) for CJK text.

    Words and word pairs (the default) make "Jaccard 0.8" read as "80% the same": one word changed in a 20-25
    word question leaves 0.86-0.89, while a reordered question loses its pairs."""
    return shingles_of_normalised(normalise(text), word_ngram, char_ngram)


def shingles_of_normalised(clean: str, word_ngram: int = 2, char_ngram: int = 2) -> set[str]:
    """`shingles` of a text already passed through `normalise`."""
    units, size = shingle_units(clean, word_ngram, char_ngram)
    glue = "" if is_cjk(clean) else " "
    return {glue.join(gram) for n in range(1, size + 1) for gram in zip(*(units[k:] for k in range(n)))}


def shingle_units(clean: str, word_ngram: int = 2, char_ngram: int = 2) -> tuple[list[str], int]:
    """(the units a normalised text's shingles are n-grams of, the largest n): its words (punctuation is not a
    word) and `word_ngram`, or for CJK text its characters (spaces and punctuation removed) and `char_ngram`.
    A text shorter than n units has no n-grams: its shorter ones already include the whole text."""
    if is_cjk(clean):
        return list("".join(WORD.findall(clean))), char_ngram
    return WORD.findall(clean), word_ngram


def question_text(sample: Sample, field: str = "question") -> str:
    """The text a filter reads: the first user turn ("question") or every user turn joined ("user_turns")."""
    return user_text([turn.utterance for turn in sample.conversation if turn.speaker == "user"], field)


def user_text(users: list[str], field: str = "question") -> str:
    """The first of the user turns ("question"), or all of them joined ("user_turns")."""
    if field == "question":
        return users[0] if users else ""
    return "\n".join(users)
