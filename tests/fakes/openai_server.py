"""A local OpenAI-compatible HTTP server, so tests and benchmarks never reach the paid remote API.

    with FakeOpenAIServer(faults=[Fault("status", status=429, retry_after="1")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test")

Or as a process: `python -m tests.fakes.openai_server --port 8011 --latency 0.2` prints its base URL when ready.
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
from urllib.parse import urlsplit

__all__ = ["MODEL_IDS", "Fault", "FakeOpenAIServer", "RecordedRequest", "instance_from_schema", "main"]

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

FaultKind = Literal["status", "drop_connection", "slow", "invalid_json", "schema_mismatch"]


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
    """What a client sent: header names are lower-cased; body is the parsed JSON, or None."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


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


def _error(status: int, message: str, code: str | None = None) -> dict:
    """Return an OpenAI-style error body."""
    if status == 429:
        kind = "requests"
    elif status >= 500:
        kind = "server_error"
    else:
        kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# ----------------------------------------------------------------------------------------------------------------
# Server


@dataclass
class _Reply:
    """A response to write: status, JSON body and extra headers."""

    status: int
    body: dict
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
    server: _HTTPServer

    def do_GET(self) -> None:
        """Serve any method the same way; routing happens in FakeOpenAIServer."""
        fake = self.server.fake
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=self._read_json(),
        )
        try:
            reply = fake._respond(request)
        except Exception:  # a bug in the fake should reach the client as a 500, not a hung connection
            traceback.print_exc()
            reply = _Reply(500, _error(500, "The fake server failed; see its stderr."))
        if reply is None:
            self.close_connection = True
        else:
            self._write(reply)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _read_json(self) -> Any:
        """Return the request body parsed as JSON, or None when it is absent or not JSON."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _write(self, reply: _Reply) -> None:
        """Send reply as JSON with a Content-Length, keeping the connection open."""
        payload = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers.items():
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
    ) -> None:
        self.latency_seconds = latency_seconds
        # `responder(body)` may return the reply object for a request (e.g. a well-formed conversation for an
        # end-to-end test); None falls back to a generated schema instance.
        self.responder = responder
        self.expected_api_key = expected_api_key
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._plan = _FaultPlan(list(faults or []))
        self._requests: list[RecordedRequest] = []
        self._completions_served = 0
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
    def completions_served(self) -> int:
        """How many chat completions were answered with status 200."""
        with self._lock:
            return self._completions_served

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received, oldest first."""
        with self._lock:
            return list(self._requests)

    def set_faults(self, faults: list[Fault]) -> None:
        """Replace the fault list; its queue and `every` counting start afresh."""
        with self._lock:
            self._plan = _FaultPlan(list(faults))

    def stop(self) -> None:
        """Stop serving, close every connection and join every thread; safe to call twice."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.close_connections(timeout=5)
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def _respond(self, request: RecordedRequest) -> _Reply | None:
        """Record request and return its reply, or None to drop the connection."""
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
        return _Reply(404, _error(404, f"Unknown request URL: {request.method} {request.path}.", "unknown_url"))

    def _chat(self, body: Any) -> _Reply | None:
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
        if fault is not None and fault.kind == "slow":
            self._stopping.wait(fault.delay_seconds)
        scripted = self.responder(body) if self.responder and not fault else None
        if scripted is not None:
            content = json.dumps(scripted, ensure_ascii=False)
        else:
            content = _reply_content(body, fault.kind if fault else None)
        with self._lock:
            self._completions_served += 1
        return _Reply(200, _completion(body, content), dict(_RATE_LIMIT_HEADERS))


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
    args = parser.parse_args(argv)
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    with FakeOpenAIServer(latency_seconds=args.latency, port=args.port, expected_api_key=args.api_key) as server:
        print(server.base_url, flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
