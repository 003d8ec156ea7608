"""``GET /v1/leaderboard?collection=NAME`` [read]: the summary of the collection's finished jobs
(``nrp.service.leaderboard``), optionally narrowed to one dimension or ranker."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from nrp.service.auth import READ
from nrp.service.bodies import StrictJSONRoute
from nrp.service.schemas import LeaderboardOut
from nrp.service.state import ServiceDep

router = APIRouter(tags=["leaderboard"], route_class=StrictJSONRoute)


@router.get("/v1/leaderboard", response_model=LeaderboardOut, dependencies=[READ])
def leaderboard(
    service: ServiceDep,
    collection: str,
    dimension: str | None = None,
    ranker: str | None = None,
) -> dict[str, Any]:
    result = service.leaderboards.of(service.require_store(), collection)
    rows = [
        r
        for r in result["rows"]
        if (dimension is None or r["dimension"] == dimension)
        and (ranker is None or r["ranker"] == ranker)
    ]
    return {**result, "rows": rows}
