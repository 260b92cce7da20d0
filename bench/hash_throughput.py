"""Hashing throughput: naive `imagehash.phash(Image.open(p))` in one process vs `hash_files` (ours).

The set (~600 files, generated once under /tmp and reused): 300 JPEG photos upscaled from the demo photos to a
1600-3000 px longest side (random crop, mild sensor-like noise so the files are photo-sized, quality 80-95, one
in five with an EXIF rotation), and 300 PNG charts, diagrams and screenshots from the shipped demo renders at a
1000-2000 px longest side (one in ten RGBA with a transparent border).

Variants, timed in the same run, interleaved, 3 repeats each (median):
  naive             one process, `imagehash.phash(Image.open(p))` in a loop
  ours_j2           `hash_files(paths, PhashConfig(), jobs=2)`: sha256, EXIF transpose, alpha flattening, draft
  ours_j1           the same with jobs=1 (in-process, no pool)
  ours_j2_nodraft   jobs=2 with draft_side_px=None (full JPEG decode)
Worker-pool start-up is timed apart (a run over 64 copies of a tiny PNG path: two chunks, so both workers start);
files/second exclude it, total wall time includes it.

    cd /work/main && .venv/bin/python bench/hash_throughput.py [--quick]
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
import imagehash
import numpy as np
from PIL import Image

from benchcurate.curation.core.decode import decode_image
from benchcurate.curation.core.files import replacing
from benchcurate.curation.images.hashfile import CHUNK_FILES, hash_files
from benchcurate.curation.images.phash import PhashConfig

SET_DIR = Path("/tmp/bench-hash-throughput-set-v1")
N_JPEG, N_PNG = 300, 300
QUICK_N = 16
PNG_KINDS = (
    "bar_chart",
    "line_chart",
    "pie_chart",
    "scatter_plot",
    "table",
    "flowchart",
    "tree_diagram",
    "network_diagram",
    "ui_screenshot",
)
TARGET_RATIO = 2.5


# ------------------------------------------------------------------------------------------------ the set


def _sources() -> tuple[list[Path], list[Path]]:
    originals = common.demo_originals()
    return (
        [path for path, kind in originals if kind == "photo"],
        [path for path, kind in originals if kind in PNG_KINDS],
    )


def _random_crop(image: Image.Image, rng: random.Random, keep: float) -> Image.Image:
    w, h = image.size
    cw, ch = round(w * rng.uniform(keep, 1.0)), round(h * rng.uniform(keep, 1.0))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    return image.crop((x, y, x + cw, y + ch))


def _scaled(image: Image.Image, longest: int, resample) -> Image.Image:
    factor = longest / max(image.size)
    return image.resize((round(image.width * factor), round(image.height * factor)), resample)


def make_jpeg(task: tuple[int, str]) -> str:
    index, source = task
    out = SET_DIR / "jpeg" / f"photo-{index:04d}.jpg"
    if out.exists():
        return str(out)
    rng = random.Random(f"jpeg:{index}")
    image = _random_crop(decode_image(Path(source)).image, rng, 0.8)
    image = _scaled(image, rng.randint(1600, 3000), Image.Resampling.BICUBIC)
    pixels = np.asarray(image, dtype=np.int16)
    noise = np.random.default_rng(index).normal(0, 4.0, pixels.shape).astype(np.int16)
    image = Image.fromarray(np.clip(pixels + noise, 0, 255).astype(np.uint8), "RGB")
    exif = Image.Exif()
    if index % 5 == 0:
        exif[0x0112] = 6  # Orientation: rotate 90 CW to display
    with replacing(out) as partial:
        image.save(partial, "JPEG", quality=rng.randint(80, 95), exif=exif.tobytes())
    return str(out)


def make_png(task: tuple[int, str]) -> str:
    index, source = task
    out = SET_DIR / "png" / f"render-{index:04d}.png"
    if out.exists():
        return str(out)
    rng = random.Random(f"png:{index}")
    image = _random_crop(Image.open(source).convert("RGB"), rng, 0.85)
    image = _scaled(image, rng.randint(1000, 2000), Image.Resampling.BICUBIC)
    if index % 10 == 0:
        border = max(4, image.width // 40)
        rgba = Image.new("RGBA", (image.width + 2 * border, image.height + 2 * border), (0, 0, 0, 0))
        rgba.paste(image, (border, border))
        image = rgba
    with replacing(out) as partial:
        image.save(partial, "PNG")
    return str(out)


def build_set(n_jpeg: int, n_png: int) -> tuple[list[Path], list[Path]]:
    (SET_DIR / "jpeg").mkdir(parents=True, exist_ok=True)
    (SET_DIR / "png").mkdir(parents=True, exist_ok=True)
    photos, renders = _sources()
    jpeg_tasks = [(i, str(photos[i % len(photos)])) for i in range(n_jpeg)]
    png_tasks = [(i, str(renders[i % len(renders)])) for i in range(n_png)]
    with multiprocessing.get_context("spawn").Pool(max(1, len(os.sched_getaffinity(0)))) as pool:
        jpegs = pool.map(make_jpeg, jpeg_tasks, chunksize=4)
        pngs = pool.map(make_png, png_tasks, chunksize=4)
    return [Path(p) for p in jpegs], [Path(p) for p in pngs]


def interleave(jpegs: list[Path], pngs: list[Path]) -> list[Path]:
    mixed = [p for pair in zip(jpegs, pngs) for p in pair]
    return mixed + jpegs[len(pngs) :] + pngs[len(jpegs) :]


def describe(paths: list[Path]) -> dict:
    sizes, pixels, modes = [], [], {}
    for path in paths:
        with Image.open(path) as image:
            pixels.append(image.width * image.height)
            modes[f"{image.format} {image.mode}"] = modes.get(f"{image.format} {image.mode}", 0) + 1
        sizes.append(path.stat().st_size)
    return {
        "files": len(paths),
        "total_mb": sum(sizes) / 2**20,
        "median_file_kb": float(np.median(sizes)) / 1024,
        "median_megapixels": float(np.median(pixels)) / 1e6,
        "max_megapixels": max(pixels) / 1e6,
        "formats_modes": modes,
    }


# ---------------------------------------------------------------------------------------------- variants


def naive(paths: list[Path]) -> list[str]:
    return [str(imagehash.phash(Image.open(path))) for path in paths]


def ours(jobs: int, draft: bool):
    cfg = PhashConfig(draft_side_px=256 if draft else None)

    def run(paths: list[Path]) -> list[str]:
        rows = list(hash_files(paths, cfg, jobs=jobs))
        bad = [row for row in rows if row["error"]]
        if bad:
            raise RuntimeError(f"{len(bad)} files failed, e.g. {bad[0]}")
        return [row["phash"] for row in rows]

    return run


VARIANTS = {"naive": naive, "ours_j2": ours(2, True), "ours_j1": ours(1, True), "ours_j2_nodraft": ours(2, False)}
STARTUP_JOBS = {"naive": 1, "ours_j2": 2, "ours_j1": 1, "ours_j2_nodraft": 2}


def tiny_png() -> Path:
    path = SET_DIR / "tiny.png"
    if not path.exists():
        Image.new("RGB", (8, 8), (200, 100, 50)).save(path)
    return path


def warm_up() -> None:
    """Pay this process's lazy imports (imagehash imports scipy.fftpack on first use) before any timing."""
    naive([tiny_png()])
    VARIANTS["ours_j1"]([tiny_png()])


def measure_startup(repeats: int) -> dict:
    """Wall time of hash_files over 2 * CHUNK_FILES copies of a tiny PNG: pool start-up plus ~nothing."""
    paths = [tiny_png()] * (2 * CHUNK_FILES)
    out = {}
    for jobs in (1, 2):
        seconds, _ = common.repeat(lambda: list(hash_files(paths, PhashConfig(), jobs=jobs)), repeats)
        out[f"jobs{jobs}"] = {"seconds": seconds, "median": common.median(seconds)}
    # jobs=1 runs in this process: its tiny run is the per-file work only; the pool's start-up is the rest.
    out["pool_startup_seconds"] = max(0.0, out["jobs2"]["median"] - out["jobs1"]["median"] / 2)
    return out


def time_subset(paths: list[Path], repeats: int) -> dict:
    for path in paths:  # page cache warm for every variant alike
        path.read_bytes()
    seconds = {name: [] for name in VARIANTS}
    hashes = {}
    for _ in range(repeats):
        for name, run in VARIANTS.items():
            elapsed, hashes[name] = common.timed(lambda: run(paths))
            seconds[name].append(elapsed)
    return {"seconds": seconds, "median": {name: common.median(v) for name, v in seconds.items()}, "hashes": hashes}


def quality_check() -> dict | None:
    """Per kind of edit, the share of copies the default groups with their original against plain pHash's at the
    same threshold, on the labelled set, from bench/results/near_dup_quality.json (run bench/near_dup_quality.py
    first)."""
    path = common.RESULTS / "near_dup_quality.json"
    if not path.exists():
        return None
    found = json.loads(path.read_text())
    lower = sorted(kind for kind, share in found["recall"].items() if share < found["phash_recall"][kind])
    return {
        "source": str(path.relative_to(common.ROOT)),
        "kinds": len(found["recall"]),
        "kinds_lower": lower,
        "default_recall_not_lower": not lower,
    }


def main() -> None:
    args = common.arguments(__doc__, f"{QUICK_N} JPEG + {QUICK_N} PNG files, 1 repeat").parse_args()
    repeats = 1 if args.quick else 3
    n_jpeg, n_png = (QUICK_N, QUICK_N) if args.quick else (N_JPEG, N_PNG)
    elapsed, (jpegs, pngs) = common.timed(lambda: build_set(n_jpeg, n_png))
    print(f"set ready in {elapsed:.1f} s under {SET_DIR}")
    subsets = {"mixed": interleave(jpegs, pngs), "jpeg_only": jpegs, "png_only": pngs}
    warm_up()
    startup = measure_startup(repeats)
    pool_startup = startup["pool_startup_seconds"]
    results = {}
    for name, paths in subsets.items():
        timing = time_subset(paths, repeats)
        n = len(paths)
        rows = {}
        for variant, wall in timing["median"].items():
            overhead = pool_startup if STARTUP_JOBS[variant] > 1 else 0.0
            # Start-up above 80% of the wall time: the difference is noise, not a rate (small --quick sets).
            excl = n / (wall - overhead) if wall - overhead > 0.2 * wall else float("nan")
            rows[variant] = {
                "wall_seconds_median": wall,
                "wall_seconds_all": timing["seconds"][variant],
                "files_per_second_incl_startup": n / wall,
                "files_per_second_excl_startup": excl,
            }
        base = rows["naive"]
        for row in rows.values():
            row["ratio_vs_naive_excl_startup"] = (
                row["files_per_second_excl_startup"] / base["files_per_second_excl_startup"]
            )
            row["ratio_vs_naive_incl_startup"] = base["wall_seconds_median"] / row["wall_seconds_median"]
        h = timing["hashes"]
        agree = {
            "ours_j2_vs_ours_j1_identical": h["ours_j2"] == h["ours_j1"],
            "ours_nodraft_vs_naive_identical_share": float(
                np.mean([a == b for a, b in zip(h["ours_j2_nodraft"], h["naive"])])
            ),
            "ours_draft_vs_nodraft_identical_share": float(
                np.mean([a == b for a, b in zip(h["ours_j2"], h["ours_j2_nodraft"])])
            ),
        }
        results[name] = {"set": describe(paths), "variants": rows, "hash_agreement": agree}
        print(f"{name}: " + ", ".join(f"{v} {r['wall_seconds_median']:.2f}s" for v, r in rows.items()))

    quality = quality_check()
    mixed_ratio = results["mixed"]["variants"]["ours_j2"]["ratio_vs_naive_excl_startup"]
    data = {
        "benchmark": "hash_throughput",
        "quick": args.quick,
        "machine": common.machine(),
        "repeats": repeats,
        "set_dir": str(SET_DIR),
        "startup": startup,
        "subsets": results,
        "quality": quality,
        "target": {
            "ratio_required": TARGET_RATIO,
            "mixed_ratio_ours_j2_excl_startup": mixed_ratio,
            "mixed_ratio_ours_j2_incl_startup": results["mixed"]["variants"]["ours_j2"]["ratio_vs_naive_incl_startup"],
            "throughput_met": mixed_ratio >= TARGET_RATIO,
            "recall_not_lower_met": quality["default_recall_not_lower"] if quality else None,
        },
    }

    head = [
        "subset",
        "variant",
        "files",
        "wall s (median)",
        "files/s excl start-up",
        "files/s incl",
        "x naive (excl)",
        "x naive (incl)",
    ]
    body = [
        [
            s,
            v,
            results[s]["set"]["files"],
            r["wall_seconds_median"],
            r["files_per_second_excl_startup"],
            r["files_per_second_incl_startup"],
            r["ratio_vs_naive_excl_startup"],
            r["ratio_vs_naive_incl_startup"],
        ]
        for s in results
        for v, r in results[s]["variants"].items()
    ]
    text, md = common.table(head, body)
    set_head = ["subset", "files", "MB", "median KB", "median MP", "max MP", "formats/modes"]
    set_rows = [
        [
            s,
            r["set"]["files"],
            r["set"]["total_mb"],
            r["set"]["median_file_kb"],
            r["set"]["median_megapixels"],
            r["set"]["max_megapixels"],
            ", ".join(f"{k}: {v}" for k, v in r["set"]["formats_modes"].items()),
        ]
        for s, r in results.items()
    ]
    set_text, set_md = common.table(set_head, set_rows)
    startup_line = (
        f"Start-up: tiny run (64 x 8x8 PNG) jobs=2 {startup['jobs2']['median']:.3f} s, jobs=1 "
        f"{startup['jobs1']['median']:.3f} s; pool start-up taken as {pool_startup:.3f} s "
        f"(subtracted for the jobs=2 variants in 'excl')."
    )
    target_line = (
        f"Target >= {TARGET_RATIO}x on the mixed set (ours jobs=2 vs naive, excl. start-up): "
        f"{mixed_ratio:.2f}x -> {'met' if mixed_ratio >= TARGET_RATIO else 'NOT met'}; incl. start-up "
        f"{data['target']['mixed_ratio_ours_j2_incl_startup']:.2f}x."
    )
    if quality:
        quality_line = (
            f"Quality (from {quality['source']}, the labelled set): copies grouped with their original "
            f"at least as often as plain pHash finds them, per kind of edit: "
            f"{'met' if quality['default_recall_not_lower'] else 'NOT met'} "
            f"({quality['kinds'] - len(quality['kinds_lower'])} of {quality['kinds']} kinds)."
        )
    else:
        quality_line = "Quality: bench/results/near_dup_quality.json not found; run bench/near_dup_quality.py first."
    machine_line = f"Machine: {common.machine_line(data['machine'])}"
    print(
        "\n"
        + machine_line
        + "\n\n"
        + set_text
        + "\n\n"
        + text
        + "\n\n"
        + startup_line
        + "\n"
        + target_line
        + "\n"
        + quality_line
    )
    markdown = "\n\n".join(
        [
            "# Hash throughput",
            machine_line,
            f"Median of {repeats} runs per variant, interleaved, page cache warm.",
            set_md,
            md,
            startup_line,
            target_line,
            quality_line,
        ]
    )
    common.publish("hash_throughput", data, markdown, args.quick)


if __name__ == "__main__":
    main()
