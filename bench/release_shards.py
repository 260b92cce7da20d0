"""Writing a large release: parquet shards built one at a time vs all rows in one table, in the same run.

Corpus: n noise pictures (PNG, 512x384, about 0.6 MB each, so images dominate as in a real benchmark), wrapped in
samples with provenance. Each way runs in a fresh process, so its peak resident memory is its own:

- naive: every row (image bytes included) in one `Dataset.from_list`, written as one parquet file (what our
  release writer did before sharding, and what a throw-away script does);
- ours: `curation.release.writer.write_shards`, which builds and writes one shard of at most `--shard-mb`
  (default 100) at a time and names the files `test-NNNNN-of-MMMMM.parquet`.

Reported: wall seconds, peak RSS (and its rise over the process after imports), files, bytes written, and a check
that both wrote the same rows (ids in order, image bytes by hash).

    cd /work/main && .venv/bin/python bench/release_shards.py [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
import numpy as np
from PIL import Image

SIZE = (512, 384)
QUICK_IMAGES, QUICK_SHARD_MB = 24, 4  # several shards for ours, still one table for the naive way


def make_corpus(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for number in range(count):
        path = folder / f"img-{number:05d}.png"
        pixels = rng.integers(0, 256, size=(SIZE[1], SIZE[0], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(path, compress_level=1)
        paths.append(path)
    return paths


def samples_of(folder: Path):
    from benchcurate.schemas import ImageRef
    from tests.factories import make_sample

    samples = []
    for number, path in enumerate(sorted(folder.glob("*.png"))):
        image = ImageRef(
            path=str(path),
            sha256="0" * 64,
            size_bytes=path.stat().st_size,
            width=SIZE[0],
            height=SIZE[1],
            format="PNG",
            phash="0" * 16,
        )
        samples.append(make_sample(number, images=[image]))
    return samples


def peak_rss_mb() -> float:
    """This process's high-water RSS (VmHWM). Not getrusage's ru_maxrss: Linux carries that over from the parent
    through fork and exec, so a child started by a big parent would report the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def child(way: str, images: Path, out: Path, shard_mb: float) -> dict:
    from datasets import Dataset, disable_progress_bars

    from benchcurate.curation.release.columns import features, to_row
    from benchcurate.curation.release.writer import write_shards

    disable_progress_bars()
    samples = samples_of(images)
    baseline = peak_rss_mb()
    start = time.perf_counter()
    if way == "naive":
        out.mkdir(parents=True, exist_ok=True)
        Dataset.from_list(
            [to_row(sample, "multiverse") for sample in samples], features=features("multiverse")
        ).to_parquet(str(out / "test-00000-of-00001.parquet"))
    else:
        write_shards(samples, out, "test", int(shard_mb * 1024 * 1024), "multiverse")
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_rss_mb": peak_rss_mb(), "baseline_rss_mb": baseline}


def digest_rows(folder: Path) -> tuple[int, str]:
    """(rows, one hash over the ids and image bytes in file order)."""
    import pyarrow.parquet as pq

    digest, rows = hashlib.sha256(), 0
    for path in sorted(folder.glob("*.parquet")):
        table = pq.read_table(path, columns=["index", "image"])
        for index, image in zip(table.column("index").to_pylist(), table.column("image").to_pylist()):
            digest.update(index.encode())
            digest.update(hashlib.sha256(image["bytes"]).digest())
            rows += 1
    return rows, digest.hexdigest()


def run_way(way: str, images: Path, out: Path, shard_mb: float) -> dict:
    run = common.run_command(
        [
            sys.executable,
            __file__,
            "--child",
            way,
            "--images",
            str(images),
            "--out",
            str(out),
            "--shard-mb",
            str(shard_mb),
        ]
    )
    measured = json.loads(run.stdout.strip().splitlines()[-1])
    files = sorted(out.glob("*.parquet"))
    rows, digest = digest_rows(out)
    return {
        **measured,
        "files": len(files),
        "bytes": sum(path.stat().st_size for path in files),
        "rows": rows,
        "rows_digest": digest,
    }


def main() -> None:
    parser = common.arguments(__doc__, f"{QUICK_IMAGES} images, shards of {QUICK_SHARD_MB} MB")
    parser.add_argument("--shard-mb", type=float, help="default: 100")
    parser.add_argument("--child", choices=["naive", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--images", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.images, args.out, args.shard_mb)))
        return
    count = QUICK_IMAGES if args.quick else 2_000
    args.shard_mb = args.shard_mb or (QUICK_SHARD_MB if args.quick else 100)
    work = common.scratch("release-")
    paths = make_corpus(work / "images", count)
    image_mb = sum(path.stat().st_size for path in paths) / 2**20
    ways = {way: run_way(way, work / "images", work / way, args.shard_mb) for way in ("naive", "ours")}
    same = ways["naive"]["rows_digest"] == ways["ours"]["rows_digest"] and ways["naive"]["rows"] == count
    data = {
        "benchmark": "release_shards",
        "quick": args.quick,
        "machine": common.machine(),
        "images": count,
        "image_mb": image_mb,
        "shard_mb": args.shard_mb,
        "ways": ways,
        "same_rows": same,
        "peak_rss_ratio": ways["naive"]["peak_rss_mb"] / ways["ours"]["peak_rss_mb"],
        "time_ratio": ways["naive"]["seconds"] / ways["ours"]["seconds"],
    }
    rows = [
        [
            label,
            ways[way]["seconds"],
            ways[way]["peak_rss_mb"],
            ways[way]["peak_rss_mb"] - ways[way]["baseline_rss_mb"],
            ways[way]["files"],
            ways[way]["bytes"] / 2**20,
        ]
        for way, label in (
            ("naive", "naive (one table, one file)"),
            ("ours", f"ours (shards of <= {args.shard_mb:g} MB, one at a time)"),
        )
    ]
    text, markdown = common.table(["way", "seconds", "peak RSS MB", "RSS rise MB", "files", "MB written"], rows)
    summary = (
        f"{count} images ({image_mb:.0f} MB of PNG). Peak memory naive / ours: "
        f"{data['peak_rss_ratio']:.1f}x; time naive / ours: {data['time_ratio']:.2f}x; same rows in the "
        f"same order with the same image bytes: {same}."
    )
    print(text)
    print(summary)
    common.publish(
        "release_shards",
        data,
        f"# Writing a release: shards vs one table\n\n"
        f"{common.machine_line(data['machine'])}\n\n{markdown}\n\n{summary}\n",
        args.quick,
    )


if __name__ == "__main__":
    main()
