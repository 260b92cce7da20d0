"""Talking to the Hugging Face Hub (or any server speaking its API, at HF_ENDPOINT): the token, the address, and
one translation of what goes wrong into a line that says what to do.

The token is read from HF_TOKEN only, handed to huggingface_hub and never formatted into a message: errors are
rebuilt from the status, the Hub's own error text and the repo, not from the request.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from benchcurate.curation.core.errors import BackendUnavailable, UserError

NETWORK_HINT = "check the network and HF_ENDPOINT"
TIMEOUT_VARIABLE = "BENCHCURATE_HUB_TIMEOUT"
DEFAULT_TIMEOUT = 120.0  # seconds a Hub request may go without a byte either way before it is retried
CONNECT_SECONDS = 20.0
_limited: list[float] = []  # the limit installed in huggingface_hub's shared client, once per process


def hub_timeout() -> float:
    """Seconds a Hub request may stall (BENCHCURATE_HUB_TIMEOUT, default 120): huggingface_hub waits for ever."""
    text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    try:
        seconds = float(text) if text else DEFAULT_TIMEOUT
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise UserError(
            f"{TIMEOUT_VARIABLE}={text!r} is not a number of seconds above 0; unset it for {DEFAULT_TIMEOUT:g}"
        )
    return seconds


def limit_stalls() -> None:
    """Give huggingface_hub's shared HTTP client a limit on silence (its own has none: a connection the Hub or the
    network drops without a reset would hang an upload for ever); it retries a request that times out, as it does
    one that fails to connect, and then fails with the timeout."""
    seconds = hub_timeout()
    if _limited == [seconds]:
        return
    import httpx2
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    plain = _http.default_client_factory

    def limited() -> httpx2.Client:
        client = plain()
        client.timeout = httpx2.Timeout(seconds, connect=min(CONNECT_SECONDS, seconds))
        return client

    set_client_factory(limited)
    _limited[:] = [seconds]


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT.rstrip("/")


def write_token() -> str:
    token = os.environ.get("HF_TOKEN", "").strip()
    if not token:
        raise UserError("uploading needs a Hugging Face token in HF_TOKEN (a write token for the dataset repo)")
    return token


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _server_text(error: BaseException) -> str:
    """The Hub's own reason (its X-Error-Message header or JSON `error`), without the URL or request id."""
    response = getattr(error, "response", None)
    if response is None:
        return ""
    message = response.headers.get("X-Error-Message", "")
    if not message:
        with contextlib.suppress(ValueError, AttributeError):
            body = response.json()
            message = body.get("error", "") if isinstance(body, dict) else ""
    return str(message).strip()


def _classes(error: BaseException) -> set[str]:
    return {cls.__module__.split(".")[0] + "." + cls.__name__ for cls in type(error).__mro__}


def _is_timeout(error: BaseException) -> bool:
    """A request that was under way and then went silent (one that never connected is a network failure)."""
    return bool(
        _classes(error) & {f"{lib}.{kind}" for lib in ("httpx2", "httpx") for kind in ("ReadTimeout", "WriteTimeout")}
    )


def _is_network(error: BaseException) -> bool:
    return bool(_classes(error) & {"httpx2.TransportError", "httpx.TransportError"}) or isinstance(
        error, (ConnectionError, TimeoutError)
    )


def _reachable(timeout: float = 5) -> bool:
    """Whether the Hub answers HTTP at all now (any status counts)."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(f"{endpoint()}/api/whoami-v2", timeout=timeout).close()
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False
    return True


@contextlib.contextmanager
def hub_failures(doing: str, repo: str, resume: str = "", writing: bool = True) -> Iterator[None]:
    """Turn huggingface_hub's and the network's errors while `doing` (e.g. "uploading to") into one line naming the
    repo, the cause and what to do: UserError for what the user must change (exit 2), BackendUnavailable for a Hub
    that is down, busy or failing (exit 3), with `resume` (what a rerun does) added where a rerun helps."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    limit_stalls()
    try:
        yield
    except (UserError, BackendUnavailable):
        raise
    except Exception as error:  # sorted below, re-raised when not ours
        chain = list(_chain(error))
        if any(isinstance(cause, OfflineModeIsEnabled) for cause in chain):
            raise UserError(
                f"{doing} {repo} needs the Hub and HF_HUB_OFFLINE is set (and no copy is cached); unset it"
            ) from error
        for cause in chain:
            if isinstance(cause, HfHubHTTPError) and cause.response is not None:
                raise _http_failure(doing, repo, cause, resume, writing) from error
            if _is_timeout(cause):
                raise BackendUnavailable(
                    f"{doing} {repo} failed: the Hub at {endpoint()} went {hub_timeout():g} s without answering "
                    f"({TIMEOUT_VARIABLE} sets the limit); {NETWORK_HINT}{resume}"
                ) from error
            if _is_network(cause):
                raise BackendUnavailable(
                    f"{doing} {repo} failed: the Hub at {endpoint()} could not be reached "
                    f"({type(cause).__name__}); {NETWORK_HINT}{resume}"
                ) from error
        if resume:  # a transfer cut off some other way: what was sent is still on the Hub
            root = chain[-1]
            if not _reachable():  # e.g. huggingface_hub closes its client on one thread's network error
                raise BackendUnavailable(
                    f"{doing} {repo} failed: the Hub at {endpoint()} could not be reached "
                    f"({type(root).__name__}); {NETWORK_HINT}{resume}"
                ) from error
        raise


def _http_failure(doing: str, repo: str, error, resume: str, writing: bool) -> Exception:
    """The one line for an HTTP error of the Hub (or of the file storage it sent us to)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    status, text = error.response.status_code, _server_text(error)
    said = f" ({text})" if text else ""
    try:
        url = str(error.response.request.url)
    except (AttributeError, RuntimeError):
        url = endpoint()
    if isinstance(error, GatedRepoError):
        return UserError(
            f"{doing} {repo}: the repo is gated; accept its conditions on the Hub with the account of HF_TOKEN{said}"
        )
    if isinstance(error, RepositoryNotFoundError):
        return UserError(
            f"{doing} {repo}: no such repo on the Hub at {endpoint()}, or a private one that "
            f"{'the token in HF_TOKEN' if os.environ.get('HF_TOKEN') else 'no token (HF_TOKEN)'} can "
            f"read; check the name"
        )
    if isinstance(error, RevisionNotFoundError):
        return UserError(
            f"{doing} {repo}: the repo has no such revision{said}; check the tag (curate publish prints each version's)"
        )
    if not url.startswith(endpoint()):  # the file storage (pre-signed URLs): expired or failing, not the token
        return BackendUnavailable(f"{doing} {repo}: the Hub's file storage answered {status}{said}{resume}")
    access = "write to" if writing else "read"
    told = {
        401: f"the Hub does not accept the token in HF_TOKEN{said}; set a valid token",
        403: f"the token in HF_TOKEN may not {access} this repo{said}; use a token that may",
        404: f"not found on the Hub at {endpoint()}{said}; check the name",
        409: f"the Hub has it already{said}",
        412: f"main changed while publishing (another publish?){said}; run the same command again",
    }
    if status in told:
        return UserError(f"{doing} {repo}: {told[status]}")
    if status in (408, 429) or status >= 500:
        return BackendUnavailable(f"{doing} {repo}: the Hub answered {status}{said}{resume}")
    return UserError(f"{doing} {repo}: the Hub answered {status}{said}")
