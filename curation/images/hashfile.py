"""Hash files and find duplicate groups outside a pipeline run: the `curate images hash` and `dups` commands.

A hashes file is JSONL, one row per file: `{"path", "sha256", "phash", "width", "height", "bytes", "error",
"algorithm"}` (`phash` is 16 hex digits, or null with `error` set); with `--likeness`, also the hashes of the
picture's other orientations, without borders and of its centre (`phash_orientations`, `phash_trimmed`,
`phash_centre`), and `picture`: [offset, length] in the side file HASHES.pictures (`pictures_file`) of what the
verification of `images dups` reads of the file (`verify.pack`: a greyscale copy of at most 256 x 256 pixels,
zlib-compressed, its content box and the keep rule's traits), made from the same decode, so that `images dups`
decodes no file again but the copies its keep rule still has tied at the end. A groups file is JSONL, one row per group of two or more: `{"kept": path, "dropped": [{"path",
"distance", "orientation", "matched_on", "verification"}, ...]}`, grouped as `image_near_dedup` groups (candidates
verified against each group's centre, the copy that lost least kept: `near_dedup.near_groups`); a file matching
the reference set gets `{"reference": reference path, "dropped": [...]}` and takes no part in the groups.
"""

from __future__ import annotations

import mmap
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image

from benchcurate.curation.core.decode import IMAGE_EXTENSIONS
from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.fingerprint import sha256_bytes
from benchcurate.curation.core.jsonl import numbered_rows
from benchcurate.curation.core.parallel import keep_image_memory, ordered_map
from benchcurate.curation.images.phash import PhashConfig, algorithm, fingerprint
from benchcurate.curation.images.verify import UnknownPicture, unpack

CHUNK_FILES = 4  # files per task: a slow file (a 15 MP PNG wallpaper) holds back few rows
WINDOW_CHUNKS_PER_JOB = 16  # tasks in flight per thread, ahead of the oldest unfinished one


def expand_paths(paths: Iterable[str]) -> list[Path]:
    """Files as given, and every non-hidden entry under folders but folders, sorted (a broken link, pipe or socket
    among them gets an error row, as the pipeline's ingest records it); a missing path is a UserError."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found += sorted(
                p
                for p in path.rglob("*")
                if not p.is_dir() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        elif path.is_file():
            found.append(path)
        else:
            raise UserError(f"{given} does not exist; pass image files or folders")
    return found


def _failed(name: str, error: str, cfg: PhashConfig) -> dict:
    """The row of a file that was not hashed, and why."""
    return {
        "path": name,
        "sha256": None,
        "phash": None,
        "width": None,
        "height": None,
        "bytes": None,
        "error": error,
        "algorithm": algorithm(cfg),
    }


def hash_chunk(paths: list[str], cfg: PhashConfig, likeness: bool = False) -> list[dict]:
    """Rows for a chunk of files (runs in a worker process)."""
    rows = []
    for name in paths:
        path = Path(name)
        if path.suffix.lower() not in IMAGE_EXTENSIONS:  # as the pipeline's ingest refuses it
            suffixes = " ".join(IMAGE_EXTENSIONS)
            error = f"unsupported_extension: {path.suffix or 'no suffix'} is not an image suffix ({suffixes})"
            rows.append(_failed(name, error, cfg))
            continue
        if not path.is_file():  # reading a pipe would wait for a writer
            rows.append(_failed(name, "not_a_regular_file: broken link, pipe, socket or device", cfg))
            continue
        try:
            data = path.read_bytes()
        except OSError as error:
            rows.append(_failed(name, f"file_unreadable: {error}", cfg))
            continue
        found = fingerprint(path, cfg, data, likeness, picture=likeness)
        error = f"{found['error_reason']}: {found['error']}" if "error_reason" in found else None
        rows.append(
            {
                "path": name,
                "sha256": sha256_bytes(data),
                "phash": found.get("phash"),
                "width": found.get("width"),
                "height": found.get("height"),
                "bytes": len(data),
                "error": error,
                "algorithm": algorithm(cfg),
                **{key: found[key] for key in (*LIKENESS, "picture") if key in found},
            }
        )
    return rows


LIKENESS = ("phash_orientations", "phash_trimmed", "phash_centre")


def hash_files(paths: list[Path], cfg: PhashConfig, jobs: int, likeness: bool = False) -> Iterator[dict]:
    """One row per file, in the order given, decoded in `jobs` threads of this process.

    Threads, not processes: Pillow's decoders, its conversions and resampling and hashlib release the GIL, and
    what holds it (Python between the calls) is a few percent of the time; no worker is started that imports
    everything again, no row is pickled, and nothing outlives a killed command."""
    chunks = [[str(path) for path in paths[start : start + CHUNK_FILES]] for start in range(0, len(paths), CHUNK_FILES)]
    keep_image_memory()
    if jobs > 1:
        # decode_image's catch_warnings is not thread-safe; with the filter in place before the threads start,
        # any interleaving of its saves and restores keeps the warning ignored
        warnings.filterwarnings("ignore", category=Image.DecompressionBombWarning)
    mode = "threads" if jobs > 1 else "serial"
    for rows in ordered_map(
        partial(hash_chunk, cfg=cfg, likeness=likeness), chunks, mode, jobs, WINDOW_CHUNKS_PER_JOB * jobs
    ):
        yield from rows


def pictures_file(hashes: Path) -> Path:
    """The side file of a hashes file that holds its rows' pictures (`set_aside`)."""
    return hashes.with_name(hashes.name + ".pictures")


def set_aside(row: dict, side: BinaryIO) -> dict:
    """The row with its picture's bytes written to the side file and replaced by [offset, length] there."""
    blob = row.pop("picture", None)
    if blob is not None:
        row["picture"] = [side.tell(), len(blob)]
        side.write(blob)
    return row


def stored_pictures(table: HashTable, hashes: Path) -> Callable[[int], bytes | None]:
    """The bytes of each row's picture (by the row's index in the table) from the hashes file's side file, None
    for a row without one; every row has none when the side file is missing or shorter than the rows say (made
    by another run)."""
    side = pictures_file(hashes)
    spans = [row.get("picture") for row in table.rows]
    if not _side_fits(side, spans):
        return lambda index: None
    with open(side, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)

    def read(index: int) -> bytes | None:
        span = spans[index]
        return mapped[span[0] : span[0] + span[1]] if span else None

    return read


def _side_fits(side: Path, spans: list) -> bool:
    """Whether the side file holds every span the rows point to (missing, or shorter: made by another run)."""
    size = side.stat().st_size if side.exists() else 0
    return bool(size) and not any(span and span[0] + span[1] > size for span in spans)


def decoding_note(table: HashTable, hashes: Path) -> str | None:
    """What `images dups` tells a user whose hashes file makes it decode files again (and match less), and how
    to avoid that; None when the file has what dups reads."""
    if not any(row.get("phash_orientations") for row in table.rows):
        return (
            f"note: {hashes} was made without --likeness, so mirror images, quarter turns and borders were not "
            "matched and each file with a candidate was decoded again; `curate images hash ... --likeness` "
            "writes both from its own decode"
        )
    spans = [row.get("picture") for row in table.rows]
    if any(spans) and not _side_fits(pictures_file(hashes), spans):
        return (
            f"note: {pictures_file(hashes)} is missing or was written by another run, so each file with a "
            "candidate was decoded again; hash again with --likeness to write it"
        )
    first = next((index for index, span in enumerate(spans) if span), None)
    if first is not None:
        try:
            unpack(stored_pictures(table, hashes)(first))
        except UnknownPicture as error:
            return (
                f"note: {pictures_file(hashes)} was written by a newer version of curate ({error}), so each "
                "file with a candidate was decoded again; hash again with this version, or upgrade"
            )
    return None


def located(table: HashTable, hashes: Path) -> list[str]:
    """Each row's file as this process can open it: its path as written (relative paths are relative to the folder
    `curate images hash` ran in), or else relative to the hashes file's folder. A file found in neither is a
    UserError: `images dups` reads files again to verify pairs and to weigh the copies its keep rule has tied,
    and without them it would group and keep otherwise than from the folder the hashes were made in."""
    found, missing = [], []
    for written in table.paths:
        path = Path(written)
        places = [path] if path.is_absolute() else [path, hashes.parent / path]
        place = next((place for place in places if place.exists()), None)  # one stat for most files
        found.append(str(place or path))
        if place is None:
            missing.append(written)
    if missing:
        raise UserError(
            f"{len(missing)} of the {len(table.paths)} files {hashes} names are not found from here, nor from its "
            f"folder (the first: {missing[0]}); `images dups` reads them again to verify pairs and choose the copy "
            "kept. Run it from the folder `curate images hash` ran in (relative paths are relative to it), hash "
            "the files again where they are now, or pass --no-verify"
        )
    return found


@dataclass(frozen=True)
class HashTable:
    paths: list[str]
    hashes: np.ndarray  # uint64
    rows: list[dict]  # the rows read, for the near-duplicate search's keys


def read_hashes(path: Path) -> HashTable:
    """The rows of a hashes file that have a pHash (rows with an error are skipped)."""
    if not path.exists():
        raise UserError(f"{path} does not exist; make it with `curate images hash PATH... --out {path}`")
    paths, hashes, rows = [], [], []
    for number, row in numbered_rows(path):
        try:
            if row.get("phash"):
                hashes.append(int(row["phash"], 16))
                paths.append(str(row["path"]))
                rows.append(row)
        except (KeyError, TypeError, ValueError) as error:
            raise UserError(f"{path} line {number} is not a hashes row ({error})") from error
    return HashTable(paths, np.array(hashes, dtype=np.uint64), rows)
