"""Pydantic models at every boundary of the pipeline; nothing else lives here."""

from schemas.decision import Decision, Drop, Keep, ModelUsage, Scores, StageStats, Verdict
from schemas.manifest import DatasetStatistics, PromptUse, ReleaseManifest, Spread
from schemas.recipe import BackendSpec, DemoSpec, ExecutionSpec, Price, Recipe, ReleaseSpec, RunConfig, StageSpec
from schemas.sample import (
    Categories, Challenge, ChecklistItem, Generation, ImageRef, Persona, Provenance, ReviewState, Rewrite,
    Sample, Turn,
)

__all__ = [
    "BackendSpec", "Categories", "Challenge", "ChecklistItem", "DatasetStatistics", "Decision", "DemoSpec", "Drop", "ExecutionSpec", "Generation",
    "ImageRef", "Keep", "ModelUsage", "Price", "Persona", "PromptUse", "Provenance", "Recipe", "ReleaseManifest", "ReleaseSpec",
    "ReviewState", "Rewrite", "RunConfig", "Sample", "Scores", "Spread", "StageSpec", "StageStats", "Turn", "Verdict",
]
