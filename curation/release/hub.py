"""Talking to the Hugging Face Hub (or any server speaking its API, at HF_ENDPOINT): the token, the address, and
one translation of what goes wrong into a line that says what to do.

The token is read from HF_TOKEN only, handed to huggingface_hub and never formatted into a message: errors are
rebuilt from the status, the Hub's own error text and the repo, not from the request.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from benchcurate.curation.errors import UserError

NETWORK_HINT = "check the network and HF_ENDPOINT"


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


def _is_network(error: BaseException) -> bool:
    names = {cls.__module__.split(".")[0] + "." + cls.__name__ for cls in type(error).__mro__}
    return bool(names & {"httpx2.TransportError", "httpx.TransportError"}) or isinstance(
        error, (ConnectionError, TimeoutError))


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
def hub_failures(doing: str, repo: str, after_network: str = "") -> Iterator[None]:
    """Turn huggingface_hub's and the network's errors while `doing` (e.g. "uploading to") into a UserError
    naming the repo, the cause and what to do; `after_network` is added when the network failed."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except UserError:
        raise
    except OfflineModeIsEnabled as error:
        raise UserError(f"{doing} {repo} needs the Hub, and HF_HUB_OFFLINE is set; unset it") from error
    except Exception as error:  # noqa: BLE001 - sorted below, re-raised when not ours
        for cause in _chain(error):
            if isinstance(cause, HfHubHTTPError) and cause.response is not None:
                raise UserError(_http_message(doing, repo, cause.response.status_code, _server_text(cause))) \
                    from error
            if _is_network(cause):
                raise UserError(f"{doing} {repo} failed: the Hub at {endpoint()} could not be reached "
                                f"({type(cause).__name__}); {NETWORK_HINT}{after_network}") from error
        if after_network:  # a transfer cut off some other way: what was sent is still on the Hub
            root = list(_chain(error))[-1]
            if not _reachable():  # e.g. huggingface_hub closes its client on one thread's network error
                raise UserError(f"{doing} {repo} failed: the Hub at {endpoint()} could not be reached "
                                f"({type(root).__name__}); {NETWORK_HINT}{after_network}") from error
            said = str(root).splitlines()[0][:200] if str(root) else ""
            raise UserError(f"{doing} {repo} stopped ({type(root).__name__}{': ' + said if said else ''})"
                            f"{after_network}") from error
        raise


def _http_message(doing: str, repo: str, status: int, text: str) -> str:
    said = f" ({text})" if text else ""
    if status == 401:
        return f"{doing} {repo}: the Hub does not accept the token in HF_TOKEN{said}; set a valid token"
    if status == 403:
        return (f"{doing} {repo}: the token in HF_TOKEN may not write to this repo{said}; use a token with write "
                f"access to it")
    if status == 409:
        return f"{doing} {repo}: the Hub has it already{said}; another command may have published it first"
    if status == 404:
        return f"{doing} {repo}: not found on the Hub at {endpoint()}{said}; check the name and the revision"
    return f"{doing} {repo}: the Hub answered {status}{said}"
