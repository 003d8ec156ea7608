"""The evaluator interface and its registry.

An evaluator takes items (one row per answer: ``ITEM_COLUMNS``) and returns named per-answer
scores. Like the rankers (``nrp.rankers.registry``), each evaluator module declares its
evaluators with one ``register(EvaluatorInfo(...))`` call each, with typed parameters, so
``nrp evaluators`` lists them and a spec such as ``rouge:stemmer=false`` or
``judge:mode=rubric,samples=3`` is parsed in one place (``nrp.spec``). nrp's own modules are named
in ``BUILTIN_MODULES``; another package adds evaluators by naming its module under the
entry-point group ``nrp.evaluators`` (docs/extending.md). Modules must not import heavy libraries
at import time (torch, transformers, spaCy): ``available`` and ``build`` import them when called.
Parameters, fingerprint and spec string are those of every component
(``nrp.components.Component``, shared with the rankers).

Contract of ``Evaluator.evaluate(items) -> DataFrame``:

- one row per item, in the items' order (the index is ignored);
- every name in ``score_columns()`` present, as float; a score that could not be computed is NaN
  (missing), never 0 (unparseable judge output, no reference to compare with);
- optional extra columns (``extra_columns()``: e.g. the judge's raw text, a label, a flag), any
  JSON-serialisable values;
- deterministic for the same items and parameters (or seeded through a ``seed`` parameter), so
  that the cache (``nrp.evaluators.cache``) may serve it: the cache key is the evaluator's
  ``fingerprint()`` (name, ``version``, parameters other than ``SCORE_NEUTRAL_PARAMS``, model
  checksum) and the item's content (question, answer text, references, contexts).

Every evaluator takes the common parameter ``label`` (added by the registry): its columns are
then written as ``LABEL.column``, so one run can hold two configurations of one evaluator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from nrp.components import Component, Registry
from nrp.errors import ConfigError
from nrp.spec import Param, parse_params, split_specs

if TYPE_CHECKING:
    from nrp.collection.collection import Collection

__all__ = [
    "ITEM_COLUMNS",
    "Evaluator",
    "EvaluatorInfo",
    "Param",
    "all_evaluators",
    "make_evaluator",
    "make_evaluators",
    "register",
    "split_specs",
    "unregister",
]

#: what an evaluator reads per answer. ``references`` and ``contexts`` are tuples of strings
#: (empty when there are none); ``reference_kind`` says where the references came from:
#: "reference" (the collection's reference answers), "pseudo-reference" (top-graded judged
#: documents standing in for them), or "" (none).
ITEM_COLUMNS = (
    "answer_id",
    "qid",
    "question",
    "text",
    "references",
    "reference_kind",
    "contexts",
)

LABEL_PARAM = Param(str, "", "name prefixed to this evaluator's columns (LABEL.column)")


class Evaluator(Component):
    """Base class. Subclasses set ``name`` and implement ``score_columns`` and ``evaluate``."""

    name: ClassVar[str] = "evaluator"
    #: bump when the scoring code changes what it returns: part of the cache key
    version: ClassVar[str] = "1"
    #: parameters that do not change the scores (left out of the fingerprint; the spec shows
    #: them, since ``label`` names the columns)
    SCORE_NEUTRAL_PARAMS: ClassVar[frozenset[str]] = frozenset(
        {"batch", "device", "verbose", "label", "concurrency", "timeout", "retries"}
    )
    #: items without references get NaN from a reference-based evaluator
    needs_references: ClassVar[bool] = False
    #: served by the per-item cache (False for NRP, which has its own results cache)
    cacheable: ClassVar[bool] = True
    #: items per ``evaluate`` call when the parameters have no ``batch``
    default_batch: ClassVar[int] = 64

    # -- identity ---------------------------------------------------------------------------
    def fingerprint_params(self, params: Mapping[str, Any]) -> Any:
        return {k: str(v) for k, v in params.items()}

    def identity(self) -> dict[str, Any]:
        """The component's identity and ``version``: new scoring code, new cache key."""
        return {**super().identity(), "version": self.version}

    def declared_params(self) -> Mapping[str, Param] | None:
        info = all_evaluators().get(self.name)
        return info.params if info is not None else None

    # -- what it writes ---------------------------------------------------------------------
    def score_columns(self) -> list[str]:
        """Names of the float score columns ``evaluate`` returns (without the label)."""
        raise NotImplementedError

    def extra_columns(self) -> list[str]:
        """Names of non-score columns ``evaluate`` returns (raw judge text, labels, flags)."""
        return []

    def output_columns(self) -> list[str]:
        """Score and extra columns as written to the results table (label applied)."""
        label = self.params.get("label") or ""
        names = self.score_columns() + self.extra_columns()
        return [f"{label}.{n}" if label else n for n in names]

    @property
    def batch_size(self) -> int:
        return int(self.params.get("batch") or self.default_batch)

    # -- scoring ----------------------------------------------------------------------------
    def bind_collection(self, collection: Collection) -> None:
        """Called with the collection the items come from (when there is one) before
        ``evaluate``; evaluators that need it (NRP) keep it."""

    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        raise NotImplementedError

    def evaluate_checked(self, batch: pd.DataFrame, names: list[str]) -> pd.DataFrame:
        """``evaluate(batch)`` reduced to the columns ``names``, one row per item in order; an
        evaluator that returns another row count or lacks a column is a bug, said loudly (the
        local runner and the executor task both call this)."""
        result = self.evaluate(batch)
        if len(result) != len(batch):
            raise RuntimeError(f"{self.spec()} returned {len(result)} rows for {len(batch)} items")
        absent = [n for n in names if n not in result.columns]
        if absent:
            raise RuntimeError(f"{self.spec()} did not return columns {absent}")
        return result[names].reset_index(drop=True)


@dataclass(frozen=True)
class EvaluatorInfo:
    name: str
    description: str
    build: Callable[[dict[str, Any]], Evaluator]  # params (complete, typed) -> Evaluator
    params: Mapping[str, Param] = field(default_factory=dict)
    available: Callable[[], tuple[bool, str]] = lambda: (True, "")
    #: "reference-based", "reference-free", "judge" or "nrp" (how `nrp evaluators` groups them)
    family: str = "reference-free"


#: nrp's own evaluator modules, imported on the first listing (no package scan)
BUILTIN_MODULES = (
    "nrp.evaluators.reference_based",
    "nrp.evaluators.heuristics",
    "nrp.evaluators.judge",
    "nrp.evaluators.nrp_scores",
)
ENTRY_POINT_GROUP = "nrp.evaluators"


def _with_label(info: EvaluatorInfo) -> EvaluatorInfo:
    """The declaration as stored: its parameters and the common ``label``."""
    if "label" in info.params:
        raise RuntimeError(f"evaluator {info.name!r} declares the common 'label' param")
    return replace(info, params={**info.params, "label": LABEL_PARAM})


EVALUATOR_REGISTRY: Registry[EvaluatorInfo] = Registry(
    "evaluator", EvaluatorInfo, BUILTIN_MODULES, ENTRY_POINT_GROUP, prepare=_with_label
)


def register(*evaluators: EvaluatorInfo) -> None:
    """Declare evaluators: ``nrp evaluators`` lists them, ``make_evaluator`` builds them."""
    for info in evaluators:
        EVALUATOR_REGISTRY.register(info)


def unregister(name: str) -> EvaluatorInfo:
    """Remove an evaluator's declaration (a notebook redefining it, a test's own evaluator)."""
    return EVALUATOR_REGISTRY.unregister(name)


def all_evaluators() -> dict[str, EvaluatorInfo]:
    """Every declared evaluator by name, sorted (built-ins and installed plug-ins), each with
    the common ``label`` parameter."""
    return EVALUATOR_REGISTRY.entries()


def make_evaluator(spec: str) -> Evaluator:
    """Build the evaluator a spec names (ConfigError when it is not available here)."""
    evaluators = all_evaluators()
    name, params = parse_params(spec, "evaluator", {n: i.params for n, i in evaluators.items()})
    info = evaluators[name]
    ok, reason = info.available()
    if not ok:
        raise ConfigError(f"evaluator {name!r} is not available here: {reason}")
    return info.build(params)


def make_evaluators(specs: str | list[str | Evaluator]) -> list[Evaluator]:
    """Evaluators from a comma-separated spec string or a list of specs / Evaluator objects;
    checks that no two write the same column."""
    items = split_specs(specs) if isinstance(specs, str) else list(specs)
    built = [make_evaluator(s) if isinstance(s, str) else s for s in items]
    seen: dict[str, str] = {}
    for evaluator in built:
        for column in evaluator.output_columns():
            if column in seen:
                raise ConfigError(
                    f"evaluators {seen[column]} and {evaluator.spec()} both write column "
                    f"{column!r}; give one of them a label (e.g. {evaluator.name}:label=b)"
                )
            seen[column] = evaluator.spec()
    return built
