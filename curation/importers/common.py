"""What every importer shares: an imported row, the image store, reading JSONL rows, speakers, making a sample."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchcurate.curation.core.files import replacing
from benchcurate.curation.core.jsonl import jsonl_lines, text
from benchcurate.curation.images.ingest import sample_id
from benchcurate.schemas import ImageRef, Provenance, Sample

UNKNOWN_LICENSE = "unknown"  # what a picture carries when nobody stated its terms


@dataclass(frozen=True)
class Imported:
    row: str  # where in the input: file and row number or id
    sample: Sample | None = None
    reason: str | None = None  # why the row could not be mapped
    detail: str = ""


class ImageStore:
    """Turns image bytes or paths into ImageRefs; embedded bytes are written once under `folder`."""

    def __init__(self, folder: Path):
        self.folder = folder

    def from_bytes(self, data: bytes, suffix: str = ".img") -> ImageRef:
        digest = hashlib.sha256(data).hexdigest()
        path = self.folder / f"{digest}{suffix if suffix.startswith('.') else '.' + suffix}"
        if not path.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            with replacing(path) as partial:
                partial.write_bytes(data)
        return ImageRef(path=str(path.resolve()), sha256=digest, size_bytes=len(data))

    @staticmethod
    def from_path(path: Path) -> ImageRef | None:
        """The file's ref, or None when it does not exist."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        return ImageRef(path=str(path.resolve()), sha256=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def jsonl_rows(path: Path) -> Iterator[tuple[str, object]]:
    """(where, parsed line) per non-empty line; a line that is not JSON comes as its ValueError, one that is not
    UTF-8 is a UserError naming it (as every other command reading a JSONL says it)."""
    import json

    for number, line in jsonl_lines(path):
        try:
            yield f"{path.name}:{number}", json.loads(text(path, number, line))
        except ValueError as error:
            yield f"{path.name}:{number}", error
        except RecursionError:
            yield f"{path.name}:{number}", ValueError("the line nests too deeply to read")


def read_jsonl(path: Path, images: Path | None, to_sample: Callable[[str, dict, Path], Imported]) -> Iterator[Imported]:
    """The loop of the JSONL formats: each line parsed and mapped; what cannot be is a malformed row."""
    base = images or path.parent
    for where, line in jsonl_rows(path):
        try:
            yield to_sample(where, parsed(line), base)
        except (ValueError, KeyError, TypeError) as error:
            yield malformed(where, error)


def malformed(where: str, error: Exception) -> Imported:
    return Imported(row=where, reason="malformed_row", detail=f"{type(error).__name__}: {error}"[:300])


def parsed(row: object) -> dict:
    """The row as a JSON object, or the reason it is not one (raised)."""
    if isinstance(row, Exception):
        raise row
    if not isinstance(row, dict):
        raise TypeError(f"expected a JSON object, got {type(row).__name__}")
    return row


SPEAKERS = {"user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant", "model": "assistant"}


def speaker(value: object) -> str | None:
    """Our speaker for a source's role name (user/human, assistant/gpt/model), or None."""
    return SPEAKERS.get(str(value).strip().casefold())


def make_sample(
    source: str, source_id: str, license_id: str, images: list[ImageRef], missing: list[str], text_for_id: str, **fields
) -> Sample:
    """A canonical sample with a stable id: from the image content, or the text when no image is at hand.
    `license_id` is the benchmark's, which covers its text (questions, answers, annotations); its pictures keep
    their own sources' terms, unknown unless the import is told (`image_license`)."""
    content = images[0].sha256 if images else hashlib.sha256(text_for_id.encode()).hexdigest()
    scores = {"import": {"missing_images": "; ".join(missing)}} if missing else {}
    return Sample(
        id=sample_id(source, source_id, content),
        images=images,
        scores=scores,
        provenance=Provenance(
            source_dataset=source, source_id=source_id, license=UNKNOWN_LICENSE, text_license=license_id
        ),
        **fields,
    )
