"""``nrp summary``: mean NRP per LLM x prompt with bootstrap CIs, saturation and paired tests."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api
from nrp.cli.common import check_out


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "summary", help="mean NRP per LLM x prompt with bootstrap CIs, saturation, paired tests"
    )
    parser.add_argument("results", type=Path, help="results folder or results.parquet/.csv")
    parser.add_argument("--out", type=Path, help="folder for summary.json and CSV tables")
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    summary = api.summarize(args.results)
    print(summary.format())
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        summary.to_json(args.out / "summary.json")
        summary.to_csv(args.out)
        print(f"\nwrote {args.out}")
    return 0
