"""Who spent what: model calls are counted per item, on the thread that processes it, and summed per stage."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from benchcurate.schemas import ModelUsage

_current = threading.local()


def record(model: str, usage: ModelUsage) -> None:
    """Add a call's usage to the collection open on this thread (if any)."""
    totals = getattr(_current, "totals", None)
    if totals is not None:
        totals[model] = totals.get(model, ModelUsage()).plus(usage)


@contextmanager
def collecting() -> Iterator[dict[str, ModelUsage]]:
    """Collect the usage of the calls made on this thread inside the block, by model."""
    previous = getattr(_current, "totals", None)
    _current.totals = {}
    try:
        yield _current.totals
    finally:
        _current.totals = previous


def add_usage(total: dict[str, ModelUsage], more: dict[str, ModelUsage]) -> dict[str, ModelUsage]:
    merged = dict(total)
    for model, usage in more.items():
        merged[model] = merged.get(model, ModelUsage()).plus(usage)
    return merged
