"""``nrp review PROJECT_FILE``: make a review project, serve it to reviewers, export their work.

With ``--create KINDS`` the project file is written from a collection, answers and a judge's
evaluations; with ``--export``, ``--export-label-studio`` or ``--import-label-studio`` the
saved reviews go out or come in; with ``--progress`` the done counts are printed; otherwise
the review app starts (``nrp.service.review_app``) and prints a login link per reviewer."""

from __future__ import annotations

import argparse
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import add_indexes_option, read_answer_set
from nrp.errors import NrpError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "review",
        help="human review: make a project (rank, grade, verify), serve it to reviewers, "
        "export what they said for nrp meta or Label Studio",
    )
    parser.add_argument("project", type=Path, help="review project file (JSON)")
    make = parser.add_argument_group("making the project (--create)")
    make.add_argument(
        "--create", metavar="KINDS", help="write the project: comma-separated rank,grade,verify"
    )
    make.add_argument("--collection", help="the collection the answers answer")
    make.add_argument("--answers", type=Path, help="answer file or folder")
    make.add_argument(
        "--documents", action="store_true", help="rank: add the judged documents as candidates"
    )
    make.add_argument(
        "--evaluations", type=Path, help="verify: an `nrp evaluate` output with judge labels"
    )
    make.add_argument("--reviewers", default="reviewer", help="comma-separated reviewer names")
    make.add_argument("--reviews-per-item", type=int, default=1, help="reviews per item (1)")
    make.add_argument("--dimensions", help="grade: dimensions (default: all of the collection)")
    make.add_argument("--k", type=int, default=5, help="rank: candidates per query (5)")
    make.add_argument("--seed", type=int, default=0, help="rank: shuffle seed (0)")
    make.add_argument(
        "--threshold", type=float, default=0.5, help="verify: confidence under which (0.5)"
    )
    make.add_argument(
        "--label-column", default="judge.label", help="verify: the judge's label (judge.label)"
    )
    make.add_argument(
        "--confidence-column",
        default="judge.confidence",
        help="verify: the label's confidence (judge.confidence)",
    )
    make.add_argument(
        "--choices",
        default="TRUE,FALSE,NOT GIVEN",
        help="verify: the labels a reviewer chooses from (rubric: 1,2,3,4,5)",
    )
    make.add_argument("--name", help="project name (default: the file's stem)")
    files = parser.add_argument_group("reviews in and out")
    files.add_argument("--export", type=Path, metavar="DIR", help="write nrp meta's human files")
    files.add_argument("--export-label-studio", type=Path, metavar="FILE")
    files.add_argument("--import-label-studio", type=Path, metavar="FILE")
    files.add_argument("--progress", action="store_true", help="print done / assigned")
    serve = parser.add_argument_group("serving")
    serve.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    serve.add_argument(
        "--tokens-file", type=Path, help="'review/NAME TOKEN' lines (default: fresh tokens)"
    )
    add_indexes_option(parser)
    parser.set_defaults(run=handle)


def _names(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def create(args: argparse.Namespace) -> int:
    if args.project.exists():
        # its reviews (beside it) name its items: a new project under the same name would
        # leave them pointing at other items
        raise NrpError(f"{args.project}: exists; remove it or choose another file name")
    collection = api.Collection.load(args.collection or "", args.indexes)
    answers = None
    if args.answers is not None:
        answers = read_answer_set(args.answers, collection, skip_invalid=False).answers
    project = api.create_review_project(
        args.name or args.project.stem.split(".")[0], _names(args.create), collection,
        _names(args.reviewers), answers, reviews_per_item=args.reviews_per_item,
        documents=args.documents, evaluations=args.evaluations,
        dimensions=_names(args.dimensions) or None, k=args.k, seed=args.seed,
        threshold=args.threshold, label_column=args.label_column,
        confidence_column=args.confidence_column, choices=_names(args.choices),
    )  # fmt: skip
    project.write(args.project)
    counts = {kind: sum(i.kind == kind for i in project.items) for kind in project.kinds}
    listed = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no"
    print(f"wrote {args.project}: {listed} item(s), {len(project.reviewers)} reviewer(s)")
    return 0


def handle(args: argparse.Namespace) -> int:
    if args.create:
        if not args.collection:
            raise NrpError("--create needs --collection")
        return create(args)
    desk = engine.ReviewDesk.open(args.project)
    acted = False
    if args.import_label_studio:
        stored = desk.import_label_studio(args.import_label_studio)
        print(f"imported {stored} review(s) from {args.import_label_studio}")
        acted = True
    if args.export:
        written = desk.export_human(args.export)
        print(f"wrote {', '.join(str(p) for p in written)}")
        acted = True
    if args.export_label_studio:
        written = desk.export_label_studio(args.export_label_studio)
        print(f"wrote {', '.join(str(p) for p in written)}")
        acted = True
    if args.progress:
        for row in desk.progress():
            print(f"{row['reviewer']}: {row['done']} / {row['assigned']} done")
        acted = True
    if acted:
        return 0
    from nrp.service.review_app import serve_review

    serve_review(args.project, args.host, args.port, args.tokens_file)
    return 0
