"""checklist_generate: per user turn, yes/no checklist items tagged with a main and a sub criterion.

MultiVerse (Sec. 3.5, App. E): one checklist per user query from the image and the whole conversation (the
assistant turns count as ideal answers), 20 seeded main criteria, drafted by two models (GPT-4o and
Claude-3.5-Sonnet) and merged, about 8-9 items per turn in the release.

`models` lists the drafting models (default: the stage's `model`, else the backend's, alone). Drafts are merged per user turn: an
item whose question matches one already kept, by normalised text (case, spaces, punctuation) or by a word
3-gram Jaccard similarity of at least `merge_jaccard`, is the same item; the first drafter's wording is kept and
every model that proposed it is recorded in `source_model` ("gpt-4o+claude-3-5-sonnet"). A conversation whose
user turns do not all get at least one item is dropped.
"""

from __future__ import annotations

import re

from pydantic import Field

from benchcurate.curation.engine.stage import ModelStageConfig, StageContext, TransformStage
from benchcurate.schemas import ChecklistItem, Drop, Keep, Sample, Verdict

WORD = re.compile(r"\w+")


class ChecklistConfig(ModelStageConfig):
    models: list[str] | None = Field(
        None,
        min_length=1,
        description="drafting models, merged in this order "
        "(paper: GPT-4o and Claude-3.5-Sonnet); "
        "default: `model` alone",
    )
    merge_jaccard: float = Field(0.7, gt=0, le=1, description="word 3-gram Jaccard at which two items are one")


def conversation_text(item: Sample) -> str:
    return "\n".join(f"{turn.speaker.upper()}: {turn.utterance}" for turn in item.conversation)


def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = WORD.findall(text.casefold())
    return frozenset(tuple(words[i : i + 3]) for i in range(max(1, len(words) - 2)))


def _same(first: frozenset, second: frozenset, threshold: float) -> bool:
    return bool(first | second) and len(first & second) / len(first | second) >= threshold


def merge_checklists(drafts: list[tuple[str, list[ChecklistItem]]], threshold: float) -> list[ChecklistItem]:
    """One list from several models' drafts for one turn; each kept item names every model that proposed it."""
    kept: list[tuple[frozenset, str, ChecklistItem, list[str]]] = []
    for model, items in drafts:
        for item in items:
            shingles, key = _shingles(item.question), " ".join(WORD.findall(item.question.casefold()))
            match = next((entry for entry in kept if entry[1] == key or _same(entry[0], shingles, threshold)), None)
            if match is None:
                kept.append((shingles, key, item, [model]))
            elif model not in match[3]:
                match[3].append(model)
    return [item.model_copy(update={"source_model": "+".join(models)}) for _, _, item, models in kept]


def generate(item: Sample, cfg: ChecklistConfig, ctx: StageContext) -> list[Sample]:
    drafts_by_turn: dict[int, list[tuple[str, list[ChecklistItem]]]] = {}
    generations = {}
    for model in cfg.models or [cfg.model]:
        result = ctx.ask("checklist", cfg.prompt_version, item, {"conversation": conversation_text(item)}, model=model)
        name = result.generation.model
        generations[name] = result.generation
        for entry in result.value.checklists:
            drafts_by_turn.setdefault(entry.user_turn, []).append(
                (name, [ChecklistItem(**question.model_dump()) for question in entry.items])
            )
    turns, user_index = [], 0
    for turn in item.conversation:
        if turn.speaker == "user":
            user_index += 1
            turn = turn.model_copy(
                update={"checklist": merge_checklists(drafts_by_turn.get(user_index, []), cfg.merge_jaccard)}
            )
        turns.append(turn)
    produced = {"checklist": next(iter(generations.values()))}
    produced |= (
        {f"checklist:{name}": generation for name, generation in generations.items()} if len(generations) > 1 else {}
    )
    return [item.model_copy(update={"conversation": turns, "generated_by": {**item.generated_by, **produced}})]


def check(item: Sample, cfg: ChecklistConfig) -> Verdict:
    missing = [index for index, turn in enumerate(item.conversation) if turn.speaker == "user" and not turn.checklist]
    if missing:
        return Drop(reason="checklist_incomplete", detail={"utterances_without_checklist": missing})
    return Keep()


STAGE = TransformStage(
    name="checklist_generate",
    config=ChecklistConfig,
    generate=generate,
    check=check,
    reasons=("checklist_incomplete",),
    uses_model=True,
    prompts=("checklist",),
)
