"""Validation: rank D_q with every ranker (or read external runs), score each against every
quality dimension, and choose the best ranker per dimension.

``validate`` runs rankers over ``collection.candidates()`` through the score cache
(``indexes/NAME/scores.sqlite``), so validating again, or adding one ranker, computes only what is
new. ``validate_runs`` evaluates external run files the same way (same measures, queries,
statistics and selection rule). Both return a ``ValidationResult``; see ``measures`` for exactly
which judgments and queries are used, ``statistics`` for the tests, ``selection`` for the rule.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from nrp.collection.collection import Collection, LabelMode
from nrp.errors import ConfigError, InputError, NrpError
from nrp.executors.base import Executor, active_executor
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, CachedRanker, ScoreCache
from nrp.rankers.registry import make_ranker, split_specs
from nrp.validation import statistics
from nrp.validation.measures import (
    DEFAULT_MEASURES,
    DimensionQrels,
    Evaluator,
    QrelsScope,
    QuerySet,
    evaluator_version,
    load_qrels,
    parse_measures,
    run_from_frame,
)
from nrp.validation.result import (
    DimensionResult,
    PairTest,
    Summary,
    SystemInfo,
    ValidationResult,
)
from nrp.validation.runs import RunFormat, read_run
from nrp.validation.selection import SELECTION_RULE, choose

NO_RELEVANT = "without a relevant judgment"
Progress = Callable[[str], None]


@dataclass(frozen=True)
class _Settings:
    labels: LabelMode
    measures: list[str]
    dimensions: list[str]
    qrels_scope: QrelsScope
    query_set: QuerySet
    test: statistics.TestMethod
    correction: statistics.Correction
    ci: statistics.CiMethod
    confidence: float
    alpha: float
    n_resamples: int
    seed: int

    def as_json(self) -> dict:
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
        }


def _settings(
    collection: Collection,
    labels: LabelMode,
    measures: Sequence[str] | str,
    dimensions: Sequence[str] | None,
    qrels_scope: QrelsScope,
    query_set: QuerySet,
    test: statistics.TestMethod,
    correction: statistics.Correction,
    ci: statistics.CiMethod,
    confidence: float,
    alpha: float,
    n_resamples: int,
    seed: int,
) -> _Settings:
    """Check every option before any ranker runs (a typo must not cost an hour of monoT5)."""
    if labels not in ("graded", "raw"):
        raise ConfigError(f"labels must be 'graded' or 'raw', not {labels!r}")
    if qrels_scope not in ("candidates", "all"):
        raise ConfigError(f"qrels scope must be 'candidates' or 'all', not {qrels_scope!r}")
    if query_set not in ("with_relevant", "judged"):
        raise ConfigError(f"query set must be 'with_relevant' or 'judged', not {query_set!r}")
    if test not in ("randomization", "t"):
        raise ConfigError(f"paired test must be 'randomization' or 't', not {test!r}")
    if correction not in ("holm", "bonferroni", "none"):
        raise ConfigError(f"correction must be 'holm', 'bonferroni' or 'none', not {correction!r}")
    if ci not in ("t", "bootstrap"):
        raise ConfigError(f"confidence interval must be 't' or 'bootstrap', not {ci!r}")
    if not 0 < confidence < 1 or not 0 < alpha < 1:
        raise ConfigError("confidence and alpha must lie strictly between 0 and 1")
    if n_resamples < 1:
        raise ConfigError("n_resamples must be at least 1")
    chosen = list(dimensions) if dimensions else list(collection.dimensions)
    for dimension in chosen:
        if dimension not in collection.dimensions:
            raise ConfigError(
                f"collection {collection.name!r} has no dimension {dimension!r} "
                f"(it has: {', '.join(collection.dimensions)})"
            )
    names = [str(m) for m in parse_measures(measures)]
    return _Settings(
        labels, names, chosen, qrels_scope, query_set, test, correction, ci, confidence, alpha,
        n_resamples, seed,
    )  # fmt: skip


def validate(
    collection: Collection,
    ranker_specs: Sequence[str | Ranker] | str,
    labels: LabelMode = "graded",
    measures: Sequence[str] | str = DEFAULT_MEASURES,
    cache: bool = True,
    *,
    dimensions: Sequence[str] | None = None,
    qrels_scope: QrelsScope = "candidates",
    query_set: QuerySet = "with_relevant",
    test: statistics.TestMethod = "randomization",
    correction: statistics.Correction = "holm",
    ci: statistics.CiMethod = "t",
    confidence: float = 0.95,
    alpha: float = 0.05,
    n_resamples: int = statistics.DEFAULT_RESAMPLES,
    seed: int = statistics.DEFAULT_SEED,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> ValidationResult:
    """Rank D_q with each ranker and choose the best ranker per dimension.

    ``ranker_specs``: spec strings (``"bm25"``, ``"monot5:batch=64"``, ``"random"``), a
    comma-separated string of them, or ``Ranker`` objects. ``cache``: serve and store scores in
    ``collection.path / "scores.sqlite"``. ``progress``: called with one line per ranker.
    ``executor``: where the documents are scored (``nrp.executors``; default: the active
    executor, else this process), in per-query partitions stored in the score cache as they
    arrive; the measures are computed here either way."""
    settings = _settings(
        collection, labels, measures, dimensions, qrels_scope, query_set, test, correction, ci,
        confidence, alpha, n_resamples, seed,
    )  # fmt: skip
    if isinstance(ranker_specs, str):
        ranker_specs = split_specs(ranker_specs)
    if not ranker_specs:
        raise ConfigError("no rankers to validate")
    rankers = [make_ranker(s) if isinstance(s, str) else s for s in ranker_specs]
    for ranker in rankers:
        ranker.bind_collection(collection)
    _check_unique([r.spec() for r in rankers], "ranker spec")

    executor = executor if executor is not None else active_executor()
    candidates = collection.candidates()
    score_cache = ScoreCache(collection.path / SCORE_CACHE_FILE) if cache else None
    systems: list[tuple[SystemInfo, dict[str, dict[str, float]]]] = []
    for ranker in rankers:
        if progress:
            progress(f"ranking {len(candidates)} documents with {ranker.spec()}")
        if executor is not None:
            from nrp.executors.validation import rank_with_executor

            ranked, computed = rank_with_executor(
                executor, collection, ranker, candidates, score_cache, progress
            )
        elif score_cache is not None:
            transformer = CachedRanker(ranker, score_cache, collection.meta["fingerprint"])
            ranked = transformer.transform(candidates)
            computed = transformer.computed
        else:
            ranked = ranker.transform(candidates)
            computed = len(candidates)
        scores = ranked["score"].to_numpy(dtype=float)
        if len(ranked) != len(candidates) or not np.all(np.isfinite(scores)):
            raise NrpError(
                f"ranker {ranker.spec()} returned {len(ranked)} rows for {len(candidates)} "
                "candidates, or scores that are not finite numbers"
            )
        info = SystemInfo(
            name=ranker.spec(),
            spec=ranker.spec(),
            fingerprint=ranker.fingerprint(),
            kind="ranker",
            rows=len(ranked),
            computed=computed,
        )
        systems.append((info, run_from_frame(ranked)))
    return _evaluate(collection, settings, systems, candidates, warnings=[])


def validate_runs(
    collection: Collection,
    run_paths: Sequence[str | Path],
    labels: LabelMode = "graded",
    measures: Sequence[str] | str = DEFAULT_MEASURES,
    *,
    names: Literal["stem", "tag"] = "stem",
    run_format: RunFormat | None = None,
    dimensions: Sequence[str] | None = None,
    qrels_scope: QrelsScope = "all",
    query_set: QuerySet = "with_relevant",
    test: statistics.TestMethod = "randomization",
    correction: statistics.Correction = "holm",
    ci: statistics.CiMethod = "t",
    confidence: float = 0.95,
    alpha: float = 0.05,
    n_resamples: int = statistics.DEFAULT_RESAMPLES,
    seed: int = statistics.DEFAULT_SEED,
) -> ValidationResult:
    """Evaluate external run files (TREC or CSV/TSV) like rankers.

    Every row of a run is kept: its documents need no text in the store and need not be in D_q.
    ``qrels_scope`` is ``"all"`` by default, so a run is scored against every judgment, as
    trec_eval would score it (``"candidates"`` scores it exactly as ``validate`` scores rankers).
    ``names``: a run is named by its file stem, or by its run tag (a TREC file with one tag;
    CSV/TSV files, which have no tag, keep their stem)."""
    settings = _settings(
        collection, labels, measures, dimensions, qrels_scope, query_set, test, correction, ci,
        confidence, alpha, n_resamples, seed,
    )  # fmt: skip
    if names not in ("stem", "tag"):
        raise ConfigError(f"run names must come from 'stem' or 'tag', not {names!r}")
    if not run_paths:
        raise ConfigError("no run files to validate")
    known_qids = set(collection.topics["qid"].astype(str))
    warnings: list[str] = []
    systems: list[tuple[SystemInfo, dict[str, dict[str, float]]]] = []
    for path in run_paths:
        run = read_run(path, run_format)
        warnings.extend(run.warnings)
        name = run.stem
        if names == "tag" and run.tags:
            if len(run.tags) > 1:
                raise InputError(
                    run.path, None, f"has {len(run.tags)} run tags ({', '.join(run.tags[:5])}); "
                    "name runs by file stem instead"
                )  # fmt: skip
            name = run.tags[0]
        unknown = sorted(set(run.frame["qid"]) - known_qids)
        if unknown:
            warnings.append(
                f"{run.path}: {len(unknown)} qid(s) not in collection {collection.name!r} "
                f"ignored: {', '.join(unknown[:10])}" + (" ..." if len(unknown) > 10 else "")
            )
        info = SystemInfo(
            name=name,
            spec=f"run:{run.path}",
            fingerprint=run.fingerprint,
            kind="run",
            rows=len(run.frame),
            source=str(run.path),
            tags=list(run.tags),
        )
        systems.append((info, run_from_frame(run.frame)))
    _check_unique([info.name for info, _ in systems], "run name")
    candidates = collection.candidates() if qrels_scope == "candidates" else None
    return _evaluate(collection, settings, systems, candidates, warnings)


def _check_unique(names: list[str], what: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{what} {name!r} given twice")
        seen.add(name)


def _evaluate(
    collection: Collection,
    settings: _Settings,
    systems: list[tuple[SystemInfo, dict[str, dict[str, float]]]],
    candidates: pd.DataFrame | None,
    warnings: list[str],
) -> ValidationResult:
    measures = parse_measures(settings.measures)
    dimensions = {}
    for dimension in settings.dimensions:
        qrels = load_qrels(
            collection, dimension, settings.labels, settings.qrels_scope, settings.query_set,
            candidates,
        )  # fmt: skip
        evaluator = Evaluator.for_dimension(measures, qrels)
        per_query = {}
        for info, run in systems:
            per_query[info.name] = evaluator.per_query(run)
            absent = [q for q in qrels.evaluated_qids if not run.get(q)]
            if absent:
                warnings.append(
                    f"{info.name}: no documents for {len(absent)} evaluated queries of "
                    f"{dimension!r} (scored 0): {', '.join(absent[:10])}"
                    + (" ..." if len(absent) > 10 else "")
                )
        dimensions[dimension] = _dimension_result(qrels, per_query, settings)
        if not qrels.evaluated_qids:
            warnings.append(f"{dimension!r}: no query to average over; nothing chosen")
    return ValidationResult(
        collection=collection.name,
        collection_fingerprint=str(collection.meta.get("fingerprint", "")),
        labels=settings.labels,
        qrels_scope=settings.qrels_scope,
        query_set=settings.query_set,
        measures=settings.measures,
        settings=settings.as_json(),
        selection_rule=SELECTION_RULE,
        systems=[info for info, _ in systems],
        dimensions=dimensions,
        warnings=warnings,
    )


def _dimension_result(
    qrels: DimensionQrels,
    per_query: dict[str, dict[str, dict[str, float]]],
    settings: _Settings,
) -> DimensionResult:
    names = list(per_query)
    qids = qrels.evaluated_qids
    summary: dict[str, dict[str, Summary]] = {}
    for name in names:
        summary[name] = {}
        for measure in settings.measures:
            values = [per_query[name][measure][q] for q in qids]
            interval = (
                statistics.confidence_interval(
                    values, settings.ci, settings.confidence, settings.n_resamples, settings.seed
                )
                if values
                else None
            )
            summary[name][measure] = Summary(
                mean=float(np.mean(values)) if values else 0.0,
                ci_low=None if interval is None else interval[0],
                ci_high=None if interval is None else interval[1],
                n=len(values),
            )
    primary = settings.measures[0]
    pairs = list(itertools.combinations(names, 2))
    raw_p = []
    for a, b in pairs:
        first = [per_query[a][primary][q] for q in qids]
        second = [per_query[b][primary][q] for q in qids]
        raw_p.append(
            statistics.paired_test(
                first, second, settings.test, settings.n_resamples, settings.seed
            )
        )
    corrected = statistics.correct(raw_p, settings.correction)
    tests = [
        PairTest(
            a,
            b,
            summary[a][primary].mean - summary[b][primary].mean,
            p,
            p_corr,
        )
        for (a, b), p, p_corr in zip(pairs, raw_p, corrected, strict=True)
    ]
    choice = None
    if qids:
        means = {n: {m: summary[n][m].mean for m in settings.measures} for n in names}
        corrected_by_pair = {frozenset((t.a, t.b)): t.p_corrected for t in tests}
        choice = choose(means, settings.measures, names, corrected_by_pair, settings.alpha)
    return DimensionResult(
        dimension=qrels.dimension,
        judged_queries=list(qrels.judged_qids),
        evaluated_queries=list(qids),
        excluded_queries=(
            {NO_RELEVANT: list(qrels.without_relevant)}
            if settings.query_set == "with_relevant"
            else {}
        ),
        judgments=len(qrels.frame),
        out_of_scope_judgments=qrels.out_of_scope_judgments,
        per_query=per_query,
        summary=summary,
        tests=tests,
        choice=choice,
    )
