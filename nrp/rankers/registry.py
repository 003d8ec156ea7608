"""Registry of rankers and the one parser of ranker specs (``monot5:model=/m,batch=64``).

Like ir_measures' measures: each ranker module declares ``RANKERS = [RankerInfo(...)]`` with its
parameters (type, default, description), so ``nrp rankers`` lists them and a spec is parsed and
checked in one place. Modules must not import heavy libraries at import time (torch, faiss):
``available`` and ``build`` import them when called.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from nrp.errors import ConfigError
from nrp.spec import Param, parse_params, split_specs

__all__ = ["Param", "RankerInfo", "all_rankers", "make_ranker", "parse_spec", "split_specs"]


@dataclass(frozen=True)
class RankerInfo:
    name: str
    description: str
    backend: str
    build: Callable[[dict[str, Any]], Any]  # params (complete, typed) -> Ranker
    params: Mapping[str, Param] = field(default_factory=dict)
    available: Callable[[], tuple[bool, str]] = lambda: (True, "")


@cache
def all_rankers() -> dict[str, RankerInfo]:
    import nrp.rankers as package

    found: dict[str, RankerInfo] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        if module_info.name.startswith("_") or module_info.name in ("base", "registry", "cache"):
            continue
        module = importlib.import_module(f"nrp.rankers.{module_info.name}")
        for info in getattr(module, "RANKERS", ()):
            if info.name in found:
                raise RuntimeError(f"ranker {info.name!r} registered twice")
            found[info.name] = info
    return dict(sorted(found.items()))


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
