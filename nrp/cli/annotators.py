"""``nrp annotators``: agreement between people's labels, the ceiling of any judge's agreement
with them: Krippendorff's alpha per dimension and, for rankings, the pairwise Kendall tau."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api
from nrp.cli.common import add_query_map_options, check_out, query_map
from nrp.tables import write_aside


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "annotators",
        help="agreement between human label files (one per person): Krippendorff's alpha, "
        "pairwise Kendall tau of rankings",
    )
    parser.add_argument(
        "human",
        type=Path,
        nargs="+",
        help="human label files as nrp meta reads them, 2 or more (a Label Studio export: one "
        "coder per annotator)",
    )
    parser.add_argument("--join", default="answer_id", help="item id column (default answer_id)")
    parser.add_argument(
        "--level",
        choices=("ordinal", "interval", "nominal"),
        default="ordinal",
        help="alpha's level of measurement (default ordinal)",
    )
    parser.add_argument(
        "--categorical", action="store_true", help="text labels (TRUE / FALSE / ...): nominal"
    )
    parser.add_argument("--out", type=Path, help="CSV file for the table")
    add_query_map_options(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out, "file")
    result = api.annotator_agreement(
        args.human, args.join, args.level, args.categorical, query_map(args)
    )
    print(result.format())
    if args.out:
        table = result.to_frame()
        write_aside(args.out, lambda partial: table.to_csv(partial, index=False))
        print(f"\nwrote {args.out}")
    return 0
