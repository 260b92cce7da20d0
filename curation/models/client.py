"""The one asynchronous chat-completions client every model call goes through.

One event loop per process runs all requests; callers in any thread (the runner's item threads, several Prefect
tasks in one process) block on their own request while the loop multiplexes them. One `ChatClient` per base URL
and key is shared by everything in the process, so its concurrency limit holds across stages and tasks.
`ChatClient.slots` is the same limit for a caller's thread: the backend holds a slot from sending a request until
its reply is stored, so a process killed at any moment has at most `concurrency` requests sent and not yet kept
(a resumed run sends only those again).

Retries are the SDK's (`max_retries`): 408, 409, 429, 5xx, timeouts and dropped connections, waiting what
`retry-after-ms` or `Retry-After` asks (seconds or an HTTP date, up to two minutes), else exponential backoff with
jitter. Two things the SDK does not do are ours:
- a client-wide pause: a 429, or a reply saying no requests remain (`x-ratelimit-remaining-requests: 0`), holds
  back every request of the client not yet sent until the limit resets (`x-ratelimit-reset-requests`, e.g. `1s`,
  `6m0s`, `250ms`, else a numeric `Retry-After`, else a second), so 32 requests do not each find out alone;
- a 200 whose body is not a chat completion (a proxy's error page, a truncated body) is asked again.

Requests go through the SDK's generic `post` (its documented way to reach any endpoint) with the body as we built
it, not through `chat.completions.create`: the typed method walks every request through a parameter transform
that costs about 0.6 ms of CPU per call, which at 160 calls per second is a tenth of one core. The SDK still does
the HTTP, the auth header, the retries and the mapping of status codes to its exception classes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass

import httpx2
import openai

from benchcurate.curation.core.errors import BackendUnavailable, ModelRequestRejected, UserError
from benchcurate.curation.core.secrets import register
from benchcurate.curation.models.identity import without_credentials


class MalformedReply(Exception):
    """A 200 whose body is not a chat completion: asked again."""


GAVE_UP = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APIConnectionError,
    openai.APITimeoutError,
    openai.ConflictError,
    MalformedReply,
)
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
DEFAULT_PAUSE_SECONDS = 1.0


@dataclass(frozen=True)
class ChatReply:
    content: str
    input_tokens: int
    output_tokens: int
    attempts: int


def parse_duration(text: str | None) -> float | None:
    """Seconds in an OpenAI rate-limit reset header ('1s', '6m0s', '250ms', '1h2m3.5s'), or None."""
    if not text:
        return None
    parts = DURATION_PART.findall(text.strip())
    if not parts or "".join(number + unit for number, unit in parts) != text.strip():
        return None
    factor = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * factor[unit] for number, unit in parts)


def _seconds(text: str | None) -> float | None:
    try:
        return max(0.0, float(text)) if text else None
    except ValueError:
        return None


def parse_completion(content: bytes, attempts: int) -> ChatReply:
    """The first choice's text and the token usage of a chat-completion body."""
    try:
        completion = json.loads(content)
        message = completion["choices"][0]["message"]
        usage = completion.get("usage") or {}
        return ChatReply(
            content=message.get("content") or "",
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            attempts=attempts,
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
        raise MalformedReply(f"not a chat completion ({type(error).__name__}: {error}): {content[:200]!r}") from error


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
    """Chat completions with a concurrency limit, a shared pause and retries; `create` is called from any thread."""

    def __init__(self, base_url: str, api_key: str, *, concurrency: int, timeout_seconds: float, max_attempts: int):
        self._url = base_url  # may hold user:password (with_credentials); never printed
        self.base_url, userinfo = without_credentials(base_url)
        # what must never reach a message, a stored error or a log: a server may echo the request's headers
        register(api_key)
        register(userinfo)
        self.max_attempts = max_attempts
        self.requests_sent = 0
        self._pause_until = 0.0
        self._loop = _Loop.get()
        self._client, self._semaphore = self._loop.run(self._start(api_key, concurrency, timeout_seconds))
        self.slots = threading.BoundedSemaphore(concurrency)

    async def _start(
        self, api_key: str, concurrency: int, timeout_seconds: float
    ) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        http = openai.DefaultAsyncHttpx2Client(
            event_hooks={"request": [self._on_request], "response": [self._on_response]}
        )
        sdk = openai.AsyncOpenAI(
            base_url=self._url,
            api_key=api_key,
            timeout=timeout_seconds,
            max_retries=self.max_attempts - 1,
            http_client=http,
        )
        return sdk, asyncio.Semaphore(concurrency)

    def create(self, body: dict) -> ChatReply:
        return self._loop.run(self._create(body))

    async def _on_request(self, request: httpx2.Request) -> None:
        self.requests_sent += 1

    async def _on_response(self, response: httpx2.Response) -> None:
        """Every HTTP reply, retried ones included: a 429 or an exhausted request budget pauses the client."""
        headers = response.headers
        reset = parse_duration(headers.get("x-ratelimit-reset-requests"))
        if response.status_code == 429:
            self._pause(reset or _seconds(headers.get("retry-after")) or DEFAULT_PAUSE_SECONDS)
        elif headers.get("x-ratelimit-remaining-requests") == "0":
            self._pause(reset or DEFAULT_PAUSE_SECONDS)

    @property
    def paused_for(self) -> float:
        """Seconds until requests of this client may be sent again (0 when they may now)."""
        return max(0.0, self._pause_until - time.monotonic())

    def _pause(self, seconds: float) -> None:
        self._pause_until = max(self._pause_until, time.monotonic() + seconds)

    async def _wait_for_pause(self) -> None:
        while (delay := self._pause_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    async def _post(self, body: dict) -> tuple[bytes, int]:
        """One request as the SDK sends it, its retries included: (body, HTTP attempts it took)."""
        await self._wait_for_pause()
        async with self._semaphore:
            try:
                response = await self._client.post("/chat/completions", body=body, cast_to=httpx2.Response)
            except openai.AuthenticationError as error:
                raise UserError(
                    f"the server at {self.base_url} rejected the API key (HTTP 401); check OPENAI_API_KEY"
                ) from error
            except GAVE_UP:
                raise
            except openai.APIStatusError as error:  # 400, 403, 404, 422: this request, not the server
                raise ModelRequestRejected(f"HTTP {error.status_code} from {self.base_url}: {error.message}") from None
        return response.content, 1 + int(response.request.headers.get("x-stainless-retry-count", "0"))

    async def _create(self, body: dict) -> ChatReply:
        attempts = 0
        try:
            for round_ in range(self.max_attempts):
                content, taken = await self._post(body)
                attempts += taken
                try:
                    return parse_completion(content, attempts)
                except MalformedReply:
                    if round_ == self.max_attempts - 1:
                        raise
                    await asyncio.sleep(random.uniform(0, min(8.0, 0.5 * 2**round_)))
        except GAVE_UP as error:
            attempts += 0 if isinstance(error, MalformedReply) else self.max_attempts  # the SDK used all of its own
            raise BackendUnavailable(
                f"model server at {self.base_url} still failing after {attempts} attempts "
                f"({type(error).__name__}: {error}); rerun with the same --run-id to resume: finished replies "
                f"are cached"
            ) from None
        raise AssertionError("unreachable: the last round returns or raises")


_CLIENTS: dict[tuple, ChatClient] = {}
_CLIENTS_LOCK = threading.Lock()


def shared_client(
    base_url: str, api_key: str, *, concurrency: int, timeout_seconds: float, max_attempts: int
) -> ChatClient:
    """The process's client for this server and key: one concurrency limit for every caller."""
    key = (base_url, hashlib.sha256(api_key.encode()).hexdigest(), concurrency, timeout_seconds, max_attempts)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = ChatClient(
                base_url, api_key, concurrency=concurrency, timeout_seconds=timeout_seconds, max_attempts=max_attempts
            )
        return _CLIENTS[key]
