"""The one cache of the pipeline: a sqlite key-value store shared by all runs under an output folder.

Stages reach it through their context (`ctx.cache`) and never invent cache files of their own.
Namespaces in use: `image_fingerprint` (by content sha256), `image_stats` (the offline backend's pixel
statistics, by the code's and the content's hash), `model_reply` (by backend, prompt hash, variables, image hashes
and seed; remote backends only) hold JSON values; `minhash` (by parameters and normalised text,
`curation/text/minhash.py`) holds raw bytes, read and written in bulk.
Blobs: images that arrived embedded in a dataset, as files named by their sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from pydantic import JsonValue

from benchcurate.curation.core.files import replacing

SQL_VARIABLES = 900  # keys per IN (...) query, under sqlite's older limit of 999 variables


class Cache:
    """Thread-safe; safe across processes thanks to WAL mode and short transactions."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # made now: the user's only (model replies)
        self._local = threading.local()
        with self._connection() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS entries (namespace TEXT, key TEXT, value TEXT, "
                "PRIMARY KEY (namespace, key))"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS binary_entries (namespace TEXT, key TEXT, value BLOB NOT NULL, "
                "PRIMARY KEY (namespace, key))"
            )

    def _connection(self) -> sqlite3.Connection:
        # one connection per thread and per process: a connection inherited through fork must not be used
        db, pid = getattr(self._local, "db", None), getattr(self._local, "pid", None)
        if db is None or pid != os.getpid():
            db = sqlite3.connect(self.path, timeout=60)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db, self._local.pid = db, os.getpid()
        return db

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.path = state["path"]
        self._local = threading.local()

    def get(self, namespace: str, key: str) -> JsonValue | None:
        row = (
            self._connection()
            .execute("SELECT value FROM entries WHERE namespace=? AND key=?", (namespace, key))
            .fetchone()
        )
        return None if row is None else json.loads(row[0])

    def put(self, namespace: str, key: str, value: JsonValue) -> None:
        with self._connection() as db:
            db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", (namespace, key, json.dumps(value)))

    def get_bytes_many(self, namespace: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored values of those keys that have one (in bulk: thousands of keys per query)."""
        found: dict[str, bytes] = {}
        db = self._connection()
        for start in range(0, len(keys), SQL_VARIABLES):
            chunk = list(keys[start : start + SQL_VARIABLES])
            found.update(
                db.execute(
                    f"SELECT key, value FROM binary_entries WHERE namespace=? AND key IN "
                    f"({','.join('?' * len(chunk))})",
                    [namespace, *chunk],
                )
            )
        return found

    def put_bytes_many(self, namespace: str, rows: dict[str, bytes]) -> None:
        with self._connection() as db:
            db.executemany(
                "INSERT OR REPLACE INTO binary_entries VALUES (?, ?, ?)",
                ((namespace, key, value) for key, value in rows.items()),
            )

    def blob(self, data: bytes) -> Path:
        """A file holding `data`, stored once by content next to the database (images embedded in datasets)."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.path.parent / "blobs" / digest[:2] / digest
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with replacing(path) as partial:  # two threads storing the same image each write their own partial
                partial.write_bytes(data)
        return path

    def count(self, namespace: str) -> int:
        return self._connection().execute("SELECT COUNT(*) FROM entries WHERE namespace=?", (namespace,)).fetchone()[0]
