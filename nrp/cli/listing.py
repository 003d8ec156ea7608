"""``nrp collections``, ``nrp formats``, ``nrp rankers``, ``nrp evaluators``: what is there to use.

Four small read-only commands, together because rankers and evaluators describe their parameters
the same way (one line format, ``parameter_line``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nrp import api, engine
from nrp.cli.common import add_indexes_option


def add_collections_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("collections", help="list built collections")
    add_indexes_option(parser)
    parser.set_defaults(run=list_collections)


def add_formats_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("formats", help="list input formats and their options")
    parser.set_defaults(run=list_formats)


def add_rankers_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("rankers", help="list rankers, their backends and parameters")
    parser.set_defaults(run=list_rankers)


def add_evaluators_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "evaluators", help="list evaluators beside NRP (by family) and their parameters"
    )
    parser.set_defaults(run=list_evaluators)


def list_collections(args: argparse.Namespace) -> int:
    names = api.list_collections(args.indexes)
    if not names:
        print(f"no collections in {args.indexes or engine.default_indexes_dir()}")
        return 0
    root = Path(args.indexes or engine.default_indexes_dir())
    for name in names:
        collection = api.Collection(root / name)
        counts = collection.meta.get("counts", {})
        dims = ", ".join(collection.dimensions)
        print(
            f"{name}\t{collection.meta.get('built_at')}\t{dims}\t"
            f"{counts.get('judgment lines read', 0):,} judgment lines"
        )
    return 0


def list_formats(args: argparse.Namespace) -> int:
    for fmt in api.all_formats().values():
        print(f"{fmt.name}: {fmt.description} [provides {', '.join(fmt.provides)}]")
        for key, option in fmt.options.items():
            required = "required" if option.required else f"default {option.default!r}"
            print(f"    {key} ({required}): {option.description}")
    return 0


def parameter_line(key: str, param: Any) -> str:
    """One declared parameter of a ranker or evaluator: name=default (type; choices): what."""
    choices = f"; one of {', '.join(map(str, param.choices))}" if param.choices else ""
    if getattr(param, "range_text", None) and param.range_text():
        choices += f"; {param.range_text()}"
    return f"{key}={param.default!r} ({param.type.__name__}{choices}): {param.description}"


def list_rankers(args: argparse.Namespace) -> int:
    for info in api.all_rankers().values():
        ok, reason = info.available()
        state = "available" if ok else f"not available: {reason}"
        print(f"{info.name} [{info.backend}] ({state}): {info.description}")
        for key, param in info.params.items():
            print(f"    {parameter_line(key, param)}")
    return 0


def list_evaluators(args: argparse.Namespace) -> int:
    families: dict[str, list] = {}
    for info in api.all_evaluators().values():
        families.setdefault(info.family, []).append(info)
    for family, infos in families.items():
        print(f"{family}:")
        for info in infos:
            ok, reason = info.available()
            state = "available" if ok else f"not available: {reason}"
            print(f"  {info.name} ({state}): {info.description}")
            for key, param in info.params.items():
                print(f"      {parameter_line(key, param)}")
    return 0
