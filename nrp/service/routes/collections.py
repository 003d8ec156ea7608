"""Collections: ``GET /v1/collections`` [read] (``nrp collections``), ``GET
/v1/collections/{name}`` [read] (``nrp info --json``), and ``POST /v1/collections`` [admin]:
ingest a manifest that lies in a data root (``nrp ingest``), its sources inside the roots too."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Response

from nrp import api
from nrp.service import inputs
from nrp.service.auth import ADMIN, READ
from nrp.service.bodies import StrictJSONRoute
from nrp.service.disclosure import redact_tree
from nrp.service.schemas import IngestRequest
from nrp.service.state import ServiceDep

log = logging.getLogger("nrp.service")
router = APIRouter(tags=["collections"], route_class=StrictJSONRoute)


@router.get("/v1/collections", dependencies=[READ])
def list_collections_route(service: ServiceDep) -> dict[str, list[dict[str, Any]]]:
    indexes = service.config.indexes
    out = []
    for name in api.list_collections(indexes):
        collection = api.Collection(indexes / name)
        out.append(
            {
                "name": name,
                "built_at": collection.meta.get("built_at"),
                "dimensions": list(collection.dimensions),
                "counts": collection.meta.get("counts", {}),
            }
        )
    return {"collections": out}


@router.get("/v1/collections/{name}", dependencies=[READ])
def collection_info_route(name: str, service: ServiceDep) -> dict[str, Any]:
    info = api.collection_info(service.collections.get(name).collection)
    return redact_tree(info, service.config.server_roots)  # the manifest's path, relative


@router.post(
    "/v1/collections",
    status_code=201,
    dependencies=[ADMIN],
    responses={200: {"description": "inputs unchanged: nothing rebuilt"}},
)
def ingest_route(body: IngestRequest, response: Response, service: ServiceDep) -> dict[str, Any]:
    config = service.config
    manifest = inputs.check_manifest(body.manifest, config.data_roots)
    result = api.ingest(manifest, body.name, config.indexes, None, body.force)
    response.status_code = 201 if result.rebuilt else 200
    log.info("ingest", extra={"fields": {"collection": result.name, "rebuilt": result.rebuilt}})
    return {
        "name": result.name,
        "rebuilt": result.rebuilt,
        "fingerprint": result.fingerprint,
        "counts": result.counts,
        "warnings": redact_tree(list(result.warnings), config.server_roots),
    }
