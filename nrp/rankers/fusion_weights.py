"""``weights=fit`` of the ``fuse`` ranker: weights chosen on training folds, never on the queries
they fuse.

The queries with a D_q are split into query-disjoint folds (``nrp.collection.folds.assign_folds``
with the ranker's ``folds`` and ``seed``). Every weight vector of the simplex grid
(``weight_grid``, step 0.1) fuses every query once, and each query's nDCG@10 in the ranker's
``dimension`` is computed as validation computes it (graded labels, judgments of D_q, queries with
a relevant judgment: ``nrp.measures``). For fold f the chosen weights maximise the mean over the
evaluated queries of the *other* folds (ties: the first vector of the grid); fold f's queries are
then fused with them. A query's own judgments therefore never choose the weights it is ranked
with, so validation's nDCG and NRP's agreement stay honest.

The sub-rankers' scores of D_q come from the score cache beside the collection (and are stored
there), so fitting after validating the sub-rankers computes nothing again. The measures are
``nrp.measures``, a layer below the rankers (validation uses them too), so the ``fuse`` ranker's
``bind_collection`` calls ``fit_weights`` itself, however the library was entered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from nrp.collection.collection import Collection
from nrp.collection.folds import assign_folds
from nrp.errors import ConfigError
from nrp.measures import MeasureEvaluator, load_qrels, run_from_frame
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, CachedRanker, ScoreCache

#: grid step of ``weights=fit`` on the simplex (weights >= 0 summing to 1)
GRID_STEP = 0.1
FIT_MEASURE = "nDCG@10"


class Fusion(Protocol):
    """What the fitting reads of a ``nrp.rankers.fusion.FusionRanker`` (which calls it: this
    module imports nothing of it)."""

    params: dict[str, Any]
    rankers: list[Ranker]

    def spec(self, complete: bool = False) -> str: ...

    def contributions(self, frame: pd.DataFrame, raw: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class FittedWeights:
    """What ``weights=fit`` chose: the fold of each query and, per fold, the weights fitted on
    the other folds' queries and their mean nDCG@10 there (``training``)."""

    dimension: str
    folds: Mapping[str, int]
    weights: Sequence[tuple[float, ...]]
    training: Sequence[float]

    def describe(self) -> str:
        return "; ".join(
            f"fold {f}: {'+'.join(f'{w:g}' for w in weights)} (training nDCG@10 {score:.4f})"
            for f, (weights, score) in enumerate(zip(self.weights, self.training, strict=True))
        )


def weight_grid(n: int, step: float = GRID_STEP) -> list[tuple[float, ...]]:
    """Every weight vector of ``n`` non-negative multiples of ``step`` summing to 1, in
    lexicographic order of the integer steps (the first of tied vectors wins a fit)."""
    units = round(1 / step)

    def compositions(left: int, slots: int) -> list[tuple[int, ...]]:
        if slots == 1:
            return [(left,)]
        return [(i, *rest) for i in range(left + 1) for rest in compositions(left - i, slots - 1)]

    return [tuple(i / units for i in c) for c in compositions(units, n)]


def fit_weights(collection: Collection, ranker: Fusion) -> FittedWeights:
    """Per fold, the grid weights with the best mean nDCG@10 on the other folds' queries."""
    dimension = _dimension(collection, ranker)
    candidates = collection.candidates()
    qids = list(dict.fromkeys(candidates["qid"].astype(str)))
    folds = assign_folds(qids, ranker.params["folds"], ranker.params["seed"])
    parts = ranker.contributions(candidates, _sub_scores(collection, ranker, candidates))
    qrels = load_qrels(collection, dimension, candidates=candidates)
    evaluator = MeasureEvaluator.for_dimension([FIT_MEASURE], qrels)
    grid = weight_grid(len(ranker.rankers))
    evaluated = qrels.evaluated_qids
    table = np.array(
        [_per_query(evaluator, candidates, parts, weights, evaluated) for weights in grid]
    )  # (grid, evaluated queries)
    chosen, training = [], []
    for fold in range(ranker.params["folds"]):
        train = [i for i, qid in enumerate(evaluated) if folds[qid] != fold]
        if not train:
            raise ConfigError(
                f"{ranker.spec()}: the queries outside fold {fold} have no relevant judgment in "
                f"{dimension!r}: nothing to fit the weights on"
            )
        means = table[:, train].mean(axis=1)
        best = int(np.argmax(means))  # the first of equal means
        chosen.append(grid[best])
        training.append(float(means[best]))
    return FittedWeights(dimension, folds, chosen, training)


def _dimension(collection: Collection, ranker: Fusion) -> str:
    dimension = str(ranker.params["dimension"])
    dimensions = list(collection.dimensions)
    if not dimension and len(dimensions) == 1:
        return dimensions[0]
    if dimension not in dimensions:
        raise ConfigError(
            f"{ranker.spec()}: weights=fit needs dimension=NAME, one of the collection's "
            f"dimensions ({', '.join(dimensions)})"
        )
    return dimension


def _sub_scores(collection: Collection, ranker: Fusion, candidates: pd.DataFrame) -> np.ndarray:
    """(rankers, rows of ``candidates``): each sub-ranker's scores, through the score cache."""
    cache = ScoreCache(collection.path / SCORE_CACHE_FILE)
    keys = pd.MultiIndex.from_arrays(
        [candidates["qid"].astype(str), candidates["docno"].astype(str)]
    )
    rows = []
    for sub in ranker.rankers:
        ranked = CachedRanker(sub, cache, str(collection.meta["fingerprint"])).ranked_in_order(
            candidates
        )
        scores = pd.Series(
            ranked["score"].to_numpy(dtype=np.float64),
            index=pd.MultiIndex.from_arrays(
                [ranked["qid"].astype(str), ranked["docno"].astype(str)]
            ),
        )
        rows.append(scores.reindex(keys).to_numpy())
    return np.vstack(rows)


def _per_query(
    evaluator: MeasureEvaluator,
    candidates: pd.DataFrame,
    parts: np.ndarray,
    weights: tuple[float, ...],
    qids: list[str],
) -> list[float]:
    """nDCG@10 of every evaluated query when all queries are fused with ``weights``."""
    fused = np.zeros(parts.shape[1], dtype=np.float64)
    for weight, part in zip(weights, parts, strict=True):
        fused += weight * part
    run = run_from_frame(candidates.assign(score=fused))
    values = evaluator.per_query(run)[FIT_MEASURE]
    return [values[qid] for qid in qids]
