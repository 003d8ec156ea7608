"""The SQLite files nrp keeps beside a collection as caches: scores (``scores.sqlite``),
evaluations (``evaluations.sqlite``), answer positions (``nrp.sqlite``) and duoT5 pairs.

Why one module: the three caches must open their files the same way (WAL, so readers never
block the one writer; a 60 s busy timeout, so parallel workers wait instead of failing) and must
close each connection when done. ``sqlite3.Connection`` used as a context manager commits or
rolls back but leaves the connection open until the garbage collector finds it; ``connect``
here commits, rolls back on an error, and closes.

- ``create(path, schema)``: the folder and the tables (``CREATE TABLE IF NOT EXISTS``); the path
- ``connect(path)``: a context manager yielding a connection in one transaction, closed after
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: seconds a connection waits for another process's write lock before failing
BUSY_TIMEOUT = 60


def create(path: str | Path, schema: str) -> Path:
    """Make ``path``'s folder and run ``schema`` (idempotent statements) in the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with connect(path) as db:
        db.executescript(schema)
    return path


@contextmanager
def connect(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A connection to the cache file in WAL mode: committed when the block ends, rolled back
    when it raises, closed either way."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        with db:
            yield db
    finally:
        db.close()
