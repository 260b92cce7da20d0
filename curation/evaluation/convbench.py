"""ConvBench's protocol (Sec. 4-5, App. E; digest 1.6): three user turns (perception, reasoning, creation) judged by
a text-only judge that reads the instruction-conditioned caption instead of the image, in three history settings:

- own (i): the model answers all three turns on its own history: S1, S2, S3 and the whole conversation S0;
- perception (ii): turn 1's reference answer is the history; the model answers turns 2-3: S^2, S^3, S^0;
- perception_reasoning (iii): turns 1-2's references are the history; the model answers turn 3: S~3, S~0.

Pairwise (default): each judgment compares the model's conversation with the reference conversation, in an
order drawn per sample and setting from the sample id (ConvBench drew it once and shipped it), and the judge must
choose; a score is the share of judgments the model wins, in percent. Direct (`--grading direct`): the judge
rates 1-10 against references worth 10; a score is the mean rating. The whole-conversation judgment also reads
the setting's turn evaluations. R2 = (S1 + S2 + S3) / 3 and R1 = (R2 + S0) / 2 (Sec. 5), the headline.
"""

from __future__ import annotations

from benchcurate.curation.evaluation.judging import (
    CB_PAPER_AGREEMENT,
    CB_SCORE_NAMES,
    CB_SETTINGS,
    TurnItem,
    cb_evaluations,
    cb_focus,
    cb_model_is_a,
    cb_scores,
    cb_target,
    cb_transcript,
    read_cb_rating,
    read_cb_verdict,
    rounded,
)
from benchcurate.curation.evaluation.protocol import (
    Aggregate,
    Asker,
    EvalFailed,
    failed,
    refuse_options,
    scored_by_sample,
)
from benchcurate.curation.evaluation.statistics import bootstrap
from benchcurate.curation.models.base import ChatTurn
from benchcurate.schemas.evaluation import EvalOptions, Judgment


def answer_key(setting: str, turn: int) -> str:
    """How the model's answer to a turn in a setting is asked for (its seed, a harness's answer)."""
    return f"{setting}/{turn}"


class ConvBenchProtocol:
    name = "convbench"
    score_name = "R1 = (R2 + S0) / 2, R2 = mean(S1, S2, S3)"
    prompts = ("judge_cb_pairwise", "judge_cb_direct")

    def settings(self, options: EvalOptions) -> dict[str, str | None]:
        refuse_options(options, self.name, {"grading"})
        return {
            "history": "own, perception given, perception and reasoning given (all three settings)",
            "grading": options.grading or "pairwise",
        }

    def setting(self, options: EvalOptions) -> str:
        return f"grading-{options.grading or 'pairwise'}"

    def answer_key(self, item: TurnItem, history: str) -> str:
        """Shown the references of the turns before it, turn k is setting (k-1)'s first own answer: turn 1 the
        own setting's, turn 2 with perception given, turn 3 with perception and reasoning given."""
        if history == "own":
            return answer_key("own", item.turn)
        return answer_key(next(name for name, given in CB_SETTINGS.items() if given == item.turn - 1), item.turn)

    def judge_sample(self, row: dict, ask: Asker, options: EvalOptions) -> list[Judgment]:
        turns = [turn for turn in row["conversation"] if turn["speaker"] == "user"]
        judgments = []
        for setting, given in CB_SETTINGS.items():
            made = [
                Judgment(
                    sample_id=row["index"],
                    turn=turn,
                    setting=setting,
                    question=turns[turn - 1]["utterance"] if turn and turn <= len(turns) else "(all turns)",
                    groups={"score": CB_SCORE_NAMES[(setting, turn)]},
                )
                for turn in (*range(given + 1, 4), 0)
            ]
            problem = self._incomplete(row, turns)
            if problem:
                for judgment in made:
                    judgment.failure, judgment.detail = "incomplete_sample", problem
            else:
                self._setting(row, turns, setting, given, made, ask, options.grading or "pairwise")
            judgments += made
        return judgments

    @staticmethod
    def _incomplete(row: dict, turns: list[dict]) -> str | None:
        if len(turns) != 3:
            return f"{len(turns)} user turns; ConvBench's protocol needs 3"
        if not all(turn.get("reference") for turn in turns):
            return "a turn has no reference answer"
        if not row.get("caption"):
            return "no instruction-conditioned caption (the text-only judge's image context)"
        return None

    def _setting(
        self, row: dict, turns: list[dict], setting: str, given: int, made: list[Judgment], ask: Asker, grading: str
    ) -> None:
        questions = [turn["utterance"] for turn in turns]
        references = [turn["reference"] for turn in turns]
        answers, history = [], []
        try:
            for number, question in enumerate(questions, 1):
                answer = (
                    references[number - 1]
                    if number <= given
                    else ask.answer(question, history, answer_key(setting, number))
                )
                answers.append(answer)
                history = [*history, ChatTurn("user", question), ChatTurn("assistant", answer)]
        except EvalFailed as error:
            for judgment in made:
                failed(judgment, error)
            return
        for judgment in made:
            judgment.answer = answers[judgment.turn - 1] if judgment.turn else None
        evaluations = []
        for judgment in made:
            try:
                if judgment.turn == 0 and len(evaluations) < len(made) - 1:
                    raise EvalFailed("judge_missing_turn_evaluation", "a turn of this setting was not judged")
                reply = self._judge(row, turns, questions, answers, references, judgment, evaluations, ask, grading)
            except EvalFailed as error:
                failed(judgment, error)
                continue
            evaluations.append((judgment.turn, reply))

    def _judge(
        self,
        row: dict,
        turns: list[dict],
        questions: list[str],
        answers: list[str],
        references: list[str],
        judgment: Judgment,
        evaluations: list[tuple[int, str]],
        ask: Asker,
        grading: str,
    ) -> str:
        evaluation_text = cb_evaluations(evaluations, CB_SETTINGS[judgment.setting]) if judgment.turn == 0 else ""
        key = f"{grading}/{judgment.setting}/{judgment.turn}"
        mine, gold = cb_transcript(questions, answers), cb_transcript(questions, references)
        common = {
            "caption": row["caption"],
            "focus": cb_focus(turns[2].get("focus_points") or [], judgment.turn),
            "evaluations": evaluation_text,
            "target": cb_target(judgment.turn),
        }
        if grading == "direct":
            reply = ask.judge_call(
                "judge_cb_direct",
                {**common, "reference": gold, "conversation": mine},
                read_cb_rating,
                key,
                with_image=False,
            )
            judgment.judge["direct"] = reply.record()
            judgment.scores = {"rating": float(reply.parsed)}
            return reply.raw
        first = cb_model_is_a(judgment.sample_id, judgment.setting)
        reply = ask.judge_call(
            "judge_cb_pairwise",
            {**common, "conversation_a": mine if first else gold, "conversation_b": gold if first else mine},
            read_cb_verdict,
            key,
            with_image=False,
        )
        model_side = "A" if first else "B"
        judgment.judge["pairwise"] = reply.record(model_was=model_side)
        judgment.scores = {"win": 1.0 if reply.parsed == model_side else 0.0}
        return reply.raw

    def aggregate(self, judgments: list[Judgment]) -> Aggregate:
        per_sample, scored = scored_by_sample(judgments)
        if not scored:
            return Aggregate(None)
        direct = "rating" in scored[0].scores
        scores = nine_scores(scored)
        gains = {
            f"{better} - {base}": rounded(scores[better] - scores[base], 2)
            for better, base in TABLE_1_GAINS
            if scores.get(better) is not None and scores.get(base) is not None
        }
        r1 = scores.get("R1")
        return Aggregate(
            r1,
            {
                "scores": scores,
                "unit": "mean rating 1-10" if direct else "win rate against the reference, %",
                "gains_from_gold_history": gains,
                "paper_judge_human_agreement_percent": CB_PAPER_AGREEMENT,
            },
            bootstrap(
                list(per_sample.values()), lambda drawn: nine_scores([j for group in drawn for j in group]).get("R1")
            )
            if r1 is not None
            else None,
        )


# Table 1's brackets: perfect perception against the model's own history, then perfect reasoning on top of it
TABLE_1_GAINS = (("S^2", "S2"), ("S^3", "S3"), ("S^0", "S0"), ("S~3", "S^3"), ("S~0", "S^0"))


def nine_scores(judgments: list[Judgment]) -> dict[str, float]:
    """S1 ... S~0 (percent won, or the mean rating), R2 and R1."""
    return cb_scores(
        (judgment.groups["score"], judgment.scores.get("rating", 100 * judgment.scores.get("win", 0.0)))
        for judgment in judgments
    )


CONVBENCH = ConvBenchProtocol()
