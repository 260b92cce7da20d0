"""`curate eval` throughput as a user runs it: the whole command (start-up, verifying the release, every call,
writing the results and the leaderboard) on a MultiVerse release of 1,000 samples x 4 turns (3 calls per turn:
the answer, the quality judge, the checklist judge), against the loopback OpenAI server in its own process
answering every call after 200 ms. Measured at the default --concurrency 8 and at 32; the ideal is concurrency /
latency (40 and 160 calls/s), and the result is the whole command's calls per second beside it.

The naive way, measured in the same run: the loop a throw-away script would be (one call at a time), on a slice of
the release. The machine is shared with other work: each figure is one run, CPU seconds say how much of the
machine the command itself took. --quick: 40 samples, a naive slice of 4.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
from pathlib import Path

import common
from common import ROOT, arguments, machine, machine_line, publish, run_command, table

LATENCY = 0.2
CONCURRENCIES = (8, 32)  # 8: the default, as a user runs it


def make_release(work: Path, samples: int) -> Path:
    from benchcurate.curation.release.writer import write_release
    from tests.helpers import SMALL, finished_run, replicated_release

    run_dir = finished_run(work, "mv", "multiverse", images=8, overrides=SMALL)
    return replicated_release(write_release(run_dir, work / "out"), samples, work / "big")


def eval_command(release: Path, base_url: str, out: Path, concurrency: int, limit: int | None = None) -> list[str]:
    return [
        str(Path(sys.executable).parent / "curate"),
        "eval",
        str(release),
        "--model",
        "fake-vlm-mini",
        "--judge-model",
        "fake-vlm",
        "--base-url",
        base_url,
        "--judge-base-url",
        base_url,
        "--concurrency",
        str(concurrency),
        "--out",
        str(out),
        *(["--limit", str(limit)] if limit else []),
    ]


def measure(release: Path, server: common.FakeServerProcess, out: Path, concurrency: int, limit: int | None) -> dict:
    server.reset()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command is the only child waited for in between
    run = run_command(eval_command(release, server.base_url, out, concurrency, limit))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    stats = server.stats()
    ideal = concurrency / LATENCY
    achieved = stats["ok"] / run.seconds
    return {
        "concurrency": concurrency,
        "wall_seconds": round(run.seconds, 2),
        "calls": stats["ok"],
        "unique_bodies": stats["ok_unique_bodies"],
        "ideal_calls_per_second": ideal,
        "whole_command_calls_per_second": round(achieved, 2),
        "percent_of_ideal": round(100 * achieved / ideal, 1),
        "replies_span_calls_per_second": round(stats["ok"] / (stats["answered_span_seconds"] + LATENCY), 2),
        "max_in_flight": stats["max_in_flight"],
        "cpu_seconds": round(cpu, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 1),  # the machine is shared: how busy it was
        "cpu_ms_per_call": round(1000 * cpu / max(1, stats["ok"]), 2),
        "peak_rss_mb": round(run.tree.peak_rss / 2**20),
    }


def main() -> None:
    options = arguments(__doc__, "40 samples, a naive slice of 4").parse_args()
    samples, naive_samples = (40, 4) if options.quick else (1000, 25)
    work = Path(tempfile.mkdtemp(prefix="eval-bench-", dir=common.isolate_home()))
    release = make_release(work, samples)
    with common.FakeServerProcess(LATENCY, responder="judges") as server:
        ours = [
            measure(release, server, work / f"ours-{concurrency}", concurrency, None) for concurrency in CONCURRENCIES
        ]
        naive = measure(release, server, work / "naive", 1, naive_samples)
    rows = [
        [
            "naive: one call at a time",
            naive_samples,
            naive["calls"],
            naive["ideal_calls_per_second"],
            naive["whole_command_calls_per_second"],
            naive["percent_of_ideal"],
            naive["cpu_ms_per_call"],
            1.0,
        ]
    ]
    rows += [
        [
            f"curate eval --concurrency {found['concurrency']}",
            samples,
            found["calls"],
            found["ideal_calls_per_second"],
            found["whole_command_calls_per_second"],
            found["percent_of_ideal"],
            found["cpu_ms_per_call"],
            round(found["whole_command_calls_per_second"] / naive["whole_command_calls_per_second"], 1),
        ]
        for found in ours
    ]
    text, markdown = table(
        [
            "way (whole command)",
            "samples",
            "calls",
            "ideal calls/s",
            "achieved calls/s",
            "% of ideal",
            "CPU ms/call",
            "x naive",
        ],
        rows,
    )
    print(text)
    for found in ours:
        print(
            f"--concurrency {found['concurrency']}: {found['wall_seconds']} s for {found['calls']} calls, "
            f"{found['cpu_seconds']} CPU s, peak memory {found['peak_rss_mb']} MB, load average "
            f"{found['load_average_1min_after']} (2 cores)"
        )
    info = machine()
    publish(
        "eval_throughput",
        {
            "machine": info,
            "latency_seconds": LATENCY,
            "ours": ours,
            "naive": naive,
            "samples": samples,
            "root": str(ROOT),
        },
        f"# `curate eval` throughput\n\n{machine_line(info)}; shared with other work while measured (each "
        f"figure is one run). A MultiVerse release of {samples} samples x 4 turns, 3 calls per turn, every call "
        f"answered after {LATENCY * 1000:.0f} ms by the loopback server in its own process. Achieved is the "
        f"whole command as a user runs it (start-up, verifying the release, the calls, writing results and "
        f"leaderboard: calls / wall seconds); ideal is concurrency / latency.\n\n{markdown}\n\n"
        + "\n".join(
            f"- --concurrency {found['concurrency']}: {found['wall_seconds']} s, {found['cpu_seconds']} "
            f"CPU s, peak memory {found['peak_rss_mb']} MB, at most {found['max_in_flight']} in flight; "
            f"load average {found['load_average_1min_after']} on 2 cores when it ended"
            for found in ours
        )
        + "\n",
        options.quick,
    )


if __name__ == "__main__":
    sys.exit(main())
