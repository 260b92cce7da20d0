"""Verdicts a stage returns, scores it stores, and the decision record the runner writes for every item."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from benchcurate.schemas.sample import Generation, ScoreValue, Strict

REASON_PATTERN = r"^[a-z][a-z0-9_]*$"


class Keep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["keep"] = "keep"


class Drop(BaseModel):
    """A drop with a stable snake_case reason and the evidence for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["drop"] = "drop"
    reason: str = Field(pattern=REASON_PATTERN)
    detail: dict[str, JsonValue] = Field(default_factory=dict)


Verdict = Keep | Drop


class Scores(Strict):
    """What an item stage measured, kept apart from the decision taken on it."""

    values: dict[str, ScoreValue]
    generation: Generation | None = None


class Decision(Strict):
    """One line of a stage's decisions.jsonl: the item, the verdict and why."""

    item_id: str
    stage: str
    stage_key: str
    kept: bool
    reason: str | None = None
    scores: dict[str, ScoreValue] = Field(default_factory=dict)
    detail: dict[str, JsonValue] = Field(default_factory=dict)
    backend: str | None = Field(None, description="set when a model backend produced the scores")
    model: str | None = None
    prompt_id: str | None = None
    prompt_version: int | None = None
    prompt_sha256: str | None = None


class ModelUsage(Strict):
    """Model calls of one stage with one model; cached replies cost nothing."""

    calls: int = 0
    cached_calls: int = 0
    batch_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = Field(0.0, description="null when the model has no known price")

    def plus(self, other: ModelUsage) -> ModelUsage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return ModelUsage(
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            batch_calls=self.batch_calls + other.batch_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=cost,
        )


class StageStats(Strict):
    """A stage's counts, written to stats.json; the funnel report and release card read only these."""

    stage: str
    index: int
    key: str
    kind: Literal["source", "item", "set", "transform"]
    items_in: int
    kept: int
    dropped: int
    by_reason: dict[str, int] = Field(default_factory=dict)
    seconds: float
    backends: list[str] = Field(default_factory=list)
    usage: dict[str, ModelUsage] = Field(default_factory=dict, description="model -> calls, tokens, cost")
    config: dict[str, JsonValue] = Field(default_factory=dict)
    kept_by_label: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="label kind (image_main, task_main) -> label -> kept items; for histograms"
    )
    summary: dict[str, JsonValue] = Field(
        default_factory=dict, description="what a set stage decided as a whole: weights, quotas, caps, mappings"
    )
