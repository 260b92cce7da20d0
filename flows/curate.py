"""The Prefect flow `curate`: one task per stage around the runner, the funnel as an artifact, then a release.

Resuming relies on the run store's DONE markers, not on Prefect's result cache, so tasks use NO_CACHE.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import deployment
from prefect.utilities.annotations import opaque

from benchcurate.curation.core.errors import (
    BackendUnavailable,
    BudgetExceeded,
    DiskFull,
    RedactedError,
    StageFailed,
    UnexpectedError,
    UserError,
    disk_full,
)
from benchcurate.curation.core.extras import require
from benchcurate.curation.demo.corpus import build_demo_corpus
from benchcurate.curation.engine.progress import Progress
from benchcurate.curation.engine.runner import check_backend, run_stage, run_stage_done
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.recipes import (
    DEMO_CORPUS_DIRNAME,
    available_recipes,
    changed_stages,
    default_run_id,
    existing_run,
    input_folder,
    option_changes,
    resolve_run,
    with_implied_demo,
)
from benchcurate.curation.report.html import write_html_report
from benchcurate.curation.report.run import (
    LABEL_TITLES,
    funnel_markdown,
    histogram_markdown,
    histograms,
    load_report,
    write_label_report,
)
from benchcurate.flows.cluster import wait_for_workers
from benchcurate.flows.options import RUN_FLAGS, spellings
from benchcurate.flows.progress import make_progress, stage_summary
from benchcurate.schemas import RunOptions, RunOutcome, StageStats

RecipeName = Literal[tuple(available_recipes())]  # type: ignore[valid-type]
EXPECTED_FAILURES = (UserError, BackendUnavailable, StageFailed, BudgetExceeded, DiskFull)


class _OneLineForExpectedFailures(logging.Filter):
    """A user mistake, a server that is down or a full disk (wherever the write was) is logged as its one-line
    message, not a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and (isinstance(record.exc_info[1], EXPECTED_FAILURES) or disk_full(record.exc_info[1])):
            error = record.exc_info[1]
            record.msg, record.args = f"{type(error).__name__}: {error}", ()
            record.exc_info, record.exc_text = None, None
        return True


for _logger_name in ("prefect.flow_runs", "prefect.task_runs"):
    logging.getLogger(_logger_name).addFilter(_OneLineForExpectedFailures())


@contextlib.contextmanager
def _stored_redacted() -> Iterator[None]:
    """What Prefect stores of a failure (the state's message, in its database) is the exception's text: another
    library's exception (a server's error echoing our request headers) is raised again as UnexpectedError, whose
    text is redacted, with the original as its cause."""
    try:
        yield
    except RedactedError:
        raise
    except Exception as error:  # re-raised, redacted
        if disk_full(error):
            raise DiskFull(str(error)) from error
        raise UnexpectedError.of(error) from error


def _push_for_review(run_dir: Path, out: Path, recipe: str, logger) -> str:
    """A run waiting for human review: push its conversations to Label Studio when one answers, else say how.
    The project's address becomes the link artifact `review-<recipe>` of the flow run."""
    from benchcurate.annotation.review import connect, push

    try:
        result = push(run_dir, connect(out / "label-studio"))
    except (BackendUnavailable, UserError) as error:
        message = f"review not pushed: {error}; push later with `curate review push {run_dir.name}`"
        logger.warning(message)
        return message
    create_link_artifact(
        key=f"review-{recipe}".replace("_", "-"),
        link=result.url,
        link_text="Review in Label Studio",
        description=f"Label Studio project of run {run_dir.name}: annotate, then `curate review pull {run_dir.name}`",
    )
    message = (
        f"review round pushed ({result.pushed} new, {result.already} already there): {result.url}; "
        f"annotate, then `curate review pull {run_dir.name}` and rerun with --run-id {run_dir.name}"
    )
    logger.info(message)
    return message


def _inline_png(path: Path, title: str) -> str:
    """The plot inside the artifact itself (a data URL, which the Prefect UI renders), so it shows wherever the
    UI runs, not only on the machine that holds the run folder."""
    return f"![{title}](data:image/png;base64,{base64.b64encode(path.read_bytes()).decode('ascii')})"


def _artifact_key(recipe: str) -> str:
    return f"funnel-{recipe}".replace("_", "-")


def _stage(run_dir: Path, index: int, progress: Progress | None = None) -> StageStats | None:
    """One stage as a Prefect task. Its parameters are all Prefect sees and walks (looking for futures before the
    call): not the runner's stage table, and the progress display only as an opaque value."""
    with _stored_redacted():
        return run_stage(run_dir, index, progress)


def _dask_runner(address: str):
    require("dask", "--dask-address")
    from prefect_dask import DaskTaskRunner

    return DaskTaskRunner(address=address)


@flow(name="curate-stages-on-dask", description="The stages of a run, each a task on the Dask cluster.")
def _stages_on_dask(run_dir: str) -> None:
    logger = get_run_logger()
    for index, spec in enumerate(RunStore(Path(run_dir)).load_config().recipe.stages):
        done = run_stage_done(Path(run_dir), index)
        stats = task(_stage, name=spec.stage, cache_policy=NO_CACHE).submit(Path(run_dir), index).result()
        if stats is None:
            return
        logger.info(stage_summary(stats, skipped=done))


@flow(name="curate", description="Curate a benchmark from images with a recipe's stages; release the result.")
def curate(
    recipe: RecipeName = "multiverse", options: RunOptions | None = None, out_dir: str = "outputs"
) -> RunOutcome:
    """Run `recipe` with `options` (RunOptions: the flags of `curate run`); runs and releases go under `out_dir`.

    With `options.dask_address` the stages run through Prefect's Dask task runner, and CPU-bound stages (hashing,
    MinHash signatures, offline scoring) spread their items over that cluster's workers."""
    logger = get_run_logger()
    options = with_implied_demo(options or RunOptions())
    options = options.model_copy(
        update={"run_id": options.run_id or default_run_id(recipe), "allowed_roots": _confined(options, deployment.id)}
    )
    out = Path(out_dir).resolve()
    store = RunStore(out / "runs" / options.run_id)
    with _stored_redacted(), store.lock():
        return _curate(recipe, options, out, store, logger)


def _confined(options: RunOptions, deployment_id: str | None) -> list[str] | None:
    """A deployment run's parameters come from anyone who can reach the Prefect UI or API: unless they name the
    allowed roots, its inputs stay in the input's own folder (a manifest row pointing at /etc/passwd is dropped)."""
    if options.allowed_roots is not None or deployment_id is None or options.input_path is None:
        return options.allowed_roots
    return [str(input_folder(Path(options.input_path).expanduser().resolve()))]


def _curate(recipe: str, options: RunOptions, out: Path, store: RunStore, logger) -> RunOutcome:
    previous = existing_run(out, options.run_id)
    config = resolve_run(recipe, options, out)
    store.save_config(config)
    logger.info(
        "run %s in %s (backend: %s)%s",
        config.run_id,
        store.root,
        config.recipe.backend.kind,
        " on the bundled demo corpus" if config.demo else "",
    )
    if previous is not None:
        changed = changed_stages(previous, config)
        options_changed = option_changes(previous.options, config.options, spellings(RUN_FLAGS))
        logger.info(
            "resuming run %s with the settings it started with%s: finished stages are skipped%s",
            config.run_id,
            f" except {'; '.join(options_changed)}" if options_changed else "",
            f"; changed since last time: {', '.join(changed)} (they and later stages run again)" if changed else "",
        )
    if config.demo:
        build_demo_corpus(out / DEMO_CORPUS_DIRNAME)
    check_backend(store.root)
    display = make_progress(options.progress, logger)
    execution = config.recipe.execution
    if execution.dask_address:
        workers = wait_for_workers(execution.dask_address, execution.dask_wait_seconds)
        logger.info("stages run on the Dask cluster at %s (%d workers)", execution.dask_address, workers)
        _stages_on_dask.with_options(task_runner=_dask_runner(execution.dask_address))(str(store.root))
    else:
        for index, spec in enumerate(config.recipe.stages):
            if task(_stage, name=spec.stage, cache_policy=NO_CACHE)(store.root, index, opaque(display)) is None:
                break  # waiting for batches: the next run resumes polling
    report = load_report(store.root)
    outcome = RunOutcome(run_id=config.run_id, run_dir=str(store.root), demo=config.demo)
    if report.waiting:
        review = (
            _push_for_review(store.root, out, recipe, logger)
            if report.waiting.startswith("conversation_review:")
            else None
        )
        logger.warning("run %s is waiting: %s", config.run_id, report.waiting)
        return outcome.model_copy(update={"waiting": report.waiting, "review": review})
    display.begin("report")
    _publish_artifacts(recipe, config.run_id, report, store.root)
    page = write_html_report(store.root, options.jobs or os.cpu_count() or 1)
    display.end("report", str(page))
    create_link_artifact(
        key=f"report-{recipe}".replace("_", "-"),
        link=page.as_uri(),
        link_text=f"Report of run {config.run_id}",
        description="The run's HTML report",
    )
    outcome = outcome.model_copy(update={"report": str(page)})
    emptied_by = next((stats.stage for stats in report.stages if stats.kept == 0), None)
    if emptied_by is not None:
        logger.warning("no sample survived: %s removed the last ones; nothing to release", emptied_by)
        return outcome.model_copy(update={"emptied_by": emptied_by})
    if not options.release:
        return outcome
    return _release(outcome, store.root, out, display, logger)


def _release(outcome: RunOutcome, run_dir: Path, out: Path, display, logger) -> RunOutcome:
    display.begin("release")
    from benchcurate.curation.release.licenses import license_warnings  # datasets loads only when releasing
    from benchcurate.curation.release.writer import release

    released = release(run_dir, out, on_row=lambda: display.advance(1))
    manifest = released.manifest
    said = (
        f"written: {manifest.name} {released.version}"
        if released.new
        else f"already released as {manifest.name} {released.version} (the same rows and images); no new version"
    )
    display.end("release", f"{said} ({released.folder})")
    warnings = license_warnings(manifest)
    for warning in warnings:
        logger.warning("release %s %s: %s", manifest.name, released.version, warning)
    return outcome.model_copy(
        update={"release_dir": str(released.folder), "release_new": released.new, "release_warnings": warnings}
    )


def _publish_artifacts(recipe: str, run_id: str, report, run_dir: Path) -> None:
    """The funnel and the label histograms (with their plots inline) as the flow run's artifacts."""
    create_markdown_artifact(
        key=_artifact_key(recipe),
        description=f"Funnel of run {run_id}",
        markdown=f"# Funnel of run `{run_id}`\n\nBackend: {', '.join(report.backends)}\n\n{funnel_markdown(report)}\n",
    )
    written = write_label_report(report, run_dir)
    for histogram in histograms(report):
        plot = next(path for path in written if path.name == f"labels_{histogram.kind}.png")
        picture = f"{_inline_png(plot, histogram.kind)}\n\nPlot: `{plot}`"
        create_markdown_artifact(
            key=f"labels-{recipe}-{histogram.kind}".replace("_", "-"),
            description=f"Kept items per {LABEL_TITLES[histogram.kind]}, run {run_id}",
            markdown=f"# Kept items per {LABEL_TITLES[histogram.kind]}, run `{run_id}`\n\n"
            f"{histogram_markdown(histogram, limit=40)}\n\n{picture}\n",
        )
