"""The fake OpenAI server, exercised through the official client over real HTTP on 127.0.0.1."""

from __future__ import annotations

import base64
import http.client
import json
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import openai
import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from benchcurate.schemas.replies import CategoryReply, ChecklistReply, ConversationReply, PersonaReply, QualityReply

from . import openai_server
from .openai_server import FakeOpenAIServer, Fault, instance_from_schema

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SEEDS = range(200)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Box(Strict):
    x: int = Field(ge=0, le=640)
    y: int = Field(ge=0, le=480)


class Detection(Strict):
    label: Literal["cat", "dog", "bicycle"]
    box: Box
    confidence: float = Field(ge=0, le=1)


class Photo(Strict):
    caption: str
    photographer: str | None


class SceneReply(Strict):
    photo: Photo
    detections: list[Detection] = Field(min_length=2)
    quality: int = Field(ge=1, le=5)
    note: str | None = None


def json_schema_format(model: type[BaseModel]) -> dict:
    """Return a strict json_schema response_format for a pydantic model."""
    spec = {"name": model.__name__, "schema": model.model_json_schema(), "strict": True}
    return {"type": "json_schema", "json_schema": spec}


def ask(client: openai.OpenAI, *, model: str = "fake-vlm", text: str = "Describe the scene.", **params):
    """Send a one-message chat completion request."""
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}], **params)


def fake_threads() -> list[str]:
    """Return the names of the fake server's threads still alive."""
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("fake-openai")]


@pytest.fixture(autouse=True)
def no_threads_left_behind():
    yield
    assert fake_threads() == []


@pytest.fixture
def server():
    with FakeOpenAIServer() as running:
        yield running


@pytest.fixture
def client(server):
    with openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0) as opened:
        yield opened


# ---------------------------------------------------------------------------------------------------------------
# Replies


def test_structured_output_validates_and_repeats(server, client):
    params = {
        "response_format": json_schema_format(SceneReply), "temperature": 0, "seed": 7, "max_completion_tokens": 300,
    }

    first = ask(client, **params)
    second = ask(client, **params)

    content = first.choices[0].message.content
    reply = SceneReply.model_validate_json(content)
    assert len(reply.detections) >= 2
    assert set(json.loads(content)) == set(SceneReply.model_fields)  # the optional field is present too
    assert second.choices[0].message.content == content
    assert ask(client, **{**params, "seed": 8}).choices[0].message.content != content
    assert (first.model, first.object, first.choices[0].finish_reason) == ("fake-vlm", "chat.completion", "stop")
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens > 0
    assert (server.request_count, server.completions_served) == (3, 3)


def test_plain_text_and_json_object_replies(client):
    text = ask(client, max_tokens=50).choices[0].message.content
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert text

    as_object = ask(client, response_format={"type": "json_object"}).choices[0].message.content
    assert isinstance(json.loads(as_object), dict)


def test_image_part_and_key_are_recorded_as_sent(server, client):
    data_url = "data:image/png;base64," + base64.b64encode(b"\x89PNG fake").decode()
    image = {"type": "image_url", "image_url": {"url": data_url}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is shown?"}, image]}]

    client.chat.completions.create(model="fake-vlm-mini", messages=messages)

    (recorded,) = server.requests
    assert (recorded.method, recorded.path) == ("POST", "/v1/chat/completions")
    assert recorded.body["messages"][0]["content"][1] == image
    assert recorded.headers["authorization"] == "Bearer sk-test"
    assert not [name for name, value in recorded.headers.items() if "sk-test" in value and name != "authorization"]
    assert "sk-test" not in json.dumps(recorded.body)


def test_rate_limit_headers_on_normal_replies(client):
    raw = client.chat.completions.with_raw_response.create(
        model="fake-vlm", messages=[{"role": "user", "content": "hi"}],
    )
    assert int(raw.headers["x-ratelimit-remaining-requests"]) > 0
    assert raw.headers["x-ratelimit-reset-requests"]
    assert raw.parse().choices[0].message.role == "assistant"


@pytest.mark.parametrize("url", ["data:image/png;base64,@@not base64@@", "file:///etc/passwd"])
def test_bad_image_url_is_rejected(client, url):
    image = {"type": "image_url", "image_url": {"url": url}}
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="fake-vlm", messages=[{"role": "user", "content": [image]}])


def test_schema_the_fake_cannot_fill_is_rejected(client):
    word = {"type": "string", "pattern": "^(cat|dog)$"}
    schema = {"type": "object", "properties": {"word": word}, "required": ["word"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "Pet", "schema": schema, "strict": True}}
    with pytest.raises(openai.BadRequestError, match="cat"):
        ask(client, response_format=response_format)


# ---------------------------------------------------------------------------------------------------------------
# Faults


def test_rate_limit_fault_carries_retry_after(server, client):
    server.set_faults([Fault("status", status=429, retry_after="7", retry_after_ms="7000")])

    with pytest.raises(openai.RateLimitError) as caught:
        ask(client)

    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.response.headers["retry-after-ms"] == "7000"
    assert caught.value.code == "rate_limit_exceeded"
    assert ask(client).choices[0].message.content  # the fault was used up
    assert (server.request_count, server.completions_served) == (2, 1)


def test_server_error_fault(server, client):
    server.set_faults([Fault("status", status=500)])
    with pytest.raises(openai.InternalServerError):
        ask(client)


def test_faults_are_consumed_in_order(server, client):
    server.set_faults([Fault("status", status=500, times=2), Fault("status", status=503)])
    statuses = []
    for _ in range(4):
        try:
            ask(client)
            statuses.append(200)
        except openai.APIStatusError as error:
            statuses.append(error.status_code)
    assert statuses == [500, 500, 503, 200]


def test_drop_connection_fault(server, client):
    server.set_faults([Fault("drop_connection")])

    with pytest.raises(openai.APIConnectionError):
        ask(client)

    assert ask(client).choices[0].message.content
    assert (server.request_count, server.completions_served) == (2, 1)


def test_invalid_json_fault(server, client):
    server.set_faults([Fault("invalid_json")])
    content = ask(client, response_format=json_schema_format(SceneReply)).choices[0].message.content
    with pytest.raises(json.JSONDecodeError):
        json.loads(content)


def test_schema_mismatch_fault(server, client):
    server.set_faults([Fault("schema_mismatch")])
    content = ask(client, response_format=json_schema_format(SceneReply)).choices[0].message.content
    json.loads(content)
    with pytest.raises(ValidationError):
        SceneReply.model_validate_json(content)


def test_slow_fault_delays_the_reply(server, client):
    server.set_faults([Fault("slow", delay_seconds=0.3)])
    started = time.monotonic()
    ask(client)
    assert time.monotonic() - started >= 0.3


def test_latency_applies_to_every_completion():
    with FakeOpenAIServer(latency_seconds=0.15) as slow_server:
        with openai.OpenAI(base_url=slow_server.base_url, api_key="sk-test", max_retries=0) as slow_client:
            started = time.monotonic()
            ask(slow_client)
            ask(slow_client)
            assert time.monotonic() - started >= 0.3


def test_periodic_fault_hits_every_third_request(server, client):
    server.set_faults([Fault("status", status=503, every=3)])
    failed = []
    for number in range(1, 10):
        try:
            ask(client)
        except openai.InternalServerError:
            failed.append(number)
    assert failed == [3, 6, 9]
    assert server.completions_served == 6


# ---------------------------------------------------------------------------------------------------------------
# Keys, models and paths


def test_wrong_api_key_is_rejected():
    with FakeOpenAIServer(expected_api_key="sk-right") as keyed:
        with openai.OpenAI(base_url=keyed.base_url, api_key="sk-wrong", max_retries=0) as wrong:
            with pytest.raises(openai.AuthenticationError) as caught:
                ask(wrong)
        assert caught.value.code == "invalid_api_key"
        with openai.OpenAI(base_url=keyed.base_url, api_key="sk-right", max_retries=0) as right:
            assert ask(right).choices[0].message.content
        assert (keyed.request_count, keyed.completions_served) == (2, 1)


def test_unknown_model_is_not_found(client):
    with pytest.raises(openai.NotFoundError) as caught:
        ask(client, model="gpt-imaginary")
    assert caught.value.code == "model_not_found"


def test_models_are_listed_and_retrieved(client):
    assert [model.id for model in client.models.list()] == ["fake-vlm", "fake-vlm-mini"]
    assert client.models.retrieve("fake-vlm-mini").id == "fake-vlm-mini"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-imaginary")


def test_unknown_path_is_a_json_404(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request("GET", "/v1/embeddings/nowhere")
        response = connection.getresponse()
        assert response.status == 404
        assert json.loads(response.read())["error"]["type"] == "invalid_request_error"
    finally:
        connection.close()


def test_stop_frees_the_port_and_threads():
    with FakeOpenAIServer() as running:
        port = running.port
        with openai.OpenAI(base_url=running.base_url, api_key="sk-test", max_retries=0) as idle:
            ask(idle)  # leaves a keep-alive connection open in the client's pool
            running.stop()
    assert fake_threads() == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_command_line_entry_point():
    command = [sys.executable, "-m", "tests.fakes.openai_server", "--port", "0", "--latency", "0.05"]
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        base_url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", base_url)
        with openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0) as remote:
            assert ask(remote).choices[0].message.content
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


# ---------------------------------------------------------------------------------------------------------------
# Files and batches

BATCH_TERMINAL = ("completed", "failed", "expired", "cancelled")


@contextmanager
def batch_client(**options) -> Iterator[tuple[FakeOpenAIServer, openai.OpenAI]]:
    """Run a server with the given options (batch_seconds 0.15 unless told) and a client for it."""
    with FakeOpenAIServer(**{"batch_seconds": 0.15, **options}) as running:
        with openai.OpenAI(base_url=running.base_url, api_key="sk-test", max_retries=0) as opened:
            yield running, opened


def scene_body(number: int) -> dict:
    """Return the chat completion body of batch line number."""
    return {
        "model": "fake-vlm",
        "messages": [{"role": "user", "content": f"Describe scene {number}."}],
        "response_format": json_schema_format(SceneReply),
        "temperature": 0,
        "seed": number,
    }


def batch_lines(count: int = 5) -> list[dict]:
    """Return count chat completion batch lines with custom_ids req-0, req-1, ..."""
    return [
        {"custom_id": f"req-{number}", "method": "POST", "url": "/v1/chat/completions", "body": scene_body(number)}
        for number in range(count)
    ]


def upload(client: openai.OpenAI, lines: list[dict]) -> str:
    """Upload lines as a JSONL batch input file and return its id."""
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return client.files.create(file=("requests.jsonl", data), purpose="batch").id


def start_batch(client: openai.OpenAI, lines: list[dict] | None = None, **params):
    """Upload lines (five scene requests by default) and create a chat completion batch over them."""
    file_id = upload(client, batch_lines() if lines is None else lines)
    return client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h", **params,
    )


def wait_for(client: openai.OpenAI, batch_id: str, statuses: list[str] | None = None):
    """Poll a batch until it ends, appending every status seen to statuses; return the final batch."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if statuses is not None:
            statuses.append(batch.status)
        if batch.status in BATCH_TERMINAL:
            return batch
        time.sleep(0.01)
    raise AssertionError(f"batch {batch_id} did not end; last status {batch.status}")


def jsonl(client: openai.OpenAI, file_id: str) -> dict[str, dict]:
    """Return a batch output or error file's lines by custom_id, checking custom_ids are not repeated."""
    lines = [json.loads(text) for text in client.files.content(file_id).text.splitlines()]
    by_id = {line["custom_id"]: line for line in lines}
    assert len(by_id) == len(lines)
    return by_id


def test_batch_end_to_end_matches_synchronous_calls():
    with batch_client() as (server, client):
        created = start_batch(client, metadata={"run": "nightly"})
        assert (created.status, created.output_file_id, created.error_file_id) == ("validating", None, None)
        assert (created.request_counts.total, created.metadata, created.model) == (5, {"run": "nightly"}, "fake-vlm")

        batch = wait_for(client, created.id)

        assert batch.status == "completed"
        assert (batch.request_counts.completed, batch.request_counts.failed, batch.error_file_id) == (5, 0, None)
        outputs = jsonl(client, batch.output_file_id)
        assert sorted(outputs) == [f"req-{number}" for number in range(5)]
        assert (server.completions_served, server.batch_lines_served) == (0, 5)
        for number in range(5):
            line = outputs[f"req-{number}"]
            assert line["id"].startswith("batch_req_") and line["error"] is None
            assert line["response"]["status_code"] == 200 and line["response"]["request_id"]
            completion = openai.types.chat.ChatCompletion.model_validate(line["response"]["body"])
            content = completion.choices[0].message.content
            SceneReply.model_validate_json(content)
            synchronous = client.chat.completions.create(**scene_body(number))
            assert synchronous.choices[0].message.content == content
        assert (server.completions_served, server.batch_lines_served) == (5, 5)
        assert (server.batches_created, server.files_uploaded) == (1, 1)
        output_file = client.files.retrieve(batch.output_file_id)
        assert output_file.purpose == "batch_output"
        assert output_file.bytes == len(client.files.content(output_file.id).content)
        (upload_request,) = [request for request in server.requests if request.path == "/v1/files"]
        assert upload_request.body is None and upload_request.body_bytes > 0


def test_uploaded_file_round_trips(client):
    data = b'{"custom_id": "only", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'
    uploaded = client.files.create(file=("one.jsonl", data), purpose="batch")
    assert (uploaded.object, uploaded.bytes, uploaded.filename) == ("file", len(data), "one.jsonl")
    assert uploaded.purpose == "batch"
    assert client.files.retrieve(uploaded.id) == uploaded
    assert client.files.content(uploaded.id).content == data
    with pytest.raises(openai.BadRequestError, match="jsonl"):
        client.files.create(file=("one.txt", data), purpose="batch")
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve("file-missing")
    with pytest.raises(openai.NotFoundError):
        client.files.content("file-missing")


def test_batch_status_progresses_over_batch_seconds():
    with batch_client(batch_seconds=0.45) as (_server, client):
        created = start_batch(client)
        statuses = [created.status]
        batch = wait_for(client, created.id, statuses)
    order = ["validating", "in_progress", "finalizing", "completed"]
    seen = list(dict.fromkeys(statuses))
    assert seen == sorted(seen, key=order.index)
    assert {"validating", "in_progress"} <= set(seen) and seen[-1] == "completed"
    assert batch.created_at <= batch.in_progress_at <= batch.finalizing_at <= batch.completed_at


def test_zero_batch_seconds_completes_on_first_read():
    with batch_client(batch_seconds=0) as (server, client):
        created = start_batch(client)
        assert created.status == "validating"
        assert client.batches.retrieve(created.id).status == "completed"
        assert server.batch_lines_served == 5


def _duplicate_custom_id(lines, params):
    lines[3]["custom_id"] = lines[1]["custom_id"]


def _wrong_window(lines, params):
    params["completion_window"] = "48h"


def _unknown_file(lines, params):
    params["input_file_id"] = "file-missing"


def _url_differs(lines, params):
    lines[2]["url"] = "/v1/embeddings"


def _method_not_post(lines, params):
    lines[0]["method"] = "GET"


def _no_body(lines, params):
    del lines[4]["body"]


def _line_not_json(lines, params):
    lines[1] = "not json"


def _too_much_metadata(lines, params):
    params["metadata"] = {f"key{number}": "value" for number in range(17)}


def _unsupported_endpoint(lines, params):
    params["endpoint"] = "/v1/fine_tuning/jobs"


def _too_many_lines(lines, params):
    lines.extend(batch_lines(openai_server.MAX_BATCH_LINES + 1)[len(lines):])


@pytest.mark.parametrize("spoil", [
    _duplicate_custom_id, _wrong_window, _unknown_file, _url_differs, _method_not_post, _no_body, _line_not_json,
    _too_much_metadata, _unsupported_endpoint, _too_many_lines,
], ids=lambda spoil: spoil.__name__.strip("_"))
def test_invalid_batches_are_rejected(server, client, monkeypatch, spoil):
    monkeypatch.setattr(openai_server, "MAX_BATCH_LINES", 6)
    lines = batch_lines()
    params = {"endpoint": "/v1/chat/completions", "completion_window": "24h"}
    spoil(lines, params)
    data = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()
    file_id = client.files.create(file=("requests.jsonl", data), purpose="batch").id
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(**{"input_file_id": file_id, **params})
    assert caught.value.body["type"] == "invalid_request_error"
    assert server.batches_created == 0


def test_line_faults_fail_or_corrupt_single_lines():
    with batch_client(batch_line_faults={"req-1": "error"}) as (server, client):
        batch = wait_for(client, start_batch(client).id)

        assert (batch.status, batch.request_counts.completed, batch.request_counts.failed) == ("completed", 4, 1)
        errors = jsonl(client, batch.error_file_id)
        assert list(errors) == ["req-1"]
        assert errors["req-1"]["response"] is None and errors["req-1"]["error"]["code"] == "injected_error"
        assert "req-1" not in jsonl(client, batch.output_file_id)
        assert server.batch_lines_served == 4

        server.set_batch_line_faults({"req-0": "schema_mismatch"})
        batch = wait_for(client, start_batch(client).id)

        assert (batch.request_counts.completed, batch.request_counts.failed, batch.error_file_id) == (5, 0, None)
        content = jsonl(client, batch.output_file_id)["req-0"]["response"]["body"]["choices"][0]["message"]["content"]
        with pytest.raises(ValidationError):
            SceneReply.model_validate_json(content)
    with pytest.raises(ValueError):
        FakeOpenAIServer(batch_line_faults={"req-0": "explode"})


def test_invalid_line_body_lands_in_the_error_file(client):
    lines = batch_lines(2)
    lines[1]["body"]["temperature"] = 9
    batch = wait_for(client, start_batch(client, lines).id)
    line = jsonl(client, batch.error_file_id)["req-1"]
    assert line["error"] is None and line["response"]["status_code"] == 400
    assert "temperature" in line["response"]["body"]["error"]["message"]
    assert (batch.request_counts.completed, batch.request_counts.failed) == (1, 1)


def test_whole_batch_fails_or_expires_once_then_succeeds():
    with batch_client(batch_faults=["failed"]) as (server, client):
        failed = wait_for(client, start_batch(client).id)
        assert failed.status == "failed" and failed.failed_at is not None
        assert failed.errors.data[0].code == "injected_failure"
        assert (failed.output_file_id, failed.error_file_id) == (None, None)
        assert wait_for(client, start_batch(client).id).status == "completed"

        server.set_batch_faults(["expired"])
        expired = wait_for(client, start_batch(client).id)
        assert (expired.status, expired.output_file_id, expired.request_counts.failed) == ("expired", None, 5)
        errors = jsonl(client, expired.error_file_id)
        assert len(errors) == 5 and {line["error"]["code"] for line in errors.values()} == {"batch_expired"}
        assert wait_for(client, start_batch(client).id).status == "completed"
        assert (server.batches_created, server.batch_lines_served, server.completions_served) == (4, 10, 0)


def test_cancel_and_unknown_batch():
    with batch_client(batch_seconds=0.3) as (server, client):
        created = start_batch(client)
        assert client.batches.cancel(created.id).status == "cancelling"
        statuses = []
        cancelled = wait_for(client, created.id, statuses)
        assert statuses[-1] == "cancelled" and set(statuses) <= {"cancelling", "cancelled"}
        assert (cancelled.output_file_id, cancelled.cancelled_at is not None) == (None, True)
        assert client.batches.cancel(created.id).status == "cancelled"
        assert server.batch_lines_served == 0

        done = wait_for(client, start_batch(client).id)
        with pytest.raises(openai.ConflictError):
            client.batches.cancel(done.id)
        for call in (client.batches.retrieve, client.batches.cancel):
            with pytest.raises(openai.NotFoundError):
                call("batch_missing")


def test_batches_are_listed_newest_first(client):
    ids = [start_batch(client, batch_lines(1)).id for _ in range(3)]
    page = client.batches.list(limit=2)
    assert [batch.id for batch in page.data] == ids[:0:-1] and page.has_more
    assert [batch.id for batch in client.batches.list(limit=2)] == ids[::-1]  # auto-pagination follows `after`


# ---------------------------------------------------------------------------------------------------------------
# instance_from_schema


class EnumAndConst(Strict):
    colour: Literal["red", "green", "blue"]
    kind: Literal["fixed"]


class OptionalFields(Strict):
    count: int | None
    nickname: str | None = Field(None, max_length=5)


class Node(Strict):
    name: str
    children: list[Node] = Field(default_factory=list, max_length=3)
    parent: Node | None = None


class Patterns(Strict):
    phash: str = Field(pattern=r"^[0-9a-f]{16}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    identifier: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    code: str = Field(pattern=r"^[A-Z]{2}-\d{3}$")


class Bounds(Strict):
    score: int = Field(ge=1, le=5)
    exclusive: int = Field(gt=0, lt=3)
    ratio: float = Field(ge=0, le=1)
    tiny: float = Field(gt=0, lt=0.01)
    title: str = Field(min_length=30, max_length=40)
    short: str = Field(max_length=3)
    triple: list[Box] = Field(min_length=3, max_length=3)
    some: list[str] = Field(max_length=2)


class Items(Strict):
    boxes: list[Box] = Field(min_length=1)
    tags: set[Literal["a", "b", "c"]] = Field(min_length=3)
    pair: tuple[int, str]
    lookup: dict[str, int]


SCHEMA_MODELS = [
    EnumAndConst, OptionalFields, Node, Patterns, Bounds, Items, SceneReply,
    QualityReply, CategoryReply, PersonaReply, ConversationReply, ChecklistReply,
]


@pytest.mark.parametrize("model", SCHEMA_MODELS, ids=lambda model: model.__name__)
def test_instances_validate_for_every_seed(model):
    schema = model.model_json_schema()
    for seed in SEEDS:
        model.model_validate(instance_from_schema(schema, random.Random(seed)))


def test_instances_are_deterministic_and_vary():
    schema = SceneReply.model_json_schema()
    draws = [json.dumps(instance_from_schema(schema, random.Random(seed))) for seed in (1, 1, 2)]
    assert draws[0] == draws[1] != draws[2]


def test_arrays_without_min_items_are_never_empty_near_the_root():
    schema = {"type": "array", "items": {"type": "integer"}}
    sizes = {len(instance_from_schema(schema, random.Random(seed))) for seed in SEEDS}
    assert sizes == {1, 2, 3, 4}


HAND_WRITTEN = {
    "$defs": {
        "Base": {
            "type": "object",
            "properties": {"id": {"type": "string", "pattern": "^[0-9a-f]{16}$"}},
            "required": ["id"],
        },
    },
    "allOf": [
        {"$ref": "#/$defs/Base"},
        {
            "type": "object",
            "properties": {
                "level": {"type": ["integer", "null"], "exclusiveMinimum": 0, "exclusiveMaximum": 3},
                "tag": {"oneOf": [{"const": "a"}, {"type": "integer", "minimum": 10, "maximum": 10}]},
                "tags": {"type": "array", "items": {"enum": ["x", "y", "z"]}, "uniqueItems": True, "minItems": 3},
                "scores": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0, "maximum": 1}},
                "anything": {},
            },
            "required": ["level", "tag", "tags", "scores"],
        },
    ],
}


def test_hand_written_schema_keywords():
    for seed in SEEDS:
        value = instance_from_schema(HAND_WRITTEN, random.Random(seed))
        assert set(value) == {"id", "level", "tag", "tags", "scores", "anything"}
        assert re.fullmatch(r"[0-9a-f]{16}", value["id"])
        assert value["level"] in (None, 1, 2)
        assert value["tag"] in ("a", 10)
        assert sorted(value["tags"]) == ["x", "y", "z"]
        assert value["scores"]
        assert all(isinstance(key, str) and 0 <= score <= 1 for key, score in value["scores"].items())


@pytest.mark.parametrize("pattern", ["^(cat|dog)$", "^[^a]+$", "^.{3}$", r"^\bword$"])
def test_unsupported_pattern_raises(pattern):
    schema = {"type": "string", "pattern": pattern}
    with pytest.raises(ValueError, match=re.escape(repr(pattern))):
        instance_from_schema(schema, random.Random(0))
