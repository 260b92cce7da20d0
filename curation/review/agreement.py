"""Agreement between reviewers on categorical judgements, and the majority rule.

- Percent agreement: over items with two or more ratings, the share of rater pairs that agree.
- Cohen's kappa for two raters over the items both rated; Fleiss' kappa for any number of raters per item (items
  with fewer than two ratings are left out; with a constant number of raters it is the textbook formula, with a
  varying number each item's agreement uses its own count).
- Kappa is undefined when chance agreement is 1 (every rating is the same category): both functions return None
  then, never 1.0, and `figures` says why.
- Majority: the most common of an item's ratings; a tie is `None` (an adjudicator settles it).

No seed paper reports curation agreement (seed digest 8.7); recording reviewer ids per judgement is what makes
these computable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

from benchcurate.schemas.review import AgreementFigures


def percent_agreement(ratings: Mapping[str, Sequence[Hashable]]) -> float | None:
    agree = pairs = 0
    for values in ratings.values():
        counts = Counter(values)
        n = len(values)
        if n < 2:
            continue
        pairs += n * (n - 1) // 2
        agree += sum(count * (count - 1) // 2 for count in counts.values())
    return agree / pairs if pairs else None


def fleiss_kappa(ratings: Mapping[str, Sequence[Hashable]]) -> float | None:
    items = [values for values in ratings.values() if len(values) >= 2]
    if not items:
        return None
    categories = sorted({value for values in items for value in values}, key=str)
    total = sum(len(values) for values in items)
    shares = {category: sum(values.count(category) for values in items) / total for category in categories}
    observed = sum(
        (sum(c * c for c in Counter(values).values()) - len(values)) / (len(values) * (len(values) - 1))
        for values in items
    ) / len(items)
    expected = sum(share * share for share in shares.values())
    return None if expected == 1 else (observed - expected) / (1 - expected)


def cohen_kappa(first: Mapping[str, Hashable], second: Mapping[str, Hashable]) -> float | None:
    common = sorted(set(first) & set(second))
    if not common:
        return None
    observed = sum(first[item] == second[item] for item in common) / len(common)
    a, b = Counter(first[item] for item in common), Counter(second[item] for item in common)
    expected = sum(a[category] * b[category] for category in set(a) | set(b)) / len(common) ** 2
    return None if expected == 1 else (observed - expected) / (1 - expected)


def figures(ratings: Mapping[str, Sequence[Hashable]]) -> AgreementFigures:
    """Percent agreement and Fleiss' kappa of one kind of judgement, with the reason when kappa has no value."""
    rated = [values for values in ratings.values() if len(values) >= 2]
    seen = {value for values in rated for value in values}
    undefined = (
        f"undefined: every answer was {next(iter(seen))!r}"
        if len(seen) == 1
        else "no sample has two answers yet"
        if not rated
        else None
    )
    return AgreementFigures(
        items_with_two_or_more=len(rated),
        answers=sum(len(values) for values in rated),
        percent=percent_agreement(ratings),
        fleiss_kappa=fleiss_kappa(ratings),
        kappa_undefined=undefined,
    )


def majority(values: Sequence[Hashable]) -> Hashable | None:
    """The most common value, or None on a tie (or no values)."""
    ranked = Counter(values).most_common()
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]
