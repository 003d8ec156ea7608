"""``nrp evaluate``: score answers with the evaluators beside NRP (BLEU, ROUGE, BERTScore, NRP,
...), one column per evaluator, against real or pseudo-references."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api
from nrp.cli.common import (
    add_executor_options,
    add_indexes_option,
    check_out,
    open_executor,
    print_progress,
    read_answer_set,
    report_executor,
)
from nrp.tables import text_table, write_aside


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "evaluate",
        help="evaluate answers with BLEU, ROUGE, BERTScore, NRP, ... (one column per score)",
    )
    parser.add_argument("collection")
    parser.add_argument(
        "answers", type=Path, help="answer set, as for `nrp score` (file or folder)"
    )
    parser.add_argument(
        "--evaluators",
        required=True,
        metavar="SPECS",
        help="comma-separated evaluator specs, e.g. bleu,rouge,bertscore,nrp:rankers=tfidf "
        "(see `nrp evaluators`)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for evaluations.parquet/.csv"
    )
    parser.add_argument(
        "--references",
        choices=("auto", "collection", "pseudo", "none"),
        default="auto",
        help="what reference-based evaluators compare with: auto (the collection's reference "
        "answers, else pseudo-references: top-graded judged documents), collection, pseudo, "
        "none (default auto)",
    )
    parser.add_argument(
        "--pseudo-dimension",
        metavar="DIM",
        help="dimension whose top grade picks pseudo-references (default: the first)",
    )
    parser.add_argument(
        "--pseudo-k", type=int, default=3, help="pseudo-references per query (default 3)"
    )
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip (and list) answer rows that cannot be read (an unknown qid, a bad sample or "
        "id); an empty answer is not skipped: it is evaluated as the empty text (nrp: NRP 0)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not use the per-item evaluation cache"
    )
    add_indexes_option(parser)
    add_executor_options(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    collection = api.Collection.load(args.collection, args.indexes)
    answer_set = read_answer_set(args.answers, collection, args.skip_invalid)
    with open_executor(args) as executor:
        table = api.evaluate_answers(
            collection, answer_set.answers, args.evaluators, references=args.references,
            pseudo_dimension=args.pseudo_dimension, pseudo_k=args.pseudo_k,
            cache=not args.no_cache, progress=print_progress, executor=executor,
        )  # fmt: skip
        report_executor(executor)
    args.out.mkdir(parents=True, exist_ok=True)
    write_aside(args.out / "evaluations.parquet", lambda p: table.to_parquet(p, index=False))
    write_aside(args.out / "evaluations.csv", lambda p: table.to_csv(p, index=False))
    kinds = table["reference_kind"].value_counts() if len(table) else {}
    print(f"{len(table):,} answers; references: {kinds.get('reference', 0):,} real, "
          f"{kinds.get('pseudo-reference', 0):,} pseudo, {kinds.get('', 0):,} none")  # fmt: skip
    rows = [
        [spec, f"{c['items']:,}", f"{c['computed']:,}", f"{c['from_cache']:,}",
         f"{c['items_with_missing_scores']:,}"]
        for spec, c in table.attrs.get("evaluators", {}).items()
    ]  # fmt: skip
    print(text_table(["evaluator", "items", "computed", "from cache", "missing"], rows))
    print(f"wrote {args.out}/evaluations.parquet and evaluations.csv")
    return 0
