"""The ordered map and the allocator setting of the processes that run stage work."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from benchcurate.curation.core.parallel import ordered_map

PROBE = """
import sys
import numpy as np
from benchcurate.curation.core.parallel import keep_temporaries_on_heap
if sys.argv[1] == "tuned":
    keep_temporaries_on_heap()
array = np.ones(4 * 1024 * 1024 // 8)  # 4 MB, the size of a few image temporaries
address = array.__array_interface__["data"][0]
for line in open("/proc/self/maps"):
    span, *rest = line.split()
    low, high = (int(part, 16) for part in span.split("-"))
    if low <= address < high:
        print("heap" if rest[-1] == "[heap]" else "mmap")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator and /proc are Linux's")
def test_stage_processes_keep_large_temporaries_on_the_heap():
    def where(mode: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
        ).stdout.strip()

    assert where("default") == "mmap"  # glibc's default: a fresh mapping, zeroed pages on every touch
    assert where("tuned") == "heap"


@pytest.mark.parametrize("mode", ["serial", "threads"])
def test_ordered_map_keeps_input_order_when_later_chunks_finish_first(mode):
    def slow_first(chunk: int) -> int:
        time.sleep(0.05 if chunk % 4 == 0 else 0)
        return chunk * chunk

    assert list(ordered_map(slow_first, range(20), mode, workers=4)) == [n * n for n in range(20)]
