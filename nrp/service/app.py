"""The HTTP API of ``nrp serve`` (FastAPI): collections, jobs, synchronous scores, leaderboard,
health, readiness and metrics, over the same library functions as the CLI.

Routes (all under ``/v1`` but the operational ones; scopes in brackets):

- ``GET /v1/collections`` [read], ``GET /v1/collections/{name}`` [read]: ``nrp collections`` and
  ``nrp info --json``; ``POST /v1/collections`` [admin]: ingest a manifest that lies in a data
  root (``nrp ingest``).
- ``POST /v1/jobs`` [admin]: score an answer set (inline or a file in a data root) with rankers
  and evaluators; 202 with the job. ``Idempotency-Key`` makes a retry return the same job (a
  different body under the same key is a 409). ``GET /v1/jobs`` and ``GET /v1/jobs/{id}``
  [read]: status and progress; ``GET /v1/jobs/{id}/results`` [read]: pages of JSON rows or the
  whole table streamed as CSV; ``DELETE /v1/jobs/{id}`` [admin]: cancel.
- ``POST /v1/score`` [read]: a few answers scored now by the worker from cached document
  scores; stores nothing.
- ``GET /v1/leaderboard?collection=NAME`` [read]: ``summarize`` over the NRP rows of the
  collection's finished jobs (an answer scored by several jobs counts once, from the latest).
- ``GET /healthz`` (the process answers), ``GET /readyz`` (store reachable and worker ready),
  both without a token for probes; ``GET /metrics`` [read]: Prometheus text.

Why these choices: every request check happens here before anything is stored (a 4xx names the
problem in one line under ``detail``); handlers that touch the store or read files are plain
functions, which FastAPI runs in its thread pool, so the event loop only waits; the body limit is
an ASGI middleware that refuses by ``Content-Length`` and also counts streamed bodies, so no
handler ever holds more than ``max_body_bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nrp import __version__
from nrp.errors import NrpError
from nrp.service import inputs
from nrp.service.config import ServiceConfig
from nrp.service.metrics import SIZE_BUCKETS, Counter, Gauge, Histogram, Registry
from nrp.service.store import ACTIVE, DONE, Store, frame_of

log = logging.getLogger("nrp.service")

TieRule = Literal["mid", "optimistic", "pessimistic", "strict"]
References = Literal["auto", "collection", "pseudo", "none"]
# module level: the route signatures' annotations are strings FastAPI resolves in this module
BEARER = HTTPBearer(auto_error=False, description="API token (scope admin or read)")


# -- request and response bodies -------------------------------------------------------------------
class AnswerIn(BaseModel):
    """One generated answer, as a row of an answer file (``nrp.nrp.answers``)."""

    model_config = ConfigDict(extra="allow")
    answer_id: str | int | None = None
    llm: str | int
    prompt: str | int
    qid: str | int
    sample: int | None = None
    text: str


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collection: str = Field(description="name of a built collection")
    answers: list[AnswerIn] | None = Field(
        None, description="the answers (or answers_path: a file or folder in a data root)"
    )
    answers_path: str | None = Field(
        None, description="answer file or folder, relative to a data root of the server"
    )
    rankers: str | dict[str, str] | None = Field(
        None,
        description="one ranker spec for every dimension, a mapping dimension -> spec, or "
        "'validation' (the collection's validation.json choice per dimension)",
    )
    evaluators: str | list[str] | None = Field(
        None, description="evaluator specs, comma-separated or a list, e.g. 'bleu,rouge'"
    )
    references: References = "auto"
    ties: TieRule = "mid"
    frozen_stats: bool = False
    full_rerank: bool = False
    weights: dict[str, float] | None = None
    skip_invalid: bool = False


class ScoreAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer_id: str | None = None
    llm: str = ""
    prompt: str = ""
    qid: str | int
    sample: int = 0
    text: str = Field(min_length=1)


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    collection: str
    rankers: str | dict[str, str]
    answers: list[ScoreAnswer] = Field(min_length=1)
    ties: TieRule = "mid"
    frozen_stats: bool = False
    full_rerank: bool = False
    weights: dict[str, float] | None = None


class IngestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    manifest: str = Field(description="manifest path relative to a data root")
    name: str | None = None
    force: bool = False


class Progress(BaseModel):
    units_done: int
    units_total: int
    answers: int
    fraction: float


class JobOut(BaseModel):
    id: str
    collection: str
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    created_at: float
    started_at: float | None
    finished_at: float | None
    progress: Progress
    requeued: int
    error: str | None
    params: dict[str, Any]
    info: dict[str, Any]
    results: dict[str, str]


class ResultsPage(BaseModel):
    job_id: str
    table: str
    columns: list[str]
    total: int
    offset: int
    limit: int
    next_offset: int | None
    rows: list[dict[str, Any]]


class ScoreOut(BaseModel):
    collection: str
    rankers: dict[str, str]
    columns: list[str]
    results: list[dict[str, Any]]
    skipped: list[dict[str, Any]]


class LeaderboardOut(BaseModel):
    collection: str
    jobs: list[str]
    answers: int
    settings: dict[str, Any]
    rows: list[dict[str, Any]]
    warnings: list[str]


# -- body size limit -------------------------------------------------------------------------------
class BodyTooLarge(HTTPException):
    def __init__(self, limit: int):
        super().__init__(413, f"request body larger than {limit} bytes")


class BodyLimit:
    """413 for a body over ``limit`` bytes: by Content-Length at once, else while it streams."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            status = 413 if length.isdigit() else 400
            detail = str(BodyTooLarge(self.limit).detail) if status == 413 else "bad length"
            await JSONResponse({"detail": detail}, status_code=status)(scope, receive, send)
            return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except BodyTooLarge as err:
            if started:
                raise
            await JSONResponse({"detail": err.detail}, status_code=413)(scope, receive, send)


# -- request logs and metrics ----------------------------------------------------------------------
class Observe:
    """One structured log line and the request metrics per request; echoes X-Request-ID."""

    def __init__(self, app: ASGIApp, service: Service):
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:64] or uuid.uuid4().hex
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (b"x-request-id", request_id.encode("latin-1")),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - start
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.service.requests.inc(1, scope["method"], template, str(status))
            self.service.latency.observe(elapsed, template)
            if template not in ("/healthz", "/readyz", "/metrics"):
                log.info(
                    "request",
                    extra={
                        "fields": {
                            "request_id": request_id,
                            "method": scope["method"],
                            "path": scope["path"],
                            "route": template,
                            "status": status,
                            "duration_ms": round(elapsed * 1000, 3),
                            "client": (scope.get("client") or ("", 0))[0],
                        }
                    },
                )


# -- the service ---------------------------------------------------------------------------------
class Service:
    """The state behind the routes: config, store, worker handle, collection views, metrics."""

    def __init__(self, config: ServiceConfig, start_worker: bool = True):
        self.config = config
        self.start_worker = start_worker
        self.store: Store | None = None
        self.worker: Any = None
        self.collections = inputs.Collections(config.indexes)
        self.leaderboards: dict[tuple, dict[str, Any]] = {}
        # ranker spec as sent -> canonical spec (checked once; specs name no collection state)
        self.canonical_specs: dict[str, str] = {}
        self.registry = Registry()
        r = self.registry
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
        r.add(
            Gauge(
                "nrp_jobs",
                "jobs in the store by status",
                lambda: [((s,), n) for s, n in self._store().status_counts().items()],
                ("status",),
            )
        )
        r.add(
            Gauge(
                "nrp_units_queued",
                "units of work waiting for the worker",
                lambda: [((), self._store().queued_units())],
            )
        )
        r.add(
            Gauge(
                "nrp_worker_up",
                "1 when the worker process is alive and ready",
                lambda: [((), 1.0 if self.worker_ready else 0.0)],
            )
        )
        r.add(
            Gauge(
                "nrp_worker_restarts",
                "times the worker was restarted after dying",
                lambda: [((), float(self.worker.restarts if self.worker else 0))],
            )
        )

    def _store(self) -> Store:
        if self.store is None:
            raise HTTPException(503, "store not open")
        return self.store

    @property
    def worker_ready(self) -> bool:
        return bool(self.worker is not None and self.worker.alive and self.worker.ready.is_set())

    def on_worker_metrics(self, payload: dict[str, Any]) -> None:
        kind = payload.get("kind", "")
        if kind in ("job", "score"):
            self.batches.inc(1, kind)
            self.batch_answers.observe(float(payload.get("answers", 0)), kind)
            self.batch_seconds.observe(float(payload.get("seconds", 0)), kind)
        elif kind == "job_done":
            self.jobs_finished.inc(1, "done")
        elif kind == "job_failed":
            self.jobs_finished.inc(1, "failed")

    def open(self) -> None:
        self.store = Store(self.config.store_url)
        if self.start_worker:
            from nrp.service.worker import WorkerHandle

            self.worker = WorkerHandle(self.config, self.on_worker_metrics)
            self.worker.start()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop(self.config.shutdown_timeout_s)
        if self.store is not None:
            self.store.close()

    # -- jobs ----------------------------------------------------------------------------------
    def job_view(self, job: dict[str, Any]) -> dict[str, Any]:
        progress = self._store().progress(job["id"])
        total = progress["units_total"]
        done = progress["units_done"]
        fraction = 1.0 if job["status"] == DONE else (done / total if total else 0.0)
        tables = job["info"].get("tables", {}) if job["status"] == DONE else {}
        return {
            "id": job["id"],
            "collection": job["collection"],
            "status": job["status"],
            "created_at": job["created_at"],
            "started_at": job["started_at"],
            "finished_at": job["finished_at"],
            "progress": {
                "units_done": done,
                "units_total": total,
                "answers": int(job["n_answers"]),
                "fraction": round(fraction, 6),
            },
            "requeued": int(job["requeued"]),
            "error": job["error"],
            "params": job["params"],
            "info": {k: v for k, v in job["info"].items() if k != "tables"},
            "results": {name: f"/v1/jobs/{job['id']}/results?table={name}" for name in tables},
        }

    def get_job(self, job_id: str) -> dict[str, Any]:
        job = self._store().get_job(job_id)
        if job is None:
            raise HTTPException(404, f"unknown job {job_id!r}")
        return job

    def plan_job(self, body: JobRequest) -> tuple[dict[str, Any], Any, list[dict[str, Any]]]:
        """Parameters, answers and units of a job request (every check done here)."""
        config = self.config
        view = self.collections.get(body.collection)
        if (body.answers is None) == (body.answers_path is None):
            raise inputs.RequestError(422, "give exactly one of answers and answers_path")
        skipped: list[str] = []
        if body.answers is not None:
            records = [a.model_dump(exclude_none=True) for a in body.answers]
            answers, skipped = inputs.answers_from_records(records, view.qids, body.skip_invalid)
        else:
            from nrp.nrp.answers import read_answers

            path = inputs.resolve_in_roots(body.answers_path or "", config.data_roots, "answers")
            answer_set = read_answers(path, view.qids, skip_invalid=body.skip_invalid)
            answers = answer_set.answers
            skipped = [str(row) for row in answer_set.skipped]
        rankers = self._rankers(body.rankers, view)
        evaluators = self._evaluators(body.evaluators)
        if not rankers and not evaluators:
            raise inputs.RequestError(422, "give rankers, evaluators or both")
        weights = None
        if rankers:
            from nrp.nrp.scoring import normalised_weights

            normalised_weights(body.weights, list(rankers))  # checks them
            weights = body.weights
            self._check_answer_ids(answers, view)
        elif body.weights:
            raise inputs.RequestError(422, "weights combine rankers' NRP: give rankers too")
        params = {
            "rankers": rankers,
            "evaluators": evaluators,
            "references": body.references,
            "ties": body.ties,
            "frozen_stats": body.frozen_stats,
            "full_rerank": body.full_rerank,
            "weights": weights,
            "answers_skipped_on_input": skipped,
        }
        if body.answers_path is not None:
            params["answers_path"] = body.answers_path
        units = inputs.plan_units(
            view,
            answers,
            rankers,
            evaluators,
            body.frozen_stats,
            body.full_rerank,
            body.references,
        )
        return params, answers, units

    def _rankers(self, choice: str | dict[str, str] | None, view: Any) -> dict[str, str]:
        if choice is None:
            return {}
        collection = view.collection
        dimensions = list(collection.dimensions)
        if isinstance(choice, str) and choice.strip() == "validation":
            from nrp.validation.result import ValidationResult

            path = collection.path / "validation.json"
            if not path.is_file():
                raise inputs.RequestError(
                    422, f"collection {view.name!r} has no validation.json (run nrp validate)"
                )
            chosen = ValidationResult.from_json(path).chosen()
            if not chosen:
                raise inputs.RequestError(422, "the validation chose no ranker for any dimension")
        elif isinstance(choice, str):
            chosen = dict.fromkeys(dimensions, choice)
        else:
            if not choice:
                raise inputs.RequestError(422, "rankers: an empty mapping")
            unknown = [d for d in choice if d not in dimensions]
            if unknown:
                raise inputs.RequestError(
                    422,
                    f"rankers: unknown dimension(s) {', '.join(unknown)} of collection "
                    f"{view.name!r} (it has: {', '.join(dimensions)})",
                )
            chosen = dict(choice)
        roots, indexes = self.config.data_roots, self.config.indexes
        for spec in dict.fromkeys(chosen.values()):
            if spec not in self.canonical_specs:
                self.canonical_specs[spec] = inputs.canonical_ranker(spec, roots, indexes)
        return {d: self.canonical_specs[s] for d, s in chosen.items()}

    def _evaluators(self, choice: str | list[str] | None) -> list[str]:
        if not choice:
            return []
        from nrp.spec import split_specs

        specs = split_specs(choice) if isinstance(choice, str) else [s.strip() for s in choice]
        checked = [
            inputs.canonical_evaluator(s, self.config.data_roots, self.config.indexes)
            for s in specs
            if s
        ]
        if len(set(checked)) != len(checked):
            raise inputs.RequestError(422, "evaluators: the same spec twice")
        return checked

    @staticmethod
    def _check_answer_ids(answers: Any, view: Any) -> None:
        for answer_id, qid in zip(answers["answer_id"], answers["qid"], strict=True):
            if str(answer_id) in view.docnos.get(str(qid), ()):
                raise inputs.RequestError(
                    422,
                    f"answer id {answer_id!r} is also a document of query {qid}: answer ids "
                    "name the injected row and must differ from the query's docnos",
                )

    # -- synchronous scores --------------------------------------------------------------------
    def prepare_score(self, body: ScoreRequest) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        if len(body.answers) > self.config.score_max_answers:
            raise inputs.RequestError(
                422,
                f"POST /v1/score takes at most {self.config.score_max_answers} answers "
                f"({len(body.answers)} given); submit a job for more",
            )
        view = self.collections.get(body.collection)
        rankers = self._rankers(body.rankers, view)
        from nrp.nrp.scoring import normalised_weights

        normalised_weights(body.weights, list(rankers))
        rows, skipped, seen = [], [], set()
        for number, answer in enumerate(body.answers):
            qid = str(answer.qid)
            answer_id = answer.answer_id or f"answer{number}"
            if qid not in view.qids:
                raise inputs.RequestError(
                    422, f"answers[{number}]: qid {qid!r} is not a topic of {view.name!r}"
                )
            if not answer.text.strip():
                raise inputs.RequestError(422, f"answers[{number}]: text is empty")
            if answer_id in seen:
                raise inputs.RequestError(422, f"answers[{number}]: duplicate id {answer_id!r}")
            seen.add(answer_id)
            ranked = view.dq_size.get(qid, 0) > 0
            if not ranked:
                skipped.append(
                    {"answer_id": answer_id, "qid": qid, "reason": "no judged documents with text"}
                )
            rows.append(
                {
                    "answer_id": answer_id,
                    "llm": answer.llm,
                    "prompt": answer.prompt,
                    "qid": qid,
                    "sample": answer.sample,
                    "text": answer.text,
                    "ranked": ranked,
                }
            )
        frame = {"answer_id": [r["answer_id"] for r in rows], "qid": [r["qid"] for r in rows]}
        import pandas as pd

        self._check_answer_ids(pd.DataFrame(frame), view)
        payload = {
            "id": uuid.uuid4().hex,
            "collection": view.name,
            "rankers": rankers,
            "answers": rows,
            "ties": body.ties,
            "frozen_stats": body.frozen_stats,
            "full_rerank": body.full_rerank,
            "weights": body.weights,
        }
        return payload, skipped

    # -- leaderboard ---------------------------------------------------------------------------
    def leaderboard(self, collection: str) -> dict[str, Any]:
        import pandas as pd

        from nrp.nrp.report_tables import records
        from nrp.nrp.summary import summarize

        inputs.check_collection_name(collection, self.config.indexes)
        store = self._store()
        jobs = [
            j
            for j in store.list_jobs(collection=collection, status=DONE, limit=100_000)
            if "nrp" in j["info"].get("tables", {})
        ]
        key = (collection, tuple(j["id"] for j in jobs))
        if key in self.leaderboards:
            return self.leaderboards[key]
        frames = [
            store.result_frame(j["id"], "nrp", j["info"]["tables"]["nrp"]).assign(_job=n)
            for n, j in enumerate(jobs)
        ]
        frames = [f for f in frames if len(f)]
        if not frames:
            result = {
                "collection": collection,
                "jobs": [],
                "answers": 0,
                "settings": {},
                "rows": [],
                "warnings": ["no finished job with NRP results for this collection"],
            }
        else:
            combined = pd.concat(frames, ignore_index=True)
            # an answer scored by several jobs counts once: the latest job's row
            combined = combined.drop_duplicates(
                ["answer_id", "dimension", "ranker"], keep="last"
            ).drop(columns="_job")
            summary = summarize(combined)
            result = {
                "collection": collection,
                "jobs": [j["id"] for j in jobs],
                "answers": int(combined["answer_id"].nunique()),
                "settings": summary.settings,
                "rows": records(summary.means),
                "warnings": list(summary.warnings),
            }
        self.leaderboards = {key: result}
        return result


def _results_frame_stream(
    store: Store, job_id: str, table: str, schema: dict[str, Any], chunk: int = 5000
) -> Iterator[bytes]:
    offset = 0
    while True:
        rows = store.result_rows(job_id, table, offset, chunk)
        if not rows and offset:
            return
        frame = frame_of(rows, schema)
        yield frame.to_csv(index=False, header=offset == 0).encode("utf-8")
        if len(rows) < chunk:
            return
        offset += chunk


# -- the app -------------------------------------------------------------------------------------
def create_app(config: ServiceConfig, start_worker: bool = True) -> FastAPI:
    """The FastAPI app for ``config``; the worker process starts with the app's lifespan."""
    service = Service(config, start_worker)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(service.open)
        log.info(
            "service started",
            extra={
                "fields": {
                    "version": __version__,
                    "store": service.store.dialect if service.store else None,
                    "auth": config.auth,
                    "data_roots": [str(r) for r in config.data_roots],
                }
            },
        )
        try:
            yield
        finally:
            log.info("service stopping")
            await run_in_threadpool(service.close)
            log.info("service stopped")

    app = FastAPI(
        title="nrp service",
        version=__version__,
        description="Normalized Rank Position scoring of generated answers over HTTP: "
        "collections, jobs, synchronous scores and leaderboards. Send "
        "`Authorization: Bearer TOKEN` (scope read or admin) to every /v1 route and /metrics.",
        lifespan=lifespan,
    )
    app.state.service = service

    def require(scope: str) -> Any:
        def check(
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
        ) -> str:
            if not config.auth:
                return "admin"
            if credentials is None or credentials.scheme.lower() != "bearer":
                raise HTTPException(
                    401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"}
                )
            found = config.tokens.scope_of(credentials.credentials)
            if found is None:
                challenge = 'Bearer error="invalid_token"'
                raise HTTPException(401, "invalid token", headers={"WWW-Authenticate": challenge})
            if scope == "admin" and found != "admin":
                raise HTTPException(403, "this token's scope (read) does not allow this request")
            return found

        return Depends(check)

    read = require("read")
    admin = require("admin")

    @app.exception_handler(inputs.RequestError)
    async def _request_error(request: Request, err: inputs.RequestError) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, status_code=err.status)

    @app.exception_handler(NrpError)
    async def _nrp_error(request: Request, err: NrpError) -> JSONResponse:
        # bad input, a bad spec or option (ConfigError): the request cannot be served as sent
        return JSONResponse({"detail": str(err)}, status_code=422)

    # -- operations ----------------------------------------------------------------------------
    @app.get("/healthz", tags=["operations"], summary="the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], summary="store reachable and worker ready")
    def readyz(response: Response) -> dict[str, Any]:
        store_ok = service.store is not None and service.store.ping()
        worker_ok = service.worker_ready or not service.start_worker
        ready = store_ok and worker_ok
        response.status_code = 200 if ready else 503
        worker = service.worker
        return {
            "status": "ready" if ready else "not ready",
            "store": "ok" if store_ok else "unreachable",
            "worker": "ready" if worker_ok else "starting or down",
            "worker_pid": worker.info.get("pid") if worker is not None else None,
        }

    @app.get(
        "/metrics",
        tags=["operations"],
        summary="Prometheus metrics (text format 0.0.4)",
        response_class=PlainTextResponse,
        dependencies=[read],
    )
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(
            service.registry.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    # -- collections ---------------------------------------------------------------------------
    @app.get("/v1/collections", tags=["collections"], dependencies=[read])
    def list_collections_route() -> dict[str, list[dict[str, Any]]]:
        from nrp.collection.collection import Collection, list_collections

        out = []
        for name in list_collections(config.indexes):
            collection = Collection(config.indexes / name)
            out.append(
                {
                    "name": name,
                    "built_at": collection.meta.get("built_at"),
                    "dimensions": list(collection.dimensions),
                    "counts": collection.meta.get("counts", {}),
                }
            )
        return {"collections": out}

    @app.get("/v1/collections/{name}", tags=["collections"], dependencies=[read])
    def collection_info_route(name: str) -> dict[str, Any]:
        from nrp.collection.info import collection_info

        return collection_info(service.collections.get(name).collection)

    @app.post(
        "/v1/collections",
        tags=["collections"],
        status_code=201,
        dependencies=[admin],
        responses={200: {"description": "inputs unchanged: nothing rebuilt"}},
    )
    def ingest_route(body: IngestRequest, response: Response) -> dict[str, Any]:
        from nrp.collection.build import ingest

        manifest = inputs.check_manifest(body.manifest, config.data_roots)
        result = ingest(manifest, body.name, config.indexes, None, body.force)
        response.status_code = 201 if result.rebuilt else 200
        log.info("ingest", extra={"fields": {"collection": result.name, "rebuilt": result.rebuilt}})
        return {
            "name": result.name,
            "rebuilt": result.rebuilt,
            "fingerprint": result.fingerprint,
            "counts": result.counts,
            "warnings": result.warnings,
        }

    # -- jobs ----------------------------------------------------------------------------------
    @app.post(
        "/v1/jobs",
        tags=["jobs"],
        status_code=202,
        response_model=JobOut,
        dependencies=[admin],
        responses={409: {"description": "Idempotency-Key reused with a different request"}},
    )
    def submit_job(
        body: JobRequest,
        response: Response,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> dict[str, Any]:
        store = service._store()
        sha = inputs.request_sha(body.model_dump())
        if idempotency_key is not None:
            existing = store.job_by_key(idempotency_key)
            if existing is not None:
                return _replay(existing, sha, response)
        params, answers, units = service.plan_job(body)
        job, created = store.create_job(
            uuid.uuid4().hex, body.collection, params, sha, idempotency_key, answers, units
        )
        if not created:
            return _replay(job, sha, response)
        service.jobs_submitted.inc()
        if service.worker is not None:
            service.worker.wake()
        response.headers["Location"] = f"/v1/jobs/{job['id']}"
        log.info(
            "job submitted",
            extra={"fields": {"job_id": job["id"], "answers": len(answers), "units": len(units)}},
        )
        return service.job_view(job)

    def _replay(job: dict[str, Any], sha: str, response: Response) -> dict[str, Any]:
        if job["request_sha"] != sha:
            raise HTTPException(409, "Idempotency-Key already used for a different request body")
        response.headers["Idempotent-Replayed"] = "true"
        response.headers["Location"] = f"/v1/jobs/{job['id']}"
        return service.job_view(job)

    @app.get("/v1/jobs", tags=["jobs"], dependencies=[read])
    def list_jobs(
        collection: str | None = None,
        status: Literal["queued", "running", "done", "failed", "cancelled"] | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> dict[str, list[JobOut]]:
        jobs = service._store().list_jobs(collection, status, limit, offset)
        return {"jobs": [service.job_view(j) for j in jobs]}  # type: ignore[misc]

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobOut, dependencies=[read])
    def get_job(job_id: str) -> dict[str, Any]:
        return service.job_view(service.get_job(job_id))

    @app.delete(
        "/v1/jobs/{job_id}",
        tags=["jobs"],
        response_model=JobOut,
        dependencies=[admin],
        responses={409: {"description": "the job already finished"}},
    )
    def cancel_job(job_id: str) -> dict[str, Any]:
        job = service.get_job(job_id)
        status = service._store().cancel_job(job_id)
        if status != "cancelled" or job["status"] not in ACTIVE:
            raise HTTPException(
                409, f"job {job_id} is {status}: only a queued or running job can be cancelled"
            )
        log.info("job cancelled", extra={"fields": {"job_id": job_id}})
        return service.job_view(service.get_job(job_id))

    @app.get(
        "/v1/jobs/{job_id}/results",
        tags=["jobs"],
        response_model=ResultsPage,
        dependencies=[read],
        responses={
            200: {"content": {"text/csv": {}}, "description": "a page of rows, or the CSV"},
            409: {"description": "the job has not finished"},
        },
    )
    def job_results(
        job_id: str,
        table: str = "nrp",
        format: Literal["json", "csv"] = "json",
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1)] = 1000,
    ) -> Any:
        job = service.get_job(job_id)
        if job["status"] != DONE:
            raise HTTPException(409, f"job {job_id} is {job['status']}: results come when done")
        tables = job["info"].get("tables", {})
        if table not in tables:
            raise HTTPException(
                404, f"job {job_id} has no table {table!r} (it has: {', '.join(tables)})"
            )
        store = service._store()
        schema = tables[table]
        if format == "csv":
            return StreamingResponse(
                _results_frame_stream(store, job_id, table, schema),
                media_type="text/csv; charset=utf-8",
                headers={"Content-Disposition": f'attachment; filename="{job_id}-{table}.csv"'},
            )
        limit = min(limit, config.results_page_max)
        total = store.result_count(job_id, table)
        rows = store.result_rows(job_id, table, offset, limit)
        columns = schema["columns"]
        end = offset + len(rows)
        return {
            "job_id": job_id,
            "table": table,
            "columns": columns,
            "total": total,
            "offset": offset,
            "limit": limit,
            "next_offset": end if end < total else None,
            "rows": [dict(zip(columns, row, strict=True)) for row in rows],
        }

    # -- synchronous scores --------------------------------------------------------------------
    @app.post(
        "/v1/score",
        tags=["score"],
        response_model=ScoreOut,
        dependencies=[read],
        responses={503: {"description": "the worker is not ready"}},
    )
    async def score(body: ScoreRequest) -> dict[str, Any]:
        payload, skipped = await run_in_threadpool(service.prepare_score, body)
        if not service.worker_ready:
            raise HTTPException(503, "the worker is not ready yet", headers={"Retry-After": "1"})
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()

        def deliver(reply: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(lambda: future.done() or future.set_result(reply))

        service.worker.submit(payload, deliver)
        try:
            reply = await asyncio.wait_for(future, config.score_timeout_s)
        except TimeoutError:
            service.worker.forget(payload["id"])
            raise HTTPException(504, "the worker did not answer in time") from None
        if not reply.get("ok"):
            raise HTTPException(int(reply.get("status", 500)), reply.get("error", "failed"))
        columns = reply["columns"]
        service.score_answers.inc(len(payload["answers"]))
        return {
            "collection": payload["collection"],
            "rankers": payload["rankers"],
            "columns": columns,
            "results": [dict(zip(columns, row, strict=True)) for row in reply["rows"]],
            "skipped": skipped,
        }

    # -- leaderboard ---------------------------------------------------------------------------
    @app.get(
        "/v1/leaderboard", tags=["leaderboard"], response_model=LeaderboardOut, dependencies=[read]
    )
    def leaderboard(
        collection: str,
        dimension: str | None = None,
        ranker: str | None = None,
    ) -> dict[str, Any]:
        result = service.leaderboard(collection)
        rows = [
            r
            for r in result["rows"]
            if (dimension is None or r["dimension"] == dimension)
            and (ranker is None or r["ranker"] == ranker)
        ]
        return {**result, "rows": rows}

    app.add_middleware(Observe, service=service)
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "X-Request-ID"],
        )
    return app


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app (it does not depend on the settings)."""
    return create_app(ServiceConfig(auth=False), start_worker=False).openapi()


def serve(config: ServiceConfig) -> None:
    """Run the service with uvicorn until SIGINT/SIGTERM (graceful: requests in flight are
    answered, the worker finishes its batch)."""
    import uvicorn

    from nrp.service.logs import setup_logging

    setup_logging(config.log_level, "server")
    app = create_app(config)
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(config.shutdown_timeout_s),
        server_header=False,
    )


__all__ = ["Service", "create_app", "openapi_document", "serve"]
