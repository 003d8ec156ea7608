"""Score cache: a document's score is computed once per (collection, ranker fingerprint, qid,
docno).

Kept in ``indexes/NAME/scores.sqlite`` beside the collection store. The key includes the
collection's fingerprint, so rebuilding a collection from changed inputs never serves stale
scores. ``CachedRanker`` is a PyTerrier transformer wrapping any ranker: it looks rows up, sends
only the missing ones to the ranker (whole queries for rankers whose scores depend on the
candidate set), and stores what it computed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyterrier as pt

from nrp.cache_db import connect, create
from nrp.rankers.base import REQUIRED_COLUMNS, Ranker, ranked_rows, sort_ranked

#: the score cache's file name, beside the collection's store in indexes/NAME/
SCORE_CACHE_FILE = "scores.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
    scope TEXT NOT NULL, qid TEXT NOT NULL, docno TEXT NOT NULL, score REAL NOT NULL,
    PRIMARY KEY (scope, qid, docno)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rankers (scope TEXT PRIMARY KEY, spec TEXT NOT NULL);
"""


class ScoreCache:
    def __init__(self, path: str | Path):
        self.path = create(path, SCHEMA)

    def lookup(self, scope: str, qids: list[str], docnos: list[str]) -> np.ndarray:
        """Scores for the given rows in order; NaN where not cached."""
        wanted = set(qids)
        found: dict[tuple[str, str], float] = {}
        with connect(self.path) as db:
            for qid in wanted:
                for docno, score in db.execute(
                    "SELECT docno, score FROM scores WHERE scope = ? AND qid = ?", (scope, qid)
                ):
                    found[(qid, docno)] = score
        return np.array([found.get((q, d), np.nan) for q, d in zip(qids, docnos, strict=True)])

    def store(self, scope: str, spec: str, rows: list[tuple[str, str, float]]) -> None:
        with connect(self.path) as db:
            db.execute("INSERT OR IGNORE INTO rankers VALUES (?, ?)", (scope, spec))
            db.executemany(
                "INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?)",
                [(scope, q, d, float(s)) for q, d, s in rows],
            )

    def count(self, scope: str | None = None) -> int:
        with connect(self.path) as db:
            if scope is None:
                return db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
            return db.execute("SELECT COUNT(*) FROM scores WHERE scope = ?", (scope,)).fetchone()[0]


class CachedRanker(pt.Transformer):
    """Serves cached scores and computes only what is missing; ``computed`` counts the rows the
    wrapped ranker scored in this object's lifetime (0 on a second run)."""

    def __init__(self, ranker: Ranker, cache: ScoreCache, collection_fingerprint: str):
        self.ranker = ranker
        self.cache = cache
        self.scope = f"{collection_fingerprint[:20]}/{ranker.fingerprint()}"
        self.computed = 0

    def __str__(self) -> str:
        return str(self.ranker)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        """The wrapped ranker's ranking of ``inp``, sorted as its ``transform`` sorts it."""
        return sort_ranked(self.ranked_in_order(inp))

    def ranked_in_order(self, inp: pd.DataFrame) -> pd.DataFrame:
        """``inp`` with ``score`` and ``rank``, rows in the order given
        (``Ranker.ranked_in_order``)."""
        frame = self.ranker.formulate(inp.reset_index(drop=True))  # its query field
        if frame.empty:
            return self.ranker.ranked_in_order(frame)
        qids = frame["qid"].astype(str).tolist()
        docnos = frame["docno"].astype(str).tolist()
        scores = self.cache.lookup(self.scope, qids, docnos)
        missing = np.isnan(scores)
        if self.ranker.depends_on_candidate_set and missing.any():
            # a score depends on the whole D_q: recompute every query with a missing row
            redo = set(frame.loc[missing, "qid"].astype(str))
            missing = frame["qid"].astype(str).isin(redo).to_numpy()
        if missing.any():
            todo = frame.loc[missing, list(REQUIRED_COLUMNS)].reset_index(drop=True)
            fresh = np.asarray(self.ranker.score_frame(todo), dtype=float)
            scores[missing] = fresh
            self.computed += int(missing.sum())
            self.cache.store(
                self.scope,
                self.ranker.spec(),
                list(zip(todo["qid"].astype(str), todo["docno"].astype(str), fresh, strict=True)),
            )
        return ranked_rows(frame, scores)
