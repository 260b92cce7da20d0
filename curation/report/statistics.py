"""Dataset statistics in the manner of MultiVerse's Table 1, computed in one place for the card, the manifest and
`curate stats`.

- dialogues; turns (user utterances) per dialogue, total, average and maximum;
- question (user) and answer (assistant) length, average and maximum: words (whitespace-separated), except for
  text that is mostly Chinese or Japanese, counted in characters (non-space), since those languages do not
  separate words and the paper's LLaMA tokenizer cannot be downloaded here;
- MTLD (McCarthy and Jarvis 2010, threshold 0.72, the mean of a forward and a backward pass; lexicalrichness's)
  per question and per answer, average and maximum, over the utterances in space-separated languages (its
  tokenizer splits on spaces, so Chinese and Japanese text, which the paper's table also leaves out, gets none);
- unique checklist items (case- and space-normalised questions), unique main and sub criteria;
- category counts per label kind.

Reference answers kept on a turn (ConvBench, AlignMMBench) count as answers when the conversation has no
assistant turn after that question.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from benchcurate.curation.core.markdown import table
from benchcurate.curation.core.texts import is_cjk
from benchcurate.schemas import DatasetStatistics, Sample, Spread

MTLD_THRESHOLD = 0.72


def spread(values: Iterable[float]) -> Spread:
    values = list(values)
    if not values:
        return Spread()
    return Spread(count=len(values), average=round(sum(values) / len(values), 2), maximum=round(max(values), 2))


def length(text: str) -> int:
    return sum(not char.isspace() for char in text) if is_cjk(text) else len(text.split())


def mtld(text: str) -> float | None:
    """Lexical diversity of a text in a space-separated language; None for CJK text or a text with no words."""
    from lexicalrichness import LexicalRichness  # imports matplotlib and pandas: only when statistics are made

    if is_cjk(text):
        return None
    words = LexicalRichness(text)
    return words.mtld(threshold=MTLD_THRESHOLD) if words.words else None


def questions_and_answers(sample: Sample) -> tuple[list[str], list[str]]:
    questions, answers = [], []
    turns = sample.conversation
    for position, turn in enumerate(turns):
        if turn.speaker == "assistant":
            answers.append(turn.utterance)
            continue
        questions.append(turn.utterance)
        answered = position + 1 < len(turns) and turns[position + 1].speaker == "assistant"
        if turn.reference and not answered:
            answers.append(turn.reference)
    return questions, answers


def normalised(text: str) -> str:
    return " ".join(text.casefold().split())


def dataset_statistics(samples: Iterable[Sample]) -> DatasetStatistics:
    turns, questions, answers = [], [], []
    checklist_items, main_criteria, sub_criteria = set(), set(), set()
    categories: dict[str, Counter[str]] = {}
    for sample in samples:
        asked, answered = questions_and_answers(sample)
        turns.append(len(asked))
        questions += asked
        answers += answered
        for turn in sample.conversation:
            for item in turn.checklist:
                checklist_items.add(normalised(item.question))
                main_criteria.add(normalised(item.main_criteria))
                sub_criteria.add(normalised(item.sub_criteria))
        for kind, label in sample.categories.model_dump().items():
            if label:
                categories.setdefault(kind, Counter())[label] += 1
    return DatasetStatistics(
        dialogues=len(turns),
        turns_total=sum(turns),
        turns_per_dialogue=spread(turns),
        question_length=spread(map(length, questions)),
        answer_length=spread(map(length, answers)),
        question_mtld=spread(value for value in map(mtld, questions) if value is not None),
        answer_mtld=spread(value for value in map(mtld, answers) if value is not None),
        unique_checklist_items=len(checklist_items),
        unique_main_criteria=len(main_criteria),
        unique_sub_criteria=len(sub_criteria),
        categories={
            kind: dict(sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])))
            for kind, counts in sorted(categories.items())
        },
    )


def statistics_markdown(stats: DatasetStatistics) -> str:
    def pair(value: Spread) -> str:
        return "-" if value.average is None else f"{value.average:g} / {value.maximum:g}"

    rows = [
        ("dialogues", str(stats.dialogues)),
        ("turns (total)", str(stats.turns_total)),
        ("turns per dialogue (avg / max)", pair(stats.turns_per_dialogue)),
        ("question length (avg / max)", pair(stats.question_length)),
        ("answer length (avg / max)", pair(stats.answer_length)),
        ("MTLD of questions (avg / max)", pair(stats.question_mtld)),
        ("MTLD of answers (avg / max)", pair(stats.answer_mtld)),
        ("unique checklist items", str(stats.unique_checklist_items)),
        ("unique main / sub criteria", f"{stats.unique_main_criteria} / {stats.unique_sub_criteria}"),
    ]
    rows += [(f"{kind.replace('_', ' ')} categories", str(len(counts))) for kind, counts in stats.categories.items()]
    return f"{table(rows, ['statistic', 'value'], right=('value',))}\n\nLengths in {stats.length_unit}."
