"""Spec strings, the one syntax for configured components: ``name[:key=value,key=value]``.

Rankers (``monot5:model=/m,batch=64``) and evaluators (``judge:mode=rubric,samples=3``) are both
declared in registries with typed ``Param`` entries; this module parses and checks a spec against
those declarations (``parse_params``) and writes one back (``format_spec``), so every component
kind spells and validates its options the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nrp.errors import ConfigError, quote

#: the range of every integer parameter (batch sizes, seeds, passage lengths, k): a 32-bit signed
#: integer, which every library the components call takes; anything larger is a typo or an attack
INT_RANGE = (-(2**31), 2**31 - 1)

#: what a string parameter's value names: plain ``text``, a ``path`` to a file or folder the
#: component reads, or a ``model`` it loads (a folder, a hub id, a packaged model's name). The
#: service checks paths against its data roots and models against the models it offers by this
#: declaration, never by the parameter's name.
PARAM_KINDS = ("text", "path", "model")


@dataclass(frozen=True)
class Param:
    """A declared parameter: its type, default, what it does, and the values it may take: one of
    ``choices``, or a number from ``minimum`` to ``maximum`` (either bound may be open, None),
    checked when a spec is parsed, so ``bm25:k1=-1`` or ``dense:batch=0`` never reach a ranker.
    ``kind`` (``PARAM_KINDS``): what the value names (``Param(str, "", "...", kind="path")``).
    ``nested``: the value holds other components' specs with their own parameters
    (``guard:ranker=dense:model=mpnet``), so ``:key=`` in it is theirs, not a misplaced one;
    ``several``: a nested value of two or more specs joined by ``+`` (``fuse:rankers=bm25+dense``),
    where a nested value is otherwise one spec."""

    type: type
    default: Any
    description: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    kind: str = "text"
    nested: bool = False
    several: bool = False

    def __post_init__(self) -> None:
        if self.several and not self.nested:
            raise ValueError("several: a nested parameter's option")
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"parameter kind {self.kind!r}: one of {', '.join(PARAM_KINDS)}")
        if self.kind != "text" and self.type is not str:
            raise ValueError(f"a {self.kind} parameter is a str, not {self.type.__name__}")

    def range_text(self) -> str:
        """The declared range in words (``from 0 to 1``, ``>= 1``); empty when there is none."""
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            return f"from {low:g} to {high:g}"
        if low is not None:
            return f">= {low:g}"
        return f"<= {high:g}" if high is not None else ""

    def in_range(self, value: float) -> bool:
        return (self.minimum is None or value >= self.minimum) and (
            self.maximum is None or value <= self.maximum
        )


def convert(value: str, param: Param, kind: str, name: str, key: str) -> Any:
    """``value`` as the parameter's type, checked against its choices."""
    try:
        if param.type is bool:
            lowered = value.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            converted: Any = lowered in ("true", "1", "yes")
        else:
            converted = param.type(value)
    except ValueError:
        raise ConfigError(
            f"{kind} {name!r}: parameter {key}={quote(value)} is not a {param.type.__name__}"
        ) from None
    if param.type is int and not INT_RANGE[0] <= converted <= INT_RANGE[1]:
        raise ConfigError(
            f"{kind} {name!r}: parameter {key}={quote(value)} is out of range "
            f"({INT_RANGE[0]:,} to {INT_RANGE[1]:,})"
        )
    if param.type is float and not math.isfinite(converted):
        raise ConfigError(
            f"{kind} {name!r}: parameter {key}={quote(value)} must be a finite number"
        )
    if param.type in (int, float) and not param.in_range(converted):
        raise ConfigError(
            f"{kind} {name!r}: parameter {key}={quote(value)} is out of range "
            f"({key} must be {param.range_text()})"
        )
    if param.choices is not None and converted not in param.choices:
        raise ConfigError(
            f"{kind} {name!r}: parameter {key}={value!r} must be one of "
            f"{', '.join(map(str, param.choices))}"
        )
    return converted


def parse_params(
    spec: str, kind: str, known: Mapping[str, Mapping[str, Param]]
) -> tuple[str, dict[str, Any]]:
    """``name[:key=value,...]`` -> (name, complete typed parameters). ``known``: name -> its
    declared parameters; ``kind`` names the component in errors ("ranker", "evaluator")."""
    name, given = parse_given(spec, kind, known)
    return name, {**{key: param.default for key, param in known[name].items()}, **given}


def parse_given(
    spec: str, kind: str, known: Mapping[str, Mapping[str, Param]]
) -> tuple[str, dict[str, Any]]:
    """``name[:key=value,...]`` -> (name, the parameters it gives, typed, in the order given;
    a parameter given twice keeps its last value). Checked as ``parse_params`` checks them."""
    name, _, rest = spec.strip().partition(":")
    if name not in known:
        raise ConfigError(f"unknown {kind} {name!r} in spec {spec!r}; known: {', '.join(known)}")
    declared = known[name]
    given: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise ConfigError(f"{kind} spec {spec!r}: {item!r} is not key=value")
        if key not in declared:
            names = ", ".join(declared) or "none"
            raise ConfigError(f"{kind} {name!r} has no parameter {key!r} (known: {names})")
        _check_separators(spec, kind, name, key, value, declared)
        given[key] = convert(value.strip(), declared[key], kind, name, key)
    return name, given


def _check_separators(
    spec: str, kind: str, name: str, key: str, value: str, declared: Mapping[str, Param]
) -> None:
    """ConfigError when ``value`` holds ``:OTHER=`` for a declared ``OTHER``: a second
    parameter written after ``:`` (``nrp:label=a:rankers=dense``), which would otherwise be
    taken silently as part of this parameter's value. A ``nested`` parameter's value is specs,
    whose parameters follow ``:``."""
    if declared[key].nested:
        return
    for other in declared:
        if f":{other}=" in value:
            raise ConfigError(
                f"{kind} spec {spec!r}: parameter {key}={quote(value)} holds ':{other}=': "
                f"parameters are separated by ',' ({name}:{key}=...,{other}=...)"
            )


def format_spec(name: str, params: Mapping[str, Any]) -> str:
    """(name, parameters) -> ``name[:key=value,...]`` in the order given: the inverse of
    ``parse_params`` for values without a comma (a comma would split the spec)."""
    text = ",".join(f"{key}={value!s}" for key, value in params.items())
    return f"{name}:{text}" if text else name


def split_specs(specs: str) -> list[str]:
    """Split a comma-separated list of specs where a spec's own parameters also use commas:
    ``tfidf,monot5:model=/m,batch=8,bm25`` -> [tfidf, monot5:model=/m,batch=8, bm25]."""
    result: list[str] = []
    for part in (p.strip() for p in specs.split(",")):
        if not part:
            continue
        if result and "=" in part and ":" not in part.split("=", 1)[0]:
            result[-1] += "," + part
        else:
            result.append(part)
    return result
