"""ProBench's model judgements on questions and conversations, each stored as scores and decided separately:

- blindness_check: can the request be answered from the text alone? YES is dropped (`answerable_without_image`);
  per question, or per whole conversation for multi-turn items (ProBench App. C; MultiVerse's reviewers removed
  104 of 839 dialogues for this).
- baseline_answer: a reference for the last user turn when the item has none, from a named model (ProBench used
  gpt-4o-2024-05-13's answers); the challenge judge reads it.
- challenge_score: textual, image and reasoning difficulty, 0-10 each, with explanations; combined by
  `rank_rule` (mean by default; the paper does not say) and labelled hard at `hard_threshold` (6, the paper's).
- interdependency_check: for conversations with two or more user turns, are the turns independent (YES) or
  interconnected (NO)? Stored; ProBench's selection keeps 400 interconnected and the 100 hardest independent.
"""

from __future__ import annotations

from typing import Literal

from benchcurate.curation.engine.stage import ItemStage, ModelStageConfig, StageContext, TransformStage, decision_field
from benchcurate.schemas import Challenge, Drop, Keep, Sample, Scores, Verdict


def transcript(item: Sample, with_references: bool = True) -> str:
    """History and conversation as labelled lines; references shown as the answer to their turn."""
    lines = []
    for turn in [*item.history, *item.conversation]:
        lines.append(f"{turn.speaker.upper()}: {turn.utterance}")
        if with_references and turn.speaker == "user" and turn.reference:
            lines.append(f"REFERENCE ANSWER: {turn.reference}")
    return "\n".join(lines)


def user_turns(item: Sample) -> int:
    return sum(turn.speaker == "user" for turn in item.conversation)


# --- blindness --------------------------------------------------------------------------------------


class BlindnessConfig(ModelStageConfig):
    drop_answerable: bool = decision_field(True, description="drop items the judge says need no image")


def blindness_score(item: Sample, cfg: BlindnessConfig, ctx: StageContext) -> Scores:
    result = ctx.ask(
        "blindness",
        cfg.prompt_version,
        item,
        {"conversation": transcript(item, with_references=False)},
        model=cfg.model,
    )
    return Scores(
        values={
            "answerable_without_image": result.value.decision == "YES",
            "reasoning": result.value.reasoning,
            "scope": "conversation" if user_turns(item) > 1 else "question",
        },
        generation=result.generation,
    )


def blindness_decide(scores: Scores, cfg: BlindnessConfig) -> Verdict:
    if cfg.drop_answerable and scores.values["answerable_without_image"]:
        return Drop(
            reason="answerable_without_image",
            detail={"reasoning": scores.values["reasoning"], "scope": scores.values["scope"]},
        )
    return Keep()


BLINDNESS = ItemStage(
    name="blindness_check",
    config=BlindnessConfig,
    score=blindness_score,
    decide=blindness_decide,
    reasons=("answerable_without_image",),
    uses_model=True,
    prompts=("blindness",),
)


# --- baseline answer --------------------------------------------------------------------------------


class BaselineConfig(ModelStageConfig):
    """`model` names the answering model (ProBench: gpt-4o-2024-05-13); default the backend's."""


def needs_answer(item: Sample) -> bool:
    last = item.conversation[-1] if item.conversation else None
    return last is not None and last.speaker == "user" and not last.reference


def baseline_generate(item: Sample, cfg: BaselineConfig, ctx: StageContext) -> list[Sample]:
    if not needs_answer(item):
        return [item]
    result = ctx.ask("baseline_answer", cfg.prompt_version, item, {"conversation": transcript(item)}, model=cfg.model)
    turns = list(item.conversation)
    turns[-1] = turns[-1].model_copy(update={"reference": result.value.answer.strip()})
    return [
        item.model_copy(
            update={"conversation": turns, "generated_by": {**item.generated_by, "baseline_answer": result.generation}}
        )
    ]


def baseline_check(item: Sample, cfg: BaselineConfig) -> Verdict:
    return Drop(reason="answer_missing", detail={"problem": "empty baseline answer"}) if needs_answer(item) else Keep()


BASELINE = TransformStage(
    name="baseline_answer",
    config=BaselineConfig,
    generate=baseline_generate,
    check=baseline_check,
    reasons=("answer_missing",),
    uses_model=True,
    prompts=("baseline_answer",),
)


# --- challenge ----------------------------------------------------------------------------------------

RANK_RULES = {
    "mean": lambda values: sum(values) / 3,
    "sum": sum,
    "max": max,
    "reasoning_first": lambda values: values[2] + (values[0] + values[1]) / 100,
}


class ChallengeConfig(ModelStageConfig):
    rank_rule: Literal["mean", "sum", "max", "reasoning_first"] = decision_field(
        "mean", description="how the three scores combine into one rank (paper: unstated)"
    )
    hard_threshold: float = decision_field(6, ge=0, le=10, description="combined score at which an item is hard")


def challenge_score(item: Sample, cfg: ChallengeConfig, ctx: StageContext) -> Scores:
    result = ctx.ask("challenge", cfg.prompt_version, item, {"conversation": transcript(item)}, model=cfg.model)
    reply = result.value
    return Scores(
        values={
            "textual": reply.textual.score,
            "image": reply.image.score,
            "reasoning": reply.reasoning.score,
            "textual_explanation": reply.textual.explanation,
            "image_explanation": reply.image.explanation,
            "reasoning_explanation": reply.reasoning.explanation,
        },
        generation=result.generation,
    )


def combined(values: dict, rule: str) -> float:
    return round(RANK_RULES[rule]([values["textual"], values["image"], values["reasoning"]]), 4)


def keep(scores: Scores, cfg: object) -> Verdict:
    """Stored for a later selection; nothing is decided here."""
    return Keep()


def challenge_apply(item: Sample, scores: Scores, cfg: ChallengeConfig) -> Sample:
    values = scores.values
    rank = combined(values, cfg.rank_rule)
    challenge = Challenge(textual=values["textual"], image=values["image"], reasoning=values["reasoning"])
    return item.model_copy(
        update={
            "challenge": challenge,
            "scores": {
                **item.scores,
                "challenge_rank": {
                    "combined": rank,
                    "rule": cfg.rank_rule,
                    "level": "hard" if rank >= cfg.hard_threshold else "easy",
                },
            },
        }
    )


CHALLENGE = ItemStage(
    name="challenge_score",
    config=ChallengeConfig,
    score=challenge_score,
    decide=keep,
    apply=challenge_apply,
    uses_model=True,
    prompts=("challenge",),
)


# --- interdependency ----------------------------------------------------------------------------------


class InterdependencyConfig(ModelStageConfig):
    """Prompt version and model only; single-turn items are marked independent without a call."""


def interdependency_score(item: Sample, cfg: InterdependencyConfig, ctx: StageContext) -> Scores:
    if user_turns(item) < 2:
        return Scores(values={"independent": None, "reasoning": "single turn"})
    result = ctx.ask("interdependency", cfg.prompt_version, item, {"conversation": transcript(item)}, model=cfg.model)
    return Scores(
        values={"independent": result.value.decision == "YES", "reasoning": result.value.reasoning},
        generation=result.generation,
    )


INTERDEPENDENCY = ItemStage(
    name="interdependency_check",
    config=InterdependencyConfig,
    score=interdependency_score,
    decide=keep,
    uses_model=True,
    prompts=("interdependency",),
)
