"""The server's side of the worker process: ``WorkerHandle`` starts it, sends it score requests
and wake-ups, and routes its replies to the requests waiting for them.

Server and worker talk over one socket pair, in ``multiprocessing.connection``'s framing (a
length, then a pickle): the worker reads and writes its end with a ``Connection``; the server's
end is a transport of the event loop, so a score request goes out from the coroutine that
received it and its reply sets that coroutine's future, both on the loop's own thread. No
thread stands between them (``multiprocessing.Queue`` adds a feeder thread on each sending
side and the server a reader thread; each handover waits for the GIL, up to the interpreter's
switch interval when the other thread is busy). Writes are buffered by the transport, so the
loop never blocks on a worker that is busy with a job batch.

If the worker dies (its end of the socket closes, or a check every ``CHECK_S`` finds the
process gone), waiting requests fail (503) and a new worker is started (which re-queues the
units the dead one held).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import socket
import struct
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from nrp.service.config import ServiceConfig
from nrp.service.worker import worker_main

log = logging.getLogger("nrp.service.worker")
CHECK_S = 0.5  # how often the loop checks that the worker process is alive
_SHORT = struct.Struct("!i")  # ``Connection``'s frame header; -1 then a ``!Q`` for 2 GiB and over
_LONG = struct.Struct("!Q")
STOPPED = {"ok": False, "status": 503, "error": "the worker stopped; try again"}


def frame(message: Any) -> bytes:
    """``message`` pickled and framed as ``Connection.send`` frames it."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > 0x7FFFFFFF:
        return _SHORT.pack(-1) + _LONG.pack(len(data)) + data
    return _SHORT.pack(len(data)) + data


class _Frames(asyncio.Protocol):
    """The server's end of the socket: whole frames from the worker to ``on_message``, the end
    of the connection to ``on_lost``."""

    def __init__(self, on_message: Callable[[Any], None], on_lost: Callable[[], None]):
        self.on_message = on_message
        self.on_lost = on_lost
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= _SHORT.size:
            (size,) = _SHORT.unpack_from(self.buffer)
            start = _SHORT.size
            if size == -1:
                if len(self.buffer) < start + _LONG.size:
                    return
                (size,) = _LONG.unpack_from(self.buffer, start)
                start += _LONG.size
            if len(self.buffer) < start + size:
                return
            message = pickle.loads(self.buffer[start : start + size])
            del self.buffer[: start + size]
            self.on_message(message)

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_lost()


class WorkerHandle:
    """Starts the worker process, sends it requests, and routes its replies to waiters.

    Everything that touches the socket runs on ``loop`` (the server's event loop): ``submit``
    is called there and replies are delivered there; ``wake`` and ``stop`` may be called from
    any thread. If the worker dies, waiting requests fail (503) and a new worker is started
    (which re-queues the units the dead one held)."""

    def __init__(
        self,
        config: ServiceConfig,
        loop: asyncio.AbstractEventLoop,
        on_metrics: Callable[[dict], None] | None = None,
    ):
        import multiprocessing

        self.config = config
        self.loop = loop
        self.context = multiprocessing.get_context("spawn")
        self.on_metrics = on_metrics or (lambda _: None)
        self.process: Any = None
        self.transport: asyncio.Transport | None = None
        self.ready = threading.Event()
        self.info: dict[str, Any] = {}
        self.waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.closing = False
        self.restarts = 0
        self.check: asyncio.TimerHandle | None = None
        self.lost: Any = None  # the last process found dead (it is reported once)

    def start(self) -> None:
        """Start a worker process and connect its socket to the loop (from any thread but the
        loop's: it waits for the loop to take the socket)."""
        self.ready.clear()
        ours, theirs = socket.socketpair()
        child = Connection(theirs.detach())
        self.process = self.context.Process(
            target=worker_main,
            args=(self.config.to_dict(), child, os.getpid()),
            name="nrp-worker",
            daemon=False,
        )
        try:
            self.process.start()
        finally:
            child.close()  # the worker has its own copy: its exit closes the socket
        log.info("worker started", extra={"fields": {"pid": self.process.pid}})
        connect = asyncio.run_coroutine_threadsafe(self._connect(self.process, ours), self.loop)
        connect.result()

    async def _connect(self, process: Any, sock: socket.socket) -> None:
        def lost() -> None:
            self._died(process)

        transport, _ = await self.loop.connect_accepted_socket(
            lambda: _Frames(lambda message: self._message(process, message), lost), sock
        )
        self.transport = transport  # type: ignore[assignment]
        self._schedule_check(process)

    def _schedule_check(self, process: Any) -> None:
        def check() -> None:
            if process is not self.process:
                return
            if process.is_alive():
                self._schedule_check(process)
            else:
                self._died(process)

        self.check = self.loop.call_later(CHECK_S, check)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def _message(self, process: Any, message: tuple[str, dict[str, Any]]) -> None:
        kind, payload = message
        if kind == "result":
            waiter = self.waiters.pop(payload["id"], None)
            if waiter is not None and not waiter.done():
                waiter.set_result(payload)
        elif kind == "ready":
            self.info = payload
            self.ready.set()
        elif kind == "metrics":
            self.on_metrics(payload)

    def _died(self, process: Any) -> None:
        """The worker ``process`` is gone (on the loop): fail its waiters, start another."""
        if process is not self.process or process is self.lost:
            return
        self.lost = process
        self.ready.clear()
        if self.check is not None:
            self.check.cancel()
        if self.transport is not None:
            self.transport.close()
        waiters, self.waiters = self.waiters, {}
        for waiter in waiters.values():
            if not waiter.done():
                waiter.set_result(STOPPED)
        if self.closing:
            return
        with contextlib.suppress(Exception):
            process.join(0.1)
        log.error("worker died; starting a new one", extra={"fields": {"exit": process.exitcode}})
        self.restarts += 1
        self.loop.run_in_executor(None, self._restart, min(5.0, 0.5 * self.restarts))

    def _restart(self, delay: float) -> None:
        time.sleep(delay)
        if not self.closing:
            self.start()

    def _send(self, message: tuple[str, dict[str, Any]]) -> None:
        """Write a message to the worker (on the loop; from another thread, through it)."""
        data = frame(message)
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._write(data)
        else:
            self.loop.call_soon_threadsafe(self._write, data)

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def submit(self, payload: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        """Send a score request (on the loop); the future gets the worker's reply."""
        future: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self.waiters[payload["id"]] = future
        self._send(("score", payload))
        return future

    def forget(self, request_id: str) -> None:
        self.waiters.pop(request_id, None)

    def wake(self) -> None:
        with contextlib.suppress(Exception):
            self._send(("wake", {}))

    def drain(self, seconds: float) -> None:
        """Shutting down: the worker serves the score requests it holds for ``seconds`` more,
        then answers those left ``503`` (from any thread)."""
        with contextlib.suppress(Exception):
            self._send(("drain", {"seconds": seconds}))

    def stop(self, timeout: float) -> None:
        """Ask the worker to finish its batch and exit; terminate it after ``timeout`` (from
        any thread but the loop's)."""
        self.closing = True
        if self.process is None:
            return
        with contextlib.suppress(Exception):
            self._send(("stop", {}))
        self.process.join(timeout)
        if self.process.is_alive():
            log.warning("worker did not stop in time; terminating it")
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        transport = self.transport
        if transport is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self.loop.call_soon_threadsafe(transport.close)
