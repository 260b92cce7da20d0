"""ProBench's protocol (Sec. 2.2, 3.1, App. A and D; digest 3.5): the model answers every user turn on its own
history; a vision judge compares its conversation with the baseline's (the release's baseline answers, or another
model's with `--baseline-model`) twice, once in each order, with a five-level verdict; ratings come from the
battles.

- Battles: a verdict is the model's win, tie or loss; a clear verdict (>>) counts as three battles, a slight one as
  one (arena-hard-auto's convention: ProBench does not say how it weighs >>).
- Win rate: the share of verdicts the model wins, a tie counting half.
- Ratings on the ELO scale (alpha 400) with the baseline fixed at 1114, as in ProBench's tables: Bradley-Terry by
  maximum likelihood (the headline, with a bootstrap 95% interval over samples) and the online ELO update with
  K = 32, whose result depends on the order of the battles: its median and 2.5-97.5 percentiles over 200 orders.
  Per task field, image field, language, number of rounds, track and challenge level.
- ProBench's style control (Sec. 2, "Bradley-Terry refinement"): one Bradley-Terry fit over every model evaluated
  on the release with the same judge and baseline, with the style differences of each battle (words, markdown
  headers, list items, bold; model against baseline) as covariates; a model's rating is its strength at the
  baseline's style. Strength and style separate only across models: with fewer than two models, or with styles
  that move in lockstep with the models, the fit is not identifiable and no number is given.
- Ours, not the paper's: order consistency (do a sample's two verdicts agree?) and which position the judge
  favours; a significant preference is a warning (judging both orders cancels it in the scores, but the
  verdicts then say less than their number suggests).
"""

from __future__ import annotations

import math
from collections import defaultdict

from benchcurate.curation.evaluation.judging import (
    ELO_SCALE,
    PB_BASELINE_RATING,
    PB_BATTLES,
    PB_LANGUAGE_RULE,
    PB_ORDERS,
    PB_PRIOR,
    PB_STYLE,
    PB_VERDICTS,
    TurnItem,
    pb_bradley_terry,
    pb_exchange,
    pb_margin,
    pb_online_elo,
    pb_online_elo_orders,
    pb_style,
    pb_tally,
    pb_win_rate,
    read_pb_verdict,
    rounded,
    turn_items,
)
from benchcurate.curation.evaluation.protocol import (
    Aggregate,
    Asker,
    EvalFailed,
    failed,
    folder_name,
    refuse_options,
    scored_by_sample,
)
from benchcurate.curation.evaluation.statistics import BOOTSTRAP_ROUNDS, bootstrap, logistic_fit, percentile_interval
from benchcurate.curation.models.base import ChatTurn
from benchcurate.schemas.evaluation import EvalOptions, Interval, Judgment

HARD_CHALLENGE = 6.0  # ProBench: challenge scores of 6 and above are hard
STYLE_ROUNDS = 200  # bootstrap rounds of the style-controlled fit (a Newton fit each)
MIN_STYLE_MODELS = 2  # strength and style separate only across models
POSITION_Z = 2.576  # a position preference this many standard errors from half (p < 0.01, two-sided) is a warning
MIN_DECISIVE = 10  # fewer decisive verdicts say nothing about a position preference


def style_controlled(runs: dict[object, list[Judgment]], rounds: int = STYLE_ROUNDS) -> dict[object, dict]:
    """ProBench's style control over several runs against one baseline (keys: runs; values: their judgments):
    logistic Bradley-Terry with one strength per run (the baseline's fixed at 0, so at 1114) and the battles'
    style differences, scaled by their spread, as covariates; each run's rating at the baseline's style, with a
    bootstrap 95% interval over samples, or why there is none."""
    scored = {
        key: found
        for key, found in (
            (key, [j for j in found if not j.failure and "margin" in j.scores]) for key, found in runs.items()
        )
        if found
    }
    keys = list(scored)
    rows = [(k, j) for k, key in enumerate(keys) for j in scored[key]]
    design, problem = style_design(rows, len(keys))
    if problem:
        return {key: {"value": None, "interval": None, "note": problem} for key in keys}
    values = style_fit(design, rows, len(keys))
    by_sample: dict[str, list[int]] = defaultdict(list)
    for index, (_, judgment) in enumerate(rows):
        by_sample[judgment.sample_id].append(index)
    drawn = bootstrap_fits(design, rows, len(keys), list(by_sample.values()), rounds)
    note = (
        f"one fit over {len(keys)} models against the same baseline; the rating is the model's strength at the "
        f"baseline's style"
    )
    found = {}
    for k, key in enumerate(keys):
        interval = percentile_interval([values[k] for values in drawn])
        found[key] = {
            "value": rounded(float(values[k]), 2),
            "note": note,
            "interval": [round(interval.low, 2), round(interval.high, 2)] if interval else None,
        }
    return found


def style_design(rows: list[tuple[int, Judgment]], players: int):
    """The design matrix (one column per run, then each style feature that varies, scaled by its spread), or why
    strength and style cannot be told apart."""
    import numpy as np

    if players < MIN_STYLE_MODELS:
        return None, (
            f"not identifiable: strength and style separate only across models, and {players} model(s) "
            f"were evaluated with this judge and baseline (at least {MIN_STYLE_MODELS} are needed)"
        )
    style = np.array([[j.scores.get(f"style_{name}", 0.0) for name in PB_STYLE] for _, j in rows])
    spread = style.std(axis=0)
    design = np.hstack([np.eye(players)[[k for k, _ in rows]], style[:, spread > 0] / spread[spread > 0]])
    if np.linalg.matrix_rank(design) < design.shape[1]:
        return None, "not identifiable: the style differences move in lockstep with the models"
    return design, None


def style_fit(design, rows: list[tuple[int, Judgment]], players: int, chosen=None):
    """Each run's rating from the battles `chosen` (all by default), half a tie per run at the baseline's style
    added so that a run winning or losing everything stays finite."""
    import numpy as np

    chosen = np.arange(len(rows)) if chosen is None else chosen
    battles = [PB_BATTLES[int(rows[index][1].scores["margin"])] for index in chosen]
    prior = np.hstack([np.eye(players), np.zeros((players, design.shape[1] - players))])
    beta = logistic_fit(
        np.vstack([design[chosen], prior]),
        np.array([battle.outcome for battle in battles] + [0.5] * players),
        np.array([battle.weight for battle in battles] + [PB_PRIOR] * players),
    )
    return PB_BASELINE_RATING + ELO_SCALE * beta[:players] / math.log(10)


def bootstrap_fits(design, rows: list[tuple[int, Judgment]], players: int, samples: list[list[int]], rounds: int):
    """The fit again on samples drawn with replacement (a sample's battles together); none with one sample."""
    import numpy as np

    rng, drawn = np.random.default_rng(0), []
    for _ in range(rounds if len(samples) > 1 else 0):
        picks = rng.integers(0, len(samples), len(samples))
        drawn.append(style_fit(design, rows, players, np.array([index for pick in picks for index in samples[pick]])))
    return drawn


def position_preference(judgments: list[Judgment]) -> dict:
    """Of the decisive verdicts, how often the judge chose the answer shown first (ours, not the paper's)."""
    decisive = [judgment for judgment in judgments if judgment.scores["margin"] != 0]
    first = sum(1 for j in decisive if (j.scores["margin"] > 0) == (j.setting == "model_first"))
    count = len(decisive)
    return {
        "decisive_verdicts": count,
        "first_position_chosen_percent": rounded(100 * first / count, 2) if count else None,
        "z": rounded((first - count / 2) / math.sqrt(count / 4), 2) if count else None,
    }


def position_warning(preference: dict) -> list[str]:
    z = preference["z"]
    if preference["decisive_verdicts"] < MIN_DECISIVE or abs(z) < POSITION_Z:
        return []
    side = "first" if z > 0 else "second"
    share = preference["first_position_chosen_percent"] if z > 0 else 100 - preference["first_position_chosen_percent"]
    warning = (
        f"the judge favours the answer shown {side}: it chose it in {share:.0f}% of "
        f"{preference['decisive_verdicts']} decisive verdicts (p < 0.01); judging in both orders cancels this "
        f"in the scores, but the verdicts say less than their number suggests and the intervals are too narrow"
    )
    return [warning]


def turn_key(turn: int) -> str:
    """How the answer to a round is asked for (its seed, a harness's answer), the model's and the baseline's."""
    return f"turn/{turn}"


def margins(judgments: list[Judgment]) -> tuple[int, ...]:
    return tuple(int(judgment.scores["margin"]) for judgment in judgments)


def rounds_bucket(count: int) -> str:
    return str(count) if count < 6 else "6+"


class ProBenchProtocol:
    name = "probench"
    score_name = "Bradley-Terry rating against the baseline fixed at 1114 (ELO scale)"
    prompts = ("judge_pb_pairwise",)

    def settings(self, options: EvalOptions) -> dict[str, str | None]:
        refuse_options(options, self.name, {"baseline"})
        return {
            "history": "own (the model's earlier answers)",
            "baseline": f"model {options.baseline.model}" if options.baseline else "the release's baseline answers",
        }

    def setting(self, options: EvalOptions) -> str:
        return f"baseline-{folder_name(options.baseline.model)}" if options.baseline else "baseline-release"

    def answer_key(self, item: TurnItem, history: str) -> str:
        return turn_key(item.turn)

    def across_models(self, runs: dict[object, list[Judgment]]) -> dict[object, dict]:
        return {key: {"bradley_terry_style_controlled": rating} for key, rating in style_controlled(runs).items()}

    def judge_sample(self, row: dict, ask: Asker, options: EvalOptions) -> list[Judgment]:
        items = turn_items(row, self.name)  # each question with the baseline's answer after it
        questions, stored = [item.question for item in items], [item.reference for item in items]
        challenge = row.get("challenge") or {}
        hard = max(challenge.values(), default=None)
        groups = {
            "task_field": row.get("main_task_category"),
            "image_field": row.get("image_main_category"),
            "language": row.get("language"),
            "track": row.get("track"),
            "rounds": rounds_bucket(len(questions)),
            "challenge": None if hard is None else ("hard" if hard >= HARD_CHALLENGE else "easy"),
        }
        made = [
            Judgment(
                sample_id=row["index"],
                turn=0,
                setting=order,
                question=questions[-1] if questions else "",
                groups=groups,
            )
            for order in PB_ORDERS
        ]
        try:
            if not questions:
                raise EvalFailed("incomplete_sample", "no user turn")
            mine = self._answers(questions, ask, "model")
            theirs = self._answers(questions, ask, "baseline") if options.baseline else stored
            if any(not answer for answer in theirs):
                raise EvalFailed(
                    "incomplete_sample",
                    "a user turn has no baseline answer in the release (pass --baseline-model to have a model answer)",
                )
        except EvalFailed as error:
            return [failed(judgment, error) for judgment in made]
        rule = PB_LANGUAGE_RULE if row.get("track") == "multi-linguistic" else ""
        for judgment in made:
            judgment.answer = mine[-1]
            first, second = (mine, theirs) if judgment.setting == "model_first" else (theirs, mine)
            try:
                reply = ask.judge_call(
                    "judge_pb_pairwise",
                    {"exchange": pb_exchange(questions, first, second), "language_rule": rule},
                    read_pb_verdict,
                    judgment.setting,
                )
            except EvalFailed as error:
                failed(judgment, error)
                continue
            judgment.judge["pairwise"] = reply.record()
            judgment.scores = {
                "margin": float(pb_margin(reply.parsed, judgment.setting)),
                **{f"style_{name}": value for name, value in pb_style(mine, theirs).items()},
            }
        return made

    @staticmethod
    def _answers(questions: list[str], ask: Asker, who: str) -> list[str]:
        history, answers = [], []
        for number, question in enumerate(questions, 1):
            answer = ask.answer(question, history, turn_key(number), who=who)
            answers.append(answer)
            history = [*history, ChatTurn("user", question), ChatTurn("assistant", answer)]
        return answers

    def aggregate(self, judgments: list[Judgment]) -> Aggregate:
        per_sample, scored = scored_by_sample(judgments)
        if not scored:
            return Aggregate(None)
        groups = [margins(found) for found in per_sample.values()]
        tallies = [pb_tally(group) for group in groups]
        orders = pb_online_elo_orders(groups)
        preference = position_preference(scored)
        sub_scores = {
            "win_rate": rated(pb_win_rate, tallies),
            "elo_online": {
                "value": rounded(pb_online_elo(groups), 2),
                "interval": [found.low, found.high] if (found := percentile_interval(orders)) else None,
                "note": f"median and 2.5-97.5 percentiles over {len(orders)} orders of the battles",
            },
            "bradley_terry": rated(pb_bradley_terry, tallies),
            "bradley_terry_style_controlled": style_controlled({"model": scored})["model"],
            "verdicts_from_the_models_side": {
                name: sum(group.count(margin) for group in groups) for name, margin in PB_VERDICTS.items()
            },
            "ours": {
                "order_consistency": order_consistency(groups),
                "position_preference": preference,
                "note": "our checks of the judge, not measures of the paper",
            },
        }
        for field in ("task_field", "image_field", "language", "rounds", "track", "challenge"):
            sub_scores[f"by_{field}"] = breakdown(scored, field)
        headline = sub_scores["bradley_terry"]
        interval = headline["interval"]
        return Aggregate(
            headline["value"],
            sub_scores,
            Interval(low=interval[0], high=interval[1]) if interval else None,
            position_warning(preference),
        )


def rated(statistic, groups: list, rounds: int = BOOTSTRAP_ROUNDS, note: str | None = None) -> dict:
    """A statistic of the samples' groups, with its bootstrap 95% interval over samples."""
    interval = bootstrap(groups, statistic, rounds)
    return {
        "value": rounded(statistic(groups), 2),
        "interval": [interval.low, interval.high] if interval else None,
        **({"note": note} if note else {}),
    }


def order_consistency(groups: list[tuple[int, ...]]) -> float | None:
    """Share of samples whose two verdicts (one per order) agree on who won: a position bias check."""
    pairs = [group for group in groups if len(group) == 2]
    if not pairs:
        return None
    return rounded(100 * sum(1 for a, b in pairs if (a > 0, a == 0) == (b > 0, b == 0)) / len(pairs), 2)


def breakdown(judgments: list[Judgment], field: str) -> dict[str, dict]:
    """Per value of a sample label: samples, win rate and Bradley-Terry rating, each with its bootstrap interval."""
    found: dict[str, dict[str, list[Judgment]]] = defaultdict(lambda: defaultdict(list))
    for judgment in judgments:
        found[str(judgment.groups.get(field) or "unlabelled")][judgment.sample_id].append(judgment)
    out = {}
    for name, samples in sorted(found.items()):
        tallies = [pb_tally(margins(group)) for group in samples.values()]
        out[name] = {
            "samples": len(samples),
            "win_rate": rated(pb_win_rate, tallies),
            "bradley_terry": rated(pb_bradley_terry, tallies),
        }
    return out


PROBENCH = ProBenchProtocol()
