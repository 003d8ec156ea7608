"""Per-item evaluation cache: an evaluator's output for an item is computed once.

Key: (evaluator fingerprint, item key), the item key a SHA-256 of what evaluators read (question,
answer text, references, contexts), so an edited answer or a changed reference is evaluated
again, and the same answer under another id is not. Value: the evaluator's output row as JSON
(NaN stored as null). One SQLite file in WAL mode, one transaction per batch: a killed run loses
at most the batch in flight. A collection's cache is ``indexes/NAME/evaluations.sqlite``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.cache_db import connect, create

EVALUATION_CACHE_FILE = "evaluations.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS evaluations (
    scope TEXT NOT NULL, item TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (scope, item)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS evaluators (scope TEXT PRIMARY KEY, spec TEXT NOT NULL);
"""


def item_key(row: Mapping[str, Any]) -> str:
    """SHA-256 (32 hex) of an item's question, text, references and contexts."""
    payload = json.dumps(
        [
            str(row["question"]),
            str(row["text"]),
            list(row["references"]),
            list(row["contexts"]),
        ],
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


class EvaluationCache:
    def __init__(self, path: str | Path):
        self.path = create(path, SCHEMA)

    def lookup(self, scope: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Stored rows for the keys found."""
        found: dict[str, dict[str, Any]] = {}
        wanted = list(dict.fromkeys(keys))
        with connect(self.path) as db:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for item, value in db.execute(
                    f"SELECT item, value FROM evaluations WHERE scope = ? AND item IN ({marks})",
                    (scope, *chunk),
                ):
                    found[item] = json.loads(value)
        return found

    def store(self, scope: str, spec: str, keys: Sequence[str], rows: pd.DataFrame) -> None:
        records = rows.to_dict("records")
        with connect(self.path) as db:
            db.execute("INSERT OR IGNORE INTO evaluators VALUES (?, ?)", (scope, spec))
            db.executemany(
                "INSERT OR REPLACE INTO evaluations VALUES (?, ?, ?)",
                [
                    (
                        scope,
                        key,
                        json.dumps(
                            {k: _jsonable(v) for k, v in record.items()}, ensure_ascii=False
                        ),
                    )
                    for key, record in zip(keys, records, strict=True)
                ],
            )

    def count(self, scope: str | None = None) -> int:
        with connect(self.path) as db:
            if scope is None:
                return db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
            return db.execute(
                "SELECT COUNT(*) FROM evaluations WHERE scope = ?", (scope,)
            ).fetchone()[0]
