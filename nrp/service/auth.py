"""Bearer tokens and their scopes: ``READ`` and ``ADMIN``, the dependencies routes declare.

A token's scope is ``read`` (every GET, ``POST /v1/score``) or ``admin`` (everything, including
jobs and ingest); tokens come from the server's tokens file (``nrp.service.config.Tokens``). With
``auth`` off (``nrp serve --no-auth``, local use only) every request is admin. ``BEARER`` is the
OpenAPI security scheme the document names.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

# module level: the dependency signatures' annotations are strings FastAPI resolves here
BEARER = HTTPBearer(auto_error=False, description="API token (scope admin or read)")


def require(scope: str) -> Any:
    """A dependency that admits a request whose token has ``scope`` (admin has both)."""

    def check(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    ) -> str:
        config = request.app.state.service.config
        if not config.auth:
            return "admin"
        if credentials is None or credentials.scheme.lower() != "bearer":
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        found = config.tokens.scope_of(credentials.credentials)
        if found is None:
            challenge = 'Bearer error="invalid_token"'
            raise HTTPException(401, "invalid token", headers={"WWW-Authenticate": challenge})
        if scope == "admin" and found != "admin":
            raise HTTPException(403, "this token's scope (read) does not allow this request")
        return found

    return Depends(check)


READ = require("read")
ADMIN = require("admin")
