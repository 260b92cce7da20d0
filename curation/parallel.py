"""Ordered, bounded parallel map: the one way the pipeline spreads work over threads, processes or Dask."""

from __future__ import annotations

import atexit
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Literal, TypeVar

Chunk = TypeVar("Chunk")
Result = TypeVar("Result")
Mode = Literal["serial", "threads", "processes"]


def _ordered(submit, function, chunks: Iterable, window: int) -> Iterator:
    """Results in input order with at most `window` chunks in flight, so memory stays bounded. If the consumer
    stops early (an error), chunks not yet started are cancelled."""
    pending: deque = deque()
    try:
        for chunk in chunks:
            pending.append(submit(function, chunk))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


_POOLS: dict[int, ProcessPoolExecutor] = {}


def _process_pool(workers: int) -> ProcessPoolExecutor:
    """One pool of spawned workers per size, kept for the life of this process: every process stage of a run
    reuses it instead of paying each worker's start-up (about a second of imports) again."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = _POOLS[workers] = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        atexit.register(pool.shutdown, wait=False, cancel_futures=True)
    return pool


def on_dask_worker() -> bool:
    """True when this code runs inside a Dask worker (a stage task of a run on a cluster)."""
    try:
        from distributed import get_worker
        get_worker()
    except (ImportError, ValueError):
        return False
    return True


_MALLOC_TUNED = False
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3   # glibc mallopt parameters
HEAP_BYTES = 32 * 1024 * 1024


def keep_temporaries_on_heap() -> None:
    """Let glibc keep numpy's short-lived arrays on the heap in the process that runs stage work.

    By default every array above 128 KB is a fresh mmap, and memory freed at the top of the heap is handed back
    at once, so each image's float temporaries (about 1 MB each for a 256-pixel thumbnail) fault in zeroed pages
    again. Dask's nanny makes it worse (MALLOC_TRIM_THRESHOLD_=65536 switches glibc's adaptive threshold off: the
    statistics ran 1.8x slower on a Dask worker). Raising both thresholds to 32 MB made the offline quality stage
    1.48x faster on 10,000 images in a plain process; a process may keep up to 32 MB more. Not glibc: no-op."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_TRIM_THRESHOLD, HEAP_BYTES)
        libc.mallopt(M_MMAP_THRESHOLD, HEAP_BYTES)
    except (OSError, AttributeError):
        pass


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
    whose locks a forked child could inherit while held. They are kept for later maps (`_process_pool`)."""
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
    pool = _process_pool(workers)
    try:
        yield from _ordered(pool.submit, function, chunks, 2 * workers)
    except BrokenProcessPool:
        _POOLS.pop(workers, None)  # a worker died (killed, out of memory): the next map starts a fresh pool
        raise
