"""``RayExecutor``: partitions run by a pool of Ray actors, results written by the driver.

Each actor is a ``PartitionWorker`` (``nrp.executors.base``): it builds a task's state once (the
collection, the ranker or evaluator with its loaded model) and then computes partition after
partition from it. The driver keeps up to ``max_in_flight`` partitions queued at each actor (so
the next partition's answers travel while the current one computes), and hands every result to
``on_result`` the moment it arrives: that is where the caller stores it, so the driver stays the
single writer of the caches beside the collection.

Choices, and why:

- **Actors, not tasks or Ray Data.** A model (monoT5, ColBERT, BERTScore's encoder, an LLM) takes
  seconds to load and gigabytes of (GPU) memory; an actor loads it once and keeps it for every
  partition it is sent, and with ``num_gpus=1`` Ray gives it a GPU of its own. Stateless Ray
  tasks would load the model per task (or rely on a per-process cache Ray does not promise).
  Ray Data's ``map_batches`` with an actor pool would hold models too, but it batches rows, not
  queries (keeping D_q and its answers together needs a groupby shuffle), streams its output in
  its own order and retries on its own terms; here a partition is exactly one actor call, so
  "store each finished partition, send it again if its worker died" is a few lines the driver
  owns, and nothing else is needed from Ray but actors and ``ray.wait``.
- **Failures: re-sent by the driver, not restarted in place.** Actors are created with
  ``max_restarts=0``. When an actor call fails because its process or node died
  (``RayActorError``, ``WorkerCrashedError``, ``NodeDiedError``, ``ObjectLostError``,
  ``OutOfMemoryError``), the partition goes back to the front of the queue for the live actors
  and a replacement actor is requested (it joins when Ray can place it). A restarted actor with
  ``max_task_retries`` would have Ray replay the call, but a restart waits for resources that a
  lost node took with it (its CPU or GPU), and the call would wait with it; re-sending to the
  actors that are alive finishes the run with what is left. A partition is tried at most
  ``max_attempts`` times (one that kills every worker it reaches, say by running out of memory,
  stops the run with an error instead of killing the cluster). Errors raised by the task's own
  code (bad input, a wrong fingerprint) are not retried: they would fail again.
- **Nothing lost, nothing duplicated.** A partition's result is accepted once (from the call
  that succeeded); the caller stores it keyed by answer (or item) with INSERT OR REPLACE, so even
  a partition computed twice leaves one row per answer.
- **One pool per resource shape.** CPU work (lexical rankers, BLEU, ROUGE) and GPU work (an
  actor with ``num_gpus=1``: a task whose ``device`` is cuda, or auto on a cluster with GPUs) get
  separate pools; an actor keeps one task's state at a time, so a GPU holds one model. By
  default a pool has as many actors as the cluster has CPUs (GPUs) for that shape.
- **Local cluster by default.** Without an address (and ``$RAY_ADDRESS``), ``ray.init`` starts a
  Ray instance on this machine (no dashboard, usage statistics off, its sessions in a temporary
  folder removed by ``close``, token authentication with a token of this run kept in the
  environment, not in ``~/.ray``); with one, it connects (a
  cluster with token authentication needs ``RAY_AUTH_MODE=token`` and its token in
  ``RAY_AUTH_TOKEN`` or ``RAY_AUTH_TOKEN_PATH``, as for any Ray driver).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from nrp import lazy_libs
from nrp.errors import ConfigError, NrpError
from nrp.executors.base import (
    Executor,
    OnResult,
    PartitionOutcome,
    PartitionWorker,
    Progress,
    RunStats,
    Task,
)

log = logging.getLogger(__name__)

#: Ray's authentication settings (environment): left alone when the user set any of them
AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _reread_ray_environment(ray: Any) -> None:
    """Ray reads its settings (``RAY_AUTH_MODE`` ...) and the token once, when imported or first
    used; they may have been set since (a test's cluster, our own local instance). Read them
    again before connecting, as Ray itself does when it enables token authentication."""
    try:
        ray._raylet.Config.initialize("")
        ray._raylet.AuthenticationTokenLoader.instance().reset_cache()
    except AttributeError:  # another Ray version: its own reading stands
        pass


def _check_reachable(address: str) -> None:
    """A host:port address must accept a connection: ``ray.init`` would otherwise retry an
    unreachable cluster for minutes before failing."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", "ray://...": Ray resolves these itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except OSError as err:
        raise NrpError(f"no Ray cluster at {address}: {err}") from None


@dataclass
class _Actor:
    handle: Any
    name: str = ""
    in_flight: int = 0
    alive: bool = True


@dataclass
class _Pool:
    num_cpus: float
    num_gpus: float
    size: int
    ready: list[_Actor] = field(default_factory=list)
    starting: dict[Any, _Actor] = field(default_factory=dict)  # ready() ref -> actor
    replacements: int = 0


@dataclass(frozen=True)
class RaySettings:
    """How a ``RayExecutor`` uses its cluster. ``actors``: actors per pool (default: the
    cluster's CPUs / ``num_cpus``, or GPUs / ``num_gpus`` for GPU work). ``num_cpus``: CPUs per
    actor. ``max_in_flight``: partitions queued per actor. ``max_attempts``: tries per
    partition. ``start_timeout_s``: how long the driver waits for an actor when none is alive.
    ``runtime_env``: Ray's (e.g. ``py_modules`` to ship nrp to nodes that lack it).
    ``ship_collection``: put the collection store's bytes in the object store for nodes that
    cannot read its path. ``log_to_driver``: show the workers' output here."""

    actors: int | None = None
    num_cpus: float = 1.0
    max_in_flight: int = 2
    max_attempts: int = 3
    start_timeout_s: float = 300.0
    runtime_env: dict[str, Any] | None = None
    ship_collection: bool = True
    log_to_driver: bool = False

    def __post_init__(self) -> None:
        if self.actors is not None and self.actors < 1:
            raise ConfigError(f"actors must be at least 1, got {self.actors}")
        if self.max_in_flight < 1 or self.max_attempts < 1:
            raise ConfigError("max_in_flight and max_attempts must be at least 1")
        # the numbers Ray is given are floats, whatever the caller wrote
        object.__setattr__(self, "num_cpus", float(self.num_cpus))
        object.__setattr__(self, "start_timeout_s", float(self.start_timeout_s))


@dataclass
class _Dispatch:
    """The bookkeeping of one ``run_partitions`` call: which partitions wait (``queue``), which
    are at which actor (``in_flight``: call ref -> (actor, partition index)), how often each was
    sent, and the results in partition order."""

    task: Task
    partitions: Sequence[Any]
    stats: RunStats
    queue: deque[int] = field(default_factory=deque)
    attempts: list[int] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    in_flight: dict[Any, tuple[_Actor, int]] = field(default_factory=dict)
    finished: int = 0

    def __post_init__(self) -> None:
        self.queue.extend(range(len(self.partitions)))
        self.attempts = [0] * len(self.partitions)
        self.results = [None] * len(self.partitions)

    @property
    def left(self) -> int:
        return len(self.partitions) - self.finished


def _lost_worker_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors that mean the worker (its process or node) is gone, not the task failed."""
    rex = lazy_libs.module("ray.exceptions")

    return (
        rex.RayActorError,
        rex.WorkerCrashedError,
        rex.NodeDiedError,
        rex.ObjectLostError,
        rex.OutOfMemoryError,
        rex.LocalRayletDiedError,
    )


class RayExecutor(Executor):
    """Partitions on Ray actors; see the module docstring.

    ``address``: a Ray cluster (``host:port``, ``auto``, ``ray://...``), None to start Ray
    here. ``settings`` and ``overrides`` (its fields: ``actors=4``, ``num_cpus=2``, ...): see
    ``RaySettings``."""

    kind = "ray"

    def __init__(
        self, address: str | None = None, settings: RaySettings | None = None, **overrides: Any
    ):
        super().__init__()
        # (dataclasses.replace refuses a keyword that is not a field of RaySettings, naming it;
        # nrp.settings.settings_with is a layer this ground package does not import)
        self.settings = replace(settings if settings is not None else RaySettings(), **overrides)
        self.address = address
        self._pools: dict[tuple[float, float], _Pool] = {}
        self._shipped: dict[str, Any] = {}  # collection fingerprint -> ObjectRef of its store
        self._connected_here = False
        self._ray_module: Any = None
        self._saved_environment: dict[str, str | None] = {}
        self._own_folder: Path | None = None
        self._actor_class: Any = None

    def describe(self) -> str:
        return f"ray {self.address or 'local'}"

    # -- connection --------------------------------------------------------------------------
    def _ray(self) -> Any:
        if self._ray_module is not None:
            return self._ray_module
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray = lazy_libs.ray()

        if not ray.is_initialized():
            if self.address is None and not any(k in os.environ for k in AUTH_VARIABLES):
                # a Ray instance of our own: token authentication (its GCS listens on every
                # interface) with a token of this run, in the environment its processes inherit;
                # Ray's default would write one to ~/.ray/auth_token, which every later
                # `ray start` on this machine would then pick up
                self._saved_environment = {k: os.environ.get(k) for k in AUTH_VARIABLES}
                os.environ["RAY_AUTH_MODE"] = "token"
                os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
            _reread_ray_environment(ray)
            options: dict[str, Any] = {
                "log_to_driver": self.settings.log_to_driver,
                "logging_level": logging.WARNING,
                "runtime_env": self.settings.runtime_env,
            }
            if self.address is None:
                options["include_dashboard"] = False
                # its sessions (sockets, logs) in a folder of its own, removed by close(); short,
                # for the sockets' 107-byte path limit
                self._own_folder = Path(
                    tempfile.mkdtemp(
                        prefix="nrp-ray-", dir="/tmp" if Path("/tmp").is_dir() else None
                    )
                )
                options["_temp_dir"] = str(self._own_folder)
            else:
                _check_reachable(self.address)
                options["address"] = self.address
                host = self.address.rsplit(":", 1)[0]
                if host.startswith("127."):  # a loopback-only cluster: be a node at that address
                    options["_node_ip_address"] = host
            try:
                ray.init(**options)
            except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as err:
                raise NrpError(f"cannot connect to Ray at {self.address}: {err}") from err
            self._connected_here = True
        self._ray_module = ray
        return ray

    def parallelism(self) -> int:
        if self.settings.actors:
            return self.settings.actors
        cpus = self.cluster_resources().get("CPU", 1)
        return max(1, int(cpus // max(self.settings.num_cpus, 1e-9)))

    def start(self, num_gpus: float = 0.0) -> list[str]:
        """Connect and start the pool for ``num_gpus`` per actor now (instead of on the first
        run): a service or a benchmark that wants its workers warm. The ready workers' names."""
        return [actor.name for actor in self._pool(num_gpus).ready]

    def cluster_resources(self) -> dict[str, float]:
        return dict(self._ray().cluster_resources())

    # -- shipping ----------------------------------------------------------------------------
    def share(self, key: str, read: Callable[[], bytes]) -> Any:
        """The bytes in Ray's object store (put once per ``key``), so a node that cannot read
        the driver's disk fetches them from there; None when ``ship_collection`` is off."""
        if self.settings.ship_collection and key not in self._shipped:
            self._shipped[key] = self._ray().put(read())
        return self._shipped.get(key)

    # -- actors ------------------------------------------------------------------------------
    def _pool(self, num_gpus: float) -> _Pool:
        key = (self.settings.num_cpus, num_gpus)
        if key not in self._pools:
            resources = self.cluster_resources()
            if num_gpus > 0:
                size = self.settings.actors or int(resources.get("GPU", 0) // num_gpus)
                if size < 1:
                    raise NrpError("the task needs a GPU and the Ray cluster has none")
            else:
                size = self.settings.actors or max(
                    1, int(resources.get("CPU", 1) // max(self.settings.num_cpus, 1e-9))
                )
            pool = _Pool(self.settings.num_cpus, num_gpus, size)
            for _ in range(size):
                self._start_actor(pool)
            self._pools[key] = pool
            # the actors start together: wait (up to a minute) for all of them, so the first one
            # up does not take every partition of a short run; late ones join while it runs
            self._collect_started(pool, min(self.settings.start_timeout_s, 60.0), wait_for_all=True)
        return self._pools[key]

    def _collect_started(self, pool: _Pool, timeout: float, wait_for_all: bool = False) -> None:
        """Move actors whose ``ready()`` returned into the pool (failed starts are dropped)."""
        if not pool.starting:
            return
        ray = self._ray()
        refs = list(pool.starting)
        done, _ = ray.wait(refs, num_returns=len(refs) if wait_for_all else 1, timeout=timeout)
        for ref in done:
            actor = pool.starting.pop(ref)
            try:
                actor.name = ray.get(ref)
            except Exception as err:  # could not start (runtime env, resources gone)
                log.warning("a Ray worker failed to start: %s", err)
                continue
            pool.ready.append(actor)

    def _start_actor(self, pool: _Pool) -> None:
        ray = self._ray()
        if self._actor_class is None:
            self._actor_class = ray.remote(PartitionWorker)
        remote = self._actor_class.options(
            num_cpus=pool.num_cpus,
            num_gpus=pool.num_gpus,
            max_restarts=0,
            max_concurrency=1,
            scheduling_strategy="SPREAD",
        )
        handle = remote.remote()
        pool.starting[handle.ready.remote()] = _Actor(handle)

    def _retire(self, pool: _Pool, actor: _Actor, stats: RunStats) -> None:
        """An actor was lost: out of the pool, killed for good, a replacement requested."""
        if not actor.alive:
            return
        actor.alive = False
        stats.workers_lost += 1
        if actor in pool.ready:
            pool.ready.remove(actor)
        with contextlib.suppress(Exception):  # already gone with its node
            self._ray().kill(actor.handle, no_restart=True)
        if pool.replacements < pool.size * self.settings.max_attempts:
            pool.replacements += 1
            self._start_actor(pool)

    # -- running -----------------------------------------------------------------------------
    def run_partitions(
        self,
        task: Task,
        partitions: Sequence[Any],
        on_result: OnResult | None = None,
        progress: Progress | None = None,
    ) -> list[Any]:
        ray = self._ray()
        run = _Dispatch(task, partitions, RunStats(self.kind, task.describe()))
        started = time.perf_counter()
        try:
            if not partitions:
                return []
            has_gpus = self.cluster_resources().get("GPU", 0) > 0
            pool = self._pool(task.num_gpus(has_gpus))
            task_ref = ray.put(task)  # once per run, not once per call
            while run.left:
                self._send(pool, run, task_ref)
                ref = self._next_done(pool, run)
                if ref in pool.starting:
                    self._collect_started(pool, 0)
                    continue
                index, result = self._receive(pool, run, ref, progress)
                if index is not None and on_result is not None:
                    on_result(index, result)
        finally:
            # an interrupted run (an error, Ctrl-C, a failing on_result): calls still queued at
            # the actors are cancelled; what they were computing is simply not stored
            for ref, (actor, _) in run.in_flight.items():
                actor.in_flight -= 1
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
            run.stats.wall_seconds = time.perf_counter() - started
            self._finish(run.stats)
        return run.results

    def _send(self, pool: _Pool, run: _Dispatch, task_ref: Any) -> None:
        """Queue waiting partitions at the ready actors, up to ``max_in_flight`` each."""
        for actor in list(pool.ready):
            while run.queue and actor.alive and actor.in_flight < self.settings.max_in_flight:
                index = run.queue.popleft()
                run.attempts[index] += 1
                ref = actor.handle.run.remote(task_ref, run.partitions[index])
                run.in_flight[ref] = (actor, index)
                actor.in_flight += 1

    def _next_done(self, pool: _Pool, run: _Dispatch) -> Any:
        """The next call (or actor start) that finished; an error when nothing is left to wait
        for, or no actor started in time while none is working."""
        waiting = list(run.in_flight) + list(pool.starting)
        description = run.task.describe()
        if not waiting:
            raise NrpError(
                f"{description}: no Ray worker is left and none can be started; "
                f"{run.left} partition(s) not computed"
            )
        timeout = None if run.in_flight else self.settings.start_timeout_s
        done, _ = self._ray().wait(waiting, num_returns=1, timeout=timeout)
        if not done:
            raise NrpError(
                f"{description}: no Ray worker started within "
                f"{self.settings.start_timeout_s:g} s (does the cluster have "
                f"{pool.num_cpus:g} CPU and {pool.num_gpus:g} GPU free for one?); "
                f"{run.left} partition(s) not computed"
            )
        return done[0]

    def _receive(
        self, pool: _Pool, run: _Dispatch, ref: Any, progress: Progress | None
    ) -> tuple[int | None, Any]:
        """The finished call ``ref``: (partition index, result), or (None, None) when its worker
        was lost and the partition went back to the queue."""
        rex = lazy_libs.module("ray.exceptions")

        actor, index = run.in_flight.pop(ref)
        actor.in_flight -= 1
        task = run.task
        try:
            outcome: PartitionOutcome = self._ray().get(ref)
        except _lost_worker_errors() as err:
            self._retire(pool, actor, run.stats)
            if run.attempts[index] >= self.settings.max_attempts:
                raise NrpError(
                    f"{task.describe()}: partition {index + 1} "
                    f"({task.size(run.partitions[index])} items) was lost with its worker "
                    f"{run.attempts[index]} times; last: {type(err).__name__}: {err}"
                ) from err
            run.stats.resubmitted += 1
            run.queue.appendleft(index)
            if progress is not None:
                progress(
                    f"{task.describe()}: worker {actor.name} lost "
                    f"({type(err).__name__}); partition {index + 1} sent again"
                )
            return None, None
        except rex.RayTaskError as err:
            cause = getattr(err, "cause", None)
            if isinstance(cause, NrpError):  # the task's own error: one clear line
                raise cause from err
            raise RuntimeError(
                f"{task.describe()}: partition {index + 1} failed on {actor.name}: {err}"
            ) from err
        run.stats.record(outcome, task.size(run.partitions[index]))
        run.results[index] = outcome.result
        run.finished += 1
        return index, outcome.result

    def close(self) -> None:
        if self._ray_module is None:
            return
        ray = self._ray_module
        for pool in self._pools.values():
            for actor in [*pool.ready, *pool.starting.values()]:
                with contextlib.suppress(Exception):
                    ray.kill(actor.handle, no_restart=True)
        self._pools.clear()
        self._shipped.clear()
        self._actor_class = None
        if self._connected_here and ray.is_initialized():
            ray.shutdown()
        self._connected_here = False
        self._ray_module = None
        for key, value in self._saved_environment.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_environment = {}
        if self._own_folder is not None:
            shutil.rmtree(self._own_folder, ignore_errors=True)
            self._own_folder = None
