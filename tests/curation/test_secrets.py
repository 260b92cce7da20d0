"""The one redaction: any run of 8 or more characters of a held secret, in every form a server may echo, in text,
log records, tracebacks and streams."""

from __future__ import annotations

import base64
import io
import logging
import os
import sys

import pytest

from benchcurate.curation.core import secrets
from benchcurate.curation.core.errors import BackendUnavailable, ModelOutputInvalid, UnexpectedError, UserError

KEY = "sk-proj-0123456789abcdefGHIJKLmnopqrst"


@pytest.fixture
def key(monkeypatch) -> str:
    for name in secrets.SECRET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


@pytest.mark.parametrize("start,length", [(0, 8), (0, 12), (5, 8), (len(KEY) - 8, 8), (3, 20), (0, len(KEY))])
def test_any_run_of_eight_or_more_characters_is_replaced(key, start, length):
    piece = key[start : start + length]
    text = f"the server said: Authorization: Bearer {piece}; bye"
    assert secrets.redact(text) == "the server said: Authorization: Bearer [redacted]; bye"
    assert secrets.leaks(text)


def test_seven_characters_or_other_text_are_kept(key):
    text = f"{key[:7]} and {key[10:17]} and sk-other-thing"
    assert secrets.redact(text) == text and not secrets.leaks(text)


def test_two_pieces_and_overlaps_each_become_one_mark(key):
    text = f"{key[:10]}|{key[4:30]}{key[:9]}"
    assert secrets.redact(text) == "[redacted]|[redacted]"


def test_every_secret_we_hold_and_its_forms(monkeypatch, key):
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "0f1e2d3c4b5a69788796a5b4c3d2e1f0aabbccdd")
    monkeypatch.setenv("CURATE_BASE_URL_CREDENTIALS", "alice:p%40ss-word-99")
    basic = base64.b64encode(b"alice:p@ss-word-99").decode()
    for leaked in ("hf_abcdefghijk", "3c4b5a69788796", "p@ss-word-99", "p%40ss-word", basic, basic[4:16]):
        assert secrets.redact(f"<{leaked}>") == "<[redacted]>", leaked
    secrets.register("registered-at-run-time-0123")
    assert secrets.redact("x registered-at y") == "x [redacted] y"


def test_our_errors_are_redacted_when_made(key):
    for kind in (UserError, BackendUnavailable):
        assert str(kind(f"HTTP 403 ({key[2:14]})")) == "HTTP 403 ([redacted])"
    invalid = ModelOutputInvalid("bad reply", raw=f'{{"echo": "{key}"}}')
    assert invalid.raw == '{"echo": "[redacted]"}'
    assert str(UnexpectedError.of(RuntimeError(f"token {key}"))) == "RuntimeError: token [redacted]"


def test_log_records_and_their_tracebacks_are_redacted(key):
    secrets.redact_logging()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("secrets-test")
    logger.addHandler(handler)
    try:
        logger.warning("sent %s", key)
        try:
            raise RuntimeError(f"echo {key[:12]}")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert "sent [redacted]" in written and "RuntimeError: echo [redacted]" in written
    assert not secrets.leaks(written)


def test_a_redacting_stream_and_an_uncaught_exception(key, capsys):
    target = io.StringIO()
    stream = secrets.RedactingStream(target)
    stream.write(f"line with {key}\n")
    assert target.getvalue() == "line with [redacted]\n"
    saved = sys.excepthook
    try:
        secrets.redact_tracebacks()
        try:
            raise ValueError(f"boom {key}")
        except ValueError:
            sys.excepthook(*sys.exc_info())
    finally:
        sys.excepthook = saved
    assert "ValueError: boom [redacted]" in capsys.readouterr().err


def test_share_gives_a_private_folder_the_users_modes(tmp_path):
    previous = secrets.keep_private()
    try:
        folder = tmp_path / "release"
        (folder / "data").mkdir(parents=True)
        (folder / "data" / "x.parquet").write_bytes(b"x")
        assert (folder / "data" / "x.parquet").stat().st_mode & 0o077 == 0
        secrets.share(folder)
        expected = 0o666 & ~secrets._user_umask
        assert (folder / "data" / "x.parquet").stat().st_mode & 0o777 == expected
    finally:
        os.umask(previous)
