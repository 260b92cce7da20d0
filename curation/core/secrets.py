"""The secrets this process holds, the one redaction every message, log line and stored error goes through, and
private files.

A server may echo the request's headers (its error text, a proxy's page), whole or cut; so any run of
`MIN_RUN` (8) or more characters of a secret is replaced, not only the whole secret. The secrets are read from the
environment each time (the OpenAI key, the Hugging Face token, the Label Studio token, the credentials set aside
from a base URL) plus those `register`ed at run time (a generated Label Studio token read from its file).
"""

from __future__ import annotations

import base64
import io
import logging
import os
import re
import sys
import threading
import traceback
from functools import lru_cache
from urllib.parse import unquote

# Environment variables holding a secret. The base URL credentials' name is identity.URL_CREDENTIALS_ENV (not
# imported: this module is imported by the error types, before the model layer).
SECRET_ENV = (
    "OPENAI_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "LABEL_STUDIO_API_KEY",
    "CURATE_BASE_URL_CREDENTIALS",
    "LABEL_STUDIO_PASSWORD",
)
MIN_RUN = 8  # characters of a secret that count as leaking it
SHORTEST_WHOLE = 4  # a secret shorter than MIN_RUN is still replaced where it stands whole, from this length on
MARK = "[redacted]"

_registered: set[str] = set()
_lock = threading.Lock()
_user_umask: int | None = None  # the umask the process had before `keep_private`


def register(secret: str | None) -> None:
    """A secret this process learnt other than from the environment (a token read from a file)."""
    if secret:
        with _lock:
            _registered.add(secret)


def _forms(secret: str) -> list[str]:
    """A secret as a server may send it back: as is, and for user:password also its parts, unquoted, and the Basic
    Authorization token made of them."""
    forms = [secret]
    if ":" in secret:
        user, _, password = secret.partition(":")
        plain = f"{unquote(user)}:{unquote(password)}"
        forms += [password, unquote(password), plain, base64.b64encode(plain.encode()).decode()]
    return forms


def held() -> tuple[str, ...]:
    """Every secret this process holds now, in every form a server may echo, longest first."""
    values = {os.environ.get(name, "").strip() for name in SECRET_ENV}
    with _lock:
        values |= _registered
    forms = {form for value in values if value for form in _forms(value) if len(form) >= SHORTEST_WHOLE}
    return tuple(sorted(forms, key=lambda form: (-len(form), form)))


@lru_cache(maxsize=8)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern | None:
    """One pattern matching, at every position, the start of any MIN_RUN-character piece of any secret (or a short
    secret whole): a lookahead, so overlapping pieces are all found."""
    pieces = set()
    for secret in secrets:
        if len(secret) < MIN_RUN:
            pieces.add(secret)
        else:
            pieces.update(secret[start : start + MIN_RUN] for start in range(len(secret) - MIN_RUN + 1))
    if not pieces:
        return None
    alternatives = "|".join(re.escape(piece) for piece in sorted(pieces, key=len, reverse=True))
    return re.compile(f"(?=({alternatives}))")


def redact(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """`text` with every run of MIN_RUN or more characters of a held secret replaced by MARK."""
    if not text:
        return text
    pattern = _pattern(held() if secrets is None else secrets)
    if pattern is None:
        return text
    spans: list[list[int]] = []
    for match in pattern.finditer(text):
        start, end = match.start(), match.start() + len(match.group(1))
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    if not spans:
        return text
    parts, last = [], 0
    for start, end in spans:
        parts += [text[last:start], MARK]
        last = end
    parts.append(text[last:])
    return "".join(parts)


def leaks(text: str, secrets: tuple[str, ...] | None = None) -> bool:
    """Whether `text` holds a run of MIN_RUN or more characters of a held secret."""
    return redact(text, secrets) != text


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what is written before passing it on (the command's stdout and stderr)."""

    def __init__(self, stream) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:
        return getattr(self._stream, "errors", None)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _redacted_record_factory(base):
    def factory(*args, **kwargs) -> logging.LogRecord:
        record = base(*args, **kwargs)
        if not held():
            return record
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = str(record.msg)
        record.msg, record.args = redact(message), None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return record

    factory.redacting = True
    return factory


def redact_logging() -> None:
    """Every log record made in this process from now on carries redacted text (its message and traceback), so no
    handler (the console, a file, Prefect's API handler that stores logs in its database) sees a secret."""
    current = logging.getLogRecordFactory()
    if not getattr(current, "redacting", False):
        logging.setLogRecordFactory(_redacted_record_factory(current))


def _print_redacted(exc_type, value, tb, where: str = "") -> None:
    sys.stderr.write(redact(where + "".join(traceback.format_exception(exc_type, value, tb))))


def _main_hook(exc_type, value, tb) -> None:
    _print_redacted(exc_type, value, tb)


def _thread_hook(args) -> None:
    if args.exc_type is not SystemExit:
        name = args.thread.name if args.thread is not None else "?"
        _print_redacted(args.exc_type, args.exc_value, args.exc_traceback, f"Exception in thread {name}:\n")


def redact_tracebacks() -> None:
    """An uncaught exception (in the main thread or any other) is printed redacted."""
    sys.excepthook = _main_hook
    threading.excepthook = _thread_hook


def without_secrets(env: dict[str, str]) -> dict[str, str]:
    """An environment for a process that needs none of our secrets (a server we start)."""
    return {name: value for name, value in env.items() if name not in SECRET_ENV}


def keep_private() -> int:
    """From now on every file and folder this process (and what it starts) creates is its user's only (0600, 0700):
    runs, caches, logs and the servers' databases hold model replies, reviews and, where a server echoed one, what
    redaction could not know. A release is made shareable again by `share`. Returns the umask it replaced."""
    global _user_umask
    previous = os.umask(0o077)
    if _user_umask is None:
        _user_umask = previous
    return previous


def share(folder) -> None:
    """The folder and everything in it with the modes the user's own umask gives (a release is meant to be read by
    others); nothing when `keep_private` was not called."""
    if _user_umask is None:
        return
    folder.chmod(0o777 & ~_user_umask)
    for path in folder.rglob("*"):
        if not path.is_symlink():
            path.chmod((0o777 if path.is_dir() else 0o666) & ~_user_umask)
