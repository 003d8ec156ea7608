"""``nrp score``: the NRP of generated answers, each ranked among its query's judged documents
by each dimension's ranker (from a validation JSON or named with --ranker); beside the results,
``flags.csv``: the flags of degenerate answers (an echo of the question, a copy of a judged
document, little content), which ``nrp summary``, ``nrp report`` and ``nrp check`` read; and when
any answer cites documents (TREC RAG reports), ``citations.csv``: the cited documents judged per
dimension, which ``nrp leaderboard`` reads."""

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
    read_answer_blocks,
    read_answer_set,
    report_executor,
)
from nrp.errors import NrpError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "score", help="NRP of generated answers: rank each among its query's judged documents"
    )
    parser.add_argument("collection")
    parser.add_argument(
        "answers",
        type=Path,
        help="answer set: JSONL/CSV/TSV/Parquet (answer_id, llm, prompt, qid, sample, text), "
        "the wide layout <llm>/<prompt>.csv (qid, query, answer1..answerN), or TREC RAG report "
        "JSONL (metadata, answer/responses with citations): file or folder",
    )
    add_ranker_choice(parser)
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder for results.parquet/.csv, flags.csv and (answers with citations) "
        "citations.csv",
    )
    add_ties_option(parser)
    parser.add_argument(
        "--frozen-stats",
        action="store_true",
        help="lexical rankers keep D_q's statistics (default: answer added to them)",
    )
    parser.add_argument(
        "--full-rerank",
        action="store_true",
        help="reference mode: re-rank D_q plus the answer from scratch per answer",
    )
    _add_weighting(parser)
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip (and list) answer rows that cannot be read (an unknown qid, a bad sample or "
        "id); an empty answer is not skipped: it is scored last (NRP 0) and flagged empty",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not use the caches")
    add_dtype_option(parser, "the choice names", "D_q is scored again at it")
    parser.add_argument(
        "--trec",
        type=Path,
        metavar="DIR",
        help="also write the injected rankings (D_q plus each answer) as TREC run files: "
        "DIR/DIMENSION/LLM__PROMPT__SAMPLE.run, index DIR/runs.tsv; answers are positioned "
        "afresh, not read from the results cache (DIR: new, empty, or written by nrp before)",
    )
    add_indexes_option(parser)
    add_executor_options(parser)
    parser.set_defaults(run=handle)


def _pairs(items: list[str] | None, what: str) -> dict[str, str]:
    """``DIM=VALUE`` options as a dict (a malformed one is a one-line error naming it)."""
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise NrpError(f"{what} {item!r} is not DIM=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


def add_ranker_choice(parser: argparse.ArgumentParser) -> None:
    """``--validation FILE`` or ``--ranker DIM=SPEC`` (repeated) / ``--ranker SPEC``: what
    ``ranker_choice`` reads (``nrp score``, ``nrp judge``)."""
    chooser = parser.add_mutually_exclusive_group()
    chooser.add_argument(
        "--validation",
        type=Path,
        help="validation JSON: each dimension's chosen ranker (default, without --ranker: "
        f"INDEXES/COLLECTION/{api.VALIDATION_FILE}, written by nrp validate)",
    )
    chooser.add_argument(
        "--ranker",
        "--rankers",
        action="append",
        metavar="DIM=SPEC",
        help="ranker for a dimension (repeat), or SPEC for every dimension",
    )


def add_dtype_option(parser: argparse.ArgumentParser, which: str, then: str) -> None:
    """``--dtype``: the precision of every neural ranker ``which`` (``RankerSpec.at_dtype``)."""
    parser.add_argument(
        "--dtype",
        choices=("fp32", "bf16"),
        help=f"precision of every neural ranker {which}, nested ones too (default: as each "
        "spec says, fp32). bf16: fp32 weights with bfloat16 matrix products, about 2.7x "
        "faster on a CPU with bfloat16 matrix units (AMX, AVX512-BF16) and on a GPU; refused "
        f"elsewhere. {then}",
    )


def add_ties_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ties",
        choices=engine.TIE_MODES,
        default=engine.DEFAULT_TIE_MODE,
        help=f"how documents tied with the answer count (default {engine.DEFAULT_TIE_MODE})",
    )


def ranker_choice(args: argparse.Namespace, collection: api.Collection) -> api.RankerChoice:
    """The choice ``--validation FILE`` or ``--ranker`` give; given neither, the collection's
    own validation JSON (``nrp validate`` wrote it)."""
    if args.validation:
        return api.RankerChoice.read(args.validation)
    if not args.ranker:
        path = collection.path / api.VALIDATION_FILE
        if not path.is_file():
            raise NrpError(
                f"no ranker chosen for {collection.name}: run nrp validate {collection.name} "
                f"first (it writes {path}), or give --ranker SPEC or --validation FILE"
            )
        return api.RankerChoice.read(path)
    return api.RankerChoice.from_options(args.ranker)


def _add_weighting(parser: argparse.ArgumentParser) -> None:
    """The options of the weighted NRP and of the dimensions scored."""
    parser.add_argument(
        "--weight",
        action="append",
        metavar="DIM=W",
        help="weight of a dimension in the combined NRP (default: validation's weighting "
        "when the rankers come from a validation, else equal)",
    )
    parser.add_argument(
        "--all-dimensions",
        action="store_true",
        help="equal weights over every dimension in the combined NRP, also those whose "
        "chosen ranker validation found no better than random (left out by default)",
    )
    parser.add_argument(
        "--every-dimension",
        action="store_true",
        help="also position the dimensions of weight 0 in the weighted NRP (left out by "
        "validation or weighted 0): not scored by default, since they count for nothing",
    )


def handle(args: argparse.Namespace) -> int:
    check_out(args.out)
    collection = api.Collection.load(args.collection, args.indexes)
    if args.trec:  # the injected rankings are written from one block
        blocks = engine.AnswerBlocks.at_once(
            read_answer_set(args.answers, collection, args.skip_invalid)
        )
    else:
        blocks = read_answer_blocks(args.answers, collection, args.skip_invalid)
    rankers = ranker_choice(args, collection)
    weights = {k: float(v) for k, v in _pairs(args.weight, "--weight").items()} or None
    with open_executor(args) as executor:
        # the flags on a second core (a forked worker) while the answers are positioned here
        scored = api.score(
            collection, blocks, rankers, out=args.out, ties=args.ties,
            frozen_stats=args.frozen_stats, full_rerank=args.full_rerank, weights=weights,
            all_dimensions=args.all_dimensions, every_dimension=args.every_dimension,
            cache=not args.no_cache, progress=print_progress, executor=executor, trec=args.trec,
            dtype=args.dtype,
        )  # fmt: skip
        report_executor(executor)
    if scored.citations:
        print(f"wrote the cited documents judged per dimension to {engine.CITATIONS_FILE}")
    attrs = scored.attrs
    if attrs.get("note"):
        print(attrs["note"])
    for dimension, why in attrs.get("left_out", {}).items():
        print(f"{dimension}: left out of the weighted NRP ({why}); --all-dimensions puts it back")
    if attrs.get("not_scored"):
        print(f"not scored (weight 0 in the weighted NRP): {', '.join(attrs['not_scored'])}; "
              "--every-dimension scores them")  # fmt: skip
    for warning in attrs.get("warnings", []):
        print(f"warning: {warning}")
    print(f"{scored.scored:,} answers scored; wrote {args.out}/results.parquet "
          f"and results.csv; {scored.flagged:,} of {scored.answers:,} answers flagged "
          f"in {engine.FLAGS_FILE}")  # fmt: skip
    if args.trec:
        print(f"wrote the injected rankings to {args.trec}")
    return 0
