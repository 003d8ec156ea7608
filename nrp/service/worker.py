"""The one inference worker: a process of its own that owns every model and does all scoring.

The server starts it (``WorkerHandle``) and talks to it through two queues: synchronous score
requests go in, their answers come back; a ``wake`` message says that a job was submitted. Jobs
themselves travel through the store (``nrp.service.store``): the worker claims units, computes,
and marks them done, so a job survives any crash of either process.

Why one process: a model is loaded once (and a GPU is owned by one process), and work from
every job and every synchronous request can be put into one model call. The loop:

1. **Synchronous requests first** (someone is waiting): requests that arrive within
   ``batch_max_wait_ms`` of the first one, up to ``batch_max_size`` answers, are grouped per
   ranker and scored in one ``AnswerInjector.position`` call per ranker; each request then
   gets its rows (built by the same code as ``score_answers``).
2. **Job units**: the store hands out queued units that share a batch key (same collection,
   ranker or evaluator and options) across jobs, up to ``batch_max_size`` answers. Positions go
   to the collection's results cache and evaluations to its evaluation cache as soon as a batch
   is done; then the units are marked done. A unit is "one query's answers for one ranker or
   evaluator" (``run_rank_units`` / ``run_evaluate_units`` take units and return nothing but
   cache rows), so another executor can run it elsewhere.
3. **Finalisation**: a job whose units are all done is scored with the library's own
   ``score_answers`` (and ``evaluate_answers``) over its answers: every position is served by
   the results cache, so nothing is recomputed, and the result is what ``nrp score`` writes for
   the same input. The rows are stored with the ``done`` status in one transaction.

**Executors** (``executor: ray``, ``nrp.executors``). Job units may run on a Ray cluster: the
worker makes the executor on its first job batch and keeps it (its actors keep their models)
until it stops. A rank batch's answers that the results cache lacks go out as per-query
partitions (``position_with_executor``, up to ``batch_max_size`` answers each) and an evaluate
batch's items through ``evaluate(..., executor=)``; Ray actors compute, and the worker stores
every partition in the caches beside the collection as it arrives, so it stays their single
writer (the nodes share no disk, and SQLite wants one writer) and finalisation, crash
re-queueing and the results are exactly those of a local run. Synchronous score requests stay
in the worker process: a few answers that someone is waiting for would wait longer for a
round trip to the cluster than for the model here.

At start the worker re-queues units left running by a crash (all of them on SQLite, expired
leases on PostgreSQL, where other servers' workers may be busy). If the server dies, the worker
dies too (a watchdog thread checks the parent process). ``stop`` lets the batch
in flight finish, then exits; SIGINT is ignored (a Ctrl-C in a terminal reaches the whole
process group: the server decides when the worker stops).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import signal
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.errors import NrpError
from nrp.executors.base import Executor
from nrp.service.config import ServiceConfig

log = logging.getLogger("nrp.service.worker")


# -- models and collections owned by the worker --------------------------------------------------
class ModelPool:
    """Collections, rankers, injectors and evaluators, each built once and kept."""

    def __init__(self, indexes: Path):
        self.indexes = indexes
        self.collections: dict[str, tuple[int, Any]] = {}
        self.rankers: dict[tuple[str, str, str], Any] = {}
        self.injectors: dict[tuple[str, str, str, bool, bool], Any] = {}
        self.evaluators: dict[str, Any] = {}
        self.caches: dict[tuple[str, str], Any] = {}

    def collection(self, name: str) -> Any:
        from nrp.collection.collection import Collection
        from nrp.collection.store import STORE_FILE

        stamp = (self.indexes / name / STORE_FILE).stat().st_mtime_ns
        known = self.collections.get(name)
        if known is None or known[0] != stamp:
            collection = Collection.load(name, self.indexes)
            self.collections[name] = (stamp, collection)
            # a rebuilt collection: models stay, everything bound to the old build goes
            self.rankers = {k: v for k, v in self.rankers.items() if k[0] != name}
            self.injectors = {k: v for k, v in self.injectors.items() if k[0] != name}
            self.caches = {k: v for k, v in self.caches.items() if k[0] != name}
        return self.collections[name][1]

    def fingerprint(self, collection: Any) -> str:
        return str(collection.meta["fingerprint"])

    def ranker(self, collection: Any, spec: str) -> Any:
        from nrp.rankers.registry import make_ranker

        key = (collection.name, self.fingerprint(collection), spec)
        if key not in self.rankers:
            ranker = make_ranker(spec)
            ranker.bind_collection(collection)
            self.rankers[key] = ranker
        return self.rankers[key]

    def injector(self, collection: Any, spec: str, frozen_stats: bool, full_rerank: bool) -> Any:
        from nrp.nrp.injection import AnswerInjector
        from nrp.nrp.results_cache import PairCache
        from nrp.rankers.cache import SCORE_CACHE_FILE

        key = (collection.name, self.fingerprint(collection), spec, frozen_stats, full_rerank)
        if key not in self.injectors:
            self.injectors[key] = AnswerInjector(
                collection,
                self.ranker(collection, spec),
                frozen_stats=frozen_stats,
                full_rerank=full_rerank,
                score_cache=self.cache(collection, "scores"),
                pair_cache=PairCache(collection.path / SCORE_CACHE_FILE),
            )
        return self.injectors[key]

    def cache(self, collection: Any, kind: str) -> Any:
        key = (collection.name, kind)
        if key not in self.caches:
            if kind == "scores":
                from nrp.rankers.cache import SCORE_CACHE_FILE, ScoreCache

                self.caches[key] = ScoreCache(collection.path / SCORE_CACHE_FILE)
            elif kind == "results":
                from nrp.nrp.results_cache import RESULTS_FILE, ResultsCache

                self.caches[key] = ResultsCache(collection.path / RESULTS_FILE)
            else:
                from nrp.evaluators.cache import EVALUATION_CACHE_FILE, EvaluationCache

                self.caches[key] = EvaluationCache(collection.path / EVALUATION_CACHE_FILE)
        return self.caches[key]

    def evaluator(self, spec: str) -> Any:
        from nrp.evaluators.base import make_evaluator

        if spec not in self.evaluators:
            self.evaluators[spec] = make_evaluator(spec)
        return self.evaluators[spec]


# -- units of work -------------------------------------------------------------------------------
def _rounds(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """Rows split so that no answer id repeats within a part (answers of several jobs or
    requests may share an id; one positioning call, and an executor run that maps each
    answer id to its text hash, need distinct ids)."""
    occurrence = frame.groupby("answer_id", sort=False).cumcount()
    return [frame[occurrence == n] for n in range(int(occurrence.max()) + 1)] if len(frame) else []


def position_answers(
    pool: ModelPool,
    collection: Any,
    spec: str,
    frozen_stats: bool,
    full_rerank: bool,
    parts: list[pd.DataFrame],
    executor: Executor | None = None,
    partition_size: int = 256,
) -> int:
    """Position the answers of every part by one ranker and store them in the collection's
    results cache (what ``score_answers`` reads at finalisation); answers it already holds are
    skipped. Each part must have distinct answer ids (one job's answers); the answers of all
    parts still to do go into one ``position`` call, or with an ``executor`` into one
    ``position_with_executor`` run (per-query partitions of up to ``partition_size`` answers,
    each stored here, with the D_q scores it computed, as it arrives). Returns the answers
    positioned."""
    from nrp.nrp.results_cache import PositionScope, text_sha

    injector = pool.injector(collection, spec, frozen_stats, full_rerank)
    ranker = injector.ranker
    scope = PositionScope(
        pool.fingerprint(collection),
        injector.fingerprint_of(ranker),
        injector.mode,
        ranker.spec(),
        collection.name,
        float(ranker.score_tolerance),
    )
    results = pool.cache(collection, "results")
    todo_parts = []
    for part in parts:
        part = part.reset_index(drop=True)
        part = part.assign(text_sha=[text_sha(t) for t in part["text"]])
        stored = results.lookup(scope, part)
        todo_parts.append(part[~part["answer_id"].isin(stored["answer_id"].astype(str))])
    todo = pd.concat(todo_parts, ignore_index=True) if todo_parts else pd.DataFrame()
    for group in _rounds(todo):
        if executor is None:
            positioned = injector.position(group[["answer_id", "qid", "text"]])
            results.store(scope, positioned, group["text_sha"].tolist())
            continue
        from nrp.executors.scoring import position_with_executor

        qids = list(dict.fromkeys(group["qid"].astype(str)))
        candidates = pd.concat([injector.docs(q) for q in qids], ignore_index=True)
        position_with_executor(
            executor, collection, ranker, scope.ranker_fingerprint, injector.mode, scope,
            group[["answer_id", "qid", "text", "text_sha"]], frozen_stats, full_rerank, results,
            injector.score_cache, injector.pair_cache, candidates, partition_size,
        )  # fmt: skip
    return len(todo)


def run_rank_units(
    pool: ModelPool,
    units: list[dict[str, Any]],
    answers: list[pd.DataFrame],
    executor: Executor | None = None,
    partition_size: int = 256,
) -> None:
    """Position the answers of rank units that share a batch key (one model call per round,
    or one executor run); results land in the collection's results cache."""
    import json

    _, collection_name, spec, options = json.loads(units[0]["batch_key"])
    collection = pool.collection(collection_name)
    by_job: dict[str, list[pd.DataFrame]] = {}
    for unit, frame in zip(units, answers, strict=True):
        by_job.setdefault(unit["job_id"], []).append(frame)
    parts = [pd.concat(frames, ignore_index=True) for frames in by_job.values()]
    position_answers(
        pool, collection, spec, bool(options["frozen_stats"]), bool(options["full_rerank"]),
        parts, executor, partition_size,
    )  # fmt: skip


def run_evaluate_units(
    pool: ModelPool,
    units: list[dict[str, Any]],
    answers: list[pd.DataFrame],
    executor: Executor | None = None,
) -> None:
    """Evaluate the answers of evaluator units that share a batch key in one run (on
    ``executor`` when given); rows land in the collection's evaluation cache (evaluators that
    are not cacheable run at finalisation)."""
    import json

    from nrp.evaluators.items import build_items
    from nrp.evaluators.run import evaluate

    _, collection_name, spec, options = json.loads(units[0]["batch_key"])
    collection = pool.collection(collection_name)
    evaluator = pool.evaluator(spec)
    if not evaluator.cacheable:
        return
    frame = pd.concat(answers, ignore_index=True)
    items = build_items(collection, frame, options.get("references", "auto"))
    evaluate(
        items, [evaluator], pool.cache(collection, "evaluations"), collection, executor=executor
    )


def position_records(injector: Any, parts: list[list[dict[str, Any]]]) -> list[dict[str, tuple]]:
    """Positions of answers given as records (answer_id, qid, text), per part: answer_id ->
    (score, above, ties, strict, n_docs). All parts in one ``position`` call (more when two
    parts share an answer id)."""
    flat = [(n, a) for n, part in enumerate(parts) for a in part]
    seen: dict[tuple[str, str], int] = {}
    rounds: list[list[tuple[int, dict[str, Any]]]] = []
    for n, answer in flat:
        key = (str(answer["qid"]), str(answer["answer_id"]))
        number = seen.get(key, 0)
        seen[key] = number + 1
        if number == len(rounds):
            rounds.append([])
        rounds[number].append((n, answer))
    out: list[dict[str, tuple]] = [{} for _ in parts]
    for items in rounds:
        frame = pd.DataFrame(
            {
                "answer_id": [str(a["answer_id"]) for _, a in items],
                "qid": [str(a["qid"]) for _, a in items],
                "text": [a["text"] for _, a in items],
            }
        )
        found = injector.position(frame)
        columns = [found[c].tolist() for c in ("score", "above", "ties", "strict", "n_docs")]
        for i, (n, answer) in enumerate(items):
            out[n][str(answer["answer_id"])] = tuple(column[i] for column in columns)
    return out


def score_rows(
    answers: list[dict[str, Any]],
    rankers: dict[str, str],
    positions: dict[str, dict[str, tuple]],
    ties: str,
    weights: dict[str, float] | None,
) -> list[list[Any]]:
    """``RESULT_COLUMNS`` rows per answer: one per dimension, then the weighted row, with the
    arithmetic of ``score_answers`` (``rank_from_counts``, ``nrp_value``, and the weighted sum
    with the compensated summation pandas' group sum uses)."""
    from nrp.nrp import COMBINED
    from nrp.nrp.scoring import normalised_weights
    from nrp.nrp.ties import check_tie_mode, nrp_value, rank_from_counts

    mode = check_tie_mode(ties)
    weight_of = normalised_weights(weights, list(rankers))
    rows: list[list[Any]] = []
    for answer in answers:
        identity = [
            str(answer["answer_id"]),
            str(answer["llm"]),
            str(answer["prompt"]),
            str(answer["qid"]),
            int(answer["sample"]),
        ]
        total = compensation = 0.0
        first_n_docs = None
        for dimension, spec in rankers.items():
            score, above, tied, strict, n_docs = positions[spec][str(answer["answer_id"])]
            if mode == "strict":
                rank = float(strict)
            else:
                rank = float(rank_from_counts(float(above), float(tied), mode))
            nrp = float(nrp_value(rank, int(n_docs)))
            first_n_docs = int(n_docs) if first_n_docs is None else first_n_docs
            rows.append(
                [*identity, dimension, spec, float(score), rank, int(n_docs), int(tied), nrp]
            )
            y = nrp * weight_of[dimension] - compensation
            t = total + y
            compensation = t - total - y
            total = t
        rows.append([*identity, COMBINED, "", None, None, first_n_docs, None, total])
    return rows


# -- the loop ------------------------------------------------------------------------------------
@dataclass
class _ScoreRequest:
    id: str
    payload: dict[str, Any]
    received: float = field(default_factory=time.monotonic)

    @property
    def size(self) -> int:
        return len(self.payload["answers"])


class Worker:
    def __init__(
        self,
        config: ServiceConfig,
        inbox: Any,
        outbox: Any,
        parent_pid: int | None = None,
    ):
        from nrp.service.store import Store

        self.config = config
        self.inbox = inbox
        self.outbox = outbox
        self.parent_pid = parent_pid
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.store = Store(config.store_url)
        self.pool = ModelPool(config.indexes)
        self.stopping = False
        self.pending: list[_ScoreRequest] = []
        self.busy = True
        self.last_requeue = 0.0
        self.executor: Executor | None = None  # made on the first job batch (None: local)
        self.executor_made = False

    # -- messages --------------------------------------------------------------------------
    def _send(self, kind: str, payload: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):
            self.outbox.put((kind, payload))

    def _take(self, timeout: float) -> bool:
        """Read one message (waiting up to ``timeout``); False when none came."""
        try:
            kind, payload = (
                self.inbox.get(timeout=timeout) if timeout > 0 else self.inbox.get_nowait()
            )
        except queue.Empty:
            return False
        if kind == "score":
            self.pending.append(_ScoreRequest(payload["id"], payload))
        elif kind == "stop":
            self.stopping = True
        elif kind == "wake":
            self.busy = True
        return True

    def _collect(self) -> list[_ScoreRequest]:
        """Pending score requests: after the first, wait up to ``batch_max_wait_ms`` for more,
        up to ``batch_max_size`` answers."""
        while self._take(0):
            pass
        if not self.pending:
            self._take(0 if self.busy else self.config.poll_interval_s)
            while self._take(0):
                pass
        if not self.pending:
            return []
        deadline = self.pending[0].received + self.config.batch_max_wait_ms / 1000
        while sum(r.size for r in self.pending) < self.config.batch_max_size:
            left = deadline - time.monotonic()
            if left <= 0 or not self._take(left):
                break
        batch, size = [], 0
        limit = self.config.batch_max_size
        while self.pending and (not batch or size + self.pending[0].size <= limit):
            request = self.pending.pop(0)
            batch.append(request)
            size += request.size
        return batch

    # -- main loop -------------------------------------------------------------------------
    def run(self) -> None:
        expired_only = self.store.dialect == "postgresql"
        requeued = self.store.requeue(expired_only=expired_only)
        if requeued:
            log.info("re-queued units left running", extra={"fields": {"units": requeued}})
        self._preload()
        self._send("ready", {"pid": os.getpid(), "worker": self.name, "requeued": requeued})
        log.info("worker ready", extra={"fields": {"worker": self.name}})
        try:
            self._loop(expired_only)
        finally:
            self._close_executor()
        self._send("stopped", {"pid": os.getpid()})
        log.info("worker stopped", extra={"fields": {"worker": self.name}})

    def _loop(self, expired_only: bool) -> None:
        while not self.stopping:
            self._check_parent()
            requests = self._collect()
            if self.stopping:
                break
            if requests:
                self._serve(requests)
                continue
            try:
                did = self._job_batch() or self._finalize()
                if expired_only and time.monotonic() - self.last_requeue > 30:
                    self.last_requeue = time.monotonic()
                    self.store.requeue(expired_only=True)
            except Exception as err:
                # the store went away for a moment (a restarted database, a full disk): the
                # units stay leased or queued in the store; try again after a pause
                log.error("worker loop error", extra={"fields": {"trace": _trace(err)}})
                time.sleep(self.config.poll_interval_s)
                with contextlib.suppress(Exception):
                    self.store.requeue(expired_only=False, worker=self.name)
                did = False
            self.busy = did

    def _check_parent(self) -> None:
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            log.warning("server process is gone; worker exits")
            os._exit(1)

    def _preload(self) -> None:
        for item in self.config.preload:
            name, _, spec = item.partition("=")
            try:
                collection = self.pool.collection(name.strip())
                injector = self.pool.injector(collection, spec.strip(), False, False)
                injector.ranker.fingerprint()
            except Exception as err:  # a bad preload is logged, not fatal
                log.error(f"preload {item!r} failed: {err}")

    # -- synchronous requests --------------------------------------------------------------
    def _serve(self, requests: list[_ScoreRequest]) -> None:
        started = time.perf_counter()
        try:
            replies = self._score(requests)
        except Exception:  # isolate the request at fault
            replies = {}
            for request in requests:
                try:
                    replies.update(self._score([request]))
                except Exception as err:
                    replies[request.id] = _error_reply(err)
        for request in requests:
            self._send("result", {"id": request.id, **replies[request.id]})
        self._send(
            "metrics",
            {
                "kind": "score",
                "answers": sum(r.size for r in requests),
                "requests": len(requests),
                "seconds": time.perf_counter() - started,
            },
        )

    def _score(self, requests: list[_ScoreRequest]) -> dict[str, dict[str, Any]]:
        """Rows of every request; answers of all requests grouped per ranker and options, one
        positioning call per group. Rows are built in plain Python (a few answers: pandas
        would cost more than the model) with the formulas ``score_answers`` uses, so the values
        are the same to the bit (see ``score_rows``)."""
        from nrp.nrp.scoring import RESULT_COLUMNS

        groups: dict[tuple, list[tuple[str, list[dict[str, Any]]]]] = {}
        for request in requests:
            p = request.payload
            ranked = [a for a in p["answers"] if a["ranked"]]
            for spec in dict.fromkeys(p["rankers"].values()):
                key = (p["collection"], spec, bool(p["frozen_stats"]), bool(p["full_rerank"]))
                if ranked:
                    groups.setdefault(key, []).append((request.id, ranked))
        positions: dict[tuple[str, str], dict[str, tuple]] = {}
        for (name, spec, frozen, full), items in groups.items():
            collection = self.pool.collection(name)
            injector = self.pool.injector(collection, spec, frozen, full)
            found = position_records(injector, [answers for _, answers in items])
            for (request_id, _), part in zip(items, found, strict=True):
                positions[(request_id, spec)] = part
        replies = {}
        for request in requests:
            p = request.payload
            rows = score_rows(
                [a for a in p["answers"] if a["ranked"]],
                p["rankers"],
                {spec: positions.get((request.id, spec), {}) for spec in p["rankers"].values()},
                p["ties"],
                p.get("weights"),
            )
            replies[request.id] = {"ok": True, "columns": list(RESULT_COLUMNS), "rows": rows}
        return replies

    # -- jobs ------------------------------------------------------------------------------
    def _job_batch(self) -> bool:
        from nrp.service.inputs import EVALUATE

        units = self.store.claim_units(self.name, self.config.batch_max_size, self.config.lease_s)
        if not units:
            return False
        started = time.perf_counter()
        executor = self._job_executor()
        run: Callable = (
            functools.partial(run_evaluate_units, executor=executor)
            if units[0]["kind"] == EVALUATE
            else functools.partial(
                run_rank_units, executor=executor, partition_size=self.config.batch_max_size
            )
        )
        answers = [self.store.unit_answers(u["job_id"], u["qid"]) for u in units]
        try:
            with self._own_sigterm():
                run(self.pool, units, answers)
            done = units
        except Exception as err:  # isolate the unit at fault
            self._log_executor_runs()
            if len(units) == 1:
                self._fail(units[0]["job_id"], err)
                return True
            done = []
            for unit, frame in zip(units, answers, strict=True):
                try:
                    with self._own_sigterm():
                        run(self.pool, [unit], [frame])
                    done.append(unit)
                except Exception as one_err:
                    self._fail(unit["job_id"], one_err)
        self._log_executor_runs()
        if self.config.batch_delay_ms:
            time.sleep(self.config.batch_delay_ms / 1000)
        self.store.finish_units(self.name, done)
        self._send(
            "metrics",
            {
                "kind": "job",
                "answers": int(sum(u["n_answers"] for u in units)),
                "units": len(units),
                "seconds": time.perf_counter() - started,
            },
        )
        return True

    # -- the executor of job units -----------------------------------------------------------
    def _job_executor(self) -> Executor | None:
        """The executor job units run on, made once (None: this process)."""
        if not self.executor_made:
            from nrp.executors import make_executor

            self.executor = make_executor(self.config.executor, self.config.ray_address or None)
            self.executor_made = True
            if self.executor is not None:
                log.info(
                    "job units run on an executor",
                    extra={"fields": {"executor": self.executor.describe()}},
                )
        return self.executor

    @contextlib.contextmanager
    def _own_sigterm(self) -> Iterator[None]:
        """Keep the worker's SIGTERM handler (finish the batch, then stop): ``ray.init``, run on
        the executor's first use, installs one of its own that exits at once."""
        handler = signal.getsignal(signal.SIGTERM)
        try:
            yield
        finally:
            if signal.getsignal(signal.SIGTERM) is not handler and handler is not None:
                signal.signal(signal.SIGTERM, handler)

    def _log_executor_runs(self) -> None:
        """One info line per executor run of the batch (its ``RunStats``)."""
        if self.executor is None:
            return
        for stats in self.executor.history:
            log.info(
                "executor run",
                extra={
                    "fields": {
                        "executor": stats.executor,
                        "task": stats.task,
                        "partitions": stats.partitions,
                        "items": stats.items,
                        "workers": sorted(stats.workers),
                        "resubmitted": stats.resubmitted,
                        "workers_lost": stats.workers_lost,
                        "seconds": round(stats.wall_seconds, 3),
                    }
                },
            )
        self.executor.history.clear()  # logged; a long-running worker must not keep them all

    def _close_executor(self) -> None:
        if self.executor is None:
            return
        try:
            self.executor.close()
        except Exception as err:  # stopping anyway
            log.warning("closing the executor failed", extra={"fields": {"error": str(err)}})
        self.executor = None

    def _fail(self, job_id: str, err: Exception) -> None:
        message = str(err) if isinstance(err, NrpError) else f"{type(err).__name__}: {err}"
        log.error(
            "job failed",
            extra={"fields": {"job_id": job_id, "error": message, "trace": _trace(err)}},
        )
        self.store.fail_job(job_id, message)
        self._send("metrics", {"kind": "job_failed"})

    def _finalize(self) -> bool:
        jobs = self.store.jobs_to_finalize()
        for job_id in jobs:
            job = self.store.get_job(job_id)
            if job is None:
                continue
            try:
                tables, info = self._results(job)
            except Exception as err:  # reported as the job's error
                self._fail(job_id, err)
                continue
            if self.store.finish_job(job_id, tables, info):
                log.info(
                    "job done",
                    extra={"fields": {"job_id": job_id, "rows": len(tables.get("nrp", []))}},
                )
                self._send("metrics", {"kind": "job_done"})
        return bool(jobs)

    def _results(self, job: dict[str, Any]) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
        """The job's result tables, by the library's own functions over its answers (every
        position and evaluation served by the caches the units filled)."""
        from nrp.evaluators.run import evaluate_answers
        from nrp.nrp.scoring import score_answers

        params = job["params"]
        collection = self.pool.collection(job["collection"])
        answers = self.store.job_answers(job["id"])
        tables: dict[str, pd.DataFrame] = {}
        info: dict[str, Any] = {}
        if params.get("rankers"):
            rankers = {d: self.pool.ranker(collection, s) for d, s in params["rankers"].items()}
            frame = score_answers(
                collection,
                answers,
                rankers,
                ties=params["ties"],
                frozen_stats=params["frozen_stats"],
                full_rerank=params["full_rerank"],
                weights=params.get("weights"),
                cache=True,
                chunk_size=self.config.batch_max_size,
            )
            tables["nrp"] = frame
            info.update(
                {
                    key: frame.attrs.get(key)
                    for key in ("skipped", "warnings", "note", "counts", "injection", "weights")
                }
            )
        if params.get("evaluators"):
            evaluators = [self.pool.evaluator(s) for s in params["evaluators"]]
            evaluations = evaluate_answers(
                collection, answers, evaluators, references=params["references"], cache=True
            )
            tables["evaluations"] = evaluations
            info["evaluators"] = evaluations.attrs.get("evaluators", {})
        return tables, _jsonable(info)


def _rows(frame: pd.DataFrame) -> list[list[Any]]:
    from nrp.service.store import _json_value

    return [[_json_value(v) for v in row] for row in frame.itertuples(index=False, name=None)]


def _jsonable(value: Any) -> Any:
    from nrp.nrp.report_tables import jsonable

    return jsonable(value)


def _error_reply(err: Exception) -> dict[str, Any]:
    if isinstance(err, NrpError):
        return {"ok": False, "status": 422, "error": str(err)}
    log.error("score request failed", extra={"fields": {"trace": _trace(err)}})
    return {"ok": False, "status": 500, "error": f"{type(err).__name__}: {err}"}


def _trace(err: Exception) -> str:
    return "".join(traceback.format_exception(type(err), err, err.__traceback__))[-4000:]


def _die_with_parent(parent_pid: int, interval: float = 0.2) -> None:
    """Exit as soon as the server process is gone (kill -9 of the server), even in the middle
    of a model call: a watchdog thread checks the parent every ``interval`` seconds.

    Not ``PR_SET_PDEATHSIG``: Linux sends that signal when the *thread* that started the child
    ends, and the server starts (and restarts) the worker from short-lived threads."""

    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(1)
            time.sleep(interval)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def worker_main(config_data: dict[str, Any], inbox: Any, outbox: Any, parent_pid: int) -> None:
    """Entry point of the worker process (spawned by ``WorkerHandle``)."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    config = ServiceConfig.from_dict(config_data)
    if config.torch_threads:
        import torch

        torch.set_num_threads(config.torch_threads)
    from nrp.service.logs import setup_logging

    setup_logging(config.log_level, "worker")
    worker = Worker(config, inbox, outbox, parent_pid)

    def _stop(signum: int, frame: Any) -> None:
        worker.stopping = True

    signal.signal(signal.SIGTERM, _stop)
    try:
        worker.run()
    except Exception as err:
        log.error("worker crashed", extra={"fields": {"trace": _trace(err)}})
        raise


# -- the server's side ---------------------------------------------------------------------------
class WorkerHandle:
    """Starts the worker process, sends it requests, and routes its replies to waiters.

    A reader thread takes the worker's messages; a score request waits on a future. If the
    worker dies, waiting requests fail (503) and a new worker is started (which re-queues the
    units the dead one held)."""

    def __init__(self, config: ServiceConfig, on_metrics: Callable[[dict], None] | None = None):
        import multiprocessing

        self.config = config
        self.context = multiprocessing.get_context("spawn")
        self.on_metrics = on_metrics or (lambda _: None)
        self.process: Any = None
        self.inbox: Any = None
        self.outbox: Any = None
        self.ready = threading.Event()
        self.info: dict[str, Any] = {}
        self.waiters: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.lock = threading.Lock()
        self.closing = False
        self.restarts = 0
        self.reader: threading.Thread | None = None

    def start(self) -> None:
        self.ready.clear()
        self.inbox = self.context.Queue()
        self.outbox = self.context.Queue()
        self.process = self.context.Process(
            target=worker_main,
            args=(self.config.to_dict(), self.inbox, self.outbox, os.getpid()),
            name="nrp-worker",
            daemon=False,
        )
        self.process.start()
        log.info("worker started", extra={"fields": {"pid": self.process.pid}})
        self.reader = threading.Thread(
            target=self._read, args=(self.process, self.outbox), daemon=True
        )
        self.reader.start()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def _read(self, process: Any, outbox: Any) -> None:
        while True:
            try:
                kind, payload = outbox.get(timeout=0.5)
            except queue.Empty:
                if process.is_alive():
                    continue
                self._died(process)
                return
            except (EOFError, OSError):
                self._died(process)
                return
            if kind == "result":
                with self.lock:
                    waiter = self.waiters.pop(payload["id"], None)
                if waiter is not None:
                    waiter(payload)
            elif kind == "ready":
                self.info = payload
                self.ready.set()
            elif kind == "metrics":
                self.on_metrics(payload)
            elif kind == "stopped":
                return

    def _died(self, process: Any) -> None:
        self.ready.clear()
        with self.lock:
            waiters, self.waiters = self.waiters, {}
        for waiter in waiters.values():
            waiter({"ok": False, "status": 503, "error": "the worker stopped; try again"})
        if self.closing or process is not self.process:
            return
        log.error("worker died; starting a new one", extra={"fields": {"exit": process.exitcode}})
        self.restarts += 1
        time.sleep(min(5.0, 0.5 * self.restarts))
        if not self.closing:
            self.start()

    def submit(self, payload: dict[str, Any], reply: Callable[[dict[str, Any]], None]) -> None:
        """Send a score request; ``reply`` is called (from the reader thread) with the result."""
        with self.lock:
            self.waiters[payload["id"]] = reply
        self.inbox.put(("score", payload))

    def forget(self, request_id: str) -> None:
        with self.lock:
            self.waiters.pop(request_id, None)

    def wake(self) -> None:
        with contextlib.suppress(Exception):
            self.inbox.put(("wake", {}))

    def stop(self, timeout: float) -> None:
        """Ask the worker to finish its batch and exit; terminate it after ``timeout``."""
        self.closing = True
        if self.process is None:
            return
        with contextlib.suppress(Exception):
            self.inbox.put(("stop", {}))
        self.process.join(timeout)
        if self.process.is_alive():
            log.warning("worker did not stop in time; terminating it")
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        for q in (self.inbox, self.outbox):
            with contextlib.suppress(Exception):
                q.close()
                q.cancel_join_thread()
