"""The saved reviews of a project: one SQLite file, every save durable before it is answered.

Why these settings: a reviewer's work must survive a closed tab and a server killed with
``kill -9``. Each save is one transaction (``BEGIN IMMEDIATE`` ... ``COMMIT``) in WAL mode with
``synchronous=FULL``, so the commit is on disk when ``save`` returns, and the HTTP answer is sent
only after that: an acknowledged save is never lost.

- **Idempotent**: the client names each save with a ``save_id``; a save whose id is already
  stored with the same item, value and base version changes nothing and returns what the first
  one returned (a retried request after a lost answer does not make a second version). The same
  id with another item, value or base version is ``SaveIdReused``: never acknowledged as saved
  while the store keeps the first. (Saves stored before the request was kept are compared by
  item only.)
- **Optimistic locking**: each (item, reviewer) has a version, 0 before the first save. A save
  names the version it was based on; when another save came first (a second tab, a second
  device) it is refused with ``StaleVersion`` carrying the current value and version, and the
  client decides.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS reviews (
    item_id TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    value TEXT NOT NULL,
    version INTEGER NOT NULL,
    saved_at REAL NOT NULL,
    PRIMARY KEY (item_id, reviewer)
);
CREATE TABLE IF NOT EXISTS saves (
    save_id TEXT PRIMARY KEY,
    item_id TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    version INTEGER NOT NULL,
    request TEXT
);
"""
#: the column stores made before save ids were checked against their request lack
ADD_REQUEST = "ALTER TABLE saves ADD COLUMN request TEXT"


@dataclass(frozen=True)
class Review:
    item_id: str
    reviewer: str
    value: dict[str, Any]
    version: int


class StaleVersion(Exception):
    """A save based on an old version; ``current`` is the stored review (None: none yet)."""

    def __init__(self, current: Review | None):
        super().__init__("the item was saved since this version was read")
        self.current = current


class SaveIdReused(Exception):
    """A save id already stored for another item, value or base version."""

    def __init__(self) -> None:
        super().__init__("this save id was sent before with another item or value; use a new id")


class ReviewStore:
    """Reviews of one project in the SQLite file at ``path`` (created when absent)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connection() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(saves)")}
            if "request" not in columns:
                db.execute(ADD_REQUEST)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        # one connection per call: requests run on several threads
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA synchronous=FULL")
            yield db
        finally:
            db.close()

    def save(
        self, item_id: str, reviewer: str, value: dict[str, Any], base_version: int, save_id: str
    ) -> Review:
        """Store ``value`` as version ``base_version + 1``; committed to disk on return."""
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        request = json.dumps([item_id, reviewer, base_version, value], sort_keys=True)
        with self._connection() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                done = db.execute(
                    "SELECT item_id, reviewer, version, request FROM saves WHERE save_id = ?",
                    (save_id,),
                ).fetchone()
                if done is not None:  # a retry gets the first answer; another save, a refusal
                    db.execute("ROLLBACK")
                    if (done[0], done[1]) != (item_id, reviewer) or done[3] not in (None, request):
                        raise SaveIdReused()
                    return Review(done[0], done[1], value, done[2])
                current = self._get(db, item_id, reviewer)
                if (current.version if current else 0) != base_version:
                    db.execute("ROLLBACK")
                    raise StaleVersion(current)
                version = base_version + 1
                db.execute(
                    "INSERT INTO reviews (item_id, reviewer, value, version, saved_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (item_id, reviewer) DO UPDATE SET "
                    "value = excluded.value, version = excluded.version, "
                    "saved_at = excluded.saved_at",
                    (item_id, reviewer, text, version, time.time()),
                )
                db.execute(
                    "INSERT INTO saves (save_id, item_id, reviewer, version, request) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (save_id, item_id, reviewer, version, request),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return Review(item_id, reviewer, value, version)

    @staticmethod
    def _get(db: sqlite3.Connection, item_id: str, reviewer: str) -> Review | None:
        row = db.execute(
            "SELECT value, version FROM reviews WHERE item_id = ? AND reviewer = ?",
            (item_id, reviewer),
        ).fetchone()
        return None if row is None else Review(item_id, reviewer, json.loads(row[0]), row[1])

    def get(self, item_id: str, reviewer: str) -> Review | None:
        with self._connection() as db:
            return self._get(db, item_id, reviewer)

    def reviews(self, reviewer: str | None = None) -> list[Review]:
        """Every stored review (of one reviewer), by item then reviewer."""
        sql = "SELECT item_id, reviewer, value, version FROM reviews"
        params: tuple = ()
        if reviewer is not None:
            sql += " WHERE reviewer = ?"
            params = (reviewer,)
        with self._connection() as db:
            rows = db.execute(sql + " ORDER BY item_id, reviewer", params).fetchall()
        return [Review(r[0], r[1], json.loads(r[2]), r[3]) for r in rows]

    def save_ids(self) -> set[str]:
        with self._connection() as db:
            return {row[0] for row in db.execute("SELECT save_id FROM saves")}
