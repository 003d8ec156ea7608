"""``nrp ingest``: build a collection store from a manifest (nothing to do when its inputs
are unchanged)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nrp import api
from nrp.cli.common import add_indexes_option


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("ingest", help="build a collection store from a manifest")
    parser.add_argument("manifest", type=Path, help="collection manifest (YAML or TOML)")
    parser.add_argument("--name", help="collection name (default: the manifest's name)")
    parser.add_argument(
        "--data-root", type=Path, help="folder the manifest's paths are relative to"
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when nothing changed")
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    result = api.ingest(args.manifest, args.name, args.indexes, args.data_root, args.force)
    if result.rebuilt:
        print(f"built collection {result.name} at {result.path}")
    else:
        print(f"collection {result.name} is up to date (inputs unchanged); nothing to do")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
