"""What rankers and evaluators share: one component base, one kind of registry, one serialiser.

A ranker (``monot5:batch=64``) and an evaluator (``rouge:stemmer=false``) are both configured by a
spec string (syntax in ``nrp.spec``), identified by a fingerprint that keys their caches, and
shipped to workers as the spec that rebuilds them. ``Component`` holds these ideas once:

- ``params``, the complete typed parameters its registry declared and the spec filled in;
- ``fingerprint()``: SHA-256 of ``identity()`` (name, the parameters that change what it computes,
  its model checksum), so a new batch size or device still finds the cached scores;
- ``spec()``: THE serialiser of a component to the spec string that rebuilds it. The short form
  (the default; what result tables and logs show) leaves out parameters at their declared default;
  ``spec(complete=True)`` writes every parameter (``device`` and ``batch`` included): what a task
  ships to a worker (``component_spec``).

``Registry``: name -> declaration (``RankerInfo``, ``EvaluatorInfo``, ``Format``), filled by
explicit ``register(...)`` calls, one per component in the module that defines it (as
ir_measures registers its measures). The registry imports its built-in modules from one explicit
list, then every module that installed packages declare under its entry-point group
(``nrp.rankers``, ``nrp.evaluators``, ``nrp.formats``), so a separate package plugs in without
editing nrp. Loading waits for the first listing, and modules import heavy libraries (torch,
spaCy) only in ``build`` / ``available``, so ``nrp rankers`` stays quick.

``component_spec`` / ``shipped_component``: what a task carries for a component. When no spec
rebuilds the object (a subclass, a value with a comma) the object itself is shipped. Either way
the worker compares its component's fingerprint with the driver's before computing anything: a
node with other model files or library versions fails loudly instead of caching wrong scores
under the driver's key.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Generic, TypeVar

from nrp.spec import Param, format_spec

Info = TypeVar("Info")


class Component:
    """Base of rankers and evaluators: declared parameters, fingerprint, spec string.

    Subclasses set ``name`` (the registry's name), say which registry declares them
    (``declared_params``), and may widen ``SCORE_NEUTRAL_PARAMS`` (left out of the fingerprint)
    and ``SHORT_SPEC_OMITS`` (left out of the short spec even when not at their default).
    """

    name: ClassVar[str] = "component"
    #: parameters that change how results are computed, not what they are: left out of the
    #: fingerprint, so a new batch size or a quieter run still finds its cached results
    SCORE_NEUTRAL_PARAMS: ClassVar[frozenset[str]] = frozenset()
    #: parameters the short spec never shows (rankers: the score-neutral ones)
    SHORT_SPEC_OMITS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, params: Mapping[str, Any] | None = None):
        self.params: dict[str, Any] = dict(params or {})

    # -- identity -----------------------------------------------------------------------------
    def model_checksum(self) -> str:
        """Checksum of the model files the results depend on ('' for none)."""
        return ""

    def fingerprint_params(self, params: Mapping[str, Any]) -> Any:
        """The parameters as the fingerprint encodes them (JSON values)."""
        return _jsonable(params)

    def identity(self) -> dict[str, Any]:
        """What the fingerprint hashes: name, parameters that change results, model checksum."""
        params = {k: v for k, v in self.params.items() if k not in self.SCORE_NEUTRAL_PARAMS}
        return {
            "name": self.name,
            "params": self.fingerprint_params(params),
            "model": self.model_checksum(),
        }

    def fingerprint(self) -> str:
        payload = json.dumps(self.identity(), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]

    # -- the spec string ----------------------------------------------------------------------
    def declared_params(self) -> Mapping[str, Param] | None:
        """The parameters the registry declares under this component's name (None when the
        registry does not know the name)."""
        return None

    def spec(self, complete: bool = False) -> str:
        """The spec string that rebuilds this component. Short form: its name and the
        parameters that differ from the registry's defaults (all of them for a component the
        registry does not know), less ``SHORT_SPEC_OMITS``. ``complete``: every parameter that
        is set, sorted by key (what a task ships to a worker)."""
        present = {k: v for k, v in sorted(self.params.items()) if v is not None}
        if not complete:
            declared = self.declared_params() or {}
            present = {
                k: v
                for k, v in present.items()
                if k not in self.SHORT_SPEC_OMITS
                and (k not in declared or declared[k].default != v)
            }
        return format_spec(self.name, present)

    def __str__(self) -> str:
        return self.spec()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec()}>"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


class Registry(Generic[Info]):
    """Declarations of one kind of component by name, from ``register`` calls.

    ``kind`` names the component in messages ("ranker"); ``declaration`` is the type
    ``register`` accepts; ``builtins`` the modules of nrp that register this kind; ``group`` the
    entry-point group whose modules other packages declare; ``prepare`` turns a declaration into
    the one stored (the evaluators add their common ``label`` parameter).
    """

    def __init__(
        self,
        kind: str,
        declaration: type,
        builtins: Sequence[str],
        group: str,
        prepare: Callable[[Info], Info] | None = None,
    ):
        self.kind, self.declaration, self.group = kind, declaration, group
        self.builtins = tuple(builtins)
        self._prepare = prepare
        self._declared: dict[str, Info] = {}  # name -> what was registered
        self._stored: dict[str, Info] = {}  # name -> what ``entries`` returns
        self._loaded = False
        self._lock = threading.RLock()

    def register(self, info: Info) -> Info:
        """Declare one component (``info.name`` must be new). Registering the same object again
        does nothing; another declaration under a taken name is an error."""
        if not isinstance(info, self.declaration):
            raise TypeError(
                f"register() takes a {self.declaration.__name__}, not {type(info).__name__}"
            )
        name = info.name  # type: ignore[attr-defined]
        with self._lock:
            if self._declared.get(name) is info:
                return info
            if name in self._declared:
                raise RuntimeError(f"{self.kind} {name!r} registered twice")
            stored = self._prepare(info) if self._prepare else info
            self._declared[name], self._stored[name] = info, stored
        return info

    def unregister(self, name: str) -> Info:
        """Remove a declaration (a notebook redefining its plug-in, a test's own component)."""
        with self._lock:
            self._stored.pop(name)
            return self._declared.pop(name)

    def entries(self) -> dict[str, Info]:
        """Every declaration by name, sorted; the first call imports the built-in modules and
        the plug-ins' entry points."""
        with self._lock:
            if not self._loaded:
                self._loaded = True  # a module that lists while it loads sees what is there
                try:
                    self._load()
                except BaseException:
                    self._loaded = False
                    raise
            return dict(sorted(self._stored.items()))

    def _load(self) -> None:
        for module in self.builtins:
            importlib.import_module(module)
        for entry in entry_points(group=self.group):
            try:
                loaded = entry.load()  # a module: importing it ran its register() calls
                if not isinstance(loaded, ModuleType):  # or one declaration itself
                    self.register(loaded)
            except Exception as error:  # a broken plug-in must not take the others down
                warnings.warn(
                    f"nrp: {self.kind} plug-in {entry.name} = {entry.value} (entry point group "
                    f"{self.group}) could not be loaded: {type(error).__name__}: {error}",
                    stacklevel=3,
                )


def component_spec(
    component: Component, registry: Mapping[str, Any], build: Callable[[str], Component]
) -> str | None:
    """The spec that rebuilds ``component`` (a Ranker or Evaluator) with all its parameters
    (``Component.spec(complete=True)``), or None when none does. ``registry``: name -> info with
    ``params`` (``Param`` by key)."""
    info = registry.get(getattr(component, "name", ""))
    if info is None or not isinstance(component, Component):
        return None
    declared: Mapping[str, Param] = info.params
    for key, value in component.params.items():
        if value is not None and (key not in declared or "," in str(value)):
            return None  # undeclared, or a comma that would split the spec
    spec = component.spec(complete=True)
    try:
        rebuilt = build(spec)
    except Exception:
        return None
    return spec if type(rebuilt) is type(component) else None


def shipped_component(
    component: Component, registry: Mapping[str, Any], build: Callable[[str], Component]
) -> tuple[Any, str]:
    """What a task carries for ``component``: (its ``component_spec``, "") when a spec rebuilds
    it, else (the object, a fresh instance id: each shipped object is a worker state of its
    own, since no spec names it)."""
    spec = component_spec(component, registry, build)
    return (spec, "") if spec is not None else (component, uuid.uuid4().hex)
