"""``nrp serve``: the HTTP service over the library API (FastAPI on uvicorn).

``config`` (settings, tokens), ``store`` (jobs, answers, units, results: SQLite or
PostgreSQL), ``worker`` (the one process that owns the models and batches work across jobs),
``inputs`` (what a request may name: data roots, collections, specs, answers), ``app`` (routes,
authentication, body limit, logs, metrics), ``metrics`` and ``logs``. Start it with
``nrp serve`` or ``python -m nrp.service``.
"""
