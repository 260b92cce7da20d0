"""A release folder's files as every reader sees them, before any verification: the checksum list, which split a
data shard holds, and the rows (the one place that knows how a release lays out its data)."""

from __future__ import annotations

from pathlib import Path

CHECKSUM_FILE = "SHA256SUMS"


def split_of(path: Path) -> str:
    """`test-00000-of-00002.parquet` -> `test`."""
    return path.name.split("-", 1)[0]


def release_rows(folder: Path, columns: list[str] | None = None) -> list[dict]:
    """The release's rows (every split, shards in order), each with its `split`: `columns`, or all but the image."""
    import pyarrow.parquet as pq

    rows = []
    for path in sorted((folder / "data").glob("*.parquet")):
        names = columns or [name for name in pq.read_schema(path).names if name != "image"]
        table = pq.read_table(path, columns=names)
        rows += [{**row, "split": split_of(path)} for row in table.to_pylist()]
    return rows
