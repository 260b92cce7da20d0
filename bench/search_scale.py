"""Near-duplicate search at scale: `pairs_within` (multi-index hashing) vs `brute_force_pairs`, and the whole
`curate images dups` command on a 1M-row hashes file (wall time and peak memory of all its processes).

Hashes: n random uint64 of which 1% are planted copies of other hashes with 0-10 bits flipped.

    cd /work/main && .venv/bin/python bench/search_scale.py [--quick]
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
import numpy as np

from benchcurate.curation.core.grouping import groups_from_pairs
from benchcurate.curation.core.hamming import brute_force_pairs, pairs_within, plan_chunks
from benchcurate.curation.images.hashfile import read_hashes
from benchcurate.curation.images.near_dedup import NearDedupConfig, duplicate_groups
from benchcurate.curation.images.phash import PhashConfig, algorithm
from tests.helpers import CURATE

THRESHOLD = 8
# The rows name no real files: the search and the grouping are measured, not the thumbnail verification
# (bench/near_dup_quality.py) or the keep rule's look at the pictures.
SEARCH_ONLY = NearDedupConfig(max_hamming_distance=THRESHOLD, verify=False, keep_rule="largest")
PLANTED_SHARE = 0.01
MAX_PLANTED_DISTANCE = 10
SAMPLE_SECONDS = 0.05
PSS_EVERY = 10  # samples: summed PSS (shared pages counted once) every 0.5 s; reading smaps is slower
FULL = {"sizes": [10_000, 100_000, 1_000_000], "brute_limit": 100_000, "command_rows": 1_000_000, "repeats": 3}
# Brute force measured at the smaller size and extrapolated to the larger, as the full run does at 1M.
QUICK = {"sizes": [5_000, 20_000], "brute_limit": 5_000, "command_rows": 20_000, "repeats": 1}
TARGET_SPEEDUP_100K = 10.0
TARGET_SECONDS = 60.0
TARGET_BYTES = 4 * 10**9


# ----------------------------------------------------------------------------------------------- hashes


def synthetic_hashes(n: int, seed: int = 0) -> tuple[np.ndarray, dict]:
    """n hashes: random uint64, and ~1% planted copies of distinct random sources at distance 0..10, shuffled."""
    rng = np.random.default_rng(seed)
    planted = int(n * PLANTED_SHARE)
    base = rng.integers(0, np.iinfo(np.uint64).max, size=n - planted, dtype=np.uint64, endpoint=True)
    sources = rng.choice(n - planted, size=planted, replace=False)
    distance = rng.integers(0, MAX_PLANTED_DISTANCE + 1, size=planted)
    rank = np.argsort(np.argsort(rng.random((planted, 64)), axis=1), axis=1)  # a random order of the 64 bits
    flip = rank < distance[:, None]
    masks = (flip.astype(np.uint64) << np.arange(64, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    hashes = np.concatenate([base, base[sources] ^ masks])
    order = rng.permutation(n)
    hashes = hashes[order]
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)  # where each pre-shuffle index ended up
    copies = np.arange(n - planted, n)
    truth = {
        "planted": planted,
        "planted_within_threshold": int((distance <= THRESHOLD).sum()),
        "pairs": np.stack([position[sources], position[copies], distance], axis=1),
    }
    return hashes, truth


def planted_found(pairs: np.ndarray, truth: dict) -> int:
    """How many planted pairs within the threshold are among the pairs found."""
    expected = truth["pairs"][truth["pairs"][:, 2] <= THRESHOLD]
    i, j = np.minimum(expected[:, 0], expected[:, 1]), np.maximum(expected[:, 0], expected[:, 1])
    found = set(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))
    return sum((a, b) in found for a, b in zip(i.tolist(), j.tolist()))


# ----------------------------------------------------------------------------------------------- search


def bench_search(n: int, repeats: int, brute: bool) -> dict:
    hashes, truth = synthetic_hashes(n)
    chunks = plan_chunks(n, n, THRESHOLD, self_join=True)
    out = {
        "n": n,
        "planted": truth["planted"],
        "planted_within_threshold": truth["planted_within_threshold"],
        "plan": [f"{c.width} bits r={c.radius}" for c in chunks] if chunks else "brute force",
    }
    results = {}
    for name, run in (
        ("pairs_within_w1", lambda: pairs_within(hashes, THRESHOLD, workers=1)),
        ("pairs_within_w2", lambda: pairs_within(hashes, THRESHOLD, workers=2)),
    ):
        seconds, results[name] = common.repeat(run, repeats)
        out[name] = {"seconds": seconds, "median": common.median(seconds), "pairs": len(results[name])}
    out["w1_equals_w2"] = bool(np.array_equal(results["pairs_within_w1"], results["pairs_within_w2"]))
    out["planted_found"] = planted_found(results["pairs_within_w1"], truth)
    if brute:
        seconds, reference = common.repeat(lambda: brute_force_pairs(hashes, THRESHOLD), repeats)
        out["brute_force"] = {
            "seconds": seconds,
            "median": common.median(seconds),
            "pairs": len(reference),
            "extrapolated": False,
        }
        out["pairs_equal_brute_force"] = bool(
            np.array_equal(results["pairs_within_w1"], reference)
            and np.array_equal(results["pairs_within_w2"], reference)
        )
        groups = groups_from_pairs(n, [(int(i), int(j)) for i, j, _ in results["pairs_within_w1"]])
        brute_groups = groups_from_pairs(n, [(int(i), int(j)) for i, j, _ in reference])
        out["groups_equal_brute_force"] = groups == brute_groups
        out["groups"] = len(groups)
    return out


def extrapolate(small: dict, n: int) -> dict:
    """Brute force is quadratic: scale the measured time by the ratio of pair counts."""
    factor = (n * (n - 1)) / (small["n"] * (small["n"] - 1))
    return {
        "median": small["brute_force"]["median"] * factor,
        "extrapolated": True,
        "from_n": small["n"],
        "factor": factor,
    }


# ---------------------------------------------------------------------------------------------- command


def write_hashes_file(path: Path, n: int) -> dict:
    hashes, truth = synthetic_hashes(n, seed=1)
    rng = np.random.default_rng(2)
    widths, heights = rng.integers(200, 4000, size=n), rng.integers(200, 4000, size=n)
    sizes = rng.integers(10_000, 5_000_000, size=n)
    alg = algorithm(PhashConfig())
    with open(path, "w", encoding="utf-8") as handle:
        for k in range(n):
            row = {
                "path": f"/data/images/{k // 1000:04d}/img_{k:07d}.jpg",
                "sha256": hashlib.sha256(k.to_bytes(8, "little")).hexdigest(),
                "phash": f"{int(hashes[k]):016x}",
                "width": int(widths[k]),
                "height": int(heights[k]),
                "bytes": int(sizes[k]),
                "error": None,
                "algorithm": alg,
            }
            handle.write(json.dumps(row) + "\n")
    return {"rows": n, "bytes": path.stat().st_size, "planted_within_threshold": truth["planted_within_threshold"]}


def run_command(hashes_file: Path, out: Path, jobs: int) -> dict:
    command = [
        str(CURATE),
        "images",
        "dups",
        str(hashes_file),
        "--threshold",
        str(THRESHOLD),
        "--out",
        str(out),
        "--jobs",
        str(jobs),
        "--no-verify",
        "--keep-rule",
        "largest",
    ]
    if Path("/usr/bin/time").exists():
        command = ["/usr/bin/time", "-v"] + command
    run = common.run_command(command, every=SAMPLE_SECONDS, pss_every=PSS_EVERY)
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", run.stderr)
    summary = next((line for line in run.stderr.splitlines() if "hashes:" in line), "")
    return {
        "wall_seconds": run.seconds,
        "peak_tree_rss_bytes": run.tree.peak_rss,
        "peak_tree_pss_bytes": run.tree.peak_pss,
        "peak_processes": run.tree.peak_processes,
        "samples": run.tree.samples,
        "time_v_max_rss_bytes": int(found.group(1)) * 1024 if found else None,
        "summary": summary,
    }


def bench_command(n: int, repeats: int, work: Path) -> dict:
    hashes_file = work / "hashes.jsonl"
    elapsed, info = common.timed(lambda: write_hashes_file(hashes_file, n))
    info["write_seconds"] = elapsed
    print(f"wrote {n:,} rows ({info['bytes'] / 2**20:.0f} MB) in {elapsed:.1f} s")
    # In-process breakdown (one run): reading the file vs the search and grouping.
    read_seconds, table = common.timed(lambda: read_hashes(hashes_file))
    groups_seconds, groups = common.timed(lambda: list(duplicate_groups(table, SEARCH_ONLY, None, 1)))
    info["in_process"] = {
        "read_hashes_seconds": read_seconds,
        "duplicate_groups_seconds_workers1": groups_seconds,
        "groups": len(groups),
    }
    table = groups = None  # freed before the commands run
    runs = {}
    outputs = {}
    for jobs in (1, 2):
        runs[jobs] = []
        for rep in range(repeats):
            out = work / f"groups-j{jobs}.jsonl"
            runs[jobs].append(run_command(hashes_file, out, jobs))
            print(
                f"  dups --jobs {jobs} run {rep + 1}: {runs[jobs][-1]['wall_seconds']:.1f} s, peak tree RSS "
                f"{runs[jobs][-1]['peak_tree_rss_bytes'] / 2**30:.2f} GiB"
            )
        outputs[jobs] = hashlib.sha256(out.read_bytes()).hexdigest()
    summary = {}
    for jobs, rows in runs.items():
        summary[f"jobs{jobs}"] = {
            "runs": rows,
            "wall_seconds_median": common.median([r["wall_seconds"] for r in rows]),
            "peak_tree_rss_bytes_max": max(r["peak_tree_rss_bytes"] for r in rows),
            "peak_tree_pss_bytes_max": max(r["peak_tree_pss_bytes"] for r in rows),
            "time_v_max_rss_bytes_max": max((r["time_v_max_rss_bytes"] or 0) for r in rows) or None,
            "command_summary": rows[-1]["summary"],
        }
    info["command"] = summary
    info["outputs_identical_jobs1_jobs2"] = outputs[1] == outputs[2]
    return info


def main() -> None:
    args = common.arguments(
        __doc__, "5K and 20K hashes (brute force at 5K, extrapolated to 20K), a 20K-row command, 1 repeat"
    ).parse_args()
    cfg = QUICK if args.quick else FULL
    repeats, command_rows = cfg["repeats"], cfg["command_rows"]
    search = []
    for n in cfg["sizes"]:
        result = bench_search(n, repeats, brute=n <= cfg["brute_limit"])
        if "brute_force" not in result:
            result["brute_force"] = extrapolate(
                max((r for r in search if "pairs_equal_brute_force" in r), key=lambda r: r["n"]), n
            )
        brute = result["brute_force"]["median"]
        result["speedup_w1"] = brute / result["pairs_within_w1"]["median"]
        result["speedup_w2"] = brute / result["pairs_within_w2"]["median"]
        search.append(result)
        print(
            f"n={n:,}: pairs_within w1 {result['pairs_within_w1']['median']:.3f} s, w2 "
            f"{result['pairs_within_w2']['median']:.3f} s, brute {brute:.2f} s"
            f"{' (extrapolated)' if result['brute_force']['extrapolated'] else ''}"
        )
    command = bench_command(command_rows, repeats, common.scratch("search-scale-"))

    at_100k = next((r for r in search if r["n"] == 100_000), None)
    cmd1, cmd2 = command["command"]["jobs1"], command["command"]["jobs2"]
    targets = {
        "speedup_at_100k_w1": at_100k["speedup_w1"] if at_100k else None,
        "speedup_at_100k_met": (at_100k["speedup_w1"] >= TARGET_SPEEDUP_100K) if at_100k else None,
        "command_rows": command_rows,
        "command_under_60s_jobs1": cmd1["wall_seconds_median"] < TARGET_SECONDS,
        "command_under_60s_jobs2": cmd2["wall_seconds_median"] < TARGET_SECONDS,
        "command_memory_under_4gb_jobs1": cmd1["peak_tree_rss_bytes_max"] < TARGET_BYTES,
        "command_memory_under_4gb_jobs2": cmd2["peak_tree_rss_bytes_max"] < TARGET_BYTES,
    }
    data = {
        "benchmark": "search_scale",
        "quick": args.quick,
        "machine": common.machine(),
        "threshold": THRESHOLD,
        "repeats": repeats,
        "search": search,
        "command": command,
        "targets": targets,
    }

    head = [
        "n",
        "plan",
        "pairs",
        "planted<=8 found",
        "w1 s",
        "w2 s",
        "brute s",
        "x brute w1",
        "x brute w2",
        "equal to brute",
    ]
    body = [
        [
            f"{r['n']:,}",
            " / ".join(r["plan"]) if isinstance(r["plan"], list) else r["plan"],
            r["pairs_within_w1"]["pairs"],
            f"{r['planted_found']}/{r['planted_within_threshold']}",
            r["pairs_within_w1"]["median"],
            r["pairs_within_w2"]["median"],
            f"{r['brute_force']['median']:.2f}{' (extrap.)' if r['brute_force']['extrapolated'] else ''}",
            r["speedup_w1"],
            r["speedup_w2"],
            (
                "pairs and groups equal"
                if r["pairs_equal_brute_force"] and r["groups_equal_brute_force"]
                else "DIFFERENT"
            )
            if "pairs_equal_brute_force" in r
            else f"n/a (w1 == w2: {r['w1_equals_w2']})",
        ]
        for r in search
    ]
    text, md = common.table(head, body)
    gib = 2**30
    cmd_head = [
        "--jobs",
        "wall s (median)",
        "all runs s",
        "peak tree RSS GiB",
        "peak tree PSS GiB (0.5 s)",
        "time -v max RSS GiB",
        "max processes",
    ]
    cmd_rows = [
        [
            j,
            c["wall_seconds_median"],
            ", ".join(f"{r['wall_seconds']:.1f}" for r in c["runs"]),
            c["peak_tree_rss_bytes_max"] / gib,
            c["peak_tree_pss_bytes_max"] / gib,
            (c["time_v_max_rss_bytes_max"] or float("nan")) / gib,
            max(r["peak_processes"] for r in c["runs"]),
        ]
        for j, c in ((1, cmd1), (2, cmd2))
    ]
    cmd_text, cmd_md = common.table(cmd_head, cmd_rows)
    ip = command["in_process"]
    cmd_line = (
        f"`curate images dups` on {command_rows:,} rows ({command['bytes'] / 2**20:.0f} MB JSONL), threshold "
        f"{THRESHOLD}; output: {cmd1['command_summary']}. Outputs identical for --jobs 1 and 2: "
        f"{command['outputs_identical_jobs1_jobs2']}. In-process breakdown: read_hashes "
        f"{ip['read_hashes_seconds']:.1f} s, duplicate_groups (workers=1) {ip['duplicate_groups_seconds_workers1']:.1f} s."
    )
    target_lines = [
        f"- >= {TARGET_SPEEDUP_100K:.0f}x vs brute force at 100K: "
        + (
            f"{targets['speedup_at_100k_w1']:.0f}x (workers=1) -> {'met' if targets['speedup_at_100k_met'] else 'NOT met'}"
            if at_100k
            else "not run (quick)"
        ),
        f"- command under {TARGET_SECONDS:.0f} s: --jobs 1 {cmd1['wall_seconds_median']:.1f} s, --jobs 2 "
        f"{cmd2['wall_seconds_median']:.1f} s -> {'met' if targets['command_under_60s_jobs1'] else 'NOT met'} / "
        f"{'met' if targets['command_under_60s_jobs2'] else 'NOT met'}",
        f"- peak memory of all processes under 4 GB: --jobs 1 {cmd1['peak_tree_rss_bytes_max'] / 1e9:.2f} GB, --jobs 2 "
        f"{cmd2['peak_tree_rss_bytes_max'] / 1e9:.2f} GB (summed RSS) -> "
        f"{'met' if targets['command_memory_under_4gb_jobs1'] else 'NOT met'} / "
        f"{'met' if targets['command_memory_under_4gb_jobs2'] else 'NOT met'}",
    ]
    notes = (
        "Brute force at n above 100K is extrapolated from the 100K median by the ratio of pair counts "
        "(quadratic). Summed RSS counts copy-on-write pages shared by forked workers once per process (an upper "
        "bound); PSS splits them. /usr/bin/time -v reports the largest single process."
    )
    machine_line = f"Machine: {common.machine_line(data['machine'])}"
    print("\n" + machine_line + "\n\n" + text + "\n\n" + cmd_text + "\n\n" + cmd_line + "\n" + "\n".join(target_lines))
    markdown = "\n\n".join(
        [
            "# Near-duplicate search at scale",
            machine_line,
            f"Threshold {THRESHOLD}; hashes: random uint64 with {PLANTED_SHARE:.0%} planted copies at "
            f"distance 0-{MAX_PLANTED_DISTANCE}; median of {repeats} runs.",
            "## pairs_within vs brute_force_pairs",
            md,
            "## The whole command",
            cmd_md,
            cmd_line,
            "## Targets",
            "\n".join(target_lines),
            notes,
        ]
    )
    common.publish("search_scale", data, markdown, args.quick)


if __name__ == "__main__":
    main()
