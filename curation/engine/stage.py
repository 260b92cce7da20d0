"""The stage interface: a pydantic config plus a few pure functions, in one of four kinds.

- SourceStage: makes items from outside the run (ingest).
- ItemStage: `score` one item (stored), then `decide` from the stored scores alone.
- SetStage: `select` over the whole collection (dedup, category size, sampling), one verdict per input;
  optionally `relabel` first, which rewrites labels using the whole collection (category merging). A set stage
  that sees the whole corpus declares a `view`: the few fields its decision needs (an id and a hash or a label,
  170-430 bytes where a parsed Sample takes 6.7-9.5 KB), so the runner holds views, not items, and streams the
  items past the verdicts afterwards.
- TransformStage: `generate` new or enriched items from one item (persona, conversation, paraphrase: one to
  many), then an optional `check` that decides on the generated content.

A stage writes no files and keeps no global state: the runner writes its outputs and the context gives it
the backend, the cache, seeds and progress.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.seeds import derive_rng, derive_seed
from benchcurate.curation.models.base import ModelBackend, ModelRequest, ModelResult
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.schemas import Keep, Sample, Scores, Verdict

GENERIC_REASONS = ("stage_error", "model_output_invalid", "model_request_rejected", "model_reply_too_large")


class StageConfig(BaseModel):
    """Base config: unknown keys are errors; units go in field names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def decision_fields(cls) -> set[str]:
        """Fields that only `decide` reads: changing them replays decisions from stored scores."""
        return {
            name
            for name, info in cls.model_fields.items()
            if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("decision")
        }

    def scoring_part(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude=self.decision_fields())


def decision_field(default: Any, **kwargs: Any) -> Any:
    """A config field read only by `decide` (a threshold, a cap)."""
    return Field(default, json_schema_extra={"decision": True}, **kwargs)


@dataclass
class StageContext:
    """What a stage may reach: passed explicitly, never global."""

    run_dir: Path
    stage: str
    run_seed: int
    backend: ModelBackend
    cache: Cache
    progress: Callable[[int], None] = field(default=lambda advance: None)
    summary: dict[str, Any] = field(default_factory=dict)  # a set stage's whole-collection record (stats.json)

    def seed_for(self, *parts: str) -> int:
        return derive_seed(self.run_seed, self.stage, *parts)

    def rng_for(self, *parts: str) -> random.Random:
        """A generator that depends only on the run seed, the stage and `parts` (e.g. an item id)."""
        return derive_rng(self.run_seed, self.stage, *parts)

    def ask(
        self,
        prompt_id: str,
        prompt_version: int,
        item: Sample,
        variables: dict[str, str] | None = None,
        model: str | None = None,
    ) -> ModelResult:
        """One model call about `item`'s images, seeded by the item so a rerun asks the same question."""
        request = ModelRequest(
            prompt=load_prompt(prompt_id, prompt_version),
            variables=variables or {},
            images=tuple(item.images),
            seed=self.seed_for(item.id),
            model=model,
        )
        return self.backend.complete(request)


class ModelStageConfig(StageConfig):
    """Settings every model-calling stage has."""

    prompt_version: int = Field(1, ge=1, description="pins prompts/<purpose>/v<N>.yaml")
    model: str | None = Field(None, description="this stage's model; default: the backend's")
    batch: bool | None = Field(None, description="send this stage through the Batch API; default: the run's setting")


@dataclass(frozen=True, kw_only=True)
class StageBase:
    name: str
    config: type[StageConfig]
    reasons: tuple[str, ...] = ()  # every drop reason the stage may give
    uses_model: bool = False
    prompts: tuple[str, ...] = ()  # prompt ids; the config's `prompt_version` pins their version
    version: int = 1  # bump when the stage's logic changes, so old outputs are not reused
    # how the runner spreads items: None means threads for model stages (I/O bound), else one at a time;
    # "processes" for CPU-bound stages (worker processes, or a Dask cluster when the run has one)
    parallel: Literal["serial", "threads", "processes"] | None = None
    # a digest of files the stage reads besides its input (a reference set, review outcomes in the run folder),
    # so that changing them reruns it; called with the config and the run folder
    outside_input: Callable[[Any, Path], str] | None = None


@dataclass(frozen=True, kw_only=True)
class SourceStage(StageBase):
    read: Callable[[Any, StageContext], Iterable[tuple[Sample, Verdict]]]
    describe_input: Callable[[Any], str]  # a digest of what `read` will see, part of the stage key
    kind: Literal["source"] = "source"


@dataclass(frozen=True, kw_only=True)
class ItemStage(StageBase):
    score: Callable[[Sample, Any, StageContext], Scores]
    decide: Callable[[Scores, Any], Verdict]
    apply: Callable[[Sample, Scores, Any], Sample] | None = None  # copies labels into sample fields
    kind: Literal["item"] = "item"


def keep_all(items: list, cfg: Any, ctx: StageContext) -> list[Verdict]:
    return [Keep() for _ in items]


class Keyed(NamedTuple):
    """The view of a set stage whose decision needs an item's id and one value (a label, a question)."""

    id: str
    value: Any


Update = dict[str, Any]  # Sample field -> new value; "scores" is the stage's own scores entry


@dataclass(frozen=True, kw_only=True)
class SetStage(StageBase):
    """Without a view, `relabel` and `select` get whole Samples and `relabel` returns them changed (same items,
    same order); for stages that only ever see a sampled set (review, tracks). With a view, both get
    `view(item, config)` of every item, and `relabel` returns per item the fields to change (or None)."""

    view: Callable[[Sample, Any], Any] | None = None
    select: Callable[[list, Any, StageContext], list[Verdict]] = keep_all
    relabel: Callable[[list, Any, StageContext], list] | None = None
    kind: Literal["set"] = "set"

    def __post_init__(self) -> None:
        if self.view is not None and self.relabel is not None and self.select is not keep_all:
            raise ValueError(
                f"{self.name}: with a view, select would see the views before relabelling; split the stage in two"
            )

    def views(self, items: Iterable[Sample], cfg: Any) -> list:
        return [self.view(item, cfg) for item in items] if self.view is not None else list(items)

    def decide(self, items: list[Sample], cfg: Any, ctx: StageContext) -> tuple[list[Sample], list[Verdict]]:
        """The stage over items in memory (what the runner does in two streaming passes): (items, verdicts)."""
        views = self.views(items, cfg)
        if self.relabel is not None:
            changed = self.relabel(views, cfg, ctx)
            items = (
                changed
                if self.view is None
                else [apply_update(item, update, self.name) for item, update in zip(items, changed, strict=True)]
            )
            views = self.views(items, cfg)
        return items, self.select(views, cfg, ctx)


@dataclass(frozen=True, kw_only=True)
class TransformStage(StageBase):
    generate: Callable[[Sample, Any, StageContext], list[Sample]]
    check: Callable[[Sample, Any], Verdict] | None = None
    kind: Literal["transform"] = "transform"


Stage = SourceStage | ItemStage | SetStage | TransformStage


def model_transform(
    name: str, config: type[StageConfig], generate: Callable, prompt: str, check: Callable | None = None, *reasons: str
) -> TransformStage:
    """A transform stage whose `generate` asks one prompt (the common case of the generation stages)."""
    return TransformStage(
        name=name, config=config, generate=generate, check=check, reasons=reasons, uses_model=True, prompts=(prompt,)
    )


def record_scores(item: Sample, scores: Scores, stage: str) -> Sample:
    """Store the scores (and who produced them) on the item under the stage's name."""
    generated = dict(item.generated_by)
    if scores.generation is not None:
        generated[stage] = scores.generation
    return item.model_copy(update={"scores": {**item.scores, stage: scores.values}, "generated_by": generated})


def apply_update(item: Sample, update: Update | None, stage: str) -> Sample:
    """A set stage's relabelling applied to the whole item; its "scores" entry is stored under the stage's name."""
    if not update:
        return item
    fields = {name: value for name, value in update.items() if name != "scores"}
    if "scores" in update:
        fields["scores"] = {**item.scores, stage: update["scores"]}
    return item.model_copy(update=fields)
