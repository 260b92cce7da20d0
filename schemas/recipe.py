"""Recipes (a readable pipeline with paper defaults) and the resolved configuration of one run."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import Field, JsonValue, field_validator

from benchcurate.schemas.sample import Strict

BackendKind = Literal["offline", "openai"]
ProgressMode = Literal["auto", "bar", "log", "none"]
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class Price(Strict):
    input_per_million: float = Field(ge=0, description="USD per million input tokens")
    output_per_million: float = Field(ge=0, description="USD per million output tokens")


class BackendSpec(Strict):
    """Which model backend runs the model steps. The API key is never part of it: it comes from OPENAI_API_KEY."""

    kind: BackendKind = "offline"
    base_url: str | None = Field(None, description="OpenAI-protocol base URL, e.g. http://127.0.0.1:8000/v1 for vLLM")
    model: str | None = Field(None, description="model name the server knows; required for kind 'openai'")
    concurrency: int = Field(8, ge=1, le=512, description="requests in flight at once, shared by all stages")
    timeout_seconds: float = Field(120.0, gt=0, description="per request")
    max_retries: int = Field(5, ge=0, le=20, description="retries of 429, 5xx, timeouts and dropped connections")
    temperature: float = Field(0.0, ge=0, le=2)
    max_output_tokens: int = Field(2048, ge=16, description="reply cap; counts toward rate limits, keep it tight")
    max_reply_chars: int = Field(
        200_000, ge=1_000, description="longer replies drop the item as model_reply_too_large and are not stored"
    )
    image_max_side_px: int = Field(1024, ge=64, description="images are downscaled to this longest side before sending")
    image_transport: Literal["data_url", "url"] = Field("data_url", description="send image bytes, or a URL to them")
    image_url_template: str | None = Field(
        None, description="with image_transport url: e.g. https://host/images/{sha256}"
    )
    prices: dict[str, Price] = Field(default_factory=dict, description="model -> price, over the built-in table")
    max_cost_usd: float | None = Field(None, gt=0, description="stop before new calls in one invocation cost more")
    request_cache: str | None = Field(
        None, description="sqlite file of model replies; default <out>/cache/cache.sqlite"
    )
    refresh_token: str | None = Field(None, description="set by --refresh-cache: ask again instead of reusing replies")
    batch: bool = Field(False, description="send model stages through the Batch API (half price, up to 24 h)")
    batch_wait_seconds: float = Field(
        600, ge=0, description="how long one run polls before leaving a stage waiting (a rerun resumes polling)"
    )
    batch_poll_seconds: float = Field(15, gt=0, description="between two looks at running batches")


class ExecutionSpec(Strict):
    """Where heavy stages run. It never changes results, so it is not part of any stage key."""

    jobs: int = Field(0, ge=0, le=256, description="worker processes for CPU-bound stages; 0 = one per core")
    dask_address: str | None = Field(
        None, description="run CPU-bound stages on this Dask scheduler, e.g. tcp://10.0.0.5:8786"
    )
    dask_wait_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="how long a run waits for a Dask worker, at "
        "the start and whenever every worker is gone, "
        "before it stops (exit 3; the same command "
        "resumes)",
    )


class StageSpec(Strict):
    stage: str
    config: dict[str, JsonValue] = Field(default_factory=dict)


SPLIT_NAME = r"^[a-z][a-z0-9_]*$"
RELEASE_NAME = r"[a-z0-9][a-z0-9_-]{0,95}"


class ReleaseSpec(Strict):
    name: str = Field(description="the release's folder under releases/ and its config name")
    splits: dict[str, float] = Field(
        default_factory=lambda: {"test": 1.0},
        description="split name -> fraction of the samples. A sample's split follows from a hash of the release "
        "name and its id alone, so it keeps its split in every later version whatever else changes",
    )
    max_shard_mb: float = Field(500, gt=0, description="parquet files are cut at about this size (images included)")
    first_version: str = Field("0.1.0", pattern=r"^\d+\.\d+\.\d+$")
    pretty_name: str
    task_categories: list[str] = Field(default_factory=lambda: ["image-text-to-text"])

    @field_validator("name")
    @classmethod
    def _name_is_a_folder_name(cls, name: str) -> str:
        if not re.fullmatch(RELEASE_NAME, name):
            raise ValueError(
                f"release name '{name}' must be lower-case letters, digits, '-' and '_', starting with "
                f"a letter or digit (at most 96 characters)"
            )
        return name

    @field_validator("splits")
    @classmethod
    def _fractions(cls, splits: dict[str, float]) -> dict[str, float]:
        if not splits:
            raise ValueError("at least one split is needed, e.g. {test: 1.0}")
        bad = [name for name in splits if not re.match(SPLIT_NAME, name)]
        if bad:
            raise ValueError(f"split names must be lower-case words (a-z, 0-9, _): {bad}")
        if any(fraction <= 0 for fraction in splits.values()) or abs(sum(splits.values()) - 1) > 1e-6:
            raise ValueError(f"split fractions must be positive and add up to 1, got {splits}")
        return splits


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


PRICES_HELP = (
    "MODEL=IN,OUT: a model's price in USD per million input and output tokens, e.g. gpt-4o=2.5,10, over "
    "the built-in table; repeatable"
)
MAX_COST_HELP = (
    "stop before new model calls cost more than this many USD (exit 4); replies so far are kept and "
    "cached; every model asked needs a price (built in, or --price)"
)


class RunOptions(Strict):
    """What one run asks for on top of its recipe: the flags of `curate run`, the parameters of a deployment run.

    Built once (by the CLI from its flags, or by Prefect from a deployment's parameters) and passed down as is;
    None means "the recipe's value" (or, for a resumed run, the value it started with)."""

    input_path: str | None = Field(
        None,
        description=(
            "a folder of images (with an optional manifest.jsonl), a CSV/JSONL manifest of image paths, a samples "
            "JSONL (curate import) or a local Hugging Face dataset folder; left out, a run id resumes that run, and "
            "neither runs the bundled demo corpus with the recipe's small-corpus settings"
        ),
    )
    run_id: str | None = Field(
        None,
        description=("the run's id: reuse one to resume it (finished stages are skipped); default <recipe>-<UTC time>"),
    )
    demo: bool = Field(
        False, description=("run on the bundled demo corpus (what happens anyway without an input and a run id)")
    )
    release_name: str | None = Field(
        None,
        description=(
            "the release's name (its folder under releases/ and its config name): lower-case letters, digits, '-' and "
            "'_'; default the recipe's, with -demo on the bundled demo corpus"
        ),
    )
    backend: BackendKind | None = Field(
        None,
        description=(
            "offline (the default: deterministic heuristics, labelled offline-heuristic) or openai (any "
            "OpenAI-protocol server; key from OPENAI_API_KEY)"
        ),
    )
    base_url: str | None = Field(
        None,
        description=(
            "the OpenAI-protocol server's base URL, e.g. http://127.0.0.1:8000/v1; default OPENAI_BASE_URL, else "
            "api.openai.com"
        ),
    )
    model: str | None = Field(None, description="the model's name for the openai backend")
    seed: int | None = Field(None, description="the run's seed; default the recipe's")
    overrides: dict[str, dict[str, JsonValue]] = Field(
        default_factory=dict,
        description=(
            "stage parameters over the recipe's, stage.field=value (also backend.field and execution.field); repeatable"
        ),
    )
    jobs: int | None = Field(
        None,
        ge=0,
        le=256,
        description=(
            "worker processes for CPU-bound stages (hashing, MinHash signatures and, with the offline backend, every "
            "scoring and generating stage); default one per core"
        ),
    )
    dask_address: str | None = Field(
        None,
        description=(
            "run the stages on this Dask scheduler (e.g. tcp://10.0.0.5:8786) through Prefect's Dask task runner; on "
            "one machine --jobs is faster, a cluster adds machines"
        ),
    )
    concurrency: int | None = Field(
        None, ge=1, le=512, description=("model requests in flight at once, shared by all stages; default the recipe's")
    )
    max_cost_usd: float | None = Field(None, gt=0, description=MAX_COST_HELP)
    prices: dict[str, Price] | None = Field(None, description=PRICES_HELP)
    refresh_cache: bool = Field(
        False, description=("ask the model again instead of reusing cached replies (and cache the new ones)")
    )
    batch: bool | None = Field(
        None,
        description=(
            "send model stages through the Batch API: half price, results within 24 h; the same command resumes polling"
        ),
    )
    request_cache: str | None = Field(
        None, description="sqlite file of model replies; default <out>/cache/cache.sqlite"
    )
    allowed_roots: list[str] | None = Field(
        None,
        description=(
            "only take images whose resolved path lies under one of these folders; others are dropped as "
            "outside_input_root; default anywhere a manifest points (a deployment run: the input's own folder)"
        ),
    )
    release: bool = Field(True, description="write a versioned release when the run completes")
    progress: ProgressMode = Field(
        "auto", description="auto (bars on a terminal, log lines elsewhere), bar, log or none"
    )

    @field_validator("run_id")
    @classmethod
    def _run_id_is_a_folder_name(cls, run_id: str | None) -> str | None:
        if run_id is not None and not re.fullmatch(RUN_ID_PATTERN, run_id):
            raise ValueError(f"bad run id '{run_id}': use letters, digits, '.', '_' and '-' ({RUN_ID_PATTERN})")
        return run_id


class RunConfig(Strict):
    """Everything that determines a run's outputs, written to run.json (no secrets)."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    recipe: Recipe = Field(description="with overrides applied and every stage config validated and filled in")
    input_path: str | None = Field(None, description="absolute path; None means the bundled demo corpus")
    demo: bool
    code_version: str
    created_at: datetime
    options: RunOptions | None = Field(
        None,
        description="what the run was asked for (flags or deployment "
        "parameters), merged over earlier attempts'; a resumed run "
        "reuses what is not given again",
    )


class RunOutcome(Strict):
    """What a `curate` flow run did, as the command (or a deployment's caller) reads it."""

    run_id: str
    run_dir: str
    demo: bool = False
    waiting: str | None = Field(None, description="what the run waits for (batches, a review round); a rerun resumes")
    review: str | None = Field(
        None, description="what became of the review round: pushed (with its address) or why not"
    )
    emptied_by: str | None = Field(None, description="the stage that removed the last samples; nothing released")
    report: str | None = Field(None, description="the HTML report's index.html")
    release_dir: str | None = None
    release_new: bool = Field(False, description="false when an existing version already held the same content")
    release_warnings: list[str] = Field(default_factory=list, description="license conflicts and unknown licenses")
