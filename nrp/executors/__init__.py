"""Executors: run scoring and evaluation partitions in this process or on a Ray cluster.

``LocalExecutor`` and ``RayExecutor`` share one interface, ``run_partitions(task, partitions,
on_result)`` (``nrp.executors.base``); ``nrp.executors.scoring`` and ``nrp.executors.evaluation``
are the two tasks the library ships (position answers with a ranker; evaluate items with an
evaluator). ``score_answers(..., executor=)`` and ``evaluate(..., executor=)`` take an executor,
or the one made active with ``using_executor``. Ray is imported only when a ``RayExecutor`` is
made.
"""

from __future__ import annotations

from typing import Any

from nrp.executors.base import (
    EXECUTOR_KINDS,
    Executor,
    LocalExecutor,
    PartitionWorker,
    RunStats,
    Task,
    active_executor,
    balanced_size,
    make_executor,
    partition_by_query,
    using_executor,
)

__all__ = [
    "EXECUTOR_KINDS",
    "Executor",
    "LocalExecutor",
    "PartitionWorker",
    "RayExecutor",
    "RunStats",
    "Task",
    "active_executor",
    "balanced_size",
    "make_executor",
    "partition_by_query",
    "using_executor",
]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":
        from nrp.executors.ray_executor import RayExecutor

        return RayExecutor
    raise AttributeError(name)
