"""Table 1-style statistics on a fixture with values worked out by hand."""

import pytest

from benchcurate.curation.report.statistics import dataset_statistics, length, statistics_markdown
from benchcurate.schemas import Categories, ChecklistItem, Turn
from tests.factories import make_sample
from tests.helpers import compact


def check(question, main="Memory", sub="recall"):
    return ChecklistItem(question=question, main_criteria=main, sub_criteria=sub)


def fixture():
    first = make_sample(
        1,
        categories=Categories(image_main="Charts and Graphs", goal_main="Analysis"),
        conversation=[
            Turn(
                speaker="user",
                utterance="What is this chart about?",  # 5 words
                checklist=[check("Does it name the topic?"), check("does it  name the topic?", "Memory", "Recall")],
            ),
            Turn(speaker="assistant", utterance="It shows sales by month."),  # 5 words
            Turn(
                speaker="user",
                utterance="Which month was best?",
                checklist=[check("Is May named?", "Factual Correctness")],
            ),
            Turn(speaker="assistant", utterance="May was the best month by far, with twice the sales of April."),  # 13
        ],
    )
    second = make_sample(
        2,
        categories=Categories(image_main="Photographs"),
        conversation=[
            Turn(
                speaker="user", utterance="图里有几只猫？", reference="两只猫。"
            ),  # 7 and 4 characters (punctuation counted)
        ],
    )
    third = make_sample(
        3,
        categories=Categories(image_main="Charts and Graphs"),
        conversation=[
            Turn(speaker="user", utterance="Describe it"),
            Turn(speaker="user", utterance="Now more"),
            Turn(speaker="user", utterance="And a poem"),
        ],
    )
    return [first, second, third]


def test_statistics_match_hand_counts():
    stats = dataset_statistics(fixture())
    assert stats.dialogues == 3 and stats.turns_total == 2 + 1 + 3
    assert (stats.turns_per_dialogue.average, stats.turns_per_dialogue.maximum) == (2.0, 3)
    # questions: 5, 4, 7 (CJK characters), 2, 2, 3
    assert stats.question_length.count == 6 and stats.question_length.maximum == 7
    assert stats.question_length.average == pytest.approx(round(23 / 6, 2))
    # answers: 5, 13 and the reference's 4 characters
    assert stats.answer_length.count == 3 and stats.answer_length.maximum == 13
    assert stats.answer_length.average == pytest.approx(round(22 / 3, 2))
    assert stats.question_mtld.count == 5 and stats.answer_mtld.count == 2  # Chinese text has no MTLD
    assert stats.unique_checklist_items == 2 and stats.unique_main_criteria == 2 and stats.unique_sub_criteria == 1
    assert stats.categories["image_main"] == {"Charts and Graphs": 2, "Photographs": 1}
    assert stats.categories["goal_main"] == {"Analysis": 1}
    table = statistics_markdown(stats)
    cells = compact(table)  # a Markdown table's padding aside
    assert "| dialogues | 3 |" in cells and "| unique main / sub criteria | 2 / 1 |" in cells


def test_length_counts_words_or_cjk_characters():
    assert length("a b  c") == 3 and length("两只猫。") == 4 and length("猫 cat") == 2


def test_empty_dataset_has_no_averages():
    stats = dataset_statistics([])
    assert stats.dialogues == 0 and stats.question_length.average is None
    assert "| turns per dialogue (avg / max) | - |" in compact(statistics_markdown(stats))


def test_mtld_on_texts_worked_by_hand():
    from benchcurate.curation.report.statistics import mtld

    # "the the the the": a factor ends at every second word (type-token ratio 1/2 <= 0.72): 4 words / 2 factors
    assert mtld("the the the the") == 2.0
    assert mtld("hello world") == 2.0  # no factor ends: one factor as long as the text
    assert mtld("这是一个关于图表的测试问题") is None and mtld("12 34") is None and mtld("") is None
