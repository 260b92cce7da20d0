"""A local OpenAI-compatible HTTP server, so tests and benchmarks never reach the paid remote API.

    with FakeOpenAIServer(faults=[Fault("status", status=429, retry_after="1")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")

Or as a process: `python -m tests.fakes.openai_server --port 8011 --latency 0.2 [--faults ten_percent]
[--responder scripted]` prints its base URL when ready and stops on SIGTERM or SIGINT.

A FastAPI app served by uvicorn on 127.0.0.1 from a background thread with its own event loop: latency and `slow`
faults are awaited, so one server answers many requests at once. A `responder(body)` runs on that loop and must not
block; it returns the reply object for a request, or None for a generated one. Generated replies are deterministic:
a json_schema reply is drawn by jsf (JSON Schema Faker) seeded by a hash of the canonical request body, with $refs
inlined and self-nesting models cut after a few levels so that they end.

Misbehaviour beyond the `Fault` kinds: `Fault("status", status=400, echo_headers=True)` answers with an error whose
message repeats the request's headers (the Authorization header included), as some servers and proxies do;
`reported_usage={"prompt_tokens": -5}` makes every chat completion report those usage fields instead of its counts.

Routes: POST /v1/chat/completions, GET /v1/models[/{id}], and the Batch workflow: POST /v1/files (multipart),
GET /v1/files/{id}[/content], POST /v1/batches, GET /v1/batches[/{id}], POST /v1/batches/{id}/cancel. Control
routes, neither recorded nor checked for the API key: GET /_fake/stats answers `stats()`, POST /_fake/reset does
`reset()` (for a server in another process; in-process, call them).

Batches run without background work: each read of a batch (retrieve, list, cancel) works out its status from the
time since creation on the server's `clock`. Over `batch_seconds` a batch reads `validating`, then `in_progress`,
then `finalizing` (a third each), then `completed`; the read that first sees `completed` runs every line as POST
/v1/chat/completions would (same validation, same deterministic content, same `responder`; no `latency_seconds`, no
`Fault`s) and writes the output and error files. Batch faults:

- `batch_line_faults={"custom-id": kind}`: "error" makes that line fail (an error-file line with `response: null`);
  "invalid_json" or "schema_mismatch" corrupt its content as the `Fault` kinds of the same name do (status 200).
  Looked up when a batch completes; change them with `set_batch_line_faults`.
- `batch_faults=["failed", "expired"]`: each new batch takes the next entry and ends in that status instead of
  `completed` (failed: after the validating third, with `errors`, no files; expired: at `batch_seconds`, no line
  run, every line in the error file with code `batch_expired`). Replace the queue with `set_batch_faults`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import contextlib
import email.parser
import email.policy
import functools
import hashlib
import json
import math
import random
import re
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Annotated, Any, Literal, NamedTuple, NoReturn, get_args

import jsf.parser
import rstr
import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from jsf.schema_types import string as jsf_string
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "FAULT_MIXES",
    "LISTEN_BACKLOG",
    "MODEL_IDS",
    "BatchFault",
    "BatchLineFault",
    "FakeOpenAIServer",
    "Fault",
    "RecordedRequest",
    "ReplyLogEntry",
    "ServedInThread",
    "instance_from_schema",
    "main",
    "serve_in_thread",
]

MODEL_IDS = ("fake-vlm", "fake-vlm-mini")
LISTEN_BACKLOG = 128  # 32 clients connecting at once overflow a small backlog and wait ~1 s for a SYN retransmit
_RATE_LIMIT_HEADERS = {
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-remaining-requests": "9999",
    "x-ratelimit-reset-requests": "6ms",
    "x-ratelimit-limit-tokens": "2000000",
    "x-ratelimit-remaining-tokens": "1999000",
    "x-ratelimit-reset-tokens": "30ms",
}
_TEXT = {"type": "string", "minLength": 40, "maxLength": 100}  # jsf's lorem ipsum words never parse as JSON
_DATA_URL = re.compile(r"data:image/(?:png|jpeg|jpg|gif|webp);base64,(?P<data>.*)", re.DOTALL)

FaultKind = Literal["status", "drop_connection", "slow", "invalid_json", "schema_mismatch", "not_a_completion"]
BatchLineFault = Literal["error", "invalid_json", "schema_mismatch"]
BatchFault = Literal["failed", "expired"]
BATCH_ENDPOINTS = (  # what the real API accepts; the fake runs only chat completions
    "/v1/responses",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/completions",
    "/v1/moderations",
    "/v1/images/generations",
    "/v1/images/edits",
    "/v1/videos",
)
FILE_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
MAX_BATCH_LINES = 50_000
MAX_BATCH_FILE_BYTES = 200 * 1024 * 1024


@dataclass
class Fault:
    """One injected failure: for the next `times` chat completion requests, or every `every`-th one (times unused)."""

    kind: FaultKind
    status: int = 500
    retry_after: str | None = None
    retry_after_ms: str | None = None
    delay_seconds: float = 0.0
    times: int = 1
    every: int | None = None
    echo_headers: bool = False  # a status fault's error message repeats the request's headers, as some servers do

    def __post_init__(self) -> None:
        """Reject faults that could never fire as meant."""
        if self.kind not in get_args(FaultKind):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.echo_headers and self.kind != "status":
            raise ValueError("echo_headers applies to status faults")
        if self.times < 1 or (self.every is not None and self.every < 1):
            raise ValueError("times and every must be at least 1")
        if not 100 <= self.status <= 599 or self.delay_seconds < 0:
            raise ValueError("status must be an HTTP status and delay_seconds non-negative")


# Named mixes for --faults. Periodic faults are checked in order, so at multiples of 20 the 429 wins: 5% + 5%.
FAULT_MIXES: dict[str, list[Fault]] = {
    "none": [],
    "ten_percent": [Fault("status", status=429, retry_after="0.1", every=20), Fault("status", status=500, every=10)],
}


@dataclass(frozen=True)
class RecordedRequest:
    """What a client sent: header names lower-cased; body the parsed JSON, or None (multipart, or not recorded)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    body_bytes: int = 0
    received_at: float = 0.0  # time.monotonic() when the request reached the server


class ReplyLogEntry(NamedTuple):
    """One chat completion request answered or failed."""

    body_sha256: str  # of the request body's canonical JSON
    status: int  # 0: the connection was dropped
    answered_at: float  # time.monotonic()
    schema_name: str | None  # response_format.json_schema.name


# ----------------------------------------------------------------------------------------------------------------
# JSON Schema instances, drawn by jsf

# jsf draws from the module-level `random` (rstr's default instance too). Pointing them at one private generator,
# seeded under a lock, makes a draw depend on the seed alone, whatever else the process draws.
_JSF_RANDOM = random.Random()
_JSF_LOCK = threading.Lock()
_RECURSION_LIMIT = 3  # how deep a $defs entry may nest inside itself before optional branches are cut
_CUT = object()  # a subschema cut off to end a recursion


def _bind_jsf_randomness() -> None:
    """Point every loaded jsf module's `random` and `rstr` at _JSF_RANDOM."""
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] == "jsf":
            if getattr(module, "random", None) is random:
                module.random = _JSF_RANDOM
            if getattr(module, "rstr", None) is rstr:
                module.rstr = rstr.Rstr(_JSF_RANDOM)


_bind_jsf_randomness()


def instance_from_schema(schema: dict, seed: int) -> object:
    """Return a value valid against schema, the same for the same seed; ValueError if the fake cannot fill it."""
    fillable = _fillable(schema)
    with _JSF_LOCK:
        _JSF_RANDOM.seed(seed)
        jsf_string.faker.seed_instance(seed)  # the "format" strings (dates, emails) come from jsf's Faker
        try:  # allow_none_optionals=0: every property is sent, as strict structured outputs do
            return jsf.parser.JSF(fillable, allow_none_optionals=0.0).generate()
        except Exception as error:  # jsf raises whatever its parts raise on a schema it cannot fill
            raise ValueError(f"jsf cannot fill the schema: {error!r}") from error


def _fillable(schema: dict) -> dict:
    """Return schema with its $refs inlined, recursion cut, and what jsf misreads rewritten."""
    expanded = _expand(schema, {**schema.get("definitions", {}), **schema.get("$defs", {})}, ())
    if expanded is _CUT:
        raise ValueError("the schema nests itself with no optional way out")
    return expanded


def _expand(node: Any, definitions: dict, path: tuple[str, ...]) -> Any:
    """Return node with references inlined, or _CUT when it cannot be kept within the recursion limit."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rpartition("/")[2]
        if name not in definitions:
            raise ValueError(f"$ref {node['$ref']!r} does not resolve to the schema's $defs")
        if path.count(name) >= _RECURSION_LIMIT:
            return _CUT
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return _expand({**definitions[name], **siblings}, definitions, (*path, name))
    out = {key: value for key, value in node.items() if key not in ("$defs", "definitions", "default")}
    expand = functools.partial(_expand, definitions=definitions, path=path)
    for key in ("anyOf", "oneOf"):  # a cut branch is left out
        if key in node:
            out[key] = [branch for branch in map(expand, node[key]) if branch is not _CUT]
            if not out[key]:
                return _CUT
    for key in ("allOf", "prefixItems"):  # every part must hold
        if key in node:
            out[key] = list(map(expand, node[key]))
            if _CUT in out[key]:
                return _CUT
    if "properties" in node:
        out["properties"] = {name: expand(sub) for name, sub in node["properties"].items()}
        if any(out["properties"].get(name) is _CUT for name in node.get("required", [])):
            return _CUT
        out["properties"] = {name: sub for name, sub in out["properties"].items() if sub is not _CUT}
    if isinstance(node.get("items"), dict):
        out["items"] = expand(node["items"])
        if out["items"] is _CUT:  # an empty list ends the recursion, if the list may be empty
            if node.get("minItems", 0) > 0:
                return _CUT
            out.update(items={}, maxItems=0)
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = expand(node["additionalProperties"])
        if out["additionalProperties"] is _CUT:
            out["additionalProperties"] = False
    return _for_jsf(out)


def _for_jsf(node: dict) -> dict:
    """Rewrite what jsf reads differently from pydantic's JSON Schema, and keep lists and texts non-empty."""
    if node.get("type") == "array":
        if "prefixItems" in node:  # jsf fills tuples from the older list form of `items`
            node["items"] = node.pop("prefixItems")
        node.setdefault("items", {})
        if node.get("maxItems") != 0:
            node.setdefault("minItems", 1)
    if node.get("type") == "string" and not {"pattern", "format", "enum", "const"} & node.keys():
        node.setdefault("minLength", 1)
        node.setdefault("maxLength", max(50, node["minLength"] + 20))  # jsf's default 50 is below a larger minimum
    return node


# ----------------------------------------------------------------------------------------------------------------
# Chat completion replies


def _canonical(value: object) -> str:
    """Return value as canonical JSON, the key for deterministic replies."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(body: object) -> str:
    """Return the sha256 hex digest of body's canonical JSON."""
    return hashlib.sha256(_canonical(body).encode()).hexdigest()


def _schema_name(body: object) -> str | None:
    """Return the json_schema name of a chat request's response_format, if it has one."""
    response_format = body.get("response_format") if isinstance(body, dict) else None
    spec = response_format.get("json_schema") if isinstance(response_format, dict) else None
    return spec.get("name") if isinstance(spec, dict) else None


def _reply_content(body: dict, fault_kind: str | None) -> str:
    """Return the assistant message content for a valid request, corrupted as the fault asks."""
    seed = int(_digest(body), 16)
    response_format = body.get("response_format") or {"type": "text"}
    if response_format["type"] == "text":
        content = instance_from_schema(_TEXT, seed)
    else:
        schema = response_format.get("json_schema", {}).get("schema", {"type": "object"})
        value = (
            instance_from_schema(schema, seed)
            if response_format["type"] == "json_schema"
            else {"answer": instance_from_schema(_TEXT, seed)}
        )
        content = json.dumps(_violate(schema, value) if fault_kind == "schema_mismatch" else value, ensure_ascii=False)
    if fault_kind == "invalid_json":  # cut off halfway, made sure not to parse
        content = content[: len(content) // 2]
        with contextlib.suppress(ValueError):
            json.loads(content)
            content += "}"
    return content


def _violate(schema: dict, value: object) -> object:
    """Return a JSON value that parses but breaks schema: a required key dropped, an extra key, or a wrong type."""
    top = _fillable(schema)
    if not isinstance(value, dict):
        return {"unexpected_key": value}
    required = [name for name in top.get("required", []) if name in value]
    if required:
        return {name: item for name, item in value.items() if name != required[0]}
    return {**value, "unexpected_key": "unexpected"} if top.get("additionalProperties") is False else [value]


def _completion(body: dict, content: str) -> dict:
    """Return a chat.completion object carrying content, with a rough token count (4 characters, 85 an image)."""
    characters = len(_canonical(body["response_format"])) if body.get("response_format") else 0
    images = 0
    for message in body["messages"]:
        parts = message.get("content")
        parts = [{"type": "text", "text": parts}] if isinstance(parts, str) else parts or []
        characters += sum(len(part.get("text", "")) for part in parts if part.get("type") == "text")
        images += sum(1 for part in parts if part.get("type") == "image_url")
    prompt_tokens = 4 * len(body["messages"]) + math.ceil(characters / 4) + 85 * images
    completion_tokens = max(1, math.ceil(len(content) / 4))
    return {
        "id": "chatcmpl-" + _digest(body)[:29],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _model(model_id: str) -> dict:
    """Return the model object for model_id."""
    return {"id": model_id, "object": "model", "created": 1_700_000_000, "owned_by": "fake-openai"}


# ----------------------------------------------------------------------------------------------------------------
# Request validation: what the real API rejects with 400, as pydantic models


class _Strict(BaseModel):
    """Strict types (no "1" for 1), other keys allowed."""

    model_config = ConfigDict(strict=True, extra="allow")


class _TextPart(_Strict):
    type: Literal["text"]
    text: str


class _ImageURL(_Strict):
    url: str

    @field_validator("url")
    @classmethod
    def _http_or_data(cls, url: str) -> str:
        """Accept an http(s) URL or a base64 image data URL."""
        data = _DATA_URL.fullmatch(url)
        with contextlib.suppress(binascii.Error):
            if url.startswith(("http://", "https://")) or (data and base64.b64decode(data["data"], validate=True)):
                return url
        raise ValueError("expected http(s) or data:image/<type>;base64,<data>")


class _ImagePart(_Strict):
    type: Literal["image_url"]
    image_url: _ImageURL


_Parts = Annotated[list[Annotated[_TextPart | _ImagePart, Field(discriminator="type")]], Field(min_length=1)]


class _Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | _Parts | None = None

    @model_validator(mode="after")
    def _has_content(self) -> _Message:
        """Only an assistant message may come without content."""
        if self.content is None and self.role != "assistant":
            raise ValueError("content is required except for assistant messages")
        return self


class _JSONSchema(_Strict):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
    schema_: dict = Field(alias="schema")
    strict: bool | None = None

    @field_validator("schema_")
    @classmethod
    def _fillable(cls, schema: dict) -> dict:
        """Reject schemas the fake cannot fill."""
        problem = _schema_problem(_canonical(schema))
        if problem:
            raise ValueError(problem)
        return schema


class _ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: _JSONSchema | None = None

    @model_validator(mode="after")
    def _has_schema(self) -> _ResponseFormat:
        """A json_schema format needs its json_schema."""
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response_format of type json_schema needs json_schema")
        return self


class _ChatRequest(_Strict):
    model: str
    messages: Annotated[list[_Message], Field(min_length=1)]
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    seed: int | None = None
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    max_completion_tokens: Annotated[int, Field(gt=0)] | None = None
    stream: Literal[False] | None = None  # the fake does not stream
    response_format: _ResponseFormat | None = None


class _BatchRequest(_Strict):
    input_file_id: str
    endpoint: Literal[BATCH_ENDPOINTS]
    completion_window: Literal["24h"]
    metadata: (
        Annotated[
            dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]], Field(max_length=16)
        ]
        | None
    ) = None


class _BatchLine(_Strict):
    custom_id: Annotated[str, Field(min_length=1)]
    method: Literal["POST"]
    url: str
    body: dict


@functools.lru_cache(maxsize=256)
def _schema_problem(schema_json: str) -> str | None:
    """Return why the fake cannot fill a schema (given as canonical JSON), or None."""
    try:
        instance_from_schema(json.loads(schema_json), 0)
    except ValueError as error:
        return str(error)
    return None


def _invalid(error: ValidationError) -> str:
    """Return a short message naming where each of the first few validation errors is."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()[:3])


# The keywords OpenAI's documentation lists as supported in strict mode, plus annotations. Stricter than the API
# where the documentation is vague (minLength, maxLength, oneOf are refused here): a schema that passes here passes
# there. The composition keywords allOf, not, if/then/else and dependent* are documented as unsupported.
STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "enum",
        "const",
        "title",
        "description",
        "default",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)


def _strict_mode_problem(node: Any, context: tuple[str, ...] = ()) -> str | None:
    """Why a schema sent with strict=true breaks the API's strict-mode rules (worded as the API words it), or None.

    The rules: a `$ref` stands alone; only supported keywords; every object says `additionalProperties: false`;
    every property is required.
    """
    if not isinstance(node, dict):
        return None
    if "$ref" in node and len(node) > 1:
        keywords = ", ".join(repr(key) for key in sorted(node) if key != "$ref")
        return f"context={context!r}, $ref cannot have keywords {{{keywords}}}."
    unsupported = sorted(set(node) - STRICT_KEYWORDS)
    if unsupported:
        return f"In context={context!r}, {unsupported[0]!r} is not permitted."
    types = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
    if "object" in types and node.get("additionalProperties") is not False:
        return f"In context={context!r}, 'additionalProperties' is required to be supplied and to be false."
    properties = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    missing = [key for key in properties if key not in (node.get("required") or [])]
    if missing:
        return (
            f"In context={context!r}, 'required' is required to be supplied and to be an array including every "
            f"key in properties. Missing {missing[0]!r}."
        )
    children = [
        *(
            ((keyword, name), child)
            for keyword in ("$defs", "properties")
            for name, child in (node.get(keyword) or {}).items()
        ),
        *(
            ((keyword, str(index)), child)
            for keyword in ("anyOf", "allOf")
            for index, child in enumerate(node.get(keyword) or [])
        ),
        *([(("items",), node["items"])] if isinstance(node.get("items"), dict) else []),
    ]
    return next(filter(None, (_strict_mode_problem(child, context + path) for path, child in children)), None)


def _chat_problem(body: Any, models: tuple[str, ...] = MODEL_IDS) -> tuple[int, dict] | None:
    """Return (status, error body) when a chat completion body is unacceptable, else None."""
    try:
        request = _ChatRequest.model_validate(body)
    except ValidationError as error:
        return 400, _error(400, f"Invalid request: {_invalid(error)}")
    spec = request.response_format.json_schema if request.response_format else None
    problem = _strict_mode_problem(spec.schema_) if spec is not None and spec.strict else None
    if problem:
        return 400, _error(400, f"Invalid schema for response_format {spec.name!r}: {problem}", None, "response_format")
    if body["model"] not in models:
        return 404, _error(
            404, f"The model `{body['model']}` does not exist or you do not have access to it.", "model_not_found"
        )
    return None


def _error(status: int, message: str, code: str | None = None, param: str | None = None) -> dict:
    """Return an OpenAI-style error body."""
    kind = "requests" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class _Refusal(Exception):
    """Ends a request early with an OpenAI-style error reply."""

    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.response = JSONResponse(_error(status, message, code, param), status)


def _refuse(status: int, message: str, code: str | None = None, param: str | None = None) -> NoReturn:
    """Answer the current request with an error."""
    raise _Refusal(status, message, code, param)


# ----------------------------------------------------------------------------------------------------------------
# Server


class _FaultPlan:
    """Decides which fault, if any, the next valid chat completion request gets (401/400/404 ones don't count)."""

    def __init__(self, faults: list[Fault]) -> None:
        self._queue = chain.from_iterable(repeat(fault, fault.times) for fault in faults if fault.every is None)
        self._periodic = [fault for fault in faults if fault.every is not None]
        self._seen = 0

    def next(self) -> Fault | None:
        """Return the fault for the next request: a periodic one when its turn comes, else the head of the queue."""
        self._seen += 1
        due = [fault for fault in self._periodic if self._seen % fault.every == 0]
        return due[0] if due else next(self._queue, None)


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, stopping as soon as asked rather than on its 0.1 s ticks (tests start hundreds)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stopping = asyncio.Event()
        self._sleepers: set[asyncio.Future] = set()

    def stop(self) -> None:
        """Ask the server to stop, from any thread; requests waiting in pause() go on at once."""
        with contextlib.suppress(RuntimeError):  # the loop is closed already if the server died
            self.loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        """Set stopping and end every pause()."""
        self.stopping.set()
        for sleeper in self._sleepers:
            _settle(sleeper)

    async def pause(self, seconds: float) -> None:
        """Wait seconds, or until stop(); as cheap as asyncio.sleep (wait_for on an event costs a task a request)."""
        if seconds <= 0 or self.stopping.is_set():
            return
        sleeper = self.loop.create_future()
        timer = self.loop.call_later(seconds, _settle, sleeper)
        self._sleepers.add(sleeper)
        try:
            await sleeper
        finally:
            timer.cancel()
            self._sleepers.discard(sleeper)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Serve on this thread's event loop until stop()."""
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def main_loop(self) -> None:
        """Wait for stop(); without uvicorn's ticks there are no Date and Server headers (rather than stale ones)."""
        await self.stopping.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop listening, close idle connections now and busy ones after their reply, as uvicorn does, sooner."""
        # Stop accepting first, let the connections accepted already get their transport, and only then close:
        # Python 3.11's asyncio fails to make the transport of a connection accepted just before Server.close()
        # (an assertion in Server._attach) and leaves its socket open with no one serving it until a garbage
        # collection, so a client without a timeout waits for ever (a fake Hub going down hung a publish that way).
        loop = asyncio.get_running_loop()
        for server in self.servers:
            for sock in server.sockets:
                loop.remove_reader(sock.fileno())
        await asyncio.sleep(0.005)
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        for _ in range(1000):
            if not self.server_state.connections:
                break
            await asyncio.sleep(0.005)
        for connection in list(self.server_state.connections):  # a reply still not done after 5 s is cut off
            connection.transport.abort()
        for server in self.servers:
            await server.wait_closed()


def serve_in_thread(app: object, sock: socket.socket, name: str) -> tuple[_Uvicorn, threading.Thread]:
    """Serve `app` on the bound socket with uvicorn from a daemon thread with its own event loop; return once it
    serves (the socket is closed if it cannot start)."""
    config = uvicorn.Config(
        app,
        http="h11",
        ws="none",
        lifespan="off",
        log_config=None,
        log_level="warning",
        access_log=False,
        backlog=LISTEN_BACKLOG,
        timeout_keep_alive=600,  # idle connections stay: a close racing a client's reuse would look like a fault
    )
    server = _Uvicorn(config)
    thread = threading.Thread(target=server.run, args=([sock],), name=name, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            sock.close()
            raise RuntimeError(f"{name} did not start; see stderr")
        time.sleep(0.002)
    return server, thread


def _settle(future: asyncio.Future) -> None:
    """Resolve a pause's future unless it is done already."""
    if not future.done():
        future.set_result(None)


def _counter(name: str, doc: str) -> property:
    """Return a read-only property for one of the server's counters."""

    def read(server: FakeOpenAIServer) -> int:
        with server._lock:
            return server._counts[name]

    return property(read, doc=doc)


class ServedInThread:
    """A server of `serve_in_thread` as a context manager: sets `_lock`, `_stopped`, `_uvicorn` and `_thread`."""

    _lock: threading.Lock
    _stopped: bool
    _uvicorn: _Uvicorn
    _thread: threading.Thread

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving, close every connection (idle keep-alives too) and join the thread; safe to call twice."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._uvicorn.stop()
        self._thread.join(timeout=10)


class FakeOpenAIServer(ServedInThread):
    """An OpenAI-compatible HTTP server on 127.0.0.1, started at construction; use it as a context manager.

    record_bodies=False keeps `requests` without bodies (a long benchmark would pile up images). `clock` is what batch
    statuses are worked out from: a test can pass a settable one and step through them.
    """

    def __init__(
        self,
        *,
        latency_seconds: float = 0.0,
        faults: list[Fault] | None = None,
        port: int = 0,
        expected_api_key: str | None = None,
        responder: Callable[[dict], object | None] | None = None,
        batch_seconds: float = 0.5,
        batch_line_faults: dict[str, BatchLineFault] | None = None,
        batch_faults: list[BatchFault] | None = None,
        record_bodies: bool = True,
        clock: Callable[[], float] = time.monotonic,
        rate_limit_headers: dict[str, str] | None = None,
        reported_usage: dict[str, int] | None = None,
        models: tuple[str, ...] = MODEL_IDS,
    ) -> None:
        if batch_seconds < 0:
            raise ValueError("batch_seconds must be non-negative")
        self.latency_seconds = latency_seconds
        self.models = tuple(models)  # the ids it serves (GET /v1/models); a request for another is a 404
        self.batch_seconds = batch_seconds  # from a batch's creation to `completed`; 0 completes it on its first read
        self.responder = responder
        self.expected_api_key = expected_api_key
        self.record_bodies = record_bodies
        # over the generous defaults on every model and completion reply, e.g. an exhausted request budget
        self.rate_limit_headers = {**_RATE_LIMIT_HEADERS, **(rate_limit_headers or {})}
        # usage fields every chat completion reports instead of its counts, e.g. negative ones (a misbehaving server)
        self.reported_usage = dict(reported_usage or {})
        self._clock = clock
        self._lock = threading.Lock()
        self._plan = _FaultPlan(list(faults or []))
        self._batch_line_faults = _checked(batch_line_faults or {}, BatchLineFault)
        self._batch_faults = list(_checked(batch_faults or [], BatchFault))
        self._requests: list[RecordedRequest] = []
        self._reply_log: list[ReplyLogEntry] = []
        self._counts: Counter[str] = Counter()
        self._in_flight = self._ids_issued = 0
        self._files: dict[str, tuple[dict, bytes]] = {}  # by id: (file object, data); only touched on the loop
        self._batches: dict[str, _Batch] = {}
        self._stopped = False
        # IPPROTO_TCP named: asyncio turns Nagle off only on such sockets (else each reply waits ~40 ms for an ACK)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind(("127.0.0.1", port))
        except OSError:
            self._socket.close()
            raise
        self._port = self._socket.getsockname()[1]
        self._start()

    def _start(self) -> None:
        """Serve self._socket with uvicorn from a thread with its own event loop; return once it serves."""
        self._uvicorn, self._thread = serve_in_thread(self._app(), self._socket, "fake-openai-server")

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return self._port

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client, ending in /v1."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        """How many requests arrived (control routes aside), whatever became of them."""
        with self._lock:
            return len(self._requests)

    max_in_flight = _counter("max_in_flight", "The most chat completion requests handled at the same moment.")
    completions_served = _counter("completions_served", "Chat completions answered with status 200 (not batch lines).")
    prompt_tokens_served = _counter("prompt_tokens_served", "Input tokens the served chat completions reported.")
    completion_tokens_served = _counter(
        "completion_tokens_served", "Output tokens the served chat completions reported."
    )
    batch_lines_served = _counter("batch_lines_served", "Batch lines answered with status 200.")
    batches_created = _counter("batches_created", "Batches that POST /v1/batches accepted.")
    files_uploaded = _counter("files_uploaded", "Files that POST /v1/files accepted (not batch output files).")

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received (control routes aside), oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def reply_log(self) -> list[ReplyLogEntry]:
        """A copy of the log of chat completion requests, in the order they were answered or failed."""
        with self._lock:
            return list(self._reply_log)

    def stats(self) -> dict:
        """Return a summary of reply_log (status 0: dropped), request_count and max_in_flight, and the process's CPU.

        {"chat_requests", "all_requests", "max_in_flight", "statuses": {status: count}, "ok", "ok_unique_bodies",
        "ok_by_schema": {json_schema name: count}, "answered_span_seconds" (first to last 200), "cpu_seconds"}
        """
        with self._lock:
            log, all_requests, max_in_flight = list(self._reply_log), len(self._requests), self._counts["max_in_flight"]
        ok = [entry for entry in log if entry.status == 200]
        return {
            "chat_requests": len(log),
            "all_requests": all_requests,
            "max_in_flight": max_in_flight,
            "statuses": {str(status): count for status, count in Counter(entry.status for entry in log).items()},
            "ok": len(ok),
            "ok_unique_bodies": len({entry.body_sha256 for entry in ok}),
            "ok_by_schema": dict(Counter(entry.schema_name for entry in ok)),
            "answered_span_seconds": round(ok[-1].answered_at - ok[0].answered_at, 4) if ok else 0.0,
            "cpu_seconds": round(time.process_time(), 3),
        }

    def reset(self) -> None:
        """Clear requests, the reply log, the counters and max_in_flight; faults, files and batches stay."""
        with self._lock:
            self._requests, self._reply_log = [], []
            self._counts.clear()

    def set_faults(self, faults: list[Fault]) -> None:
        """Replace the fault list; its queue and `every` counting start afresh."""
        with self._lock:
            self._plan = _FaultPlan(list(faults))

    def set_batch_line_faults(self, faults: dict[str, BatchLineFault]) -> None:
        """Replace the per-line faults, by custom_id; batches that complete from now on use them."""
        self._batch_line_faults = _checked(faults, BatchLineFault)

    def set_batch_faults(self, faults: list[BatchFault]) -> None:
        """Replace the queue of whole-batch outcomes ("failed" or "expired") that the next new batches take."""
        checked = list(_checked(faults, BatchFault))
        with self._lock:
            self._batch_faults = checked

    # ------------------------------------------------------------------------------------------------------------
    # HTTP

    def _app(self) -> FastAPI:
        """Return the app: control routes, then the /v1 routes behind _admit, then a JSON 404 for anything else."""
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
        app.add_exception_handler(_Refusal, _refusal_response)
        app.add_exception_handler(Exception, _failure_response)
        app.get("/_fake/stats")(self._stats_route)
        app.post("/_fake/reset")(self._reset_route)
        api = APIRouter(dependencies=[Depends(self._admit)])
        api.post("/v1/chat/completions")(self._chat)
        api.get("/v1/models")(self._models)
        api.get("/v1/models/{model_id}")(self._model)
        api.post("/v1/files")(self._upload)
        api.get("/v1/files/{file_id}")(self._file)
        api.get("/v1/files/{file_id}/content")(self._file_content)
        api.post("/v1/batches")(self._create_batch)
        api.get("/v1/batches")(self._list_batches)
        api.get("/v1/batches/{batch_id}")(self._batch)
        api.post("/v1/batches/{batch_id}/cancel")(self._cancel_batch)
        api.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])(self._unknown)
        app.include_router(api)
        return app

    async def _admit(self, request: Request) -> None:
        """Record the request, parse its JSON body into request.state.body, and check the API key."""
        raw = await request.body()
        body = None
        if raw and not request.headers.get("content-type", "").startswith("multipart/"):
            with contextlib.suppress(ValueError):
                body = json.loads(raw)
        request.state.body = body
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        recorded = RecordedRequest(
            request.method,
            path,
            dict(request.headers.items()),
            body if self.record_bodies else None,
            len(raw),
            time.monotonic(),
        )
        with self._lock:
            self._requests.append(recorded)
        key = self.expected_api_key
        if key is not None and request.headers.get("authorization") != f"Bearer {key}":
            _refuse(
                401,
                "Incorrect API key provided. You can find your API key in your account settings.",
                "invalid_api_key",
            )

    async def _stats_route(self) -> JSONResponse:
        """GET /_fake/stats."""
        return JSONResponse(self.stats())

    async def _reset_route(self) -> JSONResponse:
        """POST /_fake/reset."""
        self.reset()
        return JSONResponse({"reset": True})

    async def _unknown(self, request: Request) -> Response:
        """Any other method and path."""
        _refuse(404, f"Unknown request URL: {request.method} {request.url.path}.", "unknown_url")

    async def _models(self) -> JSONResponse:
        """GET /v1/models."""
        models = {"object": "list", "data": [_model(i) for i in self.models]}
        return JSONResponse(models, headers=self.rate_limit_headers)

    async def _model(self, model_id: str) -> JSONResponse:
        """GET /v1/models/{model_id}."""
        if model_id not in self.models:
            _refuse(404, f"The model `{model_id}` does not exist or you do not have access to it.", "model_not_found")
        return JSONResponse(_model(model_id), headers=self.rate_limit_headers)

    async def _chat(self, request: Request) -> Response:
        """POST /v1/chat/completions, counted in max_in_flight and logged in reply_log."""
        body, response = request.state.body, None
        with self._lock:
            self._in_flight += 1
            self._counts["max_in_flight"] = max(self._counts["max_in_flight"], self._in_flight)
        try:
            response = await self._chat_reply(body, dict(request.headers.items()))
        finally:
            status = 0 if response is _DROP else 500 if response is None else response.status_code
            with self._lock:
                self._in_flight -= 1
                self._reply_log.append(ReplyLogEntry(_digest(body), status, time.monotonic(), _schema_name(body)))
        if response is _DROP:
            await self._drop(request)
        return response

    async def _chat_reply(self, body: Any, headers: dict[str, str]) -> Response:
        """Answer a chat completion request, applying latency and the next fault; _DROP to drop the connection."""
        problem = _chat_problem(body, self.models)
        if problem:
            return JSONResponse(problem[1], problem[0])
        with self._lock:
            fault = self._plan.next()
        await self._uvicorn.pause(self.latency_seconds)
        kind = fault.kind if fault else None
        if kind == "status":
            echoed = f" Request headers: {json.dumps(headers)}" if fault.echo_headers else ""
            error = _error(
                fault.status,
                f"Injected fault: status {fault.status}.{echoed}",
                "rate_limit_exceeded" if fault.status == 429 else None,
            )
            retry = {"retry-after": fault.retry_after, "retry-after-ms": fault.retry_after_ms}
            return JSONResponse(error, fault.status, headers={k: v for k, v in retry.items() if v is not None})
        if kind == "drop_connection":
            return _DROP
        if kind == "not_a_completion":  # as a misbehaving proxy might answer
            return JSONResponse({"object": "error", "message": "Injected fault: status 200 without a completion."})
        if kind == "slow":
            await self._uvicorn.pause(fault.delay_seconds)
        content = self._content(body, kind if kind in ("invalid_json", "schema_mismatch") else None)
        completion = _completion(body, content)
        completion["usage"].update(self.reported_usage)
        with self._lock:
            self._counts["completions_served"] += 1
            self._counts["prompt_tokens_served"] += completion["usage"]["prompt_tokens"]
            self._counts["completion_tokens_served"] += completion["usage"]["completion_tokens"]
        return JSONResponse(completion, headers=self.rate_limit_headers)

    async def _drop(self, request: Request) -> None:
        """Close the request's TCP connection without a response, so the client sees a connection error."""
        for connection in list(self._uvicorn.server_state.connections):
            if request.client and connection.client == tuple(request.client):
                connection.transport.close()
        await asyncio.sleep(0)  # uvicorn sees the connection lost, so the reply returned after this goes nowhere

    def _content(self, body: dict, fault_kind: str | None) -> str:
        """Return the assistant content for a valid request: the responder's, else generated (and corrupted)."""
        scripted = self.responder(body) if self.responder and not fault_kind else None
        if scripted is None:
            return _reply_content(body, fault_kind)
        return scripted if isinstance(scripted, str) else json.dumps(scripted, ensure_ascii=False)  # str: free text

    # ------------------------------------------------------------------------------------------------------------
    # Files and batches

    def _new_id(self, prefix: str) -> str:
        """Return a fresh id such as `file-<24 hex>`, deterministic in the order ids are issued."""
        self._ids_issued += 1
        return prefix + hashlib.sha256(f"{prefix}{self._ids_issued}".encode()).hexdigest()[:24]

    def _store(self, data: bytes, filename: str, purpose: str) -> dict:
        """Keep a file and return its file object."""
        info = {
            "id": self._new_id("file-"),
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "status_details": None,
            "expires_at": None,
        }
        self._files[info["id"]] = (info, data)
        return info

    async def _upload(self, request: Request) -> JSONResponse:
        """POST /v1/files: store a multipart upload and return its file object."""
        fields = _multipart_fields(request.headers.get("content-type", ""), await request.body())
        if fields is None:
            _refuse(400, "The request must be multipart/form-data with 'purpose' and 'file'.")
        purpose = fields.get("purpose", (None, b""))[1].decode(errors="replace")
        if purpose not in FILE_PURPOSES:
            _refuse(
                400,
                f"Invalid value for 'purpose': {purpose!r}; expected one of {', '.join(FILE_PURPOSES)}.",
                "invalid_value",
                "purpose",
            )
        filename, data = fields.get("file", (None, b""))
        if filename is None:
            _refuse(400, "'file' is a required property.", None, "file")
        if purpose == "batch" and not filename.endswith(".jsonl"):
            _refuse(400, "Invalid file format for Batch API. Must be .jsonl", None, "file")
        info = self._store(data, filename or "upload", purpose)
        with self._lock:
            self._counts["files_uploaded"] += 1
        return JSONResponse(info)

    def _stored(self, file_id: str) -> tuple[dict, bytes]:
        """Return a stored file's object and data, or refuse with 404."""
        if file_id not in self._files:
            _refuse(404, f"No such File object: {file_id}", None, "id")
        return self._files[file_id]

    async def _file(self, file_id: str) -> JSONResponse:
        """GET /v1/files/{file_id}."""
        return JSONResponse(self._stored(file_id)[0])

    async def _file_content(self, file_id: str) -> Response:
        """GET /v1/files/{file_id}/content."""
        info, data = self._stored(file_id)
        jsonl = info["filename"].endswith(".jsonl")
        return Response(data, media_type="application/jsonl" if jsonl else "application/octet-stream")

    async def _create_batch(self, request: Request) -> JSONResponse:
        """POST /v1/batches: validate the request and its input file like the real API; store it as `validating`."""
        lines, model = _batch_lines(request.state.body, self._files)
        with self._lock:
            outcome: str = self._batch_faults.pop(0) if self._batch_faults else "completed"
            self._counts["batches_created"] += 1
        batch = _Batch(self._new_id("batch_"), request.state.body, model, lines, time.time(), self._clock(), outcome)
        self._batches[batch.id] = batch
        return JSONResponse(batch.object())

    def _current(self, batch_id: str) -> _Batch:
        """Return a batch brought up to date, or refuse with 404."""
        if batch_id not in self._batches:
            _refuse(404, f"No batch found with id '{batch_id}'.", None, "batch_id")
        self._advance(self._batches[batch_id])
        return self._batches[batch_id]

    async def _batch(self, batch_id: str) -> JSONResponse:
        """GET /v1/batches/{batch_id}."""
        return JSONResponse(self._current(batch_id).object())

    async def _cancel_batch(self, batch_id: str) -> JSONResponse:
        """POST /v1/batches/{batch_id}/cancel: `cancelling` now, `cancelled` a third of batch_seconds later."""
        batch = self._current(batch_id)
        if batch.status in ("completed", "failed", "expired"):
            _refuse(409, f"Cannot cancel a batch with status '{batch.status}'.", "batch_not_cancellable")
        if batch.cancel_requested is None:
            batch.cancel_requested = self._clock()
            batch.stamp("cancelling_at", batch.cancel_requested - batch.created)
            batch.status = "cancelling"
        return JSONResponse(batch.object())

    async def _list_batches(self, request: Request) -> JSONResponse:
        """GET /v1/batches: a page of batches, newest first, honouring `limit` (1 to 100, default 20) and `after`."""
        limit = request.query_params.get("limit", "20")
        if not (limit.isdigit() and 1 <= int(limit) <= 100):
            _refuse(400, "limit must be an integer between 1 and 100.", "invalid_value", "limit")
        batches = list(reversed(self._batches.values()))
        ids = [batch.id for batch in batches]
        after = request.query_params.get("after")
        if after is not None:
            batches = batches[ids.index(after) + 1 :] if after in ids else []
        page = batches[: int(limit)]
        for batch in page:
            self._advance(batch)
        data = [batch.object() for batch in page]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": len(batches) > len(page),
            }
        )

    def _advance(self, batch: _Batch) -> None:
        """Bring batch's status up to date with the clock's time since its creation (or cancellation)."""
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return
        now, third = self._clock(), self.batch_seconds / 3
        if batch.cancel_requested is not None:
            if now - batch.cancel_requested >= third:
                batch.stamp("cancelled_at", batch.cancel_requested - batch.created + third)
                batch.status = "cancelled"
            return
        elapsed = now - batch.created
        if batch.outcome == "failed" and elapsed >= third:
            batch.stamp("failed_at", third)
            error = {"code": "injected_failure", "message": "Injected batch fault: the batch failed validation."}
            batch.errors = {"object": "list", "data": [{**error, "param": None, "line": None}]}
            batch.status = "failed"
        elif batch.outcome != "failed" and elapsed >= 3 * third:
            self._finish(batch)
        elif batch.outcome != "failed" and elapsed >= third:
            batch.stamp("in_progress_at", third)
            if elapsed >= 2 * third and batch.outcome == "completed":
                batch.stamp("finalizing_at", 2 * third)
                batch.status = "finalizing"
            else:
                batch.status = "in_progress"

    def _finish(self, batch: _Batch) -> None:
        """End batch as completed (running every line) or expired, writing its output and error files."""
        outputs: list[dict] = []
        errors: list[dict] = []
        if batch.outcome == "expired":
            expired = {
                "code": "batch_expired",
                "message": "This request could not be executed before the completion window expired.",
            }
            errors = [_result_line(batch.id, line["custom_id"], None, expired) for line in batch.lines]
        else:
            faults = self._batch_line_faults
            for line in batch.lines:  # everything is computed before anything is stored: a responder may raise
                status, result = self._run_line(line["body"], faults.get(line["custom_id"]))
                response = None if status is None else {"status_code": status, "body": result}
                entry = _result_line(batch.id, line["custom_id"], response, None if response else result)
                (outputs if status == 200 else errors).append(entry)
        for kind, lines in (("output", outputs), ("error", errors)):
            data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
            file_id = self._store(data, f"{batch.id}_{kind}.jsonl", "batch_output")["id"] if lines else None
            setattr(batch, f"{kind}_file_id", file_id)
        batch.counts = {"total": len(batch.lines), "completed": len(outputs), "failed": len(errors)}
        batch.stamp("in_progress_at", self.batch_seconds / 3)
        if batch.outcome == "completed":
            batch.stamp("finalizing_at", 2 * self.batch_seconds / 3)
        batch.stamp(f"{batch.outcome}_at", self.batch_seconds)
        batch.status = batch.outcome
        with self._lock:
            self._counts["batch_lines_served"] += len(outputs)

    def _run_line(self, body: dict, fault: str | None) -> tuple[int | None, dict]:
        """Answer one batch line as /v1/chat/completions would: (status, body), or (None, error) for an error fault."""
        if fault == "error":
            return None, {"code": "injected_error", "message": "Injected batch line fault: this request failed."}
        return _chat_problem(body, self.models) or (200, _completion(body, self._content(body, fault)))


_DROP = Response(status_code=599)  # stands for "close the connection instead of answering"


async def _refusal_response(request: Request, refusal: _Refusal) -> JSONResponse:
    """Send the error reply a _Refusal carries."""
    return refusal.response


async def _failure_response(request: Request, error: Exception) -> JSONResponse:
    """Answer a bug in the fake with a JSON 500; uvicorn logs the traceback."""
    return JSONResponse(_error(500, f"The fake server failed: {error!r}; see its stderr."), 500)


def _checked(faults: Any, kinds: Any) -> Any:
    """Return a copy of batch faults (a list, or a dict by custom_id), rejecting kinds not in the Literal `kinds`."""
    unknown = set(faults.values() if isinstance(faults, dict) else faults) - set(get_args(kinds))
    if unknown:
        raise ValueError(f"unknown batch fault kinds {sorted(unknown)!r}")
    return type(faults)(faults)


# ----------------------------------------------------------------------------------------------------------------
# Files and batches: records and validation


@dataclass
class _Batch:
    """One batch: its request, lines, the outcome it is heading for, and what has been observed so far."""

    id: str
    request: dict  # the validated POST /v1/batches body
    model: str | None
    lines: list[dict]  # {"custom_id", "body"} in file order
    created_wall: float
    created: float  # the server's clock at creation; statuses are worked out from it
    outcome: str  # "completed", or a BatchFault
    status: str = "validating"
    cancel_requested: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: dict | None = None
    counts: dict[str, int] | None = None
    stamps: dict[str, int] = field(default_factory=dict)

    def stamp(self, name: str, seconds_after_creation: float) -> None:
        """Record a status timestamp (Unix seconds) the first time it is reached."""
        self.stamps.setdefault(name, int(self.created_wall + seconds_after_creation))

    def object(self) -> dict:
        """Return the batch object the API describes it with."""
        stamps = (
            "in_progress_at",
            "finalizing_at",
            "completed_at",
            "failed_at",
            "expired_at",
            "cancelling_at",
            "cancelled_at",
        )
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.request["endpoint"],
            "model": self.model,
            "errors": self.errors,
            "input_file_id": self.request["input_file_id"],
            "completion_window": self.request["completion_window"],
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created_wall),
            "expires_at": int(self.created_wall) + 24 * 3600,
            **{name: self.stamps.get(name) for name in stamps},
            "request_counts": self.counts or {"total": len(self.lines), "completed": 0, "failed": 0},
            "metadata": self.request.get("metadata"),
        }


def _result_line(batch_id: str, custom_id: str, response: dict | None, error: dict | None) -> dict:
    """Return one output or error file line; response, when given, is {"status_code", "body"}."""
    digest = hashlib.sha256(f"{batch_id}:{custom_id}".encode()).hexdigest()
    if response is not None:
        response = {
            "status_code": response["status_code"],
            "request_id": "req_" + digest[24:56],
            "body": response["body"],
        }
    return {"id": "batch_req_" + digest[:24], "custom_id": custom_id, "response": response, "error": error}


def _multipart_fields(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]] | None:
    """Return {field name: (filename or None, value)} from a multipart/form-data body, or None if it is not one."""
    if not content_type.startswith("multipart/form-data"):
        return None
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw
    )
    if not message.is_multipart() or message.defects:  # e.g. a truncated body without its closing boundary
        return None
    fields = {
        part.get_param("name", header="content-disposition"): (part.get_filename(), part.get_payload(decode=True))
        for part in message.iter_parts()
    }
    return None if None in fields else fields


def _batch_lines(body: Any, files: dict[str, tuple[dict, bytes]]) -> tuple[list[dict], str | None]:
    """Return a batch request's lines and the model they all use, refusing (400) what the real API would."""
    try:
        request = _BatchRequest.model_validate(body)
    except ValidationError as error:
        _refuse(400, f"Invalid batch request: {_invalid(error)}", "invalid_value")
    if request.endpoint != "/v1/chat/completions":
        _refuse(400, "The fake server only runs /v1/chat/completions batches.", "invalid_value", "endpoint")
    info, data = files.get(request.input_file_id, ({}, b""))
    if info.get("purpose") != "batch" or len(data) > MAX_BATCH_FILE_BYTES:
        _refuse(
            400,
            f"Invalid 'input_file_id' {request.input_file_id!r}: no such file, its purpose is not 'batch', or "
            f"it is larger than {MAX_BATCH_FILE_BYTES} bytes.",
            "invalid_value",
            "input_file_id",
        )
    lines: dict[str, dict] = {}
    for number, text in enumerate(data.split(b"\n"), start=1):
        if text.strip():
            line = _batch_line(number, text, request.endpoint, lines)
            lines[line.custom_id] = {"custom_id": line.custom_id, "body": line.body}
        if len(lines) > MAX_BATCH_LINES:
            _refuse(400, f"The input file has more than {MAX_BATCH_LINES} requests.", "invalid_value", "input_file_id")
    models = list(dict.fromkeys(line["body"].get("model") for line in lines.values()))
    if len(models) != 1:
        _refuse(
            400,
            f"The input file must hold requests, all for one model; found models {models!r}.",
            "invalid_value",
            "input_file_id",
        )
    return list(lines.values()), models[0] if isinstance(models[0], str) else None


def _batch_line(number: int, text: bytes, endpoint: str, seen: dict[str, dict]) -> _BatchLine:
    """Return one input file line, refusing a malformed one, a repeated custom_id or another endpoint."""
    try:
        line = _BatchLine.model_validate_json(text)
    except ValidationError as error:
        problem = _invalid(error)
    else:
        problem = (
            f"duplicate custom_id {line.custom_id!r}"
            if line.custom_id in seen
            else f"'url' {line.url!r} is not the batch endpoint {endpoint!r}"
            if line.url != endpoint
            else None
        )
        if problem is None:
            return line
    _refuse(400, f"Line {number} of the input file: {problem}", "invalid_batch_line", "input_file_id")


# ----------------------------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str] | None = None) -> int:
    """Run the server in the foreground until SIGINT or SIGTERM, printing its base URL once ready."""
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.openai_server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every chat completion")
    parser.add_argument("--api-key", default=None, help="reject requests without `Authorization: Bearer <key>`")
    parser.add_argument("--batch-seconds", type=float, default=0.5, help="seconds from batch creation to completed")
    parser.add_argument("--faults", choices=sorted(FAULT_MIXES), default="none", help="a named fault mix")
    parser.add_argument(
        "--responder",
        choices=("none", "scripted", "judges"),
        default="none",
        help="scripted: tests.factories.scripted_reply; judges: tests.fakes.judges' marker world "
        "(fake-vlm-mini marks half its answers, fake-vlm judges); none: generated replies",
    )
    args = parser.parse_args(argv)
    responder = None
    if args.responder == "scripted":
        from tests.factories import scripted_reply as responder
    elif args.responder == "judges":
        from tests.fakes.judges import marker_world

        responder = marker_world({"fake-vlm-mini": 0.5}, judge="fake-vlm")
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    server = FakeOpenAIServer(
        latency_seconds=args.latency,
        faults=list(FAULT_MIXES[args.faults]),
        port=args.port,
        expected_api_key=args.api_key,
        responder=responder,
        batch_seconds=args.batch_seconds,
        record_bodies=False,  # nobody outside this process could read them
    )
    with server:
        print(server.base_url, flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
