"""The benchmarks' quick mode, run once each so they cannot rot: every bench/*.py but common.py and summary.py (which
writes bench/README.md from the results) runs `--quick` in a subprocess, ends well, prints its comparison with the
naive way, and leaves bench/results/ as it was."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from benchcurate.annotation.server import venv_dir
from tests.helpers import REPO

pytestmark = pytest.mark.slow
RESULTS = REPO / "bench" / "results"
SCRIPTS = sorted(path for path in (REPO / "bench").glob("*.py") if path.name not in ("common.py", "summary.py"))
# What each script prints when it compared: the naive way's row, or its ratio. A new benchmark adds its line here.
COMPARISONS = {
    "hash_throughput": ["naive", "ours_j2", "x naive (excl)"],
    "label_studio": ["naive ms/task", "ratio", "Pulled"],
    "language_id": ["naive", "ours", "same answer in 3 runs"],
    "load_test": ["1 process (--jobs 1)", "Dask local cluster", "speed-up vs 1 process", "Same sampled ids"],
    "model_layer": ["client alone", "fault-free run", "uninterrupted", "fully cached call"],
    "near_dup_quality": ["naive: one pHash", "+ verification (the default)", "Hard negatives"],
    "release_shards": ["naive (one table, one file)", "Peak memory naive / ours"],
    "search_scale": ["brute s", "x brute w1", "extrap."],
    "startup": ["no Prefect", "temporary server", "faster than"],
    "text_dedup": ["naive (MinHash per text", "Speed-up"],
    "test_time": ["before serial", "x faster", "load at start, end"],
    "eval_throughput": ["naive: one call at a time", "curate eval --concurrency", "% of ideal"],
    "dedup_commands": ["naive images", "net of start-up", "one-word near copies found"],
    "html_report": ["naive: one page with every item", "paged report (ours)", "load ms"],
    "publish_hub": ["naive: upload_file per file", "curate publish --upload", "Time naive / ours at 0 ms"],
}
PREFECT_URL_VARIABLE = "BENCH_PREFECT_API_URL"  # bench/common.py's: the Prefect server for a benchmark's runs


def results_state() -> dict[str, tuple[int, str]]:
    """Every file under bench/results/: (modification time, sha256) by path."""
    return {
        str(path.relative_to(RESULTS)): (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
        for path in sorted(RESULTS.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_quick_mode_compares_and_writes_no_result(script, prefect_env, tmp_path):
    assert script.stem in COMPARISONS, f"say in COMPARISONS what bench/{script.name} --quick prints"
    if script.stem == "label_studio" and not (venv_dir() / "bin" / "label-studio").exists():
        pytest.skip(f"no Label Studio venv at {venv_dir()} (make ls)")
    before = results_state()
    env = {**os.environ, PREFECT_URL_VARIABLE: prefect_env["PREFECT_API_URL"]}
    result = subprocess.run(
        [sys.executable, str(script), "--quick"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    missing = [text for text in COMPARISONS[script.stem] if text not in result.stdout]
    assert not missing, (missing, result.stdout[-3000:])
    assert results_state() == before
