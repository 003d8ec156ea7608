"""NRP as a measure of ``pt.Experiment``, for pipelines that produce answers.

PyTerrier's RAG ecosystem (pyterrier-rag) evaluates answer-producing pipelines in
``pt.Experiment``: a pipeline returns one row per query with its generated answer in a ``qanswer``
column, and the measures are ir_measures objects that read that column. Placed in such a pipeline,
``NRPScorer`` only yields rows that no qrels judge (``nDCG@10 = 0.0``); ``nrp_measures(collection)``
gives NRP in the measure's place instead: ``nrp.DIMENSION`` for each dimension and
``nrp.weighted``, per query and averaged, with the rankers validated for the collection.

Why not pyterrier-rag's own classes: its measures are plain ir_measures measures (defined at
runtime over the run's ``qanswer``), and pyterrier-rag 0.3.0 does not install beside nrp's pins
(``pip install --dry-run pyterrier-rag`` replaces torch 2.13.0 with 2.15.0 and pulls CUDA wheels,
fschat, openai and pyterrier-dr). The measures here have the same shape without it: an
ir_measures ``Measure`` with a ``runtime_impl`` (served by ir_measures' runtime provider), run
inputs ``query_id`` and ``qanswer``, so they sit beside pyterrier-rag's EM or F1 in one list.

Choices, and why:

- **One positioning per run.** ``pt.Experiment`` asks each measure in turn over the same run; the
  measures of one ``nrp_measures`` call share a scorer that positions the run's answers once
  (``score_answers``: a ranker chosen for several dimensions runs once, the results cache beside
  the collection serves what an earlier run computed) and hands each measure its dimension.
- **Rankers.** By default the collection's ``validation.json`` (``nrp validate``) names the ranker
  of each dimension; ``rankers=`` takes anything ``score_answers`` takes (a validation JSON, one
  spec, ``Ranker`` or PyTerrier transformer, or one per dimension). They are built once, when the
  measures are made, so models load once per experiment. ``nrp.weighted`` is the weighted NRP of
  ``nrp score``: weighted as validation says (``default_weights``) when the rankers come from a
  validation result, equally otherwise, or by ``weights=``.
- **One answer per query.** The first row of each query is its answer (pyterrier-rag's
  convention). It is positioned as answer ``qanswer:QID``; the results cache keys positions by
  the text's hash too, so two pipelines' answers to one query never mix.
- **A missing query counts as ir_measures counts it.** A query of the qrels that a pipeline
  did not answer, or whose judged documents have no text (empty D_q), gets 0 (``DEFAULT``), as
  ir_measures and pytrec_eval give a query a run lacks, so ``nrp.relevance`` and ``nDCG@10`` of
  one experiment average over the same queries alike. ``missing="nan"`` gives NaN instead, so
  the mean shows that something is missing. Pass the qrels of the queries the pipelines answer
  (e.g. ``collection.qrels(DIM)``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pandas as pd
from ir_measures import Metric
from ir_measures.measures.base import Measure

from nrp.collection.collection import Collection
from nrp.collection.manifest import COMBINED
from nrp.errors import ConfigError
from nrp.positioning.scoring import (
    ScoreSettings,
    normalised_weights,
    resolve_scoring,
    score_answers,
)
from nrp.ranks import check_tie_mode
from nrp.settings import settings_with
from nrp.validation.result import VALIDATION_FILE

if TYPE_CHECKING:
    from nrp.positioning.choice import RankerChoiceLike

log = logging.getLogger(__name__)

#: the answer column of pyterrier-rag's pipelines
ANSWER_COLUMN = "qanswer"
#: ``nrp_measures(missing=...)``: the value of a query of the qrels that has no NRP
MISSING_VALUES = {"zero": 0.0, "nan": float("nan")}
#: the prefix of an answer's id (``qanswer:QID``): never a docno of D_q
ANSWER_ID_PREFIX = "qanswer:"


class RunScorer:
    """NRP of a run's answers per dimension and weighted, computed once per distinct run and
    shared by the measures of one ``nrp_measures`` call."""

    def __init__(
        self,
        collection: Collection,
        rankers: RankerChoiceLike,
        settings: ScoreSettings,
        answer_column: str = ANSWER_COLUMN,
    ):
        self.collection = collection
        # the weighted NRP as nrp score makes it: validation's weights when the rankers come
        # from a validation result, not equal ones
        resolved = resolve_scoring(rankers, collection, settings)
        self.rankers = resolved.by_dimension
        for warning in resolved.warnings:
            log.warning(warning)
        # every dimension positioned: each has its measure
        self.settings = replace(settings, weights=resolved.weights, every_dimension=True)
        self.answer_column = answer_column
        check_tie_mode(settings.ties)
        normalised_weights(settings.weights, list(self.rankers))  # a bad weight fails here
        self._memo: tuple[tuple, dict[str, dict[str, float]]] | None = None

    @property
    def dimensions(self) -> list[str]:
        """The scored dimensions, then ``COMBINED``."""
        return [*self.rankers, COMBINED]

    def answers(self, run: pd.DataFrame) -> pd.DataFrame:
        """The first row of each query as an answer (answer_id, qid, text)."""
        column = self.answer_column
        if column not in run.columns or "query_id" not in run.columns:
            raise ConfigError(
                f"NRP measures read each query's answer from column {column!r} (pyterrier-rag's "
                f"convention); the pipeline's output has columns {sorted(map(str, run.columns))}"
            )
        first = run.drop_duplicates("query_id")
        qids = first["query_id"].astype(str)
        texts = first[column].where(first[column].notna(), "").astype(str)
        return pd.DataFrame(
            {"answer_id": ANSWER_ID_PREFIX + qids, "qid": qids, "text": texts}
        ).reset_index(drop=True)

    def values(self, run: pd.DataFrame) -> dict[str, dict[str, float]]:
        """dimension (and ``COMBINED``) -> qid -> NRP of the run's answers."""
        answers = self.answers(run)
        key = tuple(zip(answers["qid"], answers["text"], strict=True))
        if self._memo is None or self._memo[0] != key:
            frame = score_answers(self.collection, answers, self.rankers, self.settings)
            found: dict[str, dict[str, float]] = {d: {} for d in self.dimensions}
            for dimension, qid, nrp in zip(
                frame["dimension"], frame["qid"], frame["nrp"], strict=True
            ):
                found[str(dimension)][str(qid)] = float(nrp)
            self._memo = (key, found)
        return self._memo[1]


class NRPMeasure(Measure):
    """NRP of one dimension (or ``weighted``) as an ir_measures measure, named
    ``nrp.DIMENSION``; made by ``nrp_measures``."""

    NAME: ClassVar[str] = "NRP"
    SUPPORTED_PARAMS: ClassVar[dict[str, Any]] = {}
    DEFAULT: ClassVar[float] = 0.0  # no answer, or no D_q: 0, as ir_measures counts it
    QREL_INPUTS: ClassVar[list[str]] = ["query_id"]

    def __init__(self, scorer: RunScorer, dimension: str, missing: float = 0.0):
        super().__init__()
        self.scorer = scorer
        self.dimension = dimension
        self.DEFAULT = missing  # type: ignore[misc]  # this measure's value of a missing query
        self.__name__ = f"nrp.{dimension}"
        self.RUN_INPUTS = ["query_id", scorer.answer_column]

    def __call__(self, **params: Any) -> Measure:
        raise TypeError(f"{self.__name__} takes no parameters (nrp_measures takes the options)")

    def runtime_impl(self, qrels: pd.DataFrame, run: pd.DataFrame) -> Iterator[Metric]:
        """One value per answered query with a non-empty D_q (ir_measures fills the rest of
        the qrels' queries with ``DEFAULT``)."""
        for qid, value in self.scorer.values(run)[self.dimension].items():
            yield Metric(qid, self, value)


def nrp_measures(
    collection: Collection | str,
    rankers: RankerChoiceLike | None = None,
    *,
    answer_column: str = ANSWER_COLUMN,
    missing: Literal["zero", "nan"] = "zero",
    **options: Any,
) -> list[NRPMeasure]:
    """NRP per dimension and weighted, as measures for ``pt.Experiment`` over pipelines that
    return each query's answer in ``answer_column`` (module docstring).

    ``rankers``: None for the collection's ``validation.json``, else anything ``score_answers``
    takes. ``options``: ``ScoreSettings`` fields (``ties="pessimistic"``, ``weights={...}``,
    ``cache=False``, ...). ``missing``: the value of a query of the qrels without an answer
    or without D_q, ``"zero"`` as ir_measures counts a query a run lacks, or ``"nan"``.
    Returns ``nrp.DIM`` for each ranked dimension, then ``nrp.weighted``."""
    if missing not in MISSING_VALUES:
        raise ConfigError(f"missing must be 'zero' or 'nan', not {missing!r}")
    if not isinstance(collection, Collection):
        collection = Collection.load(str(collection))
    if rankers is None:
        rankers = Path(collection.path) / VALIDATION_FILE
        if not rankers.is_file():
            raise ConfigError(
                f"NRP measures use the rankers validated for collection {collection.name!r}, "
                f"read from {rankers}, which does not exist: run `nrp validate "
                f"{collection.name}` first, or pass rankers="
            )
    settings = settings_with(ScoreSettings, None, options)
    scorer = RunScorer(collection, rankers, settings, answer_column)
    value = MISSING_VALUES[missing]
    return [NRPMeasure(scorer, dimension, value) for dimension in scorer.dimensions]
