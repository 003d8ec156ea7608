"""What one positioning run is: a collection, a ranker, its injection mode, the options and the
caches, as one object instead of a dozen parameters passed from hand to hand.

``PositionJob`` is what ``Positioner`` (this process) and ``position_with_executor`` (per-query
partitions on an executor) both work from, so the two paths read the same settings and store
into the same caches under the same scope.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from nrp.collection.collection import Collection
from nrp.errors import ConfigError
from nrp.positioning.injection import injection_mode
from nrp.positioning.results_cache import RESULTS_FILE, PairCache, PositionScope, ResultsCache
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, ScoreCache
from nrp.rankers.coerce import RankerLike, as_ranker


@dataclass(frozen=True)
class PositionOptions:
    """How answers are positioned.

    ``frozen_stats``: lexical rankers keep D_q's statistics instead of counting the answer in
    them. ``full_rerank``: the reference mode, D_q re-ranked from scratch for every answer.
    ``chunk_size``: answers computed (and stored) per batch here, or per partition on an
    executor."""

    frozen_stats: bool = False
    full_rerank: bool = False
    chunk_size: int = 256

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ConfigError(f"chunk_size must be at least 1, got {self.chunk_size}")


@dataclass(frozen=True, eq=False)
class PositionCaches:
    """The caches beside a collection that positioning reads and fills: positions (results
    cache, ``nrp.sqlite``), D_q scores (score cache) and duoT5 document pairs (``scores.sqlite``).
    All None: nothing is read or stored."""

    results: ResultsCache | None = None
    scores: ScoreCache | None = None
    pairs: PairCache | None = None

    @classmethod
    def beside(cls, collection: Collection, enabled: bool = True) -> PositionCaches:
        if not enabled:
            return cls()
        return cls(
            ResultsCache(collection.path / RESULTS_FILE),
            ScoreCache(collection.path / SCORE_CACHE_FILE),
            PairCache(collection.path / SCORE_CACHE_FILE),
        )


@dataclass(frozen=True, eq=False)
class PositionJob:
    """One ranker positioning answers among D_q of one collection (module docstring).

    ``fingerprint``: the ranker's (computed once: it hashes the model files). ``candidates``:
    D_q of every topic when the caller already has them (else read from the collection)."""

    collection: Collection
    ranker: Ranker
    fingerprint: str
    options: PositionOptions = PositionOptions()
    caches: PositionCaches = PositionCaches()
    candidates: pd.DataFrame | None = None

    @classmethod
    def of(
        cls,
        collection: Collection,
        ranker: RankerLike,
        options: PositionOptions | None = None,
        caches: PositionCaches | None = None,
    ) -> PositionJob:
        """The job of ``ranker``: a ``Ranker``, a spec or any PyTerrier transformer
        (``as_ranker``; one it builds here is bound to ``collection``)."""
        built = as_ranker(ranker)
        if built is not ranker:
            built.bind_collection(collection)
        return cls(collection, built, built.fingerprint(), options or PositionOptions(),
                   caches or PositionCaches())  # fmt: skip

    @property
    def mode(self) -> str:
        """The injection mode (``nrp.positioning.injection``); part of the results-cache key."""
        return injection_mode(self.ranker, self.options.frozen_stats, self.options.full_rerank)

    @property
    def scope(self) -> PositionScope:
        """The results-cache scope of this job's positions."""
        return PositionScope(
            str(self.collection.meta["fingerprint"]),
            self.fingerprint,
            self.mode,
            self.ranker.spec(),
            self.collection.name,
            float(self.ranker.score_tolerance),
        )
