"""``nrp meta``: meta-evaluation. Correlate score columns with human labels (Kendall tau-b,
Spearman; per query, pooled, per system), or check a judge's categorical labels against them."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import add_query_map_options, check_out, query_map
from nrp.errors import NrpError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "meta",
        help="meta-evaluation: correlate score columns with human labels (Kendall tau-b, "
        "Spearman per query, pooled, per system) or check a judge's labels against them",
    )
    parser.add_argument(
        "scores",
        type=Path,
        help="score table: an `nrp evaluate` output folder, or CSV/TSV/JSONL/Parquet, or a "
        "Label Studio export (.json) of a ranking project whose items carry scores",
    )
    parser.add_argument(
        "human",
        type=Path,
        nargs="?",
        help="human labels: a table with the item id and label columns, JSONL rankings "
        '{"qid": ..., "ranking": [ids, best first]}, or a Label Studio export (.json) of a '
        "ranking project (default: the scores file, when that is such an export)",
    )
    parser.add_argument(
        "--scores",
        dest="score_columns",
        help="score columns (default: numeric); of an export's items: items.FIELD",
    )
    parser.add_argument("--human", dest="human_columns", help="human label columns (default: all)")
    parser.add_argument("--join", default="answer_id", help="item id column (default answer_id)")
    parser.add_argument("--query-column", default="qid", help="query column (default qid)")
    parser.add_argument(
        "--system-column",
        default="auto",
        help="system column for system-level correlation (default: llm when present; none)",
    )
    parser.add_argument("--by", help="also report each value of this column (e.g. subset)")
    parser.add_argument(
        "--categorical", action="store_true", help="compare a judge's labels with human labels"
    )
    parser.add_argument("--label-column", help="the judge's label column (with --categorical)")
    parser.add_argument(
        "--confidence-column", help="the judge's confidence: review curve over thresholds"
    )
    parser.add_argument(
        "--thresholds", help="comma-separated confidence thresholds (default 0, 0.05, .., 1)"
    )
    parser.add_argument("--out", type=Path, help="folder for JSON, CSV tables and the review plot")
    parser.add_argument(
        "--bootstrap", type=int, default=2000, help="bootstrap resamples of queries (default 2000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    add_query_map_options(parser)
    parser.set_defaults(run=handle)


def _names(value: str | None) -> list[str] | None:
    """A comma-separated option as a list (blank items dropped); None when not given."""
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    try:
        thresholds = [float(t) for t in _names(args.thresholds)] if args.thresholds else None
    except ValueError:
        raise NrpError(f"--thresholds {args.thresholds!r} is not a list of numbers") from None
    system = None if args.system_column.lower() == "none" else args.system_column
    human = args.human
    if human is None:
        if not engine.is_label_studio_export(args.scores):
            raise NrpError(
                f"give the human labels file after {args.scores} (only a Label Studio export "
                "holds both the rankings and the scores)"
            )
        human = args.scores  # the export's rankings, its items' scores
    run = api.meta_from_files(
        args.scores, human, score_columns=_names(args.score_columns),
        human_columns=_names(args.human_columns), join=args.join,
        query_column=args.query_column or None, system_column=system, by=args.by,
        categorical=args.categorical, label_column=args.label_column,
        confidence_column=args.confidence_column, thresholds=thresholds,
        n_bootstrap=args.bootstrap, seed=args.seed, query_map=query_map(args),
    )  # fmt: skip
    print(run.format())
    if args.out:
        written = engine.write_meta(run, args.out)
        print(f"\nwrote {', '.join(str(p) for p in written)}")
    return 0
