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
from pathlib import Path
from typing import Literal

import openai
import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.replies import CategoryReply, ChecklistReply, ConversationReply, PersonaReply, QualityReply

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
