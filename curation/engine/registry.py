"""Which stages exist: one line per stage, naming the module (and the attribute) that holds it. A recipe names
stages from this table.

A stage's module is imported the first time the stage is asked for, so the engine depends on no stage module
(the stage library builds on the engine, never the other way round). A user adds a stage of their own without
editing this table: a package that declares an entry point in the group `benchcurate.stages`, named after the
stage and pointing at its Stage (`my_stage = "my_package.module:STAGE"`), is found the same way.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.engine.stage import Stage

C = "benchcurate.curation"
TABLE: dict[str, str] = {
    "image_ingest": f"{C}.images.ingest:STAGE",
    "image_exact_dedup": f"{C}.images.exact_dedup:STAGE",
    "image_phash": f"{C}.images.phash:STAGE",
    "image_near_dedup": f"{C}.images.near_dedup:STAGE",
    "image_quality": f"{C}.images.quality:STAGE",
    "image_category": f"{C}.images.category:STAGE",
    "query_filter": f"{C}.text.query_filter:STAGE",
    "text_near_dedup": f"{C}.text.near_dedup:STAGE",
    "language_detect": f"{C}.text.language:STAGE",
    "field_classify": f"{C}.labels.fields:STAGE",
    "category_normalise": f"{C}.labels.normalise:STAGE",
    "category_min_size": f"{C}.selection.min_size:STAGE",
    "field_balance": f"{C}.selection.balance:STAGE",
    "blindness_check": f"{C}.text.judgements:BLINDNESS",
    "baseline_answer": f"{C}.text.judgements:BASELINE",
    "challenge_score": f"{C}.text.judgements:CHALLENGE",
    "interdependency_check": f"{C}.text.judgements:INTERDEPENDENCY",
    "probench_tracks": f"{C}.selection.tracks:STAGE",
    "category_weighted_sample": f"{C}.selection.weighted_sample:STAGE",
    "persona_generate": f"{C}.generation.persona:STAGE",
    "conversation_generate": f"{C}.generation.conversation:STAGE",
    "goal_task_label": f"{C}.generation.goal_task:STAGE",
    "task_label_normalise": f"{C}.labels.normalise:TASK_STAGE",
    "checklist_generate": f"{C}.generation.checklist:STAGE",
    "ladder_generate": f"{C}.generation.ladder:LADDER",
    "caption_generate": f"{C}.generation.ladder:CAPTION",
    "reference_generate": f"{C}.generation.ladder:REFERENCE",
    "focus_points_generate": f"{C}.generation.ladder:FOCUS_POINTS",
    "question_generate": f"{C}.generation.rewrites:QUESTION",
    "paraphrase_generate": f"{C}.generation.rewrites:PARAPHRASE",
    "dialogue_context_generate": f"{C}.generation.rewrites:DIALOGUE",
    "conversation_review": f"{C}.review.conversation_review:STAGE",
}
ENTRY_POINT_GROUP = "benchcurate.stages"


class Registry(Mapping[str, Stage]):
    """Stage name -> Stage, each loaded on first use from `locations` ("module:attribute")."""

    def __init__(self, locations: dict[str, str]):
        self.locations = dict(locations)
        self._loaded: dict[str, Stage] = {}

    def __getitem__(self, name: str) -> Stage:
        if name not in self._loaded:
            if name not in self.locations:
                raise KeyError(name)
            module, _, attribute = self.locations[name].partition(":")
            stage = getattr(importlib.import_module(module), attribute)
            if not isinstance(stage, Stage) or stage.name != name:
                raise UserError(
                    f"{self.locations[name]} is not the stage {name!r}; fix the stage table or the "
                    f"entry point in the group {ENTRY_POINT_GROUP}"
                )
            self._loaded[name] = stage
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.locations)

    def __len__(self) -> int:
        return len(self.locations)

    def __contains__(self, name: object) -> bool:
        return name in self.locations


def _installed() -> dict[str, str]:
    """Ours, then every stage other installed packages declare (ours win a name clash)."""
    found = {entry.name: entry.value for entry in entry_points(group=ENTRY_POINT_GROUP)}
    return {**found, **TABLE}


STAGES = Registry(_installed())
