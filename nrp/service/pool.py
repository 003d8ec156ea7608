"""What the worker process keeps between batches: collections, and the rankers, positioners and
evaluators it builds, in one LRU bounded by count and by estimated memory.

A ``Positioner`` (``nrp.api``) keeps its ranker's model and D_q's scores across calls, so
answers positioned in many small batches cost what one call would; the pool keeps one per
(collection build, ranker spec, positioning options), shared by job units and synchronous
requests. A collection is reloaded when its store file changes (``nrp ingest`` rebuilt it):
models stay, and everything bound to the old build goes.

Why bounded: a read token may ask for any ranker spec, and each distinct spec (``bm25:k1=...``,
``dense:passages=N``) is a ranker with its own statistics and D_q scores; kept forever, a few
hundred of them fill the worker's memory. So the pool is an LRU of entries (a ranker bound to
a collection with its positioners, or an evaluator): at most ``max_entries`` of them, and after
every batch (``account``) at most ``max_bytes`` of estimated memory (``nrp.service.footprint``),
least recently used first out. An entry is measured when built; a hot entry is measured
again now and then as it grows (``_Entry``), which walks its objects (tens of milliseconds for a
lexical ranker's D_q data): after a batch of synchronous requests the worker measures new
entries only (``account(measure_used=False)``) and leaves the others to a quiet moment, so no
one waits for the walk. A loaded model counts once however many entries share it (the
dense rankers of one model folder share its weights), and goes when the last entry that uses
it goes. During a batch the entries it uses stay, even over the bound.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from nrp import api, engine
from nrp.service.config import DEFAULT_POOL_MAX_BYTES, DEFAULT_POOL_MAX_ENTRIES
from nrp.service.footprint import Footprint, footprint

log = logging.getLogger("nrp.service.worker")
REMEASURE_EVERY = 64  # uses of a pool entry between two measurements of its memory, at most


@dataclass(frozen=True)
class PoolLimits:
    """How much the pool keeps between batches: entries, and their estimated bytes."""

    max_entries: int = DEFAULT_POOL_MAX_ENTRIES
    max_bytes: int = DEFAULT_POOL_MAX_BYTES


@dataclass(frozen=True)
class PoolUsage:
    """What the pool holds now, by its own accounting."""

    entries: int
    bytes: int  # data of every entry plus every distinct model once
    model_bytes: int
    models: int
    evictions: int  # entries dropped to stay under the limits, since the worker started


class _Build:
    """One build of a collection as the pool holds it, with what the worker reads of it once:
    D_q of every topic and the caches beside it, each on first use (opening a cache creates
    its file)."""

    def __init__(self, stamp: int, collection: api.Collection):
        self.stamp = stamp
        self.collection = collection

    @cached_property
    def candidates(self) -> pd.DataFrame:
        """D_q of every topic (``Collection.candidates``)."""
        return self.collection.candidates()

    @cached_property
    def caches(self) -> engine.PositionCaches:
        """``PositionCaches``: positions (results cache), D_q scores, duoT5 pairs."""
        return engine.PositionCaches.beside(self.collection)

    @cached_property
    def evaluations(self) -> engine.EvaluationCache:
        """The ``EvaluationCache``."""
        return engine.EvaluationCache(self.collection.path / engine.EVALUATION_CACHE_FILE)


class _Entry:
    """A ranker bound to a collection with its positioners (by options), or an evaluator, and
    its last measured footprint (``stale``: to be measured again at the next ``account``).

    An entry grows as it is used (D_q's scores, one query at a time), so it is measured when
    built and again after its 2nd, 4th, 8th, ... use and every ``REMEASURE_EVERY`` uses: a
    hot entry is walked a few times per hundred batches, not after every one."""

    def __init__(self, value: Any):
        self.value = value
        self.positioners: dict[engine.PositionOptions, engine.Positioner] = {}
        self.footprint = Footprint()
        self.stale = True
        self.measured = False
        self.uses = 1

    def used(self) -> None:
        self.uses += 1
        if self.uses & (self.uses - 1) == 0 or self.uses % REMEASURE_EVERY == 0:
            self.stale = True


class ModelPool:
    """Collections, and rankers, positioners and evaluators in a bounded LRU (module
    docstring)."""

    def __init__(self, indexes: Path, limits: PoolLimits | None = None):
        self.indexes = indexes
        self.limits = limits or PoolLimits()
        self.builds: dict[str, _Build] = {}
        self.entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self.evictions = 0
        self.changes = 0  # entries added or dropped and collections reloaded, since start

    # -- collections -------------------------------------------------------------------------
    def collection(self, name: str) -> api.Collection:
        """The collection ``name`` as built now (reloaded when its store file changed)."""
        return self._build(name).collection

    def _build(self, name: str) -> _Build:
        stamp = (self.indexes / name / engine.STORE_FILE).stat().st_mtime_ns
        known = self.builds.get(name)
        if known is None or known.stamp != stamp:
            collection = api.Collection.load(name, self.indexes)
            self.builds[name] = _Build(stamp, collection)
            self.changes += 1
            # a rebuilt collection: everything bound to the old build goes
            for key in [k for k in self.entries if k[0] == "ranker" and k[1] == name]:
                del self.entries[key]
        return self.builds[name]

    def evaluation_cache(self, collection: api.Collection) -> engine.EvaluationCache:
        """The evaluation cache beside ``collection``."""
        return self._build(collection.name).evaluations

    # -- rankers, positioners, evaluators ----------------------------------------------------
    def ranker(self, collection: api.Collection, spec: str) -> api.Ranker:
        """The ranker ``spec`` bound to ``collection``."""
        return self._ranker_entry(collection, spec).value

    def _ranker_entry(self, collection: api.Collection, spec: str) -> _Entry:
        key = ("ranker", collection.name, _fingerprint(collection), spec)
        entry = self._use(key)
        if entry is None:
            ranker = api.make_ranker(spec)
            ranker.bind_collection(collection)
            entry = self._add(key, ranker)
        return entry

    def positioner(
        self, collection: api.Collection, spec: str, options: engine.PositionOptions
    ) -> engine.Positioner:
        """The ``Positioner`` of ranker ``spec`` over ``collection`` with ``options``
        (``PositionOptions``), storing into the caches beside the collection."""
        entry = self._ranker_entry(collection, spec)
        if options not in entry.positioners:
            build = self._build(collection.name)
            ranker = entry.value
            job = engine.PositionJob(
                collection, ranker, ranker.fingerprint(), options, build.caches, build.candidates
            )
            entry.positioners[options] = engine.Positioner(job)
        return entry.positioners[options]

    def evaluator(self, spec: str) -> Any:
        key = ("evaluator", spec)
        entry = self._use(key)
        if entry is None:
            entry = self._add(key, api.make_evaluator(spec))
        return entry.value

    # -- the bounds --------------------------------------------------------------------------
    def _use(self, key: tuple) -> _Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
            entry.used()
        return entry

    def _add(self, key: tuple, value: Any) -> _Entry:
        entry = self.entries[key] = _Entry(value)
        self.changes += 1
        while len(self.entries) > self.limits.max_entries:
            self._evict()
        return entry

    def _evict(self) -> None:
        key, _ = self.entries.popitem(last=False)
        self.evictions += 1
        self.changes += 1
        log.info("pool entry dropped", extra={"fields": {"kind": key[0], "spec": key[-1]}})

    def account(self, measure_used: bool = True) -> PoolUsage:
        """Measure the entries due to be measured (``measure_used=False``: only those never
        measured), then drop the least recently used until the estimated bytes are within
        ``max_bytes``; what the pool holds then."""
        shared = self._shared_objects()
        for entry in self.entries.values():
            if entry.stale and (measure_used or not entry.measured):
                entry.footprint = footprint([entry.value, *entry.positioners.values()], shared)
                entry.stale, entry.measured = False, True
        while self.entries and self.usage().bytes > self.limits.max_bytes:
            self._evict()
        return self.usage()

    @property
    def stale(self) -> bool:
        """Whether an entry is due to be measured (``account`` has work to do)."""
        return any(entry.stale for entry in self.entries.values())

    def usage(self) -> PoolUsage:
        """The pool's held entries and bytes by the last measurement (``account``)."""
        models: dict[int, int] = {}
        data = 0
        for entry in self.entries.values():
            models.update(entry.footprint.models)
            data += entry.footprint.data_bytes
        model_bytes = sum(models.values())
        return PoolUsage(
            len(self.entries), data + model_bytes, model_bytes, len(models), self.evictions
        )

    def _shared_objects(self) -> list[Any]:
        """What every entry reaches and the pool holds anyway: the builds, their collections,
        D_q frames and caches."""
        shared: list[Any] = [self, self.builds, self.entries]
        for build in self.builds.values():
            shared.extend([build, build.collection, *vars(build).values()])
        return shared


def _fingerprint(collection: api.Collection) -> str:
    return str(collection.meta["fingerprint"])
