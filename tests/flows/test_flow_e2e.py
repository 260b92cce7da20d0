"""The curate flow end to end against a real Prefect server on loopback: CLI run, resume, deployment, openai."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from benchcurate.curation.recipes import available_recipes
from tests.conftest import PREFECT, make_image, run_curate, stop_process
from tests.factories import scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.slow

STAGES = ["image_ingest", "image_exact_dedup", "image_phash", "image_near_dedup", "image_quality", "image_category",
          "category_min_size", "category_weighted_sample", "persona_generate", "conversation_generate",
          "checklist_generate", "conversation_review"]


def funnel(stdout: str) -> dict[str, list[str]]:
    """stage -> [in, removed, ...reasons..., out] from the printed funnel table."""
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) > 4 and parts[1] in STAGES and parts[0].isdigit():
            rows[parts[1]] = parts[2:]
    return rows


def summary_lines(stdout: str) -> dict[str, str]:
    """stage -> its progress summary line ('... [skipped, already done]' or '... [0.3s]')."""
    found = {}
    for line in stdout.splitlines():
        match = re.search(r"\d+\. (\w+): \d+ in", line)
        if match and match.group(1) in STAGES:
            found[match.group(1)] = line
    return found


@pytest.fixture(scope="module")
def api(prefect_server):
    return {"PREFECT_API_URL": prefect_server, "PREFECT_LOGGING_LEVEL": "INFO"}  # INFO: the progress lines


@pytest.fixture(scope="module")
def demo_run(api, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    result = run_curate(["run", "multiverse", "--run-id", "e2e", "--progress", "log"], workdir, api)
    return workdir, result


def test_demo_run_shows_every_stage_working_and_releases(demo_run):
    workdir, result = demo_run
    assert result.returncode == 0, result.stderr[-3000:]
    rows = funnel(result.stdout)
    assert list(rows) == STAGES
    for stage, reason in [("image_phash", "image_truncated"), ("image_phash", "image_empty"),
                          ("image_exact_dedup", "exact_duplicate"), ("image_near_dedup", "near_duplicate"),
                          ("image_quality", "low_quality"), ("category_weighted_sample", "not_sampled")]:
        assert reason in rows[stage], (stage, rows[stage])
    release = Path(re.search(r"release:\s+(\S+)", result.stdout).group(1))
    assert release.parent.parent == (workdir / "outputs" / "releases").resolve()
    table = pq.read_table(next((release / "data").glob("*.parquet")))
    assert table.num_rows == int(rows["conversation_review"][-1]) > 0
    assert set(table.column("review_mode").to_pylist()) == {"auto"}
    assert all(json.loads(value)["conversation"]["backend"] == "offline-heuristic"
               for value in table.column("generated_by").to_pylist())


def read_server(api: dict[str, str]):
    """Flow runs and artifacts as the Prefect server holds them."""
    from prefect.client.orchestration import get_client

    async def read():
        async with get_client() as client:
            return await client.read_flow_runs(), await client.read_artifacts()

    os.environ["PREFECT_API_URL"] = api["PREFECT_API_URL"]  # the client reads it when it is created
    try:
        return asyncio.run(read())
    finally:
        os.environ.pop("PREFECT_API_URL")


def funnel_artifact_of(run, artifacts):
    return next(a for a in artifacts if a.key == "funnel-multiverse" and a.flow_run_id == run.id)


def test_demo_run_is_in_prefect_with_the_funnel_artifact(demo_run, api):
    runs, artifacts = read_server(api)
    run = next(run for run in runs if (run.parameters.get("options") or {}).get("run_id") == "e2e")
    assert run.state.is_completed() and run.flow_id is not None
    artifact = funnel_artifact_of(run, artifacts)
    assert "| image_near_dedup |" in artifact.data and "near_duplicate" in artifact.data
    labels = next(a for a in artifacts if a.key == "labels-multiverse-image-main" and a.flow_run_id == run.id)
    assert "| after image_category |" in labels.data and "| **total** |" in labels.data
    plot = Path(labels.data.split("Plot: `")[1].split("`")[0])
    assert plot.is_file() and plot.read_bytes()[:4] == b"\x89PNG"
    inline = labels.data.split("(data:image/png;base64,")[1].split(")")[0]
    assert base64.b64decode(inline) == plot.read_bytes()  # the plot travels inside the artifact


def test_rerun_with_the_same_run_id_skips_every_stage(demo_run, api):
    workdir, first = demo_run
    again = run_curate(["run", "multiverse", "--run-id", "e2e", "--no-release", "--progress", "log"], workdir, api)
    assert again.returncode == 0, again.stderr[-3000:]
    lines = summary_lines(again.stdout + again.stderr)
    assert set(lines) == set(STAGES) and all("skipped, already done" in line for line in lines.values())
    assert funnel(again.stdout) == funnel(first.stdout)


def test_changed_threshold_reruns_only_that_stage_and_later_ones(demo_run, api):
    workdir, _ = demo_run
    changed = run_curate(["run", "multiverse", "--run-id", "e2e", "--no-release", "--progress", "log",
                          "--set", "category_weighted_sample.max_items=10"], workdir, api)
    assert changed.returncode == 0, changed.stderr[-3000:]
    lines = summary_lines(changed.stdout + changed.stderr)
    position = STAGES.index("category_weighted_sample")
    assert all("skipped" in lines[stage] for stage in STAGES[:position])
    assert all("skipped" not in lines[stage] for stage in STAGES[position:])
    assert funnel(changed.stdout)["category_weighted_sample"][-1] == "10"


def test_served_deployment_runs_and_rejects_bad_parameters(api, tmp_path):
    env = {**os.environ, **api}
    log = tmp_path / "serve.log"
    with open(log, "w") as handle:
        serve = subprocess.Popen([str(Path(PREFECT).parent / "curate"), "serve", "--out", str(tmp_path / "served")],
                                 cwd=tmp_path, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        inspect = [str(PREFECT), "deployment", "inspect", "curate/multiverse"]
        for _ in range(120):
            if subprocess.run(inspect, env=env, capture_output=True).returncode == 0:
                break
            assert serve.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        for recipe in available_recipes():  # one deployment per recipe
            assert subprocess.run([str(PREFECT), "deployment", "inspect", f"curate/{recipe}"], env=env,
                                  capture_output=True).returncode == 0, recipe
        bad = subprocess.run([str(PREFECT), "deployment", "run", "curate/multiverse", "--param", "recipe=nope"],
                             env=env, capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and "Validation failed for field 'recipe'" in bad.stdout + bad.stderr
        good = subprocess.run([str(PREFECT), "deployment", "run", "curate/multiverse", "--watch",
                               "--watch-interval", "1", "--watch-timeout", "300"],
                              env=env, capture_output=True, text=True, timeout=330)
        assert good.returncode == 0 and "Completed" in good.stdout, good.stdout + good.stderr + log.read_text()[-3000:]
        releases = list((tmp_path / "served" / "releases" / "multiverse-curated").iterdir())
        assert len(releases) == 1 and (releases[0] / "manifest.json").exists()
        runs, artifacts = read_server(api)
        deployed = [run for run in runs if run.deployment_id is not None and run.state.is_completed()]
        assert len(deployed) == 1 and "not_sampled" in funnel_artifact_of(deployed[0], artifacts).data
    finally:
        stop_process(serve)


def test_openai_backend_end_to_end_keeps_the_key_secret(api, tmp_path):
    for seed in range(5):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    secret = "sk-test-SECRET-0123456789"
    with FakeOpenAIServer(expected_api_key=secret, responder=scripted_reply) as server:
        result = run_curate(
            ["run", "multiverse", "--input", str(tmp_path / "images"), "--backend", "openai", "--base-url",
             server.base_url, "--model", "fake-vlm", "--run-id", "api", "--progress", "log",
             "--set", "image_quality.min_quality_score=1", "--set", "category_min_size.min_items_per_category=1",
             "--set", 'backend.prices={"fake-vlm": {"input_per_million": 2.5, "output_per_million": 10}}'],
            tmp_path, {**api, "OPENAI_API_KEY": secret})
        served = server.completions_served
        auth_headers = {request.headers.get("authorization") for request in server.requests}
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert served >= 5 * 4 and auth_headers == {f"Bearer {secret}"}
    manifest_path = next((tmp_path / "outputs" / "releases").rglob("manifest.json"))
    manifest = json.loads(manifest_path.read_text())
    assert manifest["backends"] == ["openai"] and manifest["offline_outputs"] is False
    assert manifest["models"] == ["fake-vlm"] and manifest["total_cost_usd"] > 0
    quality = next(stage for stage in manifest["funnel"] if stage["stage"] == "image_quality")
    assert quality["usage"]["fake-vlm"]["calls"] == 5 and quality["usage"]["fake-vlm"]["input_tokens"] > 0
    assert "new model calls cost $" in result.stdout
    conversation_decisions = next((tmp_path / "outputs" / "runs" / "api" / "stages").glob(
        "*_conversation_generate/[0-9a-f]*/decisions.jsonl"))
    rows = [json.loads(line) for line in conversation_decisions.read_text().splitlines()]
    assert rows and all(row["backend"] == "openai" and row["model"] == "fake-vlm" for row in rows)
    leaked = [path for path in (tmp_path / "outputs").rglob("*") if path.is_file() and secret.encode() in path.read_bytes()]
    assert leaked == [] and secret not in result.stdout + result.stderr
    assert secret not in prefect_logs_and_parameters(api, "api")


def prefect_logs_and_parameters(api: dict[str, str], run_id: str) -> str:
    """Everything the Prefect server stored about a run: its parameters and every log line."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async def read():
        async with get_client() as client:
            runs = [run for run in await client.read_flow_runs() if (run.parameters.get("options") or {}).get("run_id") == run_id]
            logs = await client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[r.id for r in runs])))
            return json.dumps([run.parameters for run in runs]) + "\n".join(log.message for log in logs)

    os.environ["PREFECT_API_URL"] = api["PREFECT_API_URL"]
    try:
        text = asyncio.run(read())
    finally:
        os.environ.pop("PREFECT_API_URL")
    assert "image_quality" in text  # the logs were read
    return text


def test_unreachable_model_server_fails_before_any_item_and_says_how_to_resume(api, tmp_path):
    make_image(tmp_path / "images" / "0.png", 0)
    result = run_curate(["run", "multiverse", "--input", str(tmp_path / "images"), "--backend", "openai",
                         "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--run-id", "down"], tmp_path, api)
    assert result.returncode == 3
    assert "cannot reach the model server" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "outputs" / "runs" / "down" / "stages").exists()


def test_paper_defaults_on_a_tiny_folder_explain_why_nothing_was_released(api, tmp_path):
    for seed in range(3):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    result = run_curate(["run", "multiverse", "--input", str(tmp_path / "images"), "--run-id", "tiny",
                         "--set", "image_quality.min_quality_score=1"], tmp_path, api)
    assert result.returncode == 0, result.stderr[-3000:]
    assert funnel(result.stdout)["category_min_size"][-1] == "0"
    assert "no sample survived: category_min_size removed the last ones" in result.stdout
    assert "--set category_min_size.<field>" in result.stdout and "release:" not in result.stdout
