"""The paths users take after the first run (issue #30, 3-5): the printed resume command resumes (whatever --out),
a run id that names no run is an error naming the folder searched, the demo corpus is announced and its release
named apart, a rerun or a second `curate release` of the same content writes no new version, and releases can be
named."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from benchcurate.flows.cli import resume_command
from benchcurate.schemas import RunOptions
from tests.factories import make_image
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import CURATE, SMALL, curate_in_process, finished_run, resolve, run_curate
from tests.servers import free_port

SETTINGS = [
    arg
    for stage, values in SMALL.items()
    for key, value in values.items()
    for arg in ("--set", f"{stage}.{key}={value}")
]


def test_a_run_id_that_names_no_run_is_an_error_naming_the_folder_searched(tmp_path):
    result = curate_in_process(["run", "multiverse", "--run-id", "intr2"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: no run 'intr2' in {tmp_path / 'outputs' / 'runs'}; to resume a run, pass the --out it was started "
        f"with; to start one, pass --input FOLDER (or --demo for the bundled demo corpus)"
    )
    assert not (tmp_path / "outputs" / "runs" / "intr2").exists()


def test_demo_and_input_together_are_refused_and_a_demo_run_is_named_apart(tmp_path):
    refused = curate_in_process(["run", "multiverse", "--demo", "--input", str(tmp_path)], tmp_path)
    assert refused.returncode == 2 and "--demo runs the bundled demo corpus" in refused.stderr
    out = tmp_path / "out"
    demo = resolve("multiverse", out, run_id="d", demo=True)
    make_image(tmp_path / "images" / "0.png", 0)
    own = resolve("multiverse", out, run_id="o", input_path=str(tmp_path / "images"))
    named = resolve("multiverse", out, run_id="n", input_path=str(tmp_path / "images"), release_name="my-bench")
    implied = resolve("multiverse", out)  # neither an input nor a run id: the demo
    assert (demo.demo, own.demo, implied.demo) == (True, False, True)
    assert demo.recipe.release.name == implied.recipe.release.name == "multiverse-curated-demo"
    assert own.recipe.release.name == "multiverse-curated" and named.recipe.release.name == "my-bench"


def test_the_resume_command_names_every_option_a_run_does_not_remember():
    options = RunOptions(
        run_id="intr2",
        jobs=2,
        max_cost_usd=1.5,
        dask_address="tcp://10.0.0.5:8786",
        release=False,
        backend="openai",
        model="m",
        seed=3,
        prices={"m": {"input_per_million": 0.5, "output_per_million": 1.5}},
    )
    assert resume_command("multiverse", options, Path("../out2"), "temporary") == (
        "curate run multiverse --run-id intr2 --out ../out2 --jobs 2 --dask-address tcp://10.0.0.5:8786 "
        "--max-cost 1.5 --price m=0.5,1.5 --no-release --prefect-server temporary"
    )
    assert (
        resume_command("convbench", RunOptions(run_id="c"), Path("my outputs"), "local")
        == "curate run convbench --run-id c --out 'my outputs'"
    )
    assert (
        resume_command("convbench", RunOptions(run_id="c"), Path("outputs"), "local")
        == "curate run convbench --run-id c"
    )


def test_a_demo_run_says_so_when_it_starts(demo_run):
    _, result = demo_run
    assert "running multiverse on the bundled demo corpus" in result.stderr
    assert "release multiverse-curated-demo" in result.stderr


@pytest.mark.slow
def test_the_printed_resume_command_resumes_the_run_in_its_own_output_folder(tmp_path, prefect_env):
    """A run with --out ../out2 stops on a model server that is down; the command it prints, run as printed from
    the same folder once the server is up, resumes that run (not a new demo run under outputs/)."""
    work = tmp_path / "work"
    work.mkdir()
    for seed in range(4):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    port = free_port()
    args = [
        "run",
        "multiverse",
        "--input",
        str(tmp_path / "images"),
        "--run-id",
        "intr2",
        "--out",
        "../out2",
        "--backend",
        "openai",
        "--model",
        "fake-vlm",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "--no-release",
        "--progress",
        "none",
        *SETTINGS,
    ]
    down = run_curate(args, work, {**prefect_env, "OPENAI_API_KEY": "sk-test"})
    assert down.returncode == 3, down.stderr[-3000:]
    hint = down.stderr.strip().splitlines()[-1]
    command = hint.split("resume with: ")[1]
    assert command == "curate run multiverse --run-id intr2 --out ../out2 --no-release"
    with FakeOpenAIServer(port=port):
        resumed = subprocess.run(
            [str(CURATE), *shlex.split(command)[1:]],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **prefect_env, "OPENAI_API_KEY": "sk-test"},
        )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (tmp_path / "out2" / "runs" / "intr2" / "run.json").exists()
    assert not (work / "outputs").exists()  # no new run anywhere else
    assert "15/15 stages done" in resumed.stdout


@pytest.mark.slow
def test_rerunning_a_finished_run_or_releasing_it_again_writes_no_new_version(tmp_path, prefect_env):
    for seed in range(4):
        make_image(tmp_path / "images" / f"{seed}.png", seed)
    args = [
        "run",
        "multiverse",
        "--input",
        str(tmp_path / "images"),
        "--run-id",
        "twice",
        "--progress",
        "none",
        *SETTINGS,
    ]
    first = run_curate(args, tmp_path, prefect_env)
    again = run_curate(args, tmp_path, prefect_env)
    assert first.returncode == again.returncode == 0, again.stderr[-3000:]
    releases = tmp_path / "outputs" / "releases" / "multiverse-curated"
    assert sorted(path.name for path in releases.iterdir() if not path.name.startswith(".")) == ["0.1.0"]
    assert "release:    " in first.stdout and "already released" not in first.stdout
    assert f"release:    {releases / '0.1.0'}  (already released: the same rows and images)" in again.stdout
    manual = curate_in_process(["release", "twice"], tmp_path)
    assert manual.returncode == 0 and manual.stdout.strip() == str(releases / "0.1.0")
    assert "already released as multiverse-curated 0.1.0" in manual.stderr
    named = curate_in_process(["release", "twice", "--name", "my-bench"], tmp_path)
    assert named.returncode == 0 and named.stdout.strip() == str(
        tmp_path / "outputs" / "releases" / "my-bench" / "0.1.0"
    )


def test_a_release_name_is_checked_before_anything_is_written(tmp_path):
    run_dir = finished_run(tmp_path, "r", images=3, overrides=SMALL)
    result = curate_in_process(["release", str(run_dir), "--name", "../up", "--out", str(tmp_path / "out")], tmp_path)
    assert result.returncode == 2 and "release name '../up' must be lower-case letters" in result.stderr
    assert not (tmp_path / "out" / "up").exists() and not (tmp_path / "out" / "releases").exists()


def test_publishing_to_a_hub_that_cannot_be_reached_says_to_run_it_again(tmp_path, monkeypatch):
    run_dir = finished_run(tmp_path, "p", images=3, overrides=SMALL)
    assert curate_in_process(["release", str(run_dir), "--out", str(tmp_path / "out")], tmp_path).returncode == 0
    folder = tmp_path / "out" / "releases" / "multiverse-curated" / "0.1.0"
    env = {
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_TOKEN": "hf_test_token_0123456789",
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_XET": "1",
    }
    result = subprocess.run(
        [str(CURATE), "publish", str(folder), "--repo", "org/bench", "--upload"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert result.returncode == 3
    assert result.stderr.strip().splitlines()[-1] == (
        "error: publishing to org/bench failed: the Hub at http://127.0.0.1:9 could not be reached (ConnectError); "
        "check the network and HF_ENDPOINT; run the same command again once the Hub answers (what it already has "
        "is not sent again)"
    )
