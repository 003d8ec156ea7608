"""``nrp train``: fine-tune a cross-encoder (or the dense bi-encoder) on one dimension of a
collection's judgments, with query-disjoint folds, into a folder that ``cross:model=DIR`` (or
``dense:model=DIR``) ranks with (docs/training.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api
from nrp.cli.common import add_indexes_option, check_out, print_progress

# TrainSettings fields the options set (same names); an option left out keeps the field's
# default, so the defaults live in one place
_SETTINGS = (
    "ranker",
    "base",
    "folds",
    "seed",
    "epochs",
    "batch",
    "lr",
    "max_length",
    "train_layers",
    "also",
    "held_out",
    "query",
    "also_query",
    "device",
    "max_steps",
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    default = api.TrainSettings()  # the defaults, shown in the help
    parser = commands.add_parser(
        "train",
        help="fine-tune a ranker on a dimension's judgments (cross-fitted folds)",
        description="Fine-tune a cross-encoder (--ranker cross) or the dense bi-encoder "
        "(--ranker dense) on the graded (query, document) pairs of one dimension: one model per "
        "query-disjoint fold (trained without that fold's queries) and one on all queries. "
        "Rank with RANKER:model=OUT (docs/training.md).",
    )
    parser.add_argument("collection")
    parser.add_argument("--dimension", required=True, help="the quality dimension to learn")
    parser.add_argument("--out", type=Path, required=True, help="new folder for the models")
    parser.add_argument(
        "--ranker", metavar="{cross,dense}",
        help=f"what to train (default {default.ranker}): cross, a new one-output head on the "
        "base's encoder reading query and text together; dense, the base bi-encoder itself "
        "(it starts as dense:model=BASE)",
    )  # fmt: skip
    parser.add_argument(
        "--base", help=f"local checkpoint folder to fine-tune (default: {default.base}, the "
        "packaged all-MiniLM-L6-v2)"
    )  # fmt: skip
    numbers = [
        ("--folds", int, f"query-disjoint folds (default {default.folds})"),
        ("--seed", int, f"folds, new head and data order (default {default.seed})"),
        ("--epochs", int, f"passes over the training pairs (default {default.epochs})"),
        ("--batch", int, f"documents per step (default {default.batch})"),
        ("--lr", float, f"AdamW learning rate (default {default.lr:g})"),
        ("--max-length", int, f"input tokens of query and document (default {default.max_length})"),
        ("--train-layers", int, f"top transformer layers trained on frozen features (default "
         f"{default.train_layers}; 0: every layer)"),
    ]  # fmt: skip
    for option, kind, text in numbers:
        parser.add_argument(option, type=kind, help=text)
    parser.add_argument(
        "--also", nargs="+", action="extend", metavar="OTHER",
        help="other collections whose judgments of the same dimension are added to training",
    )  # fmt: skip
    parser.add_argument(
        "--held-out", nargs="+", action="extend", metavar="EVAL",
        help="collections the models will be evaluated on (fold=all): training questions "
        "they ask are left out",
    )  # fmt: skip
    parser.add_argument(
        "--query", metavar="FIELD",
        help=f"topic field read as the query (default {default.query}; rank with query=FIELD)",
    )  # fmt: skip
    parser.add_argument(
        "--also-query", nargs="+", action="extend", metavar="FIELD",
        help="other topic fields whose texts train as further queries of each query (same "
        "documents and grades, same fold); ranking still reads --query",
    )  # fmt: skip
    parser.add_argument("--device", help=f"auto, cpu or cuda[:N] (default {default.device})")
    parser.add_argument("--max-steps", type=int, help=argparse.SUPPRESS)  # benchmarks
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    given = {field: getattr(args, field) for field in _SETTINGS}
    result = api.train_ranker(
        args.collection,
        args.dimension,
        args.out,
        indexes_dir=args.indexes,
        progress=print_progress,
        **{field: value for field, value in given.items() if value is not None},
    )
    print(result.format())
    return 0
