"""What the run store writes besides samples and decisions: the chain of finished (or waiting) stages."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from benchcurate.schemas.sample import Strict


class StageState(Strict):
    """One link of a run's chain in state.json: a stage done (its output folder and the digest of what it kept) or
    waiting (batches still running; the next run resumes polling)."""

    index: int = Field(ge=0)
    stage: str
    key: str
    status: Literal["done", "waiting"]
    output_dir: str | None = None
    output_sha256: str | None = None
    detail: str | None = None


class RunState(Strict):
    stages: list[StageState] = Field(default_factory=list)
