"""Versioned releases: `<out>/releases/<name>/<version>/` with parquet (images embedded), card, manifest, checksums.

A released version is never overwritten: the folder is written under a temporary name and renamed into place
only if no folder of that version exists. The parquet uses the Hugging Face Image feature, so
`datasets.load_dataset(<folder>)` loads it offline with no custom code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from benchcurate.curation.core.errors import DiskFull, UserError, disk_full
from benchcurate.curation.core.files import PARTIAL_SUFFIX, one_at_a_time
from benchcurate.curation.core.fingerprint import sha256_file, sha256_json
from benchcurate.curation.core.jsonl import numbered_rows
from benchcurate.curation.core.secrets import share
from benchcurate.curation.engine.store import RunStore, write_json_atomic
from benchcurate.curation.release.card import LICENSE_FILE, license_metadata, render_card, render_license
from benchcurate.curation.release.columns import content_row, features, to_row
from benchcurate.curation.release.files import CHECKSUM_FILE
from benchcurate.curation.release.licenses import release_terms
from benchcurate.curation.release.plots import write_plots
from benchcurate.curation.report.run import load_report
from benchcurate.curation.report.statistics import dataset_statistics
from benchcurate.curation.review.summary import review_summary
from benchcurate.schemas import PromptUse, ReleaseManifest, ReleaseSpec, Sample
from benchcurate.schemas.manifest import ReviewSummary


def parse_version(text: str) -> tuple[int, int, int]:
    parts = text.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise UserError(f"version '{text}' is not semantic (MAJOR.MINOR.PATCH, e.g. 1.0.0)")
    major, minor, patch = (int(part) for part in parts)
    return major, minor, patch


def existing_versions(release_root: Path) -> list[str]:
    if not release_root.is_dir():
        return []
    found = [entry.name for entry in release_root.iterdir() if entry.is_dir() and not entry.name.startswith(".")]
    return sorted((name for name in found if name.count(".") == 2), key=parse_version)


def next_free_version(release_root: Path, first_version: str) -> str:
    versions = existing_versions(release_root)
    if not versions:
        return first_version
    major, minor, patch = parse_version(versions[-1])
    return f"{major}.{minor}.{patch + 1}"


def final_samples(run_dir: Path) -> tuple[list[Sample], object]:
    report = load_report(run_dir)
    if not report.complete:
        raise UserError(
            f"run {report.config.run_id} is incomplete ({len(report.stages)} of {report.total_stages} "
            f"stages done); finish it with `curate run {report.config.recipe.name} --run-id "
            f"{report.config.run_id}` before releasing"
        )
    return list(RunStore(run_dir).kept(report.total_stages - 1)), report


def _check_images(samples: list[Sample]) -> None:
    for sample in samples:
        image = sample.images[0]
        path = Path(image.path)
        if not path.exists() or sha256_file(path) != image.sha256:
            raise UserError(
                f"image of sample {sample.id} changed or vanished since ingest ({path}); rerun the "
                f"pipeline on the current files before releasing"
            )


def total_cost(stages) -> float | None:
    """What the run's new model calls cost; None when a model without a known price was called."""
    costs = [spent.cost_usd for stats in stages for spent in stats.usage.values() if spent.calls]
    return None if any(cost is None for cost in costs) else round(sum(costs), 6)


def _manifest(
    samples: list[Sample], report, spec: ReleaseSpec, version: str, splits: dict[str, int]
) -> ReleaseManifest:
    generations = [generation for sample in samples for generation in sample.generated_by.values()]
    prompts = {(g.prompt_id, g.prompt_version, g.prompt_sha256) for g in generations if g.prompt_id}
    config = report.config
    return ReleaseManifest(
        name=spec.name,
        version=version,
        created_at=datetime.now(UTC),
        run_id=config.run_id,
        recipe=config.recipe.name,
        config_sha256=sha256_json(config.recipe),
        code_version=config.code_version,
        seed=config.recipe.seed,
        backends=sorted({g.backend for g in generations}),
        offline_outputs=any(g.backend == "offline-heuristic" for g in generations),
        models=sorted({g.model for g in generations}),
        total_cost_usd=total_cost(report.stages),
        prompts=[PromptUse(prompt_id=p, version=v, sha256=s) for p, v, s in sorted(prompts)],
        review_modes=sorted({sample.review.mode or "none" for sample in samples}),
        funnel=report.stages,
        sample_count=len(samples),
        splits=splits,
        split_fractions=spec.splits,
        licenses=dict(Counter(sample.provenance.license for sample in samples).most_common()),
        text_licenses=dict(Counter(sample.provenance.text_license for sample in samples).most_common()),
        sources=dict(Counter(sample.provenance.source_dataset for sample in samples).most_common()),
        statistics=dataset_statistics(samples),
        license_terms=_terms(samples),
        review_projects=sorted({sample.review.project for sample in samples if sample.review.project}),
    )


REMOVALS_FILE = "REMOVALS.jsonl"


def read_removals(release_root: Path) -> dict[str, str]:
    """Samples to leave out of every later release of this benchmark: `<releases>/<name>/REMOVALS.jsonl`, one
    `{"sample_id": ..., "reason": ...}` per line (a takedown request, a found error)."""
    path = release_root / REMOVALS_FILE
    if not path.exists():
        return {}
    removals = {}
    for number, row in numbered_rows(path):
        if not row.get("sample_id"):
            raise UserError(f'{path} line {number} has no sample_id; write {{"sample_id": ..., "reason": ...}}')
        removals[str(row["sample_id"])] = str(row.get("reason") or "removal requested")
    return removals


def _terms(samples: list[Sample]) -> dict:
    terms = release_terms(samples)
    return {
        "conditions": terms.conditions,
        "summary": terms.summary,
        "conflicts": terms.conflicts,
        "sources_by_license": terms.sources_by_license,
    }


def assign_split(release_name: str, sample_id: str, splits: dict[str, float]) -> str:
    """The split of one sample: a hash of the release name and the sample id, placed on the splits' fractions in
    the order the recipe lists them. Other samples play no part, so a sample keeps its split in every version."""
    point = int(hashlib.sha256(f"{release_name}\0{sample_id}".encode()).hexdigest()[:16], 16) / 2**64
    edge = 0.0
    for name, fraction in splits.items():
        edge += fraction
        if point < edge:
            return name
    return name  # rounding at the top edge


def split_samples(samples: list[Sample], spec: ReleaseSpec) -> dict[str, list[Sample]]:
    chosen = {name: [] for name in spec.splits}
    for sample in samples:
        chosen[assign_split(spec.name, sample.id, spec.splits)].append(sample)
    empty = [name for name, members in chosen.items() if not members]
    if empty:
        raise UserError(
            f"split(s) {', '.join(empty)} would get none of the {len(samples)} samples; raise their "
            f"fraction or drop them (release.splits = {spec.splits})"
        )
    return chosen


ROW_GROUP_BYTES = 32 * 1024 * 1024  # the unit a reader decodes at once (the Hub's viewer, `datasets` streaming)


@dataclass
class SplitFiles:
    paths: list[Path]
    rows: int
    arrow_bytes: int  # the in-memory size `datasets` records as a split's num_bytes


def _row_bytes(row: dict) -> int:
    image = row["image"]["bytes"]
    return len(image) + len(json.dumps({k: v for k, v in row.items() if k != "image"}, ensure_ascii=False))


class _ShardWriter:
    """Rows go out in row groups of about ROW_GROUP_BYTES through pyarrow's ParquetWriter; a file is closed when it
    reaches `max_bytes` and the next one opened. The arrow schema carries the features (`huggingface` metadata),
    so `datasets` reads the Image column as images. Memory holds one row group, whatever the shard size."""

    def __init__(self, data_dir: Path, split: str, max_bytes: int, recipe: str):
        self.data_dir, self.split, self.max_bytes = data_dir, split, max_bytes
        self.features = features(recipe)
        self.schema = self.features.arrow_schema
        self.paths: list[Path] = []
        self.rows: list[dict] = []
        self.group_bytes = self.file_bytes = self.arrow_bytes = 0
        self.writer = None

    def add(self, row: dict) -> None:
        size = _row_bytes(row)
        if (
            self.writer is not None
            and self.file_bytes + self.group_bytes + size > self.max_bytes
            and (self.rows or self.file_bytes)
        ):
            self._flush_group()
            self._close_file()
        if self.rows and self.group_bytes + size > ROW_GROUP_BYTES:
            self._flush_group()
        if self.writer is None:
            self._open_file()
        self.rows.append(self.features.encode_example(row))
        self.group_bytes += size

    def _open_file(self) -> None:
        import pyarrow.parquet as pq

        path = self.data_dir / f".{self.split}-{len(self.paths):05d}.parquet"
        self.writer = pq.ParquetWriter(str(path), self.schema)
        self.paths.append(path)

    def _flush_group(self) -> None:
        import pyarrow as pa

        if self.rows:
            table = pa.Table.from_pylist(self.rows, schema=self.schema)
            self.writer.write_table(table, row_group_size=len(self.rows))
            self.arrow_bytes += table.nbytes
            self.file_bytes += self.group_bytes
            self.rows, self.group_bytes = [], 0

    def _close_file(self) -> None:
        self.writer.close()
        self.writer, self.file_bytes = None, 0

    def close(self) -> list[Path]:
        if self.writer is not None:
            self._flush_group()
            self._close_file()
        count = len(self.paths)
        return [
            path.rename(self.data_dir / f"{self.split}-{number:05d}-of-{count:05d}.parquet")
            for number, path in enumerate(self.paths)
        ]


def write_shards(
    samples: list[Sample],
    data_dir: Path,
    split: str,
    max_shard_bytes: int,
    recipe: str,
    on_row: Callable[[], None] = lambda: None,
) -> SplitFiles:
    """Parquet files of about `max_shard_bytes` each, named `<split>-NNNNN-of-MMMMM.parquet` as the Hub does,
    streamed row group by row group."""
    data_dir.mkdir(parents=True, exist_ok=True)
    shards = _ShardWriter(data_dir, split, max_shard_bytes, recipe)
    for sample in samples:
        shards.add(to_row(sample, recipe))
        on_row()
    paths = shards.close()
    return SplitFiles(paths=paths, rows=len(samples), arrow_bytes=shards.arrow_bytes)


def _checksums(folder: Path) -> dict[str, dict]:
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != CHECKSUM_FILE:
            files[path.relative_to(folder).as_posix()] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    (folder / CHECKSUM_FILE).write_text(
        "".join(f"{entry['sha256']}  {name}\n" for name, entry in files.items()), encoding="utf-8"
    )
    return files


def release_spec(report, overrides: dict | None = None) -> ReleaseSpec:
    """The recipe's release section with the command line's changes (splits, shard size) validated."""
    spec = report.config.recipe.release
    if not overrides:
        return spec
    try:
        return ReleaseSpec.model_validate({**spec.model_dump(), **overrides})
    except ValidationError as error:
        raise UserError(f"release settings: {error.errors()[0]['msg'].removeprefix('Value error, ')}") from error


@dataclass(frozen=True)
class Released:
    """What `release` did: the version's folder, and whether it was written now or already held this content."""

    folder: Path
    new: bool

    @property
    def version(self) -> str:
        return self.folder.name

    @property
    def manifest(self) -> ReleaseManifest:
        return ReleaseManifest.model_validate_json((self.folder / "manifest.json").read_text(encoding="utf-8"))


def write_release(
    run_dir: Path,
    out_dir: Path,
    version: str | None = None,
    strict_licenses: bool = False,
    overrides: dict | None = None,
    on_row: Callable[[], None] = lambda: None,
) -> Path:
    """The folder of `release(...)`: the new version, or the one already holding the same content."""
    return release(run_dir, out_dir, version, strict_licenses, overrides, on_row).folder


def release(
    run_dir: Path,
    out_dir: Path,
    version: str | None = None,
    strict_licenses: bool = False,
    overrides: dict | None = None,
    on_row: Callable[[], None] = lambda: None,
) -> Released:
    """Release the run's final samples. With no `version`, a release whose content (rows and images) equals an
    existing version's is that version: nothing is written. With `strict_licenses`, sources whose terms conflict
    (or are unknown) are an error naming them; otherwise the manifest and card list them. `overrides` replaces
    release settings of the recipe (`name`, `splits`, `max_shard_mb`) for this release; `on_row` is called once
    per sample written (a progress bar)."""
    samples, report = final_samples(run_dir)
    spec = release_spec(report, overrides)
    removals = read_removals(out_dir / "releases" / spec.name)
    removed = sorted(sample.id for sample in samples if sample.id in removals)
    samples = [sample for sample in samples if sample.id not in removals]
    if not samples:
        raise UserError(f"run {report.config.run_id} kept no samples; nothing to release (see `curate report`)")
    conflicts = release_terms(samples).conflicts
    if strict_licenses and conflicts:
        raise UserError("license conflict (--strict-licenses): " + "; ".join(conflicts))
    _check_images(samples)
    release_root = out_dir / "releases" / spec.name
    try:
        with _writing(release_root):
            return _write(
                samples,
                report,
                spec,
                removals,
                removed,
                release_root,
                out_dir,
                version,
                on_row,
                review_summary(run_dir),
            )
    except OSError as error:
        if disk_full(error):  # the half-written version stays a .partial folder, removed by the next release
            raise DiskFull(f"release {spec.name}: {error}") from error
        raise


@contextlib.contextmanager
def _writing(release_root: Path) -> Iterator[None]:
    """One writer of a release name at a time (a second one waits, then finds its version taken or takes the
    next), and what killed writers left behind (`.X.Y.Z.partial`) is removed: no writer can be using it now."""
    with one_at_a_time(release_root / ".lock"):
        for stale in release_root.glob(f".*{PARTIAL_SUFFIX}"):
            shutil.rmtree(stale, ignore_errors=True)
        yield


def content_sha256(by_split: dict[str, list[Sample]], recipe: str) -> str:
    """What a release holds, independent of when and from which run folder it was written: each split's rows as
    written, the image by its sha256 and file name instead of its bytes."""
    digest = hashlib.sha256()
    for name, members in sorted(by_split.items()):
        digest.update(f"split\0{name}\0".encode())
        for sample in members:
            digest.update(json.dumps(content_row(sample, recipe), sort_keys=True, default=str).encode() + b"\n")
    return digest.hexdigest()


def released_as(release_root: Path, content: str) -> Path | None:
    """The existing version holding exactly this content, if any (the newest, should there be several)."""
    for version in reversed(existing_versions(release_root)):
        path = release_root / version / "manifest.json"
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("content_sha256") == content:
                return release_root / version
        except (OSError, ValueError):
            continue
    return None


def _write(
    samples: list[Sample],
    report,
    spec: ReleaseSpec,
    removals: dict,
    removed: list[str],
    release_root: Path,
    out_dir: Path,
    version: str | None,
    on_row: Callable[[], None],
    review: ReviewSummary | None = None,
) -> Released:
    by_split = split_samples(samples, spec)
    content = content_sha256(by_split, report.config.recipe.name)
    if version is None and (same := released_as(release_root, content)) is not None:
        return Released(same, new=False)
    version = version or next_free_version(release_root, spec.first_version)
    parse_version(version)
    final = release_root / version
    if final.exists():
        raise UserError(
            f"release {spec.name} {version} already exists at {final}; releases are never "
            f"overwritten, pick another --version"
        )
    partial = release_root / f".{version}{PARTIAL_SUFFIX}"
    files = {
        name: write_shards(
            members, partial / "data", name, int(spec.max_shard_mb * 1024 * 1024), report.config.recipe.name, on_row
        )
        for name, members in by_split.items()
    }
    manifest = _manifest(samples, report, spec, version, {name: len(members) for name, members in by_split.items()})
    manifest = manifest.model_copy(
        update={
            "content_sha256": content,
            "review": review,
            "removed_on_request": {sample_id: removals[sample_id] for sample_id in removed},
        }
    )
    config_name = spec.name  # the same in every version: `load_dataset(folder, "<name>")` works for all of them
    plots = write_plots(samples, partial, out_dir / "cache" / "matplotlib")
    (partial / "README.md").write_text(
        render_card(manifest, report, spec, samples, config_name, plots, files), encoding="utf-8"
    )
    if "license_link" in license_metadata(manifest.licenses, manifest.text_licenses):
        (partial / LICENSE_FILE).write_text(render_license(manifest, samples), encoding="utf-8")
    manifest = manifest.model_copy(update={"files": _checksums(partial)})
    write_json_atomic(partial / "manifest.json", manifest.model_dump(mode="json"))
    _checksums(partial)
    share(partial)
    os.rename(partial, final)
    return Released(final, new=True)
