"""What the routes share: the service's settings, its job store, the worker handle, the request
planner and the metrics, as one ``Service`` object kept on ``app.state``.

Routes reach it through the ``ServiceDep`` dependency instead of closing over it, so they can
live in their own modules (``nrp.service.routes``) and the app is built from them in
``create_app``. ``open`` and ``close`` run with the app's lifespan: the store is opened and the
worker process started when the server starts, and stopped when it stops.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request

from nrp.service import inputs
from nrp.service.config import ServiceConfig
from nrp.service.leaderboard import Leaderboards
from nrp.service.metrics import SIZE_BUCKETS, Counter, Gauge, Histogram, Registry
from nrp.service.planning import RequestPlanner
from nrp.service.store import Store


class Service:
    """The state behind the routes: config, store, worker handle, collection views, metrics."""

    def __init__(self, config: ServiceConfig, start_worker: bool = True):
        self.config = config
        self.start_worker = start_worker
        self.store: Store | None = None
        self.worker: Any = None
        self.collections = inputs.Collections(config.indexes)
        self.planner = RequestPlanner(config, self.collections)
        self.leaderboards = Leaderboards(config.indexes)
        self.metrics = ServiceMetrics(self)
        self.shutting_down = False
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's (``open``)

    def require_store(self) -> Store:
        """The open store (503 while the service starts)."""
        if self.store is None:
            raise HTTPException(503, "store not open")
        return self.store

    @property
    def worker_ready(self) -> bool:
        return bool(self.worker is not None and self.worker.alive and self.worker.ready.is_set())

    def get_job(self, job_id: str) -> dict[str, Any]:
        job = self.require_store().get_job(job_id)
        if job is None:
            raise HTTPException(404, f"unknown job {job_id!r}")
        return job

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Open the store and start the worker, whose socket ``loop`` serves (called from
        another thread: it waits for the loop)."""
        self.loop = loop
        self.store = Store(self.config.store_url)
        if self.start_worker:
            from nrp.service.handle import WorkerHandle

            self.worker = WorkerHandle(self.config, loop, self.metrics.on_worker_metrics)
            self.worker.start()

    def begin_shutdown(self) -> None:
        """SIGTERM or Ctrl-C (on the event loop): new score requests get ``503`` and the worker
        serves those in hand for half of ``shutdown_timeout_s``, then answers the rest ``503``,
        so that every request in flight is answered before the server's graceful wait ends."""
        if self.shutting_down:
            return
        self.shutting_down = True
        if self.worker is not None:
            self.worker.drain(self.config.shutdown_timeout_s / 2)

    def shutdown_soon(self) -> None:
        """``begin_shutdown`` on the event loop (from a signal handler or another thread)."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.begin_shutdown)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop(self.config.shutdown_timeout_s)
        if self.store is not None:
            self.store.close()


async def service_of(request: Request) -> Service:
    """The app's ``Service`` (a dependency of every route that needs it)."""
    return request.app.state.service


ServiceDep = Annotated[Service, Depends(service_of)]


class ServiceMetrics:
    """The service's Prometheus metrics (``GET /metrics``): requests, jobs, worker batches, and
    gauges read from the store and the worker handle when scraped."""

    def __init__(self, service: Service):
        self.registry = r = Registry()
        self.requests = r.add(
            Counter(
                "nrp_http_requests_total",
                "HTTP requests by method, route and status",
                ("method", "route", "status"),
            )
        )
        self.latency = r.add(
            Histogram(
                "nrp_http_request_duration_seconds", "HTTP request latency", labels=("route",)
            )
        )
        self.jobs_submitted = r.add(Counter("nrp_jobs_submitted_total", "jobs accepted"))
        self.jobs_finished = r.add(
            Counter("nrp_jobs_finished_total", "jobs finished by the worker", ("status",))
        )
        self.score_answers = r.add(
            Counter("nrp_score_answers_total", "answers scored by POST /v1/score")
        )
        self.batches = r.add(Counter("nrp_worker_batches_total", "worker batches", ("kind",)))
        self.batch_answers = r.add(
            Histogram(
                "nrp_worker_batch_answers", "answers per worker batch", SIZE_BUCKETS, ("kind",)
            )
        )
        self.batch_seconds = r.add(
            Histogram("nrp_worker_batch_seconds", "time per worker batch", labels=("kind",))
        )
        self.pool: dict[str, float] = {}  # the worker's last pool usage (``PoolUsage``)
        self._add_gauges(service)

    def _add_gauges(self, service: Service) -> None:
        r = self.registry
        r.add(
            Gauge(
                "nrp_jobs",
                "jobs in the store by status",
                lambda: [((s,), n) for s, n in service.require_store().status_counts().items()],
                ("status",),
            )
        )
        r.add(
            Gauge(
                "nrp_units_queued",
                "units of work waiting for the worker",
                lambda: [((), service.require_store().queued_units())],
            )
        )
        r.add(
            Gauge(
                "nrp_worker_up",
                "1 when the worker process is alive and ready",
                lambda: [((), 1.0 if service.worker_ready else 0.0)],
            )
        )
        r.add(
            Gauge(
                "nrp_worker_restarts",
                "times the worker was restarted after dying",
                lambda: [((), float(service.worker.restarts if service.worker else 0))],
            )
        )
        for field, help_text in (
            ("entries", "rankers and evaluators the worker's pool holds"),
            ("bytes", "their estimated memory, each loaded model counted once"),
            ("models", "distinct loaded models among them"),
            ("evictions", "pool entries dropped to stay within the limits"),
        ):
            r.add(
                Gauge(
                    f"nrp_worker_pool_{field}",
                    help_text,
                    lambda field=field: [((), self.pool[field])] if field in self.pool else [],
                )
            )

    def on_worker_metrics(self, payload: dict[str, Any]) -> None:
        """A ``metrics`` message of the worker: a batch done, a job finished or failed."""
        kind = payload.get("kind", "")
        if kind in ("job", "score"):
            self.batches.inc(1, kind)
            self.batch_answers.observe(float(payload.get("answers", 0)), kind)
            self.batch_seconds.observe(float(payload.get("seconds", 0)), kind)
        elif kind == "job_done":
            self.jobs_finished.inc(1, "done")
        elif kind == "job_failed":
            self.jobs_finished.inc(1, "failed")
        elif kind == "pool":
            self.pool = {k: float(v) for k, v in payload.items() if k != "kind"}
