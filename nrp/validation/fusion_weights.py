"""``weights=fit`` of the ``fuse`` ranker: weights chosen on training folds, never on the queries
they fuse.

The queries with a D_q are split into query-disjoint folds (``nrp.collection.folds.assign_folds``
with the ranker's ``folds`` and ``seed``). Every weight vector of the simplex grid
(``nrp.rankers.fusion.weight_grid``, step 0.1) fuses every query once, and each query's nDCG@10
in the ranker's ``dimension`` is computed as validation computes it (graded labels, judgments of
D_q, queries with a relevant judgment: ``nrp.validation.measures``). For fold f the chosen
weights maximise the mean over the evaluated queries of the *other* folds (ties: the first vector
of the grid); fold f's queries are then fused with them. A query's own judgments therefore never
choose the weights it is ranked with, so validation's nDCG and NRP's agreement stay honest.

The sub-rankers' scores of D_q come from the score cache beside the collection (and are stored
there), so fitting after validating the sub-rankers computes nothing again. This module lives in
``nrp.validation`` because it needs the measures, which the rankers layer may not import; it
installs ``fit_weights`` as the fusion's fitter when ``nrp.validation`` is imported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nrp.collection.folds import assign_folds
from nrp.errors import ConfigError
from nrp.rankers.cache import SCORE_CACHE_FILE, CachedRanker, ScoreCache
from nrp.rankers.fusion import FittedWeights, FusionRanker, set_weight_fitter, weight_grid
from nrp.validation.measures import Evaluator, load_qrels, run_from_frame

FIT_MEASURE = "nDCG@10"


def fit_weights(collection: Any, ranker: FusionRanker) -> FittedWeights:
    """Per fold, the grid weights with the best mean nDCG@10 on the other folds' queries."""
    dimension = _dimension(collection, ranker)
    candidates = collection.candidates()
    qids = list(dict.fromkeys(candidates["qid"].astype(str)))
    folds = assign_folds(qids, ranker.params["folds"], ranker.params["seed"])
    parts = ranker.contributions(candidates, _sub_scores(collection, ranker, candidates))
    qrels = load_qrels(collection, dimension, candidates=candidates)
    evaluator = Evaluator.for_dimension([FIT_MEASURE], qrels)
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


def _dimension(collection: Any, ranker: FusionRanker) -> str:
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


def _sub_scores(collection: Any, ranker: FusionRanker, candidates: pd.DataFrame) -> np.ndarray:
    """(rankers, rows of ``candidates``): each sub-ranker's scores, through the score cache."""
    cache = ScoreCache(collection.path / SCORE_CACHE_FILE)
    keys = pd.MultiIndex.from_arrays(
        [candidates["qid"].astype(str), candidates["docno"].astype(str)]
    )
    rows = []
    for sub in ranker.rankers:
        ranked = CachedRanker(sub, cache, str(collection.meta["fingerprint"])).transform(candidates)
        scores = pd.Series(
            ranked["score"].to_numpy(dtype=np.float64),
            index=pd.MultiIndex.from_arrays(
                [ranked["qid"].astype(str), ranked["docno"].astype(str)]
            ),
        )
        rows.append(scores.reindex(keys).to_numpy())
    return np.vstack(rows)


def _per_query(
    evaluator: Evaluator,
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


set_weight_fitter(fit_weights)
