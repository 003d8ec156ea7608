"""``nrp info``: counts, label histograms and |D_q| of a built collection (tables or JSON)."""

from __future__ import annotations

import argparse
import json

from nrp import api, engine
from nrp.cli.common import add_indexes_option


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("info", help="counts, label histograms and |D_q| of a collection")
    parser.add_argument("name")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    info = api.collection_info(api.Collection.load(args.name, args.indexes))
    print(json.dumps(info, indent=2) if args.json else engine.render_info(info))
    return 0
