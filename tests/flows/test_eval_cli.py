"""`curate eval` as a user runs it: the console script in a subprocess against the loopback server, killed halfway
and run again, and the harness exports from the command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from benchcurate.curation.release.writer import write_release
from tests.fakes.judges import marker_world
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import CURATE, SMALL, finished_run, kill_run_when, replicated_release, run_curate

pytestmark = pytest.mark.slow
MODELS = ("candidate-vlm", "judge-vlm")
REPLY_WINDOW = 0.25  # s: a reply answered this close to the SIGKILL may not have reached the client's cache yet
CONCURRENCY = 4


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("evalcli")
    run_dir = finished_run(tmp_path, "mv", "multiverse", images=10, overrides=SMALL)
    return write_release(run_dir, tmp_path / "out")


@pytest.fixture(scope="module")
def big_release(release, tmp_path_factory):
    """200 samples: an eval that takes many seconds at 200 ms a call, to be interrupted halfway."""
    return replicated_release(release, 200, tmp_path_factory.mktemp("big"))


def eval_args(release, server, out, concurrency: int = CONCURRENCY) -> list[str]:
    return [
        "eval",
        str(release),
        "--model",
        "candidate-vlm",
        "--judge-model",
        "judge-vlm",
        "--base-url",
        server.base_url,
        "--judge-base-url",
        server.base_url,
        "--concurrency",
        str(concurrency),
        "--out",
        str(out),
    ]


def started(args: list[str], cwd) -> subprocess.Popen:
    """`curate ARGS` in its own process group, as a terminal runs it."""
    return subprocess.Popen(
        [str(CURATE), *args], cwd=cwd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("concurrency", [8, 64])
def test_ctrl_c_sends_nothing_new_exits_130_within_2_s_and_the_rerun_pays_nothing_twice(
    big_release, tmp_path, concurrency
):
    with FakeOpenAIServer(responder=marker_world({"candidate-vlm": 0.5}), models=MODELS, latency_seconds=0.2) as server:
        args = eval_args(big_release, server, tmp_path / "evals", concurrency)
        process = started(args, tmp_path)
        wait_for(lambda: server.completions_served >= 2 * concurrency)
        signalled = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches the whole group
        _, stderr = process.communicate(timeout=60)
        ended = time.monotonic()
        time.sleep(1.5)  # a request still sent would reach the server by now
        late = [r for r in server.requests if r.path.endswith("/chat/completions") and r.received_at > signalled + 1]
        paid = {e.body_sha256 for e in server.reply_log if e.status == 200 and e.answered_at < ended - REPLY_WINDOW}
        before = len(server.reply_log)
        rerun = run_curate([*args, "--limit", "20"], tmp_path)
        again = [e for e in server.reply_log[before:] if e.body_sha256 in paid]
    assert process.returncode == 130, stderr[-2000:]
    assert ended - signalled < 2.0 and "interrupted" in stderr
    assert late == [], f"{len(late)} requests reached the server more than 1 s after Ctrl-C"
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert again == [], f"the rerun bought {len(again)} replies the interrupted eval had received"


def test_a_second_identical_eval_while_one_runs_exits_2_with_one_line_and_sends_nothing(big_release, tmp_path):
    with FakeOpenAIServer(responder=marker_world({"candidate-vlm": 0.5}), models=MODELS, latency_seconds=0.2) as server:
        args = eval_args(big_release, server, tmp_path / "evals")
        first = started(args, tmp_path)  # about a minute of calls
        wait_for(lambda: server.completions_served >= 1)
        second = run_curate(args, tmp_path)
        still_running = first.poll() is None
        os.killpg(first.pid, signal.SIGINT)
        _, first_err = first.communicate(timeout=60)
        stats = server.stats()
    assert still_running, "the first eval ended before the second one started"
    assert second.returncode == 2 and len(second.stderr.strip().splitlines()) == 1, second.stderr
    assert "another curate eval" in second.stderr
    assert first.returncode == 130, first_err[-2000:]
    assert stats["ok"] == stats["ok_unique_bodies"]  # no call was sent twice


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
        after = server.reply_log[len(before) :]
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    answered = {entry.body_sha256: entry.answered_at for entry in before if entry.status == 200}
    repeated = [answered[entry.body_sha256] for entry in after if entry.body_sha256 in answered]
    assert not [at for at in repeated if at < killed_at - REPLY_WINDOW], (
        "a reply stored before the kill was bought again"
    )
    assert len(repeated) <= CONCURRENCY  # at most the requests in flight at the kill
    assert 0 < len(after) < total  # the rerun asked only for what was missing
    results = {
        name: json.loads(next((tmp_path / name).rglob("results.json")).read_text()) for name in ("whole", "killed")
    }
    assert results["killed"]["score"] == results["whole"]["score"]
    assert results["killed"]["turns_judged"] == results["whole"]["turns_judged"]


def test_eval_prints_the_headline_and_the_leaderboard_path(release, tmp_path):
    with FakeOpenAIServer(responder=marker_world({"candidate-vlm": 1.0}), models=MODELS) as server:
        done = run_curate([*eval_args(release, server, tmp_path / "evals"), "--limit", "2"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "multiverse protocol on multiverse-curated 0.1.0: candidate-vlm judged by judge-vlm" in done.stdout
    assert "mean over turns of checklist completion x quality (10-100): 100.00" in done.stdout
    assert "LEADERBOARD.md" in done.stdout
