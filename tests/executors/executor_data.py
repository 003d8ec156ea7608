"""Inputs shared by the executor tests: MEDIQA 2019 ingested into a temporary indexes folder,
answers built from its documents (``mediqa_answers`` of tests/positioning/test_injection.py), fresh
copies with empty caches, and the counts of the caches beside a collection."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from nrp import Collection, ingest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(TESTS / "positioning"))

from test_injection import fresh_copy, mediqa_answers  # noqa: E402

__all__ = ["cache_rows", "fresh_copy", "ingest_mediqa", "interrupted_bm25_run", "mediqa_answers"]


def ingest_mediqa(folder: Path) -> Collection:
    if not (SHARED_DATA / "mediqa-2019").exists():
        pytest.skip(f"shared data not available: {SHARED_DATA / 'mediqa-2019'}")
    ingest(ROOT / "manifests" / "mediqa-2019.yaml", indexes_dir=folder)
    return Collection.load("mediqa-2019", folder)


def cache_rows(path: Path, table: str) -> int:
    """Rows of one cache table (0 when the file or table does not exist)."""
    if not path.is_file():
        return 0
    with sqlite3.connect(path) as db:
        found = db.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()[0]
        return db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] if found else 0


def interrupted_bm25_run(collection: Collection, answers, executor, stored: int) -> None:
    """``score_answers`` with bm25 in partitions of 16 answers on ``executor``, stopped (a
    KeyboardInterrupt from its progress callback) once ``stored`` partitions were stored."""
    from nrp.positioning.scoring import score_answers

    lines = []

    def interrupt(line: str) -> None:
        if "positioned" in line:
            lines.append(line)
            if len(lines) == stored:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        score_answers(
            collection, answers, "bm25", executor=executor, chunk_size=16, progress=interrupt
        )
