"""``nrp leaderboard``: a results folder of ``nrp score`` as a TREC leaderboard file
(``run_id topic_id measure value``, 4 decimals, with ``all`` rows), the file the TREC RAG and
AutoJudge tools read and write: NRP per dimension, the weighted NRP, and the citation measures
when ``citations.csv`` is beside the results."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import check_out


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "leaderboard",
        help="results of nrp score as a TREC leaderboard (run_id topic_id measure value)",
    )
    parser.add_argument("results", type=Path, help="results folder or results.parquet/.csv")
    parser.add_argument("--out", type=Path, required=True, help="the leaderboard file to write")
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out, "file")
    table = api.leaderboard(args.results)
    engine.write_leaderboard(table, args.out)
    runs, measures = table["run_id"].nunique(), table["measure"].nunique()
    print(f"wrote {len(table):,} lines ({runs} run(s), {measures} measure(s)) to {args.out}")
    return 0
