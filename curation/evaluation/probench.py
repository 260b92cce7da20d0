"""ProBench's protocol (Sec. 2.2, 3.1, App. A and D; digest 3.5): the model answers every user turn on its own
history; a vision judge compares its conversation with the baseline's (the release's baseline answers, or another
model's with `--baseline-model`) twice, once in each order, with a five-level verdict; ratings come from the
battles.

- Battles: a verdict is the model's win, tie or loss; a clear verdict (>>) counts as three battles, a slight one as
  one (arena-hard-auto's convention: ProBench does not say how it weighs >>).
- Win rate: the share of verdicts the model wins, a tie counting half.
- Ratings on the ELO scale (alpha 400) with the baseline fixed at 1114, as in ProBench's tables: Bradley-Terry by
  maximum likelihood (the headline) and the online ELO update with K = 32 over the battles in a drawn order;
  both with bootstrap 95% intervals over samples. Per task field, image field, language, number of rounds, track
  and challenge level. Beside them, ProBench's style control: Bradley-Terry with the style differences (words,
  markdown headers, list items, bold; model against baseline) as covariates, so a model that wins by writing more
  or formatting more is not rated for it.
"""

from __future__ import annotations

import math
from collections import defaultdict

from benchcurate.curation.evaluation.engine import (
    Aggregate,
    Asker,
    EvalFailed,
    failed,
    refuse_options,
    scored_by_sample,
)
from benchcurate.curation.evaluation.judging import (
    ELO_SCALE,
    PB_BASELINE_RATING,
    PB_BATTLES,
    PB_LANGUAGE_RULE,
    PB_ORDERS,
    PB_PRIOR,
    PB_STYLE,
    PB_VERDICTS,
    pb_bradley_terry,
    pb_exchange,
    pb_margin,
    pb_online_elo,
    pb_style,
    pb_tally,
    pb_win_rate,
    read_pb_verdict,
    rounded,
    turn_items,
)
from benchcurate.curation.evaluation.statistics import BOOTSTRAP_ROUNDS, bootstrap, logistic_fit
from benchcurate.curation.models.base import ChatTurn
from benchcurate.schemas.evaluation import EvalOptions, Interval, Judgment

HARD_CHALLENGE = 6.0  # ProBench: challenge scores of 6 and above are hard
ELO_ROUNDS = 200  # bootstrap rounds of the online ELO (each replays every battle in a new order)


STYLE_ROUNDS = 200  # bootstrap rounds of the style-controlled fit (a Newton fit each)


def style_controlled(groups: list[tuple[Judgment, ...]]) -> float | None:
    """Bradley-Terry against the baseline (1114) with the style differences as covariates (ProBench's style
    control): the model's strength once length and markdown are accounted for."""
    import numpy as np

    found = [j for group in groups for j in group]
    if not found:
        return None
    battles = [PB_BATTLES[int(j.scores["margin"])] for j in found]
    features = np.array([[1.0, *(j.scores.get(f"style_{name}", 0.0) for name in PB_STYLE)] for j in found]
                        + [[1.0] + [0.0] * len(PB_STYLE)])  # the prior: half a tied battle, no style difference
    targets = np.array([battle.outcome for battle in battles] + [0.5])
    weights = np.array([battle.weight for battle in battles] + [PB_PRIOR])
    return PB_BASELINE_RATING + ELO_SCALE * float(logistic_fit(features, targets, weights)[0]) / math.log(10)


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
        return {"history": "own (the model's earlier answers)",
                "baseline": f"model {options.baseline.model}" if options.baseline else "the release's baseline "
                                                                                         "answers"}

    def judge_sample(self, row: dict, ask: Asker, options: EvalOptions) -> list[Judgment]:
        items = turn_items(row, self.name)  # each question with the baseline's answer after it
        questions, stored = [item.question for item in items], [item.reference for item in items]
        challenge = row.get("challenge") or {}
        hard = max(challenge.values(), default=None)
        groups = {"task_field": row.get("main_task_category"), "image_field": row.get("image_main_category"),
                  "language": row.get("language"), "track": row.get("track"), "rounds": rounds_bucket(len(questions)),
                  "challenge": None if hard is None else ("hard" if hard >= HARD_CHALLENGE else "easy")}
        made = [Judgment(sample_id=row["index"], turn=0, setting=order, question=questions[-1] if questions else "",
                         groups=groups) for order in PB_ORDERS]
        try:
            if not questions:
                raise EvalFailed("incomplete_sample", "no user turn")
            mine = self._answers(questions, ask, "model")
            theirs = self._answers(questions, ask, "baseline") if options.baseline else stored
            if any(not answer for answer in theirs):
                raise EvalFailed("incomplete_sample", "a user turn has no baseline answer in the release (pass "
                                                      "--baseline-model to have a model answer)")
        except EvalFailed as error:
            return [failed(judgment, error) for judgment in made]
        rule = PB_LANGUAGE_RULE if row.get("track") == "multi-linguistic" else ""
        for judgment in made:
            judgment.answer = mine[-1]
            first, second = (mine, theirs) if judgment.setting == "model_first" else (theirs, mine)
            try:
                reply = ask.judge_call("judge_pb_pairwise", {"exchange": pb_exchange(questions, first, second),
                                                             "language_rule": rule}, read_pb_verdict, judgment.setting)
            except EvalFailed as error:
                failed(judgment, error)
                continue
            judgment.judge["pairwise"] = reply.record()
            judgment.scores = {"margin": float(pb_margin(reply.parsed, judgment.setting)),
                               **{f"style_{name}": value for name, value in pb_style(mine, theirs).items()}}
        return made

    @staticmethod
    def _answers(questions: list[str], ask: Asker, who: str) -> list[str]:
        history, answers = [], []
        for number, question in enumerate(questions, 1):
            answer = ask.answer(question, history, f"turn/{number}", who=who)
            answers.append(answer)
            history = [*history, ChatTurn("user", question), ChatTurn("assistant", answer)]
        return answers

    def aggregate(self, judgments: list[Judgment]) -> Aggregate:
        per_sample, scored = scored_by_sample(judgments)
        if not scored:
            return Aggregate(None)
        groups = [margins(found) for found in per_sample.values()]
        tallies = [pb_tally(group) for group in groups]
        sub_scores = {
            "win_rate": rated(pb_win_rate, tallies),
            "elo_online": rated(pb_online_elo, groups, ELO_ROUNDS, "order-dependent: each bootstrap round replays "
                                "the battles in a new order"),
            "bradley_terry": rated(pb_bradley_terry, tallies),
            "bradley_terry_style_controlled": rated(style_controlled, [tuple(found) for found in per_sample.values()],
                                                    STYLE_ROUNDS, "length and markdown as covariates (ProBench's "
                                                    "style control); the headline is without them"),
            "verdicts_from_the_models_side": {name: sum(group.count(margin) for group in groups)
                                              for name, margin in PB_VERDICTS.items()},
            "order_consistency": order_consistency(groups),
        }
        for field in ("task_field", "image_field", "language", "rounds", "track", "challenge"):
            sub_scores[f"by_{field}"] = breakdown(scored, field)
        headline = sub_scores["bradley_terry"]
        interval = headline["interval"]
        return Aggregate(headline["value"], sub_scores,
                         Interval(low=interval[0], high=interval[1]) if interval else None)


def rated(statistic, groups: list, rounds: int = BOOTSTRAP_ROUNDS, note: str | None = None) -> dict:
    """A statistic of the samples' groups, with its bootstrap 95% interval over samples."""
    interval = bootstrap(groups, statistic, rounds)
    return {"value": rounded(statistic(groups), 2), "interval": [interval.low, interval.high] if interval else None,
            **({"note": note} if note else {})}


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
        out[name] = {"samples": len(samples), "win_rate": rated(pb_win_rate, tallies),
                     "bradley_terry": rated(pb_bradley_terry, tallies)}
    return out


PROBENCH = ProBenchProtocol()
