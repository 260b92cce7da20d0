"""ConvBench's three-level conversations: caption, the perception -> reasoning -> creation instructions,
reference answers per turn, and focus points for the creation turn.

ConvBench (Sec. 3) writes three turns on one image, each building on the previous answer, plus an
instruction-conditioned caption holding the facts the answers need (its judge is text-only), a reference
answer per turn and numbered focus points for the creation turn. Four stages, run in this order:

- ladder_generate: the three instructions (an existing first user turn, e.g. an imported seed instruction,
  is offered to the model as the seed); dropped when two instructions are the same text (`ladder_malformed`).
- caption_generate: the caption, conditioned on the instructions.
- reference_generate: the three reference answers, in one call, each aware of the earlier ones.
- focus_points_generate: 3-6 yes/no points for the creation turn (`min_focus_points` is a decision).

What an item already has is kept: an imported ConvBench conversation (`curate import convbench`) keeps its
three instructions, and its caption, references and focus points where the sheet had them; only the missing
parts are drafted.
"""

from __future__ import annotations

from pydantic import Field

from benchcurate.curation.engine.stage import ModelStageConfig, StageContext, decision_field, model_transform
from benchcurate.schemas import Drop, Keep, Sample, Turn, Verdict

LEVELS = ("perception", "reasoning", "creation")
NO_SEED = "(none given: write your own)"


class LadderConfig(ModelStageConfig):
    """Prompt version and model only."""


class FocusPointsConfig(ModelStageConfig):
    min_focus_points: int = decision_field(3, ge=1, description="fewer points than this drops the item")
    max_focus_points: int = Field(6, ge=1, description="points beyond this are cut")


def _with(item: Sample, field: str, result, **updates) -> Sample:
    return item.model_copy(update={**updates, "generated_by": {**item.generated_by, field: result.generation}})


def ladder_turns(item: Sample) -> list[Turn]:
    """The three user turns, in level order; an error if the item has not been through ladder_generate."""
    turns = [turn for turn in item.conversation if turn.speaker == "user" and turn.level in LEVELS]
    if [turn.level for turn in turns] != list(LEVELS):
        raise ValueError("needs the three perception/reasoning/creation turns; run ladder_generate first")
    return turns


def has_ladder(item: Sample) -> bool:
    try:
        ladder_turns(item)
    except ValueError:
        return False
    return True


def generate_ladder(item: Sample, cfg: LadderConfig, ctx: StageContext) -> list[Sample]:
    if has_ladder(item):
        return [item.model_copy(update={"conversation": ladder_turns(item)})]
    seed = next((turn.utterance for turn in item.conversation if turn.speaker == "user"), None)
    result = ctx.ask("ladder", cfg.prompt_version, item, {"seed_instruction": seed or NO_SEED}, model=cfg.model)
    turns = [Turn(speaker="user", utterance=getattr(result.value, level).strip(), level=level) for level in LEVELS]
    return [_with(item, "ladder", result, conversation=turns)]


def check_ladder(item: Sample, cfg: LadderConfig) -> Verdict:
    texts = [" ".join(turn.utterance.casefold().split()) for turn in item.conversation]
    if len(texts) != 3 or not all(texts) or len(set(texts)) != 3:
        return Drop(
            reason="ladder_malformed",
            detail={
                "instructions": [turn.utterance for turn in item.conversation],
                "problem": "three distinct, non-empty instructions needed",
            },
        )
    return Keep()


def generate_caption(item: Sample, cfg: LadderConfig, ctx: StageContext) -> list[Sample]:
    if item.caption:
        return [item]
    instructions = "\n".join(f"- {turn.utterance}" for turn in ladder_turns(item))
    result = ctx.ask("caption", cfg.prompt_version, item, {"instructions": instructions}, model=cfg.model)
    return [_with(item, "caption", result, caption=result.value.caption.strip())]


def generate_references(item: Sample, cfg: LadderConfig, ctx: StageContext) -> list[Sample]:
    turns = ladder_turns(item)
    if all(turn.reference for turn in turns):
        return [item]
    variables = {turn.level: turn.utterance for turn in turns} | {"caption": item.caption or "(no caption)"}
    result = ctx.ask("reference", cfg.prompt_version, item, variables, model=cfg.model)
    answers = [getattr(result.value, f"{level}_answer").strip() for level in LEVELS]
    updated = [turn.model_copy(update={"reference": answer}) for turn, answer in zip(turns, answers, strict=True)]
    return [_with(item, "reference", result, conversation=updated)]


def check_references(item: Sample, cfg: LadderConfig) -> Verdict:
    empty = [turn.level for turn in item.conversation if not turn.reference]
    return Drop(reason="reference_missing", detail={"levels": empty}) if empty else Keep()


def generate_focus_points(item: Sample, cfg: FocusPointsConfig, ctx: StageContext) -> list[Sample]:
    perception, reasoning, creation = ladder_turns(item)
    if creation.focus_points:
        return [item]
    earlier = " ".join(f"{turn.utterance} -> {turn.reference or '(no reference)'}" for turn in (perception, reasoning))
    result = ctx.ask(
        "focus_points", cfg.prompt_version, item, {"creation": creation.utterance, "earlier": earlier}, model=cfg.model
    )
    points = [" ".join(point.split()) for point in result.value.points if point.strip()][: cfg.max_focus_points]
    updated = [perception, reasoning, creation.model_copy(update={"focus_points": points})]
    return [_with(item, "focus_points", result, conversation=updated)]


def check_focus_points(item: Sample, cfg: FocusPointsConfig) -> Verdict:
    points = item.conversation[-1].focus_points
    if len(points) < cfg.min_focus_points:
        return Drop(reason="too_few_focus_points", detail={"points": len(points), "min": cfg.min_focus_points})
    return Keep()


LADDER = model_transform("ladder_generate", LadderConfig, generate_ladder, "ladder", check_ladder, "ladder_malformed")
CAPTION = model_transform("caption_generate", LadderConfig, generate_caption, "caption")
REFERENCE = model_transform(
    "reference_generate", LadderConfig, generate_references, "reference", check_references, "reference_missing"
)
FOCUS_POINTS = model_transform(
    "focus_points_generate",
    FocusPointsConfig,
    generate_focus_points,
    "focus_points",
    check_focus_points,
    "too_few_focus_points",
)
