"""Where images come from: a folder tree, a manifest file (CSV or JSONL), or a local Hugging Face dataset.

Each lister yields `Entry` objects in a stable order: what to read, how a user finds it again, its provenance
fields, or the problem that makes it unusable. `image_ingest` turns entries into samples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.jsonl import jsonl_lines, numbered_rows, read_jsonl, text

InputKind = Literal["folder", "manifest", "hf_dataset", "samples"]
MANIFEST_SUFFIXES = (".csv", ".jsonl")
HF_DATA_SUFFIXES = (".parquet", ".arrow")
# manifest column names people use, mapped to ours
COLUMN_ALIASES = {
    "path": "path",
    "file": "path",
    "local_path": "path",
    "image_path": "path",
    "source": "source_dataset",
    "source_dataset": "source_dataset",
    "source_id": "source_id",
    "id": "source_id",
    "license": "license",
    "image_license": "license",
    "text_license": "text_license",
    "attribution": "attribution",
    "derived_from": "derived_from",
}


NAME_MAX_BYTES = 255  # a path component longer than this cannot exist on the usual file systems


PRINTED_PATH_CHARS = 1_024


def printable(path: Path | str) -> str:
    """The path as text that can always be written out: bytes a file name holds that are not UTF-8 appear as
    \\xNN escapes, and a path longer than any file system takes (a manifest can hold anything) is cut."""
    text = str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text if len(text) <= PRINTED_PATH_CHARS else f"{text[:PRINTED_PATH_CHARS]}... [{len(text):,} characters]"


def name_problem(path: Path) -> tuple[str, str] | None:
    """(reason, detail) when a path cannot be used as a file name here, else None."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "unreadable_name", f"{printable(path)}: the name is not valid UTF-8; rename the file"
    if "\0" in text:
        return "path_invalid", f"{printable(path)!r} holds a NUL character"
    long = next((part for part in path.parts if len(part.encode()) > NAME_MAX_BYTES), None)
    if long is not None:
        return "path_invalid", f"a path component of {len(long.encode())} bytes (the limit is {NAME_MAX_BYTES})"
    return None


@dataclass
class Entry:
    source_path: str  # how a user finds it: relative path, manifest row or dataset row
    provenance: dict = field(default_factory=dict)
    path: Path | None = None  # a local file to read
    data: bytes | None = None  # or the bytes themselves (embedded in a dataset)
    suffix: str | None = None  # the file suffix to check, when there is one
    problem: tuple[str, str] | None = None  # (reason, detail) when the entry cannot be used


def is_samples_file(path: Path) -> bool:
    """A JSONL of canonical samples (from `curate import` or a stage's kept.jsonl): its first line says so."""
    if path.suffix.lower() != ".jsonl":
        return False
    try:
        _, row = next(numbered_rows(path), (0, {}))
    except UserError:  # not JSON lines at all: a manifest, whose reading says what is wrong with it
        return False
    return {"schema_version", "id", "provenance"} <= set(row)


def input_kind(path: Path) -> InputKind:
    """A JSONL of canonical samples is samples; another .csv/.jsonl file is a manifest; a folder holding
    .parquet/.arrow files and no images is a dataset."""
    if path.is_file():
        if path.suffix.lower() not in MANIFEST_SUFFIXES:
            raise UserError(
                f"--input {path} is a file but not a .csv or .jsonl manifest; pass a folder of images, "
                f"a manifest, a samples JSONL (curate import) or a Hugging Face dataset folder"
            )
        return "samples" if is_samples_file(path) else "manifest"
    if not path.is_dir():
        raise UserError(
            f"input {path} does not exist; pass --input with a folder of images, a manifest, or a "
            f"Hugging Face dataset folder, or leave --input out to run the bundled demo corpus"
        )
    data_files = any(child.suffix in HF_DATA_SUFFIXES for child in path.rglob("*") if child.is_file())
    return "hf_dataset" if data_files and not any(path.glob("*.png")) and not any(path.glob("*.jpg")) else "folder"


# --- folder ----------------------------------------------------------------------------------------------


def _first_line_not_utf8(path: Path) -> UserError:
    """The error naming the first line of `path` that is not UTF-8."""
    for number, line in jsonl_lines(path):
        try:
            text(path, number, line)
        except UserError as error:
            return error
    return UserError(f"{path} is not valid UTF-8; save the manifest as UTF-8")


def _read_manifest_rows(path: Path) -> list[dict]:
    """Rows of a CSV or JSONL manifest with our column names; a line that is not UTF-8 or not a JSON object is a
    UserError naming it. Values are kept as given (a row with a bad value is dropped by ingest, with the reason)."""
    if path.suffix.lower() == ".csv":
        import pandas as pd

        try:  # every value as written: no number, date or "NA" read into something else
            raw = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8").to_dict("records")
        except UnicodeDecodeError:  # its offset counts from the decoder's last chunk: find the line instead
            raise _first_line_not_utf8(path) from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
            raise UserError(f"{path} is not a readable CSV ({str(error).strip()}); fix the manifest") from None
    else:
        raw = list(read_jsonl(path))
    rows = [
        {
            COLUMN_ALIASES[key.strip().lower()]: value
            for key, value in row.items()
            if isinstance(key, str) and key.strip().lower() in COLUMN_ALIASES and value not in (None, "")
        }
        for row in raw
    ]
    missing = [number for number, row in enumerate(rows, start=1) if "path" not in row]
    if missing:
        raise UserError(f"{path}: rows {missing[:5]} have no path column (path, file, local_path or image_path)")
    return rows


def folder_entries(root: Path, manifest_name: str, exclude: tuple[str, ...]) -> Iterator[Entry]:
    """Every non-folder entry under `root`, except hidden folders and `exclude`; provenance from the manifest."""
    manifest_path = root / manifest_name
    listed = {str(row["path"]): row for row in _read_manifest_rows(manifest_path)} if manifest_path.exists() else {}
    excluded = [root / relative for relative in exclude]
    for path in sorted(root.rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_dir() or any(part.startswith(".") for part in parts[:-1]) or path == manifest_path:
            continue
        if any(path.is_relative_to(folder) for folder in excluded):
            continue
        relative = path.relative_to(root).as_posix()
        problem = name_problem(path)
        if problem is not None:  # the file exists; its name cannot be written out: drop it, keep the others
            yield Entry(source_path=printable(relative), suffix=path.suffix, problem=problem)
            continue
        entry = Entry(source_path=relative, provenance=listed.get(relative, {}), path=path, suffix=path.suffix)
        if path.name.startswith("."):
            entry.problem = ("hidden_file", "hidden files are not ingested")
        elif not path.is_file():
            entry.problem = ("not_a_regular_file", "broken link, pipe, socket or device")
        yield entry


def require_images(root: Path, extensions: tuple[str, ...], exclude: Path | None = None) -> None:
    """A UserError unless the folder holds at least one file with an image suffix: an empty folder, or one of
    only other files, is a wrong --input, not a run that ends with nothing."""
    suffixes: Counter[str] = Counter()
    for path in root.rglob("*"):
        if (exclude not in (None, root) and path.is_relative_to(exclude)) or not path.is_file():
            continue
        if path.suffix.lower() in extensions:
            return
        suffixes[path.suffix.lower() or "(no suffix)"] += 1
    found = ", ".join(f"{count} {suffix}" for suffix, count in suffixes.most_common())
    holds = f"it holds {found}" if found else "it is empty"
    raise UserError(
        f"no images found in {printable(root)}: {holds}; images are {' '.join(extensions)} files (or "
        f"pass a manifest, a samples JSONL or a dataset folder)"
    )


# --- manifest file ---------------------------------------------------------------------------------------


def manifest_entries(manifest: Path) -> Iterator[Entry]:
    """One entry per manifest row; relative paths are relative to the manifest's folder."""
    for number, row in enumerate(_read_manifest_rows(manifest), start=1):
        where = f"{manifest.name}:{number}"
        if not isinstance(row["path"], str):
            yield Entry(
                source_path=where,
                problem=(
                    "path_invalid",
                    f"path is of type {type(row['path']).__name__}, not text (manifest row {number})",
                ),
            )
            continue
        path = Path(row["path"]).expanduser()
        path = path if path.is_absolute() else manifest.parent / path
        entry = Entry(source_path=where, provenance={"source_id": row["path"], **row}, path=path, suffix=path.suffix)
        problem = name_problem(path)
        try:
            if problem is None and not path.is_file():
                problem = (
                    "image_missing" if not path.exists() else "not_a_regular_file",
                    f"{printable(path)} (manifest row {number})",
                )
        except OSError as error:  # e.g. a name the file system refuses
            problem = ("path_invalid", f"{printable(path)}: {error.strerror} (manifest row {number})")
        if problem is not None:
            entry.problem, entry.path = problem, None
            entry.provenance = {key: value for key, value in entry.provenance.items() if key != "source_id"}
        yield entry


# --- Hugging Face dataset folder -------------------------------------------------------------------------


def dataset_tables(root: Path) -> Iterator[tuple[str, object]]:
    """(file name, pyarrow table) for each data file of a parquet folder or a `save_to_disk` folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in sorted(p for p in root.rglob("*") if p.suffix in HF_DATA_SUFFIXES):
        relative = path.relative_to(root).as_posix()
        if path.suffix == ".parquet":
            yield relative, pq.read_table(path)
        else:
            with pa.memory_map(str(path)) as source:
                try:
                    yield relative, pa.ipc.open_stream(source).read_all()
                except pa.ArrowInvalid:
                    yield relative, pa.ipc.open_file(source).read_all()


def _image_column(table, wanted: str | None) -> str:
    if wanted:
        if wanted not in table.column_names:
            raise UserError(f"no column '{wanted}' in the dataset (columns: {', '.join(table.column_names)})")
        return wanted
    for name in table.column_names:
        kind = table.schema.field(name).type
        if str(kind) == "struct<bytes: binary, path: string>":
            return name
    raise UserError(
        f"no Image column found (a struct of bytes and path); columns: {', '.join(table.column_names)};"
        f" name one with --set image_ingest.image_column=NAME"
    )


def dataset_entries(root: Path, image_column: str | None, id_column: str | None) -> Iterator[Entry]:
    """One entry per dataset row; images are the embedded bytes, or the file the row's path points to."""
    for file_name, table in dataset_tables(root):
        column = _image_column(table, image_column)
        ids = table.column(id_column).to_pylist() if id_column and id_column in table.column_names else None
        licenses = table.column("license").to_pylist() if "license" in table.column_names else None
        for row, image in enumerate(table.column(column).to_pylist()):
            source_id = str(ids[row]) if ids else f"{file_name}#{row}"
            provenance = {"source_id": source_id, **({"license": licenses[row]} if licenses and licenses[row] else {})}
            entry = Entry(source_path=f"{file_name}#{row}", provenance=provenance)
            if image and image.get("bytes"):
                entry.data = image["bytes"]
            elif image and image.get("path"):
                entry.path = root / image["path"]
            else:
                entry.problem = ("image_missing", f"row {row} of {file_name} has no image")
            yield entry
