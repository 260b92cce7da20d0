"""Pydantic models at every boundary of the pipeline; nothing else lives here."""

from benchcurate.schemas.decision import Decision, Drop, Keep, ModelUsage, Scores, StageStats, Verdict
from benchcurate.schemas.manifest import DatasetStatistics, PromptUse, ReleaseManifest, Spread
from benchcurate.schemas.recipe import (
    BackendSpec,
    DemoSpec,
    ExecutionSpec,
    Price,
    Recipe,
    ReleaseSpec,
    RunConfig,
    RunOptions,
    RunOutcome,
    StageSpec,
)
from benchcurate.schemas.sample import (
    Categories,
    Challenge,
    ChecklistItem,
    Generation,
    ImageRef,
    Persona,
    Provenance,
    ReviewState,
    Rewrite,
    Sample,
    Turn,
)

__all__ = [
    "BackendSpec", "Categories", "Challenge", "ChecklistItem", "DatasetStatistics", "Decision", "DemoSpec", "Drop", "ExecutionSpec", "Generation",
    "ImageRef", "Keep", "ModelUsage", "Price", "Persona", "PromptUse", "Provenance", "Recipe", "ReleaseManifest", "ReleaseSpec",
    "ReviewState", "Rewrite", "RunConfig", "RunOptions", "RunOutcome", "Sample", "Scores", "Spread", "StageSpec", "StageStats", "Turn", "Verdict",
]
