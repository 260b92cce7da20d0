"""The curate flow end to end against a real Prefect server on loopback: CLI run, resume, deployment, openai."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.factories import make_image, scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import MULTIVERSE_STAGES, funnel, funnel_artifact_of, read_prefect, run_curate, summary_lines

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(prefect_env):
    return {**prefect_env, "PREFECT_LOGGING_LEVEL": "INFO"}  # INFO: the progress lines


def test_demo_run_shows_every_stage_working_and_releases(demo_run):
    workdir, result = demo_run
    assert result.returncode == 0, result.stderr[-3000:]
    rows = funnel(result.stdout)
    assert list(rows) == MULTIVERSE_STAGES
    for stage, reason in [
        ("image_phash", "image_truncated"),
        ("image_phash", "image_empty"),
        ("image_exact_dedup", "exact_duplicate"),
        ("image_near_dedup", "near_duplicate"),
        ("image_quality", "low_quality"),
        ("category_weighted_sample", "not_sampled"),
    ]:
        assert reason in rows[stage], (stage, rows[stage])
    release = Path(re.search(r"release:\s+(\S+)", result.stdout).group(1))
    assert release.parent.parent == (workdir / "outputs" / "releases").resolve()
    table = pq.read_table(next((release / "data").glob("*.parquet")))
    assert table.num_rows == int(rows["conversation_review"][-1]) > 0
    assert set(table.column("review_mode").to_pylist()) == {"auto"}
    assert all(
        {entry["field"]: entry["backend"] for entry in value}["conversation"] == "offline-heuristic"
        for value in table.column("generated_by").to_pylist()
    )


def test_demo_run_is_in_prefect_with_the_funnel_artifact(demo_run, api):
    runs, artifacts = read_prefect(api["PREFECT_API_URL"])
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
    assert set(lines) == set(MULTIVERSE_STAGES) and all("skipped, already done" in line for line in lines.values())
    assert funnel(again.stdout) == funnel(first.stdout)


def test_changed_threshold_reruns_only_that_stage_and_later_ones(demo_run, api):
    workdir, _ = demo_run
    changed = run_curate(
        [
            "run",
            "multiverse",
            "--run-id",
            "e2e",
            "--no-release",
            "--progress",
            "log",
            "--set",
            "category_weighted_sample.max_items=10",
        ],
        workdir,
        api,
    )
    assert changed.returncode == 0, changed.stderr[-3000:]
    lines = summary_lines(changed.stdout + changed.stderr)
    position = MULTIVERSE_STAGES.index("category_weighted_sample")
    assert all("skipped" in lines[stage] for stage in MULTIVERSE_STAGES[:position])
    assert all("skipped" not in lines[stage] for stage in MULTIVERSE_STAGES[position:])
    assert funnel(changed.stdout)["category_weighted_sample"][-1] == "10"


def test_openai_backend_end_to_end_keeps_the_key_secret(api, tmp_path):
    for seed in range(5):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    secret = "sk-test-SECRET-0123456789"
    with FakeOpenAIServer(expected_api_key=secret, responder=scripted_reply) as server:
        result = run_curate(
            [
                "run",
                "multiverse",
                "--input",
                str(tmp_path / "images"),
                "--backend",
                "openai",
                "--base-url",
                server.base_url,
                "--model",
                "fake-vlm",
                "--run-id",
                "api",
                "--progress",
                "log",
                "--set",
                "image_quality.min_quality_score=1",
                "--set",
                "category_min_size.min_items_per_category=1",
                "--set",
                'backend.prices={"fake-vlm": {"input_per_million": 2.5, "output_per_million": 10}}',
            ],
            tmp_path,
            {**api, "OPENAI_API_KEY": secret},
        )
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
    conversation_decisions = next(
        (tmp_path / "outputs" / "runs" / "api" / "stages").glob("*_conversation_generate/[0-9a-f]*/decisions.jsonl")
    )
    rows = [json.loads(line) for line in conversation_decisions.read_text().splitlines()]
    assert rows and all(row["backend"] == "openai" and row["model"] == "fake-vlm" for row in rows)
    leaked = [
        path for path in (tmp_path / "outputs").rglob("*") if path.is_file() and secret.encode() in path.read_bytes()
    ]
    assert leaked == [] and secret not in result.stdout + result.stderr
    assert secret not in prefect_logs_and_parameters(api, "api")


def prefect_logs_and_parameters(api: dict[str, str], run_id: str) -> str:
    """Everything the Prefect server stored about a run: its parameters and every log line."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    async def read():
        async with get_client() as client:
            runs = [
                run
                for run in await client.read_flow_runs()
                if (run.parameters.get("options") or {}).get("run_id") == run_id
            ]
            logs = await client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[r.id for r in runs]))
            )
            return json.dumps([run.parameters for run in runs]) + "\n".join(log.message for log in logs)

    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api["PREFECT_API_URL"]}):
        text = asyncio.run(read())
    assert "image_quality" in text  # the logs were read
    return text


def test_unreachable_model_server_fails_before_any_item_and_says_how_to_resume(api, tmp_path):
    make_image(tmp_path / "images" / "0.png", 0)
    result = run_curate(
        [
            "run",
            "multiverse",
            "--input",
            str(tmp_path / "images"),
            "--backend",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--run-id",
            "down",
        ],
        tmp_path,
        api,
    )
    assert result.returncode == 3
    assert "cannot reach the model server" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "outputs" / "runs" / "down" / "stages").exists()


def test_paper_defaults_on_a_tiny_folder_explain_why_nothing_was_released(api, tmp_path):
    for seed in range(3):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    result = run_curate(
        [
            "run",
            "multiverse",
            "--input",
            str(tmp_path / "images"),
            "--run-id",
            "tiny",
            "--set",
            "image_quality.min_quality_score=1",
        ],
        tmp_path,
        api,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert funnel(result.stdout)["category_min_size"][-1] == "0"
    assert "no sample survived: category_min_size removed the last ones" in result.stdout
    assert "--set category_min_size.<field>" in result.stdout and "release:" not in result.stdout
