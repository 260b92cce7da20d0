"""Ordered, bounded parallel map: the one way the pipeline spreads work over threads, processes or Dask."""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import sys
import threading
import time
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
PARENT_CHECK_SECONDS = 0.5


def die_with_parent(parent: int, on_orphaned: Callable[[], None] = lambda: os._exit(1)) -> None:
    """Call `on_orphaned` (default: exit) within half a second of process `parent` ending, however it ended
    (a SIGKILL leaves no chance to stop children, and an orphan is adopted by another process)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        on_orphaned()

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def _worker_setup(parent: int) -> None:
    """In each worker: a Ctrl-C in the terminal reaches the whole process group, and the parent alone decides
    what it means (stop the pool, exit 130); a worker never outlives its parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)


def _process_pool(workers: int) -> ProcessPoolExecutor:
    """One pool of spawned workers per size, kept for the life of this process: every process stage of a run
    reuses it instead of paying each worker's start-up (about a second of imports) again."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = _POOLS[workers] = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_setup, initargs=(os.getpid(),)
        )
        atexit.register(pool.shutdown, wait=False, cancel_futures=True)
    return pool


def stop_pool(workers: int) -> None:
    """Kill a pool's workers now (an interrupt: their chunks are redone on resume) and forget the pool."""
    pool = _POOLS.pop(workers, None)
    if pool is None:
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())  # the executor offers no public way to kill
    for process in processes:
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(timeout=1)  # reaped, so multiprocessing's exit handler has no child left to wait for


def stop_all_pools() -> None:
    """Kill every kept pool's workers: a Ctrl-C that landed outside a map (between chunks, in a Prefect thread)
    leaves the pool up, and at exit multiprocessing waits for each worker without a limit, so one worker stuck
    on a lock it held when the signal came would hold the command forever."""
    for workers in list(_POOLS):
        stop_pool(workers)


def on_dask_worker() -> bool:
    """True when this code runs inside a Dask worker (a stage task of a run on a cluster). A worker imported
    `distributed` before it ran any of our code; importing it only to ask costs 0.46 s where the dask extra is
    installed (a third of `curate text dups` on 50,000 texts), so it is not imported here."""
    if "distributed" not in sys.modules:
        return False
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return False
    return True


_TRIM_BYTES = 0  # the trim threshold set so far (0: glibc's own)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters
HEAP_BYTES = 32 * 1024 * 1024  # also the largest mmap threshold glibc takes on 64-bit


def keep_temporaries_on_heap(trim_bytes: int = HEAP_BYTES) -> None:
    """Let glibc keep numpy's short-lived arrays on the heap in the process that runs stage work.

    By default every array above 128 KB is a fresh mmap, and memory freed at the top of the heap is handed back
    at once, so each image's float temporaries (about 1 MB each for a 256-pixel thumbnail) fault in zeroed pages
    again. Dask's nanny makes it worse (MALLOC_TRIM_THRESHOLD_=65536 switches glibc's adaptive threshold off: the
    statistics ran 1.8x slower on a Dask worker). Raising both thresholds to 32 MB made the offline quality stage
    1.48x faster on 10,000 images in a plain process; a process may keep up to `trim_bytes` more (a larger value
    for work on full-size pictures, `keep_image_memory`). Not glibc: no-op."""
    global _TRIM_BYTES
    if trim_bytes <= _TRIM_BYTES:
        return
    _TRIM_BYTES = trim_bytes
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_TRIM_THRESHOLD, trim_bytes)
        libc.mallopt(M_MMAP_THRESHOLD, HEAP_BYTES)
    except (OSError, AttributeError):
        pass


IMAGE_TRIM_BYTES = 1 << 30
M_ARENA_MAX = -8  # glibc mallopt parameter


def keep_image_memory() -> None:
    """For decoding many full-size pictures in threads of this process: one malloc arena for all threads (a
    thread's own arena hands back every heap it empties), and glibc keeps up to 1 GB of freed memory for the next
    picture instead of faulting in fresh zeroed pages for every 15 MP wallpaper; the process grows no larger than
    its largest pictures in flight made it. Call it before the threads start. `curate images hash` on 1,410 real
    files, --jobs 2: 830,000 page faults and 1.9 s of system time keeping 256 MB per arena, 380,000 and 1.0 s
    with one arena keeping 1 GB (wall 7.9 s -> 7.6 s); --jobs 1: 1,289,000 faults with glibc's defaults, 183,000
    keeping 1 GB (15.4 s -> 13.2 s). Pillow's own block cache (Image.core.set_blocks_max) added faults instead.
    Not glibc: no-op."""
    keep_temporaries_on_heap(IMAGE_TRIM_BYTES)
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, 1)
    except (OSError, AttributeError):
        pass


def _dask_client():
    """The cluster's client when this code itself runs on a Dask worker (the flow's Dask task runner)."""
    if not on_dask_worker():
        return None
    from distributed import worker_client

    return worker_client()


def ordered_map(
    function: Callable[[Chunk], Result], chunks: Iterable[Chunk], mode: Mode, workers: int, window: int | None = None
) -> Iterator[Result]:
    """`map(function, chunks)` in order, spread as `mode` says; processes use a Dask cluster when on one.

    At most `window` chunks (default twice the workers) are submitted ahead of the oldest unfinished one. Model
    calls want a wide window: one item waiting out a backoff must not stall the items behind it.

    Worker processes are started with 'spawn', not 'fork': the parent runs threads (Prefect, progress bars)
    whose locks a forked child could inherit while held. They are kept for later maps (`_process_pool`)."""
    if mode == "serial":
        yield from map(function, chunks)
        return
    if mode == "threads":
        pool = ThreadPoolExecutor(workers)
        interrupted = False
        try:
            yield from _ordered(pool.submit, function, chunks, window or 2 * workers)
        except KeyboardInterrupt:
            interrupted = True  # Ctrl-C must not wait out the chunks in flight (each may make many more requests)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            if not interrupted:
                pool.shutdown(cancel_futures=True)  # other errors: what is in flight finishes (and is stored)
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
    except KeyboardInterrupt:
        stop_pool(workers)
        raise
    except BrokenProcessPool:
        _POOLS.pop(workers, None)  # a worker died (killed, out of memory): the next map starts a fresh pool
        raise
