"""Progress displays for the runner: a bar per stage on a terminal, concise log lines elsewhere."""

from __future__ import annotations

import logging
import sys
import time
from typing import Literal

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchcurate.curation.engine.progress import SilentProgress
from benchcurate.schemas import StageStats

ProgressMode = Literal["auto", "bar", "log", "none"]


def stage_summary(stats: StageStats, skipped: bool) -> str:
    reasons = ", ".join(f"{reason} {count}" for reason, count in stats.by_reason.items())
    removed = f", removed {stats.dropped} ({reasons})" if stats.dropped else ""
    state = "skipped, already done" if skipped else f"{stats.seconds:.1f}s"
    return f"{stats.index + 1:>2}. {stats.stage}: {stats.items_in} in{removed}, {stats.kept} out [{state}]"


class BarProgress:
    """One rich progress bar per stage; a finished stage leaves a one-line summary."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self._bar: Progress | None = None
        self._task = None

    def start(self, stage: str, index: int, total: int | None) -> None:
        self._open(f"{index + 1:>2}. {stage:<26}", total)

    def _open(self, label: str, total: int | None) -> None:
        self._bar = Progress(
            TextColumn(label),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(label, total=total)

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def begin(self, step: str, total: int | None = None) -> None:
        """Work after the stages (the report, the release): a bar of its own."""
        self._open(f"    {step:<26}", total)

    def end(self, step: str, detail: str) -> None:
        self._close()
        self.console.print(f"    {step}: {detail}", highlight=False)

    def advance(self, count: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, count)

    def finish(self, stats: StageStats, skipped: bool) -> None:
        self._close()
        self.console.print(stage_summary(stats, skipped), highlight=False)

    def finish_waiting(self, stage: str, detail: str) -> None:
        self._close()
        self.console.print(f"{stage}: waiting: {detail}", highlight=False)

    def warn(self, stage: str, message: str) -> None:
        self.console.print(f"warning: {stage}: {message}", highlight=False)


class LogProgress:
    """For logs (served deployments, CI): a start line, a line every `every_seconds`, a summary line."""

    def __init__(self, logger: logging.Logger | logging.LoggerAdapter, every_seconds: float = 10.0):
        self.logger = logger
        self.every_seconds = every_seconds
        self._stage, self._done, self._total, self._last = "", 0, None, 0.0

    def start(self, stage: str, index: int, total: int | None) -> None:
        self._stage, self._done, self._total, self._last = stage, 0, total, time.monotonic()
        self.logger.info("stage %d %s: started (%s items)", index + 1, stage, "?" if total is None else total)

    def advance(self, count: int) -> None:
        self._done += count
        if time.monotonic() - self._last >= self.every_seconds:
            self._last = time.monotonic()
            self.logger.info("stage %s: %d/%s items", self._stage, self._done, self._total or "?")

    def finish(self, stats: StageStats, skipped: bool) -> None:
        self.logger.info(stage_summary(stats, skipped))

    def finish_waiting(self, stage: str, detail: str) -> None:
        self.logger.info("%s: waiting: %s", stage, detail)

    def warn(self, stage: str, message: str) -> None:
        self.logger.warning("%s: %s", stage, message)

    def begin(self, step: str, total: int | None = None) -> None:
        self._stage, self._done, self._total, self._last = step, 0, total, time.monotonic()
        self.logger.info("%s: started", step)

    def end(self, step: str, detail: str) -> None:
        self.logger.info("%s: %s", step, detail)


class _NoTaskChatter(logging.Filter):
    """With bars on screen, per-task INFO lines ('Finished in state Completed()') only interleave with them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("prefect.task_runs") and record.levelno < logging.WARNING)


def _quiet_task_logs_on_console() -> None:
    """Only the console: the Prefect API still receives every task log."""
    from prefect.logging.handlers import PrefectConsoleHandler

    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(
            isinstance(existing, _NoTaskChatter) for existing in handler.filters
        ):
            handler.addFilter(_NoTaskChatter())


def make_progress(mode: ProgressMode, logger: logging.Logger | logging.LoggerAdapter):
    if mode == "auto":
        mode = "bar" if sys.stderr.isatty() else "log"
    if mode == "bar":
        _quiet_task_logs_on_console()
        return BarProgress()
    if mode == "log":
        return LogProgress(logger)
    return SilentProgress()
