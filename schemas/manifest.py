"""The release manifest: what a versioned release was built from, enough to reproduce and audit it."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, JsonValue

from benchcurate.schemas.decision import StageStats
from benchcurate.schemas.review import AgreementFigures
from benchcurate.schemas.sample import Strict


class PromptUse(Strict):
    prompt_id: str
    version: int
    sha256: str


class Spread(Strict):
    """Count, average and maximum of a measure (None when there is nothing to measure)."""

    count: int = 0
    average: float | None = None
    maximum: float | None = None


class DatasetStatistics(Strict):
    """MultiVerse Table 1-style statistics of a release (curation/statistics.py computes them)."""

    dialogues: int
    turns_total: int
    turns_per_dialogue: Spread
    question_length: Spread
    answer_length: Spread
    question_mtld: Spread
    answer_mtld: Spread
    length_unit: str = "words; characters for Chinese or Japanese text"
    unique_checklist_items: int
    unique_main_criteria: int
    unique_sub_criteria: int
    categories: dict[str, dict[str, int]]


class ReviewSummary(Strict):
    """How the human review of a release's samples went (from the run's review record; no names)."""

    reviewers_per_sample: int
    people: int = Field(description="distinct reviewers and adjudicators")
    adjudicated_samples: int
    agreement: dict[str, AgreementFigures] = Field(
        description="natural, correct, needs_image, rewrite, check: over every sample reviewed, released or not"
    )


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
    splits: dict[str, int] = Field(description="split name -> number of samples")
    split_fractions: dict[str, float] = Field(description="the fractions the splits were drawn with")
    licenses: dict[str, int] = Field(description="the pictures' license -> number of samples")
    text_licenses: dict[str, int] = Field(default_factory=dict, description="the text's license -> number of samples")
    sources: dict[str, int] = Field(description="source dataset -> number of samples")
    statistics: DatasetStatistics | None = None
    review_projects: list[str] = Field(default_factory=list, description="Label Studio projects the reviews came from")
    review: ReviewSummary | None = Field(None, description="agreement and reviewers of a human review")
    removed_on_request: dict[str, str] = Field(
        default_factory=dict, description="sample id -> reason, from the benchmark's REMOVALS.jsonl"
    )
    license_terms: dict[str, JsonValue] = Field(
        default_factory=dict, description="conditions the release carries (from its sources) and conflicts"
    )
    files: dict[str, JsonValue] = Field(default_factory=dict, description="relative path -> {bytes, sha256}")
    content_sha256: str | None = Field(
        None,
        description="sha256 of what the release holds (each split's rows, "
        "images by their sha256): a release of the same content "
        "is this version, not a new one",
    )
