"""The HTTP API of ``nrp serve`` (FastAPI): collections, jobs, synchronous scores, leaderboard,
health, readiness and metrics, over the same library API (``nrp.api``) as the CLI.

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
- The review app (``nrp.service.routes.review``): ``GET /review/`` (the page), ``/v1/review/...``
  [review/NAME, a reviewer's token; admin reads progress], over the ``review_projects`` files.
- ``GET /healthz`` (the process answers), ``GET /readyz`` (store reachable and worker ready),
  both without a token for probes; ``GET /metrics`` [read]: Prometheus text.

Where things are: the routes in ``nrp.service.routes`` (one router per resource), request and
response bodies in ``nrp.service.schemas``, tokens and scopes in ``nrp.service.auth``, request
checks in ``nrp.service.planning`` and ``nrp.service.inputs``, the body limit and request logs
in ``nrp.service.middleware``, the shared state in ``nrp.service.state``. This module puts them
together. Every request check happens before anything is stored (a 4xx names the problem in one
line under ``detail``); the body limit refuses by ``Content-Length`` and also counts streamed
bodies, so no handler ever holds more than ``max_body_bytes``. A request without a valid token
gets its 401 before its body is read. What errors may say is ``nrp.service.disclosure``'s rule:
a library error (422) names server files relative to their root, an unexpected one (500) only
an error id; docs/security.md describes the whole threat model.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from nrp.errors import ModelError, NrpError
from nrp.service.config import ServiceConfig
from nrp.service.disclosure import internal_error, redact_paths
from nrp.service.inputs import ModelPlaces, RequestError
from nrp.service.middleware import Authenticate, BodyLimit, Observe
from nrp.service.routes import ROUTERS
from nrp.service.routes.review import open_desks
from nrp.service.state import Service
from nrp.version import __version__

log = logging.getLogger("nrp.service")

DESCRIPTION = (
    "Normalized Rank Position scoring of generated answers over HTTP: "
    "collections, jobs, synchronous scores and leaderboards. Send "
    "`Authorization: Bearer TOKEN` (scope read or admin; review/NAME for the review app) to "
    "every /v1 route and /metrics."
)


def create_app(config: ServiceConfig, start_worker: bool = True) -> FastAPI:
    """The FastAPI app for ``config``; the worker process starts with the app's lifespan."""
    service = Service(config, start_worker)
    app = FastAPI(
        title="nrp service", version=__version__, description=DESCRIPTION, lifespan=_lifespan
    )
    app.state.service = service
    app.state.auth_config = config
    app.state.review_desks = open_desks(config.review_projects)
    app.add_exception_handler(RequestError, _request_error)  # type: ignore[arg-type]
    app.add_exception_handler(NrpError, _nrp_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(Authenticate, config=config)
    app.add_middleware(Observe, metrics=service.metrics)
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "X-Request-ID"],
        )
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the store and start the worker; on shutdown stop the worker, close the store."""
    service: Service = app.state.service
    config = service.config
    await run_in_threadpool(service.open, asyncio.get_running_loop())
    for warning in config.startup_warnings():
        log.warning(warning)
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


async def _request_error(request: Request, err: RequestError) -> JSONResponse:
    return JSONResponse({"detail": str(err)}, status_code=err.status)


async def _nrp_error(request: Request, err: NrpError) -> JSONResponse:
    # bad input, a bad spec or option (ConfigError): the request cannot be served as sent; the
    # library's message names server files, which the caller knows relative to a root; a model
    # the library refused is a model the server does not offer, nothing more (the worker's rule)
    config = request.app.state.service.config
    if isinstance(err, ModelError):
        log.warning("model refused", extra={"fields": {"error": str(err)}})
        return JSONResponse({"detail": ModelPlaces.of(config).refused(err)}, status_code=422)
    return JSONResponse({"detail": redact_paths(str(err), config.server_roots)}, status_code=422)


async def _internal_error(request: Request, err: Exception) -> JSONResponse:
    # anything else is a bug or a broken file: its text stays in the log
    message, error_id = internal_error(log, "request failed", err)
    return JSONResponse({"detail": message, "error_id": error_id}, status_code=500)


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app (it does not depend on the settings)."""
    return create_app(ServiceConfig(auth=False), start_worker=False).openapi()


def server_stack() -> tuple[str, str]:
    """uvicorn's event loop and HTTP parser: uvloop and httptools (both in C, pinned in
    requirements/base.txt) where they import, else asyncio's own loop and the pure-Python h11,
    which answer the same bytes more slowly (docs/service.md, Performance)."""
    loop = "uvloop" if sys.platform != "win32" and _imports("uvloop") else "asyncio"
    return loop, "httptools" if _imports("httptools") else "h11"


def _imports(module: str) -> bool:
    try:
        importlib.import_module(module)
    except (ImportError, OSError):  # not installed, or a wheel that does not load here
        return False
    return True


def serve(config: ServiceConfig) -> None:
    """Run the service with uvicorn until SIGINT/SIGTERM (graceful: requests in flight are
    answered, the worker finishes its batch)."""
    import uvicorn

    from nrp.service.logs import setup_logging

    setup_logging(config.log_level, "server")
    app = create_app(config)
    loop, http = server_stack()
    log.info("server stack", extra={"fields": {"loop": loop, "http": http}})
    service = app.state.service

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # the first signal: score requests in hand are answered (or 503) before uvicorn's
            # graceful wait ends and cancels them
            service.shutdown_soon()
            super().handle_exit(sig, frame)

    settings = uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        loop=loop,
        http=http,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=int(config.shutdown_timeout_s),
        server_header=False,
    )
    Server(settings).run()


__all__ = ["Service", "create_app", "openapi_document", "serve"]
