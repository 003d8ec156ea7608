"""The executor interface: run one task over per-query partitions, here or on a Ray cluster.

An executor runs ``task.run(state, partition)`` for every partition and hands each result to the
driver (``on_result``) as soon as it is done; ``run_partitions`` returns the results in
partition order. A **task** (``Task``) is a small picklable description of the work ("position
answers with this ranker spec against this collection", "evaluate items with this evaluator
spec"); ``task.setup()`` builds what a worker holds for it (the collection, the loaded model),
once per worker, and ``task.run`` computes one partition from that state. A **partition** is the
unit that is shipped, retried and stored: the answers (or items) of whole queries, so D_q and the
answers ranked against it stay together and a worker never needs another worker's state.

Choices, and why:

- **Workers compute, the driver writes.** ``task.run`` returns results instead of writing them:
  the results cache (``nrp.sqlite``), the score cache (``scores.sqlite``) and the evaluation
  cache live beside the collection on the driver's disk, and the nodes of a real cluster do not
  share that disk (SQLite on a network filesystem is not safe for concurrent writers anyway).
  The driver is the single writer and stores each partition in ``on_result`` the moment it
  arrives, so a run killed at any point keeps every finished partition and a re-run sends only
  the missing ones (``nrp.positioning.partitions``, ``nrp.evaluators.partitions``).
- **At least once, stored once.** A partition whose worker died is sent again; its results are
  keyed by answer (or item content) and stored with INSERT OR REPLACE, so a partition computed
  twice cannot leave two rows.
- **Same code on both executors.** ``LocalExecutor`` runs the very ``PartitionWorker`` that a Ray
  actor runs, in this process, so a local and a Ray run compute every partition with the same
  code on the same inputs and give the same results; the local executor is also what tests and
  the benchmark compare the Ray executor with.
- **A worker holds one task's state at a time** (``PartitionWorker``): a new task key (another
  model) replaces the previous state, so a GPU worker never holds two models.

The executor that a run uses can be passed explicitly (``score_answers(..., executor=)``,
``evaluate(..., executor=)``) or made active for a block (``with using_executor(executor):``),
which reaches code that calls those functions itself (the NRP evaluator inside ``evaluate``).
"""

from __future__ import annotations

import contextvars
import math
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from nrp.errors import ConfigError
from nrp.progress import Progress

OnResult = Callable[[int, Any], None]


@runtime_checkable
class Task(Protocol):
    """What an executor runs (see the module docstring). Must be picklable."""

    def key(self) -> str:
        """Identity of the state ``setup`` builds: equal keys share one worker state."""
        ...

    def describe(self) -> str:
        """One line for progress and errors (e.g. the ranker spec)."""
        ...

    def num_gpus(self, cluster_has_gpus: bool) -> float:
        """GPUs a worker needs for this task (0 for CPU work)."""
        ...

    def setup(self) -> Any:
        """Build the worker state (runs on the worker)."""
        ...

    def run(self, state: Any, partition: Any) -> Any:
        """Compute one partition from the worker state (runs on the worker)."""
        ...

    def size(self, partition: Any) -> int:
        """Items (answers) in a partition, for progress and throughput."""
        ...


@dataclass
class PartitionOutcome:
    """A partition's result and where and how long it ran."""

    result: Any
    worker: str
    seconds: float  # time in ``task.run``
    setup_seconds: float  # time in ``task.setup`` paid by this call (0 when the state was kept)


class PartitionWorker:
    """Holds one task's state and runs partitions of it; a Ray actor or an in-process object."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._state: Any = None
        self.name = f"{socket.gethostname()}/{os.getpid()}"

    def ready(self) -> str:
        """The worker's name: host/pid, or on a Ray worker its node id (8 hex)/pid."""
        ray = sys.modules.get("ray")  # imported only where Ray runs: a local run never loads it
        if ray is not None and ray.is_initialized():
            self.name = f"{ray.get_runtime_context().get_node_id()[:8]}/{os.getpid()}"
        return self.name

    def run(self, task: Task, partition: Any) -> PartitionOutcome:
        setup_seconds = 0.0
        if task.key() != self._key:
            self.release()
            started = time.perf_counter()
            self._state = task.setup()
            self._key = task.key()
            setup_seconds = time.perf_counter() - started
        started = time.perf_counter()
        result = task.run(self._state, partition)
        return PartitionOutcome(result, self.name, time.perf_counter() - started, setup_seconds)

    def release(self) -> None:
        """Drop the held state (and its worker-local files)."""
        close = getattr(self._state, "close", None)
        if callable(close):
            close()
        self._state, self._key = None, None


@dataclass
class WorkerStats:
    partitions: int = 0
    items: int = 0
    busy_seconds: float = 0.0
    setup_seconds: float = 0.0

    @property
    def items_per_second(self) -> float:
        return self.items / self.busy_seconds if self.busy_seconds > 0 else float("nan")


@dataclass
class RunStats:
    """What the last ``run_partitions`` did: wall time, retries, per-worker throughput."""

    executor: str
    task: str
    partitions: int = 0
    items: int = 0
    wall_seconds: float = 0.0
    resubmitted: int = 0  # partitions sent again after their worker was lost
    workers_lost: int = 0
    workers: dict[str, WorkerStats] = field(default_factory=dict)

    def record(self, outcome: PartitionOutcome, items: int) -> None:
        stats = self.workers.setdefault(outcome.worker, WorkerStats())
        stats.partitions += 1
        stats.items += items
        stats.busy_seconds += outcome.seconds
        stats.setup_seconds += outcome.setup_seconds
        self.partitions += 1
        self.items += items

    def as_dict(self) -> dict[str, Any]:
        return {
            "executor": self.executor,
            "task": self.task,
            "partitions": self.partitions,
            "items": self.items,
            "wall_seconds": self.wall_seconds,
            "resubmitted": self.resubmitted,
            "workers_lost": self.workers_lost,
            "workers": {
                name: {
                    "partitions": w.partitions,
                    "items": w.items,
                    "busy_seconds": w.busy_seconds,
                    "setup_seconds": w.setup_seconds,
                    "items_per_second": w.items_per_second,
                }
                for name, w in sorted(self.workers.items())
            },
        }


class Executor:
    """Runs a task over partitions; see the module docstring."""

    kind = "executor"

    def __init__(self) -> None:
        self.stats: RunStats | None = None  # of the last run
        self.history: list[RunStats] = []

    def run_partitions(
        self,
        task: Task,
        partitions: Sequence[Any],
        on_result: OnResult | None = None,
        progress: Progress | None = None,
    ) -> list[Any]:
        """``task.run`` over every partition; ``on_result(index, result)`` on the driver as each
        finishes (in completion order); the results in partition order. ``progress`` gets a
        line for events the caller cannot see (a worker lost, a partition sent again); each
        finished partition is the caller's to report from ``on_result``."""
        raise NotImplementedError

    def _finish(self, stats: RunStats) -> None:
        self.stats = stats
        self.history.append(stats)

    def parallelism(self) -> int:
        """How many partitions can run at once (a hint for partition sizes)."""
        return 1

    def share(self, key: str, read: Callable[[], bytes]) -> Any:
        """A handle through which workers can fetch large bytes (a collection's store file) once
        per ``key`` instead of once per task; None when workers read the driver's files
        directly (this process). ``read`` is called only when the bytes must be shipped."""
        return None

    def close(self) -> None:
        """Release workers (and the Ray connection this executor opened)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        return self.kind


class LocalExecutor(Executor):
    """Every partition in this process, in order, by one ``PartitionWorker``."""

    kind = "local"

    def __init__(self) -> None:
        super().__init__()
        self._worker = PartitionWorker()

    def run_partitions(
        self,
        task: Task,
        partitions: Sequence[Any],
        on_result: OnResult | None = None,
        progress: Progress | None = None,
    ) -> list[Any]:
        stats = RunStats(self.kind, task.describe())
        started = time.perf_counter()
        results = []
        try:
            for index, partition in enumerate(partitions):
                outcome = self._worker.run(task, partition)
                stats.record(outcome, task.size(partition))
                if on_result is not None:
                    on_result(index, outcome.result)
                results.append(outcome.result)
        finally:
            stats.wall_seconds = time.perf_counter() - started
            self._finish(stats)
        return results

    def close(self) -> None:
        self._worker.release()


# -- partitions --------------------------------------------------------------------------------
def balanced_size(rows: int, limit: int, parallelism: int, per_worker: int = 4) -> int:
    """A partition size: at most ``limit``, and small enough that each of ``parallelism``
    workers gets about ``per_worker`` partitions (an even spread, and a lost worker costs
    little to redo)."""
    return max(1, min(limit, math.ceil(rows / (max(1, parallelism) * per_worker))))


def partition_by_query(qids: Sequence[Any], size: int) -> list[list[int]]:
    """Row positions grouped into partitions of whole queries, in first-appearance order.

    Consecutive queries are packed until a partition holds ``size`` rows; a query with more
    rows than ``size`` is a partition of its own (never split: its D_q and answers stay
    together). Every row is in exactly one partition."""
    if size < 1:
        raise ConfigError(f"partition size must be at least 1, got {size}")
    rows_of: dict[str, list[int]] = {}
    for row, qid in enumerate(qids):
        rows_of.setdefault(str(qid), []).append(row)
    return pack_whole(rows_of.values(), size)


def pack_whole(groups: Iterable[list[int]], size: int) -> list[list[int]]:
    """``groups`` packed, in order and never split, into lists of at most ``size`` items: a
    list is closed when the next group would take it over ``size`` (a group larger than
    ``size`` makes a list of its own)."""
    packed: list[list[int]] = []
    current: list[int] = []
    for group in groups:
        if current and len(current) + len(group) > size:
            packed.append(current)
            current = []
        current = current + list(group)
    if current:
        packed.append(current)
    return packed


# -- the active executor -----------------------------------------------------------------------
_ACTIVE: contextvars.ContextVar[Executor | None] = contextvars.ContextVar(
    "nrp_executor", default=None
)


def active_executor() -> Executor | None:
    """The executor made active by ``using_executor`` (None: the plain in-process path)."""
    return _ACTIVE.get()


@contextmanager
def using_executor(executor: Executor | None) -> Iterator[Executor | None]:
    """Make ``executor`` the default of ``score_answers`` and ``evaluate`` inside the block."""
    token = _ACTIVE.set(executor)
    try:
        yield executor
    finally:
        _ACTIVE.reset(token)


def remove_tree(path: str | os.PathLike[str] | None) -> None:
    """Best-effort removal of a worker-local folder."""
    if path:
        shutil.rmtree(path, ignore_errors=True)
