"""``ValidationSettings``: how rankers (and run files) are scored against each dimension and how
the best one is chosen, as one object that ``validate`` and ``validate_runs`` share.

Every option is checked (``checked``) before any ranker runs: a typo must not cost an hour of
monoT5. The checked settings hold the measures' canonical names and the dimensions actually
validated, and ``as_json`` is what a ``ValidationResult`` records of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nrp import statistics
from nrp.collection.collection import Collection, LabelMode
from nrp.errors import ConfigError
from nrp.measures import (
    DEFAULT_MEASURES,
    QrelsScope,
    QuerySet,
    evaluator_version,
    parse_measures,
)
from nrp.validation.degenerate import kind_names
from nrp.validation.validity import (
    DEFAULT_FALLBACK_WINS,
    DEFAULT_MAX_FLOORED,
    DEFAULT_MAX_NRP,
    DEFAULT_MIN_WINS,
)


@dataclass(frozen=True)
class ValidationSettings:
    """``labels``: graded or raw judgments. ``measures``: the first is the primary one, which the
    paired tests use and which decides the choice. ``dimensions``: None = every dimension of the
    collection. ``qrels_scope``: judgments of D_q only (``candidates``) or ``all``.
    ``query_set``: queries with a relevant judgment, or every ``judged`` one. ``test``,
    ``correction``, ``ci``, ``confidence``, ``alpha``, ``n_resamples``, ``seed``: the statistics
    (``nrp.statistics``). ``validity``: rank the degenerate texts of ``validity_kinds`` (None:
    every kind; ``validity_per_kind`` texts of each composed kind per query, ``other_best`` the
    best documents of ``validity_other_draws`` other queries) among D_q and choose
    only rankers that pass ``validity_min_wins`` and ``validity_max_nrp`` and floor at most
    ``validity_max_floored`` of the ``real_answers`` (answer files or folders of answers that
    nobody fitted or calibrated on; none by default), or, where none passes, those that pass
    with ``validity_fallback_wins`` (at most ``validity_min_wins``: above it, no fallback) in
    place of ``validity_min_wins`` (``nrp.validation.validity``,
    ``nrp.validation.real_answers``). ``random_control``: validate the ``random`` ranker beside
    the given ones when they lack it, so each choice is tested against chance (the weighted
    NRP's rule, ``nrp.validation.selection.WEIGHTING_RULE``, needs that test). ``dtype``: the
    precision of every neural ranker validated, nested ones too (``fp32``, ``bf16``:
    ``RankerSpec.at_dtype``; None: as each spec says), so the choice names it and ``nrp score``
    runs at it."""

    labels: LabelMode = "graded"
    measures: Sequence[str] | str = DEFAULT_MEASURES
    dimensions: Sequence[str] | None = None
    qrels_scope: QrelsScope = "candidates"
    query_set: QuerySet = "with_relevant"
    test: statistics.TestMethod = "randomization"
    correction: statistics.Correction = "holm"
    ci: statistics.CiMethod = "t"
    confidence: float = 0.95
    alpha: float = 0.05
    n_resamples: int = statistics.DEFAULT_RESAMPLES
    seed: int = statistics.DEFAULT_SEED
    validity: bool = True
    validity_min_wins: float = DEFAULT_MIN_WINS
    validity_fallback_wins: float = DEFAULT_FALLBACK_WINS
    validity_max_nrp: float = DEFAULT_MAX_NRP
    validity_max_floored: float = DEFAULT_MAX_FLOORED
    real_answers: Sequence[str | Path] | str | Path = ()
    validity_kinds: Sequence[str] | str | None = None
    validity_per_kind: int = 2
    validity_other_draws: int = 5
    random_control: bool = True
    dtype: str | None = None

    def checked(self, collection: Collection) -> ValidationSettings:
        """These settings, every option checked against ``collection``, with ``measures`` a list
        of canonical names and ``dimensions`` the list of dimensions to validate."""
        _check_choices(self)
        if not 0 < self.confidence < 1 or not 0 < self.alpha < 1:
            raise ConfigError("confidence and alpha must lie strictly between 0 and 1")
        if self.n_resamples < 1:
            raise ConfigError("n_resamples must be at least 1")
        chosen = list(self.dimensions) if self.dimensions else list(collection.dimensions)
        collection.check_dimensions(chosen)
        names = [str(m) for m in parse_measures(self.measures)]
        shares = (self.validity_min_wins, self.validity_fallback_wins, self.validity_max_nrp)
        if not all(0 <= share <= 1 for share in shares):
            raise ConfigError(
                "validity_min_wins, validity_fallback_wins and validity_max_nrp must lie between "
                "0 and 1"
            )
        if not 0 <= self.validity_max_floored <= 1:
            raise ConfigError("validity_max_floored must lie between 0 and 1")
        if self.validity_per_kind < 1:
            raise ConfigError("validity_per_kind must be at least 1")
        if self.validity_other_draws < 1:
            raise ConfigError("validity_other_draws must be at least 1")
        kinds = kind_names(self.validity_kinds)
        real = self.real_answers
        real = (real,) if isinstance(real, str | Path) else tuple(real or ())
        return replace(
            self, measures=names, dimensions=chosen, validity_kinds=kinds,
            real_answers=tuple(str(path) for path in real),
            validity_fallback_wins=min(self.validity_fallback_wins, self.validity_min_wins),
        )  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        """What a validation result records of its settings (of checked settings)."""
        return {
            "test": self.test,
            "correction": self.correction,
            "ci": self.ci,
            "confidence": self.confidence,
            "alpha": self.alpha,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "tested_measure": self.measures[0],
            "relevant_label": ">= 1 (AP, bpref, and the query set)",
            "tie_breaking": "by score descending, then docno descending (trec_eval); ranks unused",
            "evaluator": evaluator_version(),
            "validity": self.validity,
            "validity_min_wins": self.validity_min_wins,
            "validity_fallback_wins": self.validity_fallback_wins,
            "validity_max_nrp": self.validity_max_nrp,
            "validity_max_floored": self.validity_max_floored,
            "real_answers": list(self.real_answers),
            "validity_kinds": list(self.validity_kinds or []),
            "validity_per_kind": self.validity_per_kind,
            "validity_other_draws": self.validity_other_draws,
            "random_control": self.random_control,
        }


def _check_choices(settings: ValidationSettings) -> None:
    if settings.labels not in ("graded", "raw"):
        raise ConfigError(f"labels must be 'graded' or 'raw', not {settings.labels!r}")
    if settings.qrels_scope not in ("candidates", "all"):
        raise ConfigError(
            f"qrels scope must be 'candidates' or 'all', not {settings.qrels_scope!r}"
        )
    if settings.query_set not in ("with_relevant", "judged"):
        raise ConfigError(
            f"query set must be 'with_relevant' or 'judged', not {settings.query_set!r}"
        )
    if settings.test not in ("randomization", "t"):
        raise ConfigError(f"paired test must be 'randomization' or 't', not {settings.test!r}")
    if settings.correction not in ("holm", "bonferroni", "none"):
        raise ConfigError(
            f"correction must be 'holm', 'bonferroni' or 'none', not {settings.correction!r}"
        )
    if settings.ci not in ("t", "bootstrap"):
        raise ConfigError(f"confidence interval must be 't' or 'bootstrap', not {settings.ci!r}")
