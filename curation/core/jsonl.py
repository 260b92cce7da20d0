"""Reading JSONL files of rows and of samples: the one place for it (runner, ingest, statistics, release, the
commands that take a JSONL). A line that is not UTF-8, not JSON or not a sample is a UserError naming the file and
the line, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from benchcurate.curation.core.errors import UserError
from benchcurate.schemas import Sample


def jsonl_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each non-empty line."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


def text(path: Path | str, number: int, line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(
            f"{path} line {number} is not valid UTF-8 (byte {error.start + 1} of the line); save the file as UTF-8"
        ) from None


def numbered_rows(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, JSON object) for each non-empty line."""
    return _objects(jsonl_lines(path), path)


def text_rows(content: str, where: str) -> Iterator[dict]:
    """The JSON objects of JSONL held in memory (a shipped index, a batch's output file); `where` names it."""
    lines = ((number, line) for number, line in enumerate(content.encode("utf-8").splitlines(), 1) if line.strip())
    return (row for _, row in _objects(lines, where))


def _objects(lines: Iterable[tuple[int, bytes]], path: Path | str) -> Iterator[tuple[int, dict]]:
    for number, line in lines:
        try:
            row = json.loads(text(path, number, line))
        except json.JSONDecodeError as error:
            raise UserError(f"{path} line {number} is not JSON ({error.msg} at column {error.colno})") from None
        except RecursionError:
            raise UserError(f"{path} line {number} nests too deeply to read") from None
        if not isinstance(row, dict):
            raise UserError(f"{path} line {number} is not a JSON object")
        yield number, row


def read_jsonl(path: Path) -> Iterator[dict]:
    """JSON objects, one per non-empty line."""
    return (row for _, row in numbered_rows(path))


def read_samples(path: Path) -> Iterator[Sample]:
    for number, line in jsonl_lines(path):
        try:
            yield Sample.model_validate_json(line)
        except ValidationError as error:
            text(path, number, line)  # invalid UTF-8 says so first
            first = error.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"])
            raise UserError(
                f"{path} line {number} is not a sample ({error.error_count()} errors; first: "
                f"{where + ': ' if where else ''}{first['msg']})"
            ) from None
