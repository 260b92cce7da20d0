"""Hash files and find duplicate groups outside a pipeline run: the `curate images hash` and `dups` commands.

A hashes file is JSONL, one row per file: `{"path", "sha256", "phash", "width", "height", "bytes", "error",
"algorithm"}` (`phash` is 16 hex digits, or null with `error` set). A groups file is JSONL, one row per group of
two or more: `{"kept": path, "dropped": [{"path", "distance"}, ...]}`; a file matching the reference set gets
`{"reference": reference path, "dropped": [...]}` and takes no part in the groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from benchcurate.curation.errors import UserError
from benchcurate.curation.fingerprint import sha256_bytes
from benchcurate.curation.grouping import groups_from_pairs
from benchcurate.curation.images.decode import IMAGE_EXTENSIONS
from benchcurate.curation.images.hamming import cross_pairs_within, pairs_within
from benchcurate.curation.images.phash import PhashConfig, algorithm, fingerprint
from benchcurate.curation.jsonl import numbered_rows
from benchcurate.curation.parallel import ordered_map

CHUNK_FILES = 32


def expand_paths(paths: Iterable[str]) -> list[Path]:
    """Files as given, and every non-hidden file under folders, sorted; a missing path is a UserError."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file()
                            and not any(part.startswith(".") for part in p.relative_to(path).parts))
        elif path.is_file():
            found.append(path)
        else:
            raise UserError(f"{given} does not exist; pass image files or folders")
    return found


def hash_chunk(paths: list[str], cfg: PhashConfig) -> list[dict]:
    """Rows for a chunk of files (runs in a worker process)."""
    rows = []
    for name in paths:
        path = Path(name)
        if path.suffix.lower() not in IMAGE_EXTENSIONS:  # as the pipeline's ingest refuses it
            rows.append({"path": name, "sha256": None, "phash": None, "width": None, "height": None, "bytes": None,
                         "error": f"unsupported_extension: {path.suffix or 'no suffix'} is not an image suffix "
                                  f"({' '.join(IMAGE_EXTENSIONS)})", "algorithm": algorithm(cfg)})
            continue
        try:
            data = path.read_bytes()
        except OSError as error:
            rows.append({"path": name, "sha256": None, "phash": None, "width": None, "height": None, "bytes": None,
                         "error": f"file_unreadable: {error}", "algorithm": algorithm(cfg)})
            continue
        found = fingerprint(path, cfg, data)
        error = f"{found['error_reason']}: {found['error']}" if "error_reason" in found else None
        rows.append({"path": name, "sha256": sha256_bytes(data), "phash": found.get("phash"),
                     "width": found.get("width"), "height": found.get("height"), "bytes": len(data), "error": error,
                     "algorithm": algorithm(cfg)})
    return rows


def hash_files(paths: list[Path], cfg: PhashConfig, jobs: int) -> Iterator[dict]:
    """One row per file, in the order given, decoded in `jobs` worker processes."""
    chunks = [[str(path) for path in paths[start:start + CHUNK_FILES]] for start in range(0, len(paths), CHUNK_FILES)]
    mode = "processes" if jobs > 1 else "serial"
    for rows in ordered_map(partial(hash_chunk, cfg=cfg), chunks, mode, jobs):
        yield from rows


@dataclass(frozen=True)
class HashTable:
    paths: list[str]
    hashes: np.ndarray          # uint64
    pixels: np.ndarray          # width * height, for the keep rule
    sizes: np.ndarray           # file bytes


def read_hashes(path: Path) -> HashTable:
    """The rows of a hashes file that have a pHash (rows with an error are skipped)."""
    if not path.exists():
        raise UserError(f"{path} does not exist; make it with `curate images hash PATH... --out {path}`")
    paths, hashes, pixels, sizes = [], [], [], []
    for number, row in numbered_rows(path):
        try:
            if row.get("phash"):
                hashes.append(int(row["phash"], 16))
                paths.append(str(row["path"]))
                pixels.append((row.get("width") or 0) * (row.get("height") or 0))
                sizes.append(row.get("bytes") or 0)
        except (KeyError, TypeError, ValueError) as error:
            raise UserError(f"{path} line {number} is not a hashes row ({error})") from error
    return HashTable(paths, np.array(hashes, dtype=np.uint64), np.array(pixels, dtype=np.int64),
                     np.array(sizes, dtype=np.int64))


def _distance(first: int, second: int) -> int:
    return (int(first) ^ int(second)).bit_count()


def duplicate_groups(table: HashTable, threshold: int, reference: HashTable | None = None,
                     workers: int = 1) -> Iterator[dict]:
    """Reference matches first, then groups among the rest; kept: most pixels, then most bytes, then path."""
    matched: dict[int, list[tuple[int, int]]] = {}
    if reference is not None and len(reference.hashes):
        for query, ref, dist in cross_pairs_within(table.hashes, reference.hashes, threshold, workers=workers):
            matched.setdefault(int(query), []).append((int(dist), int(ref)))
    by_reference: dict[int, list[dict]] = {}
    for query, hits in matched.items():
        dist, ref = min(hits)
        by_reference.setdefault(ref, []).append({"path": table.paths[query], "distance": dist})
    for ref in sorted(by_reference):
        yield {"reference": reference.paths[ref], "dropped": sorted(by_reference[ref], key=lambda d: d["path"])}
    pairs = pairs_within(table.hashes, threshold, workers=workers)
    remaining = [(int(i), int(j)) for i, j, _ in pairs if int(i) not in matched and int(j) not in matched]
    for group in groups_from_pairs(len(table.paths), remaining):
        kept = min(group, key=lambda index: (-table.pixels[index], -table.sizes[index], table.paths[index]))
        dropped = [{"path": table.paths[index], "distance": _distance(table.hashes[index], table.hashes[kept])}
                   for index in group if index != kept]
        yield {"kept": table.paths[kept], "dropped": dropped}
