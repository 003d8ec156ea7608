"""Scoring: the NRP of every generated answer, per dimension and combined.

``score_answers(collection, answers, rankers)`` positions each answer among the judged documents
D_q of its query with the ranker chosen for each dimension (``nrp.positioning.injection``) and
returns
one row per (answer, dimension) with the answer's score, r, |D_q|, ties and
``NRP = 1 - r / |D_q|``, plus a ``combined`` row per answer: the weighted mean of its dimensions'
NRP (weights normalised to sum 1; equal by default).

Choices, and why:

- **One ranker, scored once.** Rankers are grouped by fingerprint, so a ranker chosen for several
  dimensions positions each answer once. When one ranker serves every dimension (the source
  study's situation: monoT5 won every dimension), the frame's ``attrs["single_ranker"]`` names it
  and ``attrs["note"]`` says that each dimension's NRP, and the combined NRP, are that one NRP.
- **Empty D_q: skipped and reported.** An answer to a query without judged documents that have
  text cannot be ranked (NRP = 1 - r/0 is undefined). Such answers get no rows;
  ``attrs["skipped"]`` lists them with the reason and a warning is logged, so one topic without
  documents does not stop a run over thousands of answers. A qid the collection does not know
  is an error: the answers were generated for another collection.
- **Resumable.** Positions are stored per (collection, ranker fingerprint, injection mode, qid,
  answer_id, text hash) in ``indexes/NAME/nrp.sqlite`` after every batch (``chunk_size``
  answers), so an interrupted run continues where it stopped and an unchanged re-run computes
  nothing (``attrs["counts"]`` shows it). The tie rule is applied when the frame is built from
  the stored counts, so changing it recomputes nothing either.
- **Counts for the benchmark.** ``attrs["counts"]`` sums ``InjectionCounts`` over the rankers:
  answers scored, documents scored, documents rescored (lexical stats=query), pair evaluations
  (duoT5), answers served by the results cache; ``attrs["counts_by_ranker"]`` has them per
  ranker spec, ``attrs["injection"]`` the mode each ranker ran in.

``NRPScorer`` is the same as a PyTerrier transformer: (qid, docno = answer id, text) rows in,
the same rows with ``score``, ``rank`` (r), ``ties``, ``n_docs`` and ``nrp`` out.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyterrier as pt

from nrp.collection.collection import Collection
from nrp.errors import ConfigError, NrpError
from nrp.executors.base import Executor, active_executor
from nrp.positioning.choice import RankerChoice, RankerChoiceLike
from nrp.positioning.injected_runs import check_injected_runs, write_injected_runs
from nrp.positioning.injection import InjectedRanking, InjectionCounts, describe_mode
from nrp.positioning.job import PositionCaches, PositionJob, PositionOptions
from nrp.positioning.positioner import Positioner
from nrp.positioning.result_rows import dimension_values, result_arrays
from nrp.positioning.results_cache import text_sha
from nrp.progress import Progress
from nrp.rankers.base import Ranker
from nrp.rankers.coerce import as_ranker
from nrp.rankers.dense import embedding_memo
from nrp.rankers.registry import RankerSpec, spec_at_dtype
from nrp.ranks import DEFAULT_TIE_MODE, check_tie_mode
from nrp.settings import settings_with
from nrp.tables import require_columns
from nrp.validation.result import ValidationResult

log = logging.getLogger(__name__)


RESULT_COLUMNS = (
    "answer_id",
    "llm",
    "prompt",
    "qid",
    "sample",
    "dimension",
    "ranker",
    "score",
    "rank",
    "n_docs",
    "ties",
    "nrp",
)


# -- inputs ------------------------------------------------------------------------------------
def _collection(collection: Collection | str) -> Collection:
    return collection if isinstance(collection, Collection) else Collection.load(str(collection))


def _check_answers(answers_df: pd.DataFrame) -> pd.DataFrame:
    """A copy with answer_id, llm, prompt, qid, sample, text (llm, prompt, sample optional:
    filled with '' / 0), ids as text; answer ids must be unique."""
    require_columns(answers_df, ("answer_id", "qid", "text"), "answers")
    # columns are replaced, never written into: no deep copy of the texts (a copy per column
    # only where pandas needs one)
    answers = answers_df.reset_index(drop=True)
    for column, default in (("llm", ""), ("prompt", ""), ("sample", 0)):
        if column not in answers.columns:
            answers[column] = default
    answers["answer_id"] = answers["answer_id"].astype(str)
    answers["qid"] = answers["qid"].astype(str)
    text = answers["text"]
    answers["text"] = (text.where(text.notna(), "") if text.isna().any() else text).astype(str)
    repeated = answers["answer_id"][answers["answer_id"].duplicated()]
    if len(repeated):
        raise NrpError(
            f"answer ids must be unique; {repeated.iloc[0]!r} occurs more than once "
            f"({repeated.nunique()} ids repeated)"
        )
    return answers


def resolve_rankers(
    rankers: RankerChoiceLike, collection: Collection, dtype: str | None = None
) -> tuple[dict[str, Ranker], list[str]]:
    """dimension -> ranker (built, bound to the collection), and warnings.

    ``rankers``: what ``RankerChoice.of`` reads (a mapping dimension -> spec, ``Ranker`` or
    PyTerrier transformer; a validation JSON's path or a ``ValidationResult``: its chosen ranker
    per dimension; one spec, ``Ranker`` or transformer for every dimension of the collection);
    ``as_ranker`` builds each. One spec (its canonical text), or one object, builds one ranker
    object. ``dtype``: every neural ranker of the specs at that precision
    (``RankerSpec.at_dtype``; a ranker given as an object keeps its own, so it is refused)."""
    choice = RankerChoice.of(rankers)
    warnings = [] if choice.validation is None else _foreign(choice, collection)
    chosen = choice.rankers(collection.dimensions)
    if not chosen:
        raise ConfigError("no rankers: nothing to score answers with")
    if dtype is not None:
        chosen = {d: _at_dtype(d, one, dtype) for d, one in chosen.items()}
    collection.check_dimensions(chosen)  # a ranker for no dimension would score nothing
    built: dict[str, Ranker] = {}
    by_choice: dict[str | int, Ranker] = {}  # canonical spec or object id -> its one ranker
    for dimension, one in chosen.items():
        key = str(one) if isinstance(one, RankerSpec) else id(one)
        if key not in by_choice:
            try:
                by_choice[key] = as_ranker(one)
            except ConfigError as error:
                raise ConfigError(f"dimension {dimension!r}: {error}") from None
        built[str(dimension)] = by_choice[key]
    for ranker in {id(r): r for r in built.values()}.values():
        ranker.bind_collection(collection)
    return built, warnings


def _at_dtype(dimension: str, one: object, dtype: str) -> RankerSpec:
    try:
        return spec_at_dtype(one, dtype)
    except ConfigError as error:
        raise ConfigError(f"dimension {dimension!r}: {error}") from None


def default_weights(
    settings: ScoreSettings,
    validation: ValidationResult | None,
    dimensions: list[str],
    warnings: list[str],
) -> tuple[Mapping[str, float] | None, dict[str, str]]:
    """The weights of the combined NRP before normalising (None: equal) and the dimensions left
    out of it with the reason: explicit ``weights`` first, then ``all_dimensions`` (equal),
    then validation's rule (``nrp.validation.selection.WEIGHTING_RULE``) when the rankers come
    from a validation result; a warning is added when that rule finds no validated dimension."""
    if settings.weights is not None:
        return settings.weights, {}
    if settings.all_dimensions or validation is None:
        return None, {}
    weights, left_out, unvalidated = validation.weighting()
    if unvalidated:
        warnings.append(unvalidated)
    return {d: weights.get(d, 1.0) for d in dimensions}, {
        d: why for d, why in left_out.items() if d in dimensions
    }


@dataclass(frozen=True)
class ResolvedRankers:
    """What a ranker choice comes to on a collection: the ranker of each dimension, the weights
    of the weighted NRP before normalising (None: equal; ``default_weights``), the dimensions
    left out of it with why, and the warnings."""

    by_dimension: dict[str, Ranker]
    weights: Mapping[str, float] | None
    left_out: dict[str, str]
    warnings: list[str]


def resolve_scoring(
    rankers: RankerChoiceLike, collection: Collection, settings: ScoreSettings
) -> ResolvedRankers:
    """The rankers and the weighted NRP's weights ``rankers`` give on ``collection``, as
    ``score_answers`` makes them: the one place that reads a validation result's weighting, so
    every caller that resolves rankers once and scores many times (the NRP evaluator, the
    ``pt.Experiment`` measures) weighs as ``nrp score`` does."""
    choice = RankerChoice.of(rankers)
    by_dimension, warnings = resolve_rankers(choice, collection, settings.dtype)
    weights, left_out = default_weights(settings, choice.validation, list(by_dimension), warnings)
    return ResolvedRankers(by_dimension, weights, left_out, warnings)


def _foreign(choice: RankerChoice, collection: Collection) -> list[str]:
    """A warning when the choice's validation ran on another collection (or another build of
    it)."""
    result = choice.validation
    if result is None or result.collection_fingerprint == collection.meta.get("fingerprint"):
        return []
    return [
        f"{choice.source}: validated on collection {result.collection!r} with fingerprint "
        f"{result.collection_fingerprint[:12]}, not on {collection.name!r} "
        f"({str(collection.meta.get('fingerprint'))[:12]}): the choice may not apply"
    ]


def normalised_weights(
    weights: Mapping[str, float] | None, dimensions: list[str]
) -> dict[str, float]:
    """Weights per dimension summing to 1 (equal when None). Every dimension needs a weight
    (none silently left out); negative weights and an all-zero sum are errors."""
    if weights is None:
        return {d: 1.0 / len(dimensions) for d in dimensions}
    unknown = sorted(set(weights) - set(dimensions))
    lacking = [d for d in dimensions if d not in weights]
    if unknown or lacking:
        raise ConfigError(
            f"weights must name exactly the scored dimensions {dimensions}"
            + (f"; unknown {unknown}" if unknown else "")
            + (f"; missing {lacking}" if lacking else "")
        )
    values = {d: float(weights[d]) for d in dimensions}
    if any(v < 0 or not np.isfinite(v) for v in values.values()) or sum(values.values()) <= 0:
        raise ConfigError(f"weights must be finite, >= 0 and not all 0: {values}")
    total = sum(values.values())
    return {d: v / total for d, v in values.items()}


# -- scoring -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScoreSettings:
    """Options of ``score_answers``. ``ties``: mid, optimistic, pessimistic or strict
    (``nrp.ranks``). ``frozen_stats``: lexical rankers keep D_q's statistics instead
    of counting the answer in them. ``full_rerank``: the reference mode, D_q re-ranked from
    scratch for every answer. ``weights``: per dimension in the combined NRP (equal when None).
    When the rankers come from a validation result and no ``weights`` are given, the weights
    are validation's default (``ValidationResult.weighting``: a dimension whose chosen ranker is
    not significantly better than random is left out); ``all_dimensions``: equal weights over
    every dimension instead. A dimension of weight 0 (left out, or weighted 0) is not
    positioned: its NRP counts for nothing in the weighted NRP, and positioning it can cost as
    much as the rest (``every_dimension``: positioned all the same, as before).
    ``cache``: use the score cache, pair cache and results cache beside the collection.
    ``chunk_size``: answers positioned and stored per batch (per partition on an executor).
    ``dtype``: the precision of every neural ranker the choice names (``fp32``, ``bf16``:
    ``RankerSpec.at_dtype``), nested ones too; None: as each spec says. Each precision has its
    own fingerprint, so D_q is scored again at it."""

    ties: str = DEFAULT_TIE_MODE
    frozen_stats: bool = False
    full_rerank: bool = False
    weights: Mapping[str, float] | None = None
    all_dimensions: bool = False
    every_dimension: bool = False
    cache: bool = True
    chunk_size: int = 256
    dtype: str | None = None


def score_answers(
    collection: Collection | str,
    answers_df: pd.DataFrame,
    rankers: RankerChoiceLike,
    settings: ScoreSettings | None = None,
    *,
    progress: Progress | None = None,
    executor: Executor | None = None,
    trec: str | Path | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """NRP of every answer per dimension, and combined (see the module docstring).

    ``answers_df``: answer_id, qid, text (llm, prompt, sample optional). ``rankers``: dimension
    -> spec, Ranker or PyTerrier transformer, a validation JSON path, or one spec / Ranker /
    transformer for every dimension (``resolve_rankers``).
    ``settings`` (``ScoreSettings``), or its fields as keywords (``ties="strict"``).
    ``progress``: called with one line per ranker and batch. ``executor``: where the answers
    missing from the results cache are positioned (``nrp.executors``; default: the active
    executor, else this process), in per-query partitions of up to ``chunk_size`` answers.
    ``trec``: a folder to write the injected rankings to as TREC run files
    (``nrp.positioning.injected_runs``); they are kept as positions are computed, so every
    answer is positioned here, the results cache neither read nor written.
    An answer set too large to hold at once is scored a block at a time by ``ScoringRun``
    (what this does in one block).
    """
    settings = settings_with(ScoreSettings, settings, overrides)
    collection = _collection(collection)
    answers = _check_answers(answers_df)
    run = ScoringRun(collection, rankers, settings, progress=progress, executor=executor, trec=trec)
    frame = run.score(answers, checked=True)
    frame.attrs.update(run.attrs())
    return frame


class ScoringRun:
    """``score_answers`` a block of answers at a time: the rankers resolved, their injectors
    built (D_q's scores, indexes) and their positioners kept once for every block, and what the
    blocks computed, skipped and warned of summed into one set of attrs. The rows of a block are
    those ``score_answers`` gives the same answers in a whole set, so the blocks' frames in
    order, with ``attrs()``, are its frame (``nrp score`` on an answer file larger than a
    block). ``trec`` (the injected rankings as TREC run files) takes one block only."""

    def __init__(
        self,
        collection: Collection | str,
        rankers: RankerChoiceLike,
        settings: ScoreSettings | None = None,
        *,
        progress: Progress | None = None,
        executor: Executor | None = None,
        trec: str | Path | None = None,
        **overrides: Any,
    ):
        self.settings = settings_with(ScoreSettings, settings, overrides)
        self.collection = _collection(collection)
        self.progress, self.trec = progress, trec
        self.executor = executor if executor is not None else active_executor()
        self.tie_mode = check_tie_mode(self.settings.ties)
        choice = RankerChoice.of(rankers)
        resolved = resolve_scoring(choice, self.collection, self.settings)
        self.warnings, self.left_out = resolved.warnings, resolved.left_out
        self.validation_file = None if choice.path is None else str(choice.path)
        self.weight_of = normalised_weights(resolved.weights, list(resolved.by_dimension))
        #: dimensions of weight 0 not positioned (``ScoreSettings.every_dimension``)
        self.not_scored = [
            d for d, w in self.weight_of.items() if w == 0 and not self.settings.every_dimension
        ]
        self.by_dimension = {
            d: r for d, r in resolved.by_dimension.items() if d not in self.not_scored
        }
        self.candidates = self.collection.candidates()
        self.caches = PositionCaches.beside(self.collection, self.settings.cache)
        if trec is not None:
            self.caches, self.executor = replace(self.caches, results=None), None
        options = PositionOptions(
            self.settings.frozen_stats, self.settings.full_rerank, self.settings.chunk_size
        )
        self.jobs = _jobs(self.collection, self.by_dimension, options, self.caches, self.candidates)
        self.run = _Positions()
        self.positioners: dict[str, Positioner] = {}
        self.answers = 0
        self.skipped: list[dict[str, str]] = []

    def score(self, answers_df: pd.DataFrame, *, checked: bool = False) -> pd.DataFrame:
        """The rows of these answers (``RESULT_COLUMNS``, in answer order; no attrs).
        ``checked``: ``answers_df`` is what ``_check_answers`` returned."""
        answers = answers_df if checked else _check_answers(answers_df)
        ranked, skipped = _rankable(answers, self.collection, self.candidates)
        self.answers += len(answers)
        self.skipped.extend(skipped)
        if self.trec is not None:
            check_injected_runs(self.trec, ranked, self.candidates)
        if self.caches.results is not None:  # the results cache keys positions by the text's hash
            ranked["text_sha"] = [text_sha(t) for t in ranked["text"]]
        positions = self._position(ranked)
        if self.trec is not None:
            write_injected_runs(self.trec, ranked, self.run.rankings_by(self.by_dimension))
        return result_frame(
            ranked,
            {
                d: (r.spec(), positions[self.run.fingerprints[d]])
                for d, r in self.by_dimension.items()
            },
            self.tie_mode,
            self.weight_of,
        )

    def _position(self, answers: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """Every distinct ranker positions the answers once, shared by its dimensions: the
        positions by ranker fingerprint; what it took added to the run's counts. Where several
        distinct rankers do, an ``embedding_memo`` is open around them, so that rankers of one
        model (validation's ``guard`` and ``guard:content=0.06`` over one MiniLM, chosen for
        different dimensions) embed each text once between them."""
        several = len({job.fingerprint for job in self.jobs.values()}) > 1
        with embedding_memo() if several else contextlib.nullcontext():
            return self._position_each(answers)

    def _position_each(self, answers: pd.DataFrame) -> dict[str, pd.DataFrame]:
        run, found_by = self.run, {}
        for dimension, job in self.jobs.items():
            run.fingerprints[dimension] = job.fingerprint
            if job.fingerprint in found_by:
                continue
            spec = job.ranker.spec()
            run.modes[spec] = describe_mode(job.mode, job.ranker)
            positioner = self.positioners.get(job.fingerprint)
            if positioner is None:
                positioner = self.positioners[job.fingerprint] = Positioner(job)
                if self.trec is not None:
                    positioner.injector.keep_rankings()
            found, counts = positioner.position(answers, self.executor, self.progress)
            if self.trec is not None:
                run.rankings[job.fingerprint] = positioner.injector.rankings or {}
            found_by[job.fingerprint] = found
            run.counts_by_ranker.setdefault(spec, InjectionCounts()).add(counts)
            run.total.add(counts)
        return found_by

    def attrs(self) -> dict[str, Any]:
        """The attrs of the whole run's frame: settings, choices, counts, skips, warnings."""
        if self.skipped:
            qids = sorted({s["qid"] for s in self.skipped})
            message = (
                f"{len(self.skipped)} answer(s) of {len(qids)} query(ies) without judged "
                f"documents with text cannot be ranked and are skipped: {', '.join(qids[:5])}"
            )
            log.warning(message)
        warnings = self.warnings + ([message] if self.skipped else [])
        specs = {d: r.spec() for d, r in self.by_dimension.items()}
        settings, run = self.settings, self.run
        scored = len(set(run.fingerprints.values()))  # distinct rankers, each positioned once
        single = next(iter(specs.values())) if scored == 1 else None
        return {
            "collection": self.collection.name,
            "collection_fingerprint": self.collection.meta.get("fingerprint"),
            "ties": self.tie_mode,
            "full_rerank": bool(settings.full_rerank),
            "frozen_stats": bool(settings.frozen_stats),
            "rankers": specs,
            "weights": self.weight_of,
            "left_out": self.left_out,
            "not_scored": list(self.not_scored),
            "validation": self.validation_file,
            "injection": run.modes,
            "single_ranker": single,
            "note": _note(single, list(self.by_dimension)),
            "counts": {
                "answers": self.answers,
                "answers_skipped": len(self.skipped),
                "rankers_scored": scored,
                **run.total.as_dict(),
            },
            "counts_by_ranker": {s: c.as_dict() for s, c in run.counts_by_ranker.items()},
            "skipped": self.skipped,
            "warnings": warnings,
        }


def _rankable(
    answers: pd.DataFrame, collection: Collection, candidates: pd.DataFrame
) -> tuple[pd.DataFrame, list[dict[str, str]]]:
    """The answers that can be ranked (their query has a non-empty D_q), and the skipped ones
    with the reason (``ScoringRun.attrs`` warns of them). A qid the collection does not know is
    an error: the answers were generated for another one."""
    sizes = candidates.groupby(candidates["qid"].astype(str)).size()
    known = set(collection.topics["qid"].astype(str))
    unknown = sorted(set(answers["qid"]) - known)
    if unknown:
        raise NrpError(
            f"{len(unknown)} answer qid(s) are not topics of collection {collection.name!r}: "
            f"{', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}"
        )
    empty = ~answers["qid"].isin(sizes.index)
    skipped = [
        {"answer_id": a, "qid": q, "reason": "no judged documents with text (empty D_q)"}
        for a, q in zip(answers.loc[empty, "answer_id"], answers.loc[empty, "qid"], strict=True)
    ]
    return (answers[~empty].reset_index(drop=True) if empty.any() else answers), skipped


def _jobs(
    collection: Collection,
    by_dimension: Mapping[str, Ranker],
    options: PositionOptions,
    caches: PositionCaches,
    candidates: pd.DataFrame,
) -> dict[str, PositionJob]:
    """One positioning job per dimension, the same job object for dimensions that share a
    ranker (by fingerprint, computed once per ranker object: it hashes the model files)."""
    fingerprint_of: dict[int, str] = {}
    jobs: dict[str, PositionJob] = {}
    by_fingerprint: dict[str, PositionJob] = {}
    for dimension, ranker in by_dimension.items():
        if id(ranker) not in fingerprint_of:
            fingerprint_of[id(ranker)] = ranker.fingerprint()
        fingerprint = fingerprint_of[id(ranker)]
        if fingerprint not in by_fingerprint:
            by_fingerprint[fingerprint] = PositionJob(
                collection, ranker, fingerprint, options, caches, candidates
            )
        jobs[dimension] = by_fingerprint[fingerprint]
    return jobs


@dataclass
class _Positions:
    """What a run's rankers computed: per ranker fingerprint, and summed over its blocks."""

    fingerprints: dict[str, str] = field(default_factory=dict)  # dimension -> fingerprint
    modes: dict[str, str] = field(default_factory=dict)  # ranker spec -> injection mode
    counts_by_ranker: dict[str, InjectionCounts] = field(default_factory=dict)
    total: InjectionCounts = field(default_factory=InjectionCounts)
    #: fingerprint -> answer_id -> injected ranking (``trec``)
    rankings: dict[str, dict[str, InjectedRanking]] = field(default_factory=dict)

    def rankings_by(
        self, by_dimension: Mapping[str, Ranker]
    ) -> dict[str, tuple[str, dict[str, InjectedRanking]]]:
        """dimension -> (ranker spec, answer_id -> injected ranking)."""
        return {d: (r.spec(), self.rankings[self.fingerprints[d]]) for d, r in by_dimension.items()}


def _note(single: str | None, dimensions: list[str]) -> str:
    if single is None:
        return ""
    if len(dimensions) == 1:
        return f"one dimension ({dimensions[0]}), ranked by {single}"
    return (
        f"one ranker ({single}) was chosen for every dimension ({', '.join(dimensions)}): each "
        "answer was positioned once, and each dimension's NRP and the combined NRP are that "
        "one NRP (the source study reported a single NRP)"
    )


def result_frame(
    answers: pd.DataFrame,
    positions: Mapping[str, tuple[str, pd.DataFrame]],
    tie_mode: str,
    weight_of: Mapping[str, float],
) -> pd.DataFrame:
    """``RESULT_COLUMNS`` rows per (answer, dimension), then a combined row per answer, in
    answer order. ``positions``: dimension -> (ranker spec, positions indexed by answer_id);
    ``weight_of``: normalised weights (``normalised_weights``).

    Built column by column in numpy (``nrp.positioning.result_rows``, whose ``result_rows``
    gives the same rows without a frame) and put into one frame at the end, so that a few
    answers cost what the arithmetic costs. The combined NRP is the weighted sum of the
    dimensions' NRP in dimension order with compensated (Kahan) summation, missing values
    skipped: the sum pandas' ``groupby(...).sum()`` computes, bit for bit."""
    if not len(answers):
        return pd.DataFrame(columns=list(RESULT_COLUMNS))
    ids = answers["answer_id"]
    n = len(answers)
    dimensions = [
        (name, spec, _dimension_values(ids, found, tie_mode))
        for name, (spec, found) in positions.items()
    ]
    arrays = result_arrays(n, dimensions, weight_of)
    rows = np.repeat(np.arange(n), len(dimensions) + 1)
    columns = {name: answers[name].array.take(rows) for name in RESULT_COLUMNS[:5]}
    columns.update(
        dimension=arrays.dimension.ravel(),
        ranker=arrays.ranker.ravel(),
        score=arrays.score.ravel(),
        rank=arrays.rank.ravel(),
        n_docs=arrays.n_docs.ravel(),
        ties=pd.arrays.IntegerArray(arrays.ties.ravel(), arrays.no_ties.ravel()),
        nrp=arrays.nrp.ravel(),
    )
    return pd.DataFrame(columns)  # the columns in RESULT_COLUMNS order


def _dimension_values(
    ids: pd.Series, positions: pd.DataFrame, tie_mode: str
) -> dict[str, np.ndarray]:
    """One dimension's values for every answer (``dimension_values``) from its positions
    indexed by answer id."""
    found = positions.reindex(ids)
    return dimension_values(
        found["score"].to_numpy(dtype=np.float64),
        found["above"].to_numpy(dtype=np.float64),
        found["ties"].to_numpy(dtype=np.int64),
        found["strict"].to_numpy(dtype=np.float64),
        found["n_docs"].to_numpy(dtype=np.int64),
        tie_mode,
    )


# -- PyTerrier ---------------------------------------------------------------------------------
class NRPScorer(pt.Transformer):
    """NRP as a PyTerrier transformer, for pipelines.

    Input rows: ``qid``, ``docno`` (the answer's id; it must not be a docno of D_q), ``text``
    (and any other columns, kept; ``query`` is not used: an answer is ranked for the
    collection's own topic, the query D_q is scored with). Output: the same rows with
    ``score`` (the ranker's score of the answer), ``rank`` (r, zero-based; a half-integer under
    the mid rule), ``ties``, ``n_docs`` (|D_q|) and ``nrp``. Rows of queries without judged
    documents get NaN (and a logged warning). Caching and options as ``score_answers``.
    ``ranker_spec``: a spec, a ``Ranker`` or any PyTerrier transformer (``as_ranker``). Its
    output is not a ranking of judged documents: to report NRP in ``pt.Experiment``, use the
    measures of ``nrp.evaluators.pt_measures`` instead of this transformer in a pipeline.
    """

    def __init__(
        self,
        collection: Collection | str,
        ranker_spec: str | Ranker | pt.Transformer,
        *,
        ties: str = DEFAULT_TIE_MODE,
        frozen_stats: bool = False,
        full_rerank: bool = False,
        cache: bool = True,
    ):
        self.collection = _collection(collection)
        self.ranker = as_ranker(ranker_spec)
        self.ranker.bind_collection(self.collection)
        self.ties = check_tie_mode(ties)
        self.frozen_stats = frozen_stats
        self.full_rerank = full_rerank
        self.cache = cache

    def __str__(self) -> str:
        return f"NRP({self.ranker.spec()}, ties={self.ties})"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        require_columns(inp, ("qid", "docno", "text"), f"{self}: input")
        out = inp.drop(
            columns=["score", "rank", "ties", "n_docs", "nrp"], errors="ignore"
        ).reset_index(drop=True)
        if out.empty:
            return out.assign(score=[], rank=[], ties=[], n_docs=[], nrp=[])
        answers = pd.DataFrame(
            {
                "answer_id": out["docno"].astype(str),
                "qid": out["qid"].astype(str),
                "text": out["text"],
            }
        )
        # a position is among D_q whatever the dimension: the first one only labels the rows
        dimension = next(iter(self.collection.dimensions))
        result = score_answers(
            self.collection,
            answers,
            {dimension: self.ranker},
            ties=self.ties,
            frozen_stats=self.frozen_stats,
            full_rerank=self.full_rerank,
            cache=self.cache,
        )
        rows = result[result["dimension"] == dimension].set_index("answer_id")
        rows = rows.reindex(out["docno"].astype(str))
        return out.assign(
            **{
                column: rows[column].astype(float).to_numpy()
                for column in ("score", "rank", "ties", "n_docs", "nrp")
            }
        )
