"""AlignMMBench's protocol (Sec. 4-6, App. E; digest 4.4): the model answers the seed question and each of its kept
rewrites, after the sample's given dialogue history (the Dialogue Context tasks); a text-only judge rates each
answer 1-10 against the reference with the general rubric plus the rules of the question's task, in JSON
{Rating, Reason}.

Scores: the mean rating over every judged question (the seed and its rewrites, as the released format has a row
for each), the mean per task and per category, and per seed question the spread of its ratings over its rewrites
(max - min and standard deviation): the paper's robustness measure.
"""

from __future__ import annotations

from benchcurate.curation.evaluation.engine import (
    PROMPT_VERSION,
    Aggregate,
    Asker,
    EvalFailed,
    failed,
    refuse_options,
    scored_by_sample,
)
from benchcurate.curation.evaluation.judging import amb_history, amb_rule, amb_spread, read_amb_rating, turn_items
from benchcurate.curation.evaluation.statistics import bootstrap, by_group, mean, rounded
from benchcurate.curation.models.base import ChatTurn
from benchcurate.curation.prompting import load_prompt
from benchcurate.schemas.evaluation import EvalOptions, Judgment

PROMPT = "judge_amb_rating"


class AlignMMBenchProtocol:
    name = "alignmmbench"
    score_name = "mean rating 1-10 over the seed questions and their rewrites"
    prompts = (PROMPT,)

    def settings(self, options: EvalOptions) -> dict[str, str | None]:
        refuse_options(options, self.name, set())
        return {"history": "the sample's given dialogue history"}

    def judge_sample(self, row: dict, ask: Asker, options: EvalOptions) -> list[Judgment]:
        items = turn_items(row, self.name)  # the seed question (variant 0), then its kept rewrites
        task = items[0].extra.get("task") if items else None
        groups = {"task": task, "category": row.get("main_task_category")}
        made = [Judgment(sample_id=row["index"], turn=1, setting=f"variant-{item.variant}", question=item.question,
                         groups=groups) for item in items]
        if not items or not items[0].reference:
            judgment = Judgment(sample_id=row["index"], turn=1, setting="variant-0",
                                question=items[0].question if items else "", groups=groups)
            judgment.failure, judgment.detail = "incomplete_sample", "no question with a reference answer"
            return [judgment]
        given = [ChatTurn(role, text) for role, text in items[0].history]
        for judgment, item in zip(made, items, strict=True):
            try:
                judgment.answer = ask.answer(item.question, given, judgment.setting)
                reply = ask.judge_call(PROMPT, {
                    "history": amb_history(item.history), "question": item.question, "task": task or "unlabelled",
                    "reference": item.reference, "answer": judgment.answer,
                    "rules": amb_rule(load_prompt(PROMPT, PROMPT_VERSION).parts, task)},
                    read_amb_rating, judgment.setting, with_image=False)
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
        spreads = {sample: amb_spread([j.scores["rating"] for j in found]) for sample, found in per_sample.items()
                   if len(found) > 1}
        tasks = {sample: found[0].groups.get("task") for sample, found in per_sample.items()}
        sub_scores = {
            "per_task": by_group((j.groups.get("task"), j.scores["rating"]) for j in scored),
            "per_category": by_group((j.groups.get("category"), j.scores["rating"]) for j in scored),
            "seed_questions_only": rounded(mean(j.scores["rating"] for j in scored if j.setting == "variant-0")),
            "robustness": {
                "seed_questions_with_rewrites": len(spreads),
                "mean_range": rounded(mean(s["range"] for s in spreads.values())),
                "mean_stdev": rounded(mean(s["stdev"] for s in spreads.values())),
                "mean_range_per_task": by_group((tasks[sample], s["range"]) for sample, s in spreads.items()),
            },
        }
        return Aggregate(rounded(mean(j.scores["rating"] for j in scored)), sub_scores,
                         bootstrap(list(per_sample.values()),
                                   lambda drawn: mean(j.scores["rating"] for group in drawn for j in group)))


ALIGNMMBENCH = AlignMMBenchProtocol()
