"""A disk that fills up during a run or a release: one error line, exit 3, no traceback; once space is freed, the
same command finishes, and nothing finished before is lost or redone.

The small disk is a tmpfs mounted in a mount namespace of the command's own (`unshare -rm`: a user namespace, so no
root is needed), filled with a ballast file that leaves about half of what the command needs. The namespace ends
with the command, so one driver script inside it runs both attempts, frees the ballast in between and copies what
the small disk holds out for the test to read."""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchcurate.curation.release.verify import verify
from benchcurate.curation.release.writer import write_release
from benchcurate.curation.report.run import funnel_text, load_report
from tests.factories import make_image
from tests.helpers import CURATE, MULTIVERSE_STAGES, SMALL, finished_run, funnel, summary_lines

pytestmark = pytest.mark.slow

SET_SMALL = [
    item
    for stage, fields in SMALL.items()
    for field, value in fields.items()
    for item in ("--set", f"{stage}.{field}={value}")
]
DISK_BYTES = 16 * 1024 * 1024  # the tmpfs; the ballast takes all of it but what a test leaves free
PAGE = 4096  # tmpfs counts whole pages

# Runs inside the namespace: mount the small disk; before each attempt, size a ballast file so that the disk has free
# the given fraction of what the command still needs (`needs` less what out/ holds), or remove it (fraction null);
# run the command; note the digest of every file of each finished (DONE) folder. Prints the attempts as JSON.
DRIVER = r"""
import hashlib, json, os, shutil, subprocess, sys
spec = json.loads(sys.argv[1])
disk, out = spec["disk"], os.path.join(spec["disk"], "out")
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={spec['size']}", "tmpfs", disk], check=True)
ballast = os.path.join(disk, "ballast")
open(ballast, "wb").close()

def taken(folder):
    return sum(-(-os.path.getsize(os.path.join(root, name)) // 4096) * 4096
               for root, _, names in os.walk(folder) for name in names)

def finished():
    found = {}
    for root, _, names in os.walk(out):
        if "DONE" in names:
            for name in names:
                path = os.path.join(root, name)
                found[os.path.relpath(path, out)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return found

attempts = []
for fraction in spec["fractions"]:
    if fraction is None:
        os.remove(ballast)
    else:
        stats = os.statvfs(disk)
        free = stats.f_bavail * stats.f_frsize
        target = int(fraction * max(0, spec["needs"] - taken(out)))
        with open(ballast, "r+b") as handle:
            size = os.fstat(handle.fileno()).st_size + free - target
            handle.truncate(size)
            os.posix_fallocate(handle.fileno(), 0, size)
    done = subprocess.run(spec["command"], capture_output=True, text=True, timeout=300)
    attempts.append({"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
                     "finished": finished()})
shutil.copytree(out, spec["keep"], symlinks=True)
print(json.dumps(attempts))
"""


@functools.cache
def namespace() -> list[str] | None:
    """How to start a process in a mount namespace of its own where it may mount a tmpfs; None if it cannot."""
    probe = Path(os.environ["CURATE_TEST_SESSION_DIR"]) / "mount-probe"
    probe.mkdir(exist_ok=True)
    for prefix in (["unshare", "-rm"], ["unshare", "-m"]):  # unprivileged first; -m alone needs root
        try:
            done = subprocess.run(
                [*prefix, "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return prefix
    return None


def on_a_small_disk(
    command: list[str], tmp_path: Path, needs: int, fractions: list[float | None], env: dict[str, str]
) -> list[dict]:
    """`command` (its --out is <disk>/out) once per fraction, on a small disk left with that fraction of the `needs`
    bytes the command still needs, or with its ballast removed (None): each attempt's returncode, stdout, stderr
    and finished files. What the disk's out/ holds in the end is copied to tmp_path/kept."""
    prefix = namespace()
    if prefix is None:
        pytest.skip("cannot mount a tmpfs here: neither `unshare -rm` (user namespaces) nor root's `unshare -m`")
    disk = tmp_path / "disk"
    disk.mkdir()
    spec = {
        "disk": str(disk),
        "size": DISK_BYTES,
        "needs": needs,
        "fractions": fractions,
        "keep": str(tmp_path / "kept"),
        "command": [part.replace("<disk>", str(disk)) for part in command],
    }
    done = subprocess.run(
        [*prefix, sys.executable, "-c", DRIVER, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def disk_bytes(folder: Path) -> int:
    """What the files under `folder` take on a tmpfs: whole pages."""
    return sum(-(-path.stat().st_size // PAGE) * PAGE for path in folder.rglob("*") if path.is_file())


def check_one_line_disk_full_error(attempt: dict) -> None:
    """Exit 3; one `error:` line, saying the disk is full and what to do; no traceback; anything else on stderr is
    one-line log records of Prefect's."""
    assert attempt["returncode"] == 3, attempt["stdout"][-2000:] + attempt["stderr"][-3000:]
    stderr = attempt["stderr"]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert errors[0].startswith("error: no space left on the disk") and "run the same command again" in errors[0]
    assert "Traceback" not in stderr
    others = [
        line
        for line in stderr.splitlines()
        if line.strip() and not line.startswith("error:") and not re.match(r"\d\d:\d\d:\d\d\.\d+ \| ", line)
    ]
    assert others == [], stderr[-3000:]


def stage_folders(finished: dict[str, str]) -> set[str]:
    """The stage output folders (not work folders) a listing of finished files holds."""
    return {
        str(Path(path).parent)
        for path in finished
        if Path(path).name == "DONE" and "/stages/" in path and not Path(path).parent.name.startswith("work-")
    }


def test_a_disk_that_fills_during_a_run_stops_it_with_one_line_and_the_same_command_resumes(tmp_path, prefect_env):
    images = tmp_path / "images"
    for seed in range(6):
        make_image(images / f"{seed}.png", seed)
    uninterrupted = finished_run(tmp_path, "probe", input_path=images, overrides=SMALL)  # what a run writes
    command = [
        str(CURATE),
        "run",
        "multiverse",
        "--input",
        str(images),
        "--out",
        "<disk>/out",
        "--run-id",
        "full",
        "--no-release",
        "--progress",
        "log",
        *SET_SMALL,
    ]
    # full twice, each time with room for half of what is left to do; then with room
    attempts = on_a_small_disk(
        command,
        tmp_path,
        disk_bytes(tmp_path / "out"),
        [0.5, 0.5, None],
        {**prefect_env, "PREFECT_LOGGING_LEVEL": "INFO"},
    )
    for attempt in attempts[:2]:
        check_one_line_disk_full_error(attempt)
        stages = "|".join(MULTIVERSE_STAGES)
        assert re.search(rf"\bstage ({stages}): ", attempt["stderr"]), attempt["stderr"][-2000:]  # says where
    assert attempts[2]["returncode"] == 0, attempts[2]["stderr"][-3000:]
    done = [stage_folders(attempt["finished"]) for attempt in attempts]
    assert set() < done[0] < done[1] < done[2]  # each attempt got further
    assert len(done[2]) == len(MULTIVERSE_STAGES)
    for before, (earlier, later) in zip(done, itertools.pairwise(attempts)):
        # nothing finished was lost or redone: the same files, and those stages said to be skipped
        assert {path: digest for path, digest in later["finished"].items() if str(Path(path).parent) in before} == {
            path: digest for path, digest in earlier["finished"].items() if str(Path(path).parent) in before
        }
        lines = summary_lines(later["stdout"] + later["stderr"])
        assert {stage for stage, line in lines.items() if "skipped, already done" in line} == {
            Path(folder).parent.name.split("_", 1)[1] for folder in before
        }
    assert funnel(attempts[2]["stdout"]) == funnel(funnel_text(load_report(uninterrupted)))
    assert not list((tmp_path / "kept" / "runs" / "full" / "stages").glob("*/work-*.partial"))


def test_a_disk_that_fills_during_a_release_stops_it_with_one_line_and_the_same_command_writes_it(tmp_path):
    run_dir = finished_run(tmp_path, "rel", overrides=SMALL)
    probe = write_release(run_dir, tmp_path / "probe")  # what a release writes
    command = [str(CURATE), "release", "write", str(run_dir), "--out", "<disk>/out"]
    first, second = on_a_small_disk(command, tmp_path, disk_bytes(tmp_path / "probe"), [0.5, None], {})
    check_one_line_disk_full_error(first)
    assert second["returncode"] == 0, second["stderr"][-3000:]
    written = Path(second["stdout"].strip().splitlines()[-1])
    assert written.name == probe.name  # the failed attempt took no version number
    kept = tmp_path / "kept" / "releases" / probe.parent.name
    assert sorted(path.name for path in kept.iterdir() if path.name != ".lock") == [probe.name]  # no partial left
    assert verify(kept / probe.name) == []
    assert (kept / probe.name / "SHA256SUMS").read_text().count("data/") == (probe / "SHA256SUMS").read_text().count(
        "data/"
    )
