"""``nrp ingest``: build a collection store from a manifest, or from an ir_datasets id
(``irds:ID``, its manifest built in memory); nothing to do when its inputs are unchanged."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import add_indexes_option
from nrp.errors import ConfigError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "ingest", help="build a collection store from a manifest or an ir_datasets id"
    )
    parser.add_argument(
        "manifest",
        type=Path,
        help="collection manifest (YAML or TOML), or irds:DATASET_ID for an ir_datasets "
        "collection (downloaded by ir_datasets into its cache the first time)",
    )
    parser.add_argument(
        "--name",
        help="collection name (default: the manifest's name; for irds:ID the id, / as -)",
    )
    parser.add_argument(
        "--data-root",
        type=Path,
        help="the collection's own data folder (the one holding its topic, document and "
        "judgment files): it replaces the manifest's data_root, which its source paths are "
        "relative to (a source with relative_to: manifest stays beside the manifest)",
    )
    parser.add_argument(
        "--dimension",
        action="append",
        metavar="[FIELD=]NAME",
        help="irds:ID only: the dimension of the qrels' relevance grades (default: relevance), "
        "or FIELD=NAME for another qrels field (repeat: trustworthiness=credibility)",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when nothing changed")
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def _dimensions(items: list[str] | None) -> dict[str, str]:
    """``--dimension`` values as qrels field -> dimension (a plain NAME: the relevance field)."""
    fields: dict[str, str] = {}
    for item in items or ["relevance"]:
        field, sep, name = item.partition("=")
        field, name = (field.strip(), name.strip()) if sep else ("relevance", field.strip())
        if not field or not name:
            raise ConfigError(f"--dimension {item!r} is not NAME or FIELD=NAME")
        if field in fields:
            raise ConfigError(f"--dimension: qrels field {field!r} given twice")
        fields[field] = name
    return fields


def handle(args: argparse.Namespace) -> int:
    source = str(args.manifest)
    if source.startswith(engine.DATASET_PREFIX):
        if args.data_root is not None:
            raise ConfigError(f"{source}: --data-root applies to a manifest file, not irds:ID")
        manifest = engine.irds_manifest(source, _dimensions(args.dimension), args.name)
    elif args.dimension:
        raise ConfigError(f"{source}: --dimension applies to irds:ID; a manifest declares its own")
    else:
        manifest = args.manifest
    result = api.ingest(manifest, args.name, args.indexes, args.data_root, args.force)
    if result.rebuilt:
        print(f"built collection {result.name} at {result.path}")
    else:
        print(f"collection {result.name} is up to date (inputs unchanged); nothing to do")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
