"""Talking to the Hub: a request the Hub or the network leaves silent ends after BENCHCURATE_HUB_TIMEOUT seconds
(huggingface_hub's own client waits for ever), and each failure becomes one line that says what to do."""

from __future__ import annotations

import socket
import threading

import httpx2
import pytest
from huggingface_hub import constants, get_session, set_client_factory
from huggingface_hub.utils import _http

from benchcurate.curation.core.errors import BackendUnavailable, UserError
from benchcurate.curation.release import hub
from tests.servers import starts_server


@pytest.fixture
def plain_client(monkeypatch):
    """huggingface_hub's client is per process: leave it as it was found. The suite runs with HF_HUB_OFFLINE set;
    these tests talk to loopback only."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    yield
    set_client_factory(_http.default_client_factory)
    hub._limited.clear()


@pytest.fixture
@starts_server
def silent_server():
    """A port that accepts connections (the kernel's backlog) and never answers: a Hub gone quiet mid-request."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def _get_in_thread(url: str, wait: float) -> tuple[BaseException | None, bool]:
    """GET url with the shared client from a thread, waiting at most `wait` seconds for it: the error it ended
    with, and whether it ended."""
    outcome: list[BaseException | None] = [None]

    def get() -> None:
        try:
            get_session().get(url)
        except BaseException as error:  # what the request ended with is the result
            outcome[0] = error

    thread = threading.Thread(target=get, daemon=True)
    thread.start()
    thread.join(wait)
    return outcome[0], not thread.is_alive()


def test_a_silent_hub_times_out_after_the_limit(plain_client, silent_server, monkeypatch):
    monkeypatch.setenv(hub.TIMEOUT_VARIABLE, "0.5")
    hub.limit_stalls()
    error, ended = _get_in_thread(f"{silent_server}/api/whoami-v2", wait=30)
    assert ended and isinstance(error, httpx2.ReadTimeout), error


def test_without_the_limit_the_same_request_is_still_waiting(plain_client, silent_server):
    """What the limit is for: huggingface_hub's own client, on the same server, has not given up 3 s later."""
    error, ended = _get_in_thread(f"{silent_server}/api/whoami-v2", wait=3)
    assert not ended and error is None


def test_a_new_limit_replaces_the_client(plain_client, monkeypatch):
    monkeypatch.setenv(hub.TIMEOUT_VARIABLE, "7")
    hub.limit_stalls()
    assert get_session().timeout.read == 7 and get_session().timeout.connect == 7
    monkeypatch.setenv(hub.TIMEOUT_VARIABLE, "300")
    hub.limit_stalls()
    assert get_session().timeout.read == 300 and get_session().timeout.connect == hub.CONNECT_SECONDS


@pytest.mark.parametrize("value", ["soon", "0", "-3", "inf", "nan"])
def test_a_wrong_limit_says_what_to_set(plain_client, monkeypatch, value):
    monkeypatch.setenv(hub.TIMEOUT_VARIABLE, value)
    with pytest.raises(UserError, match=hub.TIMEOUT_VARIABLE):
        hub.limit_stalls()


def test_a_stall_and_a_refusal_are_told_apart(plain_client, monkeypatch):
    monkeypatch.setenv(hub.TIMEOUT_VARIABLE, "45")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(BackendUnavailable) as stalled, hub.hub_failures("uploading to", "me/set", resume="; again"):
        raise httpx2.ReadTimeout("timed out")
    assert "45 s without answering" in str(stalled.value) and hub.TIMEOUT_VARIABLE in str(stalled.value)
    assert str(stalled.value).endswith("; again")
    with pytest.raises(BackendUnavailable) as refused, hub.hub_failures("uploading to", "me/set"):
        raise httpx2.ConnectTimeout("timed out")
    assert "could not be reached (ConnectTimeout)" in str(refused.value)
