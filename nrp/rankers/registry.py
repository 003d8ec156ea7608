"""Registry of rankers, and ``RankerSpec``: a ranker spec as a value, parsed once from its text.

Like ir_measures' measures: each ranker module declares its rankers with one
``register(RankerInfo(...))`` call each, with their parameters (type, default, description), so
``nrp rankers`` lists them and a spec is parsed and checked in one place. nrp's own modules are
named in ``BUILTIN_MODULES``; another package adds rankers by naming its module under the
entry-point group ``nrp.rankers`` (docs/extending.md). Modules must not import heavy libraries
at import time (torch, faiss): ``available`` and ``build`` import them when called.

The grammar of a spec, for every ranker alike::

    name[:key=value,key=value]           bm25:k1=0.9,b=0.5
    a nested parameter holds one spec    guard:ranker=bm25;k1=0.9,content=0.06
    or several joined by +               fuse:rankers=bm25+dense:query=narrative;passages=128
    a list of specs (validation)         tfidf,bm25:k1=0.9,b=0.5,dense
    a ranker wrapped in this process     pyterrier:key=KEY
    a TREC run file (validation only)    run:PATH

Inside a nested value a spec's ``,`` is written ``;`` (a comma would end the value) and a ``;``
right after its name reads as ``:`` (``dense;batch=8`` is ``dense:batch=8``).

``RankerSpec.parse`` checks a text against the declarations (an unknown name or parameter, a
value of the wrong type or out of range is a ``ConfigError`` naming it) and keeps the parameters
that differ from their defaults, typed, nested ones as ``RankerSpec`` values. ``str()`` is the
canonical text: the name, then those parameters sorted by key, so two texts that name one ranker
(``bm25:b=0.5,k1=0.9`` and ``bm25:k1=0.9,b=0.50,k3=8``) give one text, and
``RankerSpec.parse(str(spec)) == spec``. ``build`` makes the ranker (``make_ranker`` is
``RankerSpec.parse(text).build()``); a ranker object's own ``spec()`` is its short spec
(score-neutral parameters such as ``batch`` left out), its name in tables.

``as_ranker`` (``nrp.rankers.coerce``) is the one place where "a ranker-ish thing" becomes a
ranker, for every entry that takes one (validation, scoring, ``NRPScorer``, ``PositionJob.of``):
a spec, a ranker object, or any other PyTerrier transformer (wrapped by ``nrp.rankers.pyterrier``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nrp.components import Component, Registry
from nrp.errors import ConfigError
from nrp.spec import Param, format_spec, parse_given, split_specs

__all__ = [
    "Param",
    "RankerInfo",
    "RankerSpec",
    "all_rankers",
    "make_ranker",
    "parse_rankers",
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


def parse_spec(spec: str | RankerSpec) -> tuple[RankerInfo, dict[str, Any]]:
    """``name[:key=value,key=value]`` -> the ranker's info and its complete, typed parameters
    (``RankerSpec.complete_params``)."""
    parsed = RankerSpec.parse(spec)
    return parsed.info, parsed.complete_params()


def make_ranker(spec: str | RankerSpec) -> Component:
    """Build the ranker a spec names (raises ConfigError when its backend is not available)."""
    return RankerSpec.parse(spec).build()


def default_rankers() -> list[str]:
    """The specs of ``DEFAULT_RANKERS`` that can run here (dense needs sentence-transformers)."""
    return [spec for spec in DEFAULT_RANKERS if RankerSpec.parse(spec).info.available()[0]]


#: ``run:PATH``: a TREC run file, validated beside rankers; it ranks only its own documents
RUN = "run"
#: ``pyterrier:key=KEY``: a PyTerrier transformer wrapped under KEY in this process
PYTERRIER = "pyterrier"
#: separators inside a nested value: between specs, and between one spec's parameters
SPEC_SEPARATOR, PARAM_SEPARATOR = "+", ";"


@dataclass(frozen=True)
class RankerSpec:
    """A ranker's name and the parameters that differ from its defaults, typed and sorted by
    key (a nested parameter's value: a tuple of ``RankerSpec``). Made by ``parse``."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, text: str | RankerSpec) -> RankerSpec:
        """The spec ``text`` writes (a ``RankerSpec``: itself); ``ConfigError`` naming what is
        wrong with it."""
        if isinstance(text, RankerSpec):
            return text
        if not isinstance(text, str):
            raise ConfigError(f"not a ranker spec: {text!r}")
        head, _, rest = text.strip().partition(":")
        if head.strip() == RUN:
            if not rest.strip():
                raise ConfigError(f"ranker spec {text!r}: a run file is named run:PATH")
            return cls(RUN, (("path", rest.strip()),))
        if head.strip() == PYTERRIER:
            key = rest.strip().partition("key=")[2].strip()
            if not rest.strip().startswith("key=") or not key:
                raise ConfigError(
                    f"ranker spec {text!r}: a wrapped transformer is pyterrier:key=KEY"
                )
            return cls(PYTERRIER, (("key", key),))
        rankers = all_rankers()
        name, given = parse_given(text, "ranker", {n: i.params for n, i in rankers.items()})
        declared = rankers[name].params
        params = {}
        for key, value in given.items():
            param = declared[key]
            if param.nested:
                value = _nested(value, param, name, key)
            if value != _default(param, name, key):
                params[key] = value
        return cls(name, tuple(sorted(params.items())))

    # -- what it names ----------------------------------------------------------------------
    @property
    def is_run(self) -> bool:
        """A TREC run file (``run:PATH``), not a ranker: it cannot rank a new answer."""
        return self.name == RUN

    @property
    def is_wrapped(self) -> bool:
        """A PyTerrier transformer wrapped in this process (``pyterrier:key=KEY``)."""
        return self.name == PYTERRIER

    @property
    def info(self) -> RankerInfo:
        """The registry's declaration of this ranker (ConfigError for a run or a wrapped
        transformer, which the registry does not declare)."""
        found = all_rankers().get(self.name)
        if found is None:
            raise ConfigError(f"{self}: not a ranker the registry declares")
        return found

    def given(self) -> dict[str, Any]:
        """The parameters that differ from the defaults, by key."""
        return dict(self.params)

    def complete_params(self) -> dict[str, Any]:
        """Every declared parameter: the defaults, then this spec's values (what the ranker's
        ``build`` takes; a nested value as a tuple of ``RankerSpec``)."""
        declared = self.info.params
        defaults = {key: _default(param, self.name, key) for key, param in declared.items()}
        return {**defaults, **self.given()}

    def at_dtype(self, dtype: str) -> RankerSpec:
        """This spec with every ranker in it that declares a ``dtype`` (the neural ones, nested
        ones too: ``guard:ranker=dense``'s dense) at ``dtype``; a ranker without one, a run
        file and a wrapped transformer as they are. A run's precision, not a choice of
        ranker: ``nrp score --dtype``."""
        if self.is_run or self.is_wrapped:
            return self
        declared = self.info.params
        params = self.complete_params()
        for key, value in params.items():
            if declared[key].nested:
                params[key] = tuple(part.at_dtype(dtype) for part in value)
        if "dtype" in declared:
            if dtype not in (declared["dtype"].choices or (dtype,)):
                raise ConfigError(
                    f"ranker {self.name!r}: dtype={dtype!r} must be one of "
                    f"{', '.join(declared['dtype'].choices)}"
                )
            params["dtype"] = dtype
        default = {k: _default(p, self.name, k) for k, p in declared.items()}
        kept = {k: v for k, v in params.items() if v != default[k]}
        return RankerSpec(self.name, tuple(sorted(kept.items())))

    def parts(self) -> tuple[RankerSpec, ...]:
        """The specs nested in this one (``guard:ranker=``, ``fuse:rankers=``), in order."""
        return tuple(p for _, v in self.params if isinstance(v, tuple) for p in v)

    def build(self, check_available: bool = True) -> Component:
        """The ranker (a ``nrp.rankers.base.Ranker``) this spec names, built by its registry
        entry: ``ConfigError`` when its backend is not available here (unless
        ``check_available`` is False), and for a run file or a wrapped transformer, which no
        entry builds (``nrp.rankers.coerce.as_ranker`` finds a wrapped one)."""
        if self.is_run:
            raise ConfigError(
                f"{self} is a run file; a run ranks only its own documents and cannot rank a "
                "new answer (validate a ranker for it)"
            )
        info = self.info
        if check_available:
            ok, reason = info.available()
            if not ok:
                raise ConfigError(f"ranker {info.name!r} is not available here: {reason}")
        return info.build(self.complete_params())

    # -- its text ---------------------------------------------------------------------------
    def __str__(self) -> str:
        if self.is_run:
            return f"{RUN}:{self.params[0][1]}"
        return format_spec(self.name, {key: _text(value) for key, value in self.params})

    def __repr__(self) -> str:
        return f"RankerSpec({str(self)!r})"


def spec_at_dtype(value: object, dtype: str) -> RankerSpec:
    """``RankerSpec.at_dtype`` of a spec given as text or ``RankerSpec``; ``ConfigError`` for a
    ranker given as an object, which keeps its own precision."""
    if not isinstance(value, str | RankerSpec):
        raise ConfigError(
            f"dtype={dtype} sets the precision of rankers named by a spec; {value!r} is an "
            "object and keeps its own"
        )
    return RankerSpec.parse(value).at_dtype(dtype)


def parse_rankers(text: str | RankerSpec | Iterable[str | RankerSpec]) -> list[RankerSpec]:
    """The specs of a list: a comma-separated text whose specs' own parameters also use commas
    (``tfidf,monot5:model=/m,batch=8,bm25``: three), one spec, or specs given one by one."""
    if isinstance(text, str):
        return [RankerSpec.parse(part) for part in split_specs(text)]
    if isinstance(text, RankerSpec):
        return [text]
    return [RankerSpec.parse(part) for part in text]


def nested_text(specs: Iterable[RankerSpec | str]) -> str:
    """The text of a nested value holding ``specs``: each spec's ``,`` written ``;``, the specs
    joined by ``+`` (``bm25:k1=0.9;b=0.5+dense``)."""
    return SPEC_SEPARATOR.join(str(s).replace(",", PARAM_SEPARATOR) for s in specs)


def nested_specs(
    value: str | Iterable[RankerSpec], param: Param, name: str, key: str
) -> tuple[RankerSpec, ...]:
    """A nested parameter's specs, from its text or as given (``RankerSpec`` values)."""
    if isinstance(value, str):
        return _nested(value, param, name, key)
    return tuple(RankerSpec.parse(v) for v in value)


def _nested(value: str, param: Param, name: str, key: str) -> tuple[RankerSpec, ...]:
    """The specs a nested parameter's text holds: one, or (``several``) two or more joined by
    ``+`` (an empty text: none)."""
    if not value.strip():
        if not param.several:
            raise ConfigError(f"ranker {name!r}: {key}= names no ranker ({key}=bm25)")
        return ()
    parts = [part.strip() for part in value.split(SPEC_SEPARATOR)] if param.several else [value]
    if param.several and (len(parts) < 2 or not all(parts)):
        raise ConfigError(
            f"ranker {name!r}: {key}={value!r} must name at least two rankers joined by + "
            f"({key}=bm25+dense)"
        )
    return tuple(RankerSpec.parse(_unnested(part)) for part in parts)


def _unnested(part: str) -> str:
    """One spec as a nested value writes it, as a spec's text: its ``;`` read as the comma
    between its parameters, a ``;`` ending its name as the colon (``dense;batch=8``)."""
    part = part.strip()
    end = min((i for i in (part.find(":"), part.find(PARAM_SEPARATOR)) if i >= 0), default=-1)
    name, params = (part, "") if end < 0 else (part[:end], part[end + 1 :])
    return f"{name}:{params.replace(PARAM_SEPARATOR, ',')}" if params else name


def _default(param: Param, name: str, key: str) -> Any:
    """A parameter's default, a nested one as specs."""
    if param.nested and isinstance(param.default, str):
        return _nested(param.default, param, name, key)
    return param.default


def _text(value: Any) -> Any:
    """A parameter's value as its spec writes it (nested specs: ``nested_text``)."""
    return nested_text(value) if isinstance(value, tuple) else value
