"""``nrp probe``: perturb every answer (negation, swapped numbers, truncation, echoing the
question, a copy of the best judged document, ...) and report how each evaluator moves."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import (
    add_indexes_option,
    check_out,
    print_progress,
    read_answer_set,
)
from nrp.errors import NrpError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "probe",
        help="how easily is each evaluator fooled: controlled perturbations of the answers",
        description="Perturb every answer, score originals and perturbed twins with the "
        "evaluators, and report per score and perturbation the share of pairs where the "
        "original scores higher (ties apart) and the mean change, with bootstrap CIs over "
        "queries.",
    )
    parser.add_argument("collection")
    parser.add_argument("answers", type=Path, help="answer set, as for `nrp score`")
    parser.add_argument(
        "--evaluators",
        required=True,
        metavar="SPECS",
        help="comma-separated evaluator specs, e.g. bleu,rouge,nrp:rankers=tfidf",
    )
    parser.add_argument(
        "--perturbations",
        default="all",
        metavar="NAMES",
        help=f"comma-separated perturbations (default all: {','.join(engine.PERTURBATIONS)})",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the tables and figure")
    parser.add_argument("--seed", type=int, default=0, help="perturbations and bootstrap (0)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples of queries (1000)")
    parser.add_argument("--no-cache", action="store_true", help="do not use the score caches")
    parser.add_argument("--skip-invalid", action="store_true", help="skip invalid answers")
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    if args.bootstrap < 1:
        raise NrpError(f"--bootstrap must be at least 1, got {args.bootstrap}")
    collection = api.Collection.load(args.collection, args.indexes)
    answer_set = read_answer_set(args.answers, collection, args.skip_invalid)
    result = api.probe(
        collection, answer_set.answers, args.evaluators, args.perturbations, seed=args.seed,
        n_bootstrap=args.bootstrap, cache=not args.no_cache, progress=print_progress,
    )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    result.to_json(args.out / "probe.json")
    result.to_csv(args.out)
    result.plot(args.out / "probe.png")
    print(result.format())
    print(f"wrote {args.out}/probe.json, probe_*.csv and probe.png", file=sys.stderr)
    return 0
