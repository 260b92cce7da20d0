"""MultiVerse's protocol (Sec. 4, App. E; digest 2.9): per user turn, two judge calls that see the image.

- history: Oracle (default) puts the gold conversation before each turn; `--history self` the model's own answers;
- quality: 1-10 against the reference answer, which counts as a 10; rescaled to 10-100;
- checklist completion: one Yes/No per checklist question of the turn; the share of Yes;
- a turn's score is completion x quality (0-100); the headline is the mean over judged turns, with the mean per
  turn number (Table 2), its least-squares slope, and the mean per interaction goal (Table 3).
"""

from __future__ import annotations

from collections import defaultdict

from benchcurate.curation.evaluation.judging import (
    TurnItem,
    mv_checklist,
    mv_history,
    mv_turn_scores,
    read_checklist,
    read_quality,
    turn_items,
)
from benchcurate.curation.evaluation.protocol import (
    Aggregate,
    Asker,
    EvalFailed,
    failed,
    refuse_options,
    scored_by_sample,
)
from benchcurate.curation.evaluation.statistics import bootstrap_interval, by_group, mean, slope
from benchcurate.curation.models.base import ChatTurn
from benchcurate.schemas.evaluation import EvalOptions, Judgment


def turn_key(mode: str, turn: int) -> str:
    """How a turn's calls are named (their seeds, a harness's answer): the history setting and the turn."""
    return f"{mode}/{turn}"


class MultiverseProtocol:
    name = "multiverse"
    score_name = "mean over turns of checklist completion x quality (10-100)"
    prompts = ("judge_mv_quality", "judge_mv_checklist")

    def settings(self, options: EvalOptions) -> dict[str, str | None]:
        refuse_options(options, self.name, {"history"})
        return {"history": options.history or "oracle"}

    def setting(self, options: EvalOptions) -> str:
        return f"history-{options.history or 'oracle'}"

    def answer_key(self, item: TurnItem, history: str) -> str:
        return turn_key("oracle" if history == "gold" else "self", item.turn)

    def judge_sample(self, row: dict, ask: Asker, options: EvalOptions) -> list[Judgment]:
        history: list[ChatTurn] = []
        judgments = []
        groups = {"goal": row.get("main_goal_category"), "task": row.get("main_task_category")}
        mode = options.history or "oracle"
        items = turn_items(row, self.name)
        for item in items:
            judgment = Judgment(
                sample_id=row["index"], turn=item.turn, question=item.question, groups=groups, setting=mode
            )
            judgments.append(self._turn(judgment, item, history, ask))
            own = judgment.answer if mode == "self" else item.reference
            if own is None:  # self history without the model's answer: the later turns cannot be asked
                judgments += [
                    Judgment(
                        sample_id=row["index"],
                        turn=later.turn,
                        question=later.question,
                        groups=groups,
                        setting=mode,
                        failure="no_history",
                        detail=f"turn {item.turn} has no answer to build on",
                    )
                    for later in items[item.turn :]
                ]
                break
            history = [*history, ChatTurn("user", item.question), ChatTurn("assistant", own)]
        return judgments

    def _turn(self, judgment: Judgment, item: TurnItem, history: list[ChatTurn], ask: Asker) -> Judgment:
        checklist, reference = item.extra.get("checklist") or [], item.reference
        if reference is None or not checklist:
            judgment.failure, judgment.detail = "incomplete_sample", "the turn has no reference answer or checklist"
            return judgment
        key = turn_key(judgment.setting, judgment.turn)
        try:
            judgment.answer = ask.answer(item.question, history, key)
            variables = {
                "history": mv_history((turn.role, turn.text) for turn in history),
                "question": item.question,
                "reference": reference,
                "answer": judgment.answer,
                "checklist": mv_checklist([item["question"] for item in checklist]),
            }
            quality = ask.judge_call("judge_mv_quality", variables, read_quality, key)
            judgment.judge["quality"] = quality.record()
            ticks = ask.judge_call(
                "judge_mv_checklist", variables, lambda text: read_checklist(text, len(checklist)), key
            )
            judgment.judge["checklist"] = ticks.record()
        except EvalFailed as error:
            return failed(judgment, error)
        judgment.scores = mv_turn_scores(ticks.parsed, quality.parsed)
        return judgment

    def aggregate(self, judgments: list[Judgment]) -> Aggregate:
        per_sample, scored = scored_by_sample(judgments)
        if not scored:
            return Aggregate(None)
        per_turn: dict[int, list[float]] = defaultdict(list)
        for judgment in scored:
            per_turn[judgment.turn].append(judgment.scores["score"])
        turn_means = {turn: round(mean(values), 4) for turn, values in sorted(per_turn.items())}
        sub_scores = {
            "checklist_completion": round(mean(j.scores["checklist_completion"] for j in scored), 4),
            "quality": round(mean(j.scores["quality"] for j in scored), 4),
            "per_turn": {str(turn): value for turn, value in turn_means.items()},
            "per_turn_slope": slope(turn_means),
            "per_goal": by_group((j.groups.get("goal"), j.scores["score"]) for j in scored),
        }
        return Aggregate(
            round(mean(j.scores["score"] for j in scored), 4),
            sub_scores,
            bootstrap_interval({sample: [j.scores["score"] for j in found] for sample, found in per_sample.items()}),
        )


MULTIVERSE = MultiverseProtocol()
