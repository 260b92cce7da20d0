"""What identifies a backend's answers, computed from its spec alone (no client, no key, no network); and keeping
credentials out of what is stored."""

import os
from urllib.parse import urlsplit, urlunsplit

from benchcurate.schemas import BackendSpec

# user:password given inside a --base-url: kept here, in the environment of this process and the workers it starts,
# never in run.json, a flow run's parameters, a log or a release
URL_CREDENTIALS_ENV = "CURATE_BASE_URL_CREDENTIALS"


def without_credentials(url: str | None) -> tuple[str | None, str | None]:
    """(the URL without user:password@, the user:password it held or None)."""
    if not url:
        return url, None
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=host)), userinfo


def with_credentials(url: str) -> str:
    """The URL with the user:password set aside for it (URL_CREDENTIALS_ENV), for the HTTP client only."""
    userinfo = os.environ.get(URL_CREDENTIALS_ENV)
    if not userinfo or "@" in urlsplit(url).netloc:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


def set_aside_credentials(url: str | None) -> str | None:
    """The URL without credentials; the credentials go to this process's environment for the client."""
    clean, userinfo = without_credentials(url)
    if userinfo:
        os.environ[URL_CREDENTIALS_ENV] = userinfo
    return clean


OFFLINE_LABEL = "offline-heuristic"
HEURISTICS_VERSION = "heuristics-v2"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def resolved_base_url(spec: BackendSpec) -> str:
    """--base-url, else OPENAI_BASE_URL as the OpenAI SDK reads it, else api.openai.com."""
    return (spec.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_BASE_URL).rstrip("/")


def backend_identity(spec: BackendSpec) -> dict[str, str]:
    if spec.kind == "offline":
        return {"backend": OFFLINE_LABEL, "model": HEURISTICS_VERSION}
    identity = {
        "backend": "openai",
        "model": spec.model or "",
        "base_url": resolved_base_url(spec),
        "image_max_side_px": str(spec.image_max_side_px),
        "temperature": str(spec.temperature),
        "max_output_tokens": str(spec.max_output_tokens),
        "image_transport": spec.image_transport,
    }
    if spec.refresh_token:  # --refresh-cache: new answers, so new stage outputs
        identity["refresh_token"] = spec.refresh_token
    return identity
