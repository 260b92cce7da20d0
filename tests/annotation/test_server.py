"""`curate ls`: a real Label Studio 1.23.2 started on loopback from its own venv, stopped by PID."""

import socket

import pytest

from benchcurate.annotation import server
from benchcurate.curation.core.errors import UserError
from tests.helpers import run_curate
from tests.servers import free_port, starts_server

pytestmark = pytest.mark.slow

KNOWN_TOKEN = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
@starts_server
def running(tmp_path_factory):
    data = tmp_path_factory.mktemp("ls-data")
    info, token = server.up(data, free_port())
    yield info, token
    server.down(data)


def test_it_starts_healthy_with_a_working_admin_token_printed_once(running, monkeypatch):
    from label_studio_sdk import LabelStudio

    info, token = running
    assert info.healthy and info.version == "1.23.2" and token and len(token) == 40
    assert (info.data_dir / "token").read_text().strip() == token
    assert oct((info.data_dir / "token").stat().st_mode & 0o777) == "0o600"
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    assert LabelStudio(base_url=info.url, api_key=token).users.whoami().email == server.USERNAME
    again, new_token = server.up(info.data_dir, 1)  # already running: the port is not even looked at
    assert again.pid == info.pid and new_token is None
    # the server's own database holds it (that is how it authenticates); nothing else may, its log included
    leaked = [
        path
        for path in info.data_dir.rglob("*")
        if path.is_file()
        and path.name != "token"
        and not path.name.startswith("label_studio.sqlite3")
        and token.encode() in path.read_bytes()
    ]
    assert leaked == [] and (info.data_dir / "server.log").exists()


def test_signup_without_an_invite_is_closed(running):
    import urllib.error
    import urllib.request

    info, _ = running
    request = urllib.request.Request(f"{info.url}/user/signup/", data=b"email=x@y.z&password=abcdefgh1", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # loopback
    assert refused.value.code in (403, 404)


def test_a_taken_port_is_a_clear_error(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        with pytest.raises(UserError, match=f"port {port} on 127.0.0.1 is taken"):
            server.up(tmp_path / "data", port)
    assert not (tmp_path / "data" / "server.json").exists()


def test_a_missing_venv_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.setenv("CURATE_LS_VENV", str(tmp_path / "nowhere"))
    with pytest.raises(UserError, match="run `make ls`"):
        server.up(tmp_path / "data", free_port())


def test_the_cli_uses_the_given_token_and_stops_the_server(tmp_path):
    data = tmp_path / "ls"
    env = {"LABEL_STUDIO_API_KEY": KNOWN_TOKEN}
    started = run_curate(["ls", "up", "--data", str(data), "--port", str(free_port())], tmp_path, env)
    try:
        assert started.returncode == 0, started.stderr
        assert "1.23.2" in started.stdout and KNOWN_TOKEN not in started.stdout + started.stderr
        assert not (data / "token").exists()
        from label_studio_sdk import LabelStudio

        url = started.stdout.split(" at ")[1].split()[0]
        assert LabelStudio(base_url=url, api_key=KNOWN_TOKEN).users.whoami().email == server.USERNAME
        status = run_curate(["ls", "status", "--data", str(data)], tmp_path)
        assert status.returncode == 0 and status.stdout.startswith("healthy")
    finally:
        stopped = run_curate(["ls", "down", "--data", str(data)], tmp_path)
    assert stopped.returncode == 0 and stopped.stdout.strip() == "stopped"
    after = run_curate(["ls", "status", "--data", str(data)], tmp_path)
    assert after.returncode == 1 and "not running" in after.stdout
