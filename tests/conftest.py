"""Test environment: nothing written under HOME, servers on loopback stopped by PID, and what the whole run
shares: one Prefect server and one demo run, whichever pytest-xdist worker needs them first (under a file lock),
stopped by the main process at the end."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Before anything imports Prefect, Hugging Face or matplotlib: point every tool's home into one folder per process.
SESSION_DIR = Path(tempfile.mkdtemp(prefix="curate-tests-"))
# One folder for the whole run: the main process creates it, pytest-xdist workers inherit its name (and create none:
# a default argument to setdefault would be made, and left behind, by every worker).
if not os.environ.get("CURATE_TEST_SHARED_DIR"):  # unset or empty (an empty one would be the current folder)
    os.environ["CURATE_TEST_SHARED_DIR"] = tempfile.mkdtemp(prefix="curate-tests-shared-")
ISOLATED_ENV = {
    "HOME": str(SESSION_DIR / "home"),
    "XDG_CONFIG_HOME": str(SESSION_DIR / "config"),
    "MPLCONFIGDIR": str(SESSION_DIR / "mpl"),
    "PREFECT_HOME": str(SESSION_DIR / "prefect_home"),
    "PREFECT_PROFILES_PATH": str(SESSION_DIR / "prefect_home" / "profiles.toml"),
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
    "CURATE_TEST_SESSION_DIR": str(SESSION_DIR),
    # One cache for the whole run: the migrated Prefect database new local servers start from is made once
    # (flows/prefect_server.py), not once per test folder.
    "XDG_CACHE_HOME": str(Path(os.environ["CURATE_TEST_SHARED_DIR"]) / "cache"),
    # Nothing listens on port 9 (discard): a `curate run` a test did not point at the shared Prefect server
    # (the prefect_env fixture) fails at once instead of starting a local server that outlives the test.
    "PREFECT_API_URL": "http://127.0.0.1:9/api",
}
for _name in ("home", "config", "mpl", "prefect_home", "hf_home"):
    (SESSION_DIR / _name).mkdir(parents=True, exist_ok=True)
os.environ.update(ISOLATED_ENV)
for _name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY"):
    os.environ.pop(_name, None)

import pytest  # noqa: E402

from tests.helpers import SHARED_DIR, run_curate, shared_once  # noqa: E402
from tests.servers import starts_server  # noqa: E402

PREFECT_FOLDER = SHARED_DIR / "prefect-out"  # an output folder whose local Prefect server the tests share


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


# Seconds each long module took under `make test` (4 workers, 2 shared cores; `pytest --durations`, summed per file).
# Only the order of the run depends on them: re-measure when a module grows a lot.
MODULE_SECONDS = {
    "flows/test_prefect_server.py": 292,
    "docs/test_evaluator.py": 277,
    "flows/test_resume.py": 257,
    "flows/test_dask.py": 203,
    "flows/test_flow_e2e.py": 200,
    "docs/test_readme.py": 196,
    "flows/test_hub.py": 183,
    "flows/test_eval_cli.py": 147,
    "docs/test_curator.py": 132,
    "curation/test_dedup_set.py": 132,
    "curation/test_eval.py": 128,
    "flows/test_processes.py": 123,
    "flows/test_secrets.py": 114,
    "docs/test_annotator.py": 109,
    "annotation/test_review.py": 106,
    "annotation/test_judge_review.py": 100,
    "docs/test_publisher.py": 96,
    "flows/test_bad_input.py": 91,
    "flows/test_disk_full.py": 82,
    "flows/test_user_paths.py": 82,
    "annotation/test_review_team.py": 78,
    "flows/test_confinement_and_secrets.py": 77,
    "flows/test_html_report.py": 67,
    "test_packaging.py": 50,
    "curation/test_hamming.py": 44,
    "flows/test_cli.py": 36,
    "curation/test_release_checks.py": 35,
    "flows/test_lmms_eval.py": 34,
    "flows/test_cli_truths.py": 29,
    "flows/test_deployments.py": 28,
    "annotation/test_server.py": 26,
}


def _uses_a_server(item) -> bool:
    """Whether a fixture the test uses, directly or through another, is tagged @starts_server."""
    definitions = getattr(item, "_fixtureinfo", None)
    return definitions is not None and any(
        getattr(definition.func, "starts_server", False)
        for chain in definitions.name2fixturedefs.values()
        for definition in chain
    )


def pytest_collection_modifyitems(config, items):
    """Every test using a fixture tagged @starts_server is marked `slow` (make test-quick leaves those out). Then
    the longest modules first: pytest-xdist hands out whole files in this order (--dist loadfile, so a module's
    fixtures start once), so the long ones start at once and the short ones fill the gaps at the end (then the
    other slow ones, then the rest)."""
    for item in items:
        if item.get_closest_marker("slow") is None and _uses_a_server(item):
            item.add_marker(pytest.mark.slow)
    tests = Path(__file__).parent

    def order(item) -> tuple[float, bool]:
        module = item.path.relative_to(tests).as_posix()
        return -MODULE_SECONDS.get(module, 0), item.get_closest_marker("slow") is None

    items.sort(key=order)


@contextlib.contextmanager
def _servers_refused(test: str) -> Iterator[None]:
    """While a test not marked `slow` runs (its fixtures' setup and teardown included), starting a loopback fake,
    opening any other TCP server socket in this process (uvicorn, Dask) or starting a local Label Studio or Prefect
    server fails it, saying how to mark it."""
    from benchcurate.annotation.local_server import LocalServer

    message = (
        f"{test} starts a server but is not marked slow: mark it @pytest.mark.slow, or tag the fixture that "
        f"starts the server @starts_server (tests/servers.py)"
    )
    listen = socket.socket.listen

    def guarded_listen(self, *args):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise RuntimeError(message)
        return listen(self, *args)  # a Unix socket (multiprocessing's forkserver) is no server of ours

    def refused_start(*args, **kwargs):
        raise RuntimeError(message)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "listen", guarded_listen)
        patch.setattr(LocalServer, "start", refused_start)
        for fake in ("tests.fakes.openai_server", "tests.fakes.hub_server"):  # refused here, not in their thread
            if fake in sys.modules:
                patch.setattr(sys.modules[fake], "serve_in_thread", refused_start)
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if item.get_closest_marker("slow") is not None:
        return (yield)
    with _servers_refused(item.nodeid):
        return (yield)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(SESSION_DIR, ignore_errors=True)
    if not _is_worker(session.config):  # the main process ends what the workers shared
        from benchcurate.flows.prefect_server import down

        down(PREFECT_FOLDER)
        shutil.rmtree(SHARED_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
@starts_server
def prefect_server() -> str:
    """The API URL of a real Prefect server on loopback, one for the whole run: the product's own local server
    (`curate prefect up`) of a shared output folder, started by the first worker that needs it."""
    from benchcurate.flows.prefect_server import api_url, ensure

    record, _ = ensure(PREFECT_FOLDER, idle_minutes=0)
    return api_url(record)


@pytest.fixture(scope="session")
def prefect_env(prefect_server) -> dict[str, str]:
    """The environment a `curate` subprocess needs to record its runs in the shared Prefect server."""
    return {"PREFECT_API_URL": prefect_server}


@pytest.fixture(scope="session")
def demo_run(prefect_env) -> tuple[Path, subprocess.CompletedProcess]:
    """The run's one `curate run multiverse` on the bundled demo corpus, as `make demo` runs it (its workdir, the
    completed process); end-to-end modules on any worker read it instead of each running their own."""
    workdir = SHARED_DIR / "demo"

    def run() -> list:
        workdir.mkdir()
        result = run_curate(
            ["run", "multiverse", "--demo", "--run-id", "e2e", "--progress", "log"],
            workdir,
            {**prefect_env, "PREFECT_LOGGING_LEVEL": "INFO"},
        )  # INFO: the progress lines
        return [result.args, result.returncode, result.stdout, result.stderr]

    args, code, stdout, stderr = shared_once("demo", run)
    assert code == 0, stderr[-3000:]
    return workdir, subprocess.CompletedProcess(args, code, stdout, stderr)
