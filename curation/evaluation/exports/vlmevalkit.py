"""A release as the TSV VLMEvalKit loads as a custom dataset (`<LMUData>/<name>.tsv`, then `--data <name>`).

VLMEvalKit's custom VQA dataset is single-turn: one row per question, so a multi-turn sample becomes one row per
user turn whose `question` carries the earlier turns with their reference answers (the gold history, as
MultiVerse's Oracle setting), and AlignMMBench's rewrites are rows of their own. Columns: `index` (integer, unique),
`image` (base64 of the image file on the first row that shows it; later rows name that row's index, which
VLMEvalKit resolves, so an image is stored once), `image_path` (one file name per distinct image: VLMEvalKit
decodes each image once into `<LMUData>/images/<dataset>/` instead of a file per row), `question`, `answer` (the
reference answer: MultiVerse's assistant turn, ConvBench's reference, ProBench's baseline answer, AlignMMBench's
reference), `category`, and `sample_id`, `turn`, `variant`, `raw_question`, `history` (JSON) and the recipe's
judge fields (`checklist`, `focus_points`, `caption`, `language`, `track`, `task`).

VLMEvalKit cannot score a custom dataset (its `evaluate` raises NotImplementedError): its prediction file keeps
our columns, and `curate eval RELEASE --predictions <model>_<dataset>.xlsx` scores it with the paper's protocol.
A cell a spreadsheet would take for a formula gets a leading single quote (`curation/spreadsheet.py`).
"""

from __future__ import annotations

import base64
import csv
import json
import re
from pathlib import Path

from benchcurate.curation.core.files import replacing
from benchcurate.curation.core.spreadsheet import inert
from benchcurate.curation.evaluation.judging import flattened_question, turn_items
from benchcurate.curation.release.reading import open_release, rows, verified

COLUMNS = [
    "index",
    "image",
    "image_path",
    "question",
    "answer",
    "category",
    "sample_id",
    "turn",
    "variant",
    "raw_question",
    "history",
    "checklist",
    "focus_points",
    "caption",
    "language",
    "track",
    "task",
]
JUDGE_FIELDS = COLUMNS[11:]


def dataset_name(name: str, version: str) -> str:
    """The name VLMEvalKit knows the dataset by (`--data`): letters, digits and underscores."""
    return re.sub(r"[^A-Za-z0-9]+", "_", f"{name}_v{version}")


def export_vlmevalkit(release_folder: Path, to: Path, split: str = "test") -> Path:
    release = verified(open_release(release_folder))
    to.mkdir(parents=True, exist_ok=True)
    path = to / f"{dataset_name(release.name, release.version)}.tsv"
    first_row_of: dict[str, int] = {}
    index = 0
    with replacing(path) as partial, open(partial, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        for row in rows(release, split):
            digest = row["image_sha256"]
            suffix = Path(row["image"].get("path") or "").suffix.lower() or ".png"
            for item in turn_items(row, release.recipe):
                shown = first_row_of.setdefault(digest, index)
                image = base64.b64encode(row["image"]["bytes"]).decode() if shown == index else str(shown)
                cells = {
                    "index": index,
                    "image": image,
                    "image_path": f"{digest[:16]}{suffix}",
                    "question": flattened_question(item.history, item.question),
                    "answer": item.reference or "",
                    "category": item.category or "",
                    "sample_id": item.sample_id,
                    "turn": item.turn,
                    "variant": item.variant,
                    "raw_question": item.question,
                    "history": json.dumps([{"role": r, "text": t} for r, t in item.history], ensure_ascii=False),
                    **{name: _cell(item.extra.get(name)) for name in JUDGE_FIELDS},
                }
                writer.writerow(
                    {
                        name: inert(value) if isinstance(value, str) and name != "image" else value
                        for name, value in cells.items()
                    }
                )  # base64 is never a formula, and must stay exact
                index += 1
    return path


def _cell(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
