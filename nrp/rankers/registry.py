"""Registry of rankers and the one parser of ranker specs (``monot5:model=/m,batch=64``).

Like ir_measures' measures: each ranker module declares its rankers with one
``register(RankerInfo(...))`` call each, with their parameters (type, default, description), so
``nrp rankers`` lists them and a spec is parsed and checked in one place. nrp's own modules are
named in ``BUILTIN_MODULES``; another package adds rankers by naming its module under the
entry-point group ``nrp.rankers`` (docs/extending.md). Modules must not import heavy libraries
at import time (torch, faiss): ``available`` and ``build`` import them when called.

``as_ranker`` is the one place where "a ranker-ish thing" becomes a ranker, for every entry that
takes one (validation, scoring, ``NRPScorer``, ``PositionJob.of``): a spec string, a ranker
object, or any other PyTerrier transformer (wrapped by ``nrp.rankers.pyterrier``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nrp.components import Registry
from nrp.errors import ConfigError
from nrp.spec import Param, parse_params, split_specs

__all__ = [
    "Param",
    "RankerInfo",
    "all_rankers",
    "make_ranker",
    "parse_spec",
    "register",
    "split_specs",
    "unregister",
]

#: nrp's own ranker modules, imported on the first listing (no package scan)
BUILTIN_MODULES = (
    "nrp.rankers.lexical",
    "nrp.rankers.dense",
    "nrp.rankers.colbert",
    "nrp.rankers.t5",
    "nrp.rankers.cross",
    "nrp.rankers.random_order",
    "nrp.rankers.fusion",
    "nrp.rankers.guard",
)
ENTRY_POINT_GROUP = "nrp.rankers"
#: what validation ranks when not told: every built-in ranker that needs no model folder (the
#: lexical ones, dense with the packaged all-MiniLM-L6-v2), dense guarded against texts that
#: only mirror or evade the question (with and without the content term chosen on MEDIQA
#: train+val; docs/validity.md), and random as the floor
DEFAULT_RANKERS = ("tfidf", "dph", "bm25", "dense", "guard", "guard:content=0.06", "random")


@dataclass(frozen=True)
class RankerInfo:
    name: str
    description: str
    backend: str
    build: Callable[[dict[str, Any]], Any]  # params (complete, typed) -> Ranker
    params: Mapping[str, Param] = field(default_factory=dict)
    available: Callable[[], tuple[bool, str]] = lambda: (True, "")


RANKER_REGISTRY: Registry[RankerInfo] = Registry(
    "ranker", RankerInfo, BUILTIN_MODULES, ENTRY_POINT_GROUP
)


def register(*rankers: RankerInfo) -> None:
    """Declare rankers: ``nrp rankers`` lists them and ``make_ranker`` builds them from a spec."""
    for info in rankers:
        RANKER_REGISTRY.register(info)


def unregister(name: str) -> RankerInfo:
    """Remove a ranker's declaration (a notebook redefining it, a test's own ranker)."""
    return RANKER_REGISTRY.unregister(name)


def all_rankers() -> dict[str, RankerInfo]:
    """Every declared ranker by name, sorted (built-ins and installed plug-ins)."""
    return RANKER_REGISTRY.entries()


def parse_spec(spec: str) -> tuple[RankerInfo, dict[str, Any]]:
    """``name[:key=value,key=value]`` -> the ranker's info and its complete, typed parameters."""
    rankers = all_rankers()
    name, params = parse_params(spec, "ranker", {n: i.params for n, i in rankers.items()})
    return rankers[name], params


def make_ranker(spec: str):
    """Build the ranker a spec names (raises ConfigError when its backend is not available)."""
    info, params = parse_spec(spec)
    ok, reason = info.available()
    if not ok:
        raise ConfigError(f"ranker {info.name!r} is not available here: {reason}")
    return info.build(params)


def default_rankers() -> list[str]:
    """The specs of ``DEFAULT_RANKERS`` that can run here (dense needs sentence-transformers)."""
    known = all_rankers()
    names = [(spec, spec.partition(":")[0]) for spec in DEFAULT_RANKERS]
    return [spec for spec, name in names if name in known and known[name].available()[0]]
