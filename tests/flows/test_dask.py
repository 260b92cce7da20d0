"""Scale-out: a run on a real Dask cluster (a scheduler and two worker processes on loopback)."""

from __future__ import annotations

import math
import os

import pytest

from benchcurate.curation.engine.runner import PROCESS_CHUNK_ITEMS
from tests.factories import make_image, scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import REPO, SESSION_DIR, funnel, run_curate, stage_outputs
from tests.servers import dask_cluster, dask_scheduler, dask_workers, starts_server

pytestmark = pytest.mark.slow
WORKER_KEY = "sk-test-dask-workers-0123"  # what the workers' environment holds; no task argument carries it


@pytest.fixture(scope="module")
@starts_server
def cluster(prefect_server):
    """tcp address of a scheduler with two single-threaded worker processes; workers report to the test server."""
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": WORKER_KEY}
    with dask_cluster(env, SESSION_DIR) as (address, _):
        yield address


RUNNING = ("executing", "long-running")  # a task that opens a worker client to submit its own tasks secedes


def tasks_per_worker(address: str, marker: str) -> dict[str, int]:
    """Tasks whose key contains `marker` that each worker ran to the end (executing or long-running -> memory). A
    task stolen from a worker before it started is in that worker's log too, so counting seen keys would count it
    twice."""
    from distributed import Client

    def count(dask_worker) -> int:
        return len(
            {
                str(entry[0])
                for entry in dask_worker.state.log
                if marker in str(entry[0]) and len(entry) > 3 and entry[1] in RUNNING and entry[3] == "memory"
            }
        )

    with Client(address, timeout=30) as client:
        return client.run(count)


def test_a_run_on_the_cluster_spreads_hashing_over_both_workers_and_matches_a_local_run(
    cluster, demo_run, prefect_env, tmp_path
):
    _, local = demo_run  # the session's demo run, on this machine
    distributed = run_curate(
        [
            "run",
            "multiverse",
            "--demo",
            "--run-id",
            "dask",
            "--no-release",
            "--progress",
            "none",
            "--dask-address",
            cluster,
        ],
        tmp_path,
        prefect_env,
    )
    assert distributed.returncode == 0, distributed.stderr[-3000:]
    assert funnel(distributed.stdout) == funnel(local.stdout)
    per_worker = tasks_per_worker(cluster, "work_chunk")
    assert len(per_worker) == 2 and all(count > 0 for count in per_worker.values()), per_worker
    # hashing and every offline model stage went to the cluster, chunk by chunk
    items_in = {stage: int(row[0]) for stage, row in funnel(local.stdout).items()}
    spread = [
        "image_phash",
        "image_quality",
        "image_category",
        "persona_generate",
        "conversation_generate",
        "goal_task_label",
        "checklist_generate",
    ]
    assert sum(per_worker.values()) == sum(math.ceil(items_in[stage] / PROCESS_CHUNK_ITEMS) for stage in spread)


def test_minhash_signatures_computed_on_the_cluster_equal_local_ones(cluster):
    from distributed import Client

    from benchcurate.curation.text.minhash import MinHashParams, signatures

    texts = [f"what does panel {number} of the chart show about region {number % 7}" for number in range(5_000)]
    params = MinHashParams()
    local, _ = signatures(texts, params, None)

    def on_worker(texts):
        return signatures(texts, params, None)

    with Client(cluster, timeout=30) as client:
        before = client.run(
            lambda dask_worker: sum("_signature_chunk" in str(entry[0]) for entry in dask_worker.state.log)
        )
        remote, computed = client.submit(on_worker, texts, pure=False).result()
        after = client.run(
            lambda dask_worker: sum("_signature_chunk" in str(entry[0]) for entry in dask_worker.state.log)
        )
    assert computed == 5_000 and (remote == local).all()
    assert sum(after.values()) > sum(before.values())  # the chunks ran as tasks of the cluster


def test_model_calls_run_on_the_cluster_and_give_the_local_run_s_decisions(cluster, prefect_server, tmp_path):
    for seed in range(6):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    args = [
        "run",
        "multiverse",
        "--input",
        str(tmp_path / "images"),
        "--backend",
        "openai",
        "--model",
        "fake-vlm",
        "--no-release",
        "--progress",
        "none",
        "--set",
        "image_quality.min_quality_score=1",
        "--set",
        "category_min_size.min_items_per_category=1",
    ]
    env = {"PREFECT_API_URL": prefect_server, "OPENAI_API_KEY": WORKER_KEY}
    before = tasks_per_worker(cluster, "_stage-")
    with FakeOpenAIServer(expected_api_key=WORKER_KEY, responder=scripted_reply) as server:
        local = run_curate([*args, "--base-url", server.base_url, "--run-id", "calls"], tmp_path, env)
        assert local.returncode == 0, local.stderr[-3000:]
        sent_locally = server.completions_served
        (tmp_path / "elsewhere").mkdir()
        remote = run_curate(
            [*args, "--base-url", server.base_url, "--run-id", "calls", "--dask-address", cluster],
            tmp_path / "elsewhere",
            env,
        )
        assert remote.returncode == 0, remote.stderr[-3000:]
        sent_from_cluster = server.completions_served - sent_locally
    after = tasks_per_worker(cluster, "_stage-")
    # every stage, model stages included, ran as a task of the cluster, made each call once and decided as the
    # local run did
    decided = stage_outputs(tmp_path / "elsewhere" / "outputs" / "runs" / "calls")
    assert sum(after.values()) - sum(before.values()) == len(decided), (before, after)
    assert sent_locally > 6 and sent_from_cluster == sent_locally
    assert decided == stage_outputs(tmp_path / "outputs" / "runs" / "calls")


def test_a_cluster_without_workers_is_one_line_within_the_wait_and_the_same_command_then_resumes(
    prefect_server, tmp_path
):
    """No worker (none started yet, or every one gone): one line and exit 3 after the wait, not a silent hang; once
    workers are there, the same command runs. Skipped stages of the resumed run say so."""
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PYTHONPATH": str(REPO)}
    for seed in range(4):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    with dask_scheduler(env, tmp_path) as (address, _):
        args = [
            "run",
            "multiverse",
            "--input",
            str(tmp_path / "images"),
            "--run-id",
            "idle",
            "--no-release",
            "--progress",
            "log",
            "--dask-address",
            address,
            "--set",
            "execution.dask_wait_seconds=3",
            "--set",
            "image_quality.min_quality_score=1",
        ]
        alone = run_curate(args, tmp_path, env, timeout=120)
        assert alone.returncode == 3, alone.stderr[-3000:]
        last = alone.stderr.strip().splitlines()[-1]
        assert (
            f"the Dask scheduler at {address} has no worker (waited 3 s)" in last
            or f"the Dask cluster at {address} has had no worker for 3 s" in last
        ), last
        assert last.endswith(f"resume with: curate run multiverse --run-id idle --dask-address {address} --no-release")
        assert "Traceback" not in alone.stderr
        with dask_workers(address, env, tmp_path):
            first = run_curate(args, tmp_path, {**env, "PREFECT_LOGGING_LEVEL": "INFO"}, timeout=300)
            again = run_curate(args, tmp_path, {**env, "PREFECT_LOGGING_LEVEL": "INFO"}, timeout=300)
    assert first.returncode == 0 and again.returncode == 0, first.stderr[-3000:] + again.stderr[-3000:]
    assert "skipped, already done" not in first.stderr
    assert again.stderr.count("skipped, already done") == 15, again.stderr[-3000:]
