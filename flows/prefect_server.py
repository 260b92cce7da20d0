"""The local Prefect server of an output folder: started by `curate` once, reused by every later run.

Prefect records every flow run in a server. Without one (no PREFECT_API_URL) Prefect starts a temporary server
for each process, which costs 7-9 s of every `curate run`, even on no items. So `curate run` and `curate serve`
use, in this order: the server PREFECT_API_URL names; the output folder's local server, started in the background
the first time (`<out>/prefect/`: its record `server.json` with pid and port, its log, its SQLite database and UI
files); or, with `--prefect-server temporary`, a server for this command only (`temporary`), recording into
Prefect's default database as Prefect's own temporary server does, stopped when the command ends and, should the
command be killed, by itself within a second (it watches its parent).

The local server is `prefect.server.api.server:create_app` (API, UI and services, as `prefect server start`)
under uvicorn in one process of ours, which stops itself after `idle_minutes` with no request and no open
connection (a running flow keeps a websocket open), so an idle machine does not keep it forever;
`curate prefect down` stops it at once. It runs in its own session: a Ctrl-C in a terminal does not reach it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from benchcurate.annotation.local_server import LocalServer, ServerRecord, free_port, process_start
from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.files import one_at_a_time, replacing
from benchcurate.curation.core.parallel import die_with_parent
from benchcurate.curation.core.secrets import without_secrets

FOLDER = "prefect"
DATABASE = "prefect.db"  # in FOLDER
MARKER = "benchcurate.flows.prefect_server"
DEFAULT_IDLE_MINUTES = 60.0
START_TIMEOUT_SECONDS = 90
FOLDER_CHECK_SECONDS = 5.0  # how often the server looks whether its output folder still exists


def server_folder(out_dir: Path) -> Path:
    return out_dir.resolve() / FOLDER


def local_server(out_dir: Path) -> LocalServer:
    return LocalServer(server_folder(out_dir), "server", MARKER)


def api_url(record: ServerRecord) -> str:
    return f"{record.url}/api"


def server_env(folder: Path) -> dict[str, str]:
    """The server's own settings: everything under its folder, nothing under HOME, no telemetry."""
    home = folder / "home"
    return {
        "PREFECT_HOME": str(home),
        "PREFECT_PROFILES_PATH": str(home / "profiles.toml"),
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{folder / DATABASE}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_TELEMETRY_ENABLE_RESOURCE_METRICS": "false",
    }


def _locked(folder: Path) -> contextlib.AbstractContextManager[None]:
    """One starter at a time: two commands starting at once must not start two servers."""
    return one_at_a_time(folder / "server.lock")


def healthy(record: ServerRecord) -> bool:
    from benchcurate.annotation.local_server import get

    return get(f"{api_url(record)}/health") is not None


def status(out_dir: Path) -> ServerRecord | None:
    """The folder's server when it runs and answers."""
    record = local_server(out_dir).running()
    return record if record is not None and healthy(record) else None


def ensure(
    out_dir: Path, idle_minutes: float = DEFAULT_IDLE_MINUTES, port: int | None = None, say=lambda line: None
) -> tuple[ServerRecord, bool]:
    """(the folder's server, whether it was started now): reused when it answers, else started and waited for."""
    server = local_server(out_dir)
    with _locked(server.folder):
        record = server.running()
        if record is not None and healthy(record):
            return record, False
        server.stop()  # a recorded server of ours that no longer answers
        port = port or free_port()
        log = server.folder / "server.log"
        command = [
            sys.executable,
            "-m",
            MARKER,
            "--folder",
            str(server.folder),
            "--port",
            str(port),
            "--idle-minutes",
            str(idle_minutes),
        ]
        say(f"starting a local Prefect server for {out_dir} on 127.0.0.1:{port} (once; later runs reuse it)")
        env = {name: value for name, value in without_secrets(os.environ).items() if name != "PREFECT_API_URL"}
        database = server.folder / DATABASE
        seeded = not database.exists() and seed_database(database)
        process = server.start(command, port, {**env, **server_env(server.folder)}, log, private=True)
        record = server.record()
        server.wait_healthy(process, f"{api_url(record)}/health", log, START_TIMEOUT_SECONDS)
        if not seeded:
            keep_template(database)
        return record, True


def database_template() -> Path:
    """Where an empty database that Prefect has migrated is kept for this Prefect version, so that the next new
    output folder's server starts from a copy instead of running every migration again (about 4 s of CPU, 5 s of
    a first `curate run`; bench/results/startup.md). In the user's cache (XDG_CACHE_HOME or ~/.cache)."""
    from importlib.metadata import version

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "benchcurate" / f"prefect-{version('prefect')}.db"


def _migrated(database: Path) -> bool:
    """Whether `database` is an SQLite database that Prefect has migrated (it records its migration)."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as connection:
            return connection.execute("SELECT count(*) FROM alembic_version").fetchone()[0] == 1
    except sqlite3.Error:
        return False


def seed_database(database: Path) -> bool:
    """Copy the kept template to `database` (a new server's, which does not exist yet); False when there is no
    usable template (one that is not a migrated database is removed, and the server migrates as Prefect does)."""
    template = database_template()
    if not template.exists():
        return False
    if not _migrated(template):
        with contextlib.suppress(OSError):  # a folder or a file we may not remove: left, and not used
            template.unlink(missing_ok=True)
        return False
    try:
        with replacing(database) as partial:
            shutil.copyfile(template, partial)
            partial.chmod(0o600)
    except OSError:  # an unreadable cache or a full disk: the server migrates a new database, as Prefect's own do
        return False
    return True


def keep_template(database: Path) -> None:
    """After a server migrated a new database (and before any run records in it): a consistent copy of it, as the
    template for later new folders. Best effort: without a writable cache, servers start as Prefect's own do."""
    import sqlite3

    template = database_template()
    if template.exists() or not _migrated(database):
        return
    with contextlib.suppress(OSError, sqlite3.Error):  # the partial is removed (`replacing`)
        template.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with replacing(template) as partial:
            with (
                contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as source,
                contextlib.closing(sqlite3.connect(partial)) as copy,
            ):
                source.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            partial.chmod(0o600)


def temporary(say=lambda line: None) -> ServerRecord:
    """A server for this process only. It stops by itself once this process has ended (and with it every log
    line Prefect flushes at exit, which a server stopped from an exit handler would miss) and removes its folder."""
    folder = Path(tempfile.mkdtemp(prefix="curate-prefect-"))
    server = LocalServer(folder, "server", MARKER)
    port, log = free_port(), folder / "server.log"
    command = [
        sys.executable,
        "-m",
        MARKER,
        "--folder",
        str(folder),
        "--port",
        str(port),
        "--idle-minutes",
        "0",
        "--parent",
        str(os.getpid()),
    ]
    say(f"starting a temporary Prefect server on 127.0.0.1:{port} for this command")
    env = {name: value for name, value in without_secrets(os.environ).items() if name != "PREFECT_API_URL"}
    process = server.start(command, port, env, log, private=True)
    try:
        server.wait_healthy(process, f"{api_url(server.record())}/health", log, START_TIMEOUT_SECONDS)
    except BaseException:
        server.stop(timeout=2)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return server.record()


GONE_AFTER_SECONDS = 15.0  # a server that has not answered for this long is taken for gone (not a blip)


def watch(
    url: str,
    on_gone: Callable[[], None],
    record: ServerRecord | None = None,
    interval: float = 1.0,
    grace: float = GONE_AFTER_SECONDS,
) -> threading.Event:
    """Call `on_gone` once (from a daemon thread) when the server stops: at once when the process of our own
    server (`record`) has ended, after `grace` seconds without an answer otherwise. Prefect's client would retry
    every call for over a minute and then fail with tracebacks. Set the returned event to stop watching."""
    stop = threading.Event()

    def ended() -> bool:
        started = process_start(record.pid) if record is not None else ""
        return started is None or bool(record and record.started and started != record.started)

    def loop() -> None:
        answered = time.monotonic()
        while not stop.wait(interval):
            if ended():
                break
            if healthy_url(url, timeout=interval):
                answered = time.monotonic()
            elif time.monotonic() - answered >= grace:
                break
        else:
            return
        on_gone()

    threading.Thread(target=loop, name="prefect-server-watch", daemon=True).start()
    return stop


def healthy_url(url: str, timeout: float = 2.0) -> bool:
    from benchcurate.annotation.local_server import get

    return get(f"{url.rstrip('/')}/health", timeout=timeout) is not None


@contextmanager
def prefect_server_for(
    out_dir: Path, choice: str = "local", say=lambda line: None, on_gone: Callable[[str], None] | None = None
) -> Iterator[str]:
    """This process's Prefect server for the block (yields its API URL): the one Prefect's own settings name
    (PREFECT_API_URL in the environment or .env, the active profile, prefect.toml, pyproject.toml), checked to
    answer; else the output folder's local server (`local`, started when it does not run) or a server for this
    command only (`temporary`). Processes started from here (served flow runs) get the URL in the environment.
    With `on_gone`, it is called with the URL should the server stop during the block (see `watch`)."""
    import urllib.request

    if choice not in ("local", "temporary"):
        raise UserError(f"--prefect-server must be local or temporary, not '{choice}'")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # no network here, so no telemetry
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    url = get_current_settings().api.url
    if url:
        try:
            with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=5):
                pass
        except OSError as error:
            raise UserError(
                f"no Prefect server answers at {url} (Prefect's PREFECT_API_URL setting: environment, "
                f"profile, prefect.toml or .env) ({error}); start it, or remove the setting to use the "
                f"output folder's local server"
            ) from error
        with _watched(url, None, on_gone):
            yield url
        return
    record = temporary(say) if choice == "temporary" else ensure(out_dir, say=say)[0]
    url = api_url(record)
    os.environ["PREFECT_API_URL"] = url
    with temporary_settings(updates={PREFECT_API_URL: url}), _watched(url, record, on_gone):
        yield url


@contextmanager
def _watched(url: str, record: ServerRecord | None, on_gone: Callable[[str], None] | None) -> Iterator[None]:
    stop = watch(url, lambda: on_gone(url), record) if on_gone is not None else None
    try:
        yield
    finally:
        if stop is not None:
            stop.set()


def unreachable(error: BaseException, url: str) -> bool:
    """Whether `error` is Prefect's client failing to reach the server at `url` (it stopped, or was killed)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        names = {f"{cls.__module__.split('.')[0]}.{cls.__name__}" for cls in type(error).__mro__}
        if names & {"httpx.TransportError", "httpcore.ConnectError", "httpcore.ReadError"} or isinstance(
            error, ConnectionError
        ):
            request = getattr(error, "_request", None)
            return request is None or str(request.url).startswith(url.rstrip("/"))
        error = error.__cause__ or error.__context__
    return False


def down(out_dir: Path) -> bool:
    server = local_server(out_dir)
    with _locked(server.folder):
        return server.stop()


class _IdleTracker:
    """ASGI wrapper: when the last request or connection ended, and how many are open."""

    def __init__(self, app) -> None:
        self.app = app
        self.open = 0
        self.last = time.monotonic()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        self.open += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.open -= 1
            self.last = time.monotonic()

    def idle_seconds(self) -> float:
        return 0.0 if self.open else time.monotonic() - self.last


def _serve(folder: Path, port: int, idle_minutes: float, parent: int | None) -> None:
    """The server process: Prefect's app under uvicorn, stopping itself after `idle_minutes` (0: never) or, with a
    `parent`, when that process ends."""
    import uvicorn
    from prefect.server.api.server import create_app

    tracker = _IdleTracker(create_app(final=True))
    server = uvicorn.Server(uvicorn.Config(tracker, host="127.0.0.1", port=port, lifespan="on", log_level="warning"))

    def stop_when_idle_or_orphaned() -> None:
        while not server.started and not server.should_exit:  # start-up (migrations) is not idleness
            time.sleep(0.2)
        tracker.last = time.monotonic()
        while not server.should_exit:
            time.sleep(min(FOLDER_CHECK_SECONDS, idle_minutes * 60 / 4) if idle_minutes > 0 else FOLDER_CHECK_SECONDS)
            if not (folder / "server.json").exists():  # the output folder was deleted (or the record taken away)
                print(f"{folder} is gone: stopping", flush=True)
                server.should_exit = True
            elif idle_minutes > 0 and tracker.idle_seconds() >= idle_minutes * 60:
                print(f"idle for {idle_minutes} minutes: stopping", flush=True)
                server.should_exit = True

    if parent is None:  # a temporary server stops with its parent instead
        threading.Thread(target=stop_when_idle_or_orphaned, name="idle-stop", daemon=True).start()
    if parent is not None:
        die_with_parent(parent, lambda: setattr(server, "should_exit", True))
    try:
        server.run()
    finally:
        record = LocalServer(folder, "server", MARKER).record()
        if record is not None and record.pid == os.getpid():
            (folder / "server.json").unlink(missing_ok=True)
        if parent is not None:
            shutil.rmtree(folder, ignore_errors=True)  # a temporary server's folder holds only its record and log


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {MARKER}", description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle-minutes", type=float, default=DEFAULT_IDLE_MINUTES)
    parser.add_argument(
        "--parent",
        type=int,
        help="a temporary server: stop when this process ends, and keep Prefect's own database settings",
    )
    args = parser.parse_args(argv)
    os.environ.pop("PREFECT_API_URL", None)  # this process is the server, not a client of one
    if args.parent is None:
        os.environ.update(server_env(args.folder))  # before Prefect reads its settings
    _serve(args.folder, args.port, args.idle_minutes, args.parent)


if __name__ == "__main__":
    main()
