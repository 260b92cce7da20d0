"""Where a run may read from (--allow-root, a deployment's confinement to its input), and what it must never write
down: Label Studio's folder private, credentials given in --base-url, keys a server echoes back; and a budget that a
server reporting negative or absurd usage cannot talk into more calls."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import re
import stat
import sys
import time
import uuid
from pathlib import Path

import pytest
from PIL import Image

from benchcurate.annotation.local_server import LocalServer
from benchcurate.curation.engine.runner import run_all, run_stage
from benchcurate.curation.engine.store import RunStore
from benchcurate.curation.models.pricing import BudgetExceeded, cost_usd, estimate_input_tokens
from benchcurate.flows.prefect_server import local_server
from benchcurate.schemas import Price
from tests.factories import make_image, scripted_reply
from tests.fakes.openai_server import FakeOpenAIServer, Fault
from tests.helpers import SHARED_DIR, SMALL, model_run, prepared_run, run_curate, stage_outputs
from tests.servers import free_port

SET_SMALL = [
    item
    for stage, fields in SMALL.items()
    for field, value in fields.items()
    for item in ("--set", f"{stage}.{field}={value}")
]


# --- item 16: --allow-root and a deployment's confinement ------------------------------------------------------


@pytest.fixture
def scattered(tmp_path) -> tuple[Path, dict[str, Path]]:
    """A manifest in inputs/ naming two images beside it, a link beside it to an image elsewhere, and images in two
    other folders by absolute path: (manifest, {manifest path: the file it resolves to})."""
    inside, elsewhere, second = tmp_path / "inputs", tmp_path / "elsewhere", tmp_path / "second"
    files = {
        "0.png": make_image(inside / "0.png", 0),
        "1.png": make_image(inside / "1.png", 1),
        str(elsewhere / "3.png"): make_image(elsewhere / "3.png", 3),
        str(second / "4.png"): make_image(second / "4.png", 4),
    }
    (inside / "link.png").symlink_to(make_image(elsewhere / "2.png", 2))
    files["link.png"] = elsewhere / "2.png"
    manifest = inside / "list.jsonl"
    manifest.write_text("".join(json.dumps({"path": path}) + "\n" for path in files))
    return manifest, files


def ingest_outcomes(run_dir: Path, manifest: Path) -> dict[str, str | None]:
    """manifest path -> None when image_ingest kept it, else its drop reason."""
    rows = [json.loads(line)["path"] for line in manifest.read_text().splitlines()]
    decisions, kept = stage_outputs(run_dir)["image_ingest"]
    sources = {item["id"]: item["provenance"]["source_id"] for item in kept}
    outcomes = {}
    for decision in decisions:
        if decision["kept"]:
            outcomes[sources[decision["item_id"]]] = None
        else:
            outcomes[rows[int(decision["detail"]["path"].rpartition(":")[2]) - 1]] = decision["reason"]
    assert sorted(outcomes) == sorted(rows)
    return outcomes


def expected(files: dict[str, Path], roots: list[Path]) -> dict[str, str | None]:
    return {
        path: None if any(file.resolve().is_relative_to(root.resolve()) for root in roots) else "outside_input_root"
        for path, file in files.items()
    }


def test_without_allow_root_a_manifest_reads_images_anywhere(scattered, tmp_path):
    manifest, files = scattered
    run_dir = prepared_run(tmp_path, "anywhere", input_path=manifest)
    run_stage(run_dir, 0)
    assert ingest_outcomes(run_dir, manifest) == dict.fromkeys(files)


@pytest.mark.slow
def test_allow_root_drops_images_resolving_outside_every_root_links_included(scattered, tmp_path, prefect_env):
    manifest, files = scattered
    roots = [manifest.parent, tmp_path / "second"]
    allow = [item for root in roots for item in ("--allow-root", str(root))]
    result = run_curate(
        [
            "run",
            "multiverse",
            "--input",
            str(manifest),
            "--run-id",
            "rooted",
            "--no-release",
            "--progress",
            "none",
            *SET_SMALL,
            *allow,
        ],
        tmp_path,
        prefect_env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = tmp_path / "outputs" / "runs" / "rooted"
    outcomes = ingest_outcomes(run_dir, manifest)
    assert outcomes == expected(files, roots)
    assert None in outcomes.values() and "outside_input_root" in outcomes.values()
    assert re.search(r"image_ingest .*outside_input_root 2", result.stdout), result.stdout


@pytest.mark.slow
def test_a_deployment_run_is_confined_to_its_input_folder(scattered, tmp_path, prefect_env):
    """A deployment's flow run: Prefect's runtime reports a deployment id (PREFECT__RUNTIME__DEPLOYMENT__ID is
    Prefect's own way of setting it outside a worker); its parameters name no allowed roots."""
    manifest, files = scattered
    result = run_curate(
        [
            "run",
            "multiverse",
            "--input",
            str(manifest),
            "--run-id",
            "deployed",
            "--no-release",
            "--progress",
            "none",
            *SET_SMALL,
        ],
        tmp_path,
        {**prefect_env, "PREFECT__RUNTIME__DEPLOYMENT__ID": str(uuid.uuid4())},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = tmp_path / "outputs" / "runs" / "deployed"
    assert RunStore(run_dir).load_config().options.allowed_roots == [str(manifest.parent.resolve())]
    assert ingest_outcomes(run_dir, manifest) == expected(files, [manifest.parent])


# --- item 17: a private server folder ------------------------------------------------------------------------

SERVER_SCRIPT = """import os, sys, time
open("written-by-server.db", "w").write("tokens")
os.mkdir("made-by-server")
open("made-by-server/inner", "w").close()
open("ready", "w").close()
time.sleep(60)
"""


@pytest.mark.slow
def test_a_private_server_folder_is_0700_and_every_file_in_it_0600(tmp_path):
    folder = tmp_path / "label-studio"
    (folder / "files").mkdir(parents=True)
    (folder / "label_studio.sqlite3").write_text("copied before the server starts")
    (folder / "files" / "upload.png").write_text("")
    for path, mode in [
        (folder, 0o755),
        (folder / "files", 0o775),
        (folder / "label_studio.sqlite3", 0o644),
        (folder / "files" / "upload.png", 0o666),
    ]:
        path.chmod(mode)
    marker = f"private-folder-probe-{uuid.uuid4().hex}"
    server = LocalServer(folder, "server", marker)
    process = server.start(
        [sys.executable, "-c", SERVER_SCRIPT, marker],
        free_port(),
        dict(os.environ),
        folder / "server.log",
        cwd=folder,
        private=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (folder / "ready").exists():
            assert process.poll() is None and time.monotonic() < deadline, (folder / "server.log").read_text()
            time.sleep(0.02)
        modes = {
            path.relative_to(folder).as_posix(): stat.S_IMODE(path.stat().st_mode)
            for path in [folder, *folder.rglob("*")]
        }
    finally:
        stopped = server.stop(timeout=5)  # by its record, which it could read
        process.wait(timeout=10)
    assert stopped
    assert {"server.json", "server.log", "written-by-server.db", "made-by-server/inner"} <= set(modes)
    assert modes == {name: 0o700 if (folder / name).is_dir() else 0o600 for name in modes}


# --- item 18: credentials in --base-url and keys echoed by a server --------------------------------------------


def files_holding(folder: Path, secrets: list[str]) -> dict[str, list[str]]:
    """file -> the secrets it holds, for every file under `folder` (SQLite databases and their journals too)."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            held = [secret for secret in secrets if secret.encode() in data]
            if held:
                found[str(path)] = held
    return found


def prefect_text(api_url: str, run_id: str) -> str:
    """What the Prefect server stored about a run: its flow runs' parameters and every log line."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def read():
        async with get_client() as client:
            runs = [
                run
                for run in await client.read_flow_runs()
                if (run.parameters.get("options") or {}).get("run_id") == run_id
            ]
            logs = await client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run.id for run in runs]))
            )
            return json.dumps([run.parameters for run in runs]) + "\n".join(log.message for log in logs)

    with temporary_settings({PREFECT_API_URL: api_url}):
        text = asyncio.run(read())
    assert run_id in text and "image_quality" in text  # the run's parameters and its logs were read
    return text


def rejected_details(run_dir: Path) -> list[str]:
    """The stored errors of every item a model server refused."""
    return [
        decision["detail"]["error"]
        for decisions, _ in stage_outputs(run_dir).values()
        for decision in decisions
        if decision["reason"] == "model_request_rejected"
    ]


@pytest.mark.slow
def test_credentials_in_the_base_url_are_used_and_never_written_down_even_when_echoed(tmp_path, prefect_env):
    for seed in range(4):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    user, password = "alice", "pw-SECRET-4821"
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()  # the Authorization header carries this
    echo = Fault("status", status=400, echo_headers=True, times=2)  # the first two requests: refused, headers echoed
    with FakeOpenAIServer(responder=scripted_reply, faults=[echo]) as server:
        with_credentials = server.base_url.replace("http://", f"http://{user}:{password}@")
        result = run_curate(
            [
                "run",
                "multiverse",
                "--input",
                str(tmp_path / "images"),
                "--backend",
                "openai",
                "--base-url",
                with_credentials,
                "--model",
                "fake-vlm",
                "--run-id",
                "creds",
                "--progress",
                "log",
                *SET_SMALL,
            ],
            tmp_path,
            {**prefect_env, "PREFECT_LOGGING_LEVEL": "INFO"},
        )
        chat = [request for request in server.requests if request.path == "/v1/chat/completions"]
        statuses = [entry.status for entry in server.reply_log]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "release:" in result.stdout
    assert chat and {request.headers.get("authorization") for request in chat} == {f"Basic {basic}"}  # used
    assert statuses.count(400) == 2
    run_dir = tmp_path / "outputs" / "runs" / "creds"
    assert RunStore(run_dir).load_config().options.base_url == server.base_url  # without user:password@
    refused = rejected_details(run_dir)
    assert len(refused) == 2 and all("Request headers" in text and "[redacted]" in text for text in refused)
    secrets = [password, f"{user}:{password}", basic]
    assert files_holding(tmp_path / "outputs", secrets) == {}
    assert not [secret for secret in secrets if secret in result.stdout + result.stderr]
    stored = prefect_text(prefect_env["PREFECT_API_URL"], "creds")
    assert not [secret for secret in secrets if secret in stored]
    prefect_data = local_server(SHARED_DIR / "prefect-out").folder  # the shared server's (conftest's prefect_server)
    assert (prefect_data / "prefect.db").is_file()
    assert files_holding(prefect_data, secrets) == {}  # its database, write-ahead log included


@pytest.mark.slow
def test_an_api_key_a_server_echoes_in_its_error_is_not_stored(tmp_path, monkeypatch):
    key = "sk-test-ECHOED-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    echo = Fault("status", status=400, echo_headers=True, times=2)
    with FakeOpenAIServer(responder=scripted_reply, faults=[echo], expected_api_key=key) as server:
        run_dir = model_run(tmp_path, server, "echoed")
        run_all(run_dir)
        statuses = [entry.status for entry in server.reply_log]
    assert statuses.count(400) == 2
    refused = rejected_details(run_dir)
    assert len(refused) == 2 and all("Request headers" in text and "[redacted]" in text for text in refused)
    assert files_holding(tmp_path, [key]) == {}


# --- item 19: a budget that misreported usage cannot stretch ---------------------------------------------------

PRICE = Price(input_per_million=20.0, output_per_million=5.0)
PRICES_SET = f"backend.prices={json.dumps({'fake-vlm': PRICE.model_dump()})}"


def own_estimate(body: dict) -> int:
    """The request's input tokens as estimated before sending: its texts and its images' sides as sent."""
    system, user = body["messages"]
    texts = [system["content"], user["content"][0]["text"]]
    sizes = []
    for part in user["content"][1:]:
        data = base64.b64decode(part["image_url"]["url"].partition(",")[2])
        with Image.open(io.BytesIO(data)) as image:
            sizes.append(image.size)
    return estimate_input_tokens(texts, sizes)


def stop_numbers(message: str) -> tuple[float, float, float, float]:
    """(next call's estimate, cap, spent, reserved) from a BudgetExceeded message."""
    match = re.search(
        r"next model call \(up to \$([\d.]+)\) would take spending past --max-cost \$([\d.]+) "
        r"\(spent \$(-?[\d.]+), reserved for calls in flight \$(-?[\d.]+)\)",
        message,
    )
    assert match, message
    return tuple(float(value) for value in match.groups())


@pytest.mark.slow
def test_negative_usage_is_charged_at_the_estimate_and_the_budget_stops_with_exit_4(tmp_path, prefect_env):
    for seed in range(4):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    cap = 0.05
    negative = {"prompt_tokens": -1_000_000, "completion_tokens": -1_000_000, "total_tokens": -2_000_000}
    with FakeOpenAIServer(responder=scripted_reply, reported_usage=negative) as server:
        result = run_curate(
            [
                "run",
                "multiverse",
                "--input",
                str(tmp_path / "images"),
                "--backend",
                "openai",
                "--base-url",
                server.base_url,
                "--model",
                "fake-vlm",
                "--run-id",
                "budget",
                "--concurrency",
                "1",
                "--max-cost",
                str(cap),
                "--progress",
                "none",
                *SET_SMALL,
                "--set",
                PRICES_SET,
            ],
            tmp_path,
            prefect_env,
        )
        served = [request.body for request in server.requests if request.path == "/v1/chat/completions"]
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-3000:]
    stops = [line for line in result.stderr.splitlines() if line.startswith("stopped:")]
    assert len(stops) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    next_call, shown_cap, spent, reserved = stop_numbers(stops[0])
    # every call was charged its own estimate: the input estimate and the reply cap (a negative count is invalid)
    charges = [cost_usd(PRICE, own_estimate(body), body["max_tokens"]) for body in served]
    assert served and shown_cap == cap
    assert sum(charges) <= cap and len(served) <= cap // min(charges)
    assert spent == pytest.approx(sum(charges), abs=0.00005) and reserved == 0  # one request at a time
    assert spent + reserved + next_call > cap


@pytest.mark.slow
def test_usage_reported_far_below_the_request_is_charged_at_least_its_input_estimate(tmp_path):
    tiny = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    cap = 0.05
    with FakeOpenAIServer(responder=scripted_reply, reported_usage=tiny) as server:
        run_dir = model_run(
            tmp_path, server, "tiny", concurrency=1, max_cost_usd=cap, prices={"fake-vlm": PRICE.model_dump()}
        )
        with pytest.raises(BudgetExceeded) as stopped:
            run_all(run_dir)
        served = [request.body for request in server.requests if request.path == "/v1/chat/completions"]
    next_call, _, spent, reserved = stop_numbers(str(stopped.value))
    charges = [cost_usd(PRICE, own_estimate(body), tiny["completion_tokens"]) for body in served]
    assert served and sum(charges) <= cap and len(served) <= cap // min(charges)
    assert spent == pytest.approx(sum(charges), abs=0.00005) and reserved == 0
    assert spent + reserved + next_call > cap
