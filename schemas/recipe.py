"""Recipes (a readable pipeline with paper defaults) and the resolved configuration of one run."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, JsonValue

from schemas.sample import Strict

BackendKind = Literal["offline", "openai"]
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class BackendSpec(Strict):
    """Which model backend runs the model steps. The API key is never part of it: it comes from OPENAI_API_KEY."""

    kind: BackendKind = "offline"
    base_url: str | None = Field(None, description="OpenAI-protocol base URL, e.g. http://127.0.0.1:8000/v1 for vLLM")
    model: str | None = Field(None, description="model name the server knows; required for kind 'openai'")
    concurrency: int = Field(4, ge=1, le=256, description="requests in flight at once")
    timeout_seconds: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10)
    image_max_side_px: int = Field(1024, ge=64, description="images are downscaled to this longest side before sending")


class ExecutionSpec(Strict):
    """Where heavy stages run. It never changes results, so it is not part of any stage key."""

    jobs: int = Field(0, ge=0, le=256, description="worker processes for CPU-bound stages; 0 = one per core")
    dask_address: str | None = Field(None, description="run CPU-bound stages on this Dask scheduler, e.g. "
                                                       "tcp://10.0.0.5:8786")


class StageSpec(Strict):
    stage: str
    config: dict[str, JsonValue] = Field(default_factory=dict)


class ReleaseSpec(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    split: Literal["train", "test", "validation"] = "test"
    first_version: str = Field("0.1.0", pattern=r"^\d+\.\d+\.\d+$")
    pretty_name: str
    task_categories: list[str] = Field(default_factory=lambda: ["image-text-to-text"])


class DemoSpec(Strict):
    """Small-corpus overrides applied when the bundled demo corpus runs (no --input)."""

    description: str
    overrides: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)


class Recipe(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str
    paper: str
    seed: int = 0
    backend: BackendSpec = Field(default_factory=BackendSpec)
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec)
    stages: list[StageSpec] = Field(min_length=1)
    release: ReleaseSpec
    demo: DemoSpec | None = None


class RunConfig(Strict):
    """Everything that determines a run's outputs, written to run.json (no secrets)."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    recipe: Recipe = Field(description="with overrides applied and every stage config validated and filled in")
    input_path: str | None = Field(None, description="absolute path; None means the bundled demo corpus")
    demo: bool
    code_version: str
    created_at: datetime
