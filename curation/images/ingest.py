"""image_ingest: every image from the input becomes an item with provenance, license and content sha256.

Inputs (`curation.images.sources`):
- a folder tree, with an optional `manifest.jsonl` (or `.csv`) at its root giving per-file provenance;
- a manifest file (CSV or JSONL) listing local paths with `source`, `license` and `source_id`;
- a local Hugging Face dataset folder (parquet, or `save_to_disk` arrow files) with an Image column; embedded
  images are stored once, by content, in the cache's blob folder;
- a JSONL of canonical samples (`curate import`, or a stage's kept.jsonl): each keeps its id, text and labels,
  so imported benchmarks can be extended (paraphrased, relabelled) by a recipe; one whose image file is
  missing or changed is dropped as `image_missing`.
Entries a manifest or dataset does not describe get `source_dataset` (default: the input's name), their path as
source id and `default_license`. An entry that cannot be used is dropped with its reason: `hidden_file`,
`not_a_regular_file`, `image_missing`, `file_unreadable`, `unsupported_extension`, `unreadable_name` (not UTF-8),
`path_invalid` (a manifest path that is not text or that no file system takes), `field_too_large` (a provenance
field over `max_field_chars`), `file_too_large` (over `max_file_bytes`: a file is read whole), `outside_input_root`
(a resolved path outside `allowed_roots`, when those are set). Decoding is the next stages' job, so exact
duplicates are dropped before anything is decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from pydantic import Field

from benchcurate.curation.core.decode import IMAGE_EXTENSIONS
from benchcurate.curation.core.fingerprint import sha256_bytes, sha256_json
from benchcurate.curation.core.jsonl import read_samples
from benchcurate.curation.engine.stage import SourceStage, StageConfig, StageContext
from benchcurate.curation.images.sources import (
    HF_DATA_SUFFIXES,
    Entry,
    dataset_entries,
    folder_entries,
    input_kind,
    manifest_entries,
    printable,
)
from benchcurate.schemas import Drop, ImageRef, Keep, Provenance, Sample, Verdict

REASONS = (
    "hidden_file",
    "not_a_regular_file",
    "image_missing",
    "file_unreadable",
    "unsupported_extension",
    "unreadable_name",
    "path_invalid",
    "field_invalid",
    "field_too_large",
    "file_too_large",
    "outside_input_root",
)


class IngestConfig(StageConfig):
    input_path: str = Field(description="absolute path of the folder, manifest or dataset (set from --input)")
    input_kind: Literal["auto", "folder", "manifest", "hf_dataset", "samples"] = Field(
        "auto", description="auto: a .csv/.jsonl file is a manifest, a folder of .parquet/.arrow files a dataset"
    )
    manifest_name: str = Field("manifest.jsonl", description="per-file provenance file at a folder's root")
    default_license: str = Field("unknown", description="license of the pictures nothing else describes")
    default_text_license: str = Field(
        "unknown",
        description="license of the text (seed questions, and what the run writes) where no `text_license` column says",
    )
    source_dataset: str | None = Field(None, description="source name of undescribed entries; default: input name")
    extensions: tuple[str, ...] = Field(IMAGE_EXTENSIONS, description="lower-case file suffixes taken as images")
    exclude_paths: tuple[str, ...] = Field((), description="relative folders not to read (the output folder)")
    image_column: str | None = Field(None, description="dataset column holding images; default: the Image one")
    id_column: str | None = Field(None, description="dataset column used as source id; default: file#row")
    max_field_chars: int = Field(
        65_536,
        ge=1,
        description="longer manifest fields (source, license, attribution, ...) drop the entry as field_too_large",
    )
    max_file_bytes: int = Field(
        512 * 1024 * 1024, ge=1, description="larger files drop as file_too_large (each is read whole into memory)"
    )
    allowed_roots: tuple[str, ...] = Field(
        (),
        description="when set, every image's resolved path must lie under one "
        "of these folders, else outside_input_root (--allow-root)",
    )


def _kind(cfg: IngestConfig) -> str:
    return input_kind(Path(cfg.input_path)) if cfg.input_kind == "auto" else cfg.input_kind


def entries(cfg: IngestConfig) -> Iterator[Entry]:
    root = Path(cfg.input_path)
    kind = _kind(cfg)
    if kind == "manifest":
        return manifest_entries(root)
    if kind == "hf_dataset":
        return dataset_entries(root, cfg.image_column, cfg.id_column)
    return folder_entries(root, cfg.manifest_name, cfg.exclude_paths)


def describe_input(cfg: IngestConfig) -> str:
    """A digest of what ingest will read: names, sizes and modification times of the files involved."""
    root = Path(cfg.input_path)
    kind = _kind(cfg)
    if kind == "hf_dataset":
        files = sorted(path for path in root.rglob("*") if path.suffix in HF_DATA_SUFFIXES)
    elif kind == "samples":
        files = [root] + [Path(image.path) for sample in read_samples(root) for image in sample.images]
    else:
        files = [root / cfg.manifest_name] if kind == "folder" else [root]
        files += [entry.path for entry in entries(cfg) if entry.path is not None and entry.path.exists()]
    listing = [[printable(path), path.lstat().st_size, path.lstat().st_mtime_ns] for path in files if path.exists()]
    return sha256_json({"kind": kind, "files": listing})


def _input_name(cfg: IngestConfig) -> str:
    path = Path(cfg.input_path)
    return path.stem if path.is_file() else path.name


def sample_id(source_dataset: str, source_id: str, content_sha256: str) -> str:
    """Stable across runs: the same content from the same source always gets the same id."""
    return sha256_json([source_dataset, source_id, content_sha256])[:16]


def _field_problem(entry: Entry, cfg: IngestConfig) -> tuple[str, str] | None:
    for name, value in entry.provenance.items():
        if not isinstance(value, str | int | float):
            return "field_invalid", f"{name} is of type {type(value).__name__}, not text"
        if len(str(value)) > cfg.max_field_chars:
            return "field_too_large", (
                f"{name} has {len(str(value)):,} characters (the limit is {cfg.max_field_chars:,})"
            )
    return None


def _outside(path: Path, cfg: IngestConfig) -> bool:
    resolved = path.resolve()  # links followed: a link inside a root to a file elsewhere is elsewhere
    return bool(cfg.allowed_roots) and not any(
        resolved.is_relative_to(Path(root).resolve()) for root in cfg.allowed_roots
    )


def _capped(text: str, limit: int) -> str:
    """A field as stored: whole within the limit; over it (the row is dropped), its start and its length, so a
    50 MB attribution does not become 50 MB in every file that records the drop."""
    return text if len(text) <= limit else f"{text[:200]}... [{len(text):,} characters, over the limit; cut]"


def _provenance(entry: Entry, cfg: IngestConfig) -> Provenance:
    row = {
        name: _capped(str(value), cfg.max_field_chars)
        for name, value in entry.provenance.items()
        if isinstance(value, str | int | float)
    }
    return Provenance(
        source_dataset=row.get("source_dataset") or cfg.source_dataset or _input_name(cfg),
        source_id=str(row.get("source_id") or entry.source_path),
        license=row.get("license") or cfg.default_license,
        text_license=row.get("text_license") or cfg.default_text_license,
        attribution=row.get("attribution"),
        source_path=entry.source_path,
        derived_from=row.get("derived_from"),
    )


def _content(entry: Entry, cfg: IngestConfig, ctx: StageContext) -> tuple[bytes, Path] | tuple[str, str]:
    """(bytes, file path) of a usable entry, or (reason, detail)."""
    if entry.problem:
        return entry.problem
    if entry.data is not None:
        if len(entry.data) > cfg.max_file_bytes:
            return "file_too_large", f"{len(entry.data):,} bytes (the limit is {cfg.max_file_bytes:,})"
        return entry.data, ctx.cache.blob(entry.data)
    if _outside(entry.path, cfg):
        return "outside_input_root", f"{printable(entry.path.resolve())} is not under {', '.join(cfg.allowed_roots)}"
    try:
        size = entry.path.stat().st_size
        if size > cfg.max_file_bytes:
            return "file_too_large", f"{size:,} bytes (the limit is {cfg.max_file_bytes:,})"
        return entry.path.read_bytes(), entry.path
    except OSError as error:
        return "file_unreadable", f"{type(error).__name__}: {error}"


def _imported(cfg: IngestConfig) -> Iterator[tuple[Sample, Verdict]]:
    for sample in read_samples(Path(cfg.input_path)):
        problems = [
            image.path
            for image in sample.images
            if not Path(image.path).is_file() or sha256_bytes(Path(image.path).read_bytes()) != image.sha256
        ]
        if not sample.images or problems:
            yield sample, Drop(reason="image_missing", detail={"paths": problems or ["(the sample has no image)"]})
        else:
            yield sample, Keep()


def read(cfg: IngestConfig, ctx: StageContext) -> Iterator[tuple[Sample, Verdict]]:
    if _kind(cfg) == "samples":
        yield from _imported(cfg)
        return
    for entry in entries(cfg):
        entry.problem = entry.problem or _field_problem(entry, cfg)
        provenance = _provenance(entry, cfg)
        data, where = _content(entry, cfg, ctx)
        if isinstance(data, str):
            item = Sample(
                id=sample_id(provenance.source_dataset, provenance.source_id, "no-content"), provenance=provenance
            )
            yield item, Drop(reason=data, detail={"path": entry.source_path, "error": where})
            continue
        digest = sha256_bytes(data)
        image = ImageRef(path=str(Path(where).resolve()), sha256=digest, size_bytes=len(data))
        item = Sample(
            id=sample_id(provenance.source_dataset, provenance.source_id, digest), images=[image], provenance=provenance
        )
        if entry.suffix is not None and entry.suffix.lower() not in cfg.extensions:
            yield item, Drop(reason="unsupported_extension", detail={"path": entry.source_path, "suffix": entry.suffix})
            continue
        yield item, Keep()


STAGE = SourceStage(name="image_ingest", config=IngestConfig, read=read, describe_input=describe_input, reasons=REASONS)
