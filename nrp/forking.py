"""Work on the second core: a function run in a forked child beside the caller's own work.

``fork_call(work, what)`` starts ``work()`` in a child made by ``os.fork`` (the caller's memory
shared copy-on-write: models, answers and indexes are not copied or pickled) and returns a
``Forked``: ``result()`` waits for what ``work`` returned (sent back pickled through a pipe)
and raises what it raised; ``cancel()`` ends a child whose result is not wanted (the caller
failed). The child leaves with ``os._exit``: none of the caller's exit handlers run twice.
``nrp score`` flags answers this way while it positions them; ``nrp probe`` finds the named
entities of half the judged documents while it does the other half. Only where ``os.fork``
exists (``CAN_FORK``); callers do the work in-process elsewhere. Ground floor: imports nothing
of nrp but ``nrp.errors``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Callable
from typing import Generic, TypeVar

from nrp.errors import NrpError

T = TypeVar("T")

CAN_FORK = hasattr(os, "fork")


class Forked(Generic[T]):
    """A forked child computing a result (``fork_call``)."""

    def __init__(self, pid: int, read_end: int, what: str):
        self.pid, self.read_end, self.what = pid, read_end, what
        self.closed = False

    def result(self) -> T:
        """What the child's function returned; what it raised is raised here."""
        self.closed = True  # closed by fdopen's block, so cancel() never closes it again
        with os.fdopen(self.read_end, "rb") as source:
            data = source.read()
        _, status = os.waitpid(self.pid, 0)
        if not data:
            raise NrpError(f"{self.what} failed (worker exit status {status})")
        kind, value = pickle.loads(data)
        if kind == "error":
            raise value
        return value

    def cancel(self) -> None:
        """End the child (its result is not wanted)."""
        try:
            os.kill(self.pid, signal.SIGTERM)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        if not self.closed:  # a second close would close whatever file has its number now
            self.closed = True
            os.close(self.read_end)


def fork_call(work: Callable[[], T], what: str) -> Forked[T]:
    """``work()`` started in a forked child (module docstring); ``what`` names the work in the
    error raised when the child dies without a result."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    # whatever the caller made of SIGTERM (the CLI turns it into an exception, a library may
    # install its own), ``cancel`` ends the child at once: the child takes the default action,
    # and a SIGTERM sent before it could (a cancel right after the fork) waits until it has
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without running the caller's exit handlers
        with contextlib.suppress(ValueError):  # forked from another thread: handlers stay
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(read_end)
        try:
            try:
                payload = pickle.dumps(("ok", work()))
            except Exception as error:  # raised where the caller waits
                try:
                    payload = pickle.dumps(("error", error))
                except Exception:
                    payload = pickle.dumps(("error", NrpError(str(error))))
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
        finally:
            os._exit(0)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    os.close(write_end)
    return Forked(pid, read_end, what)
