"""OpenAI-protocol backend (OpenAI, vLLM, Ollama, any compatible base URL) on the shared async client.

- Structured outputs: every call sends the prompt's pydantic schema as a strict JSON-schema response format. A
  reply that does not validate is asked for once more with the validation error; a second failure raises
  ModelOutputInvalid with the raw reply, which the runner records as a drop.
- Request cache: each valid reply is stored (sqlite, `ctx.cache` or `backend.request_cache`) as soon as it arrives,
  keyed by base URL, model, the rendered messages (images by content hash and send size), parameters and the
  prompt file's hash; a rerun or a resumed run sends no request that already succeeded. `--refresh-cache` asks
  again (and stores the new replies).
- Images go as JPEG data URLs downscaled to `image_max_side_px`, or as URLs from `image_url_template`.
- Tokens and cost of every new call are recorded per item (`curation.models.usage`) and checked against the
  budget before sending.
The API key is read from OPENAI_API_KEY here and nowhere else; it never enters configs, run files or logs.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import openai
from pydantic import BaseModel, ValidationError

from benchcurate.curation.core.cache import Cache
from benchcurate.curation.core.decode import decode_image
from benchcurate.curation.core.errors import (
    BackendUnavailable,
    Interrupted,
    ModelOutputInvalid,
    ModelReplyTooLarge,
    UserError,
)
from benchcurate.curation.core.fingerprint import sha256_json
from benchcurate.curation.models.base import ModelRequest, ModelResult, generation_for
from benchcurate.curation.models.batch import DeferredToBatch, PendingRequest
from benchcurate.curation.models.client import shared_client
from benchcurate.curation.models.identity import (
    OPENAI_DEFAULT_BASE_URL,
    backend_identity,
    resolved_base_url,
    with_credentials,
)
from benchcurate.curation.models.pricing import Budget, cost_usd, counted_tokens, estimate_input_tokens, price_for
from benchcurate.curation.models.usage import record
from benchcurate.schemas import BackendSpec, ImageRef, ModelUsage
from benchcurate.schemas.replies import TextReply

KEYLESS_PLACEHOLDER = "not-needed"  # local servers (vLLM, Ollama) accept any key
REPLY_NAMESPACE = "model_reply"
LOGGER = logging.getLogger(__name__)
PAYLOAD_NAMESPACE = "image_payload"  # encoded, downscaled images as sent


@cache
def strict_schema(model: type[BaseModel]) -> dict:
    """The model's JSON schema in the form OpenAI's strict structured outputs accept.

    Every object lists all its properties as required and allows no others; a `$ref` that carries other
    keywords (pydantic writes a field's description next to it) is replaced by the definition it names, the
    node's own keywords winning; a single-entry `allOf` is merged into its node; `default: null` is dropped
    (a nullable field stays nullable). The result equals the openai SDK's own transform
    (tests/curation/test_strict_schema.py holds the two side by side for every reply model).
    """
    root = model.model_json_schema()
    return _strict_node(root, root)


def _strict_node(node: dict, root: dict) -> dict:
    """One schema node made strict (a new dict; `root` is only read, to resolve references)."""
    node = dict(node)
    merged = None
    if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
        (only,) = node.pop("allOf")
        merged = {**node, **only}
    elif isinstance(node.get("$ref"), str) and len(node) > 1:
        merged = {**_definition(root, node.pop("$ref")), **node}
    if merged is not None:
        return _strict_node(merged, root)
    if node.get("type") == "object":
        node.setdefault("additionalProperties", False)
    for key in ("$defs", "definitions", "properties"):
        if isinstance(node.get(key), dict):
            node[key] = {name: _strict_node(child, root) for name, child in node[key].items()}
    if isinstance(node.get("properties"), dict):
        node["required"] = list(node["properties"])
    if isinstance(node.get("items"), dict):
        node["items"] = _strict_node(node["items"], root)
    for key in ("anyOf", "allOf"):
        if isinstance(node.get(key), list):
            node[key] = [_strict_node(child, root) for child in node[key]]
    if "default" in node and node["default"] is None:
        del node["default"]
    return node


def _definition(root: dict, ref: str) -> dict:
    """The node a local `#/a/b` reference names."""
    if not ref.startswith("#/"):
        raise ValueError(f"only local schema references are supported, not {ref!r}")
    node: object = root
    for part in ref[2:].split("/"):
        node = node[part] if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise ValueError(f"schema reference {ref!r} does not name an object")
    return node


def encode_image(image: ImageRef, max_side_px: int) -> tuple[bytes, tuple[int, int]]:
    """The image as JPEG bytes, downscaled so its longest side is at most `max_side_px`; and the size sent."""
    picture = decode_image(Path(image.path), draft_side_px=max_side_px).image
    picture.thumbnail((max_side_px, max_side_px))
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue(), picture.size


def image_data_url(image: ImageRef, max_side_px: int, cache: Cache | None = None) -> tuple[str, tuple[int, int]]:
    """A JPEG data URL of the image; encoded once per image and size (every model stage sends the same image)."""
    key = f"{image.sha256}:{max_side_px}:jpeg90"
    stored = cache.get(PAYLOAD_NAMESPACE, key) if cache is not None else None
    if isinstance(stored, dict) and Path(stored["path"]).exists():
        data, size = Path(stored["path"]).read_bytes(), tuple(stored["size"])
    else:
        data, size = encode_image(image, max_side_px)
        if cache is not None:
            cache.put(PAYLOAD_NAMESPACE, key, {"path": str(cache.blob(data)), "size": list(size)})
    return "data:image/jpeg;base64," + base64.b64encode(data).decode(), size


def api_key_for(spec: BackendSpec) -> str:
    key = os.environ.get("OPENAI_API_KEY")
    if not key and resolved_base_url(spec) == OPENAI_DEFAULT_BASE_URL:
        raise UserError(
            "--backend openai against api.openai.com needs OPENAI_API_KEY in the environment "
            "(or use --backend offline, the default)"
        )
    return key or KEYLESS_PLACEHOLDER


class OpenAIBackend:
    label = "openai"

    def __init__(
        self, spec: BackendSpec, cache: Cache | None = None, budget: Budget | None = None, api_key: str | None = None
    ):
        if not spec.model:
            raise UserError(
                "the openai backend needs a model name: pass --model NAME (or set backend.model in the recipe)"
            )
        self.spec = spec
        self.model = spec.model
        self.base_url = resolved_base_url(spec)
        self.concurrency = spec.concurrency
        self.cache = cache
        self.budget = budget or Budget(spec.max_cost_usd)
        self._api_key = api_key if api_key is not None else api_key_for(spec)
        self._client = None
        self._deferred: dict[str, PendingRequest] | None = None
        self._stopped = threading.Event()
        self._exchanges = 0  # calls between taking a request slot and storing the reply
        self._idle = threading.Condition()

    @contextmanager
    def deferring(self) -> Iterator[dict[str, PendingRequest]]:
        """Inside the block, uncached requests are collected for a batch instead of sent (DeferredToBatch)."""
        self._deferred = {}
        try:
            yield self._deferred
        finally:
            self._deferred = None

    def stop_sending(self) -> None:
        """From now on no request is sent (Ctrl-C): a call that would send one raises Interrupted, a retry too."""
        self._stopped.set()

    def wait_idle(self, deadline: float) -> int:
        """Wait until the calls in flight have stored their replies, or until time.monotonic() reaches
        `deadline`; how many are still in flight (their replies will not be kept)."""
        with self._idle:
            while self._exchanges and (left := deadline - time.monotonic()) > 0:
                self._idle.wait(left)
            return self._exchanges

    @property
    def client(self):
        if self._client is None:
            self._client = shared_client(
                with_credentials(self.base_url),
                self._api_key,
                concurrency=self.spec.concurrency,
                timeout_seconds=self.spec.timeout_seconds,
                max_attempts=self.spec.max_retries + 1,
            )
        return self._client

    def identity(self) -> dict[str, str]:
        return backend_identity(self.spec)

    def check(self) -> None:
        sync = openai.OpenAI(base_url=with_credentials(self.base_url), api_key=self._api_key, timeout=30, max_retries=1)
        try:
            known = [entry.id for entry in sync.models.list()]
        except openai.AuthenticationError as error:
            raise UserError(
                f"the server at {self.base_url} rejected the API key (HTTP 401); check OPENAI_API_KEY"
            ) from error
        except (openai.APIConnectionError, openai.APITimeoutError) as error:
            raise BackendUnavailable(
                f"cannot reach the model server at {self.base_url}: start it or fix "
                f"--base-url, then rerun with the same --run-id to resume"
            ) from error
        except openai.PermissionDeniedError as error:
            raise UserError(
                f"the server at {self.base_url} refuses the API key (HTTP 403: {error.message}); check OPENAI_API_KEY"
            ) from None
        except openai.InternalServerError as error:
            raise BackendUnavailable(
                f"the model server at {self.base_url} is failing (HTTP {error.status_code}); "
                f"rerun with the same --run-id once it answers"
            ) from None
        except openai.APIStatusError:
            return  # some compatible servers do not list models (404, or another refusal); the first call will tell
        if known and self.model not in known:
            raise UserError(
                f"model '{self.model}' is not served at {self.base_url} (it serves: "
                f"{', '.join(sorted(known)[:10])}); pass --model with one of them"
            )

    # --- building a request --------------------------------------------------------------------------

    def _image_part(self, image: ImageRef) -> tuple[dict, tuple[int, int]]:
        side = self.spec.image_max_side_px
        if self.spec.image_transport == "url":
            if not self.spec.image_url_template:
                raise UserError(
                    "image_transport 'url' needs backend.image_url_template, e.g. https://host/images/{sha256}"
                )
            url = self.spec.image_url_template.format(sha256=image.sha256, name=Path(image.path).name)
            scale = min(1.0, side / max(image.width or side, image.height or side))
            return {"type": "image_url", "image_url": {"url": url}}, (
                int((image.width or side) * scale),
                int((image.height or side) * scale),
            )
        url, size = image_data_url(image, side, self.cache)
        return {"type": "image_url", "image_url": {"url": url}}, size

    def build(self, request: ModelRequest) -> tuple[dict, str, int]:
        """(request body, cache key, estimated input tokens); the key names images by content, not bytes."""
        rendered = request.prompt.render(request.variables)
        parts, sizes = [], []
        for image in request.images:
            part, size = self._image_part(image)
            parts.append(part)
            sizes.append(size)
        schema_model = request.prompt.output_schema
        model = request.model or self.model
        turns = [(turn.role, turn.text) for turn in request.history] + [("user", rendered.user)]
        messages = [{"role": "system", "content": rendered.system}] if rendered.system.strip() else []
        first_user = next(index for index, (role, _) in enumerate(turns) if role == "user")
        messages += [
            {"role": role, "content": [{"type": "text", "text": text}, *parts]}
            if index == first_user
            else {"role": role, "content": text}
            for index, (role, text) in enumerate(turns)
        ]
        body = {
            "model": model,
            "temperature": self.spec.temperature,
            "seed": request.seed % (2**31),
            "max_tokens": self.spec.max_output_tokens,
            "messages": messages,
        }
        if not _free_text(request):
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_model.__name__, "schema": strict_schema(schema_model), "strict": True},
            }
        key = sha256_json(
            {
                "base_url": self.base_url,
                "prompt_sha256": request.prompt.sha256,
                "body": {**body, "messages": [rendered.system, rendered.user]},
                **({"history": turns[:-1]} if request.history else {}),
                "images": [[image.sha256, size] for image, size in zip(request.images, sizes)],
                "image_transport": self.spec.image_transport,
            }
        )
        return body, key, estimate_input_tokens([rendered.system, *(text for _, text in turns)], sizes)

    # --- sending ---------------------------------------------------------------------------------------

    def _send(self, body: dict, estimated_tokens: int) -> tuple[str, ModelUsage]:
        if self._stopped.is_set():
            raise Interrupted("interrupted: no new model request is sent")
        price = price_for(self.spec.model_copy(update={"model": body["model"]}))
        estimate = cost_usd(price, estimated_tokens, self.spec.max_output_tokens) or 0.0
        self.budget.reserve(estimate)
        reply = None
        charged = (0, 0)
        try:
            reply = self.client.create(body)
            charged = counted_tokens(
                reply.input_tokens, reply.output_tokens, estimated_tokens, self.spec.max_output_tokens
            )
        finally:
            self.budget.settle(estimate, cost_usd(price, *charged) or 0.0)
        # what the server reported, where it is a count at all (the budget above charged at least our estimate)
        tokens = (
            reply.input_tokens if reply.input_tokens >= 0 else charged[0],
            reply.output_tokens if reply.output_tokens >= 0 else charged[1],
        )
        usage = ModelUsage(calls=1, input_tokens=tokens[0], output_tokens=tokens[1], cost_usd=cost_usd(price, *tokens))
        record(body["model"], usage)
        if len(reply.content) > self.spec.max_reply_chars:
            raise ModelReplyTooLarge(
                f"the reply has {len(reply.content):,} characters, over backend.max_reply_chars "
                f"({self.spec.max_reply_chars:,}); not kept"
            )
        return reply.content, usage

    def _cached(self, key: str, request: ModelRequest, model: str) -> ModelResult | None:
        if self.cache is None or self.spec.refresh_token:
            return None
        stored = self.cache.get(REPLY_NAMESPACE, key)
        if not isinstance(stored, dict):
            return None
        try:
            value, parsed = _read(request, stored.get("content") or "")
        except (ValidationError, ValueError):
            # a cache entry damaged on disk (or by hand) must not fail the item on every rerun: it is a miss, and
            # the fresh reply replaces it
            LOGGER.warning(
                "a cached %s reply did not parse; asking the model again (`--refresh-cache` asks again for every item)",
                request.prompt.id,
            )
            return None
        record(model, ModelUsage(cached_calls=1))
        return ModelResult(
            value=value, generation=generation_for(self, request.prompt, model), raw=stored["content"], parsed=parsed
        )

    def store(self, key: str, content: str, usage: ModelUsage) -> None:
        if self.cache is not None:
            self.cache.put(REPLY_NAMESPACE, key, {"content": content, "usage": usage.model_dump(mode="json")})

    def complete(self, request: ModelRequest) -> ModelResult:
        body, key, estimated = self.build(request)
        model = body["model"]
        cached = self._cached(key, request, model)
        if cached is not None:
            return cached
        if self._deferred is not None:
            price = price_for(self.spec.model_copy(update={"model": model}))
            estimate = cost_usd(price, estimated, self.spec.max_output_tokens, batch=True) or 0.0
            self._deferred[key] = PendingRequest(key, body, request.prompt.output_schema, estimate)
            raise DeferredToBatch(key)
        with self.client.slots:  # freed once the reply is stored, so a kill loses at most `concurrency` replies
            with self._idle:
                self._exchanges += 1
            try:
                return self._exchange(request, body, key, estimated)
            finally:
                with self._idle:
                    self._exchanges -= 1
                    self._idle.notify_all()

    def _exchange(self, request: ModelRequest, body: dict, key: str, estimated: int) -> ModelResult:
        model = body["model"]
        raw, usage = self._send(body, estimated)
        schema_model = request.prompt.output_schema
        try:
            value, parsed = _read(request, raw)
        except (ValidationError, ValueError) as first_error:
            retry = {
                **body,
                "messages": body["messages"]
                + [
                    {"role": "assistant", "content": raw},
                    {"role": "user", "content": _ask_again(request, first_error)},
                ],
            }
            raw, more = self._send(retry, estimated + len(raw) // 4)
            usage = usage.plus(more)
            try:
                value, parsed = _read(request, raw)
            except ValidationError as error:
                raise ModelOutputInvalid(
                    f"reply did not match {schema_model.__name__} twice: {error.error_count()} errors", raw=raw
                ) from error
            except ValueError as error:
                raise ModelOutputInvalid(f"reply not in the asked format twice: {error}", raw=raw) from error
        self.store(key, raw, usage)
        return ModelResult(value=value, generation=generation_for(self, request.prompt, model), raw=raw, parsed=parsed)


def _free_text(request: ModelRequest) -> bool:
    return request.prompt.output_schema is TextReply


def _read(request: ModelRequest, raw: str) -> tuple[BaseModel, object]:
    """(the reply as the prompt's schema, what the request's parser made of it); ValidationError or ValueError."""
    if not _free_text(request):
        return request.prompt.output_schema.model_validate_json(raw), None
    return TextReply(text=raw), request.parse(raw) if request.parse else None


def _ask_again(request: ModelRequest, error: Exception) -> str:
    if isinstance(error, ValidationError):
        return (
            "That reply does not match the required JSON schema:\n"
            f"{json.dumps(error.errors(include_url=False), default=str)}\nReply again with only valid JSON."
        )
    return f"That reply could not be read: {error}. Reply again, in exactly the format asked for."
