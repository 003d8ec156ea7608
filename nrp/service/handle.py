"""The server's side of the worker process: ``WorkerHandle`` starts it, sends it score requests
and wake-ups, and routes its replies to the requests waiting for them.

A reader thread takes the worker's messages; a score request waits on a future. If the worker
dies, waiting requests fail (503) and a new worker is started (which re-queues the units the
dead one held).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from nrp.service.config import ServiceConfig
from nrp.service.worker import worker_main

log = logging.getLogger("nrp.service.worker")


class WorkerHandle:
    """Starts the worker process, sends it requests, and routes its replies to waiters.

    A reader thread takes the worker's messages; a score request waits on a future. If the
    worker dies, waiting requests fail (503) and a new worker is started (which re-queues the
    units the dead one held)."""

    def __init__(self, config: ServiceConfig, on_metrics: Callable[[dict], None] | None = None):
        import multiprocessing

        self.config = config
        self.context = multiprocessing.get_context("spawn")
        self.on_metrics = on_metrics or (lambda _: None)
        self.process: Any = None
        self.inbox: Any = None
        self.outbox: Any = None
        self.ready = threading.Event()
        self.info: dict[str, Any] = {}
        self.waiters: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.lock = threading.Lock()
        self.closing = False
        self.restarts = 0
        self.reader: threading.Thread | None = None

    def start(self) -> None:
        self.ready.clear()
        self.inbox = self.context.Queue()
        self.outbox = self.context.Queue()
        self.process = self.context.Process(
            target=worker_main,
            args=(self.config.to_dict(), self.inbox, self.outbox, os.getpid()),
            name="nrp-worker",
            daemon=False,
        )
        self.process.start()
        log.info("worker started", extra={"fields": {"pid": self.process.pid}})
        self.reader = threading.Thread(
            target=self._read, args=(self.process, self.outbox), daemon=True
        )
        self.reader.start()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def _read(self, process: Any, outbox: Any) -> None:
        while True:
            try:
                kind, payload = outbox.get(timeout=0.5)
            except queue.Empty:
                if process.is_alive():
                    continue
                self._died(process)
                return
            except (EOFError, OSError):
                self._died(process)
                return
            if kind == "result":
                with self.lock:
                    waiter = self.waiters.pop(payload["id"], None)
                if waiter is not None:
                    waiter(payload)
            elif kind == "ready":
                self.info = payload
                self.ready.set()
            elif kind == "metrics":
                self.on_metrics(payload)
            elif kind == "stopped":
                return

    def _died(self, process: Any) -> None:
        self.ready.clear()
        with self.lock:
            waiters, self.waiters = self.waiters, {}
        for waiter in waiters.values():
            waiter({"ok": False, "status": 503, "error": "the worker stopped; try again"})
        if self.closing or process is not self.process:
            return
        log.error("worker died; starting a new one", extra={"fields": {"exit": process.exitcode}})
        self.restarts += 1
        time.sleep(min(5.0, 0.5 * self.restarts))
        if not self.closing:
            self.start()

    def submit(self, payload: dict[str, Any], reply: Callable[[dict[str, Any]], None]) -> None:
        """Send a score request; ``reply`` is called (from the reader thread) with the result."""
        with self.lock:
            self.waiters[payload["id"]] = reply
        self.inbox.put(("score", payload))

    def forget(self, request_id: str) -> None:
        with self.lock:
            self.waiters.pop(request_id, None)

    def wake(self) -> None:
        with contextlib.suppress(Exception):
            self.inbox.put(("wake", {}))

    def stop(self, timeout: float) -> None:
        """Ask the worker to finish its batch and exit; terminate it after ``timeout``."""
        self.closing = True
        if self.process is None:
            return
        with contextlib.suppress(Exception):
            self.inbox.put(("stop", {}))
        self.process.join(timeout)
        if self.process.is_alive():
            log.warning("worker did not stop in time; terminating it")
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        for q in (self.inbox, self.outbox):
            with contextlib.suppress(Exception):
                q.close()
                q.cancel_join_thread()
