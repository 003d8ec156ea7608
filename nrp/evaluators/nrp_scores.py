"""NRP as an evaluator: ``nrp.positioning.scoring.score_answers`` behind the evaluator interface,
so one
``nrp evaluate`` table holds NRP beside BLEU, ROUGE, BERTScore and the judges.

Columns: ``nrp.<dimension>`` for every scored dimension of the bound collection and
``nrp.weighted``, the combined NRP (``nrp.collection.manifest.COMBINED``: the weighted mean over
the dimensions).
An answer whose query has no judged documents with text cannot be ranked: NaN.

Choices, and why:

- **Needs its collection.** NRP ranks an answer among the judged documents of its query, so the
  evaluator works on the collection bound with ``bind_collection`` (``evaluate_answers`` and
  ``nrp evaluate`` bind it); ``evaluate`` without one is an error, not a silent NaN column.
- **Not in the per-item cache** (``cacheable = False``): NRP has its own results cache
  (``indexes/NAME/nrp.sqlite``, per ranker fingerprint, answer id and text hash), which also
  keeps the tie rule out of the key. Caching it twice would only risk the two disagreeing.
- **Rankers.** ``rankers=validation`` (the default) takes each dimension's ranker from the
  collection's ``validation.json`` (written by ``nrp validate``); also accepted: a path to
  another validation JSON, one ranker spec for every dimension (``rankers=tfidf``), or one per
  dimension separated by ``;`` (``rankers=relevance=tfidf;readability=bm25``). Commas separate
  the evaluator's own parameters in a spec, so a ranker's parameters after the first are joined
  with ``+`` here: ``nrp:rankers=bm25:stats=collection+k1=1.2``.
- **Columns follow the chosen dimensions.** Before a collection is bound only the dimensions
  named in ``rankers`` are known (enough for ``make_evaluators`` to find clashing columns);
  once bound, a single spec covers every dimension and a validation JSON the dimensions it chose.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nrp.collection.manifest import COMBINED
from nrp.errors import ConfigError, NrpError
from nrp.evaluators.base import Evaluator, EvaluatorInfo, Param, register
from nrp.positioning.choice import names_dimension
from nrp.ranks import DEFAULT_TIE_MODE, TIE_MODES
from nrp.validation.result import VALIDATION_FILE, names_validation_file

if TYPE_CHECKING:
    from nrp.collection.collection import Collection
    from nrp.rankers.base import Ranker

log = logging.getLogger(__name__)

VALIDATION = "validation"
PASSED_THROUGH = ("llm", "prompt", "sample")

NRP_PARAMS: dict[str, Param] = {
    "rankers": Param(
        str,
        VALIDATION,
        "validation (the collection's validation.json), a validation JSON path, one ranker spec "
        "for every dimension, or DIM=SPEC;DIM=SPEC (a ranker's own parameters joined with +)",
        nested=True,
    ),
    "ties": Param(str, DEFAULT_TIE_MODE, "how documents tied with the answer count", TIE_MODES),
    "frozen_stats": Param(bool, False, "lexical rankers keep D_q's statistics"),
    "full_rerank": Param(bool, False, "reference mode: D_q re-ranked from scratch per answer"),
    "weights": Param(
        str,
        "",
        "DIM=W;DIM=W weights of the combined NRP (default: as nrp score weighs: "
        "validation's weighting for validated rankers, else equal)",
    ),
    "cache": Param(bool, True, "use NRP's score and results caches beside the collection"),
    "batch": Param(int, 1024, "answers per call", minimum=1),
}


def _ranker_spec(text: str) -> str:
    """A ranker spec as written inside the ``rankers`` value: ``+`` joins its parameters."""
    return text.strip().replace("+", ",")


def names_validation(choice: str | Path | Mapping[str, str]) -> bool:
    """``rankers`` names a validation JSON: ``validation`` (the collection's) or a path
    (``names_validation_file``), not a ranker spec such as ``guard:model=/m/guard.json``."""
    return isinstance(choice, str) and (choice == VALIDATION or names_validation_file(choice))


def parse_rankers(value: str) -> str | dict[str, str]:
    """The ``rankers`` parameter: ``validation``, a path, a single spec, or dimension -> spec."""
    value = value.strip()
    if not value:
        raise ConfigError("evaluator 'nrp': rankers is empty")
    if names_validation(value):
        return value
    parts = [p.strip() for p in value.split(";") if p.strip()]
    if len(parts) == 1 and not names_dimension(parts[0]):
        return _ranker_spec(parts[0])
    chosen: dict[str, str] = {}
    for part in parts:
        if not names_dimension(part):
            raise ConfigError(
                f"evaluator 'nrp': rankers part {part!r} is not DIM=SPEC "
                "(several dimensions: DIM=SPEC;DIM=SPEC)"
            )
        dimension, _, spec = part.partition("=")
        if not dimension.strip() or not spec.strip():
            raise ConfigError(f"evaluator 'nrp': rankers part {part!r} is not DIM=SPEC")
        chosen[dimension.strip()] = _ranker_spec(spec)
    return chosen


def parse_weights(value: str) -> dict[str, float] | None:
    """``DIM=W;DIM=W`` -> weights (None when empty: equal weights)."""
    weights: dict[str, float] = {}
    for part in (p.strip() for p in value.split(";")):
        if not part:
            continue
        dimension, sep, number = part.partition("=")
        try:
            if not sep or not dimension.strip():
                raise ValueError(part)
            weights[dimension.strip()] = float(number)
        except ValueError:
            raise ConfigError(
                f"evaluator 'nrp': weights part {part!r} is not DIM=NUMBER (DIM=W;DIM=W)"
            ) from None
    return weights or None


class NrpEvaluator(Evaluator):
    """NRP per dimension and combined, of answers of the bound collection."""

    name = "nrp"
    cacheable = False
    default_batch = 1024

    def __init__(self, params: Mapping[str, Any] | None = None):
        super().__init__({**{k: p.default for k, p in NRP_PARAMS.items()}, **dict(params or {})})
        self.choice = parse_rankers(str(self.params["rankers"]))
        self.weights = parse_weights(str(self.params["weights"]))
        self.collection: Collection | None = None
        self._dimensions: list[str] | None = None
        self._rankers: dict[str, Ranker] | None = None
        # of the weighted NRP: ``weights``, else validation's
        self._weights: Mapping[str, float] | None = None

    # -- columns ----------------------------------------------------------------------------
    def dimensions(self) -> list[str]:
        """The dimensions scored: known from ``rankers`` alone, or once a collection is bound."""
        if self._dimensions is not None:
            return self._dimensions
        return list(self.choice) if isinstance(self.choice, dict) else []

    def score_columns(self) -> list[str]:
        return [f"nrp.{d}" for d in self.dimensions()] + [f"nrp.{COMBINED}"]

    # -- binding ----------------------------------------------------------------------------
    def _validation_path(self, collection: Collection) -> Path:
        if self.choice == VALIDATION:
            path = Path(collection.path) / VALIDATION_FILE
            if not path.is_file():
                raise ConfigError(
                    f"evaluator 'nrp': rankers=validation reads {path}, which does not exist "
                    f"(run `nrp validate {collection.name} --rankers ...` first, or give "
                    "nrp:rankers=SPEC)"
                )
            return path
        path = Path(str(self.choice))
        if not path.is_file():
            raise ConfigError(f"evaluator 'nrp': no validation JSON at {path}")
        return path

    def bind_collection(self, collection: Collection) -> None:
        if collection is self.collection:
            return
        if isinstance(self.choice, dict):
            dimensions = list(self.choice)
        elif names_validation(self.choice):
            from nrp.validation.result import chosen_rankers

            dimensions = list(chosen_rankers(self._validation_path(collection)))
        else:
            dimensions = list(collection.dimensions)
        unknown = [d for d in dimensions if d not in collection.dimensions]
        if unknown:
            raise ConfigError(
                f"evaluator 'nrp': collection {collection.name!r} has no dimension(s) "
                f"{', '.join(unknown)} (it has: {', '.join(collection.dimensions)})"
            )
        if not dimensions:
            raise ConfigError("evaluator 'nrp': no dimension has a ranker")
        self.collection = collection
        self._dimensions = dimensions
        self._rankers = None

    def _resolved_rankers(self) -> dict[str, Ranker]:
        """dimension -> Ranker, built and bound once per collection (models load once)."""
        if self._rankers is None:
            from nrp.positioning.scoring import ScoreSettings, resolve_scoring

            choice: str | dict[str, str] | Path = self.choice
            if names_validation(choice):
                choice = self._validation_path(self.collection)
            # the weighted NRP as nrp score makes it: validation's weights unless given
            resolved = resolve_scoring(choice, self.collection, ScoreSettings(weights=self.weights))
            self._rankers, self._weights = resolved.by_dimension, resolved.weights
            for warning in resolved.warnings:
                log.warning(warning)
        return self._rankers

    # -- scoring ----------------------------------------------------------------------------
    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        if self.collection is None:
            raise NrpError(
                "evaluator 'nrp' needs the collection the answers belong to: use "
                "evaluate_answers / `nrp evaluate`, or evaluate(..., collection=...)"
            )
        from nrp.positioning.scoring import score_answers

        columns = ["answer_id", "qid", "text", *(c for c in PASSED_THROUGH if c in items)]
        answers = items[columns].reset_index(drop=True)
        names = self.score_columns()
        if answers.empty:
            return pd.DataFrame(columns=names, dtype=float)
        results = score_answers(
            self.collection,
            answers,
            self._resolved_rankers(),
            ties=str(self.params["ties"]),
            frozen_stats=bool(self.params["frozen_stats"]),
            full_rerank=bool(self.params["full_rerank"]),
            weights=self._weights,
            every_dimension=True,  # each dimension has its column
            cache=bool(self.params["cache"]),
        )
        wide = results.pivot(index="answer_id", columns="dimension", values="nrp")
        wide = wide.reindex(index=answers["answer_id"].astype(str))
        out = pd.DataFrame(
            {
                f"nrp.{d}": (
                    wide[d].to_numpy(dtype=float) if d in wide else np.full(len(answers), np.nan)
                )
                for d in [*self.dimensions(), COMBINED]
            }
        )
        return out[names]


register(
    EvaluatorInfo(
        name="nrp",
        description="Normalized Rank Position per dimension and weighted, with the validated "
        "(or given) ranker of each dimension; needs the answers' collection",
        build=lambda params: NrpEvaluator(params),
        params=NRP_PARAMS,
        family="nrp",
    )
)
