"""``nrp train``: fine-tune a cross-encoder (or the dense bi-encoder) on one dimension of a
collection's judgments, with query-disjoint folds, into a folder that ``cross:model=DIR`` (or
``dense:model=DIR``) ranks with (docs/training.md); ``nrp train guard``: fit the guard's
detectors on a collection into a model file that ``guard:model=FILE`` reads (docs/guard.md)."""

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
        "Rank with RANKER:model=OUT (docs/training.md). The guard's detectors are fitted by "
        "`nrp train guard COLLECTION` (see `nrp train guard --help`).",
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


#: the command's name in the parser; ``nrp train guard`` reaches it (``guard_argv``)
GUARD_COMMAND = "train-guard"


def guard_argv(argv: list[str]) -> list[str]:
    """``argv`` with ``train guard`` (the command's first two words, after the global options)
    read as the guard's own command."""
    words = [i for i, word in enumerate(argv) if not word.startswith("-")]
    first, second = [*words, -1, -1][:2]
    if second == first + 1 and argv[first] == "train" and argv[second] == "guard":
        return [*argv[:first], GUARD_COMMAND, *argv[second + 1 :]]
    return argv


def add_guard_parser(commands: argparse._SubParsersAction) -> None:
    """``nrp train guard``: not listed on its own in ``nrp --help`` (``nrp train`` names it)."""
    default = api.GuardTrainSettings()
    parser = commands.add_parser(
        GUARD_COMMAND,
        prog="nrp train guard",
        description="Fit the guard's detectors on a collection's judged answers and the "
        "non-answers nrp makes for it (degenerate texts, mined boilerplate, and replies an LLM "
        "writes when told not to answer, generated once and kept beside the collection), with "
        "one family held out; write the model file that guard:model=OUT reads (docs/guard.md).",
    )
    parser.add_argument("collection")
    parser.add_argument(
        "--out", type=Path, help="the model file to write (default: guard-COLLECTION.json)"
    )
    parser.add_argument(
        "--dimension", help="the graded dimension that tells real answers (default: relevance, "
        "else the collection's first)",
    )  # fmt: skip
    parser.add_argument(
        "--reference-queries", nargs="+", metavar="PATTERN", default=[],
        help="qids (patterns such as 't1-*') whose documents form the fluency and term "
        "references and are never fitted on (default: every fourth question, drawn with --seed)",
    )  # fmt: skip
    parser.add_argument(
        "--leave-out", nargs="+", metavar="QID", default=[],
        help="questions neither fitted on nor read (asked again in a collection you evaluate)",
    )  # fmt: skip
    parser.add_argument(
        "--held-out", help=f"the degenerate family no detector is fitted on (default "
        f"{default.held_out})",
    )  # fmt: skip
    numbers = [
        ("--per-kind", int, f"degenerate texts per kind and question (default {default.per_kind})"),
        ("--seed", int, f"every random draw (default {default.seed})"),
        ("--boilerplate-questions", int, "a sentence in the documents of this many questions "
         f"is boilerplate (default {default.boilerplate_questions})"),
        ("--near-best", int, "the best documents of the N closest questions join off_topic's "
         f"negatives (default {default.near_best})"),
        ("--written-tokens", int, f"new tokens of each written reply (default "
         f"{default.written_tokens})"),
        ("--frequent", int, "function words of the fluency reference (default "
         f"{default.frequent})"),
        ("--pair-docs", int, "reference documents a pair of them must be adjacent in (default "
         f"{default.pair_docs})"),
        ("--restated-grade", float, "judged documents of at least this grade, after their "
         f"question, are real answers too (default {default.restated_grade:g}; 0: none)"),
        ("--terse-answers", float, "the share of first sentences of the best documents that "
         f"are real answers too (default {default.terse_answers:g})"),
        ("--l2", float, f"the detectors' L2 penalty (default {default.l2:g})"),
        ("--direction-l2", float, f"answer_like's L2 penalty (default {default.direction_l2:g})"),
        ("--max-flagged", float, "the share of the fitting answers each detector's threshold "
         f"flags (default {default.max_flagged:g})"),
        ("--cross-fit", int, "also print each kind's flagged share with guards fitted without "
         "the text's question (K folds; default 0: not)"),
        ("--rest-words", int, "the rest's features read the rest's first N words (the text "
         "without the question's words; default 0: all of it); the model keeps N"),
    ]  # fmt: skip
    for option, kind, text in numbers:
        parser.add_argument(option, type=kind, help=text)
    parser.add_argument(
        "--written-llm", help=f"the LLM that writes the replies (nrp generate's --llm; default "
        f"{default.written_llm}: the packaged SmolLM2)",
    )  # fmt: skip
    parser.add_argument(
        "--fluency-collections", nargs="+", metavar="NAME", default=[],
        help="collections whose documents join the fluency reference",
    )  # fmt: skip
    parser.add_argument(
        "--features", type=Path, help="a feature table kept between fits (a refit with other "
        "settings encodes nothing again)",
    )  # fmt: skip
    add_indexes_option(parser)
    parser.set_defaults(run=handle_guard)


#: GuardTrainSettings fields the options set (same names); an option left out keeps the default
_GUARD_SETTINGS = (
    "dimension", "reference_queries", "leave_out", "held_out", "per_kind", "seed",
    "boilerplate_questions", "near_best", "written_llm", "written_tokens", "frequent",
    "pair_docs", "fluency_collections", "restated_grade", "terse_answers", "l2",
    "direction_l2", "max_flagged", "cross_fit", "rest_words",
)  # fmt: skip


def handle_guard(args: argparse.Namespace) -> int:
    out = args.out or Path(f"guard-{Path(args.collection).name}.json")
    check_out(out, "file")
    given = {field: getattr(args, field) for field in _GUARD_SETTINGS}
    settings = api.GuardTrainSettings(
        **{field: value for field, value in given.items() if value not in (None, [])}
    )
    result = api.train_guard(
        args.collection, out, settings, indexes_dir=args.indexes,
        features_cache=args.features, progress=print_progress,
    )  # fmt: skip
    print(result.format())
    return 0
