"""``nrp.forking``: a function run in a forked child gives back what it returns, raises what it
raises, and a child that dies without a result is a one-line error naming the work."""

from __future__ import annotations

import os

import pytest

from nrp.errors import NrpError
from nrp.forking import fork_call

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def test_the_result_comes_back_from_the_child():
    parent = os.getpid()
    forked = fork_call(lambda: (os.getpid() != parent, [1, 2.5, "three"]), "adding")
    assert forked.result() == (True, [1, 2.5, "three"])


def test_what_the_child_raises_is_raised_here():
    def fails():
        raise ValueError("bad input at line 3")

    with pytest.raises(ValueError, match="bad input at line 3"):
        fork_call(fails, "checking").result()


def test_a_child_that_dies_without_a_result_is_named():
    with pytest.raises(NrpError, match=r"^finding entities failed \(worker exit status"):
        fork_call(lambda: os._exit(3), "finding entities").result()


def test_cancel_ends_the_child_whatever_the_caller_made_of_sigterm():
    import signal
    import time

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)  # a handler that stays
    try:
        forked = fork_call(lambda: time.sleep(60), "sleeping")
        started = time.monotonic()
        forked.cancel()
        assert time.monotonic() - started < 10  # the child did not inherit the handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_cancel_ends_the_child():
    import time

    forked = fork_call(lambda: time.sleep(60), "sleeping")
    started = time.monotonic()
    forked.cancel()
    forked.cancel()  # twice: nothing more happens
    assert time.monotonic() - started < 10
    with pytest.raises(ProcessLookupError):
        os.kill(forked.pid, 0)
