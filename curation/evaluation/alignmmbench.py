"""AlignMMBench's protocol (Sec. 4-6, App. E; digest 4.4): the model answers the seed question and each of its kept
rewrites, after the sample's given dialogue history (the Dialogue Context tasks); a text-only judge rates each
answer 1-10 against the reference with the general rubric plus the rules of the question's task, in JSON
{Rating, Reason}.

Scores: the headline is Table 3's "Avg", the mean of the task means (each task's mean rating over its judged
questions, the seed and its rewrites, as the released format has a row for each); beside it the mean over all
questions, the means per category and over the seed questions alone. Ours, not the paper's (which defines no such
measure): per seed question, the spread of its ratings over its rewrites (max - min and standard deviation).
"""

from __future__ import annotations

from benchcurate.curation.evaluation.judging import (
    TurnItem,
    amb_history,
    amb_rule,
    amb_spread,
    read_amb_rating,
    turn_items,
)
from benchcurate.curation.evaluation.protocol import (
    PROMPT_VERSION,
    Aggregate,
    Asker,
    EvalFailed,
    failed,
    refuse_options,
    scored_by_sample,
)
from benchcurate.curation.evaluation.statistics import bootstrap, by_group, mean, rounded
from benchcurate.curation.models.base import ChatTurn
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.schemas.evaluation import EvalOptions, Judgment

PROMPT = "judge_amb_rating"


class AlignMMBenchProtocol:
    name = "alignmmbench"
    score_name = "mean of the task means of the 1-10 ratings (Table 3's Avg)"
    prompts = (PROMPT,)

    def settings(self, options: EvalOptions) -> dict[str, str | None]:
        refuse_options(options, self.name, set())
        return {"history": "the sample's given dialogue history"}

    def setting(self, options: EvalOptions) -> str:
        return "given-history"

    def answer_key(self, item: TurnItem, history: str) -> str:
        return variant_key(item.variant)

    def judge_sample(self, row: dict, ask: Asker, options: EvalOptions) -> list[Judgment]:
        items = turn_items(row, self.name)  # the seed question (variant 0), then its kept rewrites
        task = items[0].extra.get("task") if items else None
        groups = {"task": task, "category": row.get("main_task_category")}
        made = [
            Judgment(
                sample_id=row["index"], turn=1, setting=variant_key(item.variant), question=item.question, groups=groups
            )
            for item in items
        ]
        if not items or not items[0].reference:
            judgment = Judgment(
                sample_id=row["index"],
                turn=1,
                setting=variant_key(0),
                question=items[0].question if items else "",
                groups=groups,
            )
            judgment.failure, judgment.detail = "incomplete_sample", "no question with a reference answer"
            return [judgment]
        given = [ChatTurn(role, text) for role, text in items[0].history]
        for judgment, item in zip(made, items, strict=True):
            try:
                judgment.answer = ask.answer(item.question, given, judgment.setting)
                reply = ask.judge_call(
                    PROMPT,
                    {
                        "history": amb_history(item.history),
                        "question": item.question,
                        "task": task or "unlabelled",
                        "reference": item.reference,
                        "answer": judgment.answer,
                        "rules": amb_rule(load_prompt(PROMPT, PROMPT_VERSION).parts, task),
                    },
                    read_amb_rating,
                    judgment.setting,
                    with_image=False,
                )
            except EvalFailed as error:
                failed(judgment, error)
                continue
            judgment.judge["rating"] = reply.record()
            judgment.scores = {"rating": float(reply.parsed)}
        return made

    def aggregate(self, judgments: list[Judgment]) -> Aggregate:
        per_sample, scored = scored_by_sample(judgments)
        if not scored:
            return Aggregate(None)
        spreads = {
            sample: amb_spread([j.scores["rating"] for j in found])
            for sample, found in per_sample.items()
            if len(found) > 1
        }
        tasks = {sample: found[0].groups.get("task") for sample, found in per_sample.items()}
        per_task = by_group((j.groups.get("task"), j.scores["rating"]) for j in scored)
        sub_scores = {
            "per_task": per_task,
            "per_question_mean": rounded(mean(j.scores["rating"] for j in scored)),
            "per_category": by_group((j.groups.get("category"), j.scores["rating"]) for j in scored),
            "seed_questions_only": rounded(mean(j.scores["rating"] for j in scored if j.setting == variant_key(0))),
            "ours": {
                "note": "our measure, not the paper's: how far a seed question's ratings lie apart over its rewrites",
                "seed_questions_with_rewrites": len(spreads),
                "spread_mean_range": rounded(mean(s["range"] for s in spreads.values())),
                "spread_mean_stdev": rounded(mean(s["stdev"] for s in spreads.values())),
                "spread_mean_range_per_task": by_group((tasks[sample], s["range"]) for sample, s in spreads.items()),
            },
        }
        return Aggregate(
            rounded(task_means_mean(scored)),
            sub_scores,
            bootstrap(list(per_sample.values()), lambda drawn: task_means_mean(j for group in drawn for j in group)),
        )


def variant_key(variant: int) -> str:
    """A question of the sample: 0 the seed, k its k-th kept rewrite (its calls' seeds, a harness's answer)."""
    return f"variant-{variant}"


def task_means_mean(judgments) -> float | None:
    """Table 3's Avg: the mean over tasks of each task's mean rating."""
    return mean(by_group((j.groups.get("task"), j.scores["rating"]) for j in judgments).values())


ALIGNMMBENCH = AlignMMBenchProtocol()
