"""Shared helpers of the benchmarks: temp HOME, machine description, timing, medians, result files, tables."""

from __future__ import annotations

import atexit
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
if str(ROOT) not in sys.path:  # `python bench/x.py` puts bench/ first on the path, not the project
    sys.path.insert(0, str(ROOT))


def isolate_home() -> Path:
    """Point HOME and the usual cache/config variables at a temp dir (inherited by subprocesses), removed at exit.

    Worker processes started with 'spawn' re-import this module; they find BENCH_HOME set and reuse it."""
    if os.environ.get("BENCH_HOME"):
        return Path(os.environ["BENCH_HOME"])
    home = Path(tempfile.mkdtemp(prefix="bench-home-"))
    os.environ["BENCH_HOME"] = str(home)
    for name in ("HOME", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "PREFECT_HOME"):
        os.environ[name] = str(home / name.lower()) if name != "HOME" else str(home)
    atexit.register(shutil.rmtree, home, True)
    return home


isolate_home()


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine() -> dict:
    """CPU model, cores, RAM, OS, Python and library versions."""
    cpu_model, flags = "unknown", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu_model == "unknown":
                cpu_model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1]
    except OSError:
        pass
    ram_bytes = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_bytes = int(line.split()[1]) * 1024
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu_model": cpu_model,
        "cpu_flags_avx2": " avx2" in flags, "cpu_flags_avx512f": " avx512f" in flags,
        "logical_cores": os.cpu_count(), "usable_cores": usable,
        "ram_gb": round(ram_bytes / 2**30, 1) if ram_bytes else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": _package_version("numpy"), "pillow": _package_version("Pillow"),
        "imagehash": _package_version("ImageHash"), "psutil": _package_version("psutil"),
    }


def machine_line(info: dict) -> str:
    return (f"{info['cpu_model']}, {info['usable_cores']} cores, {info['ram_gb']} GB RAM; {info['os']}; "
            f"Python {info['python']}, numpy {info['numpy']}, Pillow {info['pillow']}, "
            f"imagehash {info['imagehash']}")


def timed(function: Callable[[], object]) -> tuple[float, object]:
    """Wall seconds of one call, and its result."""
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def repeat(function: Callable[[], object], times: int) -> tuple[list[float], object]:
    """Wall seconds of `times` calls, and the last result."""
    seconds, result = [], None
    for _ in range(times):
        elapsed, result = timed(function)
        seconds.append(elapsed)
    return seconds, result


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> tuple[str, str]:
    """(plain text, markdown) renderings of the same table."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[k]) for row in cells) for k in range(len(headers))]
    text = "\n".join("  ".join(value.rjust(widths[k]) for k, value in enumerate(row)) for row in cells)
    markdown = "\n".join(["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---:" for _ in headers) + "|"]
                         + ["| " + " | ".join(row) + " |" for row in cells[1:]])
    return text, markdown


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value != value:
            return "n/a"
        return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)


def write_results(name: str, data: dict, markdown: str) -> tuple[Path, Path]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path, md_path = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    json_path.write_text(json.dumps(data, indent=2, default=_jsonable) + "\n", encoding="utf-8")
    md_path.write_text(markdown.rstrip() + "\n", encoding="utf-8")
    return json_path, md_path


def _jsonable(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value)}")
