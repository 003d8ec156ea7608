"""Query-disjoint folds: each query in one fold, sizes within one, the same on every call, and
bad requests refused."""

from __future__ import annotations

import pytest

from nrp.collection.folds import assign_folds, fold_queries
from nrp.errors import ConfigError


def test_every_query_in_exactly_one_fold_with_balanced_sizes():
    qids = [f"q{i}" for i in range(11)]
    folds = assign_folds(qids, 3, seed=7)
    assert sorted(folds) == sorted(qids)
    sizes = sorted(len(f) for f in fold_queries(folds))
    assert sizes == [3, 4, 4]
    assert sorted(q for fold in fold_queries(folds) for q in fold) == sorted(qids)


def test_same_seed_same_folds_other_seed_other_folds():
    qids = [str(i) for i in range(40)]
    assert assign_folds(qids, 5, seed=1) == assign_folds(reversed(qids), 5, seed=1)
    assert assign_folds(qids, 5, seed=1) != assign_folds(qids, 5, seed=2)


def test_too_few_queries_or_folds_is_an_error():
    with pytest.raises(ConfigError, match="3 queries cannot be split into 5"):
        assign_folds(["a", "b", "c"], 5)
    with pytest.raises(ConfigError, match="at least 2"):
        assign_folds(["a", "b", "c"], 1)
