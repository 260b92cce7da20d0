"""Publishing two versions to a Hub: `curate publish --upload` against the naive script, in the same run.

Corpus: n noise pictures (PNG, 512x384, about 0.6 MB each, so images dominate as in a real benchmark) through the
multiverse recipe (in process, offline backend), released as 0.1.0 in shards of `--shard-mb`; then 0.2.0 of the
same run with one sample from the middle listed in REMOVALS.jsonl. Each way publishes both versions, as whole
commands in their own processes, to a fresh loopback Hub stand-in (tests/fakes/hub_server.py, LFS transfer),
once answering at once and once with `--latency-ms` before each API answer (storage transfers not delayed), as a
Hub across the internet would:

- naive: what a throw-away script does: `HfApi.upload_file` for each file of the folder, then `create_tag`;
- ours: `curate publish FOLDER --repo ORG/NAME --upload` (checks, one `upload_folder` commit that also deletes
  what the version lacks, the tag, the Hub's listing compared with SHA256SUMS).

Reported per version: wall seconds of the command, requests, commits, MB the Hub received, peak RSS of the
command; and whether main then holds exactly the version (the naive script leaves files 0.2.0 no longer has, so
`data/test-*.parquet` would load rows of both).

    cd /work/main && .venv/bin/python bench/publish_hub.py [--quick]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
from release_shards import make_corpus  # the same noise pictures

QUICK_IMAGES, QUICK_SHARD_MB = 12, 2
NAIVE = """
import sys
from pathlib import Path
from huggingface_hub import HfApi
folder, repo, tag = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
api = HfApi()
api.create_repo(repo, repo_type="dataset", exist_ok=True)
for path in sorted(p for p in folder.rglob("*") if p.is_file()):
    api.upload_file(path_or_fileobj=str(path), path_in_repo=path.relative_to(folder).as_posix(), repo_id=repo,
                    repo_type="dataset")
api.create_tag(repo, tag=tag, repo_type="dataset")
"""


def releases(work: Path, count: int, shard_mb: float) -> tuple[Path, Path]:
    """0.1.0 and 0.2.0 (one sample from the middle removed on request) of one run."""
    import pyarrow.parquet as pq

    from benchcurate.curation.engine.runner import run_all
    from benchcurate.curation.release.writer import write_release
    from tests.helpers import SMALL, prepared_run

    make_corpus(work / "images", count)
    run_dir = prepared_run(
        work, "bench", input_path=work / "images", overrides={**SMALL, "category_weighted_sample": {"max_items": count}}
    )  # keep them all
    run_all(run_dir)
    first = write_release(run_dir, work / "out", version="0.1.0", overrides={"max_shard_mb": shard_mb})
    ids = [
        index
        for path in sorted((first / "data").glob("*.parquet"))
        for index in pq.read_table(path, columns=["index"]).column(0).to_pylist()
    ]
    (first.parent / "REMOVALS.jsonl").write_text(
        json.dumps({"sample_id": ids[len(ids) // 2], "reason": "bench"}) + "\n"
    )
    second = write_release(run_dir, work / "out", version="0.2.0", overrides={"max_shard_mb": shard_mb})
    return first, second


def publish(way: str, folder: Path, hub, work: Path) -> dict:
    from tests.fakes.hub_server import hub_env

    tag = f"v{folder.name}"
    env = {
        **os.environ,
        **hub_env(hub, "hf_bench"),
        "HF_HOME": str(work / f"hf-{way}"),
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    }
    command = (
        [sys.executable, "-c", NAIVE, str(folder), "bench/set", tag]
        if way == "naive"
        else [str(Path(sys.executable).parent / "curate"), "publish", str(folder), "--repo", "bench/set", "--upload"]
    )
    hub.clear_requests()
    commits_before = len(hub.commit_titles("bench/set")) if hub.has_repo("bench/set") else 0
    run = common.run_command(command, env=env, cwd=work)
    requests = hub.requests
    files = {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    on_main = hub.files("bench/set", "main")
    on_main.pop(".gitattributes", None)
    return {
        "seconds": run.seconds,
        "requests": len(requests),
        "commits": len(hub.commit_titles("bench/set")) - commits_before,
        "mb_received": sum(len(r.body) for r in requests) / 2**20,
        "lfs_objects_sent": len(hub.uploads()),
        "peak_rss_mb": run.tree.peak_rss / 2**20,
        "main_is_the_version": on_main == files,
        "stale_files_on_main": sorted(set(on_main) - set(files)),
        "tagged": hub.refs("bench/set")["tags"].get(tag) is not None,
    }


def main() -> None:
    parser = common.arguments(__doc__, f"{QUICK_IMAGES} images, shards of {QUICK_SHARD_MB} MB")
    parser.add_argument("--latency-ms", type=float, default=100, help="the slower Hub's delay per API request")
    args = parser.parse_args()
    count, shard_mb = (QUICK_IMAGES, QUICK_SHARD_MB) if args.quick else (600, 50)
    work = common.scratch("publish-")
    first, second = releases(work, count, shard_mb)
    from tests.fakes.hub_server import FakeHub, Token

    ways = {}
    for latency in (0.0, args.latency_ms / 1000):
        for way in ("naive", "ours"):
            with FakeHub({"hf_bench": Token("bench", "write")}, latency=latency) as hub:
                ways[f"{way}@{latency * 1000:g}ms"] = {
                    folder.name: publish(way, folder, hub, work) for folder in (first, second)
                }
    sizes = {
        folder.name: {
            "files": sum(1 for p in folder.rglob("*") if p.is_file()),
            "mb": sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20,
            "shards": len(list((folder / "data").glob("*.parquet"))),
        }
        for folder in (first, second)
    }
    slow = f"{args.latency_ms:g}ms"
    ratio = {
        f"{version}@{at}": ways[f"naive@{at}"][version]["seconds"] / ways[f"ours@{at}"][version]["seconds"]
        for version in sizes
        for at in ("0ms", slow)
    }
    data = {
        "benchmark": "publish_hub",
        "quick": args.quick,
        "machine": common.machine("huggingface_hub"),
        "images": count,
        "shard_mb": shard_mb,
        "latency_ms": args.latency_ms,
        "releases": sizes,
        "ways": ways,
        "time_ratio_naive_over_ours": ratio,
    }
    labels = {"naive": "naive: upload_file per file + create_tag", "ours": "curate publish --upload"}
    rows = [
        [
            labels[key.split("@")[0]],
            key.split("@")[1],
            version,
            m["seconds"],
            m["requests"],
            m["commits"],
            m["mb_received"],
            m["lfs_objects_sent"],
            m["peak_rss_mb"],
            m["main_is_the_version"],
            len(m["stale_files_on_main"]),
        ]
        for key, by_version in ways.items()
        for version, m in by_version.items()
    ]
    text, markdown = common.table(
        [
            "way",
            "API latency",
            "version",
            "seconds",
            "requests",
            "commits",
            "MB received",
            "LFS objects",
            "peak RSS MB",
            "main = version",
            "stale files",
        ],
        rows,
    )
    ours = ways["ours@0ms"]
    summary = (
        f"{count} images; 0.1.0: {sizes['0.1.0']['files']} files, {sizes['0.1.0']['mb']:.0f} MB, "
        f"{sizes['0.1.0']['shards']} shards. Time naive / ours at 0 ms: 0.1.0 {ratio['0.1.0@0ms']:.2f}x, "
        f"0.2.0 {ratio['0.2.0@0ms']:.2f}x; at {slow} per API request: 0.1.0 {ratio[f'0.1.0@{slow}']:.2f}x, "
        f"0.2.0 {ratio[f'0.2.0@{slow}']:.2f}x. Commits per version: naive "
        f"{ways['naive@0ms']['0.1.0']['commits']}, ours {ours['0.1.0']['commits']}. "
        f"0.2.0 (one sample removed) re-sent {ours['0.2.0']['mb_received']:.0f} MB of "
        f"{sizes['0.2.0']['mb']:.0f}: the shards after the removed row shift. Main holds exactly 0.2.0: "
        f"naive {ways['naive@0ms']['0.2.0']['main_is_the_version']}, "
        f"ours {ours['0.2.0']['main_is_the_version']}."
    )
    print(text)
    print(summary)
    common.publish(
        "publish_hub",
        data,
        f"# Publishing two versions to a Hub (loopback stand-in)\n\n"
        f"{common.machine_line(data['machine'])}\n\n{markdown}\n\n{summary}\n",
        args.quick,
    )


if __name__ == "__main__":
    main()
