"""``GET /healthz`` (the process answers) and ``GET /readyz`` (store reachable and worker
ready), both without a token so probes need none (the worker's pid only to an admin token);
``GET /metrics`` [read]: Prometheus text."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import PlainTextResponse

from nrp.service.auth import READ, authenticate
from nrp.service.bodies import StrictJSONRoute
from nrp.service.state import ServiceDep

router = APIRouter(tags=["operations"], route_class=StrictJSONRoute)


@router.get("/healthz", summary="the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="store reachable and worker ready")
def readyz(request: Request, response: Response, service: ServiceDep) -> dict[str, Any]:
    store_ok = service.store is not None and service.store.ping()
    worker_ok = service.worker_ready or not service.start_worker
    ready = store_ok and worker_ok
    response.status_code = 200 if ready else 503
    reply: dict[str, Any] = {
        "status": "ready" if ready else "not ready",
        "store": "ok" if store_ok else "unreachable",
        "worker": "ready" if worker_ok else "starting or down",
    }
    if _is_admin(request) and service.worker is not None:  # the process, for admins only
        reply["worker_pid"] = service.worker.info.get("pid")
    return reply


def _is_admin(request: Request) -> bool:
    try:
        scope = authenticate(request.app.state.auth_config, request.headers.get("authorization"))
    except HTTPException:
        return False
    return scope == "admin"


@router.get(
    "/metrics",
    summary="Prometheus metrics (text format 0.0.4)",
    response_class=PlainTextResponse,
    dependencies=[READ],
)
def metrics(service: ServiceDep) -> PlainTextResponse:
    return PlainTextResponse(
        service.metrics.registry.exposition(),
        media_type="text/plain; version=0.0.4; charset=utf-8",
    )
