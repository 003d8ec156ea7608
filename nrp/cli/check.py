"""``nrp check``: a CI gate on an ``nrp score`` output folder. Exit 0 and a PASS line per model
when every model (LLM x prompt) reaches --min-nrp, with --baseline and --no-worse is not
significantly below the baseline on the same queries, with --max-flagged has no larger share
of flagged answers (the folder's flags.csv), and with --max-floored no larger share of answers
a guard took for no answer (its floor, read from the scores); exit 1 and a FAIL line per failing
model otherwise; exit 2 on bad input. --baseline alone reports the comparison per model and
fails nothing."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "check",
        help="CI gate: exit 1 when a model's mean NRP is below --min-nrp or significantly "
        "below a baseline's (paired test), or too many of its answers are flagged or floored",
    )
    parser.add_argument("results", type=Path, help="`nrp score` output folder or results file")
    parser.add_argument(
        "--min-nrp", type=float, metavar="X", help="fail a model whose mean NRP is below X"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="OLD",
        help="`nrp score` output folder to compare with (alone: report the comparison; with "
        "--no-worse: fail a model significantly below it)",
    )
    parser.add_argument(
        "--no-worse",
        action="store_true",
        help="fail a model significantly below the baseline on the common queries (paired "
        "randomization test, Holm over the models)",
    )
    parser.add_argument(
        "--dimension",
        metavar="DIM",
        help="the dimension to check (default: the weighted NRP, else every dimension)",
    )
    parser.add_argument(
        "--max-flagged",
        type=float,
        metavar="SHARE",
        help="fail a model whose share of flagged answers (flags.csv: an echo of the question, "
        "a copy of a judged document, little content) is above SHARE, in [0, 1]",
    )
    parser.add_argument(
        "--max-floored",
        type=float,
        metavar="SHARE",
        help="fail a model whose share of answers a guard floored (took for no answer: "
        "`nrp summary`'s floored column) is above SHARE in a dimension it positioned, in [0, 1]",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="significance level of the baseline test; intervals are at 1 - alpha (default 0.05)",
    )
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    outcome = api.check_gate(
        args.results, args.min_nrp, args.baseline, args.no_worse, args.dimension, args.alpha,
        args.max_flagged, args.max_floored,
    )  # fmt: skip
    print(outcome.format())
    return 0 if outcome.passed else 1
