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


def shingles(text: str, word_ngram: int = 3, char_ngram: int = 3) -> set[str]:
    """Word n-grams of the normalised text's words (punctuation is not a word), or character n-grams (spaces and
    punctuation removed) for CJK text; a text shorter than one shingle is one shingle."""
    clean = normalise(text)
    if is_cjk(clean):
        chars = "".join(WORD.findall(clean))
        return {chars[i:i + char_ngram] for i in range(max(1, len(chars) - char_ngram + 1))} if chars else set()
    words = WORD.findall(clean)
    return {" ".join(words[i:i + word_ngram]) for i in range(max(1, len(words) - word_ngram + 1))} if words else set()


def question_text(sample: Sample, field: str = "question") -> str:
    """The text a filter reads: the first user turn ("question") or every user turn joined ("user_turns")."""
    users = [turn.utterance for turn in sample.conversation if turn.speaker == "user"]
    if field == "question":
        return users[0] if users else ""
    return "\n".join(users)
