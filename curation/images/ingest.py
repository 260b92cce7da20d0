"""image_ingest: every file under a folder becomes an item with provenance and content sha256 (decoding is
the next stages' job: exact duplicates are dropped before anything is decoded).

Provenance comes from an optional `manifest.jsonl` at the folder's root, one row per file:
`{"path": "<relative path>", "source_dataset": ..., "source_id": ..., "license": ..., "attribution": ...,
"derived_from": ...}`; files it does not list get the folder name as source, their relative path as source id
and `default_license`. Every entry under the folder becomes an item, and one that cannot be used is dropped
with its reason: a hidden file (`hidden_file`), a broken link or other non-file (`not_a_regular_file`), a file
that cannot be read (`file_unreadable`), or a suffix that is not an image's (`unsupported_extension`). Hidden folders (`.git`, `.cache`) and `exclude_paths` are not read at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from curation.errors import UserError
from curation.fingerprint import sha256_bytes, sha256_json
from curation.stage import SourceStage, StageConfig, StageContext
from schemas import Drop, ImageRef, Keep, Provenance, Sample, Verdict

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")


class IngestConfig(StageConfig):
    input_dir: str = Field(description="absolute path of the folder to ingest (set from --input)")
    manifest_name: str = Field("manifest.jsonl", description="per-file provenance file at the folder's root")
    default_license: str = Field("unknown", description="license of files the manifest does not list")
    source_dataset: str | None = Field(None, description="source name for unlisted files; default: folder name")
    extensions: tuple[str, ...] = Field(IMAGE_EXTENSIONS, description="lower-case file suffixes taken as images")
    exclude_paths: tuple[str, ...] = Field((), description="relative folders not to read (the output folder)")


def _root(cfg: IngestConfig) -> Path:
    root = Path(cfg.input_dir)
    if not root.is_dir():
        raise UserError(f"input folder {root} does not exist or is not a folder; pass --input with a folder of "
                        f"images, or leave --input out to run the bundled demo corpus")
    return root


def _entries(cfg: IngestConfig) -> list[Path]:
    """Every non-folder entry to account for, in a stable order."""
    root = _root(cfg)
    excluded = [root / relative for relative in cfg.exclude_paths]
    entries = []
    for path in root.rglob("*"):
        relative_parts = path.relative_to(root).parts
        if any(part.startswith(".") for part in relative_parts[:-1]) or path.is_dir():
            continue
        if any(path.is_relative_to(folder) for folder in excluded) or path == root / cfg.manifest_name:
            continue
        entries.append(path)
    return sorted(entries)


def describe_input(cfg: IngestConfig) -> str:
    """A digest of the folder listing (names, sizes, modification times) and the manifest's content."""
    root = _root(cfg)
    listing = [[str(path.relative_to(root)), path.lstat().st_size, path.lstat().st_mtime_ns]
               for path in _entries(cfg)]
    manifest = root / cfg.manifest_name
    return sha256_json({"files": listing, "manifest": manifest.read_text("utf-8") if manifest.exists() else None})


def _manifest(cfg: IngestConfig) -> dict[str, dict]:
    path = Path(cfg.input_dir) / cfg.manifest_name
    if not path.exists():
        return {}
    rows = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows[row["path"]] = row
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise UserError(f"{path} line {number} is not a JSON object with a 'path' key ({error}); fix the "
                            f"manifest or remove it") from error
    return rows


def sample_id(source_dataset: str, source_id: str, content_sha256: str) -> str:
    """Stable across runs: the same file from the same source always gets the same id."""
    return sha256_json([source_dataset, source_id, content_sha256])[:16]


def _provenance(relative: str, row: dict | None, cfg: IngestConfig) -> Provenance:
    fallback_source = cfg.source_dataset or Path(cfg.input_dir).name
    row = row or {}
    return Provenance(source_dataset=row.get("source_dataset") or fallback_source,
                      source_id=row.get("source_id") or relative,
                      license=row.get("license") or cfg.default_license, attribution=row.get("attribution"),
                      source_path=relative, derived_from=row.get("derived_from"))


def _unusable(path: Path) -> tuple[str, str] | None:
    """(reason, detail) when the entry is not a readable regular file."""
    if path.name.startswith("."):
        return "hidden_file", "hidden files are not ingested"
    if not path.is_file():
        return "not_a_regular_file", "broken link, pipe, socket or device"
    return None


def read(cfg: IngestConfig, ctx: StageContext) -> Iterator[tuple[Sample, Verdict]]:
    root = _root(cfg)
    manifest = _manifest(cfg)
    for path in _entries(cfg):
        relative = path.relative_to(root).as_posix()
        provenance = _provenance(relative, manifest.get(relative), cfg)
        problem = _unusable(path)
        if problem is None:
            try:
                data = path.read_bytes()
            except OSError as error:
                problem = ("file_unreadable", f"{type(error).__name__}: {error}")
        if problem is not None:
            item = Sample(id=sample_id(provenance.source_dataset, provenance.source_id, "no-content"),
                          provenance=provenance)
            yield item, Drop(reason=problem[0], detail={"path": relative, "error": problem[1]})
            continue
        digest = sha256_bytes(data)
        image = ImageRef(path=str(path.resolve()), sha256=digest, size_bytes=len(data))
        item = Sample(id=sample_id(provenance.source_dataset, provenance.source_id, digest), images=[image],
                      provenance=provenance)
        if path.suffix.lower() not in cfg.extensions:
            yield item, Drop(reason="unsupported_extension", detail={"path": relative, "suffix": path.suffix})
            continue
        yield item, Keep()


STAGE = SourceStage(name="image_ingest", config=IngestConfig, read=read, describe_input=describe_input,
                    reasons=("unsupported_extension", "hidden_file", "not_a_regular_file", "file_unreadable"))
