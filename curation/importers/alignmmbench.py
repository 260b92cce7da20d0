"""AlignMMBench's metadata JSONL: question_id, image_path, history [{user, assistant}], prompt, ref_answer, task,
category (in Chinese).

The history becomes `history`, the prompt the one user turn with `ref_answer` as its reference and `task` as its
task category; `category` and `task` become the task labels; language "zh". The release hides its images, so
most rows import without one (recorded per sample). A rewrite's row (`<id>-k`, k >= 1) is a sample of its own
whose provenance names its seed question (`derived_from` `<id>-0`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from benchcurate.curation.importers.common import ImageStore, Imported, make_sample, read_jsonl
from benchcurate.schemas import Categories, Turn

SOURCE = "AlignMMBench"
LICENSE = "CC-BY-NC-SA-4.0"
REWRITE_ID = re.compile(r"(.+)-([1-9]\d*)")  # `<id>-k`, k >= 1: the k-th rewrite of `<id>-0`


def read(
    path: Path, store: ImageStore, license_id: str | None = None, images: Path | None = None
) -> Iterator[Imported]:
    return read_jsonl(path, images, lambda where, row, base: to_sample(where, row, base, license_id))


def to_sample(where: str, row: dict, base: Path, license_id: str | None) -> Imported:
    history = []
    for exchange in row.get("history") or []:
        history += [
            Turn(speaker="user", utterance=str(exchange["user"])),
            Turn(speaker="assistant", utterance=str(exchange["assistant"])),
        ]
    prompt = str(row["prompt"])  # as written: normalising is for comparing and deduplicating, not for storing
    if not prompt.strip():
        raise ValueError("empty prompt")
    turn = Turn(speaker="user", utterance=prompt, reference=row.get("ref_answer"), task_category=row.get("task"))
    image = row.get("image_path")
    found = ImageStore.from_path(base / image) if image else None
    question_id = str(row.get("question_id") or where)
    sample = make_sample(
        SOURCE,
        question_id,
        license_id or LICENSE,
        [found] if found else [],
        [] if found else [str(image or "(no image_path)")],
        json.dumps([prompt, row.get("history")]),
        history=history,
        conversation=[turn],
        language="zh",
        categories=Categories(task_main=row.get("category"), task_sub=row.get("task")),
    )
    rewrite = REWRITE_ID.fullmatch(question_id)
    if rewrite:
        sample.provenance.derived_from = f"{rewrite.group(1)}-0"
    return Imported(row=where, sample=sample)
