"""Test environment: nothing written under HOME, servers on loopback stopped by PID, seeded factories."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Before anything imports Prefect, Hugging Face or matplotlib: point every tool's home into one session folder.
SESSION_DIR = Path(tempfile.mkdtemp(prefix="curate-tests-"))
ISOLATED_ENV = {
    "HOME": str(SESSION_DIR / "home"),
    "XDG_CONFIG_HOME": str(SESSION_DIR / "config"),
    "MPLCONFIGDIR": str(SESSION_DIR / "mpl"),
    "PREFECT_HOME": str(SESSION_DIR / "prefect_home"),
    "PREFECT_PROFILES_PATH": str(SESSION_DIR / "prefect_home" / "profiles.toml"),
    "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{SESSION_DIR}/prefect_home/prefect.db",
    "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(SESSION_DIR / "prefect_results"),
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_UI_ENABLED": "false",
    "PREFECT_TELEMETRY_ENABLE_RESOURCE_METRICS": "false",
    "PREFECT_RUNNER_POLL_FREQUENCY": "1",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "HF_HOME": str(SESSION_DIR / "hf_home"),
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
}
for _name in ("home", "config", "mpl", "prefect_home", "hf_home"):
    (SESSION_DIR / _name).mkdir(parents=True, exist_ok=True)
os.environ.update(ISOLATED_ENV)
for _name in ("PREFECT_API_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
    os.environ.pop(_name, None)

import pytest  # noqa: E402

from tests.factories import make_image, make_sample  # noqa: E402,F401  (tests import them from here)
from tests.servers import free_port, stop_process, wait_http  # noqa: E402,F401

REPO = Path(__file__).resolve().parents[1]
CURATE = Path(sys.executable).parent / "curate"
PREFECT = Path(sys.executable).parent / "prefect"


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SESSION_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def prefect_server() -> str:
    """A real Prefect server on loopback for the whole session; its API URL."""
    port = free_port()
    log = SESSION_DIR / "prefect-server.log"
    with open(log, "w") as handle:
        process = subprocess.Popen([str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                   stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ})
    api = f"http://127.0.0.1:{port}/api"
    try:
        wait_http(f"{api}/health", process, log)
        yield api
    finally:
        stop_process(process)


def run_curate(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
               ) -> subprocess.CompletedProcess:
    """The real `curate` console script in a subprocess."""
    return subprocess.run([str(CURATE), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
