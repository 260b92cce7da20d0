"""Deduplication as a user runs it: whole commands against the naive loops, in one run, on mixed real formats.

- images: `curate images hash FOLDER --jobs 2` against a naive loop (`imagehash.phash(Image.open(path))` for each
  file, one process) on a folder of real JPEG, PNG and WebP files (--images; `bench/real_images.sh` rebuilds the
  1,410 files of the README's figure from Debian packages, with their licences; quick: the demo's pictures);
- texts: `curate text dups` against a naive loop (per text, one datasketch MinHash updated word by word, then one
  MinHashLSH query and one insert, threshold 0.8, 128 permutations) on 50,000 questions of 20-25 English words
  (the words of Python's standard-library documentation) of which 1 in 25 is a near copy of an earlier one with
  one word changed and 1 in 50 a verbatim copy, some in other case or spacing (quick: 2,000);
- dups: the CPU of `curate images dups` (verification and keep rule on) against that of the `curate images hash
  --jobs 2` command that wrote its hashes file (plain, and --likeness), medians of --repeats runs of the two
  interleaved, on the real images and on the labelled set of tests/dedup_set.py (quick: the demo's pictures and two
  of the set's photos with their copies, one run). The load average at the start and the end is recorded: the
  machine may be shared, which raises CPU seconds too.

Each command runs N times, interleaved with the others; each one's start-up is measured as the same command on one
small file (one 32x32 PNG; one text), which imports everything the full run does. Ratios are given whole and net of
start-up (naive - its start-up) / (ours - its start-up). Also: the share of planted copies each text loop finds,
that `--jobs 1` and `--jobs 2` write the same file, and (full mode) how far the default reduced decode's pHashes
are from a full decode's (`--draft-side-px 0`).

    cd /work/main && .venv/bin/python bench/dedup_commands.py [--quick] [--images FOLDER] [--repeats N]
"""

from __future__ import annotations

import importlib
import json
import os
import pydoc
import random
import re
import sys
import warnings
from pathlib import Path

import common  # first: it sets HOME etc. to a temp dir before anything else is imported
from PIL import Image

from tests.helpers import CURATE

REAL_IMAGES = Path("/tmp/real-images/files")  # where bench/real_images/fetch.sh puts them
TEXTS, QUICK_TEXTS = 50_000, 2_000
NEAR_EVERY, VERBATIM_EVERY = 25, 50
NAIVE_IMAGES = """import os, sys
import imagehash
from PIL import Image
folder, out = sys.argv[1], sys.argv[2]
files = sorted(os.path.join(root, name) for root, _, names in os.walk(folder) for name in names)
with open(out, "w") as handle:
    for path in files:
        handle.write(f"{path}\\t{imagehash.phash(Image.open(path))}\\n")
"""
NAIVE_TEXTS = """import json, sys
from datasketch import MinHash, MinHashLSH
path, out = sys.argv[1], sys.argv[2]
lsh = MinHashLSH(threshold=0.8, num_perm=128)
with open(path) as rows, open(out, "w") as handle:
    for line in rows:
        row = json.loads(line)
        signature = MinHash(num_perm=128)
        for word in row["question"].lower().split():
            signature.update(word.encode("utf-8"))
        found = lsh.query(signature)
        if found:
            handle.write(json.dumps({"id": row["id"], "matches": sorted(found)}) + "\\n")
        lsh.insert(row["id"], signature)
"""


def vocabulary() -> list[str]:
    """Real English words: those of some standard-library modules' documentation."""
    words: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in (
            "collections",
            "json",
            "os",
            "re",
            "textwrap",
            "argparse",
            "logging",
            "email",
            "unittest",
            "subprocess",
            "threading",
            "decimal",
            "statistics",
            "random",
            "pathlib",
            "shutil",
            "tarfile",
            "zipfile",
            "csv",
            "sqlite3",
            "datetime",
            "calendar",
            "string",
        ):
            text = pydoc.render_doc(importlib.import_module(name), renderer=pydoc.plaintext)
            words.update(word.lower() for word in re.findall(r"\b[a-zA-Z]{3,12}\b", text))
    return sorted(words)


def write_texts(path: Path, n: int) -> dict[str, int]:
    """The questions, with `planted` ("near" or "verbatim") and `of` (the original's id) on planted copies."""
    rng = random.Random(20240501)
    words = vocabulary()
    starts = ["what", "how", "why", "which", "when", "where", "who", "can", "does", "is"]
    rows: list[dict] = []
    for k in range(n):
        draw = rng.random()
        row = {"id": f"q{k:06d}"}
        if k > 100 and draw < 1 / NEAR_EVERY:
            original = rows[rng.randrange(len(rows))]
            changed = original["question"].rstrip("?").split()
            changed[rng.randrange(1, len(changed))] = rng.choice(words)
            row.update(question=" ".join(changed) + "?", planted="near", of=original["id"])
        elif k > 100 and draw < 1 / NEAR_EVERY + 1 / VERBATIM_EVERY:
            original = rows[rng.randrange(len(rows))]
            text = original["question"]
            if rng.random() < 0.5:
                text = text.upper() if rng.random() < 0.5 else "  " + text.replace(" ", "  ")
            row.update(question=text, planted="verbatim", of=original["id"])
        else:
            row["question"] = " ".join([rng.choice(starts)] + rng.choices(words, k=rng.randint(19, 24))) + "?"
        rows.append(row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return {kind: sum(row.get("planted") == kind for row in rows) for kind in ("near", "verbatim")}


def found_copies(texts: Path, ours: Path, naive: Path) -> dict[str, dict[str, float]]:
    """The share of planted copies each loop puts with their original."""
    planted = [json.loads(line) for line in texts.read_text(encoding="utf-8").splitlines()]
    planted = [row for row in planted if row.get("planted")]
    cluster: dict[str, str] = {}
    for line in ours.read_text(encoding="utf-8").splitlines():
        group = json.loads(line)
        for member in group["dropped"]:
            cluster[member["id"]] = group["kept"]
    matches = {row["id"]: set(row["matches"]) for row in map(json.loads, naive.read_text().splitlines())}
    shares = {}
    for kind in ("near", "verbatim"):
        rows = [row for row in planted if row["planted"] == kind]
        ours_found = sum(cluster.get(row["id"], row["id"]) == cluster.get(row["of"], row["of"]) for row in rows)
        naive_found = sum(row["of"] in matches.get(row["id"], ()) for row in rows)
        shares[kind] = {"planted": len(rows), "ours": ours_found / len(rows), "naive": naive_found / len(rows)}
    return shares


def measure(commands: dict[str, list[str]], repeats: int) -> dict[str, dict]:
    """Each command `repeats` times, interleaved: wall seconds, CPU seconds (`cpu_of`) and peak memory."""
    runs: dict[str, list] = {name: [] for name in commands}
    for round_ in range(repeats):
        for name, command in commands.items():
            run, cpu = cpu_of(command, every=0.05)
            runs[name].append({"seconds": run.seconds, "cpu": cpu, "peak_rss_mb": run.tree.peak_rss / 2**20})
            print(f"  round {round_ + 1} {name}: {run.seconds:.2f} s, {cpu:.2f} CPU s", flush=True)
    return {
        name: {
            "median_seconds": common.median([r["seconds"] for r in found]),
            "median_cpu_seconds": round(common.median([r["cpu"] for r in found]), 2),
            "runs_seconds": [round(r["seconds"], 3) for r in found],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in found),
        }
        for name, found in runs.items()
    }


def ratios(timing: dict, naive: str, ours: str) -> dict[str, float]:
    whole = timing[naive]["median_seconds"] / timing[ours]["median_seconds"]
    net = (timing[naive]["median_seconds"] - timing[f"{naive} start-up"]["median_seconds"]) / (
        timing[ours]["median_seconds"] - timing[f"{ours} start-up"]["median_seconds"]
    )
    return {"whole": whole, "net": net}


def cpu_of(command: list[str], **sampling) -> tuple[common.CommandRun, float]:
    """A whole command's run (`common.run_command`) and its CPU seconds, user + system, from the kernel's account
    of waited-for children: what the command and its children used, whatever else ran on the machine."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = common.run_command(command, **sampling)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return run, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def command_cpu(command: list[str]) -> float:
    """CPU seconds (user + system) of a whole command and its children."""
    return cpu_of(command)[1]


def dups_against_hash(folders: dict[str, Path], work: Path, repeats: int) -> dict[str, dict]:
    """Per folder and per kind of hashes file (plain, and --likeness, which `images dups` needs to match turns and
    frames): CPU seconds of `curate images hash --jobs 2` and of `curate images dups` (verification on) on the file
    it wrote (medians of `repeats` runs, the two interleaved), and the groups found."""
    found = {}
    for number, (name, folder) in enumerate(folders.items()):
        for likeness in (False, True):
            hashes = work / f"set{number}{'-likeness' if likeness else ''}.hashes.jsonl"
            groups = work / f"set{number}{'-likeness' if likeness else ''}.groups.jsonl"
            hash_runs, dups_runs = [], []
            for _ in range(repeats):
                hash_runs.append(hash_command_cpu(folder, hashes, likeness))
                dups_runs.append(command_cpu([str(CURATE), "images", "dups", str(hashes), "--out", str(groups)]))
            hash_cpu, dups_cpu = common.median(hash_runs), common.median(dups_runs)
            side = hashes.with_name(hashes.name + ".pictures")  # what --likeness writes for the verification
            found[f"{name}, hash{' --likeness' if likeness else ''}"] = {
                "files": sum(1 for _ in hashes.open()),
                "hash_cpu_seconds": round(hash_cpu, 2),
                "hash_cpu_runs": [round(value, 2) for value in hash_runs],
                "pictures_mb": round(side.stat().st_size / 1e6, 1) if side.exists() else 0.0,
                "dups_cpu_seconds": round(dups_cpu, 2),
                "dups_cpu_runs": [round(value, 2) for value in dups_runs],
                "dups_over_hash": round(dups_cpu / hash_cpu, 2),
                "groups": sum(1 for _ in groups.open()),
            }
    return found


def hash_command_cpu(folder: Path, hashes: Path, likeness: bool) -> float:
    """CPU seconds of `curate images hash FOLDER --jobs 2` (with --likeness when asked) writing `hashes`."""
    command = [str(CURATE), "images", "hash", str(folder), "--out", str(hashes), "--jobs", "2"]
    return command_cpu(command + (["--likeness"] if likeness else []))


def hash_agreement(default: Path, full: Path, folder: Path) -> dict:
    """How many bits each default (reduced-decode) pHash is from the full decode's; the far ones' picture spread."""
    import numpy as np

    first = {row["path"]: row["phash"] for row in map(json.loads, default.read_text().splitlines()) if row["phash"]}
    second = {row["path"]: row["phash"] for row in map(json.loads, full.read_text().splitlines()) if row["phash"]}
    bits = {path: (int(first[path], 16) ^ int(second[path], 16)).bit_count() for path in first if path in second}
    far = [path for path, value in bits.items() if value > 4]
    flat = 0
    for path in far:  # pHash bits of a nearly uniform picture are noise: say how many of the far ones are
        with Image.open(path) as image:
            grey = np.asarray(image.convert("L").resize((32, 32)), dtype=float)
        flat += grey.std() < 10
    return {
        "files": len(bits),
        "identical": sum(v == 0 for v in bits.values()),
        "within_4_bits": sum(v <= 4 for v in bits.values()),
        "more_than_4_bits": len(far),
        "of_those_nearly_uniform": flat,
        "largest": max(bits.values(), default=0),
    }


def _loads(loads: tuple[float, float, float]) -> str:
    return ", ".join(f"{load:.1f}" for load in loads)


def main() -> None:
    parser = common.arguments(__doc__, f"the demo's pictures and {QUICK_TEXTS:,} texts, one round")
    parser.add_argument("--images", type=Path, help=f"folder of real images (default {REAL_IMAGES} when it exists)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load_at_start = os.getloadavg()  # the machine may be shared: how busy it was is measured, not assumed
    work = common.scratch("dedup-commands-")
    folder = args.images or (REAL_IMAGES if REAL_IMAGES.is_dir() and not args.quick else None)
    if folder is None:
        folder = work / "demo"
        folder.mkdir()
        for path, _ in common.demo_originals():
            (folder / path.name).write_bytes(path.read_bytes())
    files = sorted(path for path in folder.rglob("*") if path.is_file())
    kinds = {
        suffix: sum(path.suffix.lower() == suffix for path in files) for suffix in {p.suffix.lower() for p in files}
    }
    one = work / "one"
    one.mkdir()
    Image.new("RGB", (32, 32), (90, 140, 200)).save(one / "one.png")
    texts, one_text = work / "texts.jsonl", work / "one.jsonl"
    planted = write_texts(texts, QUICK_TEXTS if args.quick else TEXTS)
    one_text.write_text(json.dumps({"id": "q0", "question": "what is shown here?"}) + "\n")
    naive_images, naive_texts = work / "naive_images.py", work / "naive_texts.py"
    naive_images.write_text(NAIVE_IMAGES)
    naive_texts.write_text(NAIVE_TEXTS)
    py, curate = sys.executable, str(CURATE)
    out = {
        name: work / name
        for name in ("naive.tsv", "ours.jsonl", "ours-j1.jsonl", "full.jsonl", "tnaive.jsonl", "tours.jsonl", "scratch")
    }
    commands = {
        "naive images": [py, str(naive_images), str(folder), str(out["naive.tsv"])],
        "naive images start-up": [py, str(naive_images), str(one), str(out["scratch"])],
        "curate images hash --jobs 2": [
            curate,
            "images",
            "hash",
            str(folder),
            "--out",
            str(out["ours.jsonl"]),
            "--jobs",
            "2",
        ],
        "curate images hash --jobs 2 start-up": [
            curate,
            "images",
            "hash",
            str(one),
            "--out",
            str(out["scratch"]),
            "--jobs",
            "2",
        ],
        "naive texts": [py, str(naive_texts), str(texts), str(out["tnaive.jsonl"])],
        "naive texts start-up": [py, str(naive_texts), str(one_text), str(out["scratch"])],
        "curate text dups": [curate, "text", "dups", str(texts), "--out", str(out["tours.jsonl"])],
        "curate text dups start-up": [curate, "text", "dups", str(one_text), "--out", str(out["scratch"])],
    }
    print(f"{len(files):,} image files {kinds}; {QUICK_TEXTS if args.quick else TEXTS:,} texts {planted}")
    timing = measure(commands, 1 if args.quick else args.repeats)
    common.run_command([curate, "images", "hash", str(folder), "--out", str(out["ours-j1.jsonl"]), "--jobs", "1"])
    same_j1_j2 = out["ours.jsonl"].read_bytes() == out["ours-j1.jsonl"].read_bytes()
    agreement = None
    if not args.quick:
        common.run_command(
            [curate, "images", "hash", str(folder), "--out", str(out["full.jsonl"]), "--draft-side-px", "0"]
        )
        agreement = hash_agreement(out["ours.jsonl"], out["full.jsonl"], folder)
    from tests import dedup_set

    labelled = work / "labelled"
    dedup_set.build(labelled, photos=2 if args.quick else None, renders_per_kind=0 if args.quick else 1)
    dups = dups_against_hash(
        {"real images": folder, "labelled set (tests/dedup_set.py)": labelled}, work, 1 if args.quick else args.repeats
    )
    image_ratio = ratios(timing, "naive images", "curate images hash --jobs 2")
    text_ratio = ratios(timing, "naive texts", "curate text dups")
    copies = found_copies(texts, out["tours.jsonl"], out["tnaive.jsonl"])
    rows = [
        [
            name,
            f"{found['median_seconds']:.2f}",
            f"{found['median_cpu_seconds']:.2f}",
            f"{found['peak_rss_mb']:.0f}",
            ", ".join(f"{s:.2f}" for s in found["runs_seconds"]),
        ]
        for name, found in timing.items()
    ]
    table_text, table_md = common.table(["command", "median s", "median CPU s", "peak RSS MB", "runs s"], rows)
    summary = (
        f"images ({len(files):,} files {kinds}): curate images hash --jobs 2 is {image_ratio['whole']:.2f}x "
        f"the naive loop whole and {image_ratio['net']:.2f}x net of start-up, using "
        f"{timing['curate images hash --jobs 2']['median_cpu_seconds']:.1f} CPU s to the naive loop's "
        f"{timing['naive images']['median_cpu_seconds']:.1f}; --jobs 1 and 2 write the same "
        f"file: {same_j1_j2}.\ntexts ({QUICK_TEXTS if args.quick else TEXTS:,}): curate text dups is "
        f"{text_ratio['whole']:.2f}x the naive loop whole and {text_ratio['net']:.2f}x net of start-up; "
        f"one-word near copies found: ours {copies['near']['ours']:.1%}, naive {copies['near']['naive']:.1%}; "
        f"verbatim copies: ours {copies['verbatim']['ours']:.1%}, naive {copies['verbatim']['naive']:.1%}."
    )
    for name, found in dups.items():
        summary += (
            f"\n{name} ({found['files']:,} files): curate images dups (verification on) took "
            f"{found['dups_cpu_seconds']:.2f} CPU s against {found['hash_cpu_seconds']:.2f} for the hash "
            f"command (--jobs 2) that wrote its file ({found['dups_over_hash']:.2f}x; medians of "
            f"{len(found['dups_cpu_runs'])}), {found['groups']} "
            f"groups"
            + (
                f"; its side file of pictures {found['pictures_mb']:.1f} MB, so dups decoded only "
                f"the copies its keep rule had tied."
                if found["pictures_mb"]
                else "; without --likeness dups decodes each file with a candidate."
            )
        )
    if agreement:
        summary += (
            f"\nreduced decode against a full decode: {agreement['identical']} of {agreement['files']} "
            f"pHashes identical, {agreement['within_4_bits']} within 4 bits; of the "
            f"{agreement['more_than_4_bits']} farther, {agreement['of_those_nearly_uniform']} are nearly "
            f"uniform pictures (grey spread under 10 levels), whose pHash bits are noise."
        )
    load_at_end = os.getloadavg()
    print(table_text + "\n" + summary)
    common.publish(
        "dedup_commands",
        {
            "machine": common.machine("imagehash", "datasketch", "pillow", "webp"),
            "timing": timing,
            "image_ratio": image_ratio,
            "text_ratio": text_ratio,
            "copies_found": copies,
            "same_j1_j2": same_j1_j2,
            "files": kinds,
            "hash_agreement": agreement,
            "planted": planted,
            "dups_against_hash": dups,
            "load_average": {"start": load_at_start, "end": load_at_end},
        },
        f"# Deduplication commands, whole\n\n{common.machine_line(common.machine())}; load average (1, 5, 15 "
        f"min) {_loads(load_at_start)} at the start and {_loads(load_at_end)} at the end "
        f"(medians of interleaved runs; CPU seconds for dups against hash)\n\n{table_md}\n\n"
        + summary.replace("\n", "\n\n")
        + "\n",
        args.quick,
    )


if __name__ == "__main__":
    main()
