"""A real two-node Ray cluster on this machine for the tests: ``ray start --head`` plus a second
``ray start --address`` (two raylets, one CPU each), loopback addresses only, no dashboard, usage
statistics off, everything under one temporary folder.

Loopback: Ray replaces 127.0.0.1 (and "localhost") with the machine's routable address so other
machines could join, but keeps any other 127.x address, so the nodes are started at 127.0.0.2.
The processes are found through that folder (every daemon names it on its command line) and
their descendants (the workers a raylet forks), read from /proc, and stopped by PID: ``ray
stop`` would stop every Ray process of the user, including ones the tests did not start. Node 2
is the raylet that appeared with the second ``ray start``; ``kill_worker_node`` SIGKILLs it and
every worker it forked (the actors on it). Node failures are detected within a few seconds
because the head's health check runs every 500 ms (defaults: 3 s, 5 failures). The cluster uses
Ray's token authentication with a token of its own, passed in the environment (``auth_env``: the
driver sets it too).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

RAY = str(Path(sys.executable).parent / "ray")
NODE_IP = "127.0.0.2"

ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_health_check_initial_delay_ms": "0",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((NODE_IP, 0))
        return probe.getsockname()[1]


class LocalRayCluster:
    def __init__(self, folder: Path, object_store_bytes: int = 150_000_000):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"{NODE_IP}:{self.port}"
        # token authentication with a token of this cluster's own (Ray's default for a new
        # cluster writes one to ~/.ray/auth_token, which later `ray start` calls pick up): the
        # nodes and the driver get it from the environment, nothing is written to the home
        self.auth_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        self.env = {**os.environ, **ENV, **self.auth_env}
        self.env.pop("RAY_AUTH_TOKEN_PATH", None)
        self.common = [
            "--num-cpus=1",
            "--num-gpus=0",
            f"--object-store-memory={object_store_bytes}",
            f"--node-ip-address={NODE_IP}",
            "--disable-usage-stats",
        ]
        self.worker_raylet: int | None = None

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [RAY, "start", *args, *self.common],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode != 0:
            raise RuntimeError(f"ray start {' '.join(args)} failed:\n{done.stderr[-3000:]}")

    def _raylets(self) -> set[int]:
        table = process_table()
        return {pid for pid in self.processes() if Path(table[pid][1][0]).name == "raylet"}

    def start(self) -> LocalRayCluster:
        self._run(
            "--head",
            f"--port={self.port}",
            "--include-dashboard=false",
            f"--temp-dir={self.folder}",
        )
        self.start_worker_node()
        return self

    def start_worker_node(self) -> int:
        """Start node 2 (again, after ``kill_worker_node``); returns its raylet's PID."""
        before = self._raylets()
        self._run(f"--address={self.address}")
        worker = self._raylets() - before
        if len(worker) != 1:
            raise RuntimeError(f"expected one new raylet for node 2, found {sorted(worker)}")
        self.worker_raylet = worker.pop()
        return self.worker_raylet

    def processes(self) -> set[int]:
        """Every process of this cluster: those naming its folder, and their descendants."""
        table = process_table()
        roots = {
            pid
            for pid, (_, cmdline) in table.items()
            if any(str(self.folder) in part for part in cmdline)
        }
        return roots | {d for pid in roots for d in descendants(pid, table)}

    def kill_worker_node(self) -> list[int]:
        """SIGKILL node 2: its raylet and every process it forked (the actors on it)."""
        assert self.worker_raylet is not None
        victims = [self.worker_raylet, *descendants(self.worker_raylet, process_table())]
        signal_all(victims, signal.SIGKILL)
        wait_gone(victims, 10)
        return victims

    def stop(self) -> None:
        processes = sorted(self.processes())
        signal_all(processes, signal.SIGTERM)
        alive = wait_gone(processes, 5)
        signal_all(alive, signal.SIGKILL)
        wait_gone(alive, 5)


# -- processes, from /proc (Linux, as Ray's multi-node mode) -----------------------------------
def process_table() -> dict[int, tuple[int, list[str]]]:
    """pid -> (parent pid, command line) of every process with a readable command line."""
    table: dict[int, tuple[int, list[str]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        parts = [c.decode(errors="replace") for c in cmdline if c]
        if parts:
            # stat: "pid (comm) state ppid ...": comm may hold spaces, so split after ')'
            table[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), parts)
    return table


def descendants(pid: int, table: dict[int, tuple[int, list[str]]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def signal_all(pids, sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited (its parent has not reaped it yet)


def wait_gone(pids, timeout: float) -> list[int]:
    """Wait until the processes have exited; those still running after ``timeout``."""
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if running(p)]
    return alive
