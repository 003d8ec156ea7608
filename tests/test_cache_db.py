"""The caches' one way to open their SQLite files: WAL, a commit when the block ends, a rollback
when it raises, and the connection closed either way (sqlite3's own context manager leaves it
open). The score, evaluation and results caches read back what they stored through it."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest

from nrp.cache_db import connect, create
from nrp.evaluators.cache import EvaluationCache
from nrp.positioning.results_cache import PairCache, PositionScope, ResultsCache
from nrp.rankers.cache import ScoreCache

SCHEMA = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v REAL NOT NULL);"


def test_connect_commits_rolls_back_and_closes(tmp_path):
    path = create(tmp_path / "sub" / "c.sqlite", SCHEMA)
    assert path == tmp_path / "sub" / "c.sqlite" and path.is_file()
    with connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        db.execute("INSERT INTO t VALUES ('a', 1.5)")
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        db.execute("SELECT 1")
    with pytest.raises(ZeroDivisionError), connect(path) as db:
        db.execute("INSERT INTO t VALUES ('b', 2.5)")
        raise ZeroDivisionError
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        db.execute("SELECT 1")
    with connect(path) as db:
        assert db.execute("SELECT k, v FROM t").fetchall() == [("a", 1.5)]  # 'b' rolled back


def test_the_three_caches_read_back_what_they_stored(tmp_path):
    scores = ScoreCache(tmp_path / "scores.sqlite")
    scores.store("s", "bm25", [("q1", "d1", 2.5), ("q1", "d2", -1.0)])
    found = scores.lookup("s", ["q1", "q1", "q2"], ["d2", "d1", "d1"]).tolist()
    assert found[:2] == [-1.0, 2.5] and pd.isna(found[2]) and scores.count() == 2

    evaluations = EvaluationCache(tmp_path / "evaluations.sqlite")
    evaluations.store("e", "bleu", ["k1"], pd.DataFrame({"bleu": [0.25], "x": [float("nan")]}))
    assert evaluations.lookup("e", ["k1", "k2"]) == {"k1": {"bleu": 0.25, "x": None}}

    results = ResultsCache(tmp_path / "nrp.sqlite")
    scope = PositionScope("c" * 20, "r", "fast:pointwise")
    row = {"answer_id": "a1", "qid": "q1", "score": 1.25, "above": 3, "ties": 1, "strict": 4,
           "n_docs": 15}  # fmt: skip
    results.store(scope, pd.DataFrame([row]), ["sha1"])
    wanted = pd.DataFrame({"qid": ["q1"], "answer_id": ["a1"], "text_sha": ["sha1"]})
    assert results.lookup(scope, wanted).to_dict("records") == [row]

    pairs = PairCache(tmp_path / "scores.sqlite")  # beside the scores, as duoT5 keeps them
    pairs.store("p", [("q1", "d1", "d2", -0.5)])
    assert pairs.lookup("p", ["q1"]) == {("q1", "d1", "d2"): -0.5} and scores.count() == 2
