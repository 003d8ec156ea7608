"""``nrp generate``: answers to a collection's queries from a local or OpenAI-compatible LLM,
kept as they are made, so an interrupted run resumes where it stopped."""

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
from nrp.errors import NrpError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "generate", help="generate answers with a local or OpenAI-compatible LLM (resumable)"
    )
    parser.add_argument("collection", help="collection name (its topics are the queries)")
    parser.add_argument(
        "--llm",
        default="local",
        help="LLM spec: local[:model=PATH_OR_HUB_ID,name=LABEL,device=auto,dtype=fp32] "
        "(default: the offline SmolLM2-135M), openai:model=NAME[,base_url=URL], or a model path",
    )
    parser.add_argument(
        "--prompts",
        default="none,short-qa,long-qa,multimedqa",
        help="comma-separated prompt strategies: none, short-qa, long-qa, multimedqa or a "
        "template file; NAME:chat sends it through the chat template (default: the study's four)",
    )
    parser.add_argument("--samples", type=int, default=10, help="answers per query and prompt")
    parser.add_argument(
        "--out", type=Path, required=True, help="answers file (.jsonl, .parquet or .csv)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--temperature", type=float, default=0.75, help="0: greedy")
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--repetition-penalty", type=float, default=1.2)
    parser.add_argument("--seed", type=int, default=0, help="base seed of every answer's seed")
    parser.add_argument("--limit-queries", type=int, help="only the first N queries")
    parser.add_argument("--batch", type=int, help="answers per forward pass (local models)")
    add_indexes_option(parser)
    add_executor_options(parser)
    parser.set_defaults(run=handle)


def _llm(args: argparse.Namespace) -> object:
    """The --llm spec, with --batch folded in (local models only)."""
    if args.batch is None:
        return args.llm
    spec = engine.parse_llm(args.llm)
    if spec.backend != "local":
        raise NrpError("--batch applies to local models only")
    return {**spec.params, "backend": "local", "batch": args.batch, "name": spec.label}


def handle(args: argparse.Namespace) -> int:
    check_out(args.out, "file")
    llm = _llm(args)
    options = engine.GenerationOptions(
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
        top_p=args.top_p, repetition_penalty=args.repetition_penalty, seed=args.seed,
    )  # fmt: skip
    with open_executor(args) as executor:
        answers = api.generate_answers(
            args.collection, llm, args.prompts, args.samples, options, args.out,
            limit_queries=args.limit_queries, indexes=args.indexes,
            progress=print_progress, executor=executor,
        )  # fmt: skip
        report_executor(executor)
    counts = answers.attrs["counts"]
    print(f"{counts['answers']:,} answers: {counts['generated']:,} generated, "
          f"{counts['from_store']:,} already there, {counts['empty']:,} empty (left out); "
          f"wrote {args.out}")  # fmt: skip
    return 0
