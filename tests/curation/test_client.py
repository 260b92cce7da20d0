"""The shared async client: retries that honour the server's waits, errors sorted by whose fault they are."""

import email.utils
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchcurate.curation.core.errors import BackendUnavailable, ModelRequestRejected, UserError
from benchcurate.curation.models.client import ChatClient, parse_duration
from tests.fakes.openai_server import FakeOpenAIServer, Fault

BODY = {"model": "fake-vlm", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 32}


def client(server, attempts=4, concurrency=4, key="sk-test") -> ChatClient:
    return ChatClient(server.base_url, key, concurrency=concurrency, timeout_seconds=10, max_attempts=attempts)


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("250ms", 0.25),
        ("1h2m3.5s", 3723.5),
        ("0.5s", 0.5),
        ("", None),
        ("soon", None),
        ("5", None),
    ],
)
def test_reset_durations_are_parsed(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.slow
def test_a_retry_after_http_date_is_honoured():
    # the SDK's retry reads the date form; the date has whole seconds, so the wait lies in (1, 2] seconds
    when = email.utils.formatdate(time.time() + 2, usegmt=True)
    with FakeOpenAIServer(faults=[Fault(kind="status", status=503, retry_after=when)]) as server:
        started = time.monotonic()
        reply = client(server).create(BODY)
        assert reply.attempts == 2 and server.request_count == 2
    assert time.monotonic() - started >= 0.9


@pytest.mark.slow
def test_a_429_pauses_every_request_of_the_client_not_only_its_own():
    with FakeOpenAIServer(faults=[Fault(kind="status", status=429, retry_after="0.8")]) as server:
        shared = client(server)
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(shared.create, BODY)
            while shared.paused_for == 0:  # the client has seen the 429
                time.sleep(0.01)
            pause = shared.paused_for
            limited_at = time.monotonic()
            other = shared.create({**BODY, "seed": 7})  # not itself limited: it waits out the client's pause
            waited = time.monotonic() - limited_at
            assert first.result().attempts == 2 and other.attempts == 1
    assert 0 < pause <= 0.8 and waited >= pause - 0.05  # it waited out what was left of the pause


@pytest.mark.slow
def test_an_exhausted_request_budget_pauses_until_the_reset():
    with FakeOpenAIServer(
        rate_limit_headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "700ms"}
    ) as server:
        shared = client(server)
        shared.create(BODY)
        started = time.monotonic()
        shared.create({**BODY, "seed": 2})
    assert time.monotonic() - started >= 0.6


@pytest.mark.slow
def test_a_429_is_retried_after_the_wait_the_server_asked_for():
    with FakeOpenAIServer(faults=[Fault(kind="status", status=429, retry_after="0.4")]) as server:
        started = time.monotonic()
        reply = client(server).create(BODY)
        waited = time.monotonic() - started
        assert reply.attempts == 2 and server.request_count == 2 and reply.content
    assert waited >= 0.4  # honoured Retry-After (a lower bound: behaviour, not speed)


@pytest.mark.slow
def test_retry_after_ms_wins_over_retry_after():
    with FakeOpenAIServer(faults=[Fault(kind="status", status=429, retry_after="30", retry_after_ms="50")]) as server:
        reply = client(server).create(BODY)
    assert reply.attempts == 2


@pytest.mark.parametrize(
    "fault",
    [
        Fault(kind="status", status=500, times=2, retry_after="0"),
        Fault(kind="status", status=503, retry_after="0"),
        Fault(kind="drop_connection"),
        Fault(kind="not_a_completion", times=2),
    ],
)
@pytest.mark.slow
def test_server_errors_and_dropped_connections_are_retried(fault):
    with FakeOpenAIServer(faults=[fault]) as server:
        reply = client(server).create(BODY)
        assert reply.attempts == fault.times + 1 and server.completions_served == 1


@pytest.mark.slow
def test_a_body_that_is_not_a_completion_is_named_in_the_error():
    with FakeOpenAIServer(faults=[Fault(kind="not_a_completion", times=5)]) as server:
        with pytest.raises(BackendUnavailable, match="not a chat completion.*Injected fault"):
            client(server, attempts=2).create(BODY)
        assert server.request_count == 2 and server.completions_served == 0


@pytest.mark.slow
def test_giving_up_after_the_attempts_is_backend_unavailable_with_a_resume_hint():
    with FakeOpenAIServer(faults=[Fault(kind="status", status=500, times=10, retry_after="0")]) as server:
        with pytest.raises(BackendUnavailable, match="after 3 attempts.*resume"):
            client(server, attempts=3).create(BODY)
        assert server.request_count == 3


@pytest.mark.slow
def test_a_rejected_request_is_not_retried_and_a_bad_key_is_a_user_error():
    with FakeOpenAIServer(faults=[Fault(kind="status", status=400)], expected_api_key="right") as server:
        with pytest.raises(ModelRequestRejected, match="HTTP 400"):
            client(server, key="right").create(BODY)
        assert server.request_count == 1
        with pytest.raises(UserError, match="rejected the API key"):
            client(server, key="wrong").create(BODY)


@pytest.mark.slow
def test_one_client_serves_many_threads_with_usage_reported():
    with FakeOpenAIServer(latency_seconds=0.05) as server:
        shared = client(server, concurrency=3)
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda n: shared.create({**BODY, "seed": n}), range(24)))
        assert server.completions_served == 24 and shared.requests_sent == 24
    assert all(reply.input_tokens > 0 and reply.output_tokens > 0 for reply in replies)


@pytest.mark.slow
def test_the_concurrency_limit_holds_across_callers():
    from benchcurate.curation.models.client import shared_client

    with FakeOpenAIServer(latency_seconds=0.1) as server:
        first = shared_client(server.base_url, "k", concurrency=3, timeout_seconds=10, max_attempts=2)
        second = shared_client(server.base_url, "k", concurrency=3, timeout_seconds=10, max_attempts=2)
        assert first is second  # two stages (or Prefect tasks) in one process share one limit
        with ThreadPoolExecutor(12) as pool:
            list(pool.map(lambda n: (first if n % 2 else second).create({**BODY, "seed": n}), range(24)))
        assert server.max_in_flight == 3 and server.completions_served == 24
