"""``nrp run``: one experiment file through every step (generate, validate, score, evaluate,
summary, report), each cached, so a re-run does only what changed."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api
from nrp.cli.common import add_executor_options, open_executor, print_progress, report_executor


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "run",
        help="run an experiment file: generate, validate, score, evaluate, summary, report "
        "(every step cached)",
    )
    parser.add_argument("experiment", type=Path, help="experiment YAML file")
    add_executor_options(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    with open_executor(args) as executor:
        result = api.run_experiment(args.experiment, progress=print_progress, executor=executor)
        report_executor(executor)
    out = result.out
    report = out / "report" / "index.html"
    print(report if report.is_file() else out)
    return 0
