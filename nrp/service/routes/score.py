"""``POST /v1/score`` [read]: a few answers scored now by the worker, from its models and the
cached document scores; nothing is stored.

The request is checked here (``RequestPlanner.score_payload``: a read token's rankers must
match ``read_rankers``), then handed to the worker process, which batches it with other
requests arriving within ``batch_max_wait_ms``; the handler awaits the reply without holding a
thread. A failure the worker did not expect is a 500 with an error id only.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from nrp.service.auth import READ
from nrp.service.bodies import StrictJSONRoute
from nrp.service.schemas import ScoreOut, ScoreRequest
from nrp.service.state import ServiceDep
from nrp.service.worker import SHUTTING_DOWN

router = APIRouter(tags=["score"], route_class=StrictJSONRoute)


@router.post(
    "/v1/score",
    response_model=ScoreOut,
    responses={
        403: {"description": "a read token asked for a ranker the settings do not allow it"},
        503: {"description": "the worker is not ready"},
    },
)
async def score(
    body: ScoreRequest, service: ServiceDep, scope: Annotated[str, READ]
) -> dict[str, Any] | JSONResponse:
    if service.collections.current(body.collection) is not None:
        # the checks of a collection read before are a few dict lookups: no thread hop
        payload, skipped = service.planner.score_payload(body, scope)
    else:  # reading the collection's view takes a while: not on the event loop
        payload, skipped = await run_in_threadpool(service.planner.score_payload, body, scope)
    if service.shutting_down:  # the worker's words for the requests it refuses then
        raise HTTPException(503, SHUTTING_DOWN["error"])
    if not service.worker_ready:
        raise HTTPException(503, "the worker is not ready yet", headers={"Retry-After": "1"})
    # past it the requester has its 504: the worker drops the request instead of computing it
    payload["deadline"] = time.time() + service.config.score_timeout_s
    future = service.worker.submit(payload)
    try:
        reply = await asyncio.wait_for(future, service.config.score_timeout_s)
    except TimeoutError:
        service.worker.forget(payload["id"])
        raise HTTPException(504, "the worker did not answer in time") from None
    if not reply.get("ok"):
        status, error = int(reply.get("status", 500)), reply.get("error", "failed")
        if "error_id" in reply:
            return JSONResponse({"detail": error, "error_id": reply["error_id"]}, status)
        raise HTTPException(status, error)
    columns = reply["columns"]
    service.metrics.score_answers.inc(len(payload["answers"]))
    return {
        "collection": payload["collection"],
        "rankers": payload["rankers"],
        "columns": columns,
        "results": [dict(zip(columns, row, strict=True)) for row in reply["rows"]],
        "skipped": skipped,
    }
