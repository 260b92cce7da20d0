"""What a small `curate run` pays besides its work, whole commands as a user runs them (issue #20 item 11).

One tiny input (6 images that survive to a release), the multiverse recipe, three ways in one run:

- temporary: `curate run ... --prefect-server temporary`: Prefect starts its own server for the process and stops
  it at exit (what every run paid before the local server);
- local: `curate run ...` with the output folder's local Prefect server already up (what every run after the
  first pays); its first start is timed on its own (`curate prefect up`), once migrating a new database and
  once in a second new folder, from the migrated database the first one kept;
- no Prefect: the same stages and release in one plain process (`run_all` then `write_release`), the floor any
  orchestration adds to.

Overhead = wall time of the command minus the no-Prefect wall time of the same work. Each way runs `repeats` times
with a fresh run id (so every stage runs); medians are reported.

    .venv/bin/python bench/startup.py [--quick]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported

from tests.factories import make_image
from tests.helpers import CURATE

SETTINGS = ["--set", "image_quality.min_quality_score=1", "--set", "category_min_size.min_items_per_category=1"]
NO_PREFECT = """
import sys
from pathlib import Path
from benchcurate.curation.core.errors import validated
from benchcurate.curation.recipes import resolve_run
from benchcurate.schemas import RunOptions
from benchcurate.curation.release.writer import write_release
from benchcurate.curation.engine.runner import run_all
from benchcurate.curation.engine.store import RunStore
out, folder, run_id = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
overrides = {"image_quality": {"min_quality_score": 1}, "category_min_size": {"min_items_per_category": 1}}
options = validated(RunOptions, {"input_path": folder, "run_id": run_id, "overrides": overrides})
config = resolve_run("multiverse", options, out)
store = RunStore(out / "runs" / run_id)
store.save_config(config)
run_all(store.root)
write_release(store.root, out)
"""


def measure(work: Path, repeats: int) -> dict:
    images = work / "images"
    for seed in range(6):
        make_image(images / f"{seed}.png", seed, (320, 240))
    # no PREFECT_API_URL: `curate run` picks the server the way measured names; a cache of its own, empty, so the
    # first server migrates a new database (and keeps it) and the second starts from the kept copy
    env = {**common.curate_env(), "XDG_CACHE_HOME": str(work / "cache")}
    ways = {"temporary": [], "local": [], "no_prefect": []}
    first_start = common.run_command([str(CURATE), "prefect", "up", "--out", str(work / "out")], env).seconds
    kept = [str(CURATE), "prefect", "up", "--out", str(work / "out-kept")]
    kept_start = common.run_command(kept, env).seconds
    subprocess.run([str(CURATE), "prefect", "down", "--out", str(work / "out-kept")], env=env, capture_output=True)
    try:
        for attempt in range(repeats):
            for way in ways:
                run_id = f"{way}-{attempt}"
                if way == "no_prefect":
                    args = [sys.executable, "-c", NO_PREFECT, str(work / "out"), str(images), run_id]
                else:
                    args = [
                        str(CURATE),
                        "run",
                        "multiverse",
                        "--input",
                        str(images),
                        "--run-id",
                        run_id,
                        "--progress",
                        "none",
                        "--out",
                        str(work / "out"),
                        "--prefect-server",
                        way,
                        *SETTINGS,
                    ]
                ways[way].append(common.run_command(args, env).seconds)
    finally:
        subprocess.run([str(CURATE), "prefect", "down", "--out", str(work / "out")], env=env, capture_output=True)
    medians = {way: common.median(seconds) for way, seconds in ways.items()}
    return {
        "repeats": repeats,
        "seconds": ways,
        "median_seconds": medians,
        "local_server_first_start": first_start,
        "local_server_first_start_kept_database": kept_start,
        "overhead_seconds": {way: medians[way] - medians["no_prefect"] for way in ("temporary", "local")},
        "speedup_local_over_temporary": medians["temporary"] / medians["local"],
    }


def main() -> None:
    args = common.arguments(__doc__, "one repeat").parse_args()
    data = measure(common.scratch("startup-"), 1 if args.quick else 5)
    data["machine"] = common.machine()
    m, o = data["median_seconds"], data["overhead_seconds"]
    text, markdown = common.table(
        ["way", "median wall s", "overhead over no Prefect, s"],
        [
            ["curate run, Prefect's temporary server", m["temporary"], o["temporary"]],
            ["curate run, the local server (reused)", m["local"], o["local"]],
            ["no Prefect (run_all + write_release)", m["no_prefect"], 0.0],
        ],
    )
    summary = (
        f"local server first start (curate prefect up): {data['local_server_first_start']:.1f} s migrating a new "
        f"database, {data['local_server_first_start_kept_database']:.1f} s in the next new folder, from the kept "
        f"one ({data['local_server_first_start'] / data['local_server_first_start_kept_database']:.2f}x); "
        f"a run on the reused local server is {data['speedup_local_over_temporary']:.2f}x faster than "
        f"with a temporary server"
    )
    print(text + "\n" + summary)
    common.publish(
        "startup",
        data,
        f"# Start-up of a small run\n\n{common.machine_line(data['machine'])}; "
        f"{data['repeats']} repeats, medians.\n\n{markdown}\n\n{summary}.\n",
        args.quick,
    )


if __name__ == "__main__":
    main()
