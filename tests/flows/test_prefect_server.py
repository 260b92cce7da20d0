"""The output folder's local Prefect server: started once, reused by runs, stopped on demand or when idle; and the
record every local server keeps, which never lets a reused pid pass for the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchcurate.annotation.local_server import LocalServer, ServerRecord, process_start
from benchcurate.flows import prefect_server
from tests.factories import make_image
from tests.helpers import read_prefect

pytestmark = pytest.mark.slow


@pytest.fixture
def no_configured_server(monkeypatch):
    """As a user without PREFECT_API_URL (the test session sets it to a dead address as a guard)."""
    monkeypatch.delenv("PREFECT_API_URL")
    return {name: value for name, value in os.environ.items() if name != "PREFECT_API_URL"}


def curate(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "curate"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_run_starts_the_local_server_once_later_runs_reuse_it_and_down_stops_it(no_configured_server, tmp_path):
    env, out = no_configured_server, tmp_path / "outputs"
    for seed in range(3):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    args = ["run", "multiverse", "--input", str(tmp_path / "images"), "--no-release", "--progress", "none"]
    try:
        first = curate([*args, "--run-id", "first"], tmp_path, env)
        assert first.returncode == 0, first.stderr[-3000:]
        assert "starting a local Prefect server" in first.stderr
        record = prefect_server.status(out)
        assert record is not None and (out / "prefect" / "prefect.db").exists()
        second = curate([*args, "--run-id", "second"], tmp_path, env)
        assert second.returncode == 0 and "starting a local Prefect server" not in second.stderr
        assert prefect_server.status(out) == record  # the same process answered both runs
        runs, _ = read_prefect(prefect_server.api_url(record))
        recorded = {(run.parameters.get("options") or {}).get("run_id") for run in runs if run.state.is_completed()}
        assert {"first", "second"} <= recorded  # Prefect still records every run
        status = curate(["prefect", "status"], tmp_path, env)
        assert status.returncode == 0 and f"export PREFECT_API_URL={prefect_server.api_url(record)}" in status.stdout
    finally:
        stopped = curate(["prefect", "down"], tmp_path, env)
    assert stopped.stdout.strip() == "stopped" and process_start(record.pid) is None
    assert curate(["prefect", "status"], tmp_path, env).returncode == 1
    assert not (out / "prefect" / "server.json").exists()


def test_an_idle_local_server_stops_itself(no_configured_server, tmp_path):
    record, started = prefect_server.ensure(tmp_path / "outputs", idle_minutes=0.05)  # 3 s
    assert started and prefect_server.healthy(record)
    deadline = time.monotonic() + 60
    while process_start(record.pid) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert process_start(record.pid) is None, "the server outlived its idle time"
    assert prefect_server.status(tmp_path / "outputs") is None
    assert "idle for 0.05 minutes: stopping" in (tmp_path / "outputs" / "prefect" / "server.log").read_text()


def test_a_new_folders_server_starts_from_the_kept_migrated_database_and_a_bad_one_is_replaced(
    no_configured_server, tmp_path, monkeypatch
):
    """The first server migrates and keeps its empty database; a new folder's server starts from a copy of it (a
    table planted in the kept one shows up); a kept file that is not a database is replaced, the server migrating."""
    import sqlite3

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    template = prefect_server.database_template()
    folders = [tmp_path / name / "outputs" for name in ("first", "second", "third")]
    try:
        assert prefect_server.ensure(folders[0])[1] and template.exists()
        with sqlite3.connect(template) as kept:
            assert kept.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file, nothing beside it
            kept.execute("CREATE TABLE planted (x)")
        record, started = prefect_server.ensure(folders[1])
        assert started and prefect_server.healthy(record)
        with sqlite3.connect(folders[1] / "prefect" / "prefect.db") as copied:
            assert copied.execute("SELECT count(*) FROM sqlite_master WHERE name = 'planted'").fetchone()[0] == 1
        template.write_bytes(b"not a database")
        record, started = prefect_server.ensure(folders[2])
        assert started and prefect_server.healthy(record)
    finally:
        for folder in folders:
            prefect_server.down(folder)
    with sqlite3.connect(template) as kept:  # migrated again and kept in place of the bad file
        assert kept.execute("SELECT count(*) FROM alembic_version").fetchone()[0] == 1
        assert kept.execute("SELECT count(*) FROM sqlite_master WHERE name = 'planted'").fetchone()[0] == 0


def test_a_recorded_pid_that_is_another_process_is_neither_reported_nor_signalled(tmp_path):
    other = subprocess.Popen(["sleep", "60"])
    try:
        server = LocalServer(tmp_path, "server", "label-studio")
        stale = ServerRecord(pid=other.pid, port=1, started="1", marker="label-studio")  # not its start time
        (tmp_path / "server.json").write_text(json.dumps(stale.__dict__))
        assert server.running() is None and server.stop() is False
        # the right start time but another program: not ours either
        other_program = ServerRecord(pid=other.pid, port=1, started=process_start(other.pid), marker="label-studio")
        (tmp_path / "server.json").write_text(json.dumps(other_program.__dict__))
        assert server.running() is None and server.stop() is False
        assert other.poll() is None  # never signalled
    finally:
        other.kill()
        other.wait()


def test_a_recorded_pid_whose_command_line_is_empty_is_not_the_server(tmp_path):
    """A process shows no command line while it is in the middle of exec (a race the test above once lost) and as a
    kernel thread: either way it is not the server a record names."""

    def shows_none(entry: Path) -> bool:
        try:
            return (
                entry.name.isdigit() and bool(process_start(int(entry.name))) and not (entry / "cmdline").read_bytes()
            )
        except OSError:  # gone meanwhile
            return False

    empty = [int(entry.name) for entry in Path("/proc").iterdir() if shows_none(entry)]
    if not empty:
        pytest.skip("no process with an empty command line to point a record at (no kernel threads in view)")
    server = LocalServer(tmp_path, "server", "label-studio")
    record = ServerRecord(pid=empty[0], port=1, started=process_start(empty[0]), marker="label-studio")
    (tmp_path / "server.json").write_text(json.dumps(record.__dict__))
    assert server.running() is None and server.stop() is False


def test_a_local_server_whose_output_folder_is_deleted_stops(no_configured_server, tmp_path):
    out = tmp_path / "outputs"
    record, started = prefect_server.ensure(out)  # idle for an hour before it would stop by itself
    assert started and prefect_server.healthy(record)
    import shutil

    shutil.rmtree(out)
    deadline = time.monotonic() + 4 * prefect_server.FOLDER_CHECK_SECONDS + 15
    while process_start(record.pid) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert process_start(record.pid) is None, "the server outlived its folder"


def test_a_prefect_server_killed_mid_run_is_one_line_exit_3_and_the_same_command_resumes(
    no_configured_server, tmp_path
):
    env, out = no_configured_server, tmp_path / "outputs"
    for seed in range(140):  # enough work left after pHash starts (3 s idle) for the kill to land mid-run
        make_image(tmp_path / "images" / f"{seed}.png", seed, (480, 360))
    args = [
        "run",
        "multiverse",
        "--input",
        str(tmp_path / "images"),
        "--run-id",
        "lost",
        "--no-release",
        "--progress",
        "none",
        "--jobs",
        "1",
        "--set",
        "image_quality.min_quality_score=1",
    ]
    run = subprocess.Popen(
        [str(Path(sys.executable).parent / "curate"), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not list((out / "runs" / "lost").glob("stages/*_image_phash/*")):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-3000:]
            time.sleep(0.1)
        record = prefect_server.local_server(out).record()
        os.kill(record.pid, 9)
        _, stderr = run.communicate(timeout=60)  # Prefect's own retries would take over a minute
    finally:
        run.kill()
        prefect_server.down(out)
    assert run.returncode == 3, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: the Prefect server at http://127.0.0.1:{record.port}/api stopped answering")
    assert last.endswith("resume with: curate run multiverse --run-id lost --jobs 1 --no-release")
    assert "Traceback" not in stderr
    try:
        resumed = curate(args, tmp_path, env)
    finally:
        prefect_server.down(out)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "15/15 stages done" in resumed.stdout


def test_curate_asks_prefect_for_its_settings_a_prefect_toml_included(no_configured_server, tmp_path):
    """The server named in prefect.toml (Prefect's own settings file in the working folder) records the run, as it
    does a plain Prefect flow's; no local server is started."""
    server = tmp_path / "configured"
    record, _ = prefect_server.ensure(server)
    try:
        (tmp_path / "prefect.toml").write_text(f'[api]\nurl = "{prefect_server.api_url(record)}"\n')
        for seed in range(3):
            make_image(tmp_path / "images" / f"{seed}.png", seed)
        result = curate(
            [
                "run",
                "multiverse",
                "--input",
                str(tmp_path / "images"),
                "--run-id",
                "toml",
                "--no-release",
                "--progress",
                "none",
                "--set",
                "image_quality.min_quality_score=1",
            ],
            tmp_path,
            no_configured_server,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert "starting a local Prefect server" not in result.stderr
        assert not (tmp_path / "outputs" / "prefect").exists()
        runs, _ = read_prefect(prefect_server.api_url(record))
        assert any((run.parameters.get("options") or {}).get("run_id") == "toml" for run in runs)
    finally:
        prefect_server.down(server)
