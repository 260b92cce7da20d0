"""AlignMMBench-style items: a seed question with a reference per image, paraphrase rewrites, and dialogue
histories in which an earlier answer is wrong.

AlignMMBench (Sec. 3.1-3.2, App. D) pairs each image with a seed question of one of 13 tasks and a
human-written reference; GLM-4 rewrote each single-turn question 5 times with the same meaning and people
reviewed every rewrite; its Incoherence task gives a history whose assistant answer is wrong and a last user
turn asking for the correction. Three stages:

- question_generate: task, question and reference (an item that already has a user turn, e.g. an imported one,
  passes unchanged);
- paraphrase_generate: `rewrites` rewrites stored as pending (review keeps or rejects each); rewrites equal to
  the question or to each other (case and spaces ignored) are discarded, and an item left with fewer than
  `min_rewrites` is dropped (`rewrites_degenerate`); items with a history are not paraphrased (single-turn
  only, as in the paper);
- dialogue_context_generate: for a seeded `share` of items, a child `<id>/incoherence` whose history holds a
  wrong answer and whose question asks for the correction (`incoherence_degenerate` when the wrong and the
  corrected answers are the same text). The child is a sample of its own: its provenance names the parent
  (`source_id` `<parent's source_id>/incoherence`, `derived_from` the parent's), so no export gives it the
  parent's id.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from benchcurate.curation.engine.stage import ModelStageConfig, StageContext, decision_field, model_transform
from benchcurate.schemas import Categories, Drop, Keep, Rewrite, Sample, Turn, Verdict
from benchcurate.schemas.replies import AlignTaskName

LANGUAGES = {"zh": "Chinese (Simplified)", "en": "English"}
CATEGORY_OF_TASK = dict.fromkeys(
    ("Description", "Recognition", "Counting", "OCR", "Meme", "Knowledge"), "Perception & Understanding"
) | dict.fromkeys(("Reasoning", "Chart", "Problem", "Comparison", "Writing"), "Reasoning & Analysis")


class QuestionConfig(ModelStageConfig):
    language: Literal["zh", "en"] = Field("zh", description="AlignMMBench is Chinese")
    tasks: list[AlignTaskName] = Field(list(get_args(AlignTaskName)), min_length=1, description="tasks to pick from")


class ParaphraseConfig(ModelStageConfig):
    rewrites: int = Field(5, ge=1, le=20, description="rewrites to ask for (paper: 5)")
    min_rewrites: int = decision_field(1, ge=0, description="items with fewer distinct rewrites are dropped")


class DialogueConfig(ModelStageConfig):
    share: float = Field(0.1, ge=0, le=1, description="fraction of items that get an incoherence child (seeded)")
    language: Literal["zh", "en"] = Field("zh")


def _normalised(text: str) -> str:
    return " ".join(text.casefold().split())


def first_question(item: Sample) -> Turn | None:
    return next((turn for turn in item.conversation if turn.speaker == "user"), None)


def generate_question(item: Sample, cfg: QuestionConfig, ctx: StageContext) -> list[Sample]:
    if first_question(item) is not None:
        return [item]
    result = ctx.ask(
        "seed_question",
        cfg.prompt_version,
        item,
        {"tasks": ", ".join(cfg.tasks), "language": LANGUAGES[cfg.language]},
        model=cfg.model,
    )
    reply = result.value
    turn = Turn(
        speaker="user",
        utterance=reply.question.strip(),
        reference=reply.reference_answer.strip(),
        task_category=reply.task,
    )
    categories = item.categories.model_copy(update={"task_main": CATEGORY_OF_TASK[reply.task], "task_sub": reply.task})
    return [
        item.model_copy(
            update={
                "conversation": [turn],
                "language": cfg.language,
                "categories": Categories.model_validate(categories.model_dump()),
                "generated_by": {**item.generated_by, "seed_question": result.generation},
            }
        )
    ]


def check_question(item: Sample, cfg: QuestionConfig) -> Verdict:
    turn = first_question(item)
    if turn is None or not turn.utterance:
        return Drop(reason="question_missing", detail={"problem": "no user turn with text"})
    return Keep()


def generate_rewrites(item: Sample, cfg: ParaphraseConfig, ctx: StageContext) -> list[Sample]:
    turn = first_question(item)
    if turn is None or item.history:
        return [item]
    result = ctx.ask(
        "paraphrase",
        cfg.prompt_version,
        item,
        {"question": turn.utterance, "count": str(cfg.rewrites)},
        model=cfg.model,
    )
    seen = {_normalised(turn.utterance)}
    rewrites = []
    for text in result.value.rewrites[: cfg.rewrites]:
        key = _normalised(text)
        if key and key not in seen:
            seen.add(key)
            rewrites.append(Rewrite(text=text.strip(), language=item.language, status="pending"))
    return [
        item.model_copy(
            update={"rewrites": rewrites, "generated_by": {**item.generated_by, "paraphrase": result.generation}}
        )
    ]


def check_rewrites(item: Sample, cfg: ParaphraseConfig) -> Verdict:
    if item.history or first_question(item) is None:
        return Keep()
    if len(item.rewrites) < cfg.min_rewrites:
        return Drop(
            reason="rewrites_degenerate",
            detail={"distinct_rewrites": len(item.rewrites), "min_rewrites": cfg.min_rewrites},
        )
    return Keep()


def generate_dialogue(item: Sample, cfg: DialogueConfig, ctx: StageContext) -> list[Sample]:
    if ctx.rng_for(item.id).random() >= cfg.share:
        return [item]
    seed = first_question(item)
    hint = f"; you may reuse this question: {seed.utterance}" if seed else ""
    result = ctx.ask(
        "incoherence",
        cfg.prompt_version,
        item,
        {"language": LANGUAGES[cfg.language], "question_hint": hint},
        model=cfg.model,
    )
    reply = result.value
    child = item.model_copy(
        update={
            "id": f"{item.id}/incoherence",
            "parent_id": item.id,
            "rewrites": [],
            "language": cfg.language,
            "provenance": item.provenance.model_copy(
                update={
                    "source_id": f"{item.provenance.source_id}/incoherence",
                    "derived_from": item.provenance.source_id,
                }
            ),
            "history": [
                Turn(speaker="user", utterance=reply.first_question.strip()),
                Turn(speaker="assistant", utterance=reply.wrong_answer.strip()),
            ],
            "conversation": [
                Turn(
                    speaker="user",
                    utterance=reply.correction_request.strip(),
                    reference=reply.corrected_answer.strip(),
                    task_category="Incoherence",
                )
            ],
            "categories": Categories.model_validate(
                item.categories.model_copy(
                    update={"task_main": "Dialogue Context", "task_sub": "Incoherence"}
                ).model_dump()
            ),
            "scores": {**item.scores, "dialogue_context_generate": {"what_is_wrong": reply.what_is_wrong}},
            "generated_by": {**item.generated_by, "incoherence": result.generation},
        }
    )
    return [item, child]


def check_dialogue(item: Sample, cfg: DialogueConfig) -> Verdict:
    if not item.history:
        return Keep()
    wrong, corrected = item.history[-1].utterance, item.conversation[0].reference or ""
    if _normalised(wrong) == _normalised(corrected):
        return Drop(reason="incoherence_degenerate", detail={"problem": "the corrected answer repeats the wrong one"})
    return Keep()


QUESTION = model_transform(
    "question_generate", QuestionConfig, generate_question, "seed_question", check_question, "question_missing"
)
PARAPHRASE = model_transform(
    "paraphrase_generate", ParaphraseConfig, generate_rewrites, "paraphrase", check_rewrites, "rewrites_degenerate"
)
DIALOGUE = model_transform(
    "dialogue_context_generate",
    DialogueConfig,
    generate_dialogue,
    "incoherence",
    check_dialogue,
    "incoherence_degenerate",
)
