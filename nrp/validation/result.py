"""What a validation produces, and its JSON form that later steps read.

``ValidationResult`` holds everything needed to audit a choice: per-query values, means with
confidence intervals, every paired test, the choice per dimension with the rule that made it, the
label mode, qrels scope and averaged queries, and the identity of each ranker (spec and
fingerprint) and of the collection (name and fingerprint). ``chosen_rankers`` reads the one fact
the NRP step needs: which ranker spec each dimension uses.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nrp import jsontext
from nrp.errors import InputError, NrpError
from nrp.tables import FrameView
from nrp.validation.selection import WEIGHTING_RULE, Choice, default_weights
from nrp.validation.validity import Validity

FORMAT_VERSION = 1

#: the file ``nrp validate`` writes into a collection's folder, which ``nrp score``, the
#: ``nrp`` evaluator, reports and the service read for the rankers' choice
VALIDATION_FILE = "validation.json"


def names_validation_file(value: str | Path) -> bool:
    """Whether a rankers value (``--ranker``, ``score_answers``' rankers, the ``nrp``
    evaluator's ``rankers``) names a validation JSON rather than a ranker spec: a value whose
    text before the first ``:`` is a ranker's name is a spec (``guard:model=/m/guard.json``,
    ``bm25`` beside a file named so); any other names a validation JSON when it is a file or ends
    in ``.json``, so a missing ``runs/validation.json`` is still read, and said to be missing."""
    from nrp.rankers.registry import all_rankers

    text = str(value)
    if text.strip().partition(":")[0] in all_rankers():
        return False
    try:
        return text.endswith(".json") or Path(text).is_file()
    except (OSError, ValueError):  # no file can have this name (too long, a NUL byte)
        return False


@dataclass
class SystemInfo:
    """A ranker (built from a spec) or an external run file, as validated."""

    name: str  # the name in tables and in ``per_query`` (a ranker's spec, a run's stem or tag)
    spec: str  # what builds it again: a ranker spec, or ``run:PATH``
    fingerprint: str  # ranker fingerprint (name, params, model checksum) or run file SHA-256
    kind: str  # "ranker" or "run"
    rows: int = 0  # rows ranked (|D| over all queries) or rows in the run file
    computed: int | None = None  # rows the ranker scored itself (not from the cache)
    source: str | None = None  # run file path
    tags: list[str] = field(default_factory=list)  # run tags of a TREC run file


@dataclass
class Summary:
    """Mean of a measure over the evaluated queries, with its confidence interval."""

    mean: float
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass
class PairTest:
    """One paired test on the primary measure; ``mean_difference`` = mean(a) - mean(b)."""

    a: str
    b: str
    mean_difference: float
    p: float
    p_corrected: float


@dataclass
class DimensionResult:
    dimension: str
    judged_queries: list[str]  # queries with a judgment in scope in this dimension
    evaluated_queries: list[str]  # the queries every mean is taken over
    excluded_queries: dict[str, list[str]]  # reason -> queries judged but not averaged
    judgments: int  # judgments of the evaluated queries that the measures used
    out_of_scope_judgments: int  # judgments dropped by qrels_scope="candidates"
    per_query: dict[str, dict[str, dict[str, float]]]  # system -> measure -> qid -> value
    summary: dict[str, dict[str, Summary]]  # system -> measure -> mean and CI
    tests: list[PairTest]
    choice: Choice | None
    #: system -> its validity (``nrp.validation.validity``); empty when not measured
    validity: dict[str, Validity] = field(default_factory=dict)

    def p_against(self, best: str, other: str) -> float | None:
        """Corrected p-value of the test between ``best`` and ``other`` (None if not tested)."""
        for test in self.tests:
            if {test.a, test.b} == {best, other}:
                return test.p_corrected
        return None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["choice"] = None if self.choice is None else self.choice.to_dict()
        data["validity"] = {name: v.to_dict() for name, v in self.validity.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DimensionResult:
        return cls(
            dimension=data["dimension"],
            judged_queries=list(data["judged_queries"]),
            evaluated_queries=list(data["evaluated_queries"]),
            excluded_queries={k: list(v) for k, v in data["excluded_queries"].items()},
            judgments=data["judgments"],
            out_of_scope_judgments=data["out_of_scope_judgments"],
            per_query=data["per_query"],
            summary={
                system: {m: Summary(**s) for m, s in by_measure.items()}
                for system, by_measure in data["summary"].items()
            },
            tests=[PairTest(**t) for t in data["tests"]],
            choice=None if data["choice"] is None else Choice.from_dict(data["choice"]),
            validity={name: Validity.from_dict(v) for name, v in data.get("validity", {}).items()},
        )


@dataclass
class ValidationResult(FrameView):
    collection: str
    collection_fingerprint: str
    labels: str  # "graded" or "raw"
    qrels_scope: str  # "candidates" or "all"
    query_set: str  # "with_relevant" or "judged"
    measures: list[str]  # primary first
    settings: dict[str, Any]  # statistics and evaluator settings
    selection_rule: str
    systems: list[SystemInfo]
    dimensions: dict[str, DimensionResult]
    warnings: list[str] = field(default_factory=list)

    @property
    def primary(self) -> str:
        return self.measures[0]

    def system(self, name: str) -> SystemInfo:
        for info in self.systems:
            if info.name == name:
                return info
        raise KeyError(name)

    def chosen(self) -> dict[str, str]:
        """dimension -> spec of the chosen ranker (dimensions without evaluated queries are left
        out: nothing could be chosen there)."""
        return {
            dimension: self.system(result.choice.best).spec
            for dimension, result in self.dimensions.items()
            if result.choice is not None
        }

    def weighting(self) -> tuple[dict[str, float], dict[str, str], str | None]:
        """The weighted NRP's default (``WEIGHTING_RULE``): dimension -> weight (1 or 0, before
        normalising) for every dimension with a chosen ranker; dimension -> why it is left out;
        a warning when no dimension's ranker beats random (then all enter)."""
        return default_weights({d: r.choice for d, r in self.dimensions.items()})

    # -- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        weights, left_out, _ = self.weighting()
        return {
            "format_version": FORMAT_VERSION,
            "collection": self.collection,
            "collection_fingerprint": self.collection_fingerprint,
            "labels": self.labels,
            "qrels_scope": self.qrels_scope,
            "query_set": self.query_set,
            "measures": self.measures,
            "primary_measure": self.primary,
            "settings": self.settings,
            "selection_rule": self.selection_rule,
            "systems": [asdict(s) for s in self.systems],
            "chosen": self.chosen(),
            "weighting_rule": WEIGHTING_RULE,
            "weights": weights,
            "left_out": left_out,
            "dimensions": {d: r.to_dict() for d, r in self.dimensions.items()},
            "warnings": self.warnings,
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """The whole result as JSON text; written to ``path`` as well when given."""
        text = json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        if path is not None:  # written aside, then renamed: never a half-written file
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)  # --out into a new folder
            partial = path.with_name(f".{path.name}.partial")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, path)
        return text

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ValidationResult:
        if data.get("format_version") != FORMAT_VERSION:
            raise NrpError(
                f"validation result format {data.get('format_version')!r} is not "
                f"{FORMAT_VERSION} (validate again)"
            )
        return cls(
            collection=data["collection"],
            collection_fingerprint=data["collection_fingerprint"],
            labels=data["labels"],
            qrels_scope=data["qrels_scope"],
            query_set=data["query_set"],
            measures=list(data["measures"]),
            settings=dict(data["settings"]),
            selection_rule=data["selection_rule"],
            systems=[SystemInfo(**s) for s in data["systems"]],
            dimensions={d: DimensionResult.from_dict(r) for d, r in data["dimensions"].items()},
            warnings=list(data.get("warnings", [])),
        )

    @classmethod
    def from_json(cls, path: str | Path) -> ValidationResult:
        """The result in the file at ``path``; a file that is JSON but not a result nrp wrote
        (a key missing, a value of the wrong kind) is an ``InputError`` naming it."""
        data = _load(path)
        try:
            return cls.from_dict(data)
        except NrpError:
            raise
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            problem = f"{type(err).__name__}: {err}"
            raise InputError(
                path, None, f"not a validation result nrp can read ({problem}); validate again"
            ) from None

    # -- tables -------------------------------------------------------------------------------
    def to_frame(self, perquery: bool = False) -> pd.DataFrame:
        """One row per (dimension, system, measure), in the result frames' vocabulary
        (``nrp.tables.FRAME_VOCABULARY``): ``name`` (the system), ``measure``, ``mean`` over the
        evaluated queries, its interval ``ci_low``/``ci_high``, ``queries``, whether validation
        ``chosen`` the system for the dimension, and on the primary measure the paired test
        against the chosen system: ``p_value`` (raw) and ``p_corrected`` (NaN for the chosen
        system itself, for other measures, and where no test ran). ``perquery``: one row per
        (dimension, name, qid, measure) with its ``value`` instead, as
        ``pt.Experiment(perquery=True)`` gives."""
        if perquery:
            return self._per_query_frame()
        rows = []
        for dimension, found in self.dimensions.items():
            best = found.choice.best if found.choice is not None else None
            tests = {frozenset((t.a, t.b)): t for t in found.tests}
            for system, measures in found.summary.items():
                test = tests.get(frozenset((system, best))) if system != best else None
                for measure, summary in measures.items():
                    tested = test is not None and measure == self.primary
                    rows.append(
                        {
                            "dimension": dimension,
                            "name": system,
                            "measure": measure,
                            "mean": summary.mean,
                            "ci_low": summary.ci_low,
                            "ci_high": summary.ci_high,
                            "queries": summary.n,
                            "chosen": system == best,
                            "p_value": test.p if tested else np.nan,
                            "p_corrected": test.p_corrected if tested else np.nan,
                        }
                    )
        columns = ["dimension", "name", "measure", "mean", "ci_low", "ci_high", "queries"]
        return pd.DataFrame(rows, columns=[*columns, "chosen", "p_value", "p_corrected"])

    def _per_query_frame(self) -> pd.DataFrame:
        """(dimension, name, qid, measure, value): every system's value on every evaluated
        query, in the order of ``per_query``."""
        rows = [
            (dimension, system, qid, measure, value)
            for dimension, found in self.dimensions.items()
            for system, measures in found.per_query.items()
            for measure, values in measures.items()
            for qid, value in values.items()
        ]
        return pd.DataFrame(rows, columns=["dimension", "name", "qid", "measure", "value"])

    # -- text ---------------------------------------------------------------------------------
    def tables(self) -> dict[str, str]:
        """dimension -> a text table (see ``nrp.validation.report``)."""
        from nrp.validation.report import dimension_table

        return {d: dimension_table(self, d) for d in self.dimensions}

    def format(self) -> str:
        """Every dimension's table and the warnings, as one text."""
        from nrp.validation.report import format_result

        return format_result(self)


def _load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        return jsontext.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, None, "file not found") from None
    except UnicodeDecodeError:
        raise InputError(path, None, "not valid UTF-8") from None
    except json.JSONDecodeError as err:
        raise InputError(path, err.lineno, f"invalid JSON: {err.msg}") from None


def chosen_rankers(
    validation_json: str | Path | Mapping[str, Any] | ValidationResult,
) -> dict[str, str]:
    """dimension -> spec of the ranker validation chose, from a validation JSON file (or its
    parsed content, or a ``ValidationResult``). A run file's spec is ``run:PATH``."""
    if isinstance(validation_json, ValidationResult):
        return validation_json.chosen()
    if isinstance(validation_json, Mapping):
        return ValidationResult.from_dict(validation_json).chosen()
    return ValidationResult.from_json(validation_json).chosen()
