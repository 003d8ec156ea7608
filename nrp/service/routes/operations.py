"""``GET /healthz`` (the process answers) and ``GET /readyz`` (store reachable and worker
ready), both without a token so probes need none; ``GET /metrics`` [read]: Prometheus text."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse

from nrp.service.auth import READ
from nrp.service.state import ServiceDep

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="store reachable and worker ready")
def readyz(response: Response, service: ServiceDep) -> dict[str, Any]:
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
