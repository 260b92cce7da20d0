"""What the runner reports while it works; flows/progress.py draws it as bars or log lines."""

from __future__ import annotations

from typing import Protocol

from benchcurate.schemas import StageStats


class Progress(Protocol):
    def start(self, stage: str, index: int, total: int | None) -> None: ...
    def advance(self, count: int) -> None: ...
    def finish(self, stats: StageStats, skipped: bool) -> None: ...
    def finish_waiting(self, stage: str, detail: str) -> None: ...
    def warn(self, stage: str, message: str) -> None: ...
    def begin(self, step: str, total: int | None = None) -> None: ...
    def end(self, step: str, detail: str) -> None: ...


class SilentProgress:
    def start(self, stage: str, index: int, total: int | None) -> None:
        pass

    def advance(self, count: int) -> None:
        pass

    def finish(self, stats: StageStats, skipped: bool) -> None:
        pass

    def finish_waiting(self, stage: str, detail: str) -> None:
        pass

    def warn(self, stage: str, message: str) -> None:
        pass

    def begin(self, step: str, total: int | None = None) -> None:
        pass

    def end(self, step: str, detail: str) -> None:
        pass
