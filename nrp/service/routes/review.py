"""The review app: the page reviewers work in and the routes it saves through.

- ``GET /review/`` and ``GET /review/static/NAME``: the page, its script and style, shipped in
  the package (``nrp/service/static/review``; nothing is fetched from elsewhere). Public: they
  hold no data, and the page asks for a token.
- ``GET /v1/review/me`` [review]: who the token is and the projects it reviews, with progress.
- ``GET /v1/review/projects/{project}/items`` [review]: the reviewer's assigned items.
- ``GET /v1/review/projects/{project}/items/{item}`` [review]: one item, the saved value and
  its version.
- ``PUT /v1/review/projects/{project}/items/{item}`` [review]: save ``{value, version,
  save_id}``; 200 ``{version, value}`` once committed to disk, 409 ``{detail, current}`` when
  the version is stale (``current``: the stored value and version), 422 for a value the item
  does not take. A save id already stored answers as the first time when the item, value and
  version are the same (a retry); with another item, value or version it is a 409.
- ``GET /v1/review/projects/{project}/progress`` [review]: done and assigned per reviewer.

A reviewer token (``review/NAME``) reaches only the projects that list NAME, and only its own
items (another project, or an item not assigned, is a 404: it does not learn what exists); an
admin token may read progress. Handlers are plain functions (FastAPI's thread pool), so each
save's commit happens before its answer is sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from pydantic import BaseModel, Field

from nrp import engine
from nrp.errors import NrpError
from nrp.service.auth import REVIEW, reviewer_of
from nrp.service.bodies import StrictJSONRoute

router = APIRouter(tags=["review"], route_class=StrictJSONRoute)
STATIC = Path(__file__).resolve().parents[1] / "static" / "review"
#: the page runs its own script and style and talks to its own origin only; no frames, no
#: inline code, no content-type guessing (docs/security.md, "Headers of the review page")
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
MAX_VERSION = 2**53 - 1  # a JSON number every client reads exactly; SQLite holds it
ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}


class SaveIn(BaseModel):
    value: dict[str, Any]
    version: int = Field(ge=0, le=MAX_VERSION)
    save_id: str = Field(min_length=1, max_length=100)


def open_desks(project_files: list[Path] | tuple[Path, ...]) -> dict[str, engine.ReviewDesk]:
    """project name -> ``ReviewDesk`` (its store beside its file); a name twice is an error."""
    desks: dict[str, engine.ReviewDesk] = {}
    for path in project_files:
        desk = engine.ReviewDesk.open(path)
        if desk.name in desks:
            raise NrpError(f"two review projects are named {desk.name!r}: {path}")
        desks[desk.name] = desk
    return desks


def _desk(request: Request, project: str, scope: str) -> engine.ReviewDesk:
    desk = request.app.state.review_desks.get(project)
    reviewer = reviewer_of(scope)
    if desk is None or (reviewer is not None and reviewer not in desk.project.reviewers):
        raise HTTPException(404, f"unknown review project {project!r}")
    return desk


def _reviewer(scope: str) -> str:
    reviewer = reviewer_of(scope)
    if reviewer is None:
        raise HTTPException(403, "only a reviewer's token (scope review/NAME) reviews items")
    return reviewer


@router.get("/review", include_in_schema=False)
def page_redirect() -> RedirectResponse:
    return RedirectResponse("/review/")


@router.get("/review/", include_in_schema=False)
def page() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html", headers=PAGE_HEADERS)


@router.get("/review/static/{name}", include_in_schema=False)
def asset(name: str) -> FileResponse:
    if name not in ASSETS:
        raise HTTPException(404, "no such file")
    return FileResponse(STATIC / name, media_type=ASSETS[name], headers=PAGE_HEADERS)


@router.get("/v1/review/me")
def me(request: Request, scope: Annotated[str, REVIEW]) -> dict[str, Any]:
    reviewer = reviewer_of(scope)
    projects = []
    for desk in request.app.state.review_desks.values():
        if reviewer is not None and reviewer not in desk.project.reviewers:
            continue
        entry: dict[str, Any] = {"name": desk.name, "kinds": desk.project.kinds}
        if reviewer is not None:
            mine = next(p for p in desk.progress() if p["reviewer"] == reviewer)
            entry.update(assigned=mine["assigned"], done=mine["done"])
        projects.append(entry)
    return {"reviewer": reviewer, "projects": projects}


@router.get("/v1/review/projects/{project}/items")
def items(request: Request, project: str, scope: Annotated[str, REVIEW]) -> dict[str, Any]:
    desk = _desk(request, project, scope)
    return {"project": project, "items": desk.items_of(_reviewer(scope))}


@router.get("/v1/review/projects/{project}/progress")
def progress(request: Request, project: str, scope: Annotated[str, REVIEW]) -> dict[str, Any]:
    desk = _desk(request, project, scope)
    return {"project": project, "reviewers": desk.progress()}


@router.get("/v1/review/projects/{project}/items/{item_id:path}")
def item(
    request: Request, project: str, item_id: str, scope: Annotated[str, REVIEW]
) -> dict[str, Any]:
    desk = _desk(request, project, scope)
    try:
        return desk.view(_reviewer(scope), item_id)
    except engine.NotAssigned:
        raise HTTPException(404, f"no item {item_id!r} for you in {project!r}") from None


@router.put("/v1/review/projects/{project}/items/{item_id:path}")
def save(
    request: Request, project: str, item_id: str, body: SaveIn, scope: Annotated[str, REVIEW]
) -> Any:
    desk = _desk(request, project, scope)
    try:
        saved = desk.save(_reviewer(scope), item_id, body.value, body.version, body.save_id)
    except engine.NotAssigned:
        raise HTTPException(404, f"no item {item_id!r} for you in {project!r}") from None
    except engine.StaleVersion as stale:
        current = stale.current
        return JSONResponse(
            {
                "detail": "saved elsewhere since you opened it: here is the saved version",
                "current": {
                    "value": current.value if current else None,
                    "version": current.version if current else 0,
                },
            },
            status_code=409,
        )
    except engine.SaveIdReused as reused:
        raise HTTPException(409, str(reused)) from None
    except NrpError as err:
        raise HTTPException(422, getattr(err, "problem", str(err))) from None
    return {"version": saved.version, "value": saved.value}
