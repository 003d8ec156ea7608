"""The ``nrp`` command: a thin shell over the library API (``nrp.api``).

Each sub-command is one module holding its parser (``add_parser``) and its handler together, so
a command is read, changed and tested in one place; this module only puts them in the order
``nrp --help`` lists them and runs the one named. Command modules import the library lazily
(``nrp.api`` resolves a name on first use), so ``nrp --help`` loads no scoring stack.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from nrp import engine
from nrp.cli import (
    agreement,
    annotators,
    check,
    evaluate,
    generate,
    info,
    ingest,
    judge,
    leaderboard,
    listing,
    meta,
    probe,
    report,
    review,
    run,
    score,
    serve,
    summary,
    synth,
    train,
    validate,
)
from nrp.cli.common import run_command
from nrp.version import __version__

__all__ = ["build_parser", "main"]

# each adds one sub-command; in the order `nrp --help` lists them
_COMMANDS = (
    ingest.add_parser,
    listing.add_collections_parser,
    info.add_parser,
    listing.add_formats_parser,
    listing.add_rankers_parser,
    validate.add_parser,
    score.add_parser,
    summary.add_parser,
    leaderboard.add_parser,
    judge.add_parser,
    check.add_parser,
    agreement.add_parser,
    listing.add_evaluators_parser,
    evaluate.add_parser,
    meta.add_parser,
    annotators.add_parser,
    probe.add_parser,
    serve.add_parser,
    review.add_parser,
    report.add_parser,
    generate.add_parser,
    synth.add_parser,
    run.add_parser,
    train.add_parser,
    train.add_guard_parser,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nrp",
        description="Score generated answers by where a validated ranker puts them among "
        "human-judged documents (Normalized Rank Position).",
    )
    parser.add_argument("--version", action="version", version=f"nrp {__version__}")
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (lines, and bars with the time left on a terminal)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add_parser in _COMMANDS:
        add_parser(commands)
    # an option is spelt out: argparse would otherwise take --run for --runs and --score for
    # --scores without a word, and a new option could silently change what an old
    # abbreviation meant
    for sub in [parser, *commands.choices.values()]:
        sub.allow_abbrev = False
    for sub in commands.choices.values():
        sub.set_defaults(path_options=path_options(sub))
    return parser


def path_options(parser: argparse.ArgumentParser) -> dict[str, str]:
    """dest -> how the user gave it (``--runs``, ``ANSWERS``) for every path argument: an error
    about a file can then say which option to change (``run_command``)."""
    found = {}
    for action in parser._actions:
        if action.type is Path:
            shown = action.option_strings[-1] if action.option_strings else None
            found[action.dest] = shown or str(action.metavar or action.dest.upper())
    return found


def main(argv: Sequence[str] | None = None) -> int:
    engine.close_hub_unless_allowed()  # no model hub unless NRP_MODEL_HUB=1 (docs/security.md)
    words = list(sys.argv[1:] if argv is None else argv)
    return run_command(build_parser().parse_args(train.guard_argv(words)))
