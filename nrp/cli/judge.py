"""``nrp judge``: nrp as a TREC AutoJudge judge from the command line, with no topics file. TREC
RAG report files (2024 or 2025 layout, read as ``nrp score`` reads them) are judged by the
track's own runner with ``NrpJudge``, the topics the reports name taken from the collection; the
runner's leaderboard (``nrp.eval.txt``), its measures and its settings are written into the
output folder, all at the end, so a bad report leaves nothing there."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import add_indexes_option, check_out, print_read_notes
from nrp.cli.score import add_ranker_choice, add_ties_option, ranker_choice


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "judge",
        help="TREC RAG reports judged by the AutoJudge track's runner with nrp's judge "
        "(topics from the collection)",
    )
    parser.add_argument("collection")
    parser.add_argument(
        "reports",
        type=Path,
        help="TREC RAG report JSONL (2024 layout: run_id, topic_id at the top level; 2025: "
        "metadata), file or folder",
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help=f"folder for the runner's leaderboard {engine.LEADERBOARD_FILE} (run_id topic_id "
        "measure value), its measures and its settings",
    )
    add_ranker_choice(parser)
    add_ties_option(parser)
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip (and list) reports that cannot be read (an unknown topic, a bad citation)",
    )
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    engine.autojudge_module()  # without its NLTK data: one line, before anything is read
    collection = api.Collection.load(args.collection, args.indexes)
    answer_set = api.read_answers(args.reports, collection, skip_invalid=args.skip_invalid)
    ranker = ranker_choice(args, collection).text()
    path = api.judge_reports(
        answer_set, collection, args.out, indexes=args.indexes, ranker=ranker, ties=args.ties
    )
    print_read_notes(answer_set)  # the layouts read and the reports skipped: after, so that an
    # error (a file of answers that are not reports) is the command's one line
    runs, topics = answer_set.answers["llm"].nunique(), answer_set.answers["qid"].nunique()
    print(f"judged {len(answer_set):,} report(s) ({runs} run(s), {topics} topic(s)); wrote the "
          f"leaderboard to {path}")  # fmt: skip
    return 0
