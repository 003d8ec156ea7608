"""``nrp report``: a self-contained HTML report (figures, CSV tables) of a results folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api
from nrp.cli.common import check_out, print_progress


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "report",
        help="self-contained HTML report (PNG/SVG figures, CSV tables) of a results folder",
    )
    parser.add_argument(
        "results",
        type=Path,
        help="results folder (results.parquet; optional validation.json, agreement.json, "
        "evaluations.parquet, sizes.csv/.yaml, meta/) or a results file",
    )
    parser.add_argument("--out", type=Path, required=True, help="report folder (replaced)")
    parser.add_argument(
        "--validation",
        type=Path,
        help="validation JSON (nrp validate; default: RESULTS/validation.json, else the one "
        "RESULTS/scoring.json records, else the collection's)",
    )
    parser.add_argument("--agreement", type=Path, help="agreement JSON (nrp agreement)")
    parser.add_argument(
        "--evaluations", type=Path, help="evaluations table (nrp evaluate): Parquet or CSV"
    )
    parser.add_argument(
        "--meta",
        type=Path,
        action="append",
        metavar="DIR",
        help="nrp meta output folder, or a CSV of evaluator x human dimension correlations "
        "(repeat for several)",
    )
    parser.add_argument(
        "--sizes", type=Path, help="model sizes: CSV (llm,params_b) or YAML (llm: billions)"
    )
    parser.add_argument("--title", help="page title (default: NRP report: COLLECTION)")
    parser.add_argument("--seed", type=int, default=0, help="jitter and bootstrap seed (0)")
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    index = api.build_report(
        args.results, args.out, validation=args.validation, agreement=args.agreement,
        evaluations=args.evaluations, meta=args.meta, sizes=args.sizes, title=args.title,
        seed=args.seed, progress=print_progress,
    )  # fmt: skip
    print(index)
    return 0
