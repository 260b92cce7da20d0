"""MultiVerse's Hugging Face layout: index, image, character, scenario, goal, conversation of {speaker, utterance,
checklist[{question, main_criteria, sub_criteria}]}, and main/sub goal, task and image categories.

Input: the dataset folder (parquet or `save_to_disk` files, images embedded), or a JSONL file with the same
fields whose `image` is a path relative to the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from benchcurate.curation.images.sources import dataset_tables
from benchcurate.curation.importers.common import (
    ImageStore,
    Imported,
    jsonl_rows,
    make_sample,
    malformed,
    parsed,
    speaker,
)
from benchcurate.schemas import Categories, ChecklistItem, Persona, Turn

SOURCE = "MultiVerse"
LICENSE = "CC-BY-NC-4.0"  # the dataset card's


def _rows(path: Path) -> Iterator[tuple[str, dict]]:
    if path.is_file():
        yield from jsonl_rows(path)
        return
    for file_name, table in dataset_tables(path):
        for number, row in enumerate(table.to_pylist()):
            yield f"{file_name}#{number}", row


def _image(row: dict, base: Path, store: ImageStore) -> tuple[list, list[str]]:
    image = row.get("image")
    if isinstance(image, dict) and image.get("bytes"):
        return [store.from_bytes(image["bytes"], Path(image.get("path") or "x.img").suffix or ".img")], []
    reference = image.get("path") if isinstance(image, dict) else image
    if not reference:
        return [], ["(no image)"]
    found = ImageStore.from_path(base / reference)
    return ([found], []) if found else ([], [str(reference)])


def _turns(conversation: list[dict]) -> list[Turn]:
    turns = []
    for position, entry in enumerate(conversation):
        role = speaker(entry.get("speaker"))
        if role is None:
            raise ValueError(f"utterance {position} has speaker {entry.get('speaker')!r}")
        checklist = [
            ChecklistItem(question=c["question"], main_criteria=c["main_criteria"], sub_criteria=c["sub_criteria"])
            for c in entry.get("checklist") or []
        ]
        turns.append(Turn(speaker=role, utterance=entry["utterance"], checklist=checklist))
    return turns


def read(
    path: Path, store: ImageStore, license_id: str | None = None, images: Path | None = None
) -> Iterator[Imported]:
    base = images or (path.parent if path.is_file() else path)
    for where, line in _rows(path):
        try:
            row = parsed(line)
            images, missing = _image(row, base, store)
            turns = _turns(row.get("conversation") or [])
            if not turns:
                yield Imported(row=where, reason="no_conversation", detail="the conversation is empty")
                continue
            persona = (
                Persona(character=row["character"], scenario=row["scenario"], goal=row["goal"])
                if row.get("character")
                else None
            )
            categories = Categories(
                goal_main=row.get("main_goal_category"),
                goal_sub=row.get("sub_goal_category"),
                task_main=row.get("main_task_category"),
                task_sub=row.get("sub_task_category"),
                image_main=row.get("image_main_category"),
                image_sub=row.get("image_sub_category"),
            )
            yield Imported(
                row=where,
                sample=make_sample(
                    SOURCE,
                    str(row.get("index", where)),
                    license_id or LICENSE,
                    images,
                    missing,
                    json.dumps([t.utterance for t in turns]),
                    persona=persona,
                    conversation=turns,
                    categories=categories,
                ),
            )
        except (KeyError, TypeError, ValueError, ValidationError) as error:
            yield malformed(where, error)
