"""Fixtures of the Label Studio tests."""

import pytest

from benchcurate.annotation import server
from tests.servers import free_port


@pytest.fixture(scope="module")
def label_studio(tmp_path_factory):
    """A Label Studio of this module's own on loopback: (data folder, server info, admin token)."""
    data = tmp_path_factory.mktemp("ls")
    info, token = server.up(data, free_port())
    yield data, info, token
    server.down(data)
