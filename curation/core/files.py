"""Writing files and folders whole: readers see the old one or the new one, never half of either."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

# what every partial (a file being written, a folder being filled) ends with: sealing and cleanup pass over these
PARTIAL_SUFFIX = ".partial"


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """Yield a partial path beside `target` for the block to write; when the block ends without error it replaces
    `target` (one rename), when it raises the partial is removed and `target` is left as it was.

    The partial is named after this process and thread, so two writers of one target never share it: each writes
    a whole file and the last to finish wins."""
    partial = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_native_id()}{PARTIAL_SUFFIX}")
    try:
        yield partial
        os.replace(partial, target)
    except BaseException:
        with contextlib.suppress(OSError):  # a failed cleanup must not hide why the write failed
            partial.unlink(missing_ok=True)
        raise


def fresh_partial_folder(folder: Path) -> Path:
    """An empty folder beside `folder`, to fill and then rename into its place. Its name is fixed, so the next
    attempt clears what a killed one left: only for folders one writer fills at a time (a stage's: the run's lock)."""
    partial = folder.with_name(folder.name + PARTIAL_SUFFIX)
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    return partial


@contextlib.contextmanager
def one_at_a_time(lock: Path) -> Iterator[None]:
    """Wait until no other process or thread holds `lock` (a file, made with its folder), then hold it for the
    block. The kernel's lock (flock): a killed holder never leaves it taken."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
