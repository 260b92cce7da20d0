"""The run report's pages for a release, for those who receive only the release (`curate release report`): the
funnel from its manifest, kept items per category, costs, and every sample of every split with filters. Written
beside the release, never in it (its files are checksummed)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

from benchcurate.curation.release.reading import image_file, open_release, rows
from benchcurate.curation.report.html import RunView, Shown, write_site
from benchcurate.schemas import (
    Categories,
    Challenge,
    ChecklistItem,
    ImageRef,
    Persona,
    Provenance,
    ReleaseManifest,
    ReviewState,
    Rewrite,
    Sample,
    Turn,
)


def release_samples(folder: Path, images: Path) -> tuple[ReleaseManifest, list[Shown]]:
    """A release's manifest and its rows as the samples pages show them (each image written once under
    `images`, by content)."""
    release = open_release(folder)
    samples = []
    for split in release.manifest.splits:
        for row in rows(release, split):
            picture = image_file(row["image"], images) if row.get("image") else None
            samples.append(Shown(_sample_of(row, picture), split))
    return release.manifest, samples


def _sample_of(row: dict, picture: ImageRef | None) -> Sample:
    """A release row as the sample it was released from (the fields the pages show), whatever the recipe's
    columns."""

    def turn(value: dict) -> Turn:
        return Turn(
            speaker=value.get("speaker") or "user",
            utterance=value.get("utterance") or "",
            level=value.get("level"),
            reference=value.get("reference"),
            focus_points=value.get("focus_points") or [],
            checklist=[
                ChecklistItem(**{name: check.get(name) or "" for name in ("question", "main_criteria", "sub_criteria")})
                for check in value.get("checklist") or []
            ],
        )

    challenge = {
        part: row[f"challenge_{part}"]
        for part in ("textual", "image", "reasoning")
        if row.get(f"challenge_{part}") is not None
    }
    return Sample(
        id=str(row.get("index") or row.get("id") or ""),
        images=[picture] if picture else [],
        provenance=Provenance(
            source_dataset=row.get("source_dataset") or "-",
            source_id=row.get("source_id") or "-",
            license=row.get("image_license") or row.get("license") or "-",
            text_license=row.get("text_license") or "-",
        ),
        persona=Persona(character=row["character"], scenario=row.get("scenario") or "", goal=row.get("goal") or "")
        if row.get("character")
        else None,
        caption=row.get("caption"),
        conversation=[turn(value) for value in row.get("conversation") or []],
        rewrites=[Rewrite(text=text, status="kept") for text in row.get("rewrites") or [] if isinstance(text, str)],
        categories=Categories(image_main=row.get("image_main_category") or row.get("category")),
        language=row.get("language"),
        challenge=Challenge(**challenge) if len(challenge) == 3 else None,
        review=ReviewState(status=row.get("review_status") or "pending"),
    )


def release_report_folder(folder: Path) -> Path:
    """Where a release's report goes by default: beside the release, never in it (its files are checksummed)."""
    folder = folder.expanduser().resolve()
    return folder.parent / f"{folder.name}.report"


def write_release_report(folder: Path, out: Path | None = None, workers: int = 2) -> Path:
    """The same pages for a release, for those who receive only the release: the funnel from its manifest, kept
    items per category, costs, and every sample of every split with filters. Written to `out` (default: beside
    the release, `release_report_folder`)."""
    out = out or release_report_folder(folder)
    with tempfile.TemporaryDirectory(prefix="release-images-") as images:  # only the thumbnails are kept
        manifest, samples = release_samples(folder, Path(images))
        view = RunView(
            report=SimpleNamespace(stages=manifest.funnel),
            samples=samples,
            agreement=manifest.review.agreement if manifest.review else {},
        )
        return write_site(
            out,
            view,
            run_id=f"{manifest.name} {manifest.version} (run {manifest.run_id})",
            recipe=manifest.recipe,
            backends=manifest.backends,
            stages=manifest.funnel,
            total_stages=len(manifest.funnel),
            complete=True,
            waiting=None,
            workers=workers,
            what="release",
        )
