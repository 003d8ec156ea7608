"""The ways of injecting an answer among D_q, as a chain: the first strategy that supports the
ranker (its declared ``Ranker.injection``, its parameters, the options) positions its answers,
and full re-ranking, which supports every ranker, comes last (the shape of ir_measures'
providers with their fallback)::

    LexicalRecomputed       "statistics", stats=query, python back-end    StatisticsScorer
    LexicalFrozen           "statistics", frozen statistics               StatisticsScorer
    LexicalFrozenReference  "statistics", frozen statistics, full_rerank  StatisticsScorer
    PairwiseTopK            "pairwise"                                    PairwiseScorer
    Pointwise               "pointwise", not depends_on_candidate_set     Ranker
    FullTransform           any ranker (the reference, and the fallback)  Ranker

A chosen strategy checks that the ranker is what it needs (the Protocols of
``nrp.rankers.base``): a ranker that declares "statistics" or "pairwise" without it is refused
with a ``ConfigError`` naming the members it lacks, rather than re-ranked in full without a
word (a declaration that cannot be honoured is a mistake in the ranker, and the full re-rank of
every answer can be hundreds of times slower). ``mode`` of each strategy is part of the
results-cache key.
"""

from __future__ import annotations

from nrp.positioning.strategies.base import (
    InjectedRanking,
    InjectionCounts,
    InjectionState,
    Strategy,
)
from nrp.positioning.strategies.frozen import LexicalFrozen, LexicalFrozenReference
from nrp.positioning.strategies.full import FullTransform
from nrp.positioning.strategies.pairwise import PairwiseTopK
from nrp.positioning.strategies.pointwise import Pointwise
from nrp.positioning.strategies.recomputed import LexicalRecomputed
from nrp.rankers.base import Ranker

__all__ = [
    "CHAIN",
    "FALLBACK",
    "STRATEGIES",
    "FullTransform",
    "InjectedRanking",
    "InjectionCounts",
    "InjectionState",
    "LexicalFrozen",
    "LexicalFrozenReference",
    "LexicalRecomputed",
    "PairwiseTopK",
    "Pointwise",
    "Strategy",
    "choose",
    "strategy_of_mode",
]

#: asked in this order; the first that supports the ranker positions its answers
CHAIN: tuple[type[Strategy], ...] = (
    LexicalRecomputed,
    LexicalFrozen,
    LexicalFrozenReference,
    PairwiseTopK,
    Pointwise,
)
#: what every ranker falls back to: exact for any ranker, and the slowest
FALLBACK: type[Strategy] = FullTransform
STRATEGIES: tuple[type[Strategy], ...] = (*CHAIN, FALLBACK)


def choose(
    ranker: Ranker, *, frozen_stats: bool = False, full_rerank: bool = False
) -> type[Strategy]:
    """The first strategy of ``CHAIN`` that supports the ranker with these options, checked
    against what it needs of the ranker (``Strategy.check``: a ``ConfigError`` naming what the
    ranker lacks); ``FALLBACK`` when none does."""
    for strategy in CHAIN:
        if strategy.supports(ranker, frozen_stats=frozen_stats, full_rerank=full_rerank):
            strategy.check(ranker)
            return strategy
    return FALLBACK


def strategy_of_mode(mode: str) -> type[Strategy]:
    """The strategy whose ``mode`` this is."""
    for strategy in STRATEGIES:
        if strategy.mode == mode:
            return strategy
    raise KeyError(mode)
