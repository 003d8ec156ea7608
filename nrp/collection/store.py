"""The embedded store of one ingested collection: one SQLite file,
``indexes/NAME/collection.sqlite``.

Why SQLite rather than Parquet: a collection is read by topic (D_q of one qid, its judgments in
one dimension), which an indexed table answers without loading the corpus; one file can be
replaced atomically (``os.replace``), which is how an interrupted ingest leaves the previous
collection intact; it is in the standard library; and the later score cache and the service's job
store want transactional writes from several processes, which Parquet files do not give.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

STORE_FILE = "collection.sqlite"
#: the store's layout; a store of another version is rebuilt by the next ``nrp ingest`` (2 added
#: ``topic_fields``; a version-1 store is still read, as a collection whose topics have no fields
#: beyond query and narrative)
SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE topics (qid TEXT PRIMARY KEY, query TEXT NOT NULL, narrative TEXT);
-- every other text of a topic (a paraphrase, a summary, a short form), by field name
CREATE TABLE topic_fields (
    qid TEXT NOT NULL, field TEXT NOT NULL, text TEXT NOT NULL, PRIMARY KEY (qid, field)
);
CREATE TABLE documents (docno TEXT PRIMARY KEY, text TEXT NOT NULL, url TEXT, title TEXT);
CREATE TABLE dimensions (name TEXT PRIMARY KEY, position INTEGER NOT NULL, scale TEXT NOT NULL);
-- one row per (dimension, qid, docno) after repeated judgments are resolved;
-- grade is NULL for labels the scale excludes ("could not judge"); raw_label is as written.
CREATE TABLE judgments (
    dimension TEXT NOT NULL, qid TEXT NOT NULL, docno TEXT NOT NULL,
    raw_label TEXT NOT NULL, raw_value REAL, grade INTEGER, lines INTEGER NOT NULL,
    PRIMARY KEY (dimension, qid, docno)
);
CREATE INDEX judgments_by_qid ON judgments (qid, docno);
CREATE TABLE reference_answers (qid TEXT NOT NULL, ref_id TEXT, text TEXT NOT NULL);
CREATE INDEX references_by_qid ON reference_answers (qid);
"""


def store_path(collection_dir: Path) -> Path:
    return Path(collection_dir) / STORE_FILE


def write_store(
    target: Path,
    meta: Mapping[str, Any],
    topics: Iterable[tuple],
    topic_fields: Iterable[tuple],
    documents: Iterable[tuple],
    dimensions: Iterable[tuple],
    judgments: Iterable[tuple],
    references: Iterable[tuple],
) -> None:
    """Write the whole store beside ``target`` and move it into place in one rename, so that a
    reader sees either the previous complete collection or the new complete one, never a part."""
    target.parent.mkdir(parents=True, exist_ok=True)
    building = target.with_name(f".{target.name}.building-{os.getpid()}")
    building.unlink(missing_ok=True)
    try:
        with sqlite3.connect(building) as db:
            db.executescript(SCHEMA)
            db.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in {**meta, "schema_version": SCHEMA_VERSION}.items()],
            )
            db.executemany("INSERT INTO topics VALUES (?, ?, ?)", topics)
            db.executemany("INSERT INTO topic_fields VALUES (?, ?, ?)", topic_fields)
            db.executemany("INSERT INTO documents VALUES (?, ?, ?, ?)", documents)
            db.executemany("INSERT INTO dimensions VALUES (?, ?, ?)", dimensions)
            db.executemany("INSERT INTO judgments VALUES (?, ?, ?, ?, ?, ?, ?)", judgments)
            db.executemany("INSERT INTO reference_answers VALUES (?, ?, ?)", references)
        db.close()
        os.replace(building, target)
    finally:
        building.unlink(missing_ok=True)


def read_meta(path: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT key, value FROM meta").fetchall()
    return {key: json.loads(value) for key, value in rows}


#: a store being built (``write_store``) and SQLite's files beside it: the PID of its ingest
BUILDING = re.compile(rf"\.{re.escape(STORE_FILE)}\.building-([0-9]+)(?:-journal|-wal|-shm)?")


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError) as err:
        return isinstance(err, PermissionError)
    return True


def remove_stale_builds(collection_dir: Path) -> None:
    """Leftovers of ingests that were killed before their rename (a ``kill -9``): the store
    being built and its journal, whose ingest's PID no longer runs; never read, safe to delete.
    A build whose PID still runs is another ingest's, still writing: left alone."""
    if collection_dir.is_dir():
        for leftover in collection_dir.iterdir():
            found = BUILDING.fullmatch(leftover.name)
            if found is not None and not pid_alive(int(found[1])):
                leftover.unlink(missing_ok=True)
