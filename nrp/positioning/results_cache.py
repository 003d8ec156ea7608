"""Persistent state of the NRP step: answer positions (resumable runs) and duoT5 pair scores.

``ResultsCache`` (``indexes/NAME/nrp.sqlite``, beside the collection store) keeps, per answer and
ranker, what positioning the answer found: its score, how many documents were above it, how
many tied, the strict rank and |D_q|. The key is (collection fingerprint, ranker fingerprint,
injection mode, qid, answer_id, SHA-256 of the answer text), so an interrupted run continues
where it stopped, re-running unchanged inputs computes nothing, and an edited answer text (same
id) is scored again. The tie rule is *not* in the key: the stored counts give r under every rule
(``nrp.ranks``), so switching ``--ties`` recomputes nothing.

``PairCache`` keeps duoT5's document-document pair scores log P(a more relevant than b) in the
score cache's SQLite file (``indexes/NAME/scores.sqlite``, table ``pair_scores``) keyed by
(collection fingerprint, ``DuoT5Ranker.pair_fingerprint()``, qid, docno_a, docno_b): a pair's score
depends on the duoT5 checkpoint, the query and the two texts only (not on k, the aggregate or the
first stage), so every answer of a query, and every later run, reuses them. Pairs that involve
an answer are not stored there: answer ids are not documents, and the answer's result row is
what the results cache keeps.

Both are plain SQLite in WAL mode (``nrp.cache_db``), written in one transaction per batch, so
a killed run loses at most the batch in flight and never leaves a half-written row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from nrp.cache_db import connect, create

RESULTS_FILE = "nrp.sqlite"

RESULTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS answer_positions (
    scope TEXT NOT NULL, qid TEXT NOT NULL, answer_id TEXT NOT NULL, text_sha TEXT NOT NULL,
    score REAL NOT NULL, above INTEGER NOT NULL, ties INTEGER NOT NULL, strict INTEGER NOT NULL,
    n_docs INTEGER NOT NULL,
    PRIMARY KEY (scope, qid, answer_id, text_sha)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS position_scopes (
    scope TEXT PRIMARY KEY, collection TEXT NOT NULL, ranker_spec TEXT NOT NULL,
    ranker_fingerprint TEXT NOT NULL, mode TEXT NOT NULL
);
"""

PAIR_SCHEMA = """
CREATE TABLE IF NOT EXISTS pair_scores (
    scope TEXT NOT NULL, qid TEXT NOT NULL, docno_a TEXT NOT NULL, docno_b TEXT NOT NULL,
    log_p REAL NOT NULL,
    PRIMARY KEY (scope, qid, docno_a, docno_b)
) WITHOUT ROWID;
"""

#: The columns a positioning result has (one row per answer), in order.
POSITION_COLUMNS = ("answer_id", "qid", "score", "above", "ties", "strict", "n_docs")


def text_sha(text: str) -> str:
    """SHA-256 of an answer's text (the key part that notices an edited answer)."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class PositionScope:
    """What one results-cache scope is: the ranker and mode its rows were computed with."""

    collection_fingerprint: str
    ranker_fingerprint: str
    mode: str  # injection mode, e.g. "fast:pointwise" or "full:transform"
    ranker_spec: str = ""
    collection: str = ""
    tolerance: float = 0.0  # the tie rule's (``Ranker.score_tolerance``): it decides the ties

    @property
    def key(self) -> str:
        return (
            f"{self.collection_fingerprint[:20]}/{self.ranker_fingerprint}/{self.mode}"
            f"/tol={self.tolerance:g}"
        )


class ResultsCache:
    """Answer positions per (scope, qid, answer_id, text hash); see the module docstring."""

    def __init__(self, path: str | Path):
        self.path = create(path, RESULTS_SCHEMA)

    def lookup(self, scope: PositionScope, answers: pd.DataFrame) -> pd.DataFrame:
        """Stored positions of ``answers`` (answer_id, qid, text_sha); ``POSITION_COLUMNS`` for
        the answers found, in no particular order."""
        wanted = set(
            zip(
                answers["qid"].astype(str),
                answers["answer_id"].astype(str),
                answers["text_sha"].astype(str),
                strict=True,
            )
        )
        rows = []
        with connect(self.path) as db:
            for qid in sorted({q for q, _, _ in wanted}):
                for answer_id, sha, score, above, ties, strict, n_docs in db.execute(
                    "SELECT answer_id, text_sha, score, above, ties, strict, n_docs "
                    "FROM answer_positions WHERE scope = ? AND qid = ?",
                    (scope.key, qid),
                ):
                    if (qid, answer_id, sha) in wanted:
                        rows.append((answer_id, qid, score, above, ties, strict, n_docs))
        return pd.DataFrame(rows, columns=list(POSITION_COLUMNS))

    def store(self, scope: PositionScope, positions: pd.DataFrame, shas: Sequence[str]) -> None:
        """Store positions (``POSITION_COLUMNS``) with their answers' text hashes, in one
        transaction; an empty answer's (no score: placed, not ranked) is not kept."""
        with connect(self.path) as db:
            db.execute(
                "INSERT OR IGNORE INTO position_scopes VALUES (?, ?, ?, ?, ?)",
                (
                    scope.key,
                    scope.collection,
                    scope.ranker_spec,
                    scope.ranker_fingerprint,
                    scope.mode,
                ),
            )
            db.executemany(
                "INSERT OR REPLACE INTO answer_positions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        scope.key,
                        str(row.qid),
                        str(row.answer_id),
                        sha,
                        float(row.score),
                        int(row.above),
                        int(row.ties),
                        int(row.strict),
                        int(row.n_docs),
                    )
                    for row, sha in zip(positions.itertuples(index=False), shas, strict=True)
                    if row.score == row.score  # NaN: an empty answer
                ],
            )

    def count(self, scope: PositionScope | None = None) -> int:
        with connect(self.path) as db:
            if scope is None:
                return db.execute("SELECT COUNT(*) FROM answer_positions").fetchone()[0]
            return db.execute(
                "SELECT COUNT(*) FROM answer_positions WHERE scope = ?", (scope.key,)
            ).fetchone()[0]


class PairCache:
    """duoT5 document-document pair scores; see the module docstring."""

    def __init__(self, path: str | Path):
        self.path = create(path, PAIR_SCHEMA)

    @staticmethod
    def scope(collection_fingerprint: str, pair_fingerprint: str) -> str:
        return f"{collection_fingerprint[:20]}/{pair_fingerprint}"

    def lookup(self, scope: str, qids: Iterable[str]) -> dict[tuple[str, str, str], float]:
        """Every stored pair of the given queries: (qid, docno_a, docno_b) -> log P."""
        found: dict[tuple[str, str, str], float] = {}
        with connect(self.path) as db:
            for qid in sorted(set(map(str, qids))):
                for a, b, log_p in db.execute(
                    "SELECT docno_a, docno_b, log_p FROM pair_scores WHERE scope = ? AND qid = ?",
                    (scope, qid),
                ):
                    found[(qid, a, b)] = log_p
        return found

    def store(self, scope: str, rows: Iterable[tuple[str, str, str, float]]) -> None:
        """Store (qid, docno_a, docno_b, log_p) rows in one transaction."""
        with connect(self.path) as db:
            db.executemany(
                "INSERT OR REPLACE INTO pair_scores VALUES (?, ?, ?, ?, ?)",
                [(scope, str(q), str(a), str(b), float(p)) for q, a, b, p in rows],
            )

    def count(self, scope: str | None = None) -> int:
        with connect(self.path) as db:
            if scope is None:
                return db.execute("SELECT COUNT(*) FROM pair_scores").fetchone()[0]
            return db.execute(
                "SELECT COUNT(*) FROM pair_scores WHERE scope = ?", (scope,)
            ).fetchone()[0]
