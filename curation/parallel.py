"""Ordered, bounded parallel map: the one way the pipeline spreads work over threads, processes or Dask."""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Literal, TypeVar

Chunk = TypeVar("Chunk")
Result = TypeVar("Result")
Mode = Literal["serial", "threads", "processes"]


def _ordered(submit, function, chunks: Iterable, window: int) -> Iterator:
    """Results in input order with at most `window` chunks in flight, so memory stays bounded."""
    pending: deque = deque()
    for chunk in chunks:
        pending.append(submit(function, chunk))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _dask_client():
    """The cluster's client when this code itself runs on a Dask worker (the flow's Dask task runner)."""
    try:
        from distributed import get_worker
        get_worker()
    except (ImportError, ValueError):
        return None
    from distributed import worker_client
    return worker_client()


def ordered_map(function: Callable[[Chunk], Result], chunks: Iterable[Chunk], mode: Mode, workers: int,
                window: int | None = None) -> Iterator[Result]:
    """`map(function, chunks)` in order, spread as `mode` says; processes use a Dask cluster when on one.

    At most `window` chunks (default twice the workers) are submitted ahead of the oldest unfinished one. Model
    calls want a wide window: one item waiting out a backoff must not stall the items behind it.

    Worker processes are started with 'spawn', not 'fork': the parent runs threads (Prefect, progress bars)
    whose locks a forked child could inherit while held."""
    if mode == "serial":
        yield from map(function, chunks)
        return
    if mode == "threads":
        with ThreadPoolExecutor(workers) as pool:
            yield from _ordered(pool.submit, function, chunks, window or 2 * workers)
        return
    cluster = _dask_client()
    if cluster is not None:
        with cluster as client:
            size = max(1, len(client.scheduler_info()["workers"]))
            yield from _ordered(lambda fn, chunk: client.submit(fn, chunk, pure=False), function, chunks, 4 * size)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from _ordered(pool.submit, function, chunks, 2 * workers)
