"""Executors: run scoring and evaluation partitions in this process or on a Ray cluster.

``LocalExecutor`` and ``RayExecutor`` share one interface, ``run_partitions(task, partitions,
on_result)`` (``nrp.executors.base``); ``nrp.positioning.partitions`` and
``nrp.evaluators.partitions``
are the two tasks the library ships (position answers with a ranker; evaluate items with an
evaluator). ``score_answers(..., executor=)`` and ``evaluate(..., executor=)`` take an executor,
or the one made active with ``using_executor``. Ray is imported only when a ``RayExecutor`` is
made.
"""

from __future__ import annotations

import os
from typing import Any

from nrp.errors import ConfigError
from nrp.executors.base import (
    Executor,
    LocalExecutor,
    PartitionWorker,
    RunStats,
    Task,
    active_executor,
    balanced_size,
    partition_by_query,
    using_executor,
)

EXECUTOR_KINDS = ("local", "ray")

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


def make_executor(
    kind: str = "local", address: str | None = None, **options: Any
) -> Executor | None:
    """``local``: None (the in-process path every command takes by default); ``ray``: a
    ``RayExecutor`` connected to ``address`` (``$RAY_ADDRESS``, or a Ray instance started on
    this machine when neither is given). ``options`` go to ``RayExecutor``."""
    if kind == "local":
        if address:
            raise ConfigError("--ray-address needs --executor ray")
        return None
    if kind == "ray":
        from nrp.executors.ray_executor import RayExecutor

        return RayExecutor(address=address or os.environ.get("RAY_ADDRESS") or None, **options)
    raise ConfigError(f"unknown executor {kind!r} (use one of {', '.join(EXECUTOR_KINDS)})")
