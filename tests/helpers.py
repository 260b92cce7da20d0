"""Helpers shared by test modules (test modules never import each other; conftest holds only fixtures and the
session's environment): running `curate` (and killing a run), preparing runs, reading what a run printed and stored.
bench/ imports it too, outside a test session."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from typer.testing import CliRunner

from benchcurate.curation.core.errors import validated
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.recipes import load_recipe, resolve_run
from benchcurate.schemas import RunConfig, RunOptions
from tests.factories import make_image

REPO = Path(__file__).resolve().parents[1]
CURATE = Path(sys.executable).parent / "curate"
PREFECT = Path(sys.executable).parent / "prefect"
# SESSION_DIR: this process's folder; SHARED_DIR: the whole run's, shared by pytest-xdist workers. conftest sets
# their variables before any import; they are read when asked for, so bench/ can import this module without them.
_TEST_DIRS = {"SESSION_DIR": "CURATE_TEST_SESSION_DIR", "SHARED_DIR": "CURATE_TEST_SHARED_DIR"}


def __getattr__(name: str) -> Path:
    if name not in _TEST_DIRS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _test_dir(name)


def _test_dir(name: str) -> Path:
    value = os.environ.get(_TEST_DIRS[name], "")
    if not value:  # an empty value is the current folder: a shared set would be built into the checkout
        raise RuntimeError(f"{_TEST_DIRS[name]} is not set: tests/conftest.py sets it, or set it to a folder")
    return Path(value)


# The stages of the multiverse recipe, in order, as the funnel and the progress lines name them.
MULTIVERSE_STAGES = [spec.stage for spec in load_recipe("multiverse").stages]
# Overrides that let a handful of generated pictures reach a release.
SMALL = {
    "image_quality": {"min_quality_score": 1},
    "category_min_size": {"min_items_per_category": 1},
    "category_weighted_sample": {"max_items": 100},
    "conversation_generate": {"min_utterances": 2},
}


# --- running curate ------------------------------------------------------------------------------


def run_curate(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """The real `curate` console script in a subprocess."""
    return subprocess.run(
        [str(CURATE), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def curate_in_process(
    args: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`curate ARGS` run in this process with typer's CliRunner, as run_curate would in a subprocess (the same
    .returncode, .stdout, .stderr): for commands that start no server or worker, it saves a process start and
    Prefect-free imports of about two seconds of CPU each."""
    from benchcurate.flows.cli import app

    with contextlib.chdir(cwd or Path.cwd()):
        result = CliRunner().invoke(app, args, env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["curate", *args], result.exit_code, result.stdout, result.stderr)


def kill_run_when(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    reached: Callable[[], bool],
    timeout: float = 180,
    log: Path | None = None,
    settle: float = 1.0,
) -> float | None:
    """`curate ARGS` (environment: ours updated with `env`) started in its own process group, which is SIGKILLed
    once `reached()` holds or `timeout` s passed; the time.monotonic() of the kill, or None when the run ended
    first. Its output goes to `log`, or nowhere. Returns `settle` s after the kill: requests the run had sent
    reach the servers it talked to (a loaded machine may read them late) before the caller counts them."""
    with open(log or os.devnull, "w") as output:
        process = subprocess.Popen(
            [str(CURATE), *args],
            cwd=cwd,
            env={**os.environ, **env},
            start_new_session=True,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline and not reached():
        time.sleep(0.02)
    if process.poll() is not None:
        return None
    killed_at = time.monotonic()
    os.killpg(process.pid, signal.SIGKILL)  # the group: worker processes die with the run, as in a real crash
    process.wait()
    time.sleep(settle)
    return killed_at


# --- what pytest-xdist workers share ---------------------------------------------------------------


@contextlib.contextmanager
def shared_lock(name: str) -> Iterator[None]:
    """One process at a time across pytest-xdist workers."""
    with open(_test_dir("SHARED_DIR") / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def shared_once(name: str, make: Callable[[], object]) -> object:
    """`make()` run by the first worker that asks; its JSON result is kept for every other worker."""
    record = _test_dir("SHARED_DIR") / f"{name}.json"
    with shared_lock(name):
        if not record.exists():
            record.write_text(json.dumps(make()))
    return json.loads(record.read_text())


# --- preparing runs ------------------------------------------------------------------------------


def resolve(recipe: str, out_dir: Path, **options: object) -> RunConfig:
    """A run's configuration as `curate run` resolves it, from RunOptions fields given as keywords."""
    return resolve_run(recipe, validated(RunOptions, options), out_dir)


def prepared_run(
    tmp_path: Path,
    run_id: str = "run",
    recipe: str = "multiverse",
    images: int = 6,
    input_path: Path | None = None,
    **options: object,
) -> Path:
    """A run configured as `curate run` would, on `images` generated pictures (or `input_path`); not yet run."""
    if input_path is None:
        input_path = tmp_path / "images"
        for seed in range(images):
            if not (input_path / f"{seed}.png").exists():
                make_image(input_path / f"{seed}.png", seed)
    store = RunStore(tmp_path / "out" / "runs" / run_id)
    store.save_config(resolve(recipe, tmp_path / "out", input_path=str(input_path), run_id=run_id, **options))
    return store.root


def finished_run(tmp_path: Path, run_id: str = "run", recipe: str = "multiverse", **options: object) -> Path:
    """prepared_run, then every stage in this process (no Prefect)."""
    run_dir = prepared_run(tmp_path, run_id, recipe, **options)
    run_all(run_dir)
    return run_dir


# --- reading what a run printed and stored ----------------------------------------------------------


def funnel(stdout: str) -> dict[str, list[str]]:
    """stage -> [in, removed, ...reasons..., out] from the printed funnel table."""
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) > 4 and parts[1] in MULTIVERSE_STAGES and parts[0].isdigit():
            rows[parts[1]] = parts[2:]
    return rows


def summary_lines(stdout: str) -> dict[str, str]:
    """stage -> its progress summary line ('... [skipped, already done]' or '... [0.3s]')."""
    found = {}
    for line in stdout.splitlines():
        match = re.search(r"\d+\. (\w+): \d+ in", line)
        if match and match.group(1) in MULTIVERSE_STAGES:
            found[match.group(1)] = line
    return found


def release_of(stdout: str) -> Path:
    line = next(line for line in stdout.splitlines() if line.startswith("release:"))
    return Path(line.split(None, 1)[1].strip())


def stage_outputs(run_dir: Path) -> dict[str, tuple[list[dict], list[dict]]]:
    """stage -> (decisions, kept items) as written, without the stage key (it hashes the model server's URL, and
    each run here may have its own loopback server) and with the output folder's own path taken out."""
    root = str(run_dir.parent.parent)

    def rows(path: Path) -> list[dict]:
        return [
            {key: value for key, value in json.loads(line).items() if key != "stage_key"}
            for line in path.read_text().replace(root, "<out>").splitlines()
        ]

    return {
        entry.stage: (rows(Path(entry.output_dir) / "decisions.jsonl"), rows(Path(entry.output_dir) / "kept.jsonl"))
        for entry in RunStore(run_dir).chain()
    }


def funnel_artifact_of(run, artifacts):
    """The funnel artifact the curate flow published for `run`."""
    return next(a for a in artifacts if a.key == "funnel-multiverse" and a.flow_run_id == run.id)


def read_prefect(api_url: str):
    """(flow runs, artifacts) as the Prefect server at `api_url` holds them."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def read():
        async with get_client() as client:
            return await client.read_flow_runs(), await client.read_artifacts()

    with temporary_settings({PREFECT_API_URL: api_url}):
        return asyncio.run(read())


# Prices for the loopback server's model, so runs against it count costs.
FAKE_PRICES = {"fake-vlm": {"input_per_million": 1.0, "output_per_million": 2.0}}


def model_run(tmp_path: Path, server, run_id: str, images: int = 4, **backend: object) -> Path:
    """A multiverse run on the loopback `server` (not yet run): every image kept, one retry, prices known."""
    overrides = {
        "image_quality": {"min_quality_score": 1},
        "category_min_size": {"min_items_per_category": 1},
        "backend": {"prices": FAKE_PRICES, "max_retries": 1, **backend},
    }
    return prepared_run(
        tmp_path,
        run_id,
        images=images,
        backend="openai",
        base_url=server.base_url,
        model="fake-vlm",
        overrides=overrides,
    )


def eval_releases() -> dict[str, Path]:
    """A small real release of each recipe, written once per test session by the pipeline (offline backend) and
    shared by every worker: tests copy one before changing it."""
    from benchcurate.curation.release.writer import write_release

    def make() -> dict[str, str]:
        made = {}
        for recipe in ("multiverse", "convbench", "probench", "alignmmbench"):
            folder = _test_dir("SHARED_DIR") / "eval-releases" / recipe
            run_dir = finished_run(folder, recipe, recipe, images=8, overrides=SMALL if recipe == "multiverse" else {})
            made[recipe] = str(write_release(run_dir, folder / "out"))
        return made

    return {recipe: Path(path) for recipe, path in shared_once("eval-releases", make).items()}


def replicated_release(release: Path, count: int, into: Path) -> Path:
    """A copy of a real release grown to `count` rows: its rows repeated in order, each copy with its own index
    and its user turns marked "(case k)", so every row asks its own questions. For evaluations at a size the
    pipeline would take minutes to reach."""

    def grow(originals: list[dict]) -> list[dict]:
        copies = []
        for k in range(count):
            row = json.loads(json.dumps(originals[k % len(originals)], default=lambda value: value.hex()))
            row["image"] = originals[k % len(originals)]["image"]
            row["index"] = f"{row['index']}-{k}"
            for turn in row["conversation"]:
                if turn["speaker"] == "user":
                    turn["utterance"] = f"{turn['utterance']} (case {k})"
            copies.append(row)
        return copies

    return edited_release(release, into, grow)


def edited_release(release: Path, into: Path, edit: Callable[[list[dict]], list[dict]]) -> Path:
    """A copy of a real release (one split) whose rows are `edit(rows)`, made as the writer makes a release: the
    writer's parquet schema kept, the card's and manifest's counts, the manifest's file list and SHA256SUMS
    redone, so it verifies."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from benchcurate.curation.release.writer import _checksums

    target = into / release.parent.name / release.name
    shutil.copytree(release, target)
    files = sorted((target / "data").glob("*.parquet"))
    table = pa.concat_tables(pq.read_table(path) for path in files)
    rows = edit(table.to_pylist())
    for path in files:
        path.unlink()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), target / "data" / files[0].name)
    split = files[0].name.split("-", 1)[0]
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(sample_count=len(rows), splits={split: len(rows)})
    card = (target / "README.md").read_text(encoding="utf-8")
    (target / "README.md").write_text(re.sub(r"(num_examples: )\d+", rf"\g<1>{len(rows)}", card), encoding="utf-8")
    (target / "manifest.json").unlink()
    manifest["files"] = _checksums(target)  # every file but the manifest, then the manifest itself
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    _checksums(target)
    return target


def compact(text: str) -> str:
    """Text with runs of spaces made one: a Markdown table's cells without their padding."""
    return re.sub(r" +", " ", text)


def at_once(call: Callable[[], object], times: int) -> list[object]:
    """`call()` in `times` threads released together: what each returned, or the exception it raised."""
    start = threading.Barrier(times)
    outcomes: list[object] = []

    def one() -> None:
        start.wait()
        try:
            outcomes.append(call())
        except BaseException as error:  # what a thread raised, for the caller to assert on
            outcomes.append(error)

    threads = [threading.Thread(target=one) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes
