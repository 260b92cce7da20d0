"""Crash-safe resume: a `curate run` SIGKILLed at several points and started again with the same run id ends with
the same decisions, items and release as an uninterrupted run, skips the stages it had finished, and sends the
loopback model server no request it had already answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchcurate.curation.core.files import PARTIAL_SUFFIX
from benchcurate.curation.release.verify import diff
from tests.factories import make_image, scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import (
    MULTIVERSE_STAGES,
    SHARED_DIR,
    kill_run_when,
    release_of,
    run_curate,
    shared_once,
    stage_outputs,
    summary_lines,
)

pytestmark = pytest.mark.slow
CONCURRENCY = 2
ARGS = [
    "run",
    "multiverse",
    "--backend",
    "openai",
    "--model",
    "fake-vlm",
    "--progress",
    "log",
    "--concurrency",
    str(CONCURRENCY),
    "--set",
    "image_quality.min_quality_score=1",
    "--set",
    "category_min_size.min_items_per_category=1",
]


def chat_bodies(server: FakeOpenAIServer, since: int = 0) -> list[str]:
    return [
        json.dumps(request.body, sort_keys=True)
        for request in server.requests[since:]
        if request.path.endswith("/chat/completions")
    ]


def schema_count(server: FakeOpenAIServer, name: str) -> int:
    return sum(
        1
        for request in server.requests
        if request.path.endswith("/chat/completions")
        and (request.body.get("response_format") or {}).get("json_schema", {}).get("name") == name
    )


def finished_stages(run_dir: Path) -> set[str]:
    """Stages whose output was complete (a DONE marker beside kept.jsonl, in the stage's own folder) at this moment.

    A folder is sealed under its partial name and then renamed into place: a kill between the two leaves a DONE in
    `<key>.partial`, which is not a finished output (the resumed run redoes that stage, as it should)."""
    return {
        marker.parent.parent.name.split("_", 1)[1]
        for marker in (run_dir / "stages").glob("*/*/DONE")
        if not marker.parent.name.startswith("work-") and not marker.parent.name.endswith(PARTIAL_SUFFIX)
    }


@pytest.fixture(scope="session")
def images() -> Path:
    def make() -> str:
        folder = SHARED_DIR / "resume-images"
        for seed in range(12):
            make_image(folder / f"{seed}.png", seed)
        return str(folder)

    return Path(shared_once("resume-images", make))


@pytest.fixture(scope="session")
def uninterrupted(images, prefect_env):
    """The run the killed ones must equal, made once for every worker: (run folder, release, requests sent)."""

    def make() -> list:
        workdir = SHARED_DIR / "uninterrupted"
        workdir.mkdir()
        with FakeOpenAIServer(responder=scripted_reply, latency_seconds=0.05) as server:
            result = run_curate(
                [*ARGS, "--input", str(images), "--base-url", server.base_url, "--run-id", "whole"],
                workdir,
                prefect_env,
            )
            requests = len(chat_bodies(server))
        assert result.returncode == 0, result.stderr[-3000:]
        return [str(workdir / "outputs" / "runs" / "whole"), str(release_of(result.stdout)), requests]

    run_dir, release, requests = shared_once("uninterrupted", make)
    return Path(run_dir), Path(release), requests


KILL_POINTS = {
    # name: (kill when this holds, stage finished at the kill, stage not finished at the kill)
    "between_stages": (
        lambda server, run_dir: "image_phash" in finished_stages(run_dir),
        "image_phash",
        "image_quality",
    ),
    "in_image_quality": (
        lambda server, run_dir: schema_count(server, "QualityReply") >= 4,
        "image_near_dedup",
        "image_quality",
    ),
    "in_conversation_generate": (
        lambda server, run_dir: schema_count(server, "ConversationReply") >= 3,
        "persona_generate",
        "conversation_generate",
    ),
    # every stage done: the kill lands in the release or the report
    "after_the_last_stage": (
        lambda server, run_dir: "conversation_review" in finished_stages(run_dir),
        "conversation_review",
        None,
    ),
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_run_killed_and_resumed_equals_an_uninterrupted_one(point, images, uninterrupted, prefect_server, tmp_path):
    whole_dir, whole_release, whole_requests = uninterrupted
    env = {"PREFECT_API_URL": prefect_server, "PREFECT_LOGGING_LEVEL": "INFO"}
    run_dir = tmp_path / "outputs" / "runs" / "killed"
    with FakeOpenAIServer(responder=scripted_reply, latency_seconds=0.1) as server:
        args = [*ARGS, "--input", str(images), "--base-url", server.base_url, "--run-id", "killed"]
        reached, finished, unfinished = KILL_POINTS[point]
        killed_at = kill_run_when(args, tmp_path, env, lambda: reached(server, run_dir))
        assert killed_at is not None, f"the run ended before the kill point {point}"
        done_at_kill = finished_stages(run_dir)
        assert finished in done_at_kill and unfinished not in done_at_kill, done_at_kill  # killed where meant
        before = chat_bodies(server)
        resumed = run_curate(args, tmp_path, env)
        after = chat_bodies(server)[len(before) :]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # the same decisions and items at every stage, and the same release
    assert stage_outputs(run_dir) == stage_outputs(whole_dir)
    changes = diff(whole_release, release_of(resumed.stdout))
    assert (changes.added, changes.removed, changes.changed) == ([], [], {})
    # finished stages were skipped, not redone
    lines = summary_lines(resumed.stdout + resumed.stderr)
    assert done_at_kill and done_at_kill & set(MULTIVERSE_STAGES) <= set(lines), (done_at_kill, lines)
    assert all("skipped, already done" in lines[stage] for stage in done_at_kill & set(MULTIVERSE_STAGES)), lines
    # no kept reply was asked for again: a request holds one of the --concurrency slots until its reply is stored,
    # so only those in flight at the kill (at most --concurrency) could be
    repeated = set(before) & set(after)
    assert len(repeated) <= CONCURRENCY, len(repeated)
    assert len(before) + len(after) - len(repeated) == whole_requests
