"""The `slow` marker stays true (tests/conftest.py): a test using a fixture tagged @starts_server is marked, and a
test not marked that starts a server fails, saying how to mark it, so `make test-quick` starts none."""

from __future__ import annotations

import socket
import sys

import pytest

from benchcurate.annotation.local_server import LocalServer
from tests.fakes.openai_server import FakeOpenAIServer

REFUSED = "starts a server but is not marked slow: mark it @pytest.mark.slow, or tag the fixture"


def test_an_unmarked_test_can_open_no_tcp_server_nor_start_a_local_server(request, tmp_path):
    assert request.node.get_closest_marker("slow") is None
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with socket.socket(family) as server, pytest.raises(RuntimeError, match=REFUSED):
            server.bind((address, 0))
            server.listen()
    with pytest.raises(RuntimeError, match=REFUSED):
        FakeOpenAIServer()
    with pytest.raises(RuntimeError, match=REFUSED):  # what Label Studio and Prefect servers start through
        LocalServer(tmp_path, "label_studio", "marker").start([sys.executable, "-c", "pass"], 9, {}, tmp_path / "log")
    assert not (tmp_path / "label_studio.json").exists()


def test_an_unmarked_test_may_still_listen_on_a_unix_socket(tmp_path):
    """multiprocessing's forkserver listens on one: that is no server a test starts."""
    with socket.socket(socket.AF_UNIX) as unix:
        unix.bind(str(tmp_path / "socket"))
        unix.listen()


@pytest.mark.slow
def test_a_test_marked_slow_may_start_one():
    with FakeOpenAIServer() as server:
        assert server.base_url.startswith("http://127.0.0.1:")


def test_every_collected_test_using_a_server_fixture_is_marked_slow(request):
    from tests.conftest import _uses_a_server

    using = [item for item in request.session.items if _uses_a_server(item)]
    assert [item.nodeid for item in using if item.get_closest_marker("slow") is None] == []
    if request.config.getoption("markexpr") == "" and len(request.session.items) > 100:  # the whole suite
        assert any(item.path.name == "test_hub.py" for item in using)
