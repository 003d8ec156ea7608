"""``nrp summary``: the LLMs ranked by mean NRP with bootstrap CIs and significance groups; with
``--details`` the per-dimension tables, saturation and paired tests too."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api
from nrp.cli.common import check_out


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "summary",
        help="LLMs ranked by mean NRP with bootstrap CIs and significance groups "
        "(--details: per-dimension tables, saturation, paired tests)",
    )
    parser.add_argument("results", type=Path, help="results folder or results.parquet/.csv")
    parser.add_argument(
        "--by",
        choices=("prompt", "llm"),  # nrp.analysis.summary.BY_CHOICES, loaded when run
        default="prompt",
        help="rank one row per LLM x prompt (default) or per LLM pooled over its prompts",
    )
    parser.add_argument(
        "--details",
        action="store_true",
        help="after the ranked table, the per-dimension tables with saturation and every "
        "paired test, the flags table and every warning",
    )
    parser.add_argument("--out", type=Path, help="folder for summary.json and CSV tables")
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    summary = api.summarize(args.results)
    print(summary.format(details=args.details, by=args.by))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        summary.to_json(args.out / "summary.json")
        summary.to_csv(args.out)
        print(f"\nwrote {args.out}")
    return 0
