"""What the worker process keeps between batches: collections, rankers, positioners,
evaluators and caches, each built once.

A ``Positioner`` (``nrp.api``) keeps its ranker's model and D_q's scores across calls, so
answers positioned in many small batches cost what one call would; the pool keeps one per
(collection build, ranker spec, positioning options), shared by job units and synchronous
requests. A collection is reloaded when its store file changes (``nrp ingest`` rebuilt it):
models stay, and everything bound to the old build goes.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from nrp import api


class _Build:
    """One build of a collection as the pool holds it, with what the worker reads of it once:
    D_q of every topic and the caches beside it, each on first use (opening a cache creates
    its file)."""

    def __init__(self, stamp: int, collection: Any):
        self.stamp = stamp
        self.collection = collection

    @cached_property
    def candidates(self) -> pd.DataFrame:
        """D_q of every topic (``Collection.candidates``)."""
        return self.collection.candidates()

    @cached_property
    def caches(self) -> Any:
        """``PositionCaches``: positions (results cache), D_q scores, duoT5 pairs."""
        return api.PositionCaches.beside(self.collection)

    @cached_property
    def evaluations(self) -> Any:
        """The ``EvaluationCache``."""
        return api.EvaluationCache(self.collection.path / api.EVALUATION_CACHE_FILE)


class ModelPool:
    """Collections, rankers, positioners and evaluators, each built once and kept."""

    def __init__(self, indexes: Path):
        self.indexes = indexes
        self.builds: dict[str, _Build] = {}
        self.rankers: dict[tuple[str, str, str], Any] = {}
        self.positioners: dict[tuple[str, str, str, Any], Any] = {}
        self.evaluators: dict[str, Any] = {}

    def collection(self, name: str) -> Any:
        """The collection ``name`` as built now (reloaded when its store file changed)."""
        return self._build(name).collection

    def _build(self, name: str) -> _Build:
        stamp = (self.indexes / name / api.STORE_FILE).stat().st_mtime_ns
        known = self.builds.get(name)
        if known is None or known.stamp != stamp:
            collection = api.Collection.load(name, self.indexes)
            self.builds[name] = _Build(stamp, collection)
            # a rebuilt collection: models stay, everything bound to the old build goes
            self.rankers = {k: v for k, v in self.rankers.items() if k[0] != name}
            self.positioners = {k: v for k, v in self.positioners.items() if k[0] != name}
        return self.builds[name]

    def ranker(self, collection: Any, spec: str) -> Any:
        """The ranker ``spec`` bound to ``collection``."""
        key = (collection.name, _fingerprint(collection), spec)
        if key not in self.rankers:
            ranker = api.make_ranker(spec)
            ranker.bind_collection(collection)
            self.rankers[key] = ranker
        return self.rankers[key]

    def positioner(self, collection: Any, spec: str, options: Any) -> Any:
        """The ``Positioner`` of ranker ``spec`` over ``collection`` with ``options``
        (``PositionOptions``), storing into the caches beside the collection."""
        key = (collection.name, _fingerprint(collection), spec, options)
        if key not in self.positioners:
            build = self._build(collection.name)
            ranker = self.ranker(collection, spec)
            job = api.PositionJob(
                collection, ranker, ranker.fingerprint(), options, build.caches, build.candidates
            )
            self.positioners[key] = api.Positioner(job)
        return self.positioners[key]

    def evaluation_cache(self, collection: Any) -> Any:
        """The evaluation cache beside ``collection``."""
        return self._build(collection.name).evaluations

    def evaluator(self, spec: str) -> Any:
        if spec not in self.evaluators:
            self.evaluators[spec] = api.make_evaluator(spec)
        return self.evaluators[spec]


def _fingerprint(collection: Any) -> str:
    return str(collection.meta["fingerprint"])
