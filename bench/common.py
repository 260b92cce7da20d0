"""Shared helpers of the benchmarks: temp HOME, the --quick mode and result files, machine description, timing,
tables, whole commands with their wall time and peak memory, the loopback OpenAI server in its own process, and a
Prefect server for a benchmark's `curate` runs."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
if str(ROOT) not in sys.path:  # `python bench/x.py` puts bench/ first on the path, not the project
    sys.path.insert(0, str(ROOT))
# A Prefect server for the `curate` runs of a benchmark (tests/test_bench.py passes the suite's shared one).
PREFECT_URL_VARIABLE = "BENCH_PREFECT_API_URL"


def isolate_home() -> Path:
    """Point HOME and the usual cache/config variables at a temp dir (inherited by subprocesses), removed at exit,
    and forget the caller's model API and Prefect server: a measurement uses only what the benchmark starts.

    Worker processes started with 'spawn' re-import this module; they find BENCH_HOME set and reuse it."""
    if os.environ.get("BENCH_HOME"):
        return Path(os.environ["BENCH_HOME"])
    home = Path(tempfile.mkdtemp(prefix="bench-home-"))
    os.environ["BENCH_HOME"] = str(home)
    for name in ("HOME", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "PREFECT_HOME"):
        os.environ[name] = str(home / name.lower()) if name != "HOME" else str(home)
    for name in ("PREFECT_API_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    atexit.register(shutil.rmtree, home, True)
    return home


isolate_home()


# --- command line and results ------------------------------------------------------------------------------------


def arguments(doc: str, quick: str) -> argparse.ArgumentParser:
    """The script's parser: its docstring as help, and --quick (`quick` says what the sizes shrink to)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{quick}; every way still compared, the tables printed, nothing written (tests/test_bench.py runs this)",
    )
    return parser


def publish(name: str, data: dict, markdown: str, quick: bool) -> None:
    """Write bench/results/<name>.json|.md; in quick mode nothing: its sizes make a smoke test, not figures."""
    if quick:
        print(f"quick mode: nothing written to {RESULTS}")
        return
    json_path, md_path = write_results(name, data, markdown)
    print(f"wrote {json_path} and {md_path}")


def demo_originals() -> list[tuple[Path, str]]:
    """The pictures the demo ships, as (path, kind): the photos ("photo") by name, then the renders in their index's
    order (kind "bar_chart", "document", ...)."""
    from benchcurate.curation.demo.corpus import shipped_index

    demo = ROOT / "curation" / "demo"
    photos = sorted(path for path in (demo / "photos").iterdir() if path.suffix.lower() in (".png", ".jpg", ".jpeg"))
    return [(path, "photo") for path in photos] + [
        (demo / "rendered" / entry["file"], entry["kind"]) for entry in shipped_index("rendered")
    ]


def scratch(prefix: str) -> Path:
    """A new folder in the temp HOME, removed with it at exit."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=isolate_home()))


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def machine(*packages: str) -> dict:
    """CPU model, cores, RAM, OS, Python and library versions (the usual ones and `packages`)."""
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
        "cpu_flags_avx2": " avx2" in flags,
        "cpu_flags_avx512f": " avx512f" in flags,
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "ram_gb": round(ram_bytes / 2**30, 1) if ram_bytes else None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": _package_version("numpy"),
        "pillow": _package_version("Pillow"),
        "imagehash": _package_version("ImageHash"),
        "psutil": _package_version("psutil"),
        **{name: _package_version(name) for name in packages},
    }


def machine_line(info: dict) -> str:
    return (
        f"{info['cpu_model']}, {info['usable_cores']} cores, {info['ram_gb']} GB RAM; {info['os']}; "
        f"Python {info['python']}, numpy {info['numpy']}, Pillow {info['pillow']}, "
        f"imagehash {info['imagehash']}"
    )


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


def per_call_us(
    function: Callable[[object], object], items: Sequence[object], repeats: int
) -> tuple[float, list[float]]:
    """Microseconds per call of `function` over `items` one at a time (median of `repeats` passes), and the
    passes' wall seconds."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for item in items:
            function(item)
        seconds.append(time.perf_counter() - start)
    return 1e6 * median(seconds) / len(items), seconds


def code_fingerprint() -> dict:
    """sha256 over the code under test (the product's layers and the fake OpenAI server), and its newest
    modification time: a long run compares them at its start and end to tell whether the code changed mid-run."""
    digest, newest = hashlib.sha256(), 0.0
    files = sorted(
        path
        for folder in ("curation", "schemas", "flows", "prompts")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".yaml") and path.is_file()
    )
    files.append(ROOT / "tests" / "fakes" / "openai_server.py")
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
        newest = max(newest, path.stat().st_mtime)
    return {
        "sha256": digest.hexdigest()[:16],
        "files": len(files),
        "newest_mtime_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(newest)),
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> tuple[str, str]:
    """(plain text, markdown) renderings of the same table."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[k]) for row in cells) for k in range(len(headers))]
    text = "\n".join("  ".join(value.rjust(widths[k]) for k, value in enumerate(row)) for row in cells)
    markdown = "\n".join(
        ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---:" for _ in headers) + "|"]
        + ["| " + " | ".join(row) + " |" for row in cells[1:]]
    )
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


# --- whole commands: wall time and the memory of their process tree ----------------------------------------------


class TreeSampler(threading.Thread):
    """Samples, every `every` s, the root processes and all their descendants: the peak of their summed RSS, of their
    summed PSS every `pss_every` samples (0: never; reading smaps is slow), the most processes at once and, with
    `role`, each process's CPU seconds under the kind of process `role(process)` names."""

    def __init__(
        self,
        roots: Sequence[int],
        every: float = 0.2,
        pss_every: int = 0,
        role: Callable[[psutil.Process], str] | None = None,
    ):
        super().__init__(daemon=True)
        self.roots, self.every, self.pss_every, self.role = list(roots), every, pss_every, role
        self.peak_rss = self.peak_pss = self.peak_processes = self.samples = 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.every)

    def sample(self) -> None:
        tree = process_tree(self.roots)
        with_pss = self.pss_every and self.samples % self.pss_every == 0
        rss = pss = 0
        for process in tree:
            try:
                rss += process.memory_info().rss
                pss += process.memory_full_info().pss if with_pss else 0
                if self.role:
                    self._count_cpu(process)
            except psutil.Error:
                pass
        self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
        self.peak_processes = max(self.peak_processes, len(tree))
        self.samples += 1

    def _count_cpu(self, process: psutil.Process) -> None:
        times = process.cpu_times()
        # the role as first recognised: an exiting process may show an empty command line
        known = self.cpu.get(process.pid, ("other", 0.0))[0]
        self.cpu[process.pid] = (known if known != "other" else self.role(process), times.user + times.system)

    def cpu_by_role(self) -> dict[str, float]:
        """CPU seconds per kind of process (as last sampled, so a process's final `every` s may be missing)."""
        roles: dict[str, float] = {}
        for role, seconds in self.cpu.values():
            roles[role] = round(roles.get(role, 0.0) + seconds, 1)
        return roles

    def __enter__(self) -> TreeSampler:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.join()


def process_tree(roots: Sequence[int]) -> list[psutil.Process]:
    """The processes `roots` that still run, each followed by its descendants."""
    tree = []
    for pid in roots:
        try:
            root = psutil.Process(pid)
            tree += [root, *root.children(recursive=True)]
        except psutil.Error:
            pass
    return tree


def tree_rss_mb(pid: int) -> float:
    """The summed RSS of a process and its descendants now, in MB."""
    total = 0
    for process in process_tree([pid]):
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return round(total / 2**20, 1)


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process so far."""
    times = psutil.Process().cpu_times()
    return times.user + times.system


@dataclass
class CommandRun:
    seconds: float
    stdout: str  # "" when the output went to a log file
    stderr: str
    tree: TreeSampler


def run_command(
    command: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    log: Path | None = None,
    also: Sequence[int] = (),
    **sampling,
) -> CommandRun:
    """A whole command, as a user runs it: its wall time, and its process tree (with the processes `also`, e.g. a
    cluster it uses) sampled by a TreeSampler(**sampling). Output to `log`, else captured; raises with the output's
    tail when the command fails."""
    with open(log, "w") if log else contextlib.nullcontext() as handle:
        start = time.perf_counter()
        process = psutil.Popen(
            command,
            env=env,
            cwd=cwd,
            text=True,
            stdout=handle or subprocess.PIPE,
            stderr=subprocess.STDOUT if handle else subprocess.PIPE,
        )
        with TreeSampler([process.pid, *also], **sampling) as tree:
            stdout, stderr = process.communicate()
            seconds = time.perf_counter() - start
    if process.returncode != 0:
        tail = log.read_text(errors="replace") if log else stderr
        raise RuntimeError(f"{' '.join(command[:4])} ... failed ({process.returncode}):\n{tail[-3000:]}")
    return CommandRun(seconds, stdout or "", stderr or "", tree)


# --- servers a benchmark uses ------------------------------------------------------------------------------------


class FakeServerProcess:
    """The loopback OpenAI server (`python -m tests.fakes.openai_server`) in its own process, so its threads do not
    take the GIL from the client measured; stats() and reset() over its control routes."""

    def __init__(self, latency: float, faults: str = "none", responder: str = "none"):
        """responder: none (generated replies), scripted (pipeline stages) or judges (`curate eval`)."""
        command = [
            sys.executable,
            "-m",
            "tests.fakes.openai_server",
            "--latency",
            str(latency),
            "--faults",
            faults,
            "--responder",
            responder,
        ]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.base_url = self.process.stdout.readline().strip()  # printed once it serves
        if not self.base_url.startswith("http"):
            self.stop()
            raise RuntimeError("the fake OpenAI server process did not start")

    def stats(self) -> dict:
        return self._call("/_fake/stats", "GET")

    def reset(self) -> None:
        self._call("/_fake/reset", "POST")

    def _call(self, path: str, method: str) -> dict:
        request = urllib.request.Request(
            self.base_url.removesuffix("/v1") + path, method=method, data=b"" if method == "POST" else None
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # loopback only
            return json.loads(response.read())

    def stop(self) -> None:
        from tests.servers import stop_process  # `tests` imports once ROOT is on the path

        stop_process(self.process)

    def __enter__(self) -> FakeServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def prefect_api(work: Path) -> Iterator[str]:
    """The API URL of a Prefect server for a benchmark's `curate` runs: the one $BENCH_PREFECT_API_URL names, else
    the product's local server of the output folder `work` (as `curate prefect up`: under work/prefect/), started
    now and stopped at the end."""
    given = os.environ.get(PREFECT_URL_VARIABLE)
    if given:
        yield given
        return
    from benchcurate.flows.prefect_server import api_url, down, ensure

    try:  # down() also when interrupted while it starts: it runs in its own session, so nothing else would stop it
        record, _ = ensure(work, idle_minutes=0)  # 0: no idle stop
        yield api_url(record)
    finally:
        down(work)


def curate_env(api_url: str | None = None, logging: str = "WARNING") -> dict[str, str]:
    """The environment of a `curate` subprocess: ours, with Prefect at `api_url` (None: none configured, so
    `curate run` uses the output folder's local server) and its log level."""
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": logging}
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env
