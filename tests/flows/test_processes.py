"""What users do to processes: Ctrl-C (SIGINT to the whole process group, as a terminal sends it), kill -9, two
commands at once on one run or one release; and records of servers that no longer describe them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from PIL import Image

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.release.writer import write_release
from tests.factories import scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import CURATE, SMALL, at_once, curate_in_process, finished_run, prepared_run, run_curate

pytestmark = pytest.mark.slow


def photos(folder: Path, count: int) -> Path:
    """Fresh 640x480 JPEGs (each stage has real work: nothing of them is in any cache yet)."""
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        image = Image.effect_noise((640, 480), 40 + number % 50).convert("RGB")
        image.save(folder / f"{number}.jpg", quality=85)
    return folder


@pytest.fixture(scope="module")
def many_photos(tmp_path_factory) -> Path:
    return photos(tmp_path_factory.mktemp("photos"), 300)


# A command started in the foreground of a terminal has Ctrl-C at its default. One started by a script in the
# background (`make test &`, a CI runner's shell) inherits SIGINT *ignored*, so a Ctrl-C test run from there
# would see the run finish and exit 0: reset it, then exec the command.
FOREGROUND = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"


def start(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """A command in its own process group, as a terminal starts it in the foreground."""
    return subprocess.Popen(
        [sys.executable, "-c", FOREGROUND, str(CURATE), *args],
        cwd=cwd,
        env={**os.environ, **env},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(condition, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)


def stage_working(run_dir: Path, stage: str):
    return lambda: any(run_dir.glob(f"stages/*_{stage}/work-*.partial"))


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def all_gone(processes: list[psutil.Process], seconds: float) -> bool:
    """Whether every process ended within `seconds`. One that exited but is not yet reaped (a zombie, waiting for
    init, which here may sweep late) has ended: it holds no memory, port or CPU."""
    deadline = time.monotonic() + seconds
    while True:
        _, alive = psutil.wait_procs(processes, timeout=0.2)
        alive = [process for process in alive if _running(process)]
        if not alive or time.monotonic() > deadline:
            return not alive


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_ctrl_c_in_a_worker_pool_stage_ends_the_run_at_once_and_a_rerun_resumes(
    many_photos, tmp_path, monkeypatch, prefect_env
):
    monkeypatch.delenv("PREFECT_API_URL")  # no server: a temporary one for the command (the old default, which hung)
    args = [
        "run",
        "multiverse",
        "--input",
        str(many_photos),
        "--run-id",
        "ctrl-c",
        "--jobs",
        "2",
        "--no-release",
        "--progress",
        "log",
        "--prefect-server",
        "temporary",
    ]
    run = start(args, tmp_path, {})
    run_dir = tmp_path / "outputs" / "runs" / "ctrl-c"
    wait_for(stage_working(run_dir, "image_quality"), run)
    workers = descendants(run.pid)
    assert len(workers) >= 2  # the pool is up
    interrupted_at = time.monotonic()
    os.killpg(run.pid, signal.SIGINT)
    stdout, stderr = run.communicate(timeout=30)
    assert run.returncode == 130 and time.monotonic() - interrupted_at < 10, (stdout[-2000:], stderr[-3000:])
    assert (
        "interrupted; nothing finished is lost: resume with: curate run multiverse --run-id ctrl-c --jobs 2 "
        "--no-release --prefect-server temporary"
    ) in stderr
    assert "Traceback" not in stderr
    assert all_gone(workers, 5)
    assert not list(run_dir.glob("stages/*_image_quality/*/DONE"))  # it was stopped inside the stage
    resumed = run_curate(args, tmp_path, prefect_env)  # the shared server: the rerun is not about start-up
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "15/15 stages done" in resumed.stdout and list(run_dir.glob("stages/*_image_quality/*/DONE"))


def test_a_killed_run_takes_its_temporary_prefect_server_and_its_workers_with_it(many_photos, tmp_path, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL")  # as a user without a server, asking for a temporary one
    args = [
        "run",
        "multiverse",
        "--input",
        str(many_photos),
        "--run-id",
        "killed",
        "--jobs",
        "2",
        "--progress",
        "log",
        "--prefect-server",
        "temporary",
    ]
    run = start(args, tmp_path, {})
    wait_for(stage_working(tmp_path / "outputs" / "runs" / "killed", "image_quality"), run)
    children = descendants(run.pid)
    server = [
        process
        for process in psutil.process_iter(["cmdline"])
        if f"--parent {run.pid}" in " ".join(process.info["cmdline"] or [])
    ]
    assert len(server) == 1 and len(children) >= 2
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert all_gone(children + server, 10)


def test_the_hash_command_hashes_in_threads_and_stops_on_ctrl_c(many_photos, tmp_path):
    out = tmp_path / "hashes.jsonl"
    command = start(["images", "hash", str(many_photos), "--out", str(out), "--jobs", "2"], tmp_path, {})
    # main, the progress bar's refresher and two hashing threads; no worker process a kill -9 could orphan
    wait_for(lambda: len(psutil.Process(command.pid).threads()) >= 4, command, 60)
    assert descendants(command.pid) == []
    os.killpg(command.pid, signal.SIGINT)
    _, err = command.communicate(timeout=10)
    assert command.returncode == 130
    assert err.strip().splitlines()[-1].startswith("interrupted; ") and "run it again" in err  # one line, no trace
    assert not out.exists()  # the rows hashed so far were never taken for the whole
    assert not list(tmp_path.glob("hashes.jsonl.*"))  # and their partial file is removed


def test_two_hash_commands_given_one_out_each_write_a_whole_file(many_photos, tmp_path):
    out = tmp_path / "hashes.jsonl"
    commands = [
        start(["images", "hash", str(many_photos), "--out", str(out), "--jobs", "2"], tmp_path, {}) for _ in range(2)
    ]
    assert [command.wait(120) for command in commands] == [0, 0]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    files = sorted(str(path) for path in many_photos.rglob("*") if path.is_file())
    assert [row["path"] for row in rows] == files and all(row["phash"] for row in rows)
    assert not list(tmp_path.glob("hashes.jsonl.*"))  # no partial file left behind


def test_a_second_run_of_the_same_run_id_is_refused_while_the_first_runs(prefect_env, tmp_path):
    images = photos(tmp_path / "images", 4)
    # the first run's model calls take 2 s each until the second run has been refused, so the first is still
    # running however long the second takes to start on a loaded machine; then they are answered at once
    with FakeOpenAIServer(responder=scripted_reply, latency_seconds=2.0) as server:
        args = [
            "run",
            "multiverse",
            "--input",
            str(images),
            "--run-id",
            "shared",
            "--backend",
            "openai",
            "--model",
            "fake-vlm",
            "--base-url",
            server.base_url,
            "--concurrency",
            "1",
            "--progress",
            "log",
            *[
                item
                for pair in SMALL.items()
                for field, value in pair[1].items()
                for item in ("--set", f"{pair[0]}.{field}={value}")
            ],
        ]
        first = start(args, tmp_path, prefect_env)
        wait_for(lambda: server.completions_served > 0, first)
        second = run_curate(args, tmp_path, prefect_env)
        server.latency_seconds = 0.0
        stdout, stderr = first.communicate(timeout=300)
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert [line for line in second.stderr.splitlines() if line.startswith("error:")] == [
        f"error: run shared is being run by pid {first.pid} "
        + second.stderr.split(f"pid {first.pid} ")[1].splitlines()[0]
    ]
    assert first.returncode == 0, stderr[-3000:]
    assert "release:" in stdout


def test_another_recipe_on_an_existing_run_id_is_refused(tmp_path):
    prepared_run(tmp_path, "mv", overrides=SMALL)
    result = curate_in_process(["run", "convbench", "--run-id", "mv", "--out", str(tmp_path / "out")], tmp_path)
    assert result.returncode == 2
    assert "run mv is a multiverse run; resume it with `curate run multiverse --run-id mv`" in result.stderr
    assert json.loads((tmp_path / "out" / "runs" / "mv" / "run.json").read_text())["recipe"]["name"] == "multiverse"


def test_two_releases_of_one_version_at_once_one_wins_the_other_says_so_and_stale_partials_go(tmp_path):
    run_dir = finished_run(tmp_path, "rel", overrides=SMALL)
    stale = tmp_path / "out" / "releases" / "multiverse-curated" / ".0.9.0.partial"
    stale.mkdir(parents=True)
    outcomes = at_once(lambda: write_release(run_dir, tmp_path / "out", "1.0.0"), 2)
    written = [outcome for outcome in outcomes if isinstance(outcome, Path)]
    refused = [str(outcome) for outcome in outcomes if isinstance(outcome, UserError)]
    assert len(written) == 1 and len(refused) == 1 and "already exists" in refused[0]
    assert not stale.exists() and not list(stale.parent.glob(".*.partial"))


def test_a_label_studio_record_of_another_process_is_not_that_server(tmp_path):
    other = subprocess.Popen(["sleep", "60"])
    try:
        data = tmp_path / "ls"
        data.mkdir()
        (data / "server.json").write_text(
            json.dumps({"pid": other.pid, "port": 9, "started": "1", "marker": "label-studio"})
        )
        status = curate_in_process(["ls", "status", "--data", str(data)], tmp_path)
        assert status.returncode == 1 and "not running" in status.stdout
        down = curate_in_process(["ls", "down", "--data", str(data)], tmp_path)
        assert down.returncode == 0 and "no Label Studio running" in down.stdout
        assert other.poll() is None  # not killed
    finally:
        other.kill()
        other.wait()
