"""Starting and stopping local servers from tests and benchmarks: a free port, a health wait, a clean stop, a
local Dask cluster, and the tag of a fixture that starts one (the tests using it are `slow`)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

DASK = Path(sys.executable).parent / "dask"


def starts_server(fixture_function: Callable) -> Callable:
    """Tags a fixture that starts a server (Prefect, Label Studio, a loopback fake, Dask), a browser or a whole
    pipeline; put it under `@pytest.fixture`. tests/conftest.py marks every test that uses the fixture, directly or
    through another fixture, `slow`, so `make test-quick` leaves it out."""
    fixture_function.starts_server = True
    return fixture_function


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_process(process: subprocess.Popen, timeout: float = 15) -> None:
    """SIGTERM to the process group we started, then SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)


def wait_http(url: str, process: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} not healthy after {timeout}s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def dask_scheduler(env: dict[str, str], logs: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """A Dask scheduler on loopback (`dask scheduler`) with no worker yet: (tcp address, its process)."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    with open(logs / "dask-scheduler.log", "a") as log:
        scheduler = subprocess.Popen(
            [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield address, scheduler
    finally:
        stop_process(scheduler)


@contextlib.contextmanager
def dask_workers(address: str, env: dict[str, str], logs: Path, count: int = 2) -> Iterator[subprocess.Popen]:
    """`count` single-threaded worker processes joined to the scheduler at `address` (`dask worker`)."""
    with open(logs / "dask-workers.log", "a") as log:
        workers = subprocess.Popen(
            [
                str(DASK),
                "worker",
                address,
                "--nworkers",
                str(count),
                "--nthreads",
                "1",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(count, timeout=120)
        yield workers
    finally:
        stop_process(workers)


@contextlib.contextmanager
def dask_cluster(
    env: dict[str, str], logs: Path, worker_env: dict[str, str] | None = None
) -> Iterator[tuple[str, list[int]]]:
    """A Dask scheduler and two single-threaded worker processes on loopback (`dask scheduler`, `dask worker`), as
    an operator starts them, their output in `logs`; yields (tcp address, their pids) once both workers joined."""
    with (
        dask_scheduler(env, logs) as (address, scheduler),
        dask_workers(address, {**env, **(worker_env or {})}, logs) as workers,
    ):
        yield address, [workers.pid, scheduler.pid]
