"""``nrp serve``: the HTTP service over the library API (FastAPI on uvicorn).

A shell: HTTP, authentication, the job store and batching; every number it serves comes from
``nrp.api`` (positioning, scoring, evaluation, summaries), the same code as the CLI's.

- ``app``: ``create_app`` builds the app from ``routes`` (one ``APIRouter`` per resource:
  operations, collections, jobs, score, leaderboard), ``schemas`` (request and response
  bodies), ``auth`` (bearer tokens and scopes), ``middleware`` (token check before the body,
  body limit, request logs and metrics), ``disclosure`` (what an error may tell a caller) and
  ``state`` (the ``Service`` the routes share).
- ``planning`` and ``inputs``: what a request may name (data roots, model roots, collections,
  specs, answers, the rankers a read token may use), checked before anything is stored; a
  job's units and a score request's payload.
- ``store``: jobs, answers, units and results (SQLite or PostgreSQL); ``leaderboard``:
  summaries of finished jobs.
- ``worker`` (the one process that owns the models and batches work across jobs), ``handle``
  (the server's side of it), ``pool`` (its models and positioners, an LRU bounded by count and
  by the memory ``footprint`` estimates) and ``compute`` (what it computes, each one call into
  the library).
- ``config`` (settings, tokens), ``metrics`` and ``logs``.

Start it with ``nrp serve`` (or ``python -m nrp serve``); docs/security.md has the threat
model and every limit.
"""
