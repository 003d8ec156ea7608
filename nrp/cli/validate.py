"""``nrp validate``: score rankers (or external run files) against the human judgments of each
dimension and choose the best ranker per dimension; later steps read the JSON it writes."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import (
    add_executor_options,
    add_indexes_option,
    check_out,
    open_executor,
    print_progress,
    report_executor,
)
from nrp.cli.score import add_dtype_option
from nrp.errors import NrpError

#: where ``--runs`` writes its result unless told: beside the rankers' ``validation.json``,
#: which ``nrp score`` reads, and which a run file's result must not replace unasked
RUNS_RESULT = "validation-runs.json"


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "validate",
        help="score rankers (or external run files) by nDCG@10, MAP, bpref per dimension "
        "and choose the best ranker per dimension",
    )
    parser.add_argument("collection")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--rankers",
        "--ranker",
        action="append",
        metavar="SPECS",
        help="comma-separated ranker specs, or the option repeated (default: every ranker that "
        f"needs no model folder, {','.join(engine.DEFAULT_RANKERS)})",
    )
    source.add_argument(
        "--runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="TREC run files (qid Q0 docno rank score tag) or CSV/TSV (qid, docno, score); "
        f"their result goes to INDEXES/COLLECTION/{RUNS_RESULT} unless --out says otherwise, "
        "so the rankers' choice that nrp score reads is kept",
    )
    parser.add_argument(
        "--labels",
        choices=("graded", "raw"),
        default="graded",
        help="graded: the label scales' gains, 'could not judge' labels left out (default); "
        "raw: labels as written (what the source study's scripts used)",
    )
    parser.add_argument("--dimensions", help="comma-separated dimensions (default: all)")
    parser.add_argument(
        "--test",
        choices=("randomization", "t"),
        default="randomization",
        help="paired significance test (default: randomization)",
    )
    parser.add_argument(
        "--correction",
        choices=("holm", "bonferroni", "none"),
        default="holm",
        help="multiple-testing correction (default: holm)",
    )
    parser.add_argument(
        "--ci",
        choices=("t", "bootstrap"),
        default="t",
        help="95%% confidence interval of the mean (default: t)",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not use the score cache")
    add_dtype_option(
        parser, "validated", "The choice names it, so nrp score runs at it (not with --runs)"
    )
    _add_validity_options(parser)
    parser.add_argument(
        "--out",
        type=Path,
        help="where to write the JSON that later steps read (default: "
        f"INDEXES/COLLECTION/validation.json; with --runs, {RUNS_RESULT})",
    )
    parser.add_argument(
        "--save-runs",
        type=Path,
        metavar="DIR",
        help="also write each ranker's ranking of D_q as a TREC run file (qid Q0 docno rank "
        "score tag), DIR/RANKER.run, with an index DIR/runs.tsv (DIR: new, empty, or written "
        "by nrp before)",
    )
    add_indexes_option(parser)
    add_executor_options(parser)
    parser.set_defaults(run=handle)


def _add_validity_options(parser: argparse.ArgumentParser) -> None:
    """The validity check's options (docs/validity.md)."""
    parser.add_argument(
        "--no-validity",
        action="store_true",
        help="do not rank degenerate texts (the question echoed, evasive replies, ...) among "
        "D_q; without validity any ranker can be chosen (docs/validity.md)",
    )
    parser.add_argument(
        "--validity-min-wins",
        type=float,
        default=engine.DEFAULT_MIN_WINS,
        metavar="SHARE",
        help="a ranker passes validity when relevant judged documents rank above each "
        f"degenerate kind in at least SHARE of pairs (default {engine.DEFAULT_MIN_WINS})",
    )
    parser.add_argument(
        "--validity-fallback-wins",
        type=float,
        default=engine.DEFAULT_FALLBACK_WINS,
        metavar="SHARE",
        help="where no ranker of a dimension passes validity, choose among those that pass with "
        "SHARE in place of --validity-min-wins, and say so (default "
        f"{engine.DEFAULT_FALLBACK_WINS}; equal to --validity-min-wins: no fallback)",
    )
    parser.add_argument(
        "--validity-max-nrp",
        type=float,
        default=engine.DEFAULT_MAX_NRP,
        metavar="NRP",
        help=f"... and each kind's mean NRP is at most NRP (default {engine.DEFAULT_MAX_NRP})",
    )
    parser.add_argument(
        "--real-answers",
        action="extend",
        nargs="+",
        metavar="FILE",
        help="answer files (any format nrp score reads) of real answers that nobody fitted or "
        "calibrated on ('references': the collection's reference answers): each ranker "
        "reports the share it floors and flags and their mean NRP (a guard: also under its "
        "ranker alone), and a ranker that floors more than --validity-max-floored of them "
        "fails validity",
    )
    parser.add_argument(
        "--validity-max-floored",
        type=float,
        default=engine.DEFAULT_MAX_FLOORED,
        metavar="SHARE",
        help="... and it floors at most SHARE of the real answers given "
        f"(default {engine.DEFAULT_MAX_FLOORED})",
    )
    parser.add_argument(
        "--validity-kinds",
        metavar="KINDS",
        help="degenerate kinds or families ranked, comma-separated (default: all: mirror, "
        "evasion, damaged, off_topic)",
    )
    draws = api.ValidationSettings.validity_other_draws
    parser.add_argument(
        "--validity-other-draws",
        type=int,
        default=draws,
        metavar="N",
        help="other_best: the best judged documents of N other queries, drawn with the seed, "
        f"ranked for each query (default {draws})",
    )


def handle(args: argparse.Namespace) -> int:
    check_out(args.out, "file")
    collection = api.Collection.load(args.collection, args.indexes)
    dimensions = args.dimensions.split(",") if args.dimensions else None
    options = dict(dimensions=dimensions, test=args.test, correction=args.correction, ci=args.ci)
    if args.runs:
        if args.save_runs:
            raise NrpError("--save-runs writes rankers' runs; with --runs the runs are the files")
        if args.real_answers:
            raise NrpError("--real-answers are ranked by rankers; a run file cannot rank them")
        if args.dtype:
            raise NrpError("--dtype sets the precision of rankers; a run file has none")
        result = api.validate_runs(collection, args.runs, labels=args.labels, **options)
    else:
        options.update(
            validity=not args.no_validity,
            validity_min_wins=args.validity_min_wins,
            validity_fallback_wins=args.validity_fallback_wins,
            validity_max_nrp=args.validity_max_nrp,
            validity_max_floored=args.validity_max_floored,
            validity_kinds=args.validity_kinds,
            validity_other_draws=args.validity_other_draws,
            dtype=args.dtype,
        )
        rankers = (
            [s for item in args.rankers for s in engine.parse_rankers(item)]
            if args.rankers
            else None
        )
        with open_executor(args) as executor:
            result = api.validate(
                collection, rankers, labels=args.labels, cache=not args.no_cache,
                progress=print_progress, executor=executor, save_runs=args.save_runs,
                real_answers=args.real_answers, **options,
            )  # fmt: skip
            report_executor(executor)
    out = args.out or collection.path / (RUNS_RESULT if args.runs else api.VALIDATION_FILE)
    result.to_json(out)
    print(result.format())
    print(f"\nwrote {out}")
    if args.save_runs:
        print(f"wrote the rankers' runs to {args.save_runs}")
    return 0
