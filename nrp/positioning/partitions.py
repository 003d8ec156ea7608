"""NRP positioning on an executor: "position these answers with this ranker against this
collection", one partition (the answers of whole queries) at a time.

``position_with_executor`` is what ``nrp.positioning.scoring.score_answers`` calls for the answers
the
results cache does not have when it is given an executor (or one is active). It builds a
``ScoringTask`` and per-query partitions, runs them, and as each partition comes back stores, in
the driver's caches beside the collection, the positions (results cache, keyed by scope, qid,
answer id and text hash) and any D_q scores or duoT5 document pairs the worker computed (score
cache). The result frame is then built by ``score_answers`` exactly as in a local run.

What travels, and what stays where:

- **Per task, once per worker** (``ScoringTask``): the collection reference (path, fingerprint,
  and on Ray the store file's bytes in the object store, fetched only by a node that cannot read
  the path), the ranker's spec (or the object), its fingerprint and injection mode, the options,
  and the score-cache scopes the mode reads. The worker builds and binds the ranker (loads the
  model once), builds D_q of every query and an ``AnswerInjector`` that it keeps for the next
  partitions: per-query lexical indexes, D_q scores in memory, duoT5 pairs.
- **Per partition** (``ScoringPartition``): the answers (answer_id, qid, text) of whole queries,
  and a snapshot of the driver's score cache for those queries in the scopes the mode reads
  (D_q's cached scores, duoT5 document pairs): a few floats per document, so a worker never
  rescored what the driver already has, and needs no access to the driver's disk.
- **Back** (``ScoringResult``): the positions (score, above, ties, strict, |D_q| per answer),
  the injection counts, and the score-cache rows the worker computed that the snapshot lacked.
  The worker keeps its rows in a worker-local SQLite copy of the score cache (what
  ``AnswerInjector`` reads), removed with the worker's state.

Lexical rankers with recomputed statistics (the default) read no score cache: their partitions
carry answers only. The reference mode (``full_rerank``) reads no cache either.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nrp.collection.collection import Collection
from nrp.collection.shipping import CollectionRef
from nrp.components import shipped_component
from nrp.errors import NrpError
from nrp.executors.base import Executor, balanced_size, partition_by_query, remove_tree
from nrp.positioning.injection import AnswerInjector, InjectionCounts, injection_mode
from nrp.positioning.job import PositionJob
from nrp.positioning.results_cache import PairCache
from nrp.positioning.strategies import strategy_of_mode
from nrp.progress import Progress
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, ScoreCache
from nrp.rankers.registry import all_rankers, make_ranker
from nrp.rankers.workers import open_ranker, ranker_gpus

ScoreRows = dict[str, tuple[str, list[tuple[str, str, float]]]]  # scope -> (spec, rows)
PairRows = dict[str, list[tuple[str, str, str, float]]]  # scope -> (qid, a, b, log_p) rows


def cache_scopes(
    ranker: Ranker, collection_fingerprint: str, mode: str
) -> tuple[dict[str, str], str | None]:
    """The score-cache scopes (scope -> scorer spec) and the pair scope that
    ``AnswerInjector`` reads in ``mode``, as its strategy declares them
    (``Strategy.cache_scopes``): the ranker's own scores (pointwise, frozen lexical
    statistics), the first stage's scores and the document pairs (pairwise), none otherwise."""
    return strategy_of_mode(mode).cache_scopes(ranker, collection_fingerprint)


@dataclass(frozen=True)
class ScoringPartition:
    answers: pd.DataFrame  # answer_id, qid, text of whole queries
    scores: ScoreRows = field(default_factory=dict)  # snapshot of the driver's score cache
    pairs: PairRows = field(default_factory=dict)


@dataclass
class ScoringResult:
    positions: pd.DataFrame  # POSITION_COLUMNS, one row per answer of the partition
    counts: dict[str, int]
    scores: ScoreRows  # score-cache rows computed by the worker
    pairs: PairRows


@dataclass
class ScoringState:
    """What a worker holds for a ``ScoringTask``."""

    collection: Collection
    ranker: Ranker
    injector: AnswerInjector
    score_cache: ScoreCache | None
    pair_cache: PairCache | None
    folders: list[Path]

    def close(self) -> None:
        for folder in self.folders:
            remove_tree(folder)


@dataclass(frozen=True)
class ScoringTask:
    """Position answers with one ranker among D_q of one collection (module docstring)."""

    collection: CollectionRef
    ranker: str | Ranker  # a spec that rebuilds it, or the object
    ranker_spec: str  # Ranker.spec(): for messages
    ranker_fingerprint: str
    mode: str
    frozen_stats: bool
    full_rerank: bool
    use_cache: bool
    score_scopes: Mapping[str, str]
    pair_scope: str | None
    instance: str = ""  # set when the object is shipped: each shipped object is its own state

    def key(self) -> str:
        payload = json.dumps(
            [
                self.collection.fingerprint,
                self.ranker if isinstance(self.ranker, str) else self.instance,
                self.ranker_fingerprint,
                self.mode,
                self.frozen_stats,
                self.full_rerank,
                self.use_cache,
            ]
        )
        return "scoring:" + hashlib.sha256(payload.encode()).hexdigest()[:24]

    def describe(self) -> str:
        return self.ranker_spec

    def size(self, partition: ScoringPartition) -> int:
        return len(partition.answers)

    def num_gpus(self, cluster_has_gpus: bool) -> float:
        return ranker_gpus(self.ranker, cluster_has_gpus)

    # -- on the worker -----------------------------------------------------------------------
    def setup(self) -> ScoringState:
        collection, ranker, folders = open_ranker(
            self.collection, self.ranker, self.ranker_spec, self.ranker_fingerprint
        )
        try:
            mode = injection_mode(ranker, self.frozen_stats, self.full_rerank)
            if mode != self.mode:
                raise NrpError(
                    f"{self.ranker_spec}: this worker would position answers in mode {mode}, "
                    f"the driver in {self.mode}"
                )
            score_cache = pair_cache = None
            if self.use_cache:
                local = Path(tempfile.mkdtemp(prefix="nrp-worker-cache-"))
                folders.append(local)
                score_cache = ScoreCache(local / SCORE_CACHE_FILE)
                pair_cache = PairCache(local / SCORE_CACHE_FILE)
            injector = AnswerInjector(
                collection,
                ranker,
                frozen_stats=self.frozen_stats,
                full_rerank=self.full_rerank,
                score_cache=score_cache,
                pair_cache=pair_cache,
            )
        except BaseException:
            for folder in folders:
                remove_tree(folder)
            raise
        return ScoringState(collection, ranker, injector, score_cache, pair_cache, folders)

    def run(self, state: ScoringState, partition: ScoringPartition) -> ScoringResult:
        injector = state.injector
        seeded_scores: set[tuple[str, str, str]] = set()
        seeded_pairs: set[tuple[str, str, str, str]] = set()
        if state.score_cache is not None:
            for scope, (spec, rows) in partition.scores.items():
                state.score_cache.store(scope, spec, rows)
                seeded_scores.update((scope, q, d) for q, d, _ in rows)
        if state.pair_cache is not None:
            for scope, rows in partition.pairs.items():
                state.pair_cache.store(scope, rows)
                seeded_pairs.update((scope, q, a, b) for q, a, b, _ in rows)
        before = injector.counts.as_dict()
        positions = injector.position(partition.answers)
        counts = {k: v - before[k] for k, v in injector.counts.as_dict().items()}
        qids = list(dict.fromkeys(partition.answers["qid"].astype(str)))
        new_scores: ScoreRows = {}
        new_pairs: PairRows = {}
        if state.score_cache is not None:
            qid_list, docnos = [], []
            for qid in qids:
                docs = injector.docs(qid)["docno"].astype(str).tolist()
                qid_list += [qid] * len(docs)
                docnos += docs
            for scope, spec in self.score_scopes.items():
                values = state.score_cache.lookup(scope, qid_list, docnos)
                rows = [
                    (q, d, float(s))
                    for q, d, s in zip(qid_list, docnos, values, strict=True)
                    if not np.isnan(s) and (scope, q, d) not in seeded_scores
                ]
                if rows:
                    new_scores[scope] = (spec, rows)
        if state.pair_cache is not None and self.pair_scope is not None:
            rows = [
                (q, a, b, float(p))
                for (q, a, b), p in state.pair_cache.lookup(self.pair_scope, qids).items()
                if (self.pair_scope, q, a, b) not in seeded_pairs
            ]
            if rows:
                new_pairs[self.pair_scope] = rows
        return ScoringResult(positions, counts, new_scores, new_pairs)


def ranker_task(executor: Executor, job: PositionJob) -> ScoringTask:
    """The task for one positioning job (its ranker's spec shipped when a registry spec
    rebuilds it)."""
    ranker, caches = job.ranker, job.caches
    shipped, instance = shipped_component(ranker, all_rankers(), make_ranker)
    use_cache = caches.scores is not None
    scopes, pair_scope = (
        cache_scopes(ranker, str(job.collection.meta["fingerprint"]), job.mode)
        if use_cache
        else ({}, None)
    )
    return ScoringTask(
        collection=CollectionRef.of(job.collection, executor),
        ranker=shipped,
        ranker_spec=ranker.spec(),
        ranker_fingerprint=job.fingerprint,
        mode=job.mode,
        frozen_stats=bool(job.options.frozen_stats),
        full_rerank=bool(job.options.full_rerank),
        use_cache=use_cache,
        score_scopes=scopes,
        pair_scope=pair_scope,
        instance=instance,
    )


def _snapshot(
    task: ScoringTask,
    qids: list[str],
    candidates: pd.DataFrame,
    score_cache: ScoreCache | None,
    pair_cache: PairCache | None,
) -> tuple[dict[str, ScoreRows], dict[str, PairRows]]:
    """The driver's cached D_q scores and duoT5 pairs of ``qids``, per qid."""
    scores: dict[str, ScoreRows] = {}
    pairs: dict[str, PairRows] = {}
    if score_cache is not None and task.score_scopes:
        wanted = candidates[candidates["qid"].astype(str).isin(set(qids))]
        qid_list = wanted["qid"].astype(str).tolist()
        docnos = wanted["docno"].astype(str).tolist()
        for scope, spec in task.score_scopes.items():
            values = score_cache.lookup(scope, qid_list, docnos)
            for q, d, s in zip(qid_list, docnos, values, strict=True):
                if not np.isnan(s):
                    scores.setdefault(q, {}).setdefault(scope, (spec, []))[1].append(
                        (q, d, float(s))
                    )
    if pair_cache is not None and task.pair_scope is not None:
        for (q, a, b), p in pair_cache.lookup(task.pair_scope, qids).items():
            pairs.setdefault(q, {}).setdefault(task.pair_scope, []).append((q, a, b, float(p)))
    return scores, pairs


def _merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        for scope, value in part.items():
            if isinstance(value, tuple):  # (spec, rows)
                out.setdefault(scope, (value[0], []))[1].extend(value[1])
            else:
                out.setdefault(scope, []).extend(value)
    return out


def position_with_executor(
    job: PositionJob, todo: pd.DataFrame, executor: Executor, progress: Progress | None = None
) -> tuple[list[pd.DataFrame], InjectionCounts]:
    """Positions of ``todo`` (answer_id, qid, text, text_sha) by the job's ranker, computed by
    the executor in per-query partitions of up to ``chunk_size`` answers (smaller when that
    gives each worker about four: ``balanced_size``); each partition is stored in the driver's
    caches as soon as it arrives. Returns the position frames and the summed injection
    counts."""
    task = ranker_task(executor, job)
    todo = todo.reset_index(drop=True)
    partitions = _partitions(task, job, todo, executor)
    store = _Store(job, todo, executor, progress)
    found = executor.run_partitions(task, partitions, on_result=store, progress=progress)
    return [r.positions for r in found if len(r.positions)], store.counts


def _partitions(
    task: ScoringTask, job: PositionJob, todo: pd.DataFrame, executor: Executor
) -> list[ScoringPartition]:
    """Per-query partitions of ``todo``, each with the driver's cached scores of its queries."""
    size = balanced_size(len(todo), job.options.chunk_size, executor.parallelism())
    groups = partition_by_query(todo["qid"].astype(str).tolist(), size)
    qids = list(dict.fromkeys(todo["qid"].astype(str)))
    candidates = job.candidates if job.candidates is not None else job.collection.candidates()
    scores_of, pairs_of = _snapshot(task, qids, candidates, job.caches.scores, job.caches.pairs)
    partitions = []
    for rows in groups:
        answers = todo.iloc[rows][["answer_id", "qid", "text"]].reset_index(drop=True)
        part_qids = list(dict.fromkeys(answers["qid"].astype(str)))
        partitions.append(
            ScoringPartition(
                answers,
                _merged([scores_of.get(q, {}) for q in part_qids]),
                _merged([pairs_of.get(q, {}) for q in part_qids]),
            )
        )
    return partitions


class _Store:
    """The driver's ``on_result``: a partition's new D_q scores and pairs first, then the
    positions that were computed with them, into the job's caches."""

    def __init__(
        self, job: PositionJob, todo: pd.DataFrame, executor: Executor, progress: Progress | None
    ):
        self.job, self.executor, self.progress = job, executor, progress
        self.scope = job.scope
        self.total = len(todo)
        self.sha_of = (  # the results cache keys positions by the text's hash
            dict(zip(todo["answer_id"].astype(str), todo["text_sha"].astype(str), strict=True))
            if job.caches.results is not None
            else {}
        )
        self.counts = InjectionCounts()
        self.done = 0

    def __call__(self, index: int, result: ScoringResult) -> None:
        caches = self.job.caches
        if caches.scores is not None:
            for cache_scope, (spec, rows) in result.scores.items():
                caches.scores.store(cache_scope, spec, rows)
        if caches.pairs is not None:
            for pair_scope, pair_rows in result.pairs.items():
                caches.pairs.store(pair_scope, pair_rows)
        if caches.results is not None and len(result.positions):
            shas = [self.sha_of[str(a)] for a in result.positions["answer_id"]]
            caches.results.store(self.scope, result.positions, shas)
        self.counts.add(InjectionCounts(**result.counts))
        self.done += len(result.positions)
        if self.progress is not None:
            spec, where = self.job.ranker.spec(), self.executor.describe()
            self.progress(f"{spec}: {self.done}/{self.total} positioned ({where})")
