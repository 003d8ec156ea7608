"""``nrp agreement``: leave-one-out check of how far NRP agrees with the human grades of the
judged documents (each judged document positioned as if it were an answer)."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import add_indexes_option, check_out, print_progress


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "agreement",
        help="leave-one-out: how far NRP agrees with the human grades of the judged documents",
    )
    parser.add_argument("collection")
    parser.add_argument("--rankers", required=True, help="comma-separated ranker specs")
    parser.add_argument("--labels", choices=("graded", "raw"), default="graded")
    parser.add_argument("--ties", choices=engine.TIE_MODES, default=engine.DEFAULT_TIE_MODE)
    parser.add_argument(
        "--against",
        metavar="SPEC",
        help="compare every ranker's per-query tau-b with this one's (added to --rankers when "
        "missing): mean difference, t-interval, paired randomization test, Holm",
    )
    parser.add_argument("--out", type=Path, help="folder for agreement.json and CSV tables")
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    collection = api.Collection.load(args.collection, args.indexes)
    rankers = engine.parse_rankers(args.rankers)
    # the reference as the result names it (its complete spec), checked before any scoring
    against = api.make_ranker(args.against).spec() if args.against else None
    if against and against not in {api.make_ranker(spec).spec() for spec in rankers}:
        rankers.insert(0, api.RankerSpec.parse(args.against))
    result = api.agreement(
        collection, rankers, labels=args.labels, ties=args.ties, progress=print_progress
    )
    print(result.format())
    comparison = result.compare(against) if against else None
    if comparison is not None:
        print("\n" + result.format_comparison(comparison))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result.to_json(args.out / "agreement.json")
        result.to_csv(args.out)
        if comparison is not None:
            comparison.to_csv(args.out / "agreement_comparison.csv", index=False)
        print(f"\nwrote {args.out}")
    return 0
