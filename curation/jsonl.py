"""Reading JSONL files of rows and of samples: the one place for it (runner, ingest, statistics, release)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from benchcurate.schemas import Sample


def read_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def read_samples(path: Path) -> Iterator[Sample]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield Sample.model_validate_json(line)
