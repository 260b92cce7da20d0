"""A local Label Studio server the tool starts and stops: `curate ls up | down | status`.

Label Studio 1.23.2 runs in its own venv (its pins conflict with Prefect's; ../shared/docs/stack.md 1.1),
headless, on SQLite, bound to 127.0.0.1. Where things live (all outside the repository's tracked files):

- the venv: `.ls/venv` in the checkout (`make ls` builds it), or `$CURATE_LS_VENV`;
- a migrated template database: `.ls/template/label_studio.sqlite3` (copied into an empty data folder, so a
  first start takes seconds instead of half a minute of migrations);
- the data folder: `outputs/label-studio/` (or `--data`), holding the database, media, the server's secret key
  (`.env`), its log, its record (`server.json`: pid, port, start time; a pid that is not that process is
  ignored, never signalled) and the admin token (`token`, mode 0600).

The admin is `LABEL_STUDIO_USERNAME` (default `admin@localhost`) with `LABEL_STUDIO_PASSWORD` (default: generated
once, stored 0600 next to the token) and the legacy API token `LABEL_STUDIO_API_KEY`, or a generated one that is
printed once, at the first start. Signup without an invite is closed. Users with their own server skip all this
and set `LABEL_STUDIO_URL` and `LABEL_STUDIO_API_KEY`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from benchcurate.annotation.local_server import LocalServer, get
from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.secrets import register, without_secrets

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PORT = 8080
HEALTH_TIMEOUT_SECONDS = 180
USERNAME = "admin@localhost"


def venv_dir() -> Path:
    return Path(os.environ.get("CURATE_LS_VENV") or REPO / ".ls" / "venv")


def template_db() -> Path:
    return REPO / ".ls" / "template" / "label_studio.sqlite3"


@dataclass(frozen=True)
class ServerInfo:
    url: str
    pid: int | None
    healthy: bool
    version: str | None
    data_dir: Path


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: a closed port in TIME_WAIT is free
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def local_server(data_dir: Path) -> LocalServer:
    """The record (`server.json`) of the Label Studio this data folder started; its process runs label-studio."""
    return LocalServer(data_dir, "server", "label-studio")


def _secret_file(path: Path, make) -> str:
    """A 0600 file's content, created with `make()` the first time."""
    if path.exists():
        return path.read_text(encoding="utf-8").strip()
    value = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    return value


def admin_token(data_dir: Path) -> tuple[str, bool]:
    """(token, created now): LABEL_STUDIO_API_KEY, else the data folder's stored token, else a new one."""
    given = os.environ.get("LABEL_STUDIO_API_KEY")
    path = data_dir / "token"
    if given:
        return given, False
    created = not path.exists()
    token = _secret_file(path, lambda: secrets.token_hex(20))
    register(token)  # redacted wherever it could be echoed, like the environment's secrets
    return token, created


def status(data_dir: Path) -> ServerInfo:
    record = local_server(data_dir).running()
    url = record.url if record else f"http://127.0.0.1:{DEFAULT_PORT}"
    healthy = record is not None and b"UP" in (get(f"{url}/health") or b"")
    version = None
    if healthy:
        body = get(f"{url}/api/version") or b""
        version = (
            next((part.split(b'"')[1].decode() for part in body.split(b'"release":')[1:2]), None)
            if b'"release":' in body
            else None
        )
    return ServerInfo(url=url, pid=record.pid if record else None, healthy=healthy, version=version, data_dir=data_dir)


def up(data_dir: Path, port: int = DEFAULT_PORT, files_root: Path | None = None) -> tuple[ServerInfo, str | None]:
    """Start the server (or find it running); returns it and the admin token when it was generated just now."""
    data_dir = data_dir.resolve()
    running = status(data_dir)
    if running.pid is not None:
        return running, None
    executable = venv_dir() / "bin" / "label-studio"
    if not executable.exists():
        raise UserError(
            f"no Label Studio venv at {venv_dir()}; run `make ls` (installs label-studio 1.23.2 in its "
            f"own venv, about 1 GB) or set CURATE_LS_VENV; or point LABEL_STUDIO_URL and "
            f"LABEL_STUDIO_API_KEY at your own server"
        )
    if not _port_free(port):
        raise UserError(f"port {port} on 127.0.0.1 is taken; pass --port with a free one, or stop what uses it")
    data_dir.mkdir(parents=True, exist_ok=True)
    if not (data_dir / "label_studio.sqlite3").exists() and template_db().exists():
        shutil.copyfile(template_db(), data_dir / "label_studio.sqlite3")
    token, created = admin_token(data_dir)
    password = os.environ.get("LABEL_STUDIO_PASSWORD") or _secret_file(
        data_dir / "password", lambda: secrets.token_urlsafe(18)
    )
    register(password)
    files_root = (files_root or data_dir / "files").resolve()
    files_root.mkdir(parents=True, exist_ok=True)
    env = {
        **without_secrets(os.environ),
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "DJANGO_DB": "sqlite",
        "LABEL_STUDIO_USERNAME": os.environ.get("LABEL_STUDIO_USERNAME", USERNAME),
        "LABEL_STUDIO_PASSWORD": password,
        "LABEL_STUDIO_USER_TOKEN": token,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(files_root),
        "LATEST_VERSION_CHECK": "false",
        "COLLECT_ANALYTICS": "false",
        "XDG_CONFIG_HOME": str(data_dir / "config"),
    }
    log = data_dir / "server.log"
    log.unlink(missing_ok=True)
    server = local_server(data_dir)
    process = server.start(
        [str(executable), "start", "--no-browser", "--internal-host", "127.0.0.1", "-p", str(port)],
        port,
        env,
        log,
        cwd=data_dir,
        private=True,
    )

    def answered(body: bytes | None) -> bool:
        if "is in use" in log.read_text(encoding="utf-8", errors="replace"):
            server.stop()
            raise UserError(f"port {port} became taken while Label Studio started; pass another --port")
        return b"UP" in (body or b"")

    server.wait_healthy(process, f"http://127.0.0.1:{port}/health", log, HEALTH_TIMEOUT_SECONDS, answered)
    return status(data_dir), token if created else None


def down(data_dir: Path, timeout: float = 30) -> bool:
    """Stop the server started for `data_dir` (SIGTERM, then SIGKILL); False when none of ours was running."""
    return local_server(data_dir.resolve()).stop(timeout)
