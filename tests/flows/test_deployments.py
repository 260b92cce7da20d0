"""Deployments: `curate serve` serves one per recipe, `prefect deployment run` starts a run that releases, and a
bad parameter is refused by the server instead of running with defaults."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from benchcurate.curation.recipes import available_recipes
from tests.helpers import PREFECT, funnel_artifact_of, read_prefect
from tests.servers import stop_process

pytestmark = pytest.mark.slow


def deployment_names(prefect_env: dict[str, str]) -> set[str]:
    """`flow/deployment` names the Prefect server holds (read here: a `prefect deployment inspect` per recipe
    would start four Prefect processes)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def read():
        async with get_client() as client:
            flows = {flow.id: flow.name for flow in await client.read_flows()}
            return {f"{flows.get(item.flow_id)}/{item.name}" for item in await client.read_deployments()}

    with temporary_settings({PREFECT_API_URL: prefect_env["PREFECT_API_URL"]}):
        return asyncio.run(read())


def test_served_deployment_runs_and_rejects_bad_parameters(prefect_env, tmp_path):
    env = {**os.environ, **prefect_env}
    log = tmp_path / "serve.log"
    with open(log, "w") as handle:
        serve = subprocess.Popen(
            [str(Path(PREFECT).parent / "curate"), "serve", "--out", str(tmp_path / "served")],
            cwd=tmp_path,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        for _ in range(240):  # the serve process registers its deployments, then polls for runs
            if {f"curate/{recipe}" for recipe in available_recipes()} <= deployment_names(prefect_env):
                break
            assert serve.poll() is None, log.read_text()[-3000:]
            time.sleep(0.25)
        assert {f"curate/{recipe}" for recipe in available_recipes()} <= deployment_names(prefect_env)  # one each
        bad = subprocess.run(
            [str(PREFECT), "deployment", "run", "curate/multiverse", "--param", "recipe=nope"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode != 0 and "Validation failed for field 'recipe'" in bad.stdout + bad.stderr
        good = subprocess.run(
            [
                str(PREFECT),
                "deployment",
                "run",
                "curate/multiverse",
                "--watch",
                "--watch-interval",
                "1",
                "--watch-timeout",
                "300",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=330,
        )
        assert good.returncode == 0 and "Completed" in good.stdout, good.stdout + good.stderr + log.read_text()[-3000:]
        releases = [
            path
            for path in (tmp_path / "served" / "releases" / "multiverse-curated-demo").iterdir()
            if not path.name.startswith(".")
        ]  # .lock: one writer at a time
        assert len(releases) == 1 and (releases[0] / "manifest.json").exists()
        runs, artifacts = read_prefect(prefect_env["PREFECT_API_URL"])
        deployed = [run for run in runs if run.deployment_id is not None and run.state.is_completed()]
        assert len(deployed) == 1 and "not_sampled" in funnel_artifact_of(deployed[0], artifacts).data
    finally:
        stop_process(serve)
