"""Publishing versions to the Hub and reading them back, against the loopback stand-in (tests/fakes/hub_server.py):
`curate publish --upload` and `datasets.load_dataset` in their own processes, over real HTTP, as a user runs them.

One module-wide publication: release 0.1.0 of a run of 6 pictures, then 0.2.0 of a run of 7 with one sample of
0.1.0 listed in REMOVALS.jsonl. Every token is a canary: after the module, no file it wrote (outputs, releases, the
Hugging Face cache, the Prefect server's database and logs) and no output of a command holds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.fakes.hub_server import FakeHub, Token, hub_env
from tests.helpers import CURATE, SMALL, curate_in_process, finished_run, run_curate, stage_outputs
from tests.servers import starts_server

WRITE = f"hf_canary{secrets.token_hex(12)}"  # alice's write token, a member of my-org
READ = f"hf_canaryread{secrets.token_hex(8)}"
STRANGER = f"hf_canarystranger{secrets.token_hex(8)}"  # bob's write token: not a member of my-org
REPO = "my-org/bench"
pytestmark = pytest.mark.slow  # every test publishes to a loopback Hub
LOAD = """
import hashlib, json, sys
import datasets
streaming = sys.argv[3:] == ["stream"]  # read in byte ranges as it goes, without downloading the files first
ds = datasets.load_dataset(sys.argv[1], revision=sys.argv[2], streaming=streaming)
ds = ds.cast_column("image", datasets.Image(decode=False))
rows = {split: [{**{k: v for k, v in row.items() if k != "image"},
                 "image_sha256_loaded": hashlib.sha256(row["image"]["bytes"]).hexdigest()} for row in part]
        for split, part in ds.items()}
print(json.dumps(rows, sort_keys=True))
"""
OUTPUTS: list[str] = []  # every command's stdout and stderr, for the canary check


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    result = run_curate(args, cwd, env, timeout=timeout)
    OUTPUTS.extend([result.stdout, result.stderr])
    return result


def load(repo: str, revision: str, env: dict[str, str], cwd: Path, stream: bool = False) -> dict[str, list[dict]]:
    result = subprocess.run(
        [sys.executable, "-c", LOAD, repo, revision, *(["stream"] if stream else [])],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=300,
    )
    OUTPUTS.extend([result.stdout, result.stderr])
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


def local_rows(folder: Path) -> dict[str, list[dict]]:
    """The release's rows as the folder holds them, in the loaded rows' shape."""
    rows: dict[str, list[dict]] = {}
    for path in sorted((folder / "data").glob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            image = row.pop("image")
            rows.setdefault(path.name.split("-")[0], []).append(
                {**row, "image_sha256_loaded": hashlib.sha256(image["bytes"]).hexdigest()}
            )
    return rows


def lfs_files(folder: Path) -> dict[str, str]:
    """sha256 -> path of the release's files the Hub keeps in LFS (parquet shards, plots)."""
    return {
        hashlib.sha256(path.read_bytes()).hexdigest(): path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.suffix in (".parquet", ".png")
    }


@pytest.fixture(scope="module")
@starts_server
def hub():
    with FakeHub(
        {
            WRITE: Token("alice", "write", ("my-org",)),
            READ: Token("carol", "read", ("my-org",)),
            STRANGER: Token("bob", "write"),
        }
    ) as server:
        yield server


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hub")


@pytest.fixture(scope="module")
def env(hub, work) -> dict[str, str]:
    return {**hub_env(hub, WRITE), "HF_HOME": str(work / "hf_home")}


@pytest.fixture(scope="module")
def releases(work) -> tuple[Path, Path, str, str]:
    """(0.1.0, 0.2.0, the id removed on request, the id added)."""
    first_run = finished_run(work, "first", images=6, overrides=SMALL)
    assert curate_in_process(["release", str(first_run), "--out", str(work / "out")], work).returncode == 0
    first = work / "out" / "releases" / "multiverse-curated" / "0.1.0"
    removed = pq.read_table(next((first / "data").glob("*.parquet")), columns=["index"]).column(0)[0].as_py()
    (first.parent / "REMOVALS.jsonl").write_text(json.dumps({"sample_id": removed, "reason": "takedown"}) + "\n")
    second_run = finished_run(work, "second", images=7, overrides=SMALL)
    made = curate_in_process(["release", str(second_run), "--version", "0.2.0", "--out", str(work / "out")], work)
    assert made.returncode == 0, made.stdout + made.stderr
    second = first.parent / "0.2.0"
    before = {row["index"] for row in local_rows(first)["test"]}
    after = {row["index"] for row in local_rows(second)["test"]}
    added = after - before
    assert before - after == {removed} and len(added) == 1
    return first, second, removed, added.pop()


@pytest.fixture(scope="module")
def rebuilt(work, releases) -> Path:
    """A 0.1.0 with other contents: the 7-picture run released under that version in another output folder."""
    made = curate_in_process(
        ["release", str(work / "out" / "runs" / "second"), "--version", "0.1.0", "--out", str(work / "out-rebuilt")],
        work,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    return work / "out-rebuilt" / "releases" / "multiverse-curated" / "0.1.0"


@pytest.fixture(scope="module")
def published(hub, env, work, releases):
    """0.1.0 then 0.2.0 published with `curate publish --upload`: each command's result and the LFS objects it
    sent."""
    first, second, _, _ = releases
    results = []
    for folder in (first, second):
        hub.clear_requests()
        result = run(["publish", str(folder), "--repo", REPO, "--upload"], work, env)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        results.append((result, hub.uploads(), hub.requests))
    return results


def test_two_versions_round_trip_through_the_hub(hub, env, work, releases, published):
    first, second, removed, added = releases
    assert "published v0.1.0" in published[0][0].stdout and "published v0.2.0" in published[1][0].stdout
    refs = hub.refs(REPO)
    assert set(refs["tags"]) == {"v0.1.0", "v0.2.0"} and refs["branches"]["main"] == refs["tags"]["v0.2.0"]
    assert hub.commit_titles(REPO) == ["initial commit", "Release v0.1.0", "Release v0.2.0"]
    for folder, tag in ((first, "v0.1.0"), (second, "v0.2.0")):
        on_hub = hub.files(REPO, tag)
        assert on_hub.pop(".gitattributes")
        assert on_hub == {
            path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()
        }
        assert load(REPO, tag, env, work) == local_rows(folder)  # every column of every row, images by sha256
    latest = load(REPO, "main", env, work)
    assert latest == local_rows(second)
    hub.clear_requests()
    assert load(REPO, "v0.1.0", {**env, "HF_HOME": str(work / "hf_home_streaming")}, work, stream=True) == local_rows(
        first
    )
    assert any("/resolve/" in r.path and r.headers.get("range", "").startswith("bytes=") for r in hub.requests)
    ids = {row["index"] for row in latest["test"]}
    assert removed not in ids and added in ids
    # what the Hub shows: the card's YAML as the version's metadata, at each tag
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import json, sys; from huggingface_hub import HfApi; print(json.dumps({tag: HfApi().dataset_info("
                "sys.argv[1], revision=tag).card_data.to_dict() for tag in sys.argv[2:]}))"
            ),
            REPO,
            "v0.1.0",
            "v0.2.0",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=True,
    )
    cards = json.loads(shown.stdout)
    for folder, tag in ((first, "v0.1.0"), (second, "v0.2.0")):
        text = (folder / "README.md").read_text()
        assert cards[tag] == yaml.safe_load(text[4 : text.index("\n---\n", 4)])
        assert cards[tag]["configs"][0]["data_files"][0]["path"] == "data/test-*.parquet"
    assert cards["v0.2.0"]["license"] and cards["v0.2.0"]["dataset_info"]["splits"][0]["num_examples"] == len(ids)


def test_each_version_sends_only_contents_the_hub_lacks_and_the_token_only_as_a_header(releases, published):
    first, second, _, _ = releases
    (_, first_puts, first_requests), (_, second_puts, second_requests) = published
    assert sorted(first_puts) == sorted(lfs_files(first))
    assert sorted(second_puts) == sorted(set(lfs_files(second)) - set(lfs_files(first)))
    assert second_puts  # the shard changed (a sample out, one in)
    for request in first_requests + second_requests:  # never in a body or URL; storage URLs get no token at all
        assert WRITE.encode() not in request.body and WRITE not in request.path + request.query
        storage = request.path.startswith("/_lfs/") and not request.path.endswith("/verify")
        assert (request.headers.get("authorization") == f"Bearer {WRITE}") != storage, request.path


def test_refusals_are_one_line_and_send_nothing_they_should_not(hub, env, work, releases, published, rebuilt):
    first, second, _, _ = releases
    tags_before, commits_before = hub.refs(REPO), hub.commit_titles(REPO)
    hub.clear_requests()
    again = run(["publish", str(first), "--repo", REPO, "--upload"], work, env)  # a finished publish, rerun
    assert again.returncode == 0 and "already published in my-org/bench with exactly these files" in again.stdout
    other = run(["publish", str(rebuilt), "--repo", REPO, "--upload"], work, env)
    assert other.returncode == 2 and "v0.1.0 is already published in my-org/bench" in other.stderr
    assert "with other contents (differs on the Hub: " in other.stderr
    assert hub.refs(REPO) == tags_before and hub.commit_titles(REPO) == commits_before and hub.uploads() == []
    assert not any(r.path.endswith(("/commit/main", "/preupload/main")) for r in hub.requests)

    broken = work / "broken" / "0.1.0"
    shutil.copytree(first, broken)
    (broken / "manifest.json").write_text((broken / "manifest.json").read_text().replace('"0.1.0"', '"0.1.1"'))
    hub.clear_requests()
    refused = run(["publish", str(broken), "--repo", "my-org/other", "--upload"], work, env)
    assert refused.returncode == 2 and "does not verify (changed: manifest.json" in refused.stderr
    no_token = run(["publish", str(first), "--repo", "my-org/other", "--upload"], work, {**env, "HF_TOKEN": ""})
    assert no_token.returncode == 2 and "HF_TOKEN" in no_token.stderr
    assert hub.requests == []  # neither reached the Hub

    read_only = run(["publish", str(first), "--repo", "my-org/other", "--upload"], work, {**env, "HF_TOKEN": READ})
    assert read_only.returncode == 2 and "read-only" in read_only.stderr
    hub.create("my-org/empty")  # exists, so the stranger's refusal comes from the upload itself
    hub.clear_requests()
    stranger = run(["publish", str(second), "--repo", "my-org/empty", "--upload"], work, {**env, "HF_TOKEN": STRANGER})
    assert stranger.returncode == 2 and "may not write to this repo" in stranger.stderr
    assert [r.path for r in hub.requests if r.path.endswith("/preupload/main")] == [
        "/api/datasets/my-org/empty/preupload/main"
    ] and hub.uploads() == []
    wrong = run(["publish", str(first), "--repo", "my-org/other", "--upload"], work, {**env, "HF_TOKEN": "hf_nope"})
    assert wrong.returncode == 2 and "does not accept the token" in wrong.stderr
    assert not hub.has_repo("my-org/other") and hub.commit_titles("my-org/empty") == ["initial commit"]

    hub.swap_on_commit = {"manifest.json": b"{}"}
    try:
        swapped = run(["publish", str(first), "--repo", "my-org/swapped", "--upload"], work, env)
    finally:
        hub.swap_on_commit = {}
    assert swapped.returncode == 2 and "v0.1.0 was published" in swapped.stderr
    assert "differs from" in swapped.stderr and "differs on the Hub: manifest.json" in swapped.stderr
    older = run(["publish", str(second), "--repo", "my-org/newest-first", "--upload"], work, env)
    assert older.returncode == 0
    after = run(["publish", str(first), "--repo", "my-org/newest-first", "--upload"], work, env)
    assert after.returncode == 2 and "already has v0.2.0, newer than v0.1.0" in after.stderr
    assert [line for line in swapped.stderr.splitlines() if line.startswith("error:")] == [
        swapped.stderr.strip().splitlines()[-1]
    ]  # after huggingface_hub's progress bars, one line
    for result in (other, refused, no_token, read_only, stranger, wrong, after):
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_the_same_version_published_twice_at_once_is_tagged_once(hub, env, work, releases):
    first, _, _, _ = releases
    args = [str(CURATE), "publish", str(first), "--repo", "my-org/twice", "--upload"]
    both = [
        subprocess.Popen(
            args, cwd=work, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    results = [(process.wait(timeout=300), *process.communicate()) for process in both]
    OUTPUTS.extend(text for _, out, err in results for text in (out, err))
    # the later one finds the version published (0), or its commit finds main moved under it (2: rerun)
    assert sorted(code for code, _, _ in results) in ([0, 0], [0, 2]), results
    assert all(code == 0 or "main changed while publishing (another publish?)" in err for code, _, err in results)
    assert list(hub.refs("my-org/twice")["tags"]) == ["v0.1.0"]
    on_hub = hub.files("my-org/twice", "v0.1.0")
    on_hub.pop(".gitattributes")
    assert on_hub == {
        path.relative_to(first).as_posix(): path.read_bytes() for path in first.rglob("*") if path.is_file()
    }


def test_two_versions_published_at_once_leave_main_holding_the_newest_tagged_one(work, releases):
    """0.2.0 and 0.1.0 started together against a Hub answering API calls after 150 ms (a wide window between
    checking the tags and committing): whichever way they interleave, every tag holds its version, main holds
    the newest tagged one, and a command that lost says so in one line."""
    first, second, _, _ = releases
    with FakeHub({WRITE: Token("alice", "write", ("my-org",))}, latency=0.15) as slow:
        both_env = {**os.environ, **hub_env(slow, WRITE), "HF_HOME": str(work / "hf_home_race")}
        started = [
            subprocess.Popen(
                [str(CURATE), "publish", str(folder), "--repo", REPO, "--upload"],
                cwd=work,
                env=both_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for folder in (second, first)
        ]
        results = [(process.wait(timeout=300), *process.communicate()) for process in started]
        OUTPUTS.extend(text for _, out, err in results for text in (out, err))
        refs = slow.refs(REPO)
        folders = {"v0.1.0": first, "v0.2.0": second}
        assert refs["tags"], results
        for tag in refs["tags"]:
            on_hub = slow.files(REPO, tag)
            on_hub.pop(".gitattributes")
            assert on_hub == {
                p.relative_to(folders[tag]).as_posix(): p.read_bytes() for p in folders[tag].rglob("*") if p.is_file()
            }
        assert refs["branches"]["main"] == refs["tags"][max(refs["tags"])]
        for code, _, err in results:
            assert code == 0 or (
                code == 2
                and len(err.strip().splitlines()[-1:]) == 1
                and any(reason in err for reason in ("newer than v0.1.0", "main changed while publishing"))
            ), err[-1500:]


def test_a_failure_between_commit_and_tag_is_finished_by_the_rerun_without_a_new_commit(hub, env, work, releases):
    first, _, _, _ = releases
    hub.fail_next_tag = True
    failed = run(["publish", str(first), "--repo", "my-org/untagged", "--upload"], work, env)
    assert failed.returncode == 3 and "503" in failed.stderr and "run the same command again" in failed.stderr
    assert hub.refs("my-org/untagged")["tags"] == {}
    commits = hub.commit_titles("my-org/untagged")
    assert commits == ["initial commit", "Release v0.1.0"]
    hub.clear_requests()
    again = run(["publish", str(first), "--repo", "my-org/untagged", "--upload"], work, env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert hub.commit_titles("my-org/untagged") == commits and hub.uploads() == []
    refs = hub.refs("my-org/untagged")
    assert refs["tags"]["v0.1.0"] == refs["branches"]["main"]


def test_a_network_failure_halfway_is_resumed_by_running_the_command_again(hub, env, work, releases):
    _, second, _, _ = releases
    wanted = set(lfs_files(second))
    hub.clear_requests()
    hub.go_down_after_uploads(2)
    started = time.monotonic()
    try:
        failed = run(["publish", str(second), "--repo", "my-org/flaky", "--upload"], work, env)
        took = time.monotonic() - started
    finally:
        if hub.is_down:
            hub.come_back()
        else:
            hub.go_down_after_uploads(None)
    assert failed.returncode == 3, failed.stderr[-2000:]  # a server down, as for model servers
    assert "could not be reached" in failed.stderr and "run the same command again" in failed.stderr, failed.stderr[
        -600:
    ]
    sent_first = set(hub.uploads())
    assert len(sent_first) == 2 < len(wanted), (sent_first, took)  # two got through; uploads run 5 at a time
    assert "v0.2.0" not in hub.refs("my-org/flaky")["tags"]  # nothing tagged by the failed attempt
    hub.clear_requests()
    resumed = run(["publish", str(second), "--repo", "my-org/flaky", "--upload"], work, env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert set(hub.uploads()) == wanted - sent_first  # only what was missing
    assert hub.refs("my-org/flaky")["tags"]["v0.2.0"] == hub.refs("my-org/flaky")["branches"]["main"]


def test_ctrl_c_during_an_upload_exits_at_once_and_the_rerun_sends_the_rest(work, releases):
    """Ctrl-C is SIGINT to the process group: `curate publish` stops within seconds with 130, tags nothing, and the
    same command again sends only the objects the Hub did not receive whole."""
    _, second, _, _ = releases
    wanted = set(lfs_files(second))
    with FakeHub({WRITE: Token("alice", "write", ("my-org",))}) as slow:
        slow_env = {**os.environ, **hub_env(slow, WRITE), "HF_HOME": str(work / "hf_home_interrupted")}
        slow.slow_uploads_after(2, 30)
        process = subprocess.Popen(
            [str(CURATE), "publish", str(second), "--repo", REPO, "--upload"],
            cwd=work,
            env=slow_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while len(slow.stored(REPO) if slow.has_repo(REPO) else ()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the slow uploads are under way
        os.killpg(process.pid, signal.SIGINT)
        sent = time.monotonic()
        out, err = process.communicate(timeout=60)
        OUTPUTS.extend([out, err])
        assert process.returncode == 130 and time.monotonic() - sent < 10, err[-2000:]
        assert "interrupted" in err and "run the same command again" in err
        received = slow.stored(REPO)
        assert len(received) == 2 and slow.refs(REPO)["tags"] == {}
        slow.slow_uploads_after(0, 0)
        slow.clear_requests()
        rerun = run(
            ["publish", str(second), "--repo", REPO, "--upload"],
            work,
            hub_env(slow, WRITE) | {"HF_HOME": str(work / "hf_home_interrupted")},
        )
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        assert set(slow.uploads()) == wanted - received and "v0.2.0" in slow.refs(REPO)["tags"]


def test_with_xet_on_the_pipelined_upload_publishes_the_same_version(work, releases):
    """huggingface_hub's default client (hf_xet installed), whose upload_folder is its pipelined upload. The
    stand-in has no Xet storage, so it takes every file inline (one commit at this size: the several commits of a
    large folder are not exercised); the version must land and load the same."""
    first, _, _, _ = releases
    with FakeHub({WRITE: Token("alice", "write", ("my-org",))}, inline_only=True) as inline:
        xet_env = {**hub_env(inline, WRITE), "HF_HOME": str(work / "hf_home_xet")}
        del xet_env["HF_HUB_DISABLE_XET"]
        result = run(["publish", str(first), "--repo", REPO, "--upload"], work, {**xet_env, "HF_HUB_DISABLE_XET": "0"})
        assert result.returncode == 0, result.stderr[-2000:]
        assert inline.uploads() == [] and any(r.path.endswith("/commit/main") for r in inline.requests)
        assert load(REPO, "v0.1.0", xet_env, work) == local_rows(first)


def test_a_published_version_is_a_reference_set_for_a_new_run(hub, env, work, releases, published, prefect_env):
    """A new run on the 7 pictures with v0.1.0 as image reference: its 6 samples are dropped as matches_reference
    naming the published version; the text reference reads v0.2.0's questions."""
    first, second, removed, added = releases
    images = work / "images"  # the 7 pictures of the second run
    result = run(
        [
            "run",
            "multiverse",
            "--input",
            str(images),
            "--run-id",
            "against-hub",
            "--no-release",
            "--out",
            str(work / "out"),
            "--set",
            'image_near_dedup.reference=["hf://my-org/bench@v0.1.0"]',
            *[
                arg
                for stage, values in SMALL.items()
                for key, value in values.items()
                for arg in ("--set", f"{stage}.{key}={value}")
            ],
        ],
        work,
        {**env, **prefect_env},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    decisions, _ = stage_outputs(work / "out" / "runs" / "against-hub")["image_near_dedup"]
    dropped = {row["item_id"]: row for row in decisions if not row["kept"]}
    in_first = {row["index"] for row in local_rows(first)["test"]}
    assert set(dropped) == in_first and added not in dropped
    assert {row["reason"] for row in dropped.values()} == {"matches_reference"}
    assert {row["detail"]["reference"] for row in dropped.values()} == {f"my-org/bench@v0.1.0:{i}" for i in in_first}

    texts = reference_texts("hf://my-org/bench@v0.2.0", work, env)
    keys = {key["id"]: key for key in json.loads(texts.stdout)}
    rows = {row["index"]: row for row in local_rows(second)["test"]}
    assert set(keys) == {f"my-org/bench@v0.2.0:{index}" for index in rows}
    some = rows[added]
    assert keys[f"my-org/bench@v0.2.0:{added}"]["value"] == "\n".join(
        turn["utterance"] for turn in some["conversation"] if turn["speaker"] == "user"
    )
    # downloaded once: with no Hub at all, the cached version is read (and verified) again
    offline = reference_texts(
        "hf://my-org/bench@v0.2.0", work, {**env, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    )
    assert json.loads(offline.stdout) == json.loads(texts.stdout)
    missing = reference_texts("hf://my-org/bench@v9.9.9", work, env, check=False)
    assert (
        missing.returncode == 1
        and "UserError: reading the reference my-org/bench@v9.9.9: the repo has no such revision"
        in missing.stderr.strip().splitlines()[-1]
    )
    no_repo = reference_texts("hf://my-org/nothing@v0.1.0", work, {**env, "HF_TOKEN": ""}, check=False)
    assert (
        "UserError: reading the reference my-org/nothing@v0.1.0: no such repo on the Hub" in no_repo.stderr
        and "no token (HF_TOKEN)" in no_repo.stderr
    )  # the Hub answers 401 here, and it is not the token's fault


def reference_texts(location: str, cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    """text_near_dedup's reference keys of `location`, read in a process of its own (JSON on stdout)."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import json, sys; from benchcurate.curation.text.near_dedup import TextDedupConfig, reference_keys; "
                "print(json.dumps([k._asdict() for k in reference_keys(sys.argv[1], TextDedupConfig(field='user_turns'))]))"
            ),
            location,
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
    )
    OUTPUTS.extend([result.stdout, result.stderr])
    assert result.returncode == 0 or not check, result.stderr[-2000:]
    return result


def test_the_tokens_reach_no_file_and_no_output(hub, env, work, published, prefect_env):
    """Runs last in the module (pytest keeps file order): every file the module's commands wrote, the Prefect
    server's files and every command's output are free of every token."""
    from tests.helpers import SHARED_DIR

    canaries = [token.encode() for token in (WRITE, READ, STRANGER)]
    places = [work, SHARED_DIR / "prefect-out"]
    assert all(place.is_dir() for place in places)
    scanned = 0
    for place in places:
        for path in place.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                scanned += 1
                assert not any(canary in data for canary in canaries), f"a token is in {path}"
    assert scanned > 20 and OUTPUTS
    assert not any(token in output for output in OUTPUTS for token in (WRITE, READ, STRANGER))
