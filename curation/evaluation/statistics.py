"""The numbers around the papers' own arithmetic (which is in `judging`): bootstrap intervals over samples, means
per group, the per-turn slope, and agreement (percent and Cohen's kappa)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from benchcurate.curation.evaluation.judging import mean, rounded
from benchcurate.schemas.evaluation import Interval

__all__ = [
    "BOOTSTRAP_ROUNDS",
    "agreement",
    "bootstrap",
    "bootstrap_interval",
    "by_group",
    "mean",
    "percentile_interval",
    "rounded",
    "slope",
]

BOOTSTRAP_ROUNDS = 1000
BOOTSTRAP_SEED = 0

Group = TypeVar("Group")


def bootstrap(
    groups: Sequence[Group],
    statistic: Callable[[list[Group]], float | None],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = BOOTSTRAP_SEED,
) -> Interval | None:
    """95% percentile interval of `statistic` over `groups` drawn with replacement (whole samples: a sample's turns
    move together, as they are not independent). None with fewer than two groups."""
    if len(groups) < 2:
        return None
    import numpy as np

    # every round's draws at once: a Python randrange per draw was most of `curate eval`'s CPU on 500 samples
    picks = np.random.default_rng(seed).integers(0, len(groups), size=(rounds, len(groups))).tolist()
    values = [value for value in (statistic([groups[pick] for pick in row]) for row in picks) if value is not None]
    return percentile_interval(values) if len(values) >= rounds // 2 else None


def percentile_interval(values: Sequence[float], method: str = "bootstrap over samples") -> Interval | None:
    """The 2.5th and 97.5th percentiles of `values` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    return Interval(
        low=round(ordered[int(0.025 * len(ordered))], 4),
        high=round(ordered[max(0, math.ceil(0.975 * len(ordered)) - 1)], 4),
        method=method,
    )


def bootstrap_interval(
    groups: dict[str, list[float]], rounds: int = BOOTSTRAP_ROUNDS, seed: int = BOOTSTRAP_SEED
) -> Interval | None:
    """95% interval of the mean of all values, resampling whole groups."""
    members = [values for values in groups.values() if values]
    return bootstrap(members, lambda drawn: sum(map(sum, drawn)) / sum(map(len, drawn)), rounds, seed)


def by_group(pairs: Iterable[tuple[str | None, float]]) -> dict[str, float]:
    """Mean per group name (None: 'unlabelled'), rounded."""
    found: dict[str, list[float]] = defaultdict(list)
    for name, value in pairs:
        found[name or "unlabelled"].append(value)
    return {name: round(sum(values) / len(values), 4) for name, values in sorted(found.items())}


def slope(points: dict[int, float]) -> float | None:
    """Least-squares slope of y over x (per-turn score against turn number)."""
    if len(points) < 2:
        return None
    xs, ys = list(points), list(points.values())
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs), 4)


def logistic_fit(features, targets, weights, ridge: float = 1e-6, iterations: int = 50):
    """Weighted logistic regression by Newton's method (numpy arrays: n x k features, targets in [0, 1], weights);
    the k coefficients. A tiny ridge keeps the steps defined when a feature never varies."""
    import numpy as np

    beta = np.zeros(features.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(features @ beta, -50, 50)))
        gradient = features.T @ (weights * (targets - p)) - ridge * beta
        hessian = (features * (weights * p * (1 - p))[:, None]).T @ features + ridge * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta = beta + step
        if np.abs(step).max() < 1e-9:
            break
    return beta


# --- agreement ----------------------------------------------------------------------------------------------------


def agreement(pairs: Sequence[tuple[Hashable, Hashable]]) -> dict[str, float | int | None]:
    """Percent agreement and Cohen's kappa of two raters' labels on the same items."""
    if not pairs:
        return {"items": 0, "percent_agreement": None, "cohen_kappa": None}
    observed = sum(1 for first, second in pairs if first == second) / len(pairs)
    first_counts: dict[Hashable, int] = defaultdict(int)
    second_counts: dict[Hashable, int] = defaultdict(int)
    for first, second in pairs:
        first_counts[first] += 1
        second_counts[second] += 1
    chance = sum(first_counts[label] * second_counts[label] for label in first_counts) / len(pairs) ** 2
    kappa = None if chance == 1 else (observed - chance) / (1 - chance)
    return {"items": len(pairs), "percent_agreement": round(100 * observed, 2), "cohen_kappa": rounded(kappa)}
