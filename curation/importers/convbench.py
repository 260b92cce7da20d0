"""ConvBench's released spreadsheet: one row per conversation with ID, image_id and the three turn instructions.

Sheet `multi_turn_benchmark` (else the first); the turns are perception, reasoning, creation, in that order.
The release has no reference answers; columns the evaluator reads but the release lacks are taken when present:
`instruction-conditioned-caption`, `first/second/third_turn_answer` (references), `third_turn_demands` (focus
points, one per line or numbered) and `First/Second/Third_turn_instruction_category`. Images are VisIT-Bench
files named by image_id, looked up in `--images` (default: `visit_bench_images/` next to the sheet).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from benchcurate.curation.core.errors import UserError
from benchcurate.curation.core.extras import require
from benchcurate.curation.importers.common import ImageStore, Imported, make_sample
from benchcurate.schemas import Turn

SOURCE = "ConvBench"
LICENSE = "CC-BY-4.0"
SHEET = "multi_turn_benchmark"
ORDINALS = ("first", "second", "third")
LEVELS = ("perception", "reasoning", "creation")
NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")


def _cells(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    require("xlsx", "reading ConvBench's spreadsheet")
    from openpyxl import load_workbook

    try:
        book = load_workbook(path, read_only=True, data_only=True)
    except Exception as error:  # openpyxl raises several kinds for a file that is not a workbook
        raise UserError(f"{path} is not a readable .xlsx workbook ({type(error).__name__}: {error})") from error
    sheet = book[SHEET] if SHEET in book.sheetnames else book.worksheets[0]
    rows = sheet.iter_rows(values_only=True)
    header = [str(cell).strip() if cell is not None else "" for cell in next(rows, ())]
    for number, values in enumerate(rows, 2):
        if any(value not in (None, "") for value in values):
            yield number, {name.casefold(): value for name, value in zip(header, values) if name}
    book.close()


def _text(row: dict, name: str) -> str | None:
    """The cell as written (white space included: the stored text is the benchmark's); None when blank."""
    value = row.get(name.casefold())
    return str(value) if value is not None and str(value).strip() else None


def focus_points(text: str | None) -> list[str]:
    """Numbered or bulleted lines as separate points."""
    return [NUMBERED.sub("", line).strip() for line in (text or "").splitlines() if NUMBERED.sub("", line).strip()]


def read(
    path: Path, store: ImageStore, license_id: str | None = None, images: Path | None = None
) -> Iterator[Imported]:
    folder = images or path.parent / "visit_bench_images"
    for number, row in _cells(path):
        where = f"{path.name}:{number}"
        conversation_id, image_id = _text(row, "ID"), _text(row, "image_id")
        instructions = [_text(row, f"The_{ordinal}_turn_instruction") for ordinal in ORDINALS]
        if not conversation_id or not all(instructions):
            yield Imported(
                row=where, reason="malformed_row", detail="needs ID and the first, second and third turn instructions"
            )
            continue
        found = ImageStore.from_path(folder / image_id) if image_id else None
        turns = []
        for ordinal, level, instruction in zip(ORDINALS, LEVELS, instructions, strict=True):
            turns.append(
                Turn(
                    speaker="user",
                    utterance=instruction,
                    level=level,
                    task_category=_text(row, f"{ordinal.capitalize()}_turn_instruction_category"),
                    reference=_text(row, f"{ordinal}_turn_answer"),
                    focus_points=focus_points(_text(row, "third_turn_demands")) if level == "creation" else [],
                )
            )
        yield Imported(
            row=where,
            sample=make_sample(
                SOURCE,
                conversation_id,
                license_id or LICENSE,
                [found] if found else [],
                [] if found else [str(folder / (image_id or "(no image_id)"))],
                "\n".join(instructions),
                conversation=turns,
                caption=_text(row, "instruction-conditioned-caption"),
            ),
        )
