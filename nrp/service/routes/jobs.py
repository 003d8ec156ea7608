"""Jobs: ``POST /v1/jobs`` [admin] scores an answer set (inline or a file in a data root) with
rankers and evaluators, 202 with the job; ``GET /v1/jobs`` and ``GET /v1/jobs/{id}`` [read]:
status and progress; ``GET /v1/jobs/{id}/results`` [read]: pages of JSON rows or the whole
table streamed as CSV; ``DELETE /v1/jobs/{id}`` [admin]: cancel.

``Idempotency-Key`` makes a retried submission return the same job (a different body under the
same key is a 409). The worker does the work (``nrp.service.worker``); a submission only
stores the job, its answers and its units, and wakes the worker.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, Query, Response
from fastapi.responses import StreamingResponse

from nrp.service import inputs
from nrp.service.auth import ADMIN, READ
from nrp.service.bodies import StrictJSONRoute
from nrp.service.schemas import ROW_NUMBER_MAX, JobOut, JobRequest, JobStatus, ResultsPage
from nrp.service.state import Service, ServiceDep
from nrp.service.store import ACTIVE, DONE, Store, frame_of

log = logging.getLogger("nrp.service")
router = APIRouter(tags=["jobs"], route_class=StrictJSONRoute)


@router.post(
    "/v1/jobs",
    status_code=202,
    response_model=JobOut,
    dependencies=[ADMIN],
    responses={409: {"description": "Idempotency-Key reused with a different request"}},
)
def submit_job(
    body: JobRequest,
    response: Response,
    service: ServiceDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> dict[str, Any]:
    store = service.require_store()
    sha = inputs.request_sha(body.model_dump())
    if idempotency_key is not None:
        existing = store.job_by_key(idempotency_key)
        if existing is not None:
            return _replay(service, existing, sha, response)
    params, answers, units = service.planner.plan_job(body)
    job, created = store.create_job(
        uuid.uuid4().hex, body.collection, params, sha, idempotency_key, answers, units
    )
    if not created:
        return _replay(service, job, sha, response)
    service.metrics.jobs_submitted.inc()
    if service.worker is not None:
        service.worker.wake()
    response.headers["Location"] = f"/v1/jobs/{job['id']}"
    log.info(
        "job submitted",
        extra={"fields": {"job_id": job["id"], "answers": len(answers), "units": len(units)}},
    )
    return job_view(service, job)


def _replay(service: Service, job: dict[str, Any], sha: str, response: Response) -> dict[str, Any]:
    if job["request_sha"] != sha:
        raise HTTPException(409, "Idempotency-Key already used for a different request body")
    response.headers["Idempotent-Replayed"] = "true"
    response.headers["Location"] = f"/v1/jobs/{job['id']}"
    return job_view(service, job)


@router.get("/v1/jobs", dependencies=[READ])
def list_jobs(
    service: ServiceDep,
    collection: str | None = None,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=ROW_NUMBER_MAX)] = 0,
) -> dict[str, list[JobOut]]:
    jobs = service.require_store().list_jobs(collection, status, limit, offset)
    return {"jobs": [job_view(service, j) for j in jobs]}  # type: ignore[misc]


@router.get("/v1/jobs/{job_id}", response_model=JobOut, dependencies=[READ])
def get_job(job_id: str, service: ServiceDep) -> dict[str, Any]:
    return job_view(service, service.get_job(job_id))


@router.delete(
    "/v1/jobs/{job_id}",
    response_model=JobOut,
    dependencies=[ADMIN],
    responses={409: {"description": "the job already finished"}},
)
def cancel_job(job_id: str, service: ServiceDep) -> dict[str, Any]:
    job = service.get_job(job_id)
    status = service.require_store().cancel_job(job_id)
    if status != "cancelled" or job["status"] not in ACTIVE:
        raise HTTPException(
            409, f"job {job_id} is {status}: only a queued or running job can be cancelled"
        )
    log.info("job cancelled", extra={"fields": {"job_id": job_id}})
    return job_view(service, service.get_job(job_id))


@router.get(
    "/v1/jobs/{job_id}/results",
    response_model=ResultsPage,
    dependencies=[READ],
    responses={
        200: {"content": {"text/csv": {}}, "description": "a page of rows, or the CSV"},
        409: {"description": "the job has not finished"},
    },
)
def job_results(
    job_id: str,
    service: ServiceDep,
    table: str = "nrp",
    format: Literal["json", "csv"] = "json",
    offset: Annotated[int, Query(ge=0, le=ROW_NUMBER_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=ROW_NUMBER_MAX)] = 1000,
) -> Any:
    job = service.get_job(job_id)
    if job["status"] != DONE:
        raise HTTPException(409, f"job {job_id} is {job['status']}: results come when done")
    tables = job["info"].get("tables", {})
    if table not in tables:
        raise HTTPException(
            404, f"job {job_id} has no table {table!r} (it has: {', '.join(tables)})"
        )
    store = service.require_store()
    schema = tables[table]
    if format == "csv":
        return StreamingResponse(
            _csv_stream(store, job_id, table, schema),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{job_id}-{table}.csv"'},
        )
    limit = min(limit, service.config.results_page_max)
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


def job_view(service: Service, job: dict[str, Any]) -> dict[str, Any]:
    """A stored job as the API shows it (``JobOut``): progress from its units, links to its
    result tables once done."""
    progress = service.require_store().progress(job["id"])
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


def _csv_stream(
    store: Store, job_id: str, table: str, schema: dict[str, Any], chunk: int = 5000
) -> Iterator[bytes]:
    """A result table as CSV, read from the store ``chunk`` rows at a time."""
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
