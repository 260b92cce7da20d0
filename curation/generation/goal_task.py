"""goal_task_label: MultiVerse's goal and task labels of each conversation (8 goals / 484 sub-goals, 9 tasks /
484 sub-tasks in the release; the paper names the goals but neither the tasks nor how it labelled).

Labels go to `categories.goal_main/goal_sub/task_main/task_sub`; free-text ones are merged by
category_normalise (`labels: [task]`) like any proposed name. Drops nothing.
"""

from __future__ import annotations

from benchcurate.curation.engine.stage import ItemStage, ModelStageConfig, StageContext
from benchcurate.curation.generation.checklist import conversation_text
from benchcurate.schemas import Categories, Keep, Sample, Scores, Verdict


class GoalTaskConfig(ModelStageConfig):
    """Prompt version and model only."""


def _phrase(text: str) -> str | None:
    return " ".join(text.split()) or None


def score(item: Sample, cfg: GoalTaskConfig, ctx: StageContext) -> Scores:
    if not item.conversation:
        raise ValueError("goal_task_label needs a conversation; run conversation_generate before it")
    result = ctx.ask("goal_task", cfg.prompt_version, item, {"conversation": conversation_text(item)}, model=cfg.model)
    reply = result.value
    return Scores(
        values={
            "goal": reply.goal,
            "sub_goal": _phrase(reply.sub_goal),
            "task": _phrase(reply.task),
            "sub_task": _phrase(reply.sub_task),
        },
        generation=result.generation,
    )


def decide(scores: Scores, cfg: GoalTaskConfig) -> Verdict:
    return Keep()


def apply(item: Sample, scores: Scores, cfg: GoalTaskConfig) -> Sample:
    values = scores.values
    labels = {
        "goal_main": values["goal"],
        "goal_sub": values["sub_goal"],
        "task_main": values["task"],
        "task_sub": values["sub_task"],
    }
    return item.model_copy(
        update={"categories": Categories.model_validate(item.categories.model_copy(update=labels).model_dump())}
    )


STAGE = ItemStage(
    name="goal_task_label",
    config=GoalTaskConfig,
    score=score,
    decide=decide,
    apply=apply,
    uses_model=True,
    prompts=("goal_task",),
)
