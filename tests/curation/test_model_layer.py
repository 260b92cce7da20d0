"""The model layer inside real runs against the loopback server: cache, budget, refresh, batches, costs."""

import json
import sqlite3

import pytest

from benchcurate.curation.engine.registry import STAGES
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.models.batch import MAX_LINES_PER_FILE, PendingRequest, shards
from benchcurate.curation.models.pricing import BudgetExceeded
from benchcurate.curation.recipes import load_recipe
from benchcurate.curation.report.run import funnel_text, load_report
from tests.factories import scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import FAKE_PRICES, model_run, resolve

MODEL_STAGES = sum(STAGES[spec.stage].uses_model for spec in load_recipe("multiverse").stages)


def model_stages(report):
    return {stats.stage: stats.usage.get("fake-vlm") for stats in report.stages if stats.usage}


@pytest.mark.slow
def test_costs_are_counted_per_stage_and_a_rerun_is_free(tmp_path):
    with FakeOpenAIServer(responder=scripted_reply) as server:
        run_all(model_run(tmp_path, server, "first"))
        calls = server.completions_served
        report = load_report(tmp_path / "out" / "runs" / "first")
        usage = model_stages(report)
        assert set(usage) == {
            "image_quality",
            "image_category",
            "persona_generate",
            "conversation_generate",
            "goal_task_label",
            "checklist_generate",
        }
        assert sum(u.calls for u in usage.values()) == calls
        quality = usage["image_quality"]
        assert quality.calls == 4 and quality.input_tokens > 0
        assert quality.cost_usd == pytest.approx((quality.input_tokens * 1.0 + quality.output_tokens * 2.0) / 1e6)
        assert "new model calls cost $" in funnel_text(report)
        run_all(model_run(tmp_path, server, "second"))  # same requests under another run id
        assert server.completions_served == calls
        again = model_stages(load_report(tmp_path / "out" / "runs" / "second"))
        assert all(u.calls == 0 and u.cached_calls > 0 and u.cost_usd == 0 for u in again.values())


@pytest.mark.slow
def test_a_corrupt_cached_reply_is_asked_again_not_an_error_on_every_rerun(tmp_path, caplog):
    with FakeOpenAIServer(responder=scripted_reply) as server:
        run_all(model_run(tmp_path, server, "first"))
        calls = server.completions_served
        cache = tmp_path / "out" / "cache" / "cache.sqlite"
        with sqlite3.connect(cache) as db:  # the quality replies damaged on disk
            damaged = db.execute(
                'UPDATE entries SET value = \'{"content": "{not json"}\' WHERE namespace = '
                "'model_reply' AND value LIKE '%quality_score%'"
            ).rowcount
        assert damaged == 4
        run_all(model_run(tmp_path, server, "second"))
        usage = model_stages(load_report(tmp_path / "out" / "runs" / "second"))
    assert usage["image_quality"].calls == 4 and server.completions_served == calls + 4
    assert load_report(tmp_path / "out" / "runs" / "second").stages[4].by_reason == {}  # no item failed
    assert "a cached image_quality reply did not parse; asking the model again (`--refresh-cache`" in caplog.text


@pytest.mark.slow
def test_refresh_asks_again(tmp_path):
    with FakeOpenAIServer(responder=scripted_reply) as server:
        run_all(model_run(tmp_path, server, "a"))
        calls = server.completions_served
        config = resolve(
            "multiverse",
            tmp_path / "out",
            run_id="a",
            backend="openai",
            base_url=server.base_url,
            model="fake-vlm",
            refresh_cache=True,
            overrides={
                "image_quality": {"min_quality_score": 1},
                "category_min_size": {"min_items_per_category": 1},
                "backend": {"prices": FAKE_PRICES, "max_retries": 1},
            },
        )
        RunStore(tmp_path / "out" / "runs" / "a").save_config(config)
        run_all(tmp_path / "out" / "runs" / "a")
        assert server.completions_served == 2 * calls


@pytest.mark.slow
def test_the_budget_stops_before_it_is_exceeded_and_a_rerun_pays_nothing_twice(tmp_path):
    with FakeOpenAIServer(responder=scripted_reply) as server:
        # each call is reserved at about 0.005 USD (about 1,100 input tokens and 2,048 output tokens) and charged
        # what it used (far fewer output tokens), so how many calls fit depends on how many were in flight at once
        run_dir = model_run(tmp_path, server, "budget", max_cost_usd=0.012)
        with pytest.raises(BudgetExceeded, match="would take spending past --max-cost"):
            run_all(run_dir)
        served = {name: getattr(server, name) for name in ("prompt_tokens_served", "completion_tokens_served")}
        price = FAKE_PRICES["fake-vlm"]
        spent = (
            served["prompt_tokens_served"] * price["input_per_million"]
            + served["completion_tokens_served"] * price["output_per_million"]
        ) / 1e6
        assert server.completions_served >= 1 and 0 < spent <= 0.012
        assert RunStore(run_dir).chain()[-1].stage == "image_near_dedup"  # image_quality did not finish
        run_all(model_run(tmp_path, server, "budget", max_cost_usd=None))
        requests = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
        assert len(requests) == len({json.dumps(body, sort_keys=True) for body in requests})  # none sent twice


@pytest.mark.slow
def test_batch_mode_fills_the_cache_through_the_batch_api(tmp_path):
    with FakeOpenAIServer(responder=scripted_reply, batch_seconds=0) as server:
        run_all(model_run(tmp_path, server, "batched", batch=True, batch_poll_seconds=0.05))
        assert server.completions_served == 0 and server.batches_created == MODEL_STAGES  # one per model stage
        usage = model_stages(load_report(tmp_path / "out" / "runs" / "batched"))
        assert usage["image_quality"].batch_calls == 4 and usage["image_quality"].cached_calls == 4
        batched = usage["image_quality"]
    with FakeOpenAIServer(responder=scripted_reply) as server:
        run_all(model_run(tmp_path / "sync", server, "plain"))
        plain = model_stages(load_report(tmp_path / "sync" / "out" / "runs" / "plain"))["image_quality"]
    assert batched.cost_usd == pytest.approx(plain.cost_usd / 2)  # half price


@pytest.mark.slow
def test_a_waiting_batch_is_polled_again_not_resubmitted(tmp_path):
    with FakeOpenAIServer(responder=scripted_reply, batch_seconds=1.5) as server:
        run_dir = model_run(tmp_path, server, "wait", batch=True, batch_wait_seconds=0, batch_poll_seconds=0.05)
        done = run_all(run_dir)
        assert [stats.stage for stats in done][-1] == "image_near_dedup"
        report = load_report(run_dir)
        assert report.waiting.startswith("image_quality: 1 batch(es) still running")
        assert "waiting: image_quality" in funnel_text(report)
        model_run(tmp_path, server, "wait", batch=True, batch_wait_seconds=30, batch_poll_seconds=0.05)
        run_all(run_dir)
        assert server.batches_created == MODEL_STAGES and server.completions_served == 0
        assert load_report(run_dir).complete


@pytest.mark.slow
def test_failed_batch_lines_are_submitted_again(tmp_path):
    with FakeOpenAIServer(responder=scripted_reply, batch_seconds=0) as server:
        run_dir = model_run(tmp_path, server, "requeue", images=3, batch=True, batch_poll_seconds=0.05)
        # the first batch (image_quality) fails as a whole once; its lines go into a new batch
        server.set_batch_faults(["failed"])
        run_all(run_dir)
        assert server.batches_created == MODEL_STAGES + 1 and server.completions_served == 0
        assert load_report(run_dir).complete


def test_shards_respect_the_line_limit():
    requests = [PendingRequest(key=f"k{n}", body={"n": n}, output_schema=dict) for n in range(MAX_LINES_PER_FILE + 5)]
    files = shards(requests)
    assert [len(lines) for lines in files] == [MAX_LINES_PER_FILE, 5]
    assert json.loads(files[1][0])["custom_id"] == f"k{MAX_LINES_PER_FILE}"
