"""Bearer tokens and their scopes: ``READ`` and ``ADMIN``, the dependencies routes declare, and
``authenticate``, the one check of a token, which the ``Authenticate`` middleware
(``nrp.service.middleware``) also runs before a request's body is read.

A token's scope is ``read`` (every GET, ``POST /v1/score``), ``admin`` (everything, including
jobs and ingest) or ``review/NAME`` (a reviewer: the review app's routes ``REVIEW`` and nothing
else, not even the routes a read token reaches; which projects is the review routes' check);
tokens come from the server's tokens file (``nrp.service.config.Tokens``). With ``auth`` off
(``nrp serve --no-auth``, local use only) every request is admin. ``BEARER`` is the OpenAPI
security scheme the document names. The review app's page and its assets (``/review/...``)
are public: they hold no data, and the page asks for a token.

Why twice: FastAPI reads and parses a body before it runs a route's dependencies, so without
the middleware a request with no token but a malformed body would learn a 422 about its body
instead of a 401. The middleware answers 401 first (authentication); a route that reads a body
then checks the scope before it parses it (``nrp.service.bodies.StrictJSONRoute``: a read
token learns a 403, not whether its body parses), and the dependency checks it again for every
route (authorization, 403).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from nrp.service.config import ServiceConfig

# module level: the dependency signatures' annotations are strings FastAPI resolves here
BEARER = HTTPBearer(auto_error=False, description="API token (scope admin, read or review/NAME)")
# routes every caller may reach: probes and the API's own description
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
# the review app's page and static assets (no data in them)
PUBLIC_PREFIXES = ("/review/",)
REVIEWER_PREFIX = "review/"


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path == "/review" or path.startswith(PUBLIC_PREFIXES)


def reviewer_of(scope: str) -> str | None:
    """The reviewer's name of a ``review/NAME`` scope; None for other scopes."""
    return scope.removeprefix(REVIEWER_PREFIX) if scope.startswith(REVIEWER_PREFIX) else None


def authenticate(config: ServiceConfig, authorization: str | None) -> str:
    """The scope of the token in an ``Authorization`` header (``admin`` with auth off);
    HTTPException 401 when it is missing, not a bearer token, or unknown."""
    if not config.auth:
        return "admin"
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    found = config.tokens.scope_of(token.strip())
    if found is None:
        challenge = 'Bearer error="invalid_token"'
        raise HTTPException(401, "invalid token", headers={"WWW-Authenticate": challenge})
    return found


def authorize(request: Request, scope: str) -> str:
    """The scope of the request's token (``authenticate``), or HTTPException 403 when it does
    not allow a route that needs ``scope`` (``read``: read or admin; ``admin``: admin;
    ``review``: a reviewer or admin)."""
    found = authenticate(request.app.state.auth_config, request.headers.get("authorization"))
    allowed = found == "admin" or (
        found == "read" if scope == "read" else scope == "review" and bool(reviewer_of(found))
    )
    if not allowed:
        kind = "review" if reviewer_of(found) else found
        raise HTTPException(403, f"this token's scope ({kind}) does not allow this request")
    return found


def require(scope: str) -> Any:
    """A dependency that admits a request whose token has ``scope`` (``authorize``) and gives
    the token's scope. The check carries its scope (``required_scope``), so that a route that
    reads a body authorizes before it parses it (``nrp.service.bodies.StrictJSONRoute``)."""

    async def check(  # async: checked on the event loop, no thread for a dict lookup
        request: Request,
        # declared so that the OpenAPI document names the bearer scheme; the header is read
        # by ``authenticate``, as the middleware reads it
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    ) -> str:
        return authorize(request, scope)

    check.required_scope = scope  # type: ignore[attr-defined]
    return Depends(check)


READ = require("read")
ADMIN = require("admin")
REVIEW = require("review")
