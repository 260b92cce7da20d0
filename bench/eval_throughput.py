"""`curate eval` throughput as a user runs it: the whole command on a MultiVerse release of 1,000 samples x 4 turns
(3 calls per turn: the answer, the quality judge, the checklist judge), against the loopback OpenAI server in its
own process answering every call after 200 ms, at --concurrency 32. The ideal is 32 / 0.2 = 160 calls/s.

The naive way, measured in the same run: the loop a throw-away script would be (one sample after another, each
call waiting for the one before), on a slice of the release, through the same model layer.
--quick: 40 samples, 12 in the naive slice.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import common
from common import ROOT, arguments, machine, machine_line, publish, run_command, table

LATENCY = 0.2
CONCURRENCY = 32


def make_release(work: Path, samples: int) -> Path:
    from benchcurate.curation.release.writer import write_release
    from tests.helpers import SMALL, finished_run, replicated_release

    run_dir = finished_run(work, "mv", "multiverse", images=8, overrides=SMALL)
    return replicated_release(write_release(run_dir, work / "out"), samples, work / "big")


def eval_command(release: Path, base_url: str, out: Path, concurrency: int, limit: int | None = None) -> list[str]:
    return [str(Path(sys.executable).parent / "curate"), "eval", str(release), "--model", "fake-vlm-mini",
            "--judge-model", "fake-vlm", "--base-url", base_url, "--judge-base-url", base_url,
            "--concurrency", str(concurrency), "--out", str(out), *(["--limit", str(limit)] if limit else [])]


def measure(release: Path, server: common.FakeServerProcess, out: Path, concurrency: int, limit: int | None
            ) -> dict:
    server.reset()
    run = run_command(eval_command(release, server.base_url, out, concurrency, limit))
    stats = server.stats()
    span = stats["answered_span_seconds"] + LATENCY  # the first request went out one latency before its reply
    return {"wall_seconds": round(run.seconds, 2), "calls": stats["ok"], "unique_bodies": stats["ok_unique_bodies"],
            "calls_per_second": round(stats["ok"] / span, 2), "whole_command_calls_per_second":
            round(stats["ok"] / run.seconds, 2), "max_in_flight": stats["max_in_flight"],
            "peak_rss_mb": round(run.tree.peak_rss / 2**20)}


def main() -> None:
    options = arguments(__doc__, "40 samples, a naive slice of 12").parse_args()
    samples, naive_samples = (40, 12) if options.quick else (1000, 25)
    work = Path(tempfile.mkdtemp(prefix="eval-bench-", dir=common.isolate_home()))
    release = make_release(work, samples)
    with common.FakeServerProcess(LATENCY, responder="judges") as server:
        ours = measure(release, server, work / "ours", CONCURRENCY, None)
        naive = measure(release, server, work / "naive", 1, naive_samples)
    ideal = CONCURRENCY / LATENCY
    rows = [["naive: one call at a time", naive_samples, naive["calls"], naive["calls_per_second"],
             round(100 * naive["calls_per_second"] / ideal, 1), 1.0],
            [f"curate eval --concurrency {CONCURRENCY}", samples, ours["calls"], ours["calls_per_second"],
             round(100 * ours["calls_per_second"] / ideal, 1),
             round(ours["calls_per_second"] / naive["calls_per_second"], 1)]]
    text, markdown = table(["way", "samples", "calls", "calls/s", "% of ideal", "x naive"], rows)
    print(text)
    print(f"ideal {ideal:.0f} calls/s ({CONCURRENCY} in flight, {LATENCY * 1000:.0f} ms each); whole command "
          f"{ours['wall_seconds']} s, {ours['whole_command_calls_per_second']} calls/s including start-up and "
          f"writing the results; peak memory {ours['peak_rss_mb']} MB")
    info = machine()
    publish("eval_throughput", {"machine": info, "ideal_calls_per_second": ideal, "ours": ours, "naive": naive,
                                "samples": samples, "root": str(ROOT)},
            f"# `curate eval` throughput\n\n{machine_line(info)}. A MultiVerse release of {samples} samples x 4 "
            f"turns, 3 calls per turn, every call answered after {LATENCY * 1000:.0f} ms by the loopback server "
            f"in its own process; calls/s from the first reply to the last.\n\n{markdown}\n\nWhole command: "
            f"{ours['wall_seconds']} s ({ours['whole_command_calls_per_second']} calls/s with start-up and "
            f"results), peak memory of its process tree {ours['peak_rss_mb']} MB.\n", options.quick)


if __name__ == "__main__":
    sys.exit(main())
