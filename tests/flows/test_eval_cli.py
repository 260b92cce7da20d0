"""`curate eval` as a user runs it: the console script in a subprocess against the loopback server, killed halfway
and run again, and the harness exports from the command line."""

from __future__ import annotations

import json

import pytest

from benchcurate.curation.release.writer import write_release
from tests.fakes.judges import marker_world
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import SMALL, finished_run, kill_run_when, run_curate

pytestmark = pytest.mark.slow
MODELS = ("candidate-vlm", "judge-vlm")
REPLY_WINDOW = 0.25  # s: a reply answered this close to the SIGKILL may not have reached the client's cache yet
CONCURRENCY = 4


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("evalcli")
    run_dir = finished_run(tmp_path, "mv", "multiverse", images=10, overrides=SMALL)
    return write_release(run_dir, tmp_path / "out")


def eval_args(release, server, out) -> list[str]:
    return ["eval", str(release), "--model", "candidate-vlm", "--judge-model", "judge-vlm", "--base-url",
            server.base_url, "--judge-base-url", server.base_url, "--concurrency", str(CONCURRENCY), "--out", str(out)]


def test_sigkill_during_an_eval_then_the_same_command_sends_no_answered_call_again(release, tmp_path):
    with FakeOpenAIServer(responder=marker_world({"candidate-vlm": 0.5}), models=MODELS) as server:
        whole = run_curate(eval_args(release, server, tmp_path / "whole"), tmp_path)
        assert whole.returncode == 0, whole.stderr[-2000:]
        total = server.completions_served
        server.reset()
        server.latency_seconds = 0.05
        args = eval_args(release, server, tmp_path / "killed")
        killed_at = kill_run_when(args, tmp_path, {}, lambda: server.completions_served >= total // 2)
        assert killed_at is not None, "the eval ended before the kill"
        before = server.reply_log
        resumed = run_curate(args, tmp_path)
        after = server.reply_log[len(before):]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    answered = {entry.body_sha256: entry.answered_at for entry in before if entry.status == 200}
    repeated = [answered[entry.body_sha256] for entry in after if entry.body_sha256 in answered]
    assert not [at for at in repeated if at < killed_at - REPLY_WINDOW], "a reply stored before the kill was bought again"
    assert len(repeated) <= CONCURRENCY  # at most the requests in flight at the kill
    assert 0 < len(after) < total  # the rerun asked only for what was missing
    results = {name: json.loads(next((tmp_path / name).rglob("results.json")).read_text())
               for name in ("whole", "killed")}
    assert results["killed"]["score"] == results["whole"]["score"]
    assert results["killed"]["turns_judged"] == results["whole"]["turns_judged"]


def test_eval_prints_the_headline_and_the_leaderboard_path(release, tmp_path):
    with FakeOpenAIServer(responder=marker_world({"candidate-vlm": 1.0}), models=MODELS) as server:
        done = run_curate([*eval_args(release, server, tmp_path / "evals"), "--limit", "2"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "multiverse protocol on multiverse-curated 0.1.0: candidate-vlm judged by judge-vlm" in done.stdout
    assert "mean over turns of checklist completion x quality (10-100): 100.00" in done.stdout
    assert "LEADERBOARD.md" in done.stdout
