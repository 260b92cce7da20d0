"""A release as an evaluator reads it: its manifest, and its rows with each image as a file the model layer sends."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.files import replacing
from benchcurate.curation.core.fingerprint import sha256_file
from benchcurate.curation.release.files import CHECKSUM_FILE, split_of
from benchcurate.curation.release.verify import verify
from benchcurate.schemas import ImageRef, ReleaseManifest


@dataclass(frozen=True)
class Release:
    folder: Path
    manifest: ReleaseManifest
    checksums_sha256: str  # which bytes were scored: the hash of SHA256SUMS, which lists every file's hash

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def version(self) -> str:
        return self.manifest.version

    @property
    def recipe(self) -> str:
        return self.manifest.recipe


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")  # one path component, no `..`


def open_release(folder: Path) -> Release:
    """The release's manifest, its name and version checked as plain folder names (results and exports are
    written under them). Not verified: `verified` checks every file."""
    folder = folder.expanduser().resolve()
    if not (folder / "manifest.json").is_file() or not (folder / CHECKSUM_FILE).is_file():
        raise UserError(
            f"{folder} is not a release folder (it needs manifest.json and {CHECKSUM_FILE}); give "
            f"outputs/releases/<name>/<version>"
        )
    try:
        manifest = ReleaseManifest.model_validate_json((folder / "manifest.json").read_text(encoding="utf-8"))
    except ValueError as error:
        raise UserError(
            f"{folder / 'manifest.json'} is not a release manifest ({str(error).splitlines()[0]}); "
            f"`curate release verify {folder}` says more"
        ) from None
    for field, value in (("name", manifest.name), ("version", manifest.version)):
        if not PLAIN_NAME.fullmatch(value) or len(value) > 100:
            raise UserError(
                f"the release's manifest.json gives {field} {value!r}, which is not a plain folder name "
                f"(letters, digits, '.', '_', '-'); refusing to write results under it"
            )
    return Release(folder, manifest, sha256_file(folder / CHECKSUM_FILE))


def verified(release: Release) -> Release:
    """The release after checking every file against SHA256SUMS and the manifest (`curate release verify`);
    UserError when anything differs. The checksum recorded is taken now, with the files as they were checked."""
    problems = verify(release.folder)
    if problems:
        raise UserError(
            f"release {release.folder} does not verify ({len(problems)} problem(s), first: "
            f"{problems[0]}); refusing to score or export it: `curate release verify "
            f"{release.folder}` lists them"
        )
    return Release(release.folder, release.manifest, sha256_file(release.folder / CHECKSUM_FILE))


def split_size(release: Release, split: str) -> int:
    """Rows in the split, from the parquet footers."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(path).num_rows for path in split_files(release, split))


def split_files(release: Release, split: str) -> list[Path]:
    """The split's parquet files in order; UserError naming the splits there are when it has none."""
    paths = sorted(path for path in (release.folder / "data").glob("*.parquet") if split_of(path) == split)
    if not paths:
        raise UserError(
            f"release {release.name} {release.version} has no split '{split}' (it has: "
            f"{', '.join(release.manifest.splits)}); pass --split"
        )
    return paths


def rows(release: Release, split: str, limit: int | None = None) -> Iterator[dict]:
    """The split's rows in file order (the image column left as {bytes, path}); at most `limit`."""
    import pyarrow.parquet as pq

    count = 0
    for path in split_files(release, split):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=64):
            for row in batch.to_pylist():
                if limit is not None and count >= limit:
                    return
                count += 1
                yield row


def image_file(image: dict, folder: Path) -> ImageRef:
    """The row's embedded image written once under `folder` by content, as the model layer reads images."""
    data = image["bytes"]
    digest = hashlib.sha256(data).hexdigest()
    suffix = Path(image.get("path") or "").suffix.lower() or ".png"
    path = folder / f"{digest}{suffix}"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with replacing(path) as partial:  # one partial file per thread: samples in flight may share an image
            partial.write_bytes(data)
    with Image.open(io.BytesIO(data)) as opened:
        width, height = opened.size
    return ImageRef(path=str(path), sha256=digest, size_bytes=len(data), width=width, height=height)
