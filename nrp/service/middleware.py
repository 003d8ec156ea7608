"""The ASGI middleware around every route: the request body limit, one log line plus the
request metrics per request, and the token check before anything reads a body.

All are plain ASGI callables rather than Starlette's ``BaseHTTPMiddleware``: the body limit has
to see the body as it streams (a client may send no Content-Length), and none buffers a
response. ``Authenticate`` answers 401 to a request without a valid token before the route
parses its body (``nrp.service.auth`` says why).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nrp.service.auth import authenticate, is_public
from nrp.service.config import ServiceConfig

if TYPE_CHECKING:
    from nrp.service.state import ServiceMetrics

log = logging.getLogger("nrp.service")

# routes probed or scraped all the time: counted, never logged
QUIET_ROUTES = ("/healthz", "/readyz", "/metrics")


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int):
        super().__init__(413, f"request body larger than {limit} bytes")


class BodyLimit:
    """413 for a body over ``limit`` bytes: by Content-Length at once, else while it streams."""

    def __init__(self, app: ASGIApp, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            status = 413 if length.isdigit() else 400
            detail = str(BodyTooLarge(self.limit).detail) if status == 413 else "bad length"
            await JSONResponse({"detail": detail}, status_code=status)(scope, receive, send)
            return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except BodyTooLarge as err:
            if started:
                raise
            await JSONResponse({"detail": err.detail}, status_code=413)(scope, receive, send)


class Authenticate:
    """401 for a request without a valid bearer token, before its body is read; the public
    paths (probes, the API's description) and every request with auth off pass."""

    def __init__(self, app: ASGIApp, config: ServiceConfig):
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_public(scope["path"]) or not self.config.auth:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        try:
            authenticate(self.config, header)
        except HTTPException as err:
            reply = JSONResponse({"detail": err.detail}, err.status_code, headers=err.headers)
            await reply(scope, receive, send)
            return
        await self.app(scope, receive, send)


class Observe:
    """One structured log line and the request metrics per request; echoes X-Request-ID."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:64] or uuid.uuid4().hex
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (b"x-request-id", request_id.encode("latin-1")),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            self._record(scope, request_id, status, time.perf_counter() - start)

    def _record(self, scope: Scope, request_id: str, status: int, elapsed: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        self.metrics.requests.inc(1, scope["method"], template, str(status))
        self.metrics.latency.observe(elapsed, template)
        if template in QUIET_ROUTES:
            return
        log.info(
            "request",
            extra={
                "fields": {
                    "request_id": request_id,
                    "method": scope["method"],
                    "path": scope["path"],
                    "route": template,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 3),
                    "client": (scope.get("client") or ("", 0))[0],
                }
            },
        )
