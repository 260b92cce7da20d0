"""Text filters: normalisation and shingles, MinHash near-duplicates, language, stop words (plain Python)."""

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
    letters = [char for char in text if not char.isspace() and not unicodedata.category(char).startswith("P")]
    return bool(letters) and sum(bool(CJK.match(char)) for char in letters) / len(letters) > 0.3


WORD = re.compile(r"\w+")


def shingles(text: str, word_ngram: int = 2, char_ngram: int = 2) -> set[str]:
    """Every word n-gram of the normalised text from single words up to `word_ngram` words (punctuation is not a
    word), or every character n-gram up to `char_ngram` characters (spaces and punctuation removed) for CJK text.

    Words and word pairs (the default) make "Jaccard 0.8" read as "80% the same": one word changed in a 20-25
    word question leaves 0.86-0.89, while a reordered question loses its pairs."""
    clean = normalise(text)
    if is_cjk(clean):
        units, size, glue = list("".join(WORD.findall(clean))), char_ngram, ""
    else:
        units, size, glue = WORD.findall(clean), word_ngram, " "
    return {glue.join(units[i:i + n]) for n in range(1, size + 1) for i in range(max(1, len(units) - n + 1))
            if units[i:i + n]}


def question_text(sample: Sample, field: str = "question") -> str:
    """The text a filter reads: the first user turn ("question") or every user turn joined ("user_turns")."""
    users = [turn.utterance for turn in sample.conversation if turn.speaker == "user"]
    if field == "question":
        return users[0] if users else ""
    return "\n".join(users)
