"""Exports of a release (and of its eval results) to evaluation harnesses: lmms-eval, VLMEvalKit, ConvBench's
own script."""

from __future__ import annotations

import shutil
from fnmatch import fnmatchcase
from pathlib import Path

from benchcurate.curation.core.errors import UserError


def clear_for_export(folder: Path, ours: set[str]) -> None:
    """Make `folder` empty for a new export: a folder holding only what an export writes (`ours`: the names, or
    shell patterns of names, at its top) is replaced; one holding anything else is refused, never deleted."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise UserError(f"{folder} exists and is not a folder; give another --to")
    strangers = sorted(
        path.name for path in folder.iterdir() if not any(fnmatchcase(path.name, pattern) for pattern in ours)
    )
    if strangers:
        raise UserError(
            f"{folder} holds files this export does not write ({', '.join(strangers[:3])}"
            f"{', ...' if len(strangers) > 3 else ''}); refusing to delete them: give an empty or new --to"
        )
    shutil.rmtree(folder)
