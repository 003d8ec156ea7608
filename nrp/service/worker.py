"""The one inference worker: a process of its own that owns every model and does all scoring.

The server starts it (``nrp.service.handle.WorkerHandle``) and talks to it over a socket pair
(``Channel`` here, the event loop's transport there): synchronous score requests go in, their
answers come back; a ``wake`` message says that a job was submitted. Jobs themselves travel
through the store (``nrp.service.store``): the worker claims units, computes, and marks them
done, so a job survives any crash of either process.

Why one process: a model is loaded once (and a GPU is owned by one process), and work from
every job and every synchronous request can be put into one model call. What it computes is
the library's (``nrp.service.compute``, over the models of ``nrp.service.pool``); this module is
the loop that batches work and keeps the store's books:

1. **Synchronous requests first** (someone is waiting): the requests queued (those that
   arrived while the previous batch was computed, and within ``batch_max_wait_ms`` of the
   first one; 0 by default), up to ``batch_max_size`` answers, are grouped per ranker and
   positioned in one ``Positioner.position_rows`` call per ranker; each request then gets its
   rows from ``result_rows``, the arithmetic behind ``score_answers``' rows, without frames.
2. **Job units**: the store hands out queued units that share a batch key (same collection,
   ranker or evaluator and options) across jobs, up to ``batch_max_size`` answers. Positions go
   to the collection's results cache and evaluations to its evaluation cache as soon as a batch
   is done; then the units are marked done. A unit is "one query's answers for one ranker or
   evaluator" (``run_rank_units`` / ``run_evaluate_units`` take units and return nothing but
   cache rows), so another executor can run it elsewhere.
After each batch the pool drops the least recently used rankers and evaluators beyond its
limits (``pool_max_entries``, ``pool_max_bytes``; ``ModelPool.account``) and the worker reports
what it holds (the ``nrp_worker_pool_*`` metrics). After a batch of synchronous requests only
new entries are measured: measuring a hot entry again (a walk of tens of milliseconds) waits
until no request has come for ``QUIET_S``, or at most ``ACCOUNT_DEFER_S``, so that
someone waiting for a score does not wait for it. For the same reason the worker moves what
the pool holds (models, collections, D_q data) out of the garbage collector's sight
(``gc.freeze``) when the pool has changed and at quiet moments: a full collection that walks a
loaded pool takes hundreds of milliseconds. A failure it did not expect reaches the
caller as an error id only (``nrp.service.disclosure``), its detail in the log.

3. **Finalisation**: a job whose units are all done is scored with the library's own
   ``score_answers`` (and ``evaluate_answers``) over its answers: every position is served by
   the results cache, so nothing is recomputed, and the result is what ``nrp score`` writes for
   the same input. The rows are stored with the ``done`` status in one transaction.

**Executors** (``executor: ray``, ``nrp.api.make_executor``). Job units may run on a Ray
cluster: the worker makes the executor on its first job batch and keeps it (its actors keep
their models) until it stops. A rank batch's answers that the results cache lacks go out as
per-query partitions (``Positioner.position`` with the executor, up to ``batch_max_size``
answers each) and an evaluate batch's items through ``evaluate(..., executor=)``; Ray actors
compute, and the worker stores every partition in the caches beside the collection as it
arrives, so it stays their single writer (the nodes share no disk, and SQLite wants one writer)
and finalisation, crash re-queueing and the results are exactly those of a local run.
Synchronous score requests stay in the worker process: a few answers that someone is waiting
for would wait longer for a round trip to the cluster than for the model here.

At start the worker re-queues units left running by a crash (all of them on SQLite, expired
leases on PostgreSQL, where other servers' workers may be busy). If the server dies, the worker
dies too (a watchdog thread checks the parent process). ``stop`` lets the batch
in flight finish, then exits; SIGINT is ignored (a Ctrl-C in a terminal reaches the whole
process group: the server decides when the worker stops).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import pickle
import queue
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from nrp import api, engine, lazy_libs
from nrp.errors import ModelError, NrpError
from nrp.service.compute import (
    answer_characters,
    job_tables,
    run_evaluate_units,
    run_rank_units,
    score_requests,
)
from nrp.service.config import ServiceConfig
from nrp.service.disclosure import internal_error, redact_paths, trace
from nrp.service.inputs import ModelPlaces
from nrp.service.keys import EVALUATE
from nrp.service.pool import ModelPool, PoolLimits
from nrp.service.store import Store

log = logging.getLogger("nrp.service.worker")
QUIET_S = 1.0  # no score request for this long: measure used pool entries, freeze objects
SHUTTING_DOWN = {"ok": False, "status": 503, "error": "the server is shutting down; try again"}
ACCOUNT_DEFER_S = 30.0  # under steady requests, measure them after this long anyway


# -- the loop ------------------------------------------------------------------------------------
@dataclass
class _ScoreRequest:
    """A synchronous request and how far the worker has got with it: its answers are computed
    a slice per turn (``part`` answers from ``done`` on), its rows gathered until the last."""

    id: str
    payload: dict[str, Any]
    received: float = field(default_factory=time.monotonic)
    done: int = 0  # answers computed in earlier turns
    part: int = 0  # answers computed in this turn
    rows: list[list[Any]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.payload["answers"])

    @property
    def left(self) -> int:
        return self.size - self.done

    @property
    def abandoned(self) -> bool:
        """Its requester has had its 504 (``deadline``, wall clock, set by the route)."""
        return time.time() > self.payload.get("deadline", float("inf"))

    def specs(self) -> list[str]:
        return list(dict.fromkeys(self.payload.get("rankers", {}).values()))

    def part_answers(self) -> list[dict[str, Any]]:
        """The answers of this turn's slice: ``part`` of them from ``done`` on."""
        return self.payload["answers"][self.done : self.done + self.part]

    def slice(self) -> dict[str, Any]:
        """The payload of this turn's slice: the same request, ``part`` of its answers."""
        return {**self.payload, "answers": self.part_answers()}


class TurnCosts:
    """What a ranker spec costs a synchronous request: seconds per character of answer text,
    measured on the turns that used it (the mean of the last measure and the one before), so
    that a turn gives each waiting request a slice of about ``score_slice_ms`` of work."""

    def __init__(self) -> None:
        self.rates: dict[str, float] = {}

    def learn(self, spent: dict[str, tuple[float, int]]) -> None:
        for spec, (seconds, characters) in spent.items():
            rate = seconds / max(1, characters)
            known = self.rates.get(spec)
            self.rates[spec] = rate if known is None else (known + rate) / 2

    def rate(self, request: _ScoreRequest) -> float | None:
        """Seconds per character of the request's rankers together; None while one of their
        rates is unknown."""
        rates = [self.rates.get(spec) for spec in request.specs()]
        return None if any(r is None for r in rates) else sum(r for r in rates if r is not None)

    def light(self, request: _ScoreRequest, budget_s: float) -> bool:
        """Whether the request's slice in this turn (``part``) should take at most
        ``budget_s`` at its rankers' measured rates (False while a rate is unknown)."""
        rate = self.rate(request)
        characters = sum(answer_characters(a) for a in request.part_answers())
        return rate is not None and rate * characters <= budget_s

    def part(self, request: _ScoreRequest, budget_s: float, room: int) -> int:
        """How many of the request's answers left go into this turn: as many as fit in
        ``budget_s`` at its rankers' rates (at least one), at most ``room``; one answer while
        a ranker's rate is unknown (its first turn measures it)."""
        limit = min(request.left, room)
        rate = self.rate(request)
        if limit <= 1 or rate is None:
            return min(1, limit) if request.left else 0
        answers = request.payload["answers"]
        part, cost = 0, 0.0
        while part < limit:
            cost += rate * answer_characters(answers[request.done + part])
            if part and cost > budget_s:
                break
            part += 1
        return part


class Worker:
    def __init__(
        self,
        config: ServiceConfig,
        inbox: Any,
        outbox: Any,
        parent_pid: int | None = None,
    ):
        self.config = config
        self.inbox = inbox
        self.outbox = outbox
        self.parent_pid = parent_pid
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.store = Store(config.store_url)
        self.pool = ModelPool(
            config.indexes, PoolLimits(config.pool_max_entries, config.pool_max_bytes)
        )
        self.stopping = False
        self.drain_until: float | None = None  # shutting down: requests left then get a 503
        self.pending: list[_ScoreRequest] = []
        self.costs = TurnCosts()
        self.busy = True
        self.last_requeue = 0.0
        self.executor: engine.Executor | None = None  # made on the first job batch (None: local)
        self.executor_made = False
        self.last_score = 0.0  # when the last batch of score requests was served
        self.last_measure = time.monotonic()  # when the pool's used entries were last measured
        self.frozen_at = -1  # the pool's changes when objects were last frozen (``_freeze``)
        self.served_since_freeze = False

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
        elif kind == "drain":
            self.drain_until = time.monotonic() + float(payload.get("seconds", 0.0))
        elif kind == "wake":
            self.busy = True
        return True

    def _collect(self) -> list[_ScoreRequest]:
        """This turn's score requests, each with its slice (``part``): after the first, wait up
        to ``batch_max_wait_ms`` for more; every request waiting gets a slice of about
        ``score_slice_ms`` of work, oldest first, up to ``batch_max_size`` answers in all."""
        while self._take(0):
            pass
        if not self.pending:
            self._take(0 if self.busy else self.config.poll_interval_s)
            while self._take(0):
                pass
        self._drop_abandoned()
        if not self.pending:
            return []
        deadline = self.pending[0].received + self.config.batch_max_wait_ms / 1000
        while sum(r.size for r in self.pending) < self.config.batch_max_size:
            left = deadline - time.monotonic()
            if left <= 0 or not self._take(left):
                break
        batch, room = [], self.config.batch_max_size
        budget = self.config.score_slice_ms / 1000
        while self.pending and (not batch or room > 0):
            request = self.pending[0]
            request.part = self.costs.part(request, budget, room)
            if batch and request.left and not request.part:
                break
            batch.append(self.pending.pop(0))
            room -= request.part
        return batch

    def _drop_abandoned(self) -> None:
        """Forget the requests whose requester has gone (answered 504): nobody reads them. A
        request computed a slice at a time is dropped at the end of its slice, its answers left
        never computed."""
        dropped = [r.id for r in self.pending if r.abandoned]
        if dropped:
            self.pending = [r for r in self.pending if not r.abandoned]
            log.warning("dropped abandoned score requests", extra={"fields": {"ids": dropped}})

    def _drained(self, turn: float = 0.0) -> bool:
        """Shutting down and past the time given to the requests in hand, or so near it that
        another turn as long as the last one (``turn`` seconds) would end past it: each one
        left gets a 503 (the server is stopping) instead of a request cancelled when the
        server's graceful wait ends (a 500)."""
        if self.drain_until is None or time.monotonic() + turn < self.drain_until:
            return False
        self._refuse_pending()
        return True

    def _refuse_pending(self) -> None:
        for request in self.pending:
            self._send("result", {"id": request.id, **SHUTTING_DOWN})
        if self.pending:
            log.warning(
                "refused score requests: shutting down",
                extra={"fields": {"ids": [r.id for r in self.pending]}},
            )
        self.pending = []

    # -- main loop -------------------------------------------------------------------------
    def run(self) -> None:
        expired_only = self.store.dialect == "postgresql"
        requeued = self.store.requeue(expired_only=expired_only)
        if requeued:
            log.info("re-queued units left running", extra={"fields": {"units": requeued}})
        self._preload()
        self._account()
        self._freeze()
        self._send("ready", {"pid": os.getpid(), "worker": self.name, "requeued": requeued})
        log.info("worker ready", extra={"fields": {"worker": self.name}})
        try:
            self._loop(expired_only)
        finally:
            self._refuse_pending()
            self._close_executor()
        self._send("stopped", {"pid": os.getpid()})
        log.info("worker stopped", extra={"fields": {"worker": self.name}})

    def _loop(self, expired_only: bool) -> None:
        while not self.stopping:
            self._check_parent()
            requests = self._collect()
            if self.stopping:
                self.pending[:0] = requests
                break
            if requests:
                started = time.monotonic()
                self._serve(requests)
                turn = time.monotonic() - started
                self._account(measure_used=self._measure_due(quiet=False))
                if self.pool.changes != self.frozen_at:
                    self._freeze()
                self._drained(turn)
                continue
            if self.drain_until is not None:  # shutting down: no new job batch
                self._drained()
                self.busy = False
                continue
            try:
                did = self._job_batch() or self._finalize()
                if did or (self.pool.stale and self._measure_due(quiet=True)):
                    self._account()
                changed = self.pool.changes != self.frozen_at
                if changed or (self.served_since_freeze and self._quiet()):
                    self._freeze()
                if expired_only and time.monotonic() - self.last_requeue > 30:
                    self.last_requeue = time.monotonic()
                    self.store.requeue(expired_only=True)
            except Exception as err:
                # the store went away for a moment (a restarted database, a full disk): the
                # units stay leased or queued in the store; try again after a pause
                log.error("worker loop error", extra={"fields": {"trace": trace(err)}})
                time.sleep(self.config.poll_interval_s)
                with contextlib.suppress(Exception):
                    self.store.requeue(expired_only=False, worker=self.name)
                did = False
            self.busy = did

    def _quiet(self) -> bool:
        """No score request for ``QUIET_S``."""
        return time.monotonic() - self.last_score >= QUIET_S

    def _measure_due(self, quiet: bool) -> bool:
        """Whether the pool's used entries may be measured now: a quiet moment (when
        ``quiet``: the caller is not answering requests), or not measured for
        ``ACCOUNT_DEFER_S``."""
        if quiet and self._quiet():
            return True
        return time.monotonic() - self.last_measure >= ACCOUNT_DEFER_S

    def _freeze(self) -> None:
        """Collect garbage once, then move every object alive to the permanent generation
        (``gc.freeze``), so that later full collections walk only what is new: the pool's
        models, collections and D_q data would otherwise be walked again and again (hundreds of
        milliseconds a time, which a score request would wait for). Unfreezing first lets
        cycles of an evicted entry be collected."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.frozen_at = self.pool.changes
        self.served_since_freeze = False

    def _account(self, measure_used: bool = True) -> None:
        """Keep the pool within its limits (``ModelPool.account``; ``measure_used``: measure
        the used entries due, not only new ones) and tell the server what it holds (the
        ``nrp_worker_pool_*`` metrics)."""
        if measure_used:
            self.last_measure = time.monotonic()
        try:
            usage = self.pool.account(measure_used)
        except Exception as err:  # an estimate that fails must not stop the worker
            log.error("pool accounting failed", extra={"fields": {"trace": trace(err)}})
            return
        self._send("metrics", {"kind": "pool", **asdict(usage)})

    def _check_parent(self) -> None:
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            log.warning("server process is gone; worker exits")
            os._exit(1)

    def _preload(self) -> None:
        """Build the positioners ``preload`` names (``COLLECTION=SPEC``) before the first request
        (with the options job units use, so both share them)."""
        options = engine.PositionOptions(chunk_size=self.config.batch_max_size)
        for item in self.config.preload:
            name, _, spec = item.partition("=")
            try:
                collection = self.pool.collection(name.strip())
                positioner = self.pool.positioner(collection, spec.strip(), options)
                _ = positioner.injector  # built now: D_q read, the model files hashed
            except Exception as err:  # a bad preload is logged, not fatal
                log.error(f"preload {item!r} failed: {err}")

    # -- synchronous requests --------------------------------------------------------------
    def _serve(self, requests: list[_ScoreRequest]) -> None:
        """One turn: the slices expected to take at most ``score_slice_ms`` at the rates
        measured are computed first (together, per ranker) and their replies sent, then the
        others (a rate not measured yet counts as heavy), so a cheap request that came during
        an expensive slice waits for that slice alone. A request whose last slice this was
        gets its reply, the others wait for their next turn behind the requests that came
        meanwhile. A request's rows are those of its slices in order: every row depends on its
        own answer alone (``score_requests``), so they are the rows of the request computed at
        once."""
        self.last_score = time.monotonic()
        self.served_since_freeze = True
        requests = [r for r in requests if not self._waits_on_collection_work(r)]
        budget = self.config.score_slice_ms / 1000
        light, heavy = [], []
        for request in requests:  # each request's slice judged once
            (light if self.costs.light(request, budget) else heavy).append(request)
        for group in (light, heavy):
            if group:
                self._compute(group)

    def _compute(self, requests: list[_ScoreRequest]) -> None:
        """This turn's slices of ``requests``, computed in one ``score_requests`` call."""
        started = time.perf_counter()
        spent: dict[str, tuple[float, int]] = {}
        try:
            replies = self._score(requests, spent)
        except Exception:  # isolate the request at fault
            replies, spent = {}, {}
            for request in requests:
                try:
                    replies.update(self._score([request], spent))
                except Exception as err:
                    replies[request.id] = self._error_reply(err)
        self.costs.learn(spent)
        for request in requests:
            reply = replies[request.id]
            if not reply.get("ok"):
                self._send("result", {"id": request.id, **reply})
                continue
            request.rows.extend(reply["rows"])
            request.done += request.part
            if request.left:
                self.pending.append(request)
            else:
                self._send("result", {**reply, "id": request.id, "rows": request.rows})
        self._send(
            "metrics",
            {
                "kind": "score",
                "answers": sum(r.part for r in requests),
                "requests": len(requests),
                "seconds": time.perf_counter() - started,
            },
        )

    def _waits_on_collection_work(self, request: _ScoreRequest) -> bool:
        """Refuse (422) a request, before its first slice, whose ranker would first compute
        something over the whole collection (``Ranker.collection_work``: a guard's calibration
        on every judged answer, minutes on a large collection): a synchronous request does
        not hold the worker for it; a job (or ``nrp validate``) computes it once, after which
        score requests are served."""
        if request.done:
            return False
        try:
            collection = self.pool.collection(request.payload["collection"])
            for spec in request.specs():
                work = self.pool.ranker(collection, spec).collection_work()
                if work is not None:  # a 422 as any library error's (server paths redacted)
                    refused = NrpError(
                        f"ranker {spec!r} would first be {work}, which a score request does not "
                        "wait for: submit a job with it once (POST /v1/jobs), or run nrp "
                        "validate with it, then score"
                    )
                    self._send("result", {"id": request.id, **self._error_reply(refused)})
                    return True
        except Exception as err:  # the request's own failure: its reply, as for scoring
            self._send("result", {"id": request.id, **self._error_reply(err)})
            return True
        return False

    def _score(
        self, requests: list[_ScoreRequest], spent: dict[str, tuple[float, int]]
    ) -> dict[str, dict[str, Any]]:
        """The reply to every request's slice (``score_requests``)."""
        payloads = [request.slice() for request in requests]
        return score_requests(self.pool, payloads, self.config.batch_max_size, spent)

    # -- jobs ------------------------------------------------------------------------------
    def _job_batch(self) -> bool:
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
    def _job_executor(self) -> engine.Executor | None:
        """The executor job units run on, made once (None: this process)."""
        if not self.executor_made:
            self.executor = api.make_executor(self.config.executor, self.config.ray_address or None)
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

    def _error_reply(self, err: Exception) -> dict[str, Any]:
        """A failed score request's reply: 422 with the library's message (server paths
        relative to their root), or 500 with an error id only (``nrp.service.disclosure``)."""
        if isinstance(err, NrpError):
            return {"ok": False, "status": 422, "error": self._public(err)}
        message, error_id = internal_error(log, "score request failed", err)
        return {"ok": False, "status": 500, "error": message, "error_id": error_id}

    def _public(self, err: NrpError) -> str:
        """The caller's line for a library error: a model the loader refused is the request
        checks' refusal (``ModelPlaces.refusal``: nothing of what the folder held, nor that it
        exists; the log keeps the loader's message); else the message, paths redacted."""
        if isinstance(err, ModelError):
            log.warning("model refused", extra={"fields": {"error": str(err)}})
            return ModelPlaces.of(self.config).refused(err)
        return redact_paths(str(err), self.config.server_roots)

    def _fail(self, job_id: str, err: Exception) -> None:
        """Mark the job failed; its error (which read tokens see) tells what ``_error_reply``
        would, the detail stays in the log."""
        if isinstance(err, NrpError):
            message = self._public(err)
            log.error(
                "job failed",
                extra={"fields": {"job_id": job_id, "error": str(err), "trace": trace(err)}},
            )
        else:
            message, _ = internal_error(log, "job failed", err, job_id=job_id)
        self.store.fail_job(job_id, message)
        self._send("metrics", {"kind": "job_failed"})

    def _finalize(self) -> bool:
        jobs = self.store.jobs_to_finalize()
        for job_id in jobs:
            job = self.store.get_job(job_id)
            if job is None:
                continue
            try:
                answers = self.store.job_answers(job_id)
                tables, info = job_tables(self.pool, job, answers, self.config.batch_max_size)
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


class Channel:
    """The worker's end of its socket to the server (``nrp.service.handle``) as the queue the
    ``Worker`` reads and writes: ``get`` / ``get_nowait`` raise ``queue.Empty`` when nothing
    came, and a server gone reads as ``stop``. A message is written at once by the thread
    that sends it (no feeder thread)."""

    def __init__(self, connection: Connection):
        self.connection = connection
        self.lock = threading.Lock()

    def get(self, timeout: float | None = None) -> tuple[str, dict[str, Any]]:
        try:
            if not self.connection.poll(timeout):
                raise queue.Empty
            return self.connection.recv()
        except (EOFError, OSError):
            return ("stop", {})

    def get_nowait(self) -> tuple[str, dict[str, Any]]:
        return self.get(0)

    def put(self, message: tuple[str, dict[str, Any]]) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self.lock:
            self.connection.send_bytes(data)


def worker_main(config_data: dict[str, Any], connection: Connection, parent_pid: int) -> None:
    """Entry point of the worker process (spawned by ``WorkerHandle``), ``connection`` its end
    of the socket to the server."""
    os.set_inheritable(connection.fileno(), False)  # no process the worker starts holds it
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    config = ServiceConfig.from_dict(config_data)
    if config.torch_threads:
        torch = lazy_libs.torch()

        torch.set_num_threads(config.torch_threads)
    from nrp.service.logs import setup_logging

    setup_logging(config.log_level, "worker")
    channel = Channel(connection)
    worker = Worker(config, channel, channel, parent_pid)

    def _stop(signum: int, frame: Any) -> None:
        worker.stopping = True

    signal.signal(signal.SIGTERM, _stop)
    try:
        worker.run()
    except Exception as err:
        log.error("worker crashed", extra={"fields": {"trace": trace(err)}})
        raise
