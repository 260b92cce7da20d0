"""Runs stages over the run store: plans a stage (its key), streams its items in chunks through the stage's
functions, owns concurrency and the item-boundary catch, writes every decision, and skips done work.

A stage's key hashes its name, version, config, backend identity, prompt hashes and the sha256 of its input
(the previous stage's kept.jsonl, or the input folder's listing for a source stage). Identical input and config
means the stage is skipped; a changed threshold changes only that stage's key (and the next stages' inputs
only if its output changes). The work folder is keyed without the decision-only fields, so a threshold change
replays `decide` on stored scores with no new model call. Where files live: `curation/store.py`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial as partial_function
from pathlib import Path

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.errors import DiskFull, StageFailed, StageWaiting, UserError, disk_full
from benchcurate.curation.core.files import fresh_partial_folder
from benchcurate.curation.core.fingerprint import sha256_file, sha256_json
from benchcurate.curation.core.jsonl import read_jsonl, read_samples
from benchcurate.curation.core.parallel import on_dask_worker, ordered_map
from benchcurate.curation.engine.progress import Progress, SilentProgress
from benchcurate.curation.engine.registry import STAGES
from benchcurate.curation.engine.stage import (
    GENERIC_REASONS,
    ItemStage,
    SetStage,
    SourceStage,
    Stage,
    StageConfig,
    StageContext,
    TransformStage,
    apply_update,
    record_scores,
)
from benchcurate.curation.engine.store import (
    RunStore,
    changed_since_sealed,
    chunked,
    count_lines,
    rows,
    seal,
    sealed,
    write_json_atomic,
)
from benchcurate.curation.engine.work import CONTEXTS, STOPS_THE_STAGE, Registry, stage_config, work_chunk, work_one
from benchcurate.curation.models import ModelBackend, make_backend
from benchcurate.curation.models.batch import MAX_SUBMISSIONS, BatchJobs, DeferredToBatch, PendingRequest
from benchcurate.curation.models.identity import backend_identity
from benchcurate.curation.models.prompting import load_prompt
from benchcurate.curation.models.usage import add_usage
from benchcurate.schemas import Decision, Drop, Keep, ModelUsage, RunConfig, Sample, Scores, StageStats, Verdict
from benchcurate.schemas.store import StageState

LABEL_KINDS = ("image_main", "task_main")  # counted per stage for the category histograms
THREADS_PER_REQUEST_SLOT = 2  # measured in bench/model_layer.py: 1 per slot leaves the server under-fed
MODEL_WINDOW_ITEMS = 1024  # items started ahead of the oldest unfinished one: > a backoff's worth of replies
CHUNK_ITEMS = 256  # items read, processed and written at a time
PROCESS_CHUNK_ITEMS = 32  # items per task sent to a worker process or Dask worker
PROCESS_MIN_ITEMS = 256  # below this, a stage meant for processes runs here (worker start-up costs more)


# --- planning a stage ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StageRun:
    index: int
    stage: Stage
    config: StageConfig
    input_digest: str
    key: str
    work_key: str | None
    folder: Path

    @property
    def output_dir(self) -> Path:
        return self.folder / self.key

    @property
    def work_dir(self) -> Path | None:
        return None if self.work_key is None else self.folder / f"work-{self.work_key}"

    @property
    def done(self) -> bool:
        return sealed(self.output_dir)


def _prompt_hashes(stage: Stage, config: StageConfig) -> dict[str, str]:
    version = getattr(config, "prompt_version", 1)
    return {prompt_id: load_prompt(prompt_id, version).sha256 for prompt_id in stage.prompts}


def plan_stage(store: RunStore, run: RunConfig, index: int, registry: Registry = STAGES) -> StageRun:
    stage, config = stage_config(run, index, registry)
    if index == 0:
        if not isinstance(stage, SourceStage):
            raise UserError(
                f"the first stage of recipe '{run.recipe.name}' must be a source stage such as "
                f"image_ingest, not {stage.name}"
            )
        input_digest = stage.describe_input(config)
    else:
        previous = store.done_output(index - 1)
        if previous is None:  # absent, or waiting for batches
            raise RuntimeError(f"stage {index + 1} ({stage.name}) cannot start: stage {index} is not complete")
        input_digest = previous.output_sha256
    outside = stage.outside_input(config, store.root) if stage.outside_input else None
    common = {
        "stage": stage.name,
        "version": stage.version,
        "input": input_digest,
        "outside": outside,
        "backend": backend_identity(run.recipe.backend) if stage.uses_model else None,
        "prompts": _prompt_hashes(stage, config),
    }
    work_key = None
    if isinstance(stage, ItemStage | TransformStage):
        work_key = sha256_json({**common, "config": config.scoring_part()})[:16]
    key = sha256_json({**common, "config": config.model_dump(mode="json")})[:16]
    return StageRun(
        index=index,
        stage=stage,
        config=config,
        input_digest=input_digest,
        key=key,
        work_key=work_key,
        folder=store.stage_folder(index, stage.name),
    )


# --- executing a stage ---------------------------------------------------------------------------


class StageWriter:
    """Streams kept, dropped and decisions into a partial folder; `commit` makes it the stage's output."""

    def __init__(self, run: StageRun):
        self.run = run
        self.partial = fresh_partial_folder(run.output_dir)
        self._files = {
            name: open(self.partial / f"{name}.jsonl", "w", encoding="utf-8")  # noqa: SIM115 - closed by commit/abort
            for name in ("kept", "dropped", "decisions")
        }
        self.items_in = 0
        self.by_reason: Counter[str] = Counter()
        self.kept = 0
        self.backends: set[str] = set()
        self.labels: dict[str, Counter[str]] = {kind: Counter() for kind in LABEL_KINDS}
        self.started = time.monotonic()

    def write(self, item: Sample, verdict: Verdict, scores: Scores | None = None, counts_as_input: bool = True) -> None:
        stage = self.run.stage
        if isinstance(verdict, Drop) and verdict.reason not in stage.reasons + GENERIC_REASONS:
            raise ValueError(
                f"stage {stage.name} dropped with undeclared reason '{verdict.reason}'; add it to the stage's reasons"
            )
        generation = scores.generation if scores else None
        if generation is not None:
            self.backends.add(generation.backend)
        decision = Decision(
            item_id=item.id,
            stage=stage.name,
            stage_key=self.run.key,
            kept=isinstance(verdict, Keep),
            reason=verdict.reason if isinstance(verdict, Drop) else None,
            scores=scores.values if scores else {},
            detail=verdict.detail if isinstance(verdict, Drop) else {},
            backend=generation.backend if generation else None,
            model=generation.model if generation else None,
            prompt_id=generation.prompt_id if generation else None,
            prompt_version=generation.prompt_version if generation else None,
            prompt_sha256=generation.prompt_sha256 if generation else None,
        )
        self.items_in += counts_as_input
        if isinstance(verdict, Keep):
            self.kept += 1
            for kind in LABEL_KINDS:
                if (label := getattr(item.categories, kind)) is not None:
                    self.labels[kind][label] += 1
            self._files["kept"].write(item.model_dump_json() + "\n")
        else:
            self.by_reason[verdict.reason] += 1
            self._files["dropped"].write(item.model_dump_json() + "\n")
        self._files["decisions"].write(decision.model_dump_json() + "\n")

    def commit(self, usage: dict[str, ModelUsage] | None = None, summary: dict | None = None) -> StageStats:
        for handle in self._files.values():
            handle.close()
        stats = StageStats(
            stage=self.run.stage.name,
            index=self.run.index,
            key=self.run.key,
            kind=self.run.stage.kind,
            items_in=self.items_in,
            kept=self.kept,
            dropped=sum(self.by_reason.values()),
            by_reason=dict(sorted(self.by_reason.items())),
            seconds=round(time.monotonic() - self.started, 3),
            backends=sorted(self.backends),
            usage=usage or {},
            config=self.run.config.model_dump(mode="json"),
            kept_by_label={
                kind: dict(sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])))
                for kind, counts in self.labels.items()
                if counts
            },
            summary=summary or {},
        )
        write_json_atomic(self.partial / "stats.json", stats.model_dump(mode="json"))
        seal(self.partial)
        shutil.rmtree(self.run.output_dir, ignore_errors=True)
        os.replace(self.partial, self.run.output_dir)
        return stats


def _execution_plan(stage: Stage, run_config: RunConfig, backend: ModelBackend, items: int) -> tuple[str, int, int]:
    """(mode, workers, items per chunk) for a stage over `items` inputs.

    Model stages wait on a server, so they run in threads; with the offline backend the same stages are CPU work
    (pixel statistics, templates), so they go to processes like hashing. Processes (or the Dask cluster, when the
    stage runs on one) pay off only beyond PROCESS_MIN_ITEMS items and with more than one worker: starting a
    worker costs about a second."""
    mode = stage.parallel or ("threads" if stage.uses_model else "serial")
    if mode == "threads" and run_config.recipe.backend.kind == "offline":
        mode = "processes"
    if mode == "threads":  # the client's limit caps requests in flight; spare threads build and parse meanwhile
        return mode, THREADS_PER_REQUEST_SLOT * getattr(backend, "concurrency", 1), 1
    if mode == "processes":
        workers = run_config.recipe.execution.jobs or os.cpu_count() or 1
        if on_dask_worker() or (workers > 1 and items >= PROCESS_MIN_ITEMS):
            return mode, workers, PROCESS_CHUNK_ITEMS
    return "serial", 1, CHUNK_ITEMS


def _batch_enabled(run: StageRun, run_config: RunConfig) -> bool:
    stage_setting = getattr(run.config, "batch", None)
    wanted = run_config.recipe.backend.batch if stage_setting is None else stage_setting
    return bool(wanted) and run.stage.uses_model and run_config.recipe.backend.kind == "openai"


def _collect_deferred(run: StageRun, source: Path, store: RunStore, registry: Registry) -> list[PendingRequest]:
    """Run the stage with requests deferred: the uncached requests it would send, without sending them."""
    stage, config, ctx = CONTEXTS.get(str(store.root), run.index, registry)

    def attempt(batch: list[str]) -> None:
        for row in batch:
            try:
                work_one(stage, config, ctx, Sample.model_validate_json(row))
            except DeferredToBatch:
                pass
            except STOPS_THE_STAGE:
                raise
            except Exception:  # an item boundary: it fails again, recorded, when the stage runs
                pass

    with ctx.backend.deferring() as pending:
        for _ in ordered_map(
            attempt,
            chunked(rows(source), 1),
            "threads",
            THREADS_PER_REQUEST_SLOT * max(1, ctx.backend.concurrency),
            MODEL_WINDOW_ITEMS,
        ):
            pass
        return list(pending.values())


def _run_batches(
    run: StageRun, source: Path, store: RunStore, run_config: RunConfig, registry: Registry
) -> dict[str, ModelUsage]:
    """Fill the reply cache through the Batch API, resubmitting failed lines; raises StageWaiting if not done."""
    backend = CONTEXTS.get(str(store.root), run.index, registry)[2].backend
    spec = run_config.recipe.backend
    jobs = BatchJobs(
        backend,
        run.folder / f"batch-{run.work_key}",
        wait_seconds=spec.batch_wait_seconds,
        poll_seconds=spec.batch_poll_seconds,
    )
    usage: dict[str, ModelUsage] = {}
    for _ in range(MAX_SUBMISSIONS):
        pending = _collect_deferred(run, source, store, registry)
        if not pending:
            break
        usage = add_usage(usage, jobs.run(pending, {"run_id": run_config.run_id, "stage": run.stage.name}))
    return usage


def _compute_work(
    run: StageRun,
    source: Path,
    store: RunStore,
    run_config: RunConfig,
    backend: ModelBackend,
    progress: Progress,
    registry: Registry,
) -> Path:
    """Phase one of item and transform stages: scores or generated items per input, stored by work key."""
    work_dir = run.work_dir
    assert work_dir is not None
    if sealed(work_dir) and not _changed(work_dir, progress, run.stage.name, "scores or generated items"):
        progress.advance(count_lines(source))
        return work_dir / "work.jsonl"
    stage = run.stage
    batch_usage = _run_batches(run, source, store, run_config, registry) if _batch_enabled(run, run_config) else {}
    partial = fresh_partial_folder(work_dir)
    mode, workers, chunk_items = _execution_plan(stage, run_config, backend, count_lines(source))
    function = partial_function(work_chunk, str(store.root), run.index, registry=registry)
    total = failed = 0
    first_error: dict | None = None
    usage: dict[str, ModelUsage] = batch_usage
    with open(partial / "work.jsonl", "w", encoding="utf-8") as handle:
        window = MODEL_WINDOW_ITEMS if mode == "threads" else None
        for records in ordered_map(function, chunked(rows(source), chunk_items), mode, workers, window):
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                usage = add_usage(
                    usage, {model: ModelUsage.model_validate(spent) for model, spent in record.get("usage", {}).items()}
                )
                if "error" in record:
                    failed += 1
                    first_error = first_error or record["error"]
            total += len(records)
            progress.advance(len(records))
    if total and failed == total:
        raise StageFailed(
            f"{stage.name}: all {total} items failed, so nothing was recorded as done (first error: "
            f"{first_error['reason']}: {json.dumps(first_error['detail'])[:300]}); fix the cause and "
            f"rerun with the same --run-id"
        )
    write_json_atomic(partial / "usage.json", {model: spent.model_dump(mode="json") for model, spent in usage.items()})
    seal(partial)
    shutil.rmtree(work_dir, ignore_errors=True)
    os.replace(partial, work_dir)
    return work_dir / "work.jsonl"


def work_usage(work_file: Path) -> dict[str, ModelUsage]:
    """The model usage of a stage's work, as computed when the work was done."""
    stored = json.loads((work_file.parent / "usage.json").read_text(encoding="utf-8"))
    return {model: ModelUsage.model_validate(spent) for model, spent in stored.items()}


def _new_generation(before: Sample, after: Sample) -> Scores | None:
    """What a transform generated, and with which backend, read off the producer entries it added."""
    added = [
        generation for name, generation in after.generated_by.items() if before.generated_by.get(name) != generation
    ]
    return Scores(values={}, generation=added[0]) if added else None


def _decide_items(run: StageRun, source: Path, work_file: Path, writer: StageWriter) -> None:
    stage = run.stage
    for item, record in zip(read_samples(source), read_jsonl(work_file), strict=True):
        if record["item_id"] != item.id:
            raise RuntimeError(f"work file {work_file} is out of step with the input at {item.id}")
        if "error" in record:
            writer.write(item, Drop(**record["error"]))
            continue
        if isinstance(stage, ItemStage):
            scores = Scores.model_validate(record["scores"])
            updated = record_scores(item, scores, stage.name)
            if stage.apply is not None:
                updated = stage.apply(updated, scores, run.config)
            writer.write(updated, stage.decide(scores, run.config), scores)
            continue
        outputs = [Sample.model_validate(row) for row in record["outputs"]]
        for position, output in enumerate(outputs):
            verdict = stage.check(output, run.config) if stage.check else Keep()
            writer.write(output, verdict, _new_generation(item, output), counts_as_input=position == 0)
        if not outputs:
            writer.write(item, Drop(reason="stage_error", detail={"message": "generated nothing"}))


def _run_set_stage(
    stage: SetStage, config: StageConfig, source: Path, ctx: StageContext, writer: StageWriter, progress: Progress
) -> None:
    """With a view: decide on the views (a few hundred bytes per item), then stream the items from the input
    past the verdicts. Without: the stage gets every item in memory (only stages that see a sampled set)."""
    if stage.view is None:
        items = list(read_samples(source))
        relabelled, verdicts = stage.decide(items, config, ctx)
        if [item.id for item in relabelled] != [item.id for item in items]:
            raise RuntimeError(f"{stage.name}: relabel must return the same items in the same order")
        _check_count(stage, verdicts, len(items), "verdicts")
        for item, verdict in zip(relabelled, verdicts, strict=True):
            writer.write(item, verdict)
        progress.advance(len(items))
        return
    views = stage.views(read_samples(source), config)
    updates = stage.relabel(views, config, ctx) if stage.relabel is not None else None
    verdicts = stage.select(views, config, ctx)
    _check_count(stage, verdicts, len(views), "verdicts")
    if updates is not None:
        _check_count(stage, updates, len(views), "relabellings")
    del views
    rows = zip(read_samples(source), verdicts, updates or [None] * len(verdicts), strict=True)
    for chunk in chunked(rows, CHUNK_ITEMS):
        for item, verdict, update in chunk:
            writer.write(apply_update(item, update, stage.name), verdict)
        progress.advance(len(chunk))


def _check_count(stage: Stage, results: list, expected: int, what: str) -> None:
    if len(results) != expected:
        raise RuntimeError(f"{stage.name} returned {len(results)} {what} for {expected} items")


def execute_stage(
    store: RunStore,
    run_config: RunConfig,
    run: StageRun,
    backend: ModelBackend,
    cache: Cache,
    progress: Progress,
    registry: Registry = STAGES,
) -> StageStats:
    stage = run.stage
    ctx = StageContext(
        run_dir=store.root,
        stage=stage.name,
        run_seed=run_config.recipe.seed,
        backend=backend,
        cache=cache,
        progress=progress.advance,
    )
    writer = StageWriter(run)
    if isinstance(stage, SourceStage):
        progress.start(stage.name, run.index, None)
        for item, verdict in stage.read(run.config, ctx):
            writer.write(item, verdict)
            progress.advance(1)
        return writer.commit()
    source = store.kept_path(run.index - 1)
    progress.start(stage.name, run.index, count_lines(source))
    if isinstance(stage, SetStage):
        _run_set_stage(stage, run.config, source, ctx, writer, progress)
        return writer.commit(summary=ctx.summary)
    work_file = _compute_work(run, source, store, run_config, backend, progress, registry)
    _decide_items(run, source, work_file, writer)
    return writer.commit(work_usage(work_file))


def run_stage(
    run_dir: Path, index: int, progress: Progress | None = None, cache: Cache | None = None, registry: Registry = STAGES
) -> StageStats | None:
    """Run (or skip, when its output exists) stage `index` of the run in `run_dir`; record it in state.json.

    Returns None when the stage is waiting for batches: state.json says so, and a rerun resumes polling."""
    store = RunStore(run_dir)
    run_config = store.load_config()
    run = plan_stage(store, run_config, index, registry)
    progress = progress or SilentProgress()
    with _full_disk_named(run.stage.name):  # partial output is never marked done: the same command redoes it
        if run.done and not _changed(run.output_dir, progress, run.stage.name, "output"):
            stats = StageStats.model_validate_json((run.output_dir / "stats.json").read_text(encoding="utf-8"))
            skipped = True
        else:
            backend = make_backend(run_config.recipe.backend)
            cache = cache or Cache(store.cache_path)
            try:
                stats = execute_stage(store, run_config, run, backend, cache, progress, registry)
            except StageWaiting as waiting:
                store.record_stage(
                    StageState(index=index, stage=run.stage.name, key=run.key, status="waiting", detail=str(waiting))
                )
                progress.finish_waiting(run.stage.name, str(waiting))
                return None
            skipped = False
        store.record_stage(
            StageState(
                index=index,
                stage=run.stage.name,
                key=run.key,
                status="done",
                output_dir=str(run.output_dir),
                output_sha256=sha256_file(run.output_dir / "kept.jsonl"),
            )
        )
    progress.finish(stats, skipped)
    return stats


@contextlib.contextmanager
def _full_disk_named(stage: str) -> Iterator[None]:
    """A full disk anywhere in a stage (its output, the cache, state.json) as DiskFull naming the stage."""
    try:
        yield
    except (OSError, sqlite3.Error) as error:
        if disk_full(error):
            raise DiskFull(f"stage {stage}: {error}") from error
        raise


def _changed(folder: Path, progress: Progress, stage: str, what: str) -> bool:
    """Whether a finished folder's files changed since it was written (edited, truncated, deleted); said aloud,
    since the stage is then redone rather than trusted."""
    changed = changed_since_sealed(folder)
    if changed:
        progress.warn(stage, f"its stored {what} changed since it was written ({', '.join(changed)}); redoing it")
    return bool(changed)


def run_stage_done(run_dir: Path, index: int, registry: Registry = STAGES) -> bool:
    """Whether `run_stage` would skip stage `index` now (its output exists for its current key, unchanged): asked
    before a stage runs elsewhere (a Dask worker), so the summary can say 'skipped, already done'."""
    store = RunStore(run_dir)
    run = plan_stage(store, store.load_config(), index, registry)
    return run.done and not changed_since_sealed(run.output_dir)


def check_backend(run_dir: Path) -> str:
    """Fail before any item is touched when the model backend is misconfigured or unreachable."""
    backend = make_backend(RunStore(run_dir).load_config().recipe.backend)
    backend.check()
    return backend.label


def stage_count(run_dir: Path) -> int:
    return len(RunStore(run_dir).load_config().recipe.stages)


def run_all(run_dir: Path, progress: Progress | None = None, registry: Registry = STAGES) -> list[StageStats]:
    """Every stage in order, in this process, up to one that waits (the Prefect flow does the same as tasks)."""
    check_backend(run_dir)
    done = []
    for index in range(stage_count(run_dir)):
        stats = run_stage(run_dir, index, progress, registry=registry)
        if stats is None:
            break
        done.append(stats)
    return done
