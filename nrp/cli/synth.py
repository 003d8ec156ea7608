"""``nrp synth``: a question/answer test set written by an LLM from a folder or table of
documents, filtered (support by the passage, no reference to "the text", near-duplicates,
language), written as a collection folder; resumable like ``nrp generate``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nrp import api, engine
from nrp.cli.common import check_out, print_progress
from nrp.errors import NrpError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "synth",
        help="write a Q&A test set from documents with an LLM (a collection; resumable)",
        description="For each passage of the documents an LLM writes question/answer pairs of "
        "the chosen kinds; pairs are filtered (readable, same language as the passage, no "
        "reference to 'the text', no verbatim copy, no near-duplicate, supported by the passage "
        "per the judge) and written as a collection in --out, with a report.",
    )
    parser.add_argument(
        "docs",
        type=Path,
        help="a table (.csv, .tsv, .jsonl; one document per row) or a folder of "
        ".txt/.md/.html files",
    )
    parser.add_argument(
        "--llm",
        required=True,
        help="LLM spec, as for `nrp generate`: local[:model=...] (the offline SmolLM2-135M "
        "by default) or openai:base_url=URL[,model=NAME,name=LABEL]",
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="collection folder to write (its name is the collection's; its parent the "
        "--indexes folder of nrp info/generate/evaluate); an earlier run's folder is resumed",
    )
    parser.add_argument(
        "--kinds",
        default=",".join(engine.KIND_NAMES),
        help=f"question kinds (default all: {','.join(engine.KIND_NAMES)})",
    )
    parser.add_argument("--id-column", default="docno", help="table: document id column")
    parser.add_argument("--text-column", default="text", help="table: document text column")
    parser.add_argument("--title-column", default="", help="table: document title column")
    parser.add_argument("--passage-chars", type=int, default=1000, help="longest passage (1000)")
    parser.add_argument("--min-passage-chars", type=int, default=200, help="shortest passage (200)")
    parser.add_argument(
        "--passages-per-doc", type=int, default=0, help="first N passages of each document (0: all)"
    )
    parser.add_argument("--limit-docs", type=int, default=0, help="first N documents (0: all)")
    parser.add_argument(
        "--kinds-per-passage",
        type=int,
        default=0,
        help="single-passage kinds per passage, rotating over the kinds (0: all)",
    )
    parser.add_argument(
        "--templates",
        type=Path,
        default=None,
        help="folder of your own prompts KIND-vN.txt (e.g. in the documents' language) "
        "replacing the packaged ones",
    )
    parser.add_argument("--samples", type=int, default=1, help="pairs per passage and kind (1)")
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--temperature", type=float, default=0.7, help="0: greedy")
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0, help="base seed of every pair's seed")
    _add_filter_options(parser)
    parser.set_defaults(run=handle)


def _add_filter_options(parser: argparse.ArgumentParser) -> None:
    """The options of the filters a written pair must pass (judge support, copying, duplicates)."""
    parser.add_argument(
        "--judge",
        default="",
        metavar="PARAMS",
        help="judge parameters over mode=tfn,strategy=single,max_new_tokens=16 and the "
        "support-v1 template, e.g. decoding=choice,backend=local (default: the --llm model)",
    )
    parser.add_argument(
        "--support-threshold", type=float, default=0.5, help="least judge confidence (0.5)"
    )
    parser.add_argument(
        "--max-overlap",
        type=float,
        default=0.8,
        help="drop questions copying this share of their words from the passage (0.8)",
    )
    parser.add_argument(
        "--dedup-threshold",
        type=float,
        default=0.8,
        help="drop questions this similar to a kept one (Jaccard of 5-grams, 0.8)",
    )


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    if not args.docs.exists():
        raise NrpError(f"{args.docs}: file or folder not found")
    options = engine.GenerationOptions(
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
        seed=args.seed,
    )  # fmt: skip
    settings = api.SynthSettings(
        kinds=args.kinds, passage_chars=args.passage_chars,
        min_passage_chars=args.min_passage_chars, passages_per_document=args.passages_per_doc,
        limit_documents=args.limit_docs, kinds_per_passage=args.kinds_per_passage,
        samples=args.samples, options=options, judge=args.judge,
        templates=str(args.templates or ""),
        support_threshold=args.support_threshold, max_overlap=args.max_overlap,
        dedup_threshold=args.dedup_threshold,
        columns=engine.TableColumns(args.id_column, args.text_column, args.title_column),
        progress=print_progress,
    )  # fmt: skip
    result = api.synthesize(args.docs, args.llm, args.out, settings)
    print(engine.format_report(result.report))
    if result.collection is None:
        raise NrpError(
            f"no pair passed the filters; no collection written (report in {args.out}/report.md)"
        )
    name, indexes = result.collection.name, result.collection.parent
    print(
        f"wrote collection {name} in {result.collection} (items.jsonl, report.md); "
        f"use it with --indexes {indexes}: nrp info {name} --indexes {indexes}",
        file=sys.stderr,
    )
    return 0
