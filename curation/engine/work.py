"""Stage work on one chunk of items, in whichever process runs it (this one, a worker process, a Dask worker).

`work_chunk(run_dir, index, rows)` is a plain function of plain arguments: the process builds the stage, its config
and a context once (from run.json, the same in every process) and scores or generates each item. The one broad
catch of the pipeline sits here, at the item boundary: an item that raises becomes a recorded failure, while a
server that is down, a user mistake or a spent budget stops the stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.errors import (
    BackendUnavailable,
    BudgetExceeded,
    DiskFull,
    ModelOutputInvalid,
    ModelReplyTooLarge,
    ModelRequestRejected,
    StageFailed,
    UserError,
    disk_full,
)
from benchcurate.curation.core.parallel import keep_temporaries_on_heap
from benchcurate.curation.core.secrets import redact
from benchcurate.curation.engine.registry import STAGES
from benchcurate.curation.engine.stage import ItemStage, Stage, StageConfig, StageContext
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.models import make_backend
from benchcurate.curation.models.pricing import Budget
from benchcurate.curation.models.usage import collecting
from benchcurate.schemas import RunConfig, Sample

Registry = Mapping[str, Stage]
RAW_REPLY_MAX_CHARS = 4000
STOPS_THE_STAGE = (BackendUnavailable, UserError, StageFailed, BudgetExceeded, DiskFull)


def stage_config(run: RunConfig, index: int, registry: Registry = STAGES) -> tuple[Stage, StageConfig]:
    spec = run.recipe.stages[index]
    stage = registry[spec.stage]
    return stage, stage.config.model_validate(spec.config)


def request_cache(run_config: RunConfig, store: RunStore) -> Cache:
    """Where model replies are kept: the backend's `request_cache` file, or the output folder's cache."""
    location = run_config.recipe.backend.request_cache
    return Cache(Path(location) if location else store.cache_path)


def _error_record(item: Sample, error: Exception) -> dict:
    if isinstance(error, ModelOutputInvalid):
        detail = {"error": str(error), "raw_reply": (error.raw or "")[:RAW_REPLY_MAX_CHARS]}
        return {"item_id": item.id, "error": {"reason": "model_output_invalid", "detail": detail}}
    if isinstance(error, ModelRequestRejected):
        return {"item_id": item.id, "error": {"reason": "model_request_rejected", "detail": {"error": str(error)}}}
    if isinstance(error, ModelReplyTooLarge):
        return {"item_id": item.id, "error": {"reason": "model_reply_too_large", "detail": {"error": str(error)}}}
    return {
        "item_id": item.id,
        "error": {
            "reason": "stage_error",
            "detail": {"error_type": type(error).__name__, "message": redact(str(error))},
        },
    }


def guarded(work, item: Sample) -> dict:
    """The one broad catch: an item that fails becomes a recorded drop; a server or user problem stops the stage."""
    try:
        return work(item)
    except STOPS_THE_STAGE:
        raise
    except Exception as error:  # the item boundary
        if disk_full(error):  # the disk, not the item: recording it as the item's failure would lose the item
            raise DiskFull(str(error)) from error
        return _error_record(item, error)


def work_one(stage: Stage, config: StageConfig, ctx: StageContext, item: Sample) -> dict:
    if isinstance(stage, ItemStage):
        return {"item_id": item.id, "scores": stage.score(item, config, ctx).model_dump(mode="json")}
    outputs = stage.generate(item, config, ctx)
    return {"item_id": item.id, "outputs": [output.model_dump(mode="json") for output in outputs]}


class ProcessContexts:
    """Per process: each stage's context built once per version of run.json, and one budget per invocation.

    Worker processes and Dask workers receive only (run folder, stage index, rows), so they rebuild what a stage
    needs from run.json; keeping it here makes that a one-stat lookup per chunk instead of a rebuild per item."""

    def __init__(self) -> None:
        self._contexts: dict[tuple[str, int, int], tuple[Stage, StageConfig, StageContext]] = {}
        self._budgets: dict[tuple[str, str], Budget] = {}

    def budget(self, run_dir: str, run_config: RunConfig) -> Budget:
        """One budget per invocation of a run (run.json's created_at), shared by its stages in this process."""
        key = (run_dir, run_config.created_at.isoformat())
        if key not in self._budgets:
            self._budgets[key] = Budget(run_config.recipe.backend.max_cost_usd)
        return self._budgets[key]

    def get(self, run_dir: str, index: int, registry: Registry = STAGES) -> tuple[Stage, StageConfig, StageContext]:
        store = RunStore(Path(run_dir))
        key = (run_dir, index, store.config_path.stat().st_mtime_ns)
        if key not in self._contexts:
            run_config = store.load_config()
            stage, config = stage_config(run_config, index, registry)
            backend = make_backend(
                run_config.recipe.backend, request_cache(run_config, store), self.budget(run_dir, run_config)
            )
            self._contexts[key] = (
                stage,
                config,
                StageContext(
                    run_dir=store.root,
                    stage=stage.name,
                    run_seed=run_config.recipe.seed,
                    backend=backend,
                    cache=Cache(store.cache_path),
                ),
            )
        return self._contexts[key]


CONTEXTS = ProcessContexts()  # this process's; a spawned worker starts with its own, empty


def work_chunk(run_dir: str, index: int, rows: list[str], registry: Registry = STAGES) -> list[dict]:
    """Work records (scores, generated items or a recorded failure, and model usage) for serialized samples."""
    keep_temporaries_on_heap()
    stage, config, ctx = CONTEXTS.get(run_dir, index, registry)
    records = []
    for row in rows:
        with collecting() as usage:
            record = guarded(lambda item: work_one(stage, config, ctx, item), Sample.model_validate_json(row))
        if usage:
            record["usage"] = {model: spent.model_dump(mode="json") for model, spent in usage.items()}
        records.append(record)
    return records
