"""Agreement statistics against values worked out by hand."""

import pytest

from benchcurate.curation.review.agreement import cohen_kappa, fleiss_kappa, majority, percent_agreement


def test_percent_agreement_counts_agreeing_pairs():
    ratings = {"a": ["yes", "yes"], "b": ["yes", "no"], "c": ["no", "no", "no"], "d": ["yes"]}
    # pairs: a 1 (agree 1), b 1 (0), c 3 (3); d has one rating
    assert percent_agreement(ratings) == pytest.approx(4 / 5)
    assert percent_agreement({"x": ["yes"]}) is None


def test_cohen_kappa_matches_the_textbook_example():
    # 50 items: both yes 20, first yes/second no 5, first no/second yes 10, both no 15 -> p_o 0.7, p_e 0.5, kappa 0.4
    first, second = {}, {}
    for index, (a, b) in enumerate([("y", "y")] * 20 + [("y", "n")] * 5 + [("n", "y")] * 10 + [("n", "n")] * 15):
        first[str(index)], second[str(index)] = a, b
    assert cohen_kappa(first, second) == pytest.approx(0.4)


def test_fleiss_kappa_is_one_for_full_agreement_and_negative_for_systematic_disagreement():
    assert fleiss_kappa({"a": ["y", "y", "y"], "b": ["n", "n", "n"]}) == pytest.approx(1.0)
    assert fleiss_kappa({"a": ["y", "n"], "b": ["n", "y"]}) == pytest.approx(-1.0)
    # Fleiss (1971)-style small case: 3 items x 2 raters, p_o = (1 + 0 + 1) / 3, shares y 3/6, n 3/6
    assert fleiss_kappa({"a": ["y", "y"], "b": ["y", "n"], "c": ["n", "n"]}) == pytest.approx((2 / 3 - 0.5) / 0.5)


def test_majority_and_ties():
    assert majority(["yes", "no", "yes"]) == "yes" and majority(["yes", "no"]) is None and majority([]) is None


def test_kappa_is_undefined_not_one_when_every_answer_is_the_same():
    assert fleiss_kappa({"a": ["yes", "yes"], "b": ["yes", "yes"]}) is None
    assert cohen_kappa({"a": "yes", "b": "yes"}, {"a": "yes", "b": "yes"}) is None
    from benchcurate.curation.review.agreement import figures

    same = figures({"a": ["yes", "yes"], "b": ["yes", "yes", "yes"], "c": ["yes"]})
    assert (same.percent, same.fleiss_kappa, same.kappa_undefined) == (1.0, None, "undefined: every answer was 'yes'")
    assert (same.items_with_two_or_more, same.answers) == (2, 5)
    assert figures({"a": ["no"]}).kappa_undefined == "no sample has two answers yet"
