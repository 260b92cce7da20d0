"""conversation_generate: a multi-turn user/assistant conversation about the image, from the persona.

MultiVerse (Sec. 3.3, App. E): 4 turns (8 utterances) of increasing complexity that refer to the image with
pronouns and never name its key entity; conversations that fail to parse or have fewer than 6 utterances were
dropped (161 of 1,000). Checks here: at least `min_utterances`, user first, speakers alternating, and (where a
check is cheap) no user turn naming the image's key entity, taken as its sub-category label (e.g. "Eiffel
Tower", "bar chart"): matched as a whole phrase, case-insensitive (`names_the_entity`).
"""

from __future__ import annotations

import re

from pydantic import Field

from benchcurate.curation.engine.stage import ModelStageConfig, StageContext, TransformStage, decision_field
from benchcurate.schemas import Drop, Keep, Sample, Turn, Verdict


class ConversationConfig(ModelStageConfig):
    turns: int = Field(4, ge=1, le=20, description="user-assistant exchanges to ask for (paper: 4)")
    min_utterances: int = decision_field(6, ge=2, description="shorter conversations are dropped (paper: 6)")
    forbid_entity_name: bool = decision_field(
        True,
        description="drop conversations whose user turns name the image's sub-category (paper: never name the entity)",
    )


def generate(item: Sample, cfg: ConversationConfig, ctx: StageContext) -> list[Sample]:
    if item.persona is None:
        raise ValueError("conversation_generate needs a persona; run persona_generate before it")
    variables = {
        "turns": str(cfg.turns),
        "utterances": str(2 * cfg.turns),
        "character": item.persona.character,
        "scenario": item.persona.scenario,
        "goal": item.persona.goal,
    }
    result = ctx.ask("conversation", cfg.prompt_version, item, variables, model=cfg.model)
    turns = [Turn(speaker=utterance.speaker, utterance=utterance.text.strip()) for utterance in result.value.utterances]
    return [
        item.model_copy(
            update={"conversation": turns, "generated_by": {**item.generated_by, "conversation": result.generation}}
        )
    ]


def check(item: Sample, cfg: ConversationConfig) -> Verdict:
    speakers = [turn.speaker for turn in item.conversation]
    if len(speakers) < cfg.min_utterances:
        return Drop(
            reason="conversation_too_short", detail={"utterances": len(speakers), "min_utterances": cfg.min_utterances}
        )
    expected = ["user", "assistant"] * (len(speakers) // 2 + 1)
    if speakers != expected[: len(speakers)] or any(not turn.utterance for turn in item.conversation):
        return Drop(
            reason="conversation_malformed",
            detail={"speakers": speakers, "problem": "not alternating user/assistant, user first, non-empty"},
        )
    entity = item.categories.image_sub
    if cfg.forbid_entity_name and entity:
        pattern = re.compile(r"\b" + r"\s+".join(map(re.escape, entity.split())) + r"\b", re.IGNORECASE)
        named = [
            index
            for index, turn in enumerate(item.conversation)
            if turn.speaker == "user" and pattern.search(turn.utterance)
        ]
        if named:
            return Drop(reason="names_the_entity", detail={"entity": entity, "utterances": named})
    return Keep()


STAGE = TransformStage(
    name="conversation_generate",
    config=ConversationConfig,
    generate=generate,
    check=check,
    reasons=("conversation_too_short", "conversation_malformed", "names_the_entity"),
    uses_model=True,
    prompts=("conversation",),
)
