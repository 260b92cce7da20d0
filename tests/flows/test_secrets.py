"""Secrets kept: every secret we hold (the OpenAI key, the Hugging Face token, the Label Studio token) is a canary,
and every server we talk to echoes the request's headers in its errors, whole or cut to their first characters.
After the commands a user runs (a run with a Hub reference, a run on a model server, a run pushing its review, a
publish answered 400/401/403/404/500), no file they leave (the run folders, the caches, the local Prefect server's
database and log, the Hugging Face cache) and no line they print holds 8 or more characters of any canary; and the
Prefect server's folder and the run folders are private (0700, files 0600)."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
from pathlib import Path

import pytest

from tests.factories import make_image
from tests.fakes.echo_server import EchoServer
from tests.helpers import CURATE, SMALL

pytestmark = pytest.mark.slow

CANARIES = {
    "OPENAI_API_KEY": f"sk-canary{secrets.token_hex(16)}",
    "HF_TOKEN": f"hf_canary{secrets.token_hex(16)}",
    "LABEL_STUDIO_API_KEY": secrets.token_hex(20),
}
RUN = 8  # characters of a canary that count as a leak
SETTINGS = [
    arg
    for stage, values in SMALL.items()
    for key, value in values.items()
    for arg in ("--set", f"{stage}.{key}={value}")
]


def pieces() -> list[bytes]:
    return sorted(
        {value[start : start + RUN].encode() for value in CANARIES.values() for start in range(len(value) - RUN + 1)}
    )


def leaked(data: bytes) -> bytes | None:
    return next((piece for piece in pieces() if piece in data), None)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("secrets")


@pytest.fixture(scope="module")
def env(work) -> dict[str, str]:
    """A user's environment with every secret set, the output folder's own local Prefect server (no
    PREFECT_API_URL), and a Hugging Face cache of its own."""
    base = {name: value for name, value in os.environ.items() if name != "PREFECT_API_URL"}
    return {
        **base,
        **CANARIES,
        "HF_HOME": str(work / "hf_home"),
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


@pytest.fixture(scope="module")
def printed(work, env):
    """Every line the commands printed; the local Prefect server stopped at the end."""
    lines: list[str] = []
    yield lines
    subprocess.run(
        [str(CURATE), "prefect", "down", "--out", str(work / "out")], env=env, capture_output=True, timeout=60
    )


def curate(
    args: list[str], work: Path, env: dict[str, str], printed: list[str], **extra: str
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(CURATE), *args], cwd=work, capture_output=True, text=True, timeout=300, env={**env, **extra}
    )
    printed += [result.stdout, result.stderr]
    return result


@pytest.fixture(scope="module")
def images(work) -> Path:
    for seed in range(4):
        make_image(work / "images" / f"{seed}.png", seed)
    return work / "images"


def test_a_run_reading_a_reference_from_an_echoing_hub(work, env, printed, images):
    with EchoServer(401) as hub:
        result = curate(
            [
                "run",
                "multiverse",
                "--input",
                str(images),
                "--run-id",
                "reference",
                "--no-release",
                "--out",
                str(work / "out"),
                "--set",
                'image_near_dedup.reference=["hf://my-org/b@v0.1.0"]',
            ],
            work,
            env,
            printed,
            HF_ENDPOINT=hub.url,
        )
    assert result.returncode == 2, result.stderr[-3000:]
    assert hub.requests > 0 and "my-org/b@v0.1.0" in result.stderr


def test_a_run_on_a_model_server_echoing_part_of_the_key(work, env, printed, images):
    """The server repeats the first 12 characters of the key (after 'Bearer '): every item's request is refused,
    each refusal is a recorded drop, and the stage fails with one line."""
    with EchoServer(400, cut=len("Bearer ") + 12) as server:
        result = curate(
            [
                "run",
                "multiverse",
                "--input",
                str(images),
                "--run-id",
                "model",
                "--no-release",
                "--out",
                str(work / "out"),
                "--backend",
                "openai",
                "--base-url",
                f"{server.url}/v1",
                "--model",
                "m",
                *SETTINGS,
            ],
            work,
            env,
            printed,
        )
    assert result.returncode == 3, result.stderr[-3000:]
    assert server.requests > 0


def test_a_run_pushing_its_review_to_an_echoing_label_studio(work, env, printed, images):
    with EchoServer(500) as studio:
        result = curate(
            [
                "run",
                "multiverse",
                "--input",
                str(images),
                "--run-id",
                "human",
                "--out",
                str(work / "out"),
                "--set",
                "conversation_review.mode=human",
                *SETTINGS,
            ],
            work,
            env,
            printed,
            LABEL_STUDIO_URL=studio.url,
        )
    assert result.returncode in (3, 5), result.stderr[-3000:]
    assert studio.requests > 0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 500])
def test_publishing_to_an_echoing_hub(work, env, printed, images, status):
    release = work / "out" / "releases" / "multiverse-curated" / "0.1.0"
    if not release.exists():
        result = curate(
            [
                "run",
                "multiverse",
                "--input",
                str(work / "images"),
                "--run-id",
                "released",
                "--out",
                str(work / "out"),
                *SETTINGS,
            ],
            work,
            env,
            printed,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    for cut in (None, len("Bearer ") + 12):
        with EchoServer(status, cut=cut) as hub:
            result = curate(
                ["publish", str(release), "--repo", "my-org/b", "--upload"], work, env, printed, HF_ENDPOINT=hub.url
            )
        assert result.returncode in (2, 3), result.stderr[-3000:]
        assert hub.requests > 0 and "my-org/b" in result.stderr


def test_no_secret_reaches_a_file_or_a_printed_line(work, env, printed):
    """Runs last in the module: greps every file left behind and every line printed."""
    out = work / "out"
    prefect = out / "prefect"
    assert (prefect / "prefect.db").exists() and (prefect / "server.log").exists()
    scanned = 0
    for path in work.rglob("*"):
        if path.is_file() and not path.is_symlink():
            scanned += 1
            piece = leaked(path.read_bytes())
            assert piece is None, f"{piece!r} of a secret is in {path}"
    assert scanned > 50 and len(printed) >= 2 * 13
    for text in printed:
        piece = leaked(text.encode())
        assert piece is None, f"{piece!r} of a secret was printed: {text[-2000:]}"


def test_the_prefect_server_and_run_folders_are_private(work):
    out = work / "out"
    for folder in (out / "prefect", out / "runs", out / "cache"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for path in [*(out / "prefect").rglob("*"), *(out / "runs").rglob("*")]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"
