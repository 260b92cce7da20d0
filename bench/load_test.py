"""Load test: 50,000 generated images through the image half of the multiverse recipe, three ways, in one run.

Corpus (generated once into --work, reused by later runs): n JPEGs of 256x192 drawn from a seed (rectangles and
lines over a background colour), of which 1% are byte-identical copies of an earlier image, 4% near copies
(an earlier image resized to 90%, brightened by 8% and re-encoded at quality 70) and 0.2% truncated files.

Each way runs `curate run multiverse --input <corpus> --no-release` (paper defaults but a quality threshold of 4,
offline backend, one Prefect server on loopback for all: common.prefect_api) in a fresh process tree:

- `--jobs 1`: everything in the one process (the naive way: no worker processes);
- `--jobs 2`: CPU-bound stages (hashing, offline scoring) over 2 worker processes;
- Dask: a local cluster (a scheduler and 2 single-threaded worker processes, started as `dask scheduler` and
  `dask worker`, with the workers' statistical profiler off as the README advises for CPU-bound stages) given as
  `--dask-address`; stages run through Prefect's Dask task runner and spread their items over the workers.

Reported per way: wall time of the command, seconds per stage (from `curate report --json`), images per second
through the image stages (ingest to weighted sample), peak resident memory of the whole process tree (the CLI,
its worker processes, and for Dask the scheduler and workers; sampled every 0.2 s; the Prefect server is not
counted), CPU seconds by kind of process, and the planted copies found.
The sampled ids must be the same for the three ways. Each way writes to its own output folder, so none of them
reads image fingerprints that another cached.

    cd /work/main && .venv/bin/python bench/load_test.py [--quick] [--images N] [--work DIR]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
import psutil

from benchcurate.curation.engine.store import RunStore
from tests.helpers import CURATE
from tests.servers import dask_cluster

QUICK_IMAGES = 300  # with 1% exact and 4% near copies planted, and a truncated file or so
IMAGE_STAGES = [
    "image_ingest",
    "image_exact_dedup",
    "image_phash",
    "image_near_dedup",
    "image_quality",
    "image_category",
    "category_normalise",
    "category_min_size",
    "category_weighted_sample",
]
EXACT_SHARE, NEAR_SHARE, CORRUPT_SHARE = 0.01, 0.04, 0.002
# The offline heuristic grades these synthetic pictures 3 or 4 (70% get 4); at the paper's 5 nothing would reach
# the category and sampling stages, so the load test keeps 4 and up.
QUALITY = ["--set", "image_quality.min_quality_score=4"]


# ------------------------------------------------------------------------------------------------ corpus


def _draw(seed: int):
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    size = (256, 192)
    image = Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3)))
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randrange(6, 16)):
        x0, y0 = rng.randrange(size[0]), rng.randrange(size[1])
        box = [x0, y0, x0 + rng.randrange(10, 128), y0 + rng.randrange(10, 96)]
        if rng.random() < 0.5:
            draw.rectangle(box, fill=tuple(rng.randrange(256) for _ in range(3)))
        else:
            draw.ellipse(box, fill=tuple(rng.randrange(256) for _ in range(3)))
        draw.line([rng.randrange(size[0]), 0, rng.randrange(size[0]), size[1]], fill=(0, 0, 0), width=2)
    return image


def _make(job: tuple[str, int, str, int]) -> None:
    """(kind, number, folder, source number): write image `number` as an original, copy, near copy or corrupt file."""
    from PIL import ImageEnhance

    kind, number, folder, source = job
    path = Path(folder) / f"img-{number:06d}.jpg"
    if kind == "original":
        _draw(number).save(path, quality=90)
    elif kind == "exact":
        _draw(source).save(path, quality=90)  # the same seed and settings give the same bytes
    elif kind == "near":
        image = _draw(source)
        image = image.resize((int(image.width * 0.9), int(image.height * 0.9)))
        ImageEnhance.Brightness(image).enhance(1.08).save(path, quality=70)
    else:
        _draw(number).save(path, quality=90)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def make_corpus(folder: Path, count: int) -> dict:
    marker = folder / "corpus.json"
    if marker.exists() and json.loads(marker.read_text())["count"] == count:
        return json.loads(marker.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "images").mkdir(parents=True)
    import random

    rng = random.Random(7)
    jobs, truth = [], {"exact": [], "near": [], "corrupt": []}
    for number in range(count):
        draw = rng.random()
        if number > 100 and draw < EXACT_SHARE:
            kind, source = "exact", rng.randrange(number)
        elif number > 100 and draw < EXACT_SHARE + NEAR_SHARE:
            kind, source = "near", rng.randrange(number)
        elif draw < EXACT_SHARE + NEAR_SHARE + CORRUPT_SHARE:
            kind, source = "corrupt", number
        else:
            kind, source = "original", number
        while kind in ("exact", "near") and jobs[source][0] != "original":
            source = rng.randrange(number)  # copy an original, not a copy
        jobs.append((kind, number, str(folder / "images"), source))
        if kind != "original":
            truth[kind].append([number, source])
    start = time.perf_counter()
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(_make, jobs, chunksize=256))
    info = {
        "count": count,
        "seconds": time.perf_counter() - start,
        "truth": truth,
        "bytes": sum(path.stat().st_size for path in (folder / "images").iterdir()),
    }
    marker.write_text(json.dumps(info))
    return info


# ------------------------------------------------------------------------------------------------ running


def _role(process: psutil.Process) -> str:
    command = " ".join(process.cmdline())
    for marker, role in (
        ("curate run", "curate (flow, stage drivers)"),
        ("dask worker", "dask worker"),
        ("dask scheduler", "dask scheduler"),
        ("multiprocessing", "worker process"),
        ("distributed.nanny", "dask worker"),
        ("spawn_main", "worker process"),
    ):
        if marker in command:
            return role
    return "other"


def run_way(name: str, corpus: Path, out: Path, extra: list[str], env: dict, cluster_pids: list[int]) -> dict:
    command = [
        str(CURATE),
        "run",
        "multiverse",
        "--input",
        str(corpus / "images"),
        "--run-id",
        name,
        "--out",
        str(out),
        "--no-release",
        "--progress",
        "log",
        *QUALITY,
        *extra,
    ]
    out.mkdir(parents=True, exist_ok=True)
    run = common.run_command(command, env, log=out / f"{name}.log", also=cluster_pids, role=_role)
    report = json.loads(
        subprocess.run(
            [str(CURATE), "report", name, "--out", str(out), "--json"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    stages = {stage["stage"]: stage for stage in report}
    image_seconds = sum(stages[stage]["seconds"] for stage in IMAGE_STAGES)
    sampled_file = RunStore(out / "runs" / name).kept_path(IMAGE_STAGES.index("category_weighted_sample"))
    sampled = sorted(json.loads(line)["id"] for line in open(sampled_file))
    return {
        "wall_seconds": run.seconds,
        "image_stage_seconds": image_seconds,
        "stage_seconds": {stage: round(entry["seconds"], 2) for stage, entry in stages.items()},
        "funnel": {stage: [entry["items_in"], entry["kept"], entry["by_reason"]] for stage, entry in stages.items()},
        "peak_rss_mb": run.tree.peak_rss / 2**20,
        "cpu_seconds_by_role": run.tree.cpu_by_role(),
        "sampled_ids": sampled,
        "run_dir": str(out / "runs" / name),
    }


def run_ways(ways: list[str], corpus: Path, runs: Path, truth: dict) -> dict[str, dict]:
    """Each way in turn against one Prefect server; Dask's cluster started for its way only."""
    results = {}
    with common.prefect_api(runs) as api:
        env = {**common.curate_env(api, logging="INFO"), "PYTHONPATH": str(common.ROOT)}
        for way in ways:
            print(f"running {way} ...", flush=True)
            if way == "dask":
                # the workers' statistical profiler off, as the README advises for CPU-bound stages
                with dask_cluster(env, runs, {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}) as (
                    address,
                    pids,
                ):
                    results[way] = run_way(way, corpus, runs / way, ["--dask-address", address], env, pids)
            else:
                results[way] = run_way(way, corpus, runs / way, ["--jobs", way.removeprefix("jobs")], env, [])
            results[way]["planted"] = planted_found(Path(results[way]["run_dir"]), truth)
            print(
                f"  {way}: {results[way]['wall_seconds']:.0f} s wall, image stages "
                f"{results[way]['image_stage_seconds']:.0f} s, peak {results[way]['peak_rss_mb']:.0f} MB, "
                f"CPU s {results[way]['cpu_seconds_by_role']}",
                flush=True,
            )
    return results


def planted_found(run_dir: Path, truth: dict) -> dict:
    """How many planted pairs lost one member to the dedup stage meant for them, and how many broken files were
    dropped with an image_* reason (by file name)."""
    reason_of: dict[str, str] = {}
    for entry in RunStore(run_dir).chain():
        folder = Path(entry.output_dir)
        reasons = {}
        for line in open(folder / "decisions.jsonl"):
            row = json.loads(line)
            if not row["kept"]:
                reasons[row["item_id"]] = row["reason"]
        for line in open(folder / "dropped.jsonl"):
            row = json.loads(line)
            if row["id"] in reasons:
                reason_of[Path(row["images"][0]["path"]).name] = reasons[row["id"]]
    name = "img-{:06d}.jpg".format
    return {
        "exact_planted": len(truth["exact"]),
        "exact_dropped": sum(
            "exact_duplicate" in (reason_of.get(name(a)), reason_of.get(name(b))) for a, b in truth["exact"]
        ),
        "near_planted": len(truth["near"]),
        "near_dropped": sum(
            "near_duplicate" in (reason_of.get(name(a)), reason_of.get(name(b))) for a, b in truth["near"]
        ),
        # two near copies of one source are the same bytes, so the second goes as an exact duplicate
        "near_dropped_as_exact": sum(
            "near_duplicate" not in (reason_of.get(name(a)), reason_of.get(name(b)))
            and reason_of.get(name(a)) == "exact_duplicate"
            for a, b in truth["near"]
        ),
        "corrupt_planted": len(truth["corrupt"]),
        "corrupt_dropped": sum(reason_of.get(name(a), "").startswith("image_") for a, _ in truth["corrupt"]),
    }


def main() -> None:
    parser = common.arguments(__doc__, f"{QUICK_IMAGES} images, in a temp folder")
    parser.add_argument("--images", type=int, help="corpus size (overrides --quick's)")
    parser.add_argument(
        "--work", type=Path, help="corpus and runs go here (default: /tmp/bench-load; --quick: a temp folder)"
    )
    parser.add_argument("--ways", default="jobs1,jobs2,dask")
    args = parser.parse_args()
    count = args.images or (QUICK_IMAGES if args.quick else 50_000)
    work = args.work or (common.scratch("load-") if args.quick else Path("/tmp/bench-load"))
    corpus = work / f"corpus-{count}"
    info = make_corpus(corpus, count)
    print(f"corpus: {count} images, {info['bytes'] / 2**20:.0f} MB, generated in {info['seconds']:.0f} s", flush=True)
    runs = work / f"runs-{count}-{int(time.time())}"
    runs.mkdir(parents=True)
    ways = run_ways(args.ways.split(","), corpus, runs, info["truth"])
    machine = common.machine()
    markdown, same = report(ways, count, info, machine), same_sampled(ways)
    for result in ways.values():
        result.pop("sampled_ids")
    data = {
        "benchmark": "load_test",
        "machine": machine,
        "images": count,
        "corpus": info | {"truth": None},
        "ways": ways,
        "same_sampled_ids": same,
    }
    common.publish("load_test" + ("" if count == 50_000 else f"_{count}"), data, markdown, args.quick)


def same_sampled(ways: dict[str, dict]) -> bool:
    return len({json.dumps(way["sampled_ids"]) for way in ways.values()}) == 1


def report(ways: dict[str, dict], count: int, info: dict, machine: dict) -> str:
    """The tables printed, and the markdown of the result file."""
    same = same_sampled(ways)
    first = next(iter(ways.values()))
    rows = []
    for way, result in ways.items():
        label = {
            "jobs1": "1 process (--jobs 1)",
            "jobs2": "2 worker processes (--jobs 2)",
            "dask": "Dask local cluster, 2 workers",
        }[way]
        rows.append(
            [
                label,
                result["wall_seconds"],
                result["image_stage_seconds"],
                count / result["image_stage_seconds"],
                result["peak_rss_mb"],
                ways.get("jobs1", first)["image_stage_seconds"] / result["image_stage_seconds"],
            ]
        )
    text, markdown = common.table(
        ["way", "wall s", "image stages s", "images/s", "peak RSS MB (all processes)", "speed-up vs 1 process"], rows
    )
    stage_rows = [
        [stage, *(ways[way]["stage_seconds"].get(stage, float("nan")) for way in ways)]
        for stage in first["stage_seconds"]
    ]
    stage_text, stage_md = common.table(["stage", *ways], stage_rows)
    funnel_rows = [
        [stage, items_in, kept, ", ".join(f"{k} {v}" for k, v in reasons.items()) or "-"]
        for stage, (items_in, kept, reasons) in first["funnel"].items()
    ]
    funnel_text, funnel_md = common.table(["stage", "in", "kept", "removed"], funnel_rows)
    roles = sorted({role for result in ways.values() for role in result["cpu_seconds_by_role"]})
    cpu_text, cpu_md = common.table(
        ["CPU seconds", *ways],
        [[role, *(ways[way]["cpu_seconds_by_role"].get(role, 0.0) for way in ways)] for role in roles],
    )
    planted = first["planted"]
    summary = (
        f"{count} images ({info['bytes'] / 2**20:.0f} MB). Planted: {planted['exact_planted']} exact copies "
        f"({planted['exact_dropped']} dropped as exact duplicates), {planted['near_planted']} near copies "
        f"({planted['near_dropped']} dropped as near duplicates, {planted['near_dropped_as_exact']} as exact "
        f"copies of an identical near copy of the same source), {planted['corrupt_planted']} truncated files "
        f"({planted['corrupt_dropped']} dropped with an image_* reason). Same sampled ids in every way: {same}."
    )
    print(text, stage_text, cpu_text, funnel_text, summary, sep="\n\n")
    return (
        f"# Load test: {count} images through the image stages\n\n"
        f"{common.machine_line(machine)}\n\n{markdown}\n\nSeconds per stage:\n\n{stage_md}\n\n"
        f"CPU seconds by process:\n\n{cpu_md}\n\nFunnel (the same for every way):\n\n{funnel_md}\n\n"
        f"{summary}\n"
    )


if __name__ == "__main__":
    main()
