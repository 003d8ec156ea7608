"""Query-disjoint folds: every query of a collection in exactly one of k folds.

Anything fitted on a collection's judgments (a trained ranker, fusion weights) is fitted on the
queries of k-1 folds and used on the queries of the remaining one, so no query's documents, and
no answer to that query, are ever scored by something that saw its judgments ("cross-fitting").
The assignment is a pure function of the query ids, k and the seed: the same on every machine
and in every process, so a worker, a later run and a test agree on which model held a query out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from nrp.errors import ConfigError


def assign_folds(qids: Iterable[str], k: int, seed: int = 0) -> dict[str, int]:
    """qid -> fold (0..k-1): queries ordered by a seeded hash of their id, then dealt round robin,
    so fold sizes differ by at most one. Raises ``ConfigError`` for k < 2 or fewer queries than
    folds (a fold without queries could not be held out)."""
    unique = sorted({str(q) for q in qids})
    if k < 2:
        raise ConfigError(f"folds must be at least 2, got {k}")
    if len(unique) < k:
        raise ConfigError(f"{len(unique)} queries cannot be split into {k} query-disjoint folds")
    order = sorted(unique, key=lambda q: (_seeded_hash(q, seed), q))
    return {qid: position % k for position, qid in enumerate(order)}


def fold_queries(folds: Mapping[str, int]) -> list[list[str]]:
    """The queries of each fold, in qid order."""
    k = max(folds.values()) + 1 if folds else 0
    out: list[list[str]] = [[] for _ in range(k)]
    for qid in sorted(folds):
        out[folds[qid]].append(qid)
    return out


def _seeded_hash(qid: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}\x00{qid}".encode()).hexdigest()
