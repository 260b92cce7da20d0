"""The one asynchronous chat-completions client every model call goes through.

One event loop per process runs all requests; callers in any thread (the runner's item threads, several Prefect
tasks in one process) block on their own request while the loop multiplexes them. One `ChatClient` per base URL
and key is shared by everything in the process, so its concurrency limit holds across stages and tasks.
`ChatClient.slots` is the same limit for a caller's thread: the backend holds a slot from sending a request until
its reply is stored, so a process killed at any moment has at most `concurrency` requests sent and not yet kept
(a resumed run sends only those again).

Retries are ours (the SDK's are off, so they do not multiply): on 429, 5xx, timeouts and dropped connections,
wait and try again, at most `max_attempts` times. The wait honours `retry-after-ms`, then `Retry-After`
(seconds, fractional allowed, or an HTTP date), else grows exponentially with full jitter. A 429, or a reply
saying no requests remain (`x-ratelimit-remaining-requests: 0`), pauses every request of the client until the
limit resets (`Retry-After` or `x-ratelimit-reset-requests`, e.g. `1s`, `6m0s`, `250ms`).

Requests go through the SDK's generic `post` (its documented way to reach any endpoint) with the body as we built
it, not through `chat.completions.create`: the typed method walks every request through a parameter transform
that costs about 0.6 ms of CPU per call, which at 160 calls per second is a tenth of one core. The SDK still does
the HTTP, the auth header and the mapping of status codes to its exception classes.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass

import httpx2
import openai

from benchcurate.curation.errors import BackendUnavailable, ModelRequestRejected, UserError


class MalformedReply(Exception):
    """A 200 whose body is not a chat completion (a proxy's error page, a truncated body): retried."""


RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError, openai.APITimeoutError,
             MalformedReply)
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 60.0
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


@dataclass(frozen=True)
class ChatReply:
    content: str
    input_tokens: int
    output_tokens: int
    attempts: int


def parse_duration(text: str | None) -> float | None:
    """Seconds in an OpenAI reset header ('1s', '6m0s', '250ms', '1h2m3.5s'), or None."""
    if not text:
        return None
    parts = DURATION_PART.findall(text.strip())
    if not parts or "".join(number + unit for number, unit in parts) != text.strip():
        return None
    factor = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * factor[unit] for number, unit in parts)


def retry_after_seconds(headers) -> float | None:
    """The server's requested wait: retry-after-ms, then Retry-After (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def backoff_seconds(attempt: int, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
    return rng.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** attempt))


def parse_completion(content: bytes, attempts: int) -> ChatReply:
    """The first choice's text and the token usage of a chat-completion body."""
    try:
        completion = json.loads(content)
        message = completion["choices"][0]["message"]
        usage = completion.get("usage") or {}
        return ChatReply(content=message.get("content") or "", input_tokens=int(usage.get("prompt_tokens") or 0),
                         output_tokens=int(usage.get("completion_tokens") or 0), attempts=attempts)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
        raise MalformedReply(f"not a chat completion ({type(error).__name__}: {error}): "
                             f"{content[:200]!r}") from error


class _Loop:
    """A daemon thread running one asyncio loop for the whole process."""

    _instance: _Loop | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="model-client-loop", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> _Loop:
        with cls._lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = _Loop()
            return cls._instance

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


class ChatClient:
    """Chat completions with a concurrency limit, shared pauses and retries; `create` is called from any thread."""

    def __init__(self, base_url: str, api_key: str, *, concurrency: int, timeout_seconds: float, max_attempts: int):
        self.base_url = base_url
        self.max_attempts = max_attempts
        self._loop = _Loop.get()
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout_seconds, max_retries=0)
        self._semaphore = self._loop.run(self._make_semaphore(concurrency))
        self.slots = threading.BoundedSemaphore(concurrency)
        self._pause_until = 0.0
        self._rng = random.Random()
        self.requests_sent = 0

    @staticmethod
    async def _make_semaphore(concurrency: int) -> asyncio.Semaphore:
        return asyncio.Semaphore(concurrency)

    def create(self, body: dict) -> ChatReply:
        return self._loop.run(self._create(body))

    async def _wait_for_pause(self) -> None:
        while (delay := self._pause_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def _pause(self, seconds: float) -> None:
        self._pause_until = max(self._pause_until, time.monotonic() + seconds)

    def _note_limits(self, headers) -> None:
        if headers.get("x-ratelimit-remaining-requests") == "0":
            self._pause(parse_duration(headers.get("x-ratelimit-reset-requests")) or 1.0)

    async def _create(self, body: dict) -> ChatReply:
        last_error: Exception | None = None
        for attempt in range(self.max_attempts):
            await self._wait_for_pause()
            async with self._semaphore:
                try:
                    self.requests_sent += 1
                    response = await self._client.post("/chat/completions", body=body, cast_to=httpx2.Response)
                    self._note_limits(response.headers)
                    return parse_completion(response.content, attempt + 1)
                except RETRYABLE as error:
                    last_error = error
                    headers = getattr(getattr(error, "response", None), "headers", None)
                    wait = retry_after_seconds(headers)
                    if isinstance(error, openai.RateLimitError):
                        self._pause(wait if wait is not None else backoff_seconds(attempt, self._rng))
                except openai.AuthenticationError as error:
                    raise UserError(f"the server at {self.base_url} rejected the API key (HTTP 401); check "
                                    f"OPENAI_API_KEY") from error
                except openai.APIStatusError as error:  # 400, 403, 404, 422: this request, not the server
                    raise ModelRequestRejected(f"HTTP {error.status_code} from {self.base_url}: "
                                               f"{error.message}") from error
            await asyncio.sleep(wait if wait is not None else backoff_seconds(attempt, self._rng))
        raise BackendUnavailable(f"model server at {self.base_url} still failing after {self.max_attempts} attempts "
                                 f"({type(last_error).__name__}: {last_error}); rerun with the same --run-id to "
                                 f"resume: finished replies are cached") from last_error


_CLIENTS: dict[tuple, ChatClient] = {}
_CLIENTS_LOCK = threading.Lock()


def shared_client(base_url: str, api_key: str, *, concurrency: int, timeout_seconds: float,
                  max_attempts: int) -> ChatClient:
    """The process's client for this server and key: one concurrency limit for every caller."""
    key = (base_url, hashlib.sha256(api_key.encode()).hexdigest(), concurrency, timeout_seconds, max_attempts)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = ChatClient(base_url, api_key, concurrency=concurrency, timeout_seconds=timeout_seconds,
                                       max_attempts=max_attempts)
        return _CLIENTS[key]
