"""A background server process this tool starts for an output folder (Label Studio, the local Prefect server).

Its record (`<folder>/<name>.json`: pid, port, the process's start time) says which process it is. A pid alone
proves nothing once the process is gone: the system hands the number to another process. So a recorded server
counts as running only while a process with that pid exists, started at the recorded time (Linux:
/proc/<pid>/stat), with the expected marker in its command line. Anything else is a stale record: reported as
not running, never signalled.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from benchcurate.curation.core.errors import BackendUnavailable
from benchcurate.curation.core.files import replacing

KILL_WAIT_SECONDS = 5  # after SIGKILL, for the process to be gone before stop() returns


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    port: int
    started: str  # the process's start time as the kernel counts it (clock ticks after boot), or "" elsewhere
    marker: str  # text the process's command line contains (the module or program it runs)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks after boot (field 22 of /proc/<pid>/stat); None if it is gone
    (or a zombie: exited, not yet reaped); "" where /proc cannot tell but the process exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "" if _exists(pid) else None
    fields = stat.rsplit(")", 1)[1].split()  # the fields after the command name, which may hold spaces
    return None if fields[0] == "Z" else fields[19]


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _command_line(pid: int) -> str | None:
    """The process's command line; "" when /proc shows none (gone, a kernel thread, or in the middle of exec:
    its new memory has no arguments yet); None where there is no /proc to ask."""
    if not Path("/proc/self/cmdline").exists():
        return None
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def get(url: str, timeout: float = 2.0) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # loopback only
            return response.read()
    except OSError:
        return None


class LocalServer:
    """The record of one kind of server (`name`) in one folder, and starting, checking and stopping it."""

    def __init__(self, folder: Path, name: str, marker: str):
        self.folder = folder
        self.name = name
        self.marker = marker

    @property
    def record_path(self) -> Path:
        return self.folder / f"{self.name}.json"

    def record(self) -> ServerRecord | None:
        try:
            return ServerRecord(**json.loads(self.record_path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def running(self) -> ServerRecord | None:
        """The record, if its process is the one this folder started and still runs."""
        record = self.record()
        if record is None:
            return None
        started = process_start(record.pid)
        if started is None or (record.started and started != record.started):
            return None
        command = _command_line(record.pid)
        if command is not None and self.marker not in command:
            return None
        return record

    def start(
        self,
        command: list[str],
        port: int,
        env: dict[str, str],
        log: Path,
        cwd: Path | None = None,
        private: bool = False,
    ) -> subprocess.Popen:
        """Start the server in its own session (a Ctrl-C in the terminal that started it does not reach it).

        `private`: the folder holds secrets (a database with tokens), so it is 0700 and every file the server and
        we put in it 0600, existing ones made so too."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if private:
            make_private(self.folder)
        descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(descriptor, "ab") as handle:
            process = subprocess.Popen(
                command,
                stdout=handle,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                cwd=cwd,
                umask=0o077 if private else -1,
            )
        record = ServerRecord(pid=process.pid, port=port, started=process_start(process.pid) or "", marker=self.marker)
        with replacing(self.record_path) as partial:
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(asdict(record)) + "\n")
        return process

    def wait_healthy(
        self,
        process: subprocess.Popen,
        health_url: str,
        log: Path,
        timeout: float,
        healthy=lambda body: body is not None,
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.forget()
                tail = log.read_text(encoding="utf-8", errors="replace")[-1500:] if log.exists() else ""
                raise BackendUnavailable(
                    f"the {self.name} server exited with code {process.returncode} while "
                    f"starting; its log ({log}) ends with:\n{tail}"
                )
            if healthy(get(health_url)):
                return
            time.sleep(0.2)
        self.stop()
        raise BackendUnavailable(
            f"the {self.name} server did not answer at {health_url} within {timeout:.0f} s; see {log}"
        )

    def stop(self, timeout: float = 15) -> bool:
        """SIGTERM to the server's process group, SIGKILL if it lingers; False when no server of ours runs. Returns
        once the process is gone, not when it stops answering or removes its record (it may still be exiting)."""
        record = self.running()
        if record is None:
            self.forget()
            return False
        _signal_group(record.pid, signal.SIGTERM)
        if not _gone(record, timeout):
            _signal_group(record.pid, signal.SIGKILL)
            _gone(record, KILL_WAIT_SECONDS)
        self.forget()
        return True

    def forget(self) -> None:
        self.record_path.unlink(missing_ok=True)


def _gone(record: ServerRecord, seconds: float) -> bool:
    """Whether the record's process ended (or was reaped and its pid reused) within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        started = process_start(record.pid)
        if started is None or (record.started and started != record.started):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def make_private(folder: Path) -> None:
    """The folder 0700, every folder in it 0700 and every file 0600 (only this user may read any of it)."""
    folder.chmod(0o700)
    for path in folder.rglob("*"):
        if not path.is_symlink():
            path.chmod(0o700 if path.is_dir() else 0o600)


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)  # the server leads its own session, so its group is its pid
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, signum)
