"""Evaluation on an executor: "evaluate these items with this evaluator", one partition (the
items of whole queries) at a time.

``evaluate_with_executor`` is what ``nrp.evaluators.run._run_one`` calls for the items the
evaluation cache does not have when it is given an executor (or one is active). Items with the
same content are still evaluated once (the driver deduplicates before partitioning), and each
partition's rows are stored in the driver's evaluation cache as soon as they arrive, so a killed
run resumes with the missing partitions only.

What travels: per task, the evaluator's spec (or the object) and fingerprint, and the collection
reference when the evaluator reads its collection (``bind_collection``: BERTScore's idf); the
worker builds the evaluator once (loads its model once) and checks the fingerprint. Per
partition: the items (question, answer text, references, contexts). Back: the evaluator's output
rows. Evaluators that are not cacheable (NRP, which has its own results cache) are not sent as
evaluation tasks: they run on the driver, and NRP's positioning uses the executor itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from nrp.collection.shipping import CollectionRef
from nrp.components import shipped_component
from nrp.errors import NrpError
from nrp.evaluators.base import Evaluator, all_evaluators, make_evaluator
from nrp.evaluators.cache import EvaluationCache
from nrp.executors.base import Executor, balanced_size, partition_by_query, remove_tree
from nrp.models.device import device_needs_gpu
from nrp.progress import Progress
from nrp.spec import parse_params

if TYPE_CHECKING:
    from nrp.collection.collection import Collection

#: items per partition at most (an evaluator's batch when it is larger), fewer when that gives
#: each worker about four partitions
PARTITION_ITEMS = 256


def reads_collection(evaluator: Evaluator) -> bool:
    """The evaluator overrides ``bind_collection`` (its scores may depend on the collection)."""
    return type(evaluator).bind_collection is not Evaluator.bind_collection


@dataclass
class EvaluationState:
    evaluator: Evaluator
    folders: list[Path]

    def close(self) -> None:
        for folder in self.folders:
            remove_tree(folder)


@dataclass(frozen=True)
class EvaluationTask:
    """Evaluate items with one evaluator (module docstring)."""

    evaluator: str | Evaluator
    evaluator_spec: str
    evaluator_fingerprint: str
    names: tuple[str, ...]
    collection: CollectionRef | None = None
    instance: str = ""  # set when the object is shipped: each shipped object is its own state

    def key(self) -> str:
        payload = json.dumps(
            [
                self.evaluator if isinstance(self.evaluator, str) else self.instance,
                self.evaluator_fingerprint,
                self.collection.fingerprint if self.collection else None,
            ]
        )
        return "evaluation:" + hashlib.sha256(payload.encode()).hexdigest()[:24]

    def describe(self) -> str:
        return self.evaluator_spec

    def size(self, partition: pd.DataFrame) -> int:
        return len(partition)

    def num_gpus(self, cluster_has_gpus: bool) -> float:
        if isinstance(self.evaluator, Evaluator):
            params = self.evaluator.params
        else:
            known = {name: info.params for name, info in all_evaluators().items()}
            params = parse_params(self.evaluator, "evaluator", known)[1]
        return 1.0 if device_needs_gpu(params.get("device"), cluster_has_gpus) else 0.0

    def setup(self) -> EvaluationState:
        evaluator = (
            make_evaluator(self.evaluator) if isinstance(self.evaluator, str) else self.evaluator
        )
        folders: list[Path] = []
        if self.collection is not None and reads_collection(evaluator):
            collection, copied = self.collection.open()
            if copied is not None:
                folders.append(copied)
            evaluator.bind_collection(collection)
        found = evaluator.fingerprint()
        if found != self.evaluator_fingerprint:
            for folder in folders:
                remove_tree(folder)
            raise NrpError(
                f"{self.evaluator_spec}: the evaluator built on this worker has fingerprint "
                f"{found}, the driver's {self.evaluator_fingerprint} (other model files or "
                "library versions on this node): refusing to evaluate"
            )
        return EvaluationState(evaluator, folders)

    def run(self, state: EvaluationState, partition: pd.DataFrame) -> pd.DataFrame:
        """The evaluator's rows (``names``) for the partition's items, in order, computed in
        batches of the evaluator's batch size (as the local runner does)."""
        evaluator = state.evaluator
        names = list(self.names)
        size = max(1, evaluator.batch_size)
        parts = []
        for start in range(0, len(partition), size):
            batch = partition.iloc[start : start + size].reset_index(drop=True)
            parts.append(evaluator.evaluate_checked(batch, names))
        if not parts:
            return pd.DataFrame(columns=names)
        return pd.concat(parts, ignore_index=True)


def evaluate_with_executor(
    executor: Executor,
    evaluator: Evaluator,
    items: pd.DataFrame,
    keys: Sequence[str],
    todo: Sequence[int],
    cache: EvaluationCache | None,
    collection: Collection | None = None,
    progress: Progress | None = None,
) -> dict[int, dict[str, Any]]:
    """Rows ``todo`` of ``items`` evaluated by the executor in per-query partitions; each
    partition stored in ``cache`` (when given) as it arrives. Returns item position -> row."""
    names = tuple(evaluator.score_columns() + evaluator.extra_columns())
    shipped, instance = shipped_component(evaluator, all_evaluators(), make_evaluator)
    task = EvaluationTask(
        evaluator=shipped,
        evaluator_spec=evaluator.spec(),
        evaluator_fingerprint=evaluator.fingerprint(),
        names=names,
        collection=(
            CollectionRef.of(collection, executor)
            if collection is not None and reads_collection(evaluator)
            else None
        ),
        instance=instance,
    )
    todo = list(todo)
    subset = items.iloc[todo].reset_index(drop=True)
    size = balanced_size(
        len(todo), max(PARTITION_ITEMS, evaluator.batch_size), executor.parallelism()
    )
    groups = partition_by_query(subset["qid"].astype(str).tolist(), size)
    partitions = [subset.iloc[rows].reset_index(drop=True) for rows in groups]
    scope = evaluator.fingerprint()
    fresh: dict[int, dict[str, Any]] = {}

    def store(index: int, rows: pd.DataFrame) -> None:
        positions = [todo[r] for r in groups[index]]
        if cache is not None:
            cache.store(scope, evaluator.spec(), [keys[i] for i in positions], rows)
        for j, i in enumerate(positions):
            fresh[i] = rows.iloc[j].to_dict()
        if progress is not None:
            progress(f"{evaluator.spec()}: {len(fresh)}/{len(todo)} evaluated")

    executor.run_partitions(task, partitions, on_result=store, progress=progress)
    return fresh
