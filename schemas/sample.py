"""The canonical benchmark sample: a superset of the MultiVerse release with room for the other three papers.

MultiVerse's Hugging Face fields (index, image, character, scenario, goal, conversation of
{speaker, utterance, checklist[{question, main_criteria, sub_criteria}]}, two-level goal/task/image
categories) map one to one onto `Sample`; ConvBench, ProBench and AlignMMBench fields are optional.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SAMPLE_SCHEMA_VERSION = 1

Speaker = Literal["user", "assistant"]
CapabilityLevel = Literal["perception", "reasoning", "creation"]
ScoreValue = float | int | str | bool | None


class Strict(BaseModel):
    """Base for every boundary model: unknown keys are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class ImageRef(Strict):
    """One image file, identified by its content."""

    path: str = Field(description="absolute path of the file the bytes are read from")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size_bytes: int = Field(ge=0)
    width: int | None = Field(None, ge=1)
    height: int | None = Field(None, ge=1)
    format: str | None = Field(None, description="format Pillow detected, e.g. PNG, JPEG")
    phash: str | None = Field(None, pattern=r"^[0-9a-f]{16}$", description="64-bit pHash as 16 hex digits")
    phash_algorithm: str | None = Field(None, description="how the pHash was computed: library, version, decode")


class Provenance(Strict):
    """Where a sample came from and under which terms."""

    source_dataset: str
    source_id: str
    license: str = Field(description="the picture's license: SPDX identifier, 'Public-Domain', or 'unknown'")
    text_license: str = Field(
        "unknown",
        description="the license of the sample's text (questions, answers, "
        "references, checklists): SPDX identifier, or 'unknown' when "
        "nobody stated it",
    )
    attribution: str | None = None
    source_path: str | None = Field(None, description="path relative to the ingested root")
    derived_from: str | None = Field(None, description="source_id of the original when this is an edited copy")


class Generation(Strict):
    """Who produced a generated field or a score: the backend label is shown wherever the output is."""

    backend: str = Field(
        description="'offline-heuristic' for the built-in heuristics, 'openai' for an OpenAI-protocol server"
    )
    model: str
    prompt_id: str | None = None
    prompt_version: int | None = None
    prompt_sha256: str | None = None


class ChecklistItem(Strict):
    question: str
    main_criteria: str
    sub_criteria: str
    source_model: str | None = None


class Turn(Strict):
    speaker: Speaker
    utterance: str
    checklist: list[ChecklistItem] = Field(default_factory=list, description="user turns only (MultiVerse)")
    level: CapabilityLevel | None = Field(None, description="ConvBench capability level of a user turn")
    task_category: str | None = None
    reference: str | None = Field(None, description="gold answer for a user turn when kept apart from the next turn")
    focus_points: list[str] = Field(default_factory=list, description="ConvBench creation-turn focus points")


class Persona(Strict):
    character: str
    scenario: str
    goal: str


class Categories(Strict):
    image_main: str | None = None
    image_sub: str | None = None
    goal_main: str | None = None
    goal_sub: str | None = None
    task_main: str | None = None
    task_sub: str | None = None


class Rewrite(Strict):
    """An AlignMMBench-style paraphrase of the seed question."""

    text: str
    language: str | None = None
    status: Literal["pending", "kept", "rejected"] = "pending"


class Challenge(Strict):
    """ProBench challenge scores, 0-10 each."""

    textual: float = Field(ge=0, le=10)
    image: float = Field(ge=0, le=10)
    reasoning: float = Field(ge=0, le=10)


class ReviewState(Strict):
    status: Literal["pending", "accepted", "rejected"] = "pending"
    mode: Literal["auto", "human"] | None = Field(None, description="'auto' accepts everything and is recorded as such")
    reviewers: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    notes: str | None = None
    project: str | None = None
    round: int | None = None
    updated_at: datetime | None = None


class Sample(Strict):
    """One benchmark item as it moves through the pipeline and into a release."""

    schema_version: int = SAMPLE_SCHEMA_VERSION
    id: str = Field(description="stable across runs: derived from source and content; children append '/<role>'")
    parent_id: str | None = None
    images: list[ImageRef] = Field(default_factory=list)
    provenance: Provenance
    persona: Persona | None = None
    conversation: list[Turn] = Field(default_factory=list)
    history: list[Turn] = Field(default_factory=list, description="given earlier turns (AlignMMBench dialogue context)")
    caption: str | None = Field(None, description="instruction-conditioned caption (ConvBench)")
    rewrites: list[Rewrite] = Field(default_factory=list)
    categories: Categories = Field(default_factory=Categories)
    language: str | None = None
    track: str | None = None
    challenge: Challenge | None = None
    scores: dict[str, dict[str, ScoreValue]] = Field(
        default_factory=dict, description="stage name -> its stored scores"
    )
    generated_by: dict[str, Generation] = Field(default_factory=dict, description="field or stage name -> producer")
    review: ReviewState = Field(default_factory=ReviewState)
