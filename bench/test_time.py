"""`make test` as a user runs it, at two commits, one after the other on this machine: the suite before issue #20
(fe098c9: serial, every CLI error case in a subprocess, a demo run per module) and the commit under test, whole,
and limited to the test modules that fe098c9 had (like for like: the later issues added modules of their own).

Each commit gets its own clean clone with its own venvs; both are set up first (`make test` with pytest only
collecting), so the timed `make test` is the suite alone, with everything installed. The clones share the pip
cache of the user running the benchmark. --quick (which CI runs) clones nothing: it times tests/schemas of this
checkout run serially, as fe098c9 ran the suite, and with the Makefile's pytest options.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
from pathlib import Path

from common import ROOT, arguments, machine, machine_line, publish, run_command, scratch, table

OLD = "fe098c9"  # the last commit before issue #20's test work
PASSED = re.compile(r"(\d+) passed")


def commit_of(reference: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", reference], check=True, text=True, capture_output=True
    ).stdout.strip()


def clone(commit: str, into: Path) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", commit], check=True)
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
    run = run_command(command, env=environment(), cwd=checkout, log=log)
    passed = PASSED.findall(log.read_text(errors="replace"))
    return {
        "commit": label,
        "seconds": round(run.seconds, 1),
        "passed": int(passed[-1]) if passed else 0,
        "peak_rss_mb": round(run.tree.peak_rss / 2**20),
        "command": " ".join(command),
    }


def modules(commit: str) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", commit, "tests"],
        check=True,
        text=True,
        capture_output=True,
    ).stdout.split()
    return sorted(path for path in listed if Path(path).name.startswith("test_") and path.endswith(".py"))


def measure(commit: str, work: Path, only: list[str] | None = None) -> dict:
    checkout = work / commit
    if not checkout.exists():
        clone(commit, checkout)
        run_command(
            ["make", "test", "PYTEST_ARGS=--collect-only -q tests/schemas"],
            env=environment(),
            cwd=checkout,
            log=work / f"{commit}-setup.log",
        )
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
    parser.add_argument("--new", default="HEAD", help="the commit to compare with the old one (default HEAD)")
    options = parser.parse_args()
    work = scratch("test-time-")
    same = None
    if options.quick:
        old, new = measure_quick(work)
    else:
        new_commit = commit_of(options.new)
        old, new = measure(OLD, work), measure(new_commit, work)
        same = measure(new_commit, work, modules(OLD))
    ratio = old["seconds"] / new["seconds"]
    rows = [
        [f"before (#20) {old['commit']}", old["passed"], old["seconds"], 1.0],
        [f"now {new['commit']}", new["passed"], new["seconds"], round(ratio, 2)],
    ]
    if same:
        rows.append(
            [f"now, {OLD}'s modules only", same["passed"], same["seconds"], round(old["seconds"] / same["seconds"], 2)]
        )
    text, markdown = table(["commit", "tests passed", "make test s", "x faster"], rows)
    print(text)
    print(f"make test is {ratio:.2f}x faster at {new['commit']} than at {old['commit']}")
    info = machine()
    publish(
        "test_time",
        {"machine": info, "old": old, "new": new, "ratio": ratio, "same_modules": same},
        f"# `make test`, before and after\n\n{machine_line(info)}. Each commit in its own clean clone and "
        f"venvs, set up first; the timed `make test` is the suite alone, one commit after the other.\n\n"
        f"{markdown}\n",
        options.quick,
    )


if __name__ == "__main__":
    sys.exit(main())
