"""ProBench conversations as JSONL: uuid, conversations [{from: human|gpt, value}], image (paths), chat_type.

The `gpt` turns are the baseline model's answers; the `<|img|>` placeholder is removed from the text.
`chat_type` (singleround, multi-round, multi-linguistic) becomes the sample's track. Image paths are relative
to the file (or to `--images`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from benchcurate.curation.importers.common import ImageStore, Imported, make_sample, read_jsonl, speaker
from benchcurate.schemas import Turn

SOURCE = "ProBench"
LICENSE = "unknown"  # the release states none; pass --license
PLACEHOLDER = "<|img|>"


def read(
    path: Path, store: ImageStore, license_id: str | None = None, images: Path | None = None
) -> Iterator[Imported]:
    return read_jsonl(path, images, lambda where, row, base: to_sample(where, row, base, license_id))


def to_sample(where: str, row: dict, base: Path, license_id: str | None) -> Imported:
    turns = []
    for entry in row["conversations"]:
        role = speaker(entry["from"])
        if role is None:
            raise ValueError(f"unknown role {entry['from']!r}")
        turns.append(Turn(speaker=role, utterance=str(entry["value"]).replace(PLACEHOLDER, "").strip()))
    if not any(turn.speaker == "user" for turn in turns):
        return Imported(row=where, reason="no_question", detail="no human turn")
    paths = row.get("image") or []
    paths = [paths] if isinstance(paths, str) else paths
    refs = [(reference, ImageStore.from_path(base / reference)) for reference in paths]
    return Imported(
        row=where,
        sample=make_sample(
            SOURCE,
            str(row.get("uuid") or where),
            license_id or LICENSE,
            [ref for _, ref in refs if ref],
            [name for name, ref in refs if ref is None],
            json.dumps([t.utterance for t in turns]),
            conversation=turns,
            track=row.get("chat_type"),
        ),
    )
