"""Validation on an executor: "score these judged documents with this ranker", one partition
(the candidate documents of whole queries) at a time.

``rank_with_executor`` is what ``nrp.validation.validate`` calls per ranker when it is given an
executor (or one is active). It is ``CachedRanker``'s work spread over workers: the driver looks
up the score cache beside the collection, sends the documents it lacks (every document of a
query whose scores depend on its candidate set, as lexical rankers with per-query statistics
do) in per-query partitions, and stores each partition's scores in the cache as it arrives; the
ranking (``add_ranks``) and every measure are then computed on the driver, exactly as in a local
run. A killed run keeps its finished partitions; the re-run sends the rest. The same cache then
serves NRP's fast mode, which reads D_q's scores from it.

What travels: per task, the collection reference, the ranker's spec (or the object) and its
fingerprint, which the worker checks after building the ranker (loading its model once). Per
partition: the candidate rows (qid, query, docno, text). Back: one score per row.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nrp.collection.collection import Collection
from nrp.collection.shipping import CollectionRef
from nrp.components import shipped_component
from nrp.executors.base import Executor, balanced_size, partition_by_query, remove_tree
from nrp.progress import Progress
from nrp.rankers.base import REQUIRED_COLUMNS, Ranker
from nrp.rankers.cache import ScoreCache
from nrp.rankers.registry import all_rankers, make_ranker
from nrp.rankers.workers import open_ranker, ranker_gpus

#: candidate documents per partition at most, fewer when that gives each worker about four
PARTITION_DOCUMENTS = 2048


@dataclass
class DocumentScoringState:
    ranker: Ranker
    folders: list[Path]

    def close(self) -> None:
        for folder in self.folders:
            remove_tree(folder)


@dataclass(frozen=True)
class DocumentScoringTask:
    """Score candidate documents with one ranker (module docstring)."""

    collection: CollectionRef
    ranker: str | Ranker
    ranker_spec: str
    ranker_fingerprint: str
    instance: str = ""  # set when the object is shipped: each shipped object is its own state

    def key(self) -> str:
        payload = json.dumps(
            [
                self.collection.fingerprint,
                self.ranker if isinstance(self.ranker, str) else self.instance,
                self.ranker_fingerprint,
            ]
        )
        return "documents:" + hashlib.sha256(payload.encode()).hexdigest()[:24]

    def describe(self) -> str:
        return self.ranker_spec

    def size(self, partition: pd.DataFrame) -> int:
        return len(partition)

    def num_gpus(self, cluster_has_gpus: bool) -> float:
        return ranker_gpus(self.ranker, cluster_has_gpus)

    def setup(self) -> DocumentScoringState:
        _, ranker, folders = open_ranker(
            self.collection, self.ranker, self.ranker_spec, self.ranker_fingerprint
        )
        return DocumentScoringState(ranker, folders)

    def run(self, state: DocumentScoringState, partition: pd.DataFrame) -> np.ndarray:
        scores = np.asarray(state.ranker.score_frame(partition), dtype=float)
        if scores.shape != (len(partition),):
            raise RuntimeError(
                f"{self.ranker_spec} returned {scores.shape} scores for {len(partition)} rows"
            )
        return scores


def rank_with_executor(
    executor: Executor,
    collection: Collection,
    ranker: Ranker,
    candidates: pd.DataFrame,
    score_cache: ScoreCache | None,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, int]:
    """``candidates`` ranked by ``ranker`` (the frame ``CachedRanker.transform`` returns): the
    scores the cache lacks computed by ``executor`` in per-query partitions, each stored in
    ``score_cache`` (when given) as it arrives. Returns the ranked frame and the rows computed."""
    from pyterrier.model import add_ranks

    frame = ranker.formulate(candidates.reset_index(drop=True))  # rows carry its query field
    qids = frame["qid"].astype(str).tolist()
    docnos = frame["docno"].astype(str).tolist()
    scope = f"{str(collection.meta['fingerprint'])[:20]}/{ranker.fingerprint()}"
    if score_cache is not None:
        scores = np.asarray(score_cache.lookup(scope, qids, docnos), dtype=float)
    else:
        scores = np.full(len(frame), np.nan)
    missing = np.isnan(scores)
    if ranker.depends_on_candidate_set and missing.any():
        redo = set(frame.loc[missing, "qid"].astype(str))
        missing = frame["qid"].astype(str).isin(redo).to_numpy()
    rows = np.flatnonzero(missing)
    if len(rows):
        todo = frame.iloc[rows][list(REQUIRED_COLUMNS)].reset_index(drop=True)
        size = balanced_size(len(todo), PARTITION_DOCUMENTS, executor.parallelism())
        groups = partition_by_query(todo["qid"].astype(str).tolist(), size)
        shipped, instance = shipped_component(ranker, all_rankers(), make_ranker)
        task = DocumentScoringTask(
            collection=CollectionRef.of(collection, executor),
            ranker=shipped,
            ranker_spec=ranker.spec(),
            ranker_fingerprint=ranker.fingerprint(),
            instance=instance,
        )
        done = [0]

        def store(index: int, values: np.ndarray) -> None:
            positions = rows[groups[index]]
            scores[positions] = values
            if score_cache is not None:
                part = todo.iloc[groups[index]]
                score_cache.store(
                    scope,
                    ranker.spec(),
                    list(zip(part["qid"].astype(str), part["docno"].astype(str), values.tolist(),
                             strict=True)),
                )  # fmt: skip
            done[0] += len(values)
            if progress is not None:
                progress(f"{ranker.spec()}: {done[0]}/{len(todo)} documents scored "
                         f"({executor.describe()})")  # fmt: skip

        partitions = [todo.iloc[group].reset_index(drop=True) for group in groups]
        executor.run_partitions(task, partitions, on_result=store, progress=progress)
    out = frame.drop(columns=["score", "rank"], errors="ignore").assign(score=scores)
    return add_ranks(out), len(rows)
