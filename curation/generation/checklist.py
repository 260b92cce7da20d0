"""checklist_generate: per user turn, yes/no checklist items tagged with a main and a sub criterion.

MultiVerse (Sec. 3.5, App. E): one checklist per user query from the image and the whole conversation (the
assistant turns count as ideal answers), 20 seeded main criteria, about 8-9 items per turn in the release.
A conversation whose user turns do not all get at least one item is dropped.
"""

from __future__ import annotations

from curation.stage import ModelStageConfig, StageContext, TransformStage
from schemas import ChecklistItem, Drop, Keep, Sample, Verdict


class ChecklistConfig(ModelStageConfig):
    """Prompt version and model only."""


def conversation_text(item: Sample) -> str:
    return "\n".join(f"{turn.speaker.upper()}: {turn.utterance}" for turn in item.conversation)


def generate(item: Sample, cfg: ChecklistConfig, ctx: StageContext) -> list[Sample]:
    result = ctx.ask("checklist", cfg.prompt_version, item, {"conversation": conversation_text(item)},
                     model=cfg.model)
    by_user_turn = {entry.user_turn: entry.items for entry in result.value.checklists}
    turns, user_index = [], 0
    for turn in item.conversation:
        if turn.speaker == "user":
            user_index += 1
            items = [ChecklistItem(**entry.model_dump(), source_model=result.generation.model)
                     for entry in by_user_turn.get(user_index, [])]
            turn = turn.model_copy(update={"checklist": items})
        turns.append(turn)
    return [item.model_copy(update={"conversation": turns,
                                    "generated_by": {**item.generated_by, "checklist": result.generation}})]


def check(item: Sample, cfg: ChecklistConfig) -> Verdict:
    missing = [index for index, turn in enumerate(item.conversation) if turn.speaker == "user" and not turn.checklist]
    if missing:
        return Drop(reason="checklist_incomplete", detail={"utterances_without_checklist": missing})
    return Keep()


STAGE = TransformStage(name="checklist_generate", config=ChecklistConfig, generate=generate, check=check,
                       reasons=("checklist_incomplete",), uses_model=True, prompts=("checklist",))
