"""``nrp review PROJECT_FILE``: the review app alone, for one person on a laptop.

The same routes, page and token check as in ``nrp serve`` (``nrp.service.routes.review``,
``nrp.service.middleware.Authenticate``), without the scoring service: no worker, no job store,
no collections. Tokens come from a tokens file (``review/NAME TOKEN`` lines), or else one fresh
random token per reviewer of the project, printed as a login link when the app starts.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path

from fastapi import FastAPI

from nrp.service.config import DEFAULT_MAX_BODY_BYTES, ServiceConfig, Tokens
from nrp.service.middleware import Authenticate, BodyLimit
from nrp.service.routes import review
from nrp.version import __version__


def create_review_app(project_files: Sequence[Path], tokens: Tokens) -> FastAPI:
    """The review app over ``project_files`` admitting ``tokens``."""
    config = ServiceConfig(auth=True, tokens=tokens)
    app = FastAPI(title="nrp review", version=__version__)
    app.state.auth_config = config
    app.state.review_desks = review.open_desks(list(project_files))
    app.include_router(review.router)
    app.add_middleware(Authenticate, config=config)
    app.add_middleware(BodyLimit, limit=DEFAULT_MAX_BODY_BYTES)
    return app


def fresh_tokens(reviewers: Sequence[str]) -> dict[str, str]:
    """reviewer -> a new random token (for one run of the app)."""
    return {name: secrets.token_urlsafe(24) for name in reviewers}


def serve_review(project_file: Path, host: str, port: int, tokens_file: Path | None = None) -> None:
    """Run the app with uvicorn until SIGINT/SIGTERM; print the login links."""
    import uvicorn

    desks = review.open_desks([project_file])
    (desk,) = desks.values()
    if tokens_file is not None:
        tokens = Tokens.from_file(tokens_file)
    else:
        fresh = fresh_tokens(desk.project.reviewers)
        tokens = Tokens.parse([(f"review/{n}", t) for n, t in fresh.items()], "fresh tokens")
        for name, token in fresh.items():
            print(f"{name}: http://{host}:{port}/review/#token={token}", flush=True)
    print(f"review project {desk.name!r}: {len(desk.project.items)} items, store {desk.store.path}")
    app = create_review_app([project_file], tokens)
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
