"""`make test` as a user runs it, at two commits, one after the other on this machine: the suite before issue #34's
test work (88c7e1b: 952 tests, 617 s of pytest in CI) and the commit under test; when the later commit has test
modules the earlier one lacks, also the later one limited to the earlier one's modules (like for like). Then the
later commit's `make test-quick`, the loop while working (no server, browser or pipeline).

Each commit gets its own clean clone with its own venv; both are set up first (`make test` with pytest only
collecting), so the timed `make test` is the suite alone, with everything installed. The clones share the pip
cache of the user running the benchmark, and this checkout's `.ls/` (Label Studio, lmms-eval and playwright
installs, the same for both commits; building them is not what is measured). --quick (which CI runs) clones
nothing: it times tests/schemas of this checkout run serially and with the Makefile's pytest options.
"""

from __future__ import annotations

import os
import pwd
import re
import resource
import subprocess
import sys
from pathlib import Path

from common import ROOT, arguments, machine, machine_line, publish, run_command, scratch, table

OLD = "88c7e1b"  # the last commit before issue #34's test work (the one before that, fe098c9, was issue #20's)
PASSED = re.compile(r"(\d+) passed")
SHARED_INSTALLS = ROOT / ".ls"


def commit_of(reference: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", reference], check=True, text=True, capture_output=True
    ).stdout.strip()


def clone(commit: str, into: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", commit], check=True)
    if SHARED_INSTALLS.is_dir():
        (into / ".ls").symlink_to(SHARED_INSTALLS.resolve())
        # make would rebuild lmms-eval's venv when the clone's (fresh) pin file looks newer than its stamp
        stamp = SHARED_INSTALLS / "lmms-eval" / ".installed"
        if stamp.exists():
            os.utime(into / "constraints-lmms-eval.txt", (stamp.stat().st_mtime - 1,) * 2)
    return into


def environment() -> dict[str, str]:
    """The benchmark's temp HOME, with the real user's pip and npm caches (installing is not what is measured)."""
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    return {
        **os.environ,
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(real_home / ".cache" / "pip")),
        "npm_config_cache": os.environ.get("npm_config_cache", str(real_home / ".npm")),  # noqa: SIM112 - npm reads it in lower case
    }


def timed_suite(label: str, command: list[str], checkout: Path, work: Path) -> dict:
    log = work / f"{label}-test.log"
    before, load_before = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    run = run_command(command, env=environment(), cwd=checkout, log=log)
    after, load_after = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    passed = PASSED.findall(log.read_text(errors="replace"))
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {
        "commit": label,
        "seconds": round(run.seconds, 1),
        "passed": int(passed[-1]) if passed else 0,
        "cpu_seconds": round(cpu, 1),
        "peak_rss_mb": round(run.tree.peak_rss / 2**20),
        "command": " ".join(command),
        "load_average": [round(load_before, 1), round(load_after, 1)],
    }


def modules(commit: str) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", commit, "tests"],
        check=True,
        text=True,
        capture_output=True,
    ).stdout.split()
    return sorted(
        path
        for path in listed
        if Path(path).name.startswith("test_") and path.endswith(".py") and path != "tests/test_bench.py"
    )  # make test leaves the benchmarks' quick runs to bench-quick


def checkout_of(commit: str, work: Path) -> Path:
    checkout = work / commit
    if not checkout.exists():
        clone(commit, checkout)
        run_command(
            ["make", "test", "PYTEST_ARGS=--collect-only -q tests/schemas"],
            env=environment(),
            cwd=checkout,
            log=work / f"{commit}-setup.log",
        )
    return checkout


def measure(commit: str, work: Path, only: list[str] | None = None) -> dict:
    checkout = checkout_of(commit, work)
    if only is None:
        return timed_suite(commit, ["make", "test"], checkout, work)
    kept = [path for path in only if (checkout / path).exists()]
    return timed_suite(
        f"{commit}-same-modules", ["make", "test", "PYTEST_ARGS=-n 4 --dist loadfile " + " ".join(kept)], checkout, work
    )


def measure_quick(work: Path) -> tuple[dict, dict]:
    pytest = [sys.executable, "-m", "pytest", "tests/schemas", "-q", "-p", "no:cacheprovider"]
    return (
        timed_suite("serial", [*pytest, "-p", "no:xdist"], ROOT, work),
        timed_suite("parallel", [*pytest, "-n", "4", "--dist", "loadfile"], ROOT, work),
    )


def main() -> None:
    parser = arguments(__doc__, "tests/schemas only")
    parser.add_argument("--old", default=OLD, help=f"the commit before (default {OLD})")
    parser.add_argument("--new", default="HEAD", help="the commit to compare with the old one (default HEAD)")
    options = parser.parse_args()
    work = scratch("test-time-")
    same = quick_loop = None
    old_commit = commit_of(options.old)
    if options.quick:
        old, new = measure_quick(work)
    else:
        new_commit = commit_of(options.new)
        old, new = measure(old_commit, work), measure(new_commit, work)
        if set(modules(old_commit)) != set(modules(new_commit)):
            same = measure(new_commit, work, modules(old_commit))
        quick_loop = timed_suite(f"{new_commit}-quick", ["make", "test-quick"], checkout_of(new_commit, work), work)
    ratio = old["seconds"] / new["seconds"]

    def row(name: str, run: dict, faster: object) -> list:
        return [name, run["passed"], run["seconds"], run["cpu_seconds"], faster, "{}, {}".format(*run["load_average"])]

    rows = [row(f"before {old['commit']}", old, 1.0), row(f"now {new['commit']}", new, round(ratio, 2))]
    if same:
        rows.append(row(f"now, {old_commit}'s modules only", same, round(old["seconds"] / same["seconds"], 2)))
    if quick_loop:
        rows.append(row("now, make test-quick (not slow)", quick_loop, "-"))
    text, markdown = table(["commit", "tests passed", "wall s", "CPU s", "x faster", "load at start, end"], rows)
    print(text)
    print(f"make test is {ratio:.2f}x faster at {new['commit']} than at {old['commit']}")
    info = machine()
    publish(
        "test_time",
        {"machine": info, "old": old, "new": new, "ratio": ratio, "same_modules": same, "quick_loop": quick_loop},
        f"# `make test`, before and after\n\n{machine_line(info)}. Each commit in its own clean clone and "
        f"venv (Label Studio, lmms-eval and playwright installs shared), set up first; the timed `make test` "
        f"is the suite alone (its pytest phase), one commit after the other; then the later commit's "
        f"`make test-quick`. CPU s: user and system time of the command and the processes it waited for "
        f"(getrusage). The machine may be shared: the load average (1 min) at each command's start and end "
        f"says how much.\n\n"
        f"{markdown}\n",
        options.quick,
    )


if __name__ == "__main__":
    sys.exit(main())
