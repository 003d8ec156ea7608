"""The routes of the HTTP API, one module per resource, each an ``APIRouter``.

``ROUTERS`` is the order ``create_app`` includes them in, which is the order of the paths in the
OpenAPI document: operations (health, readiness, metrics), collections, jobs, synchronous
scores, leaderboard, the review app. Handlers are thin: they check the caller's scope
(``nrp.service.auth``), hand the body to the planner or the store
(``nrp.service.state.Service``), and shape the reply.
Handlers that touch the store or read files are plain functions, which FastAPI runs in its
thread pool, so the event loop only waits.
"""

from __future__ import annotations

from nrp.service.routes import collections, jobs, leaderboard, operations, review, score

ROUTERS = (
    operations.router,
    collections.router,
    jobs.router,
    score.router,
    leaderboard.router,
    review.router,
)
