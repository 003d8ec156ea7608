"""``nrp serve``: start the HTTP service (``nrp.service``); command-line options override the
settings file's, which override the defaults. ``--no-auth`` on a host other than loopback is
refused unless ``--allow-no-auth-public`` says so too (docs/security.md)."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from nrp.cli.common import add_indexes_option


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "serve", help="HTTP service: collections, scoring jobs, synchronous scores, leaderboard"
    )
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default 8000)")
    parser.add_argument("--config", type=Path, help="settings file (YAML or TOML)")
    parser.add_argument(
        "--data-root",
        dest="data_roots",
        action="append",
        type=Path,
        metavar="DIR",
        help="folder requests may name files in (repeat); none: no server file can be named",
    )
    parser.add_argument(
        "--model-root",
        dest="model_roots",
        action="append",
        type=Path,
        metavar="DIR",
        help="folder model folders in specs may lie in (repeat; default: the data roots)",
    )
    parser.add_argument(
        "--review-project",
        dest="review_projects",
        action="append",
        type=Path,
        metavar="FILE",
        help="review project file in a data root, served to its reviewers (repeat; nrp review)",
    )
    parser.add_argument("--store", metavar="URL", help="sqlite:///PATH or postgresql://...")
    parser.add_argument(
        "--tokens-file",
        type=Path,
        help="API tokens, one 'SCOPE TOKEN' line each (admin|read|review/NAME)",
    )
    parser.add_argument(
        "--no-auth", action="store_true", help="serve without tokens (loopback hosts only)"
    )
    parser.add_argument(
        "--allow-no-auth-public",
        action="store_true",
        help="with --no-auth: allow a host that is not loopback (anyone who reaches the port "
        "is an admin)",
    )
    parser.add_argument("--max-body-bytes", type=int, help="largest request body accepted")
    parser.add_argument(
        "--cors-origin",
        dest="cors_origins",
        action="append",
        metavar="ORIGIN",
        help="browser origin allowed by CORS (repeat; default: none, CORS off)",
    )
    parser.add_argument("--batch-max-size", type=int, help="answers per worker batch at most")
    parser.add_argument("--batch-max-wait-ms", type=float, help="wait for a batch to fill (ms)")
    # not add_executor_options: its default (local) would override the config file's executor,
    # and without choices a bad value is the settings check's one-line error, as from the file
    parser.add_argument(
        "--executor",
        metavar="local|ray",
        help="where job units run: local (the worker process, default) or ray (a Ray cluster; "
        "the worker stays the only cache writer)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="Ray cluster address for --executor ray (default: $RAY_ADDRESS, else a Ray "
        "instance started by the worker)",
    )
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    # the service (FastAPI, uvicorn) loads only when it is started
    from nrp.service.app import serve
    from nrp.service.config import load_config

    overrides = {
        "host": args.host, "port": args.port, "indexes": args.indexes,
        "data_roots": args.data_roots, "store": args.store, "tokens_file": args.tokens_file,
        "auth": False if args.no_auth else None, "model_roots": args.model_roots,
        "allow_public_no_auth": True if args.allow_no_auth_public else None,
        "max_body_bytes": args.max_body_bytes,
        "cors_origins": args.cors_origins, "batch_max_size": args.batch_max_size,
        "batch_max_wait_ms": args.batch_max_wait_ms, "executor": args.executor,
        "ray_address": args.ray_address, "review_projects": args.review_projects,
    }  # fmt: skip
    # uvicorn answers SIGTERM itself (a graceful shutdown, then the signal raised again to end
    # the process as a signal ends it): not the Terminated of the other commands
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    serve(load_config(args.config, overrides))
    return 0
