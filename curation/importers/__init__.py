"""Importers: released benchmarks mapped into canonical samples, so users can extend them or dedupe against them.

One module per source format (../shared/docs/seed-formats.md); each yields `Imported` rows: a sample, or the
reason the row could not be mapped. Images embedded in a dataset are written once, content-addressed, into an
images folder next to the output; images referenced by path are used where they are. A row whose image file is
missing is still imported (the text is useful for deduplication), with the missing path recorded in
`scores["import"]`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.core.files import replacing
from benchcurate.curation.importers import alignmmbench, convbench, multiverse, probench
from benchcurate.curation.importers.common import ImageStore, Imported


def importers() -> dict[str, Callable[..., Iterator[Imported]]]:
    return {
        "multiverse": multiverse.read,
        "convbench": convbench.read,
        "probench": probench.read,
        "alignmmbench": alignmmbench.read,
    }


@dataclass
class ImportSummary:
    imported: int = 0
    without_image: int = 0
    rejected: dict[str, int] | None = None
    first_missing: str | None = None  # where the first image not found was looked for


def import_file(
    source: str,
    path: Path,
    out: Path,
    license_id: str | None = None,
    images: Path | None = None,
    progress: Callable[[int], None] = lambda done: None,
    image_license: str | None = None,
) -> ImportSummary:
    """Write canonical samples to `out` (JSONL) and unmappable rows, with their reason, to `<out>.rejected.jsonl`."""
    import json

    from benchcurate.curation.core.errors import UserError

    readers = importers()
    if source not in readers:
        raise UserError(f"unknown source '{source}'; choose one of: {', '.join(readers)}")
    if not path.exists():
        raise UserError(f"{path} does not exist")
    if images is not None and not images.is_dir():
        raise UserError(f"--images {images} is not a folder")
    store = ImageStore(out.with_name(out.stem + "-images"))
    summary = ImportSummary(rejected={})
    out.parent.mkdir(parents=True, exist_ok=True)
    rejected_path = out.with_name(out.stem + ".rejected.jsonl")
    with (
        replacing(out) as partial,
        open(partial, "w", encoding="utf-8") as kept,
        open(rejected_path, "w", encoding="utf-8") as rejected,
    ):
        for done, row in enumerate(readers[source](path, store, license_id, images), 1):
            if row.sample is not None:
                if image_license:
                    row.sample.provenance.license = image_license
                kept.write(row.sample.model_dump_json() + "\n")
                summary.imported += 1
                summary.without_image += not row.sample.images
                missing = row.sample.scores.get("import", {}).get("missing_images")
                summary.first_missing = summary.first_missing or (missing.split("; ")[0] if missing else None)
            else:
                rejected.write(
                    json.dumps({"row": row.row, "reason": row.reason, "detail": row.detail}, ensure_ascii=False) + "\n"
                )
                summary.rejected[row.reason] = summary.rejected.get(row.reason, 0) + 1
            progress(done)
    if not summary.rejected:
        rejected_path.unlink()
    return summary
