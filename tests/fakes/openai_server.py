"""A local OpenAI-compatible HTTP server, so tests and benchmarks never reach the paid remote API.

    with FakeOpenAIServer(faults=[Fault("status", status=429, retry_after="1")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")

Or as a process: `python -m tests.fakes.openai_server --port 8011 --latency 0.2` prints its base URL when ready.

Routes: POST /v1/chat/completions, GET /v1/models[/{id}], and the Batch workflow: POST /v1/files (multipart),
GET /v1/files/{id}[/content], POST /v1/batches, GET /v1/batches[/{id}], POST /v1/batches/{id}/cancel.

Batches run without threads: each read of a batch (retrieve, list, cancel) works out its status from the time since
creation. Over `batch_seconds` a batch reads `validating`, then `in_progress`, then `finalizing` (a third each), then
`completed`; the read that first sees `completed` runs every line as POST /v1/chat/completions would (same
validation, same deterministic content, same `responder`; no `latency_seconds`, no `Fault`s) and writes the output
and error files. Batch faults:

- `batch_line_faults={"custom-id": kind}`: "error" makes that line fail (an error-file line with `response: null`);
  "invalid_json" or "schema_mismatch" corrupt its content as the `Fault` kinds of the same name do (status 200).
  Looked up when a batch completes; change them with `set_batch_line_faults`.
- `batch_faults=["failed", "expired"]`: each new batch takes the next entry and ends in that status instead of
  `completed` (failed: after the validating third, with `errors`, no files; expired: at `batch_seconds`, no line
  run, every line in the error file with code `batch_expired`). Replace the queue with `set_batch_faults`.
"""

from __future__ import annotations

import argparse
import base64
import binascii
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
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, get_args
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "MODEL_IDS", "BatchFault", "BatchLineFault", "Fault", "FakeOpenAIServer", "RecordedRequest",
    "instance_from_schema", "main",
]

MODEL_IDS = ("fake-vlm", "fake-vlm-mini")
_MODEL_CREATED = 1_700_000_000
_RATE_LIMIT_HEADERS = {
    "x-ratelimit-limit-requests": "10000",
    "x-ratelimit-remaining-requests": "9999",
    "x-ratelimit-reset-requests": "6ms",
    "x-ratelimit-limit-tokens": "2000000",
    "x-ratelimit-remaining-tokens": "1999000",
    "x-ratelimit-reset-tokens": "30ms",
}
# No JSON literals (true, null, digits) here, so plain-text replies never parse as JSON by accident.
_WORDS = (
    "amber", "bright", "calm", "clear", "cloud", "coffee", "corner", "detail", "early", "evening", "field", "focus",
    "gentle", "green", "harbor", "image", "kitchen", "light", "little", "market", "morning", "narrow", "ocean",
    "orange", "paper", "quiet", "river", "road", "scene", "shadow", "simple", "small", "soft", "stone", "street",
    "table", "tall", "touch", "travel", "warm", "window", "winter", "wooden", "yellow",
)
_IMAGE_TOKENS = 85
_DATA_URL = re.compile(r"data:image/(?:png|jpeg|jpg|gif|webp);base64,(?P<data>.*)", re.DOTALL)

FaultKind = Literal["status", "drop_connection", "slow", "invalid_json", "schema_mismatch", "not_a_completion"]
BatchLineFault = Literal["error", "invalid_json", "schema_mismatch"]
BatchFault = Literal["failed", "expired"]

BATCH_ENDPOINTS = (  # what the real API accepts; the fake runs only chat completions
    "/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/moderations",
    "/v1/images/generations", "/v1/images/edits", "/v1/videos",
)
FILE_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
MAX_BATCH_LINES = 50_000
MAX_BATCH_FILE_BYTES = 200 * 1024 * 1024
MAX_METADATA_PAIRS = 16


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

    def __post_init__(self) -> None:
        """Reject faults that could never fire as meant."""
        if self.kind not in get_args(FaultKind):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.times < 1 or (self.every is not None and self.every < 1):
            raise ValueError("times and every must be at least 1")
        if not 100 <= self.status <= 599 or self.delay_seconds < 0:
            raise ValueError("status must be an HTTP status and delay_seconds non-negative")


@dataclass(frozen=True)
class RecordedRequest:
    """What a client sent: header names are lower-cased; body is the parsed JSON, or None (as for multipart uploads).

    body_bytes is the size of the raw body, so a file upload (whose body is None) still shows how much it carried.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    body_bytes: int = 0


# ----------------------------------------------------------------------------------------------------------------
# JSON Schema instances

_MAX_DEPTH = 64
_SHALLOW_DEPTH = 6  # past this, optional branches and arrays shrink so recursive models terminate
_UNSUPPORTED_KEYWORDS = (
    "multipleOf", "not", "if", "patternProperties", "propertyNames", "minProperties", "maxProperties", "contains",
    "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
)
_SHORTHAND = {"d": "0123456789", "w": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", "s": " "}
_ATOM = re.compile(r"\[(?P<cls>(?:\\.|[^\]\\])+)\]|\\(?P<esc>.)|(?P<lit>[^.()|?*+{}\[\]^$\\])", re.DOTALL)
_QUANTIFIER = re.compile(r"\{(?P<n>\d+)(?P<comma>,(?P<m>\d*))?\}|(?P<sym>[*+?])")
_OPEN_REPEAT = 8


def instance_from_schema(schema: dict, rng: random.Random) -> object:
    """Return a value that validates against schema (the subset pydantic v2 emits), drawn from rng."""
    return _InstanceBuilder(schema, rng).build(schema)


class _InstanceBuilder:
    """Walks one JSON Schema, resolving references against its root, and builds a conforming value."""

    def __init__(self, root: dict, rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    def build(self, schema: dict | bool, depth: int = 0) -> object:
        """Return a value for schema at the given nesting depth."""
        if depth > _MAX_DEPTH:
            raise ValueError(f"schema nests deeper than {_MAX_DEPTH} levels; is a recursion never optional?")
        schema = self.resolve(schema)
        unsupported = [key for key in _UNSUPPORTED_KEYWORDS if key in schema]
        if unsupported:
            raise ValueError(f"unsupported JSON Schema keywords: {', '.join(unsupported)}")
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.build(self._pick_branch(schema, key, depth), depth + 1)
        builders = {
            "object": self._object, "array": self._array, "string": self._string, "integer": self._integer,
            "number": self._number, "boolean": self._boolean, "null": self._null,
        }
        kind = self._pick_type(schema, depth)
        if kind not in builders:
            raise ValueError(f"unsupported JSON Schema type {kind!r}")
        return builders[kind](schema, depth)

    def resolve(self, schema: dict | bool) -> dict:
        """Return schema with $ref followed and allOf merged, so its own keywords are all that apply."""
        if schema is True:
            return {}
        if schema is False:
            raise ValueError("the schema `false` admits no value")
        for _ in range(_MAX_DEPTH):
            if "$ref" not in schema:
                break
            siblings = {key: value for key, value in schema.items() if key != "$ref"}
            schema = {**self._lookup(schema["$ref"]), **siblings}
        if "allOf" in schema:
            merged = {key: value for key, value in schema.items() if key != "allOf"}
            for part in schema["allOf"]:
                merged = _merge_schemas(merged, self.resolve(part))
            schema = merged
        return schema

    def _lookup(self, ref: str) -> dict:
        """Return the subschema a local reference such as `#/$defs/Name` points at."""
        if not ref.startswith("#"):
            raise ValueError(f"only local $ref values are supported, got {ref!r}")
        node: Any = self.root
        for token in filter(None, ref[1:].split("/")):
            token = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or token not in node:
                raise ValueError(f"$ref {ref!r} does not resolve against the root schema")
            node = node[token]
        return node

    def _pick_branch(self, schema: dict, key: str, depth: int) -> dict:
        """Return one anyOf/oneOf branch combined with the keywords beside it."""
        branches = schema[key]
        nulls = [branch for branch in branches if self.resolve(branch).get("type") == "null"]
        branch = nulls[0] if nulls and depth >= _SHALLOW_DEPTH else self.rng.choice(branches)
        siblings = {name: value for name, value in schema.items() if name not in ("anyOf", "oneOf", "default")}
        return {**siblings, **self.resolve(branch)}

    def _pick_type(self, schema: dict, depth: int) -> str:
        """Return the type to build: the declared one, one of a list, or one implied by other keywords."""
        declared = schema.get("type")
        if isinstance(declared, list):
            if "null" in declared and depth >= _SHALLOW_DEPTH:
                return "null"
            return self.rng.choice(declared)
        if declared is not None:
            return declared
        implied = (
            ("object", ("properties", "additionalProperties", "required")),
            ("array", ("items", "prefixItems", "minItems", "maxItems")),
            ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")),
        )
        for kind, keywords in implied:
            if any(keyword in schema for keyword in keywords):
                return kind
        return "string"

    def _object(self, schema: dict, depth: int) -> dict:
        """Return an object with every declared property (strict structured outputs require all keys)."""
        properties = schema.get("properties", {})
        value = {name: self.build(sub, depth + 1) for name, sub in properties.items()}
        for name in schema.get("required", []):
            value.setdefault(name, self._text())
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not properties:
            for _ in range(self.rng.randint(1, 2)):
                value[self.rng.choice(_WORDS)] = self.build(extra, depth + 1)
        return value

    def _array(self, schema: dict, depth: int) -> list:
        """Return a list of between minItems and max(minItems, min(maxItems, 4)) conforming items."""
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", {})
        cap = schema.get("maxItems", math.inf)
        low = schema.get("minItems", min(1, cap))
        if depth >= _SHALLOW_DEPTH:  # deep inside a recursive model: as few items as allowed, so it ends
            low = high = schema.get("minItems", 0)
        else:
            high = max(low, min(cap, 4))
        if items is False:
            high = min(high, len(prefix))
        count = self.rng.randint(low, high)
        values: list = []
        seen: set[str] = set()
        for _attempt in range(20 * count + 20):
            if len(values) == count:
                return values
            index = len(values)
            item = self.build(prefix[index] if index < len(prefix) else items, depth + 1)
            key = json.dumps(item, sort_keys=True)
            if schema.get("uniqueItems") and key in seen:
                continue
            seen.add(key)
            values.append(item)
        if len(values) < low:
            raise ValueError("could not draw enough distinct items for uniqueItems")
        return values

    def _string(self, schema: dict, depth: int) -> str:
        """Return short English text, or a match for the schema's pattern, within the length bounds."""
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if "pattern" in schema:
            return _string_for_pattern(schema["pattern"], low, high, self.rng)
        text = self._text()
        while len(text) < low:
            text += " " + self.rng.choice(_WORDS)
        if high is not None:
            text = text[:high]
            if len(text.rstrip()) >= low:
                text = text.rstrip()
        return text

    def _integer(self, schema: dict, depth: int) -> int:
        """Return an integer inside the schema's range."""
        low, low_exclusive, high, high_exclusive = _bounds(schema)
        first = None if low is None else (math.floor(low) + 1 if low_exclusive else math.ceil(low))
        last = None if high is None else (math.ceil(high) - 1 if high_exclusive else math.floor(high))
        first, last = _default_span(first, last)
        if first > last:
            raise ValueError(f"no integer satisfies {schema!r}")
        return self.rng.randint(first, last)

    def _number(self, schema: dict, depth: int) -> float:
        """Return a float with two decimals inside the schema's range."""
        low, low_exclusive, high, high_exclusive = _bounds(schema)
        first, last = _default_span(low, high)
        candidate = round(self.rng.uniform(first, last), 2)
        for value in (candidate, (first + last) / 2):
            above = value > first or (value == first and not (low is not None and low_exclusive))
            below = value < last or (value == last and not (high is not None and high_exclusive))
            if above and below:
                return float(value)
        raise ValueError(f"no number satisfies {schema!r}")

    def _boolean(self, schema: dict, depth: int) -> bool:
        """Return True or False."""
        return self.rng.random() < 0.5

    def _null(self, schema: dict, depth: int) -> None:
        """Return None."""
        return None

    def _text(self) -> str:
        """Return a short phrase of vocabulary words."""
        words = [self.rng.choice(_WORDS) for _ in range(self.rng.randint(2, 6))]
        return " ".join(words).capitalize()


def _merge_schemas(base: dict, extra: dict) -> dict:
    """Return the conjunction of two object-ish schemas: properties and required are unioned, the rest overlaid."""
    merged = {**base, **extra}
    if "properties" in base or "properties" in extra:
        merged["properties"] = {**base.get("properties", {}), **extra.get("properties", {})}
    if "required" in base or "required" in extra:
        merged["required"] = list(dict.fromkeys([*base.get("required", []), *extra.get("required", [])]))
    return merged


def _bounds(schema: dict) -> tuple[float | None, bool, float | None, bool]:
    """Return (low, low is exclusive, high, high is exclusive), keeping the tighter of inclusive and exclusive."""
    low, low_exclusive = schema.get("minimum"), False
    if "exclusiveMinimum" in schema and (low is None or schema["exclusiveMinimum"] >= low):
        low, low_exclusive = schema["exclusiveMinimum"], True
    high, high_exclusive = schema.get("maximum"), False
    if "exclusiveMaximum" in schema and (high is None or schema["exclusiveMaximum"] <= high):
        high, high_exclusive = schema["exclusiveMaximum"], True
    return low, low_exclusive, high, high_exclusive


def _default_span(first: Any, last: Any) -> tuple[Any, Any]:
    """Fill a missing end of a range so it spans 100."""
    if first is None and last is None:
        return 0, 100
    if first is None:
        return last - 100, last
    if last is None:
        return first, first + 100
    return first, last


def _string_for_pattern(pattern: str, low: int, high: int | None, rng: random.Random) -> str:
    """Return a string matching pattern (a sequence of classes or literals with counts) within the length bounds."""
    atoms = _parse_pattern(pattern)
    for _attempt in range(50):
        text = "".join(rng.choice(chars) for chars, least, most in atoms for _ in range(rng.randint(least, most)))
        if len(text) >= low and (high is None or len(text) <= high) and re.search(pattern, text):
            return text
    raise ValueError(f"could not draw a string for pattern {pattern!r} within lengths {low}..{high}")


def _parse_pattern(pattern: str) -> list[tuple[str, int, int]]:
    """Return (alphabet, least, most) atoms for a pattern made of character classes and literals with counts."""
    body = pattern.removeprefix("^")
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1]
    atoms = []
    position = 0
    while position < len(body):
        atom = _ATOM.match(body, position)
        if atom is None:
            raise ValueError(f"unsupported pattern {pattern!r}: cannot read {body[position:]!r}")
        chars = _atom_chars(atom, pattern)
        position = atom.end()
        least, most = 1, 1
        quantifier = _QUANTIFIER.match(body, position)
        if quantifier:
            least, most = _repeat_range(quantifier)
            position = quantifier.end()
        if most < least:
            raise ValueError(f"unsupported pattern {pattern!r}: repeat range is empty")
        atoms.append((chars, least, most))
    return atoms


def _atom_chars(atom: re.Match, pattern: str) -> str:
    """Return the characters one pattern atom (class, escape or literal) can match."""
    if atom["lit"] is not None:
        return atom["lit"]
    if atom["esc"] is not None:
        return _escape_chars(atom["esc"], pattern)
    spec = atom["cls"]
    if spec.startswith("^"):
        raise ValueError(f"unsupported pattern {pattern!r}: negated character classes")
    tokens = re.findall(r"\\.|.", spec, re.DOTALL)
    chars = []
    index = 0
    while index < len(tokens):
        if index + 2 < len(tokens) and tokens[index + 1] == "-":
            first, last = _escape_or_char(tokens[index], pattern), _escape_or_char(tokens[index + 2], pattern)
            if len(first) != 1 or len(last) != 1 or first > last:
                raise ValueError(f"unsupported pattern {pattern!r}: bad range in [{spec}]")
            chars.extend(chr(code) for code in range(ord(first), ord(last) + 1))
            index += 3
        else:
            chars.extend(_escape_or_char(tokens[index], pattern))
            index += 1
    return "".join(dict.fromkeys(chars))


def _escape_or_char(token: str, pattern: str) -> str:
    """Return the characters of one class member, which may be an escape."""
    return _escape_chars(token[1], pattern) if token.startswith("\\") else token


def _escape_chars(escaped: str, pattern: str) -> str:
    """Return the characters a backslash escape stands for: a shorthand class or the literal punctuation."""
    if escaped in _SHORTHAND:
        return _SHORTHAND[escaped]
    if not escaped.isalnum():
        return escaped
    raise ValueError(f"unsupported pattern {pattern!r}: escape \\{escaped}")


def _repeat_range(quantifier: re.Match) -> tuple[int, int]:
    """Return (least, most) repeats for {n}, {n,m}, {n,}, *, + or ?."""
    symbol = quantifier["sym"]
    if symbol is not None:
        return {"*": (0, _OPEN_REPEAT), "+": (1, _OPEN_REPEAT), "?": (0, 1)}[symbol]
    least = int(quantifier["n"])
    if quantifier["comma"] is None:
        return least, least
    return least, int(quantifier["m"]) if quantifier["m"] else least + _OPEN_REPEAT


# ----------------------------------------------------------------------------------------------------------------
# Chat completion replies


def _canonical(value: object) -> str:
    """Return value as canonical JSON, the key for deterministic replies."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _rng_for(body: dict) -> random.Random:
    """Return a generator seeded by the request body, so the same request always gets the same reply."""
    return random.Random(int(hashlib.sha256(_canonical(body).encode()).hexdigest(), 16))


def _reply_content(body: dict, fault_kind: str | None) -> str:
    """Return the assistant message content for a request, corrupted as the fault asks."""
    rng = _rng_for(body)
    response_format = body.get("response_format") or {"type": "text"}
    if response_format["type"] == "text":
        content = _sentence(rng)
    else:
        schema = response_format.get("json_schema", {}).get("schema", {"type": "object"})
        if response_format["type"] == "json_schema":
            value = instance_from_schema(schema, rng)
        else:
            value = {"answer": _sentence(rng)}
        if fault_kind == "schema_mismatch":
            value = _violate(schema, value)
        content = json.dumps(value, ensure_ascii=False)
    return _truncate_json(content) if fault_kind == "invalid_json" else content


def _sentence(rng: random.Random) -> str:
    """Return a short plain-text sentence."""
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 14))).capitalize() + "."


def _violate(schema: dict, value: object) -> object:
    """Return a JSON value that parses but breaks schema: a required key dropped, an extra key, or a wrong type."""
    top = _InstanceBuilder(schema, random.Random(0)).resolve(schema)
    if isinstance(value, dict):
        required = [name for name in top.get("required", []) if name in value]
        if required:
            return {name: item for name, item in value.items() if name != required[0]}
        if top.get("additionalProperties") is False:
            return {**value, "unexpected_key": "unexpected"}
        return [value]
    return {"unexpected_key": value}


def _truncate_json(content: str) -> str:
    """Return the first half of content, as if the reply were cut off, made sure not to parse."""
    cut = content[: len(content) // 2]
    try:
        json.loads(cut)
    except ValueError:
        return cut
    return cut + "}"


def _prompt_tokens(body: dict) -> int:
    """Return a rough prompt size: four characters a token, a fixed cost per image and per message."""
    characters = len(_canonical(body.get("response_format"))) if body.get("response_format") else 0
    images = 0
    for message in body["messages"]:
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        characters += sum(len(part.get("text", "")) for part in parts if part.get("type") == "text")
        images += sum(1 for part in parts if part.get("type") == "image_url")
    return 4 * len(body["messages"]) + math.ceil(characters / 4) + _IMAGE_TOKENS * images


def _completion(body: dict, content: str) -> dict:
    """Return a chat.completion object carrying content."""
    prompt_tokens = _prompt_tokens(body)
    completion_tokens = max(1, math.ceil(len(content) / 4))
    return {
        "id": "chatcmpl-" + hashlib.sha256(_canonical(body).encode()).hexdigest()[:29],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "system_fingerprint": "fp_fake",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _model(model_id: str) -> dict:
    """Return the model object for model_id."""
    return {"id": model_id, "object": "model", "created": _MODEL_CREATED, "owned_by": "fake-openai"}


# ----------------------------------------------------------------------------------------------------------------
# Request validation


def _chat_problem(body: Any) -> tuple[int, str, str | None] | None:
    """Return (status, message, code) when a chat completion body is unacceptable, else None."""
    if not isinstance(body, dict):
        return 400, "The request body must be a JSON object.", None
    if not isinstance(body.get("model"), str):
        return 400, "You must provide a model parameter.", None
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return 400, "'messages' must be a non-empty array.", None
    problem = next(filter(None, map(_message_problem, messages)), None)
    problem = problem or _sampling_problem(body) or _format_problem(body.get("response_format"))
    if problem:
        return 400, problem, None
    if body["model"] not in MODEL_IDS:
        return 404, f"The model `{body['model']}` does not exist or you do not have access to it.", "model_not_found"
    return None


def _message_problem(message: Any) -> str | None:
    """Return what is wrong with one chat message, or None."""
    if not isinstance(message, dict) or message.get("role") not in ("system", "developer", "user", "assistant", "tool"):
        return "Each message needs a role of system, developer, user, assistant or tool."
    content = message.get("content")
    if content is None and message["role"] == "assistant":
        return None
    if isinstance(content, str):
        return None
    if not isinstance(content, list) or not content:
        return "Message content must be a string or a non-empty array of content parts."
    return next(filter(None, map(_part_problem, content)), None)


def _part_problem(part: Any) -> str | None:
    """Return what is wrong with one content part (text or image_url), or None."""
    if not isinstance(part, dict):
        return "Each content part must be an object."
    if part.get("type") == "text":
        return None if isinstance(part.get("text"), str) else "A text part needs a string 'text'."
    if part.get("type") != "image_url":
        return f"Unsupported content part type {part.get('type')!r}; the fake accepts text and image_url."
    url = (part.get("image_url") or {}).get("url")
    if not isinstance(url, str):
        return "An image_url part needs image_url.url."
    if url.startswith(("http://", "https://")):
        return None
    data_url = _DATA_URL.fullmatch(url)
    try:
        base64.b64decode(data_url["data"], validate=True) if data_url else None
    except binascii.Error:
        data_url = None
    return None if data_url else "Invalid image URL: expected http(s) or data:image/<type>;base64,<data>."


def _sampling_problem(body: dict) -> str | None:
    """Return what is wrong with temperature, seed or the token limits, or None."""
    temperature = body.get("temperature")
    if temperature is not None and not (isinstance(temperature, (int, float)) and 0 <= temperature <= 2):
        return "temperature must be a number between 0 and 2."
    if body.get("seed") is not None and not isinstance(body["seed"], int):
        return "seed must be an integer."
    for name in ("max_tokens", "max_completion_tokens"):
        if body.get(name) is not None and not (isinstance(body[name], int) and body[name] > 0):
            return f"{name} must be a positive integer."
    if body.get("stream"):
        return "The fake server does not support streaming."
    return None


def _format_problem(response_format: Any) -> str | None:
    """Return what is wrong with response_format, including schemas the fake cannot fill, or None."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return "response_format.type must be text, json_object or json_schema."
    if kind != "json_schema":
        return None
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", str(spec.get("name", ""))):
        return "response_format.json_schema needs a name of letters, digits, '_' or '-'."
    if not isinstance(spec.get("schema"), dict):
        return "response_format.json_schema.schema must be an object."
    try:
        instance_from_schema(spec["schema"], random.Random(0))
    except ValueError as error:
        return f"Invalid schema for response_format '{spec['name']}': {error}"
    return None


def _error(status: int, message: str, code: str | None = None, param: str | None = None) -> dict:
    """Return an OpenAI-style error body."""
    if status == 429:
        kind = "requests"
    elif status >= 500:
        kind = "server_error"
    else:
        kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


# ----------------------------------------------------------------------------------------------------------------
# Server


@dataclass
class _Reply:
    """A response to write: status, a JSON body (dict) or raw bytes (sent with headers' content-type), headers."""

    status: int
    body: dict | bytes
    headers: dict[str, str] = field(default_factory=dict)


class _FaultPlan:
    """Decides which fault, if any, the next valid chat completion request gets (401/400/404 ones don't count)."""

    def __init__(self, faults: list[Fault]) -> None:
        self._queue = [[fault, fault.times] for fault in faults if fault.every is None]
        self._periodic = [fault for fault in faults if fault.every is not None]
        self._seen = 0

    def next(self) -> Fault | None:
        """Return the fault for the next request: a periodic one when its turn comes, else the head of the queue."""
        self._seen += 1
        for fault in self._periodic:
            if self._seen % fault.every == 0:
                return fault
        while self._queue and self._queue[0][1] == 0:
            self._queue.pop(0)
        if not self._queue:
            return None
        self._queue[0][1] -= 1
        return self._queue[0][0]


class _HTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that can close its keep-alive connections and join their threads on stop."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], fake: FakeOpenAIServer) -> None:
        self.fake = fake
        self._connection_threads: list[threading.Thread] = []
        self._open_connections: set[Any] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve one connection in a tracked daemon thread."""
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True,
            name=f"fake-openai-connection-{client_address[1]}",
        )
        with self._connections_lock:
            self._connection_threads = [*filter(threading.Thread.is_alive, self._connection_threads), thread]
            self._open_connections.add(request)
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        """Forget a connection once its thread is done with it."""
        with self._connections_lock:
            self._open_connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self, timeout: float) -> None:
        """Cut every open connection (idle keep-alives included) and join every connection thread."""
        with self._connections_lock:
            connections, threads = list(self._open_connections), list(self._connection_threads)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)  # a handler blocked reading a keep-alive wakes with EOF
            except OSError:
                pass
        for thread in threads:
            thread.join(timeout)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that hang up; report anything else."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Reads one request, asks the FakeOpenAIServer for the reply and writes it."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the body waits ~40 ms for the client's delayed ACK.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def do_GET(self) -> None:
        """Serve any method the same way; routing happens in FakeOpenAIServer."""
        fake = self.server.fake
        raw = self._read_body()
        multipart = self.headers.get("Content-Type", "").startswith("multipart/")
        try:
            parsed = json.loads(raw) if raw and not multipart else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=parsed,
            body_bytes=len(raw),
        )
        try:
            reply = fake._respond(request, raw)
        except Exception:  # a bug in the fake should reach the client as a 500, not a hung connection
            traceback.print_exc()
            reply = _Reply(500, _error(500, "The fake server failed; see its stderr."))
        if reply is None:
            self.close_connection = True
        else:
            self._write(reply)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _read_body(self) -> bytes:
        """Return the raw request body, read by Content-Length or as chunked transfer encoding."""
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline().strip():  # trailers, up to the blank line
                    pass
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _write(self, reply: _Reply) -> None:
        """Send reply (JSON, or raw bytes) with a Content-Length, keeping the connection open."""
        headers = dict(reply.headers)
        if isinstance(reply.body, bytes):
            payload = reply.body
            content_type = headers.pop("content-type", "application/octet-stream")
        else:
            payload, content_type = json.dumps(reply.body).encode(), "application/json"
        self.send_response(reply.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output clean."""


class FakeOpenAIServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1, started at construction; use it as a context manager."""

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
    ) -> None:
        if batch_seconds < 0:
            raise ValueError("batch_seconds must be non-negative")
        self.latency_seconds = latency_seconds
        # Seconds from a batch's creation to `completed`; 0 completes it on its first read.
        self.batch_seconds = batch_seconds
        # `responder(body)` may return the reply object for a request (e.g. a well-formed conversation for an
        # end-to-end test); None falls back to a generated schema instance.
        self.responder = responder
        self.expected_api_key = expected_api_key
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._plan = _FaultPlan(list(faults or []))
        self._requests: list[RecordedRequest] = []
        self._completions_served = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._batch_lines_served = 0
        self._batches_created = 0
        self._files_uploaded = 0
        self._ids_issued = 0
        # Batch and file state has its own re-entrant lock, held while a batch's lines run (a responder may read the
        # counters, which take self._lock, or even look at batches again).
        self._batch_lock = threading.RLock()
        self._files: dict[str, _StoredFile] = {}
        self._batches: dict[str, _Batch] = {}
        self._batch_line_faults = _line_faults(batch_line_faults or {})
        self._batch_faults = _batch_faults(batch_faults or [])
        self._httpd = _HTTPServer(("127.0.0.1", port), self)
        # A short poll interval keeps stop() fast; the default would add up to half a second per server.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai-server", daemon=True,
        )
        self._thread.start()

    def __enter__(self) -> FakeOpenAIServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client, ending in /v1."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        """How many requests arrived, whatever became of them."""
        with self._lock:
            return len(self._requests)

    @property
    def max_in_flight(self) -> int:
        """The most chat completion requests this server was handling at the same moment."""
        with self._lock:
            return self._max_in_flight

    @property
    def completions_served(self) -> int:
        """How many synchronous chat completions were answered with status 200 (batch lines are not counted)."""
        with self._lock:
            return self._completions_served

    @property
    def batch_lines_served(self) -> int:
        """How many batch lines were answered with status 200 (not counted in completions_served)."""
        with self._lock:
            return self._batch_lines_served

    @property
    def batches_created(self) -> int:
        """How many batches POST /v1/batches accepted."""
        with self._lock:
            return self._batches_created

    @property
    def files_uploaded(self) -> int:
        """How many files POST /v1/files accepted (batch output and error files are not counted)."""
        with self._lock:
            return self._files_uploaded

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received, oldest first."""
        with self._lock:
            return list(self._requests)

    def set_faults(self, faults: list[Fault]) -> None:
        """Replace the fault list; its queue and `every` counting start afresh."""
        with self._lock:
            self._plan = _FaultPlan(list(faults))

    def set_batch_line_faults(self, faults: dict[str, BatchLineFault]) -> None:
        """Replace the per-line faults, by custom_id; batches that complete from now on use them."""
        checked = _line_faults(faults)
        with self._batch_lock:
            self._batch_line_faults = checked

    def set_batch_faults(self, faults: list[BatchFault]) -> None:
        """Replace the queue of whole-batch outcomes ("failed" or "expired") that the next new batches take."""
        checked = _batch_faults(faults)
        with self._batch_lock:
            self._batch_faults = checked

    def stop(self) -> None:
        """Stop serving, close every connection and join every thread; safe to call twice."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.close_connections(timeout=5)
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _respond(self, request: RecordedRequest, raw: bytes = b"") -> _Reply | None:
        """Record request and return its reply, or None to drop the connection; raw is the undecoded body."""
        with self._lock:
            self._requests.append(request)
        if self.expected_api_key is not None:
            if request.headers.get("authorization") != f"Bearer {self.expected_api_key}":
                message = "Incorrect API key provided. You can find your API key in your account settings."
                return _Reply(401, _error(401, message, "invalid_api_key"))
        path = urlsplit(request.path).path.rstrip("/")
        if request.method == "POST" and path == "/v1/chat/completions":
            return self._chat(request.body)
        if request.method == "GET" and path == "/v1/models":
            return _Reply(200, {"object": "list", "data": [_model(i) for i in MODEL_IDS]}, dict(_RATE_LIMIT_HEADERS))
        if request.method == "GET" and path.startswith("/v1/models/"):
            model_id = path.removeprefix("/v1/models/")
            if model_id in MODEL_IDS:
                return _Reply(200, _model(model_id), dict(_RATE_LIMIT_HEADERS))
            message = f"The model `{model_id}` does not exist or you do not have access to it."
            return _Reply(404, _error(404, message, "model_not_found"))
        if path == "/v1/files" or path.startswith("/v1/files/"):
            reply = self._files_route(request.method, path, request.headers.get("content-type", ""), raw)
        elif path == "/v1/batches" or path.startswith("/v1/batches/"):
            reply = self._batches_route(request.method, path, request.path, request.body)
        else:
            reply = None
        if reply is not None:
            return reply
        return _Reply(404, _error(404, f"Unknown request URL: {request.method} {request.path}.", "unknown_url"))

    def _chat(self, body: Any) -> _Reply | None:
        """Answer a chat completion request, counting how many are in progress at once."""
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            return self._chat_reply(body)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _chat_reply(self, body: Any) -> _Reply | None:
        """Answer a chat completion request, applying latency and the next fault."""
        problem = _chat_problem(body)
        if problem:
            status, message, code = problem
            return _Reply(status, _error(status, message, code))
        with self._lock:
            fault = self._plan.next()
        self._stopping.wait(self.latency_seconds)
        if fault is not None and fault.kind == "status":
            code = "rate_limit_exceeded" if fault.status == 429 else None
            body = _error(fault.status, f"Injected fault: status {fault.status}.", code)
            return _Reply(fault.status, body, _retry_headers(fault))
        if fault is not None and fault.kind == "drop_connection":
            return None
        if fault is not None and fault.kind == "not_a_completion":  # as a misbehaving proxy might answer
            return _Reply(200, {"object": "error", "message": "Injected fault: status 200 without a completion."})
        if fault is not None and fault.kind == "slow":
            self._stopping.wait(fault.delay_seconds)
        content = self._content(body, fault.kind if fault else None)
        with self._lock:
            self._completions_served += 1
        return _Reply(200, _completion(body, content), dict(_RATE_LIMIT_HEADERS))

    def _content(self, body: dict, fault_kind: str | None) -> str:
        """Return the assistant content for a valid request: the responder's, else generated (and corrupted)."""
        scripted = self.responder(body) if self.responder and not fault_kind else None
        if scripted is not None:
            return json.dumps(scripted, ensure_ascii=False)
        return _reply_content(body, fault_kind)

    # ------------------------------------------------------------------------------------------------------------
    # Files and batches

    def _new_id(self, prefix: str) -> str:
        """Return a fresh id such as `file-<24 hex>`, deterministic in the order ids are issued."""
        with self._lock:
            self._ids_issued += 1
            number = self._ids_issued
        return prefix + hashlib.sha256(f"{prefix}{number}".encode()).hexdigest()[:24]

    def _files_route(self, method: str, path: str, content_type: str, raw: bytes) -> _Reply | None:
        """Serve POST /v1/files, GET /v1/files/{id} and GET /v1/files/{id}/content; None for anything else."""
        if method == "POST" and path == "/v1/files":
            return self._upload(content_type, raw)
        parts = path.removeprefix("/v1/files/").split("/")
        if method != "GET" or not 1 <= len(parts) <= 2 or (len(parts) == 2 and parts[1] != "content"):
            return None
        with self._batch_lock:
            stored = self._files.get(parts[0])
        if stored is None:
            return _Reply(404, _error(404, f"No such File object: {parts[0]}", None, "id"))
        if len(parts) == 1:
            return _Reply(200, stored.object())
        kind = "application/jsonl" if stored.filename.endswith(".jsonl") else "application/octet-stream"
        return _Reply(200, stored.data, {"content-type": kind})

    def _upload(self, content_type: str, raw: bytes) -> _Reply:
        """Store an uploaded file and return its file object."""
        fields = _parse_multipart(content_type, raw)
        if fields is None:
            return _Reply(400, _error(400, "The request must be multipart/form-data with 'purpose' and 'file'."))
        purpose = fields.get("purpose", (None, b""))[1].decode(errors="replace")
        if purpose not in FILE_PURPOSES:
            message = f"Invalid value for 'purpose': {purpose!r}; expected one of {', '.join(FILE_PURPOSES)}."
            return _Reply(400, _error(400, message, "invalid_value", "purpose"))
        if "file" not in fields or fields["file"][0] is None:
            return _Reply(400, _error(400, "'file' is a required property.", None, "file"))
        filename, data = fields["file"]
        if purpose == "batch" and not filename.endswith(".jsonl"):
            return _Reply(400, _error(400, "Invalid file format for Batch API. Must be .jsonl", None, "file"))
        stored = _StoredFile(self._new_id("file-"), data, filename or "upload", purpose, int(time.time()))
        with self._batch_lock:
            self._files[stored.id] = stored
        with self._lock:
            self._files_uploaded += 1
        return _Reply(200, stored.object())

    def _store_output(self, name: str, lines: list[dict]) -> str | None:
        """Store lines as a JSONL file of purpose batch_output and return its id, or None when there are none."""
        if not lines:
            return None
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
        stored = _StoredFile(self._new_id("file-"), data, name, "batch_output", int(time.time()))
        with self._batch_lock:
            self._files[stored.id] = stored
        return stored.id

    def _batches_route(self, method: str, path: str, target: str, body: Any) -> _Reply | None:
        """Serve the batch endpoints; None for anything else."""
        if path == "/v1/batches":
            if method == "POST":
                return self._create_batch(body)
            return self._list_batches(target) if method == "GET" else None
        parts = path.removeprefix("/v1/batches/").split("/")
        if len(parts) == 1 and method == "GET":
            action = None
        elif len(parts) == 2 and parts[1] == "cancel" and method == "POST":
            action = "cancel"
        else:
            return None
        with self._batch_lock:
            batch = self._batches.get(parts[0])
            if batch is None:
                return _Reply(404, _error(404, f"No batch found with id '{parts[0]}'.", None, "batch_id"))
            self._advance(batch)
            if action == "cancel":
                if batch.status in ("completed", "failed", "expired"):
                    message = f"Cannot cancel a batch with status '{batch.status}'."
                    return _Reply(409, _error(409, message, "batch_not_cancellable"))
                if batch.cancel_requested is None:
                    batch.cancel_requested = time.monotonic()
                    batch.stamp("cancelling_at", batch.cancel_requested - batch.created)
                    batch.status = "cancelling"
            return _Reply(200, batch.object())

    def _list_batches(self, target: str) -> _Reply:
        """Return a page of batches, newest first, honouring `limit` (1 to 100, default 20) and `after`."""
        query = parse_qs(urlsplit(target).query)
        try:
            limit = int(query.get("limit", ["20"])[0])
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            return _Reply(400, _error(400, "limit must be an integer between 1 and 100.", "invalid_value", "limit"))
        with self._batch_lock:
            batches = list(reversed(self._batches.values()))
            after = query.get("after", [None])[0]
            if after is not None:
                ids = [batch.id for batch in batches]
                batches = batches[ids.index(after) + 1:] if after in ids else []
            page = batches[:limit]
            for batch in page:
                self._advance(batch)
            data = [batch.object() for batch in page]
        body = {
            "object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(batches) > limit,
        }
        return _Reply(200, body)

    def _create_batch(self, body: Any) -> _Reply:
        """Validate a batch request and its input file like the real API; store the batch as `validating`."""
        with self._batch_lock:
            checked = _batch_problem(body, self._files)
            if isinstance(checked, _Reply):
                return checked
            lines, model = checked
            outcome: str = self._batch_faults.pop(0) if self._batch_faults else "completed"
            batch = _Batch(
                id=self._new_id("batch_"), endpoint=body["endpoint"], input_file_id=body["input_file_id"],
                completion_window=body["completion_window"], metadata=body.get("metadata"), model=model,
                lines=lines, created_wall=time.time(), created=time.monotonic(), outcome=outcome,
            )
            self._batches[batch.id] = batch
        with self._lock:
            self._batches_created += 1
        return _Reply(200, batch.object())

    def _advance(self, batch: _Batch) -> None:
        """Bring batch's status up to date with the time since its creation (or cancellation); hold _batch_lock."""
        if batch.status in _TERMINAL:
            return
        now, total = time.monotonic(), self.batch_seconds
        third = total / 3
        if batch.cancel_requested is not None:
            if now - batch.cancel_requested >= third:
                batch.stamp("cancelled_at", batch.cancel_requested - batch.created + third)
                batch.status = "cancelled"
            return
        elapsed = now - batch.created
        if batch.outcome == "failed":
            if elapsed >= third:
                batch.stamp("failed_at", third)
                batch.errors = {"object": "list", "data": [{
                    "code": "injected_failure", "message": "Injected batch fault: the batch failed validation.",
                    "param": None, "line": None,
                }]}
                batch.status = "failed"
            return
        if elapsed >= total:
            self._finish(batch)
        elif elapsed >= 2 * third and batch.outcome == "completed":
            batch.stamp("in_progress_at", third)
            batch.stamp("finalizing_at", 2 * third)
            batch.status = "finalizing"
        elif elapsed >= third:
            batch.stamp("in_progress_at", third)
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
            faults = dict(self._batch_line_faults)
            for line in batch.lines:  # everything is computed before anything is stored: a responder may raise
                status, result = self._run_line(line["body"], faults.get(line["custom_id"]))
                if status is None:
                    errors.append(_result_line(batch.id, line["custom_id"], None, result))
                else:
                    (outputs if status == 200 else errors).append(
                        _result_line(batch.id, line["custom_id"], {"status_code": status, "body": result}, None)
                    )
        batch.output_file_id = self._store_output(f"{batch.id}_output.jsonl", outputs)
        batch.error_file_id = self._store_output(f"{batch.id}_error.jsonl", errors)
        batch.counts = {"total": len(batch.lines), "completed": len(outputs), "failed": len(errors)}
        batch.stamp("in_progress_at", self.batch_seconds / 3)
        if batch.outcome == "expired":
            batch.stamp("expired_at", self.batch_seconds)
        else:
            batch.stamp("finalizing_at", 2 * self.batch_seconds / 3)
            batch.stamp("completed_at", self.batch_seconds)
        batch.status = batch.outcome
        with self._lock:
            self._batch_lines_served += len(outputs)

    def _run_line(self, body: dict, fault: str | None) -> tuple[int | None, dict]:
        """Answer one batch line as /v1/chat/completions would: (status, body), or (None, error) for an error fault."""
        if fault == "error":
            return None, {"code": "injected_error", "message": "Injected batch line fault: this request failed."}
        problem = _chat_problem(body)
        if problem:
            status, message, code = problem
            return status, _error(status, message, code)
        return 200, _completion(body, self._content(body, fault))


# ----------------------------------------------------------------------------------------------------------------
# Files and batches: records and validation

_TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class _StoredFile:
    """An uploaded file, or a batch's output or error file, kept in memory."""

    id: str
    data: bytes
    filename: str
    purpose: str
    created_at: int

    def object(self) -> dict:
        """Return the file object the API describes it with."""
        return {
            "id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
            "filename": self.filename, "purpose": self.purpose, "status": "processed", "status_details": None,
            "expires_at": None,
        }


@dataclass
class _Batch:
    """One batch: its request lines, the outcome it is heading for, and what has been observed so far."""

    id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    metadata: dict | None
    model: str | None
    lines: list[dict]  # {"custom_id", "body"} in file order
    created_wall: float
    created: float  # time.monotonic() at creation; statuses are worked out from it
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
        stamps = ("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at")
        return {
            "id": self.id, "object": "batch", "endpoint": self.endpoint, "model": self.model, "errors": self.errors,
            "input_file_id": self.input_file_id, "completion_window": self.completion_window, "status": self.status,
            "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
            "created_at": int(self.created_wall), "expires_at": int(self.created_wall) + 24 * 3600,
            **{name: self.stamps.get(name) for name in (*stamps, "cancelled_at")},
            "request_counts": self.counts or {"total": len(self.lines), "completed": 0, "failed": 0},
            "metadata": self.metadata,
        }


def _line_faults(faults: dict[str, str]) -> dict[str, str]:
    """Return a copy of the per-line faults, rejecting unknown kinds."""
    unknown = {kind for kind in faults.values() if kind not in get_args(BatchLineFault)}
    if unknown:
        raise ValueError(f"unknown batch line fault kinds {sorted(unknown)!r}")
    return dict(faults)


def _batch_faults(faults: list[str]) -> list[str]:
    """Return a copy of the whole-batch fault queue, rejecting unknown outcomes."""
    unknown = {kind for kind in faults if kind not in get_args(BatchFault)}
    if unknown:
        raise ValueError(f"unknown batch fault kinds {sorted(unknown)!r}")
    return list(faults)


def _result_line(batch_id: str, custom_id: str, response: dict | None, error: dict | None) -> dict:
    """Return one output or error file line; response, when given, is {"status_code", "body"}."""
    digest = hashlib.sha256(f"{batch_id}:{custom_id}".encode()).hexdigest()
    if response is not None:
        request_id = "req_" + digest[24:56]
        response = {"status_code": response["status_code"], "request_id": request_id, "body": response["body"]}
    return {"id": "batch_req_" + digest[:24], "custom_id": custom_id, "response": response, "error": error}


def _parse_multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]] | None:
    """Return {field name: (filename or None, value)} from a multipart/form-data body, or None if it is not one."""
    boundary = re.search(r'boundary="?([^";,]+)"?', content_type)
    if not content_type.startswith("multipart/form-data") or boundary is None:
        return None
    delimiter = b"\r\n--" + boundary[1].encode()
    sections = (b"\r\n" + raw).split(delimiter)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for section in sections[1:]:
        if section.startswith(b"--"):  # the closing delimiter
            return fields
        head, separator, value = section.partition(b"\r\n\r\n")
        if not separator:
            return None
        header_lines = (line.partition(":") for line in head.decode(errors="replace").split("\r\n"))
        headers = {key.strip().lower(): text.strip() for key, _, text in header_lines}
        disposition = headers.get("content-disposition", "")
        name = re.search(r'(?:^|;)\s*name="([^"]*)"', disposition)
        filename = re.search(r'(?:^|;)\s*filename="([^"]*)"', disposition)
        if name is None:
            return None
        fields[name[1]] = (filename[1] if filename else None, value)
    return None  # no closing delimiter: truncated


def _batch_problem(body: Any, files: dict[str, _StoredFile]) -> _Reply | tuple[list[dict], str | None]:
    """Return a 400 reply for an unacceptable batch request, else (its lines, the model they all use)."""

    def bad(message: str, param: str | None = None, code: str | None = "invalid_value") -> _Reply:
        return _Reply(400, _error(400, message, code, param))

    if not isinstance(body, dict):
        return bad("The request body must be a JSON object.", None, None)
    for name in ("input_file_id", "endpoint", "completion_window"):
        if not isinstance(body.get(name), str):
            return bad(f"Missing required parameter: '{name}'.", name, "missing_required_parameter")
    endpoint = body["endpoint"]
    if endpoint not in BATCH_ENDPOINTS:
        return bad(f"Invalid value for 'endpoint': {endpoint!r}; supported: {', '.join(BATCH_ENDPOINTS)}.", "endpoint")
    if endpoint != "/v1/chat/completions":
        return bad("The fake server only runs /v1/chat/completions batches.", "endpoint")
    if body["completion_window"] != "24h":
        message = f"Invalid value for 'completion_window': {body['completion_window']!r}. Supported values are: '24h'."
        return bad(message, "completion_window")
    problem = _metadata_problem(body.get("metadata"))
    if problem:
        return bad(problem, "metadata")
    stored = files.get(body["input_file_id"])
    if stored is None:
        return bad(f"Invalid 'input_file_id': {body['input_file_id']!r}. No such file.", "input_file_id")
    if stored.purpose != "batch":
        return bad(f"The input file must have purpose 'batch', not {stored.purpose!r}.", "input_file_id")
    if len(stored.data) > MAX_BATCH_FILE_BYTES:
        return bad(f"The input file is larger than the maximum of {MAX_BATCH_FILE_BYTES} bytes.", "input_file_id")
    lines: list[dict] = []
    seen: set[str] = set()
    for number, text in enumerate(stored.data.split(b"\n"), start=1):
        if not text.strip():
            continue
        problem, line = _line_problem(text, endpoint, seen)
        if problem:
            return bad(f"Line {number} of the input file: {problem}", "input_file_id", "invalid_batch_line")
        seen.add(line["custom_id"])
        lines.append({"custom_id": line["custom_id"], "body": line["body"]})
        if len(lines) > MAX_BATCH_LINES:
            return bad(f"The input file has more than {MAX_BATCH_LINES} requests.", "input_file_id")
    if not lines:
        return bad("The input file contains no requests.", "input_file_id")
    models = list(dict.fromkeys(line["body"].get("model") for line in lines))
    if len(models) > 1:
        return bad(f"All requests in a batch must use the same model; found {models!r}.", "input_file_id")
    return lines, models[0] if isinstance(models[0], str) else None


def _line_problem(text: bytes, endpoint: str, seen: set[str]) -> tuple[str | None, dict]:
    """Return (what is wrong with one input line or None, the parsed line)."""
    try:
        line = json.loads(text)
    except ValueError:
        return "not valid JSON.", {}
    if not isinstance(line, dict):
        return "must be a JSON object.", {}
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return "'custom_id' must be a non-empty string.", line
    if custom_id in seen:
        return f"duplicate custom_id {custom_id!r}; custom_id values must be unique within a batch.", line
    if line.get("method") != "POST":
        return f"'method' must be 'POST', not {line.get('method')!r}.", line
    if line.get("url") != endpoint:
        return f"'url' {line.get('url')!r} does not match the batch endpoint {endpoint!r}.", line
    if not isinstance(line.get("body"), dict):
        return "'body' must be a JSON object.", line
    return None, line


def _metadata_problem(metadata: Any) -> str | None:
    """Return what is wrong with batch metadata (at most 16 string pairs, keys to 64 and values to 512), or None."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        return "'metadata' must be an object of string keys and values."
    if len(metadata) > MAX_METADATA_PAIRS:
        return f"'metadata' has {len(metadata)} pairs; at most {MAX_METADATA_PAIRS} are allowed."
    for key, value in metadata.items():
        if not isinstance(value, str) or len(key) > 64 or len(value) > 512:
            return "'metadata' keys must be strings of at most 64 characters and values strings of at most 512."
    return None


def _retry_headers(fault: Fault) -> dict[str, str]:
    """Return the Retry-After headers a status fault carries."""
    headers = {"retry-after": fault.retry_after, "retry-after-ms": fault.retry_after_ms}
    return {name: value for name, value in headers.items() if value is not None}


def main(argv: list[str] | None = None) -> int:
    """Run the server in the foreground until SIGINT or SIGTERM, printing its base URL once ready."""
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.openai_server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every chat completion")
    parser.add_argument("--api-key", default=None, help="reject requests without `Authorization: Bearer <key>`")
    parser.add_argument("--batch-seconds", type=float, default=0.5, help="seconds from batch creation to completed")
    args = parser.parse_args(argv)
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    options = {"latency_seconds": args.latency, "port": args.port, "expected_api_key": args.api_key}
    with FakeOpenAIServer(**options, batch_seconds=args.batch_seconds) as server:
        print(server.base_url, flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
