"""The service's persistent state: jobs, their answers, their units of work, their results, and
idempotency keys. SQLite in WAL mode by default; PostgreSQL (psycopg) for a shared deployment.

Tables (the same SQL on both back-ends: ``?`` placeholders become ``%s`` for psycopg, types are
ones both know, upserts are ``ON CONFLICT``):

- ``jobs``: one row per submitted job: collection, parameters (JSON), status (queued, running,
  done, failed, cancelled), the request's hash and its ``Idempotency-Key`` (unique), times, how
  often its units were re-queued, the error, and what finalisation reported (JSON).
- ``job_answers``: every submitted answer, written in the same transaction as the job, so a
  job the server has acknowledged (202) has all of its answers on disk.
- ``job_units``: the unit of work, **one query's answers for one ranker or evaluator** of one
  job. ``batch_key`` says which units may share a model call (same collection, same ranker or
  evaluator, same options); the worker claims units across jobs by batch key. A claimed unit
  carries the worker's name and a lease; a crash leaves it ``running`` and it is re-queued
  (``requeue``): on start for SQLite (one server owns the file), by expired lease for
  PostgreSQL (other servers' workers may hold live leases).
- ``job_results``: result rows of a finished job per table (``nrp``, ``evaluations``) with a
  row number, written in one transaction with the job's ``done`` status: a job is either done
  with all of its rows or not done with none, and the primary key (job, table, row) makes a
  duplicate impossible.

Concurrency: on SQLite every write transaction is ``BEGIN IMMEDIATE`` (writers queue). On
PostgreSQL claims use ``FOR UPDATE SKIP LOCKED`` (two workers never get one unit), every
transaction takes its locks in one order (units before jobs, jobs by id), finalisation locks
the job row, and the schema is created once under an advisory lock: no deadlock between workers,
cancellations and a starting server.

Why units rather than whole jobs: a restart loses at most the units in flight, progress is
countable, work from several jobs fills one model call, and a unit is small enough to be shipped
to another executor later. Re-doing a unit recomputes nothing already stored: positions and
evaluations are kept in the collection's results caches (``nrp.positioning.results_cache``,
``nrp.evaluators.cache``) as soon as a batch is done.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.errors import ConfigError

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
ACTIVE = (QUEUED, RUNNING)
JOB_STATUSES = (QUEUED, RUNNING, DONE, FAILED, CANCELLED)
ANSWER_COLUMNS = ("answer_id", "llm", "prompt", "qid", "sample", "text")

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS jobs (
        id TEXT PRIMARY KEY, collection TEXT NOT NULL, status TEXT NOT NULL,
        params TEXT NOT NULL, request_sha TEXT NOT NULL, idempotency_key TEXT UNIQUE,
        n_answers BIGINT NOT NULL, units_total BIGINT NOT NULL, requeued BIGINT NOT NULL,
        error TEXT, info TEXT, created_at DOUBLE PRECISION NOT NULL,
        started_at DOUBLE PRECISION, finished_at DOUBLE PRECISION,
        updated_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS jobs_by_collection ON jobs (collection, status)",
    """CREATE TABLE IF NOT EXISTS job_answers (
        job_id TEXT NOT NULL, seq BIGINT NOT NULL, answer_id TEXT NOT NULL, llm TEXT NOT NULL,
        prompt TEXT NOT NULL, qid TEXT NOT NULL, sample BIGINT NOT NULL, text TEXT NOT NULL,
        PRIMARY KEY (job_id, seq))""",
    "CREATE INDEX IF NOT EXISTS job_answers_by_qid ON job_answers (job_id, qid)",
    """CREATE TABLE IF NOT EXISTS job_units (
        job_id TEXT NOT NULL, unit_no BIGINT NOT NULL, kind TEXT NOT NULL, spec TEXT NOT NULL,
        batch_key TEXT NOT NULL, qid TEXT NOT NULL, n_answers BIGINT NOT NULL,
        status TEXT NOT NULL, attempts BIGINT NOT NULL, claimed_by TEXT,
        lease_until DOUBLE PRECISION, finished_at DOUBLE PRECISION,
        PRIMARY KEY (job_id, unit_no))""",
    "CREATE INDEX IF NOT EXISTS job_units_queue ON job_units (status, batch_key)",
    """CREATE TABLE IF NOT EXISTS job_results (
        job_id TEXT NOT NULL, tbl TEXT NOT NULL, row_no BIGINT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (job_id, tbl, row_no))""",
)


def _now() -> float:
    return time.time()


def json_value(value: Any) -> Any:
    """A cell as JSON: numpy scalars unwrapped; NaN, NA and None as null."""
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, tuple):
        return [json_value(v) for v in value]
    return value


class Store:
    """Jobs, answers, units and results in SQLite or PostgreSQL (see the module docstring)."""

    def __init__(self, url: str):
        self.url = url
        self._local = threading.local()
        if url.startswith("sqlite:///"):
            self.dialect = "sqlite"
            self.path = Path(url.removeprefix("sqlite:///"))
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif url.startswith(("postgresql://", "postgres://")):
            self.dialect = "postgresql"
            try:
                import psycopg  # noqa: F401
            except ImportError:
                raise ConfigError(
                    "a postgresql:// store needs psycopg (pip install 'psycopg[binary]')"
                ) from None
        else:
            raise ConfigError(f"store URL must be sqlite:///PATH or postgresql://..., not {url!r}")
        self._create_schema()

    def __repr__(self) -> str:
        return f"Store({self.dialect})"

    def _create_schema(self) -> None:
        """Tables and indexes, once. On PostgreSQL DDL takes table locks that would deadlock
        against a running worker (CREATE INDEX waits for its row locks while holding another
        table's lock): the tables are looked up first, and creators are serialised by an
        advisory lock."""
        if self.dialect == "postgresql":
            with self._tx() as db:
                if db.one("SELECT to_regclass('job_results') IS NOT NULL"):
                    return
        with self._tx() as db:
            if self.dialect == "postgresql":
                db.execute("SELECT pg_advisory_xact_lock(7243100)")
            for statement in SCHEMA:
                db.execute(statement)

    # -- connections ---------------------------------------------------------------------------
    def _connection(self) -> Any:
        db = getattr(self._local, "db", None)
        if db is not None and self.dialect == "postgresql" and db.closed:
            db = None
        if db is None:
            if self.dialect == "sqlite":
                db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA busy_timeout=60000")
            else:
                import psycopg

                db = psycopg.connect(self.url, autocommit=True)
            self._local.db = db
        return db

    @contextmanager
    def _tx(self) -> Iterator[_Cursor]:
        """One transaction (SQLite: BEGIN IMMEDIATE, so two writers queue instead of failing
        half-way); rolled back on any error."""
        db = self._connection()
        if self.dialect == "sqlite":
            db.execute("BEGIN IMMEDIATE")
            try:
                yield _Cursor(db, self.dialect)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        else:
            try:
                with db.transaction():
                    yield _Cursor(db, self.dialect)
            except BaseException:
                if db.closed:
                    self._local.db = None
                raise

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    def ping(self) -> bool:
        try:
            with self._tx() as db:
                db.one("SELECT 1")
            return True
        except Exception:  # readiness reports any failure as not ready
            return False

    # -- jobs ----------------------------------------------------------------------------------
    def create_job(
        self,
        job_id: str,
        collection: str,
        params: dict[str, Any],
        request_sha: str,
        idempotency_key: str | None,
        answers: pd.DataFrame,
        units: Sequence[dict[str, Any]],
    ) -> tuple[dict[str, Any], bool]:
        """Store a job with its answers and units in one transaction. With an idempotency key
        that is already stored, nothing is written and the existing job is returned with
        ``False``."""
        if idempotency_key is not None:
            existing = self.job_by_key(idempotency_key)
            if existing is not None:
                return existing, False
        now = _now()
        try:
            with self._tx() as db:
                db.execute(
                    "INSERT INTO jobs (id, collection, status, params, request_sha, "
                    "idempotency_key, n_answers, units_total, requeued, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                    (
                        job_id,
                        collection,
                        QUEUED,
                        json.dumps(params),
                        request_sha,
                        idempotency_key,
                        len(answers),
                        len(units),
                        now,
                        now,
                    ),
                )
                db.executemany(
                    "INSERT INTO job_answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (job_id, seq, str(a), str(m), str(p), str(q), int(s), str(t))
                        for seq, (a, m, p, q, s, t) in enumerate(
                            answers[list(ANSWER_COLUMNS)].itertuples(index=False, name=None)
                        )
                    ],
                )
                db.executemany(
                    "INSERT INTO job_units (job_id, unit_no, kind, spec, batch_key, qid, "
                    "n_answers, status, attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
                    [
                        (
                            job_id,
                            number,
                            u["kind"],
                            u["spec"],
                            u["batch_key"],
                            u["qid"],
                            u["n_answers"],
                            QUEUED,
                        )
                        for number, u in enumerate(units)
                    ],
                )
        except Exception as err:
            # two requests with one key at once: the second insert hits the unique key
            if idempotency_key is not None and _is_integrity_error(err):
                existing = self.job_by_key(idempotency_key)
                if existing is not None:
                    return existing, False
            raise
        job = self.get_job(job_id)
        assert job is not None
        return job, True

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        with self._tx() as db:
            row = db.row("SELECT * FROM jobs WHERE id = ?", (job_id,))
        return _job(row) if row else None

    def job_by_key(self, key: str) -> dict[str, Any] | None:
        with self._tx() as db:
            row = db.row("SELECT * FROM jobs WHERE idempotency_key = ?", (key,))
        return _job(row) if row else None

    def list_jobs(
        self,
        collection: str | None = None,
        status: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        where, args = [], []
        if collection is not None:
            where.append("collection = ?")
            args.append(collection)
        if status is not None:
            where.append("status = ?")
            args.append(status)
        sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY created_at, id LIMIT ? OFFSET ?"
        with self._tx() as db:
            rows = db.rows(sql, (*args, limit, offset))
        return [_job(r) for r in rows]

    def progress(self, job_id: str) -> dict[str, int]:
        """Units and answers (unit answers summed) per unit status of a job."""
        with self._tx() as db:
            rows = db.rows(
                "SELECT status, COUNT(*) AS units, SUM(n_answers) AS answers FROM job_units "
                "WHERE job_id = ? GROUP BY status",
                (job_id,),
            )
        out = {"units_done": 0, "units_total": 0, "answer_units_done": 0, "answer_units": 0}
        for row in rows:
            out["units_total"] += int(row["units"])
            out["answer_units"] += int(row["answers"] or 0)
            if row["status"] == DONE:
                out["units_done"] += int(row["units"])
                out["answer_units_done"] += int(row["answers"] or 0)
        return out

    def cancel_job(self, job_id: str) -> str | None:
        """Cancel a queued or running job; its status afterwards (None: no such job)."""
        now = _now()
        with self._tx() as db:
            row = db.row("SELECT status FROM jobs WHERE id = ?", (job_id,))
            if row is None:
                return None
            if row["status"] not in ACTIVE:
                return str(row["status"])
            # units before jobs, in every transaction: one lock order (no deadlock on PostgreSQL)
            db.execute(
                "UPDATE job_units SET status = ? WHERE job_id = ? AND status IN (?, ?)",
                (CANCELLED, job_id, QUEUED, RUNNING),
            )
            db.execute(
                "UPDATE jobs SET status = ?, finished_at = ?, updated_at = ? WHERE id = ?",
                (CANCELLED, now, now, job_id),
            )
        return CANCELLED

    def fail_job(self, job_id: str, error: str) -> None:
        now = _now()
        with self._tx() as db:
            db.execute(
                "UPDATE job_units SET status = ? WHERE job_id = ? AND status IN (?, ?)",
                (CANCELLED, job_id, QUEUED, RUNNING),
            )
            db.execute(
                "UPDATE jobs SET status = ?, error = ?, finished_at = ?, updated_at = ? "
                "WHERE id = ? AND status IN (?, ?)",
                (FAILED, error, now, now, job_id, QUEUED, RUNNING),
            )

    def status_counts(self) -> dict[str, int]:
        with self._tx() as db:
            rows = db.rows("SELECT status, COUNT(*) AS n FROM jobs GROUP BY status")
        counts = dict.fromkeys(JOB_STATUSES, 0)
        counts.update({r["status"]: int(r["n"]) for r in rows})
        return counts

    def queued_units(self) -> int:
        with self._tx() as db:
            return int(db.one("SELECT COUNT(*) FROM job_units WHERE status = ?", (QUEUED,)))

    # -- units ---------------------------------------------------------------------------------
    def claim_units(self, worker: str, max_answers: int, lease_s: float) -> list[dict[str, Any]]:
        """Queued units of active jobs that may share one model call: the oldest job's first
        queued unit and more units with the same batch key (from any job, oldest first) while
        the answers fit into ``max_answers`` (one unit at least). Marked running, leased."""
        lock = " FOR UPDATE OF u SKIP LOCKED" if self.dialect == "postgresql" else ""
        order = " ORDER BY j.created_at, u.job_id, u.unit_no"
        base = (
            "SELECT u.job_id, u.unit_no, u.kind, u.spec, u.batch_key, u.qid, u.n_answers, "
            "u.attempts FROM job_units u JOIN jobs j ON j.id = u.job_id "
            "WHERE u.status = ? AND j.status IN (?, ?)"
        )
        now = _now()
        with self._tx() as db:
            first = db.row(base + order + " LIMIT 1" + lock, (QUEUED, QUEUED, RUNNING))
            if first is None:
                return []
            rows = db.rows(
                base + " AND u.batch_key = ?" + order + " LIMIT ?" + lock,
                (QUEUED, QUEUED, RUNNING, first["batch_key"], max(1, max_answers)),
            )
            claimed, answers = [], 0
            for row in rows:
                if claimed and answers + int(row["n_answers"]) > max_answers:
                    break
                claimed.append(dict(row))
                answers += int(row["n_answers"])
            db.executemany(
                "UPDATE job_units SET status = ?, claimed_by = ?, lease_until = ?, "
                "attempts = attempts + 1 WHERE job_id = ? AND unit_no = ?",
                [(RUNNING, worker, now + lease_s, u["job_id"], u["unit_no"]) for u in claimed],
            )
            for job_id in sorted({u["job_id"] for u in claimed}):
                db.execute(
                    "UPDATE jobs SET status = ?, started_at = COALESCE(started_at, ?), "
                    "updated_at = ? WHERE id = ? AND status = ?",
                    (RUNNING, now, now, job_id, QUEUED),
                )
        return claimed

    def unit_answers(self, job_id: str, qid: str) -> pd.DataFrame:
        with self._tx() as db:
            rows = db.rows(
                "SELECT answer_id, llm, prompt, qid, sample, text FROM job_answers "
                "WHERE job_id = ? AND qid = ? ORDER BY seq",
                (job_id, qid),
            )
        return _answers_frame(rows)

    def finish_units(self, worker: str, units: Sequence[dict[str, Any]]) -> int:
        """Mark units done (only those this worker still holds: a cancelled job's units stay
        cancelled); the number marked."""
        now = _now()
        marked = 0
        with self._tx() as db:
            for unit in units:
                marked += db.execute(
                    "UPDATE job_units SET status = ?, finished_at = ?, lease_until = NULL "
                    "WHERE job_id = ? AND unit_no = ? AND status = ? AND claimed_by = ?",
                    (DONE, now, unit["job_id"], unit["unit_no"], RUNNING, worker),
                )
            for job_id in sorted({u["job_id"] for u in units}):
                db.execute("UPDATE jobs SET updated_at = ? WHERE id = ?", (now, job_id))
        return marked

    def requeue(self, expired_only: bool, worker: str | None = None) -> int:
        """Running units back to queued (all of them, those whose lease has expired, or those
        one worker holds); the jobs they belong to count one more re-queue. Returns the units
        re-queued."""
        now = _now()
        with self._tx() as db:
            condition = "status = ?" + (" AND lease_until < ?" if expired_only else "")
            args: tuple = (RUNNING, now) if expired_only else (RUNNING,)
            if worker is not None:
                condition += " AND claimed_by = ?"
                args = (*args, worker)
            jobs = sorted(
                r["job_id"]
                for r in db.rows(f"SELECT DISTINCT job_id FROM job_units WHERE {condition}", args)
            )
            count = db.execute(
                f"UPDATE job_units SET status = ?, claimed_by = NULL, lease_until = NULL "
                f"WHERE {condition}",
                (QUEUED, *args),
            )
            for job_id in jobs:
                db.execute(
                    "UPDATE jobs SET requeued = requeued + 1, updated_at = ? WHERE id = ?",
                    (now, job_id),
                )
        return count

    def jobs_to_finalize(self) -> list[str]:
        """Active jobs none of whose units is queued or running (all done, or none at all)."""
        with self._tx() as db:
            rows = db.rows(
                "SELECT j.id FROM jobs j WHERE j.status IN (?, ?) AND NOT EXISTS ("
                "SELECT 1 FROM job_units u WHERE u.job_id = j.id AND u.status <> ?) "
                "ORDER BY j.created_at",
                (QUEUED, RUNNING, DONE),
            )
        return [r["id"] for r in rows]

    def job_answers(self, job_id: str) -> pd.DataFrame:
        with self._tx() as db:
            rows = db.rows(
                "SELECT answer_id, llm, prompt, qid, sample, text FROM job_answers "
                "WHERE job_id = ? ORDER BY seq",
                (job_id,),
            )
        return _answers_frame(rows)

    # -- results -------------------------------------------------------------------------------
    def finish_job(
        self, job_id: str, tables: dict[str, pd.DataFrame], info: dict[str, Any]
    ) -> bool:
        """Store the result tables and mark the job done, in one transaction; False (nothing
        written) when the job is no longer active (cancelled meanwhile)."""
        now = _now()
        schema = {
            name: {"columns": [str(c) for c in frame.columns], "dtypes": _dtypes(frame)}
            for name, frame in tables.items()
        }
        info = {**info, "tables": schema}
        # PostgreSQL: the job row is locked, so a second finaliser (another server's worker)
        # waits, then sees "done" and writes nothing
        lock = " FOR UPDATE" if self.dialect == "postgresql" else ""
        with self._tx() as db:
            row = db.row("SELECT status FROM jobs WHERE id = ?" + lock, (job_id,))
            if row is None or row["status"] not in ACTIVE:
                return False
            db.execute("DELETE FROM job_results WHERE job_id = ?", (job_id,))
            for name, frame in tables.items():
                db.executemany(
                    "INSERT INTO job_results VALUES (?, ?, ?, ?)",
                    [
                        (job_id, name, number, json.dumps([json_value(v) for v in values]))
                        for number, values in enumerate(frame.itertuples(index=False, name=None))
                    ],
                )
            db.execute(
                "UPDATE jobs SET status = ?, info = ?, finished_at = ?, updated_at = ?, "
                "started_at = COALESCE(started_at, ?) WHERE id = ?",
                (DONE, json.dumps(info), now, now, now, job_id),
            )
        return True

    def result_count(self, job_id: str, table: str) -> int:
        with self._tx() as db:
            return int(
                db.one(
                    "SELECT COUNT(*) FROM job_results WHERE job_id = ? AND tbl = ?",
                    (job_id, table),
                )
            )

    def result_rows(self, job_id: str, table: str, offset: int, limit: int) -> list[list[Any]]:
        """Rows ``offset`` .. ``offset + limit`` of a result table, as lists of values."""
        with self._tx() as db:
            rows = db.rows(
                "SELECT data FROM job_results WHERE job_id = ? AND tbl = ? AND row_no >= ? "
                "ORDER BY row_no LIMIT ?",
                (job_id, table, offset, limit),
            )
        return [json.loads(r["data"]) for r in rows]

    def result_frame(self, job_id: str, table: str, schema: dict[str, Any]) -> pd.DataFrame:
        """A whole result table as a frame with its stored column types."""
        rows = self.result_rows(job_id, table, 0, 2**62)
        return frame_of(rows, schema)


def frame_of(rows: list[list[Any]], schema: dict[str, Any]) -> pd.DataFrame:
    """Result rows as a frame with the column types they were stored with."""
    frame = pd.DataFrame(rows, columns=schema["columns"])
    for column, dtype in schema.get("dtypes", {}).items():
        if column not in frame:
            continue
        if dtype in ("int64", "float64", "Int64", "bool"):
            frame[column] = frame[column].astype(dtype if dtype != "float64" else float)
        elif dtype == "object":
            frame[column] = frame[column].astype(object)
        elif dtype in ("str", "string"):
            frame[column] = frame[column].astype(str)
    return frame


def _dtypes(frame: pd.DataFrame) -> dict[str, str]:
    out = {}
    for column, dtype in frame.dtypes.items():
        name = str(dtype)
        if name in ("str", "string") or (name == "object" and _all_text(frame[column])):
            name = "str"
        out[str(column)] = name
    return out


def _all_text(series: pd.Series) -> bool:
    return bool(series.map(lambda v: isinstance(v, str)).all())


def _answers_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(ANSWER_COLUMNS))
    return frame.astype({c: str for c in ANSWER_COLUMNS if c != "sample"}).astype(
        {"sample": "int64"}
    )


def _job(row: dict[str, Any]) -> dict[str, Any]:
    job = dict(row)
    job["params"] = json.loads(job["params"])
    job["info"] = json.loads(job["info"]) if job.get("info") else {}
    return job


def _is_integrity_error(err: Exception) -> bool:
    if isinstance(err, sqlite3.IntegrityError):
        return True
    try:
        import psycopg

        return isinstance(err, psycopg.errors.UniqueViolation)
    except ImportError:
        return False


class _Cursor:
    """The few statement helpers the store uses, over sqlite3 or psycopg."""

    def __init__(self, db: Any, dialect: str):
        self.db = db
        self.dialect = dialect

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        cursor = self.db.execute(self._sql(sql), tuple(args))
        return max(cursor.rowcount, 0)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        if self.dialect == "sqlite":
            self.db.executemany(sql, rows)
        else:
            with self.db.cursor() as cursor:
                cursor.executemany(self._sql(sql), rows)

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cursor = self.db.execute(self._sql(sql), tuple(args))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]

    def row(self, sql: str, args: Sequence[Any] = ()) -> dict[str, Any] | None:
        found = self.rows(sql, args)
        return found[0] if found else None

    def one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        cursor = self.db.execute(self._sql(sql), tuple(args))
        return cursor.fetchone()[0]
