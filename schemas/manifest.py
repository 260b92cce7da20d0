"""The release manifest: what a versioned release was built from, enough to reproduce and audit it."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, JsonValue

from schemas.decision import StageStats
from schemas.sample import Strict


class PromptUse(Strict):
    prompt_id: str
    version: int
    sha256: str


class ReleaseManifest(Strict):
    name: str
    version: str = Field(pattern=r"^\d+\.\d+\.\d+$")
    created_at: datetime
    run_id: str
    recipe: str
    config_sha256: str = Field(description="sha256 of the run's resolved configuration (run.json's recipe)")
    code_version: str
    seed: int
    backends: list[str] = Field(description="every backend label that produced an output in the release")
    offline_outputs: bool = Field(description="true when any field came from the offline heuristic backend")
    models: list[str]
    total_cost_usd: float | None = Field(description="new model calls of the run's stages; null if a price is unknown")
    prompts: list[PromptUse]
    review_modes: list[str]
    funnel: list[StageStats]
    sample_count: int
    split: str
    licenses: dict[str, int] = Field(description="license -> number of samples")
    sources: dict[str, int] = Field(description="source dataset -> number of samples")
    files: dict[str, JsonValue] = Field(default_factory=dict, description="relative path -> {bytes, sha256}")
