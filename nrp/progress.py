"""Progress of long steps as the CLI shows it: the lines the library sends, drawn as bars with
their rate and time left on a terminal, printed as they are everywhere else.

Why here: the library reports progress through one kind of callback, a function taking a line
(``Progress``), so a script, a log and the service can each do what they like with it. Steps
that count say so in one form, ``WHAT: [word] DONE/TOTAL ...`` (``bm25: 40/64 positioned``,
``bleu: 10/64 evaluated``, ``rankers: 2/3 validated``, ``model: epoch 1/3: loss ...``).
``ProgressLines`` prints every line as it is, and while someone watches (the stream is a
terminal) keeps a tqdm bar per WHAT below them with its rate and time left; when the output goes
to a file or a pipe there are no bars, so logs, CI output and tests see the same bytes as
before.

- ``ProgressLines(stream, bars=None)``: the callback; ``bars`` None: bars when ``stream`` is a
  terminal. Each line is printed (above the bars); a counted line also moves its bar, which is
  closed when it reaches its total. ``close()`` ends the bars still open (an interrupted step).
- ``counted(line)``: (WHAT, DONE, TOTAL) of a counted line, or None.
- ``reporting(progress)`` and ``Ticker``: a step deep inside a reported one (a model embedding
  thousands of texts in batches) says how far it is every few seconds, so a long step is never
  silent, without every function between them taking a callback.

A bar's rate and time left count from the line before its first count (``ranking 120 documents
with bm25`` before ``rankers: 1/3 validated``), when its work began, not from the first count.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TextIO

Progress = Callable[[str], None]

#: where the steps inside a reported step send their lines (``reporting``): a model's batches
#: deep below the caller that shows progress, without a callback passed down to them
_SINK: ContextVar[Progress | None] = ContextVar("nrp_progress_sink", default=None)
#: the least seconds between two lines of one ``Ticker`` (its last line always comes)
TICK_SECONDS = 2.0


@contextlib.contextmanager
def reporting(progress: Progress | None) -> Iterator[None]:
    """While open, ``Ticker``s (a model's batches: ``nrp.models.device.run_length_sorted``) send
    their lines to ``progress`` too; None: as before."""
    token = _SINK.set(progress) if progress is not None else None
    try:
        yield
    finally:
        if token is not None:
            _SINK.reset(token)


class Ticker:
    """Counted lines ``WHAT: DONE/TOTAL UNIT`` of a step inside a reported one, sent to the
    ``reporting`` sink at most every ``TICK_SECONDS`` and when the step is done; nothing without
    a sink (a bare library call) or under ``min_total`` units (a step too short to watch)."""

    def __init__(self, what: str, total: int, unit: str, min_total: int = 1):
        self.sink = _SINK.get() if what and total >= min_total else None
        self.what, self.total, self.unit = what, total, unit
        self.done = 0
        self._last = time.monotonic()

    def add(self, count: int) -> None:
        if self.sink is None:
            return
        self.done += count
        now = time.monotonic()
        if self.done >= self.total or now - self._last >= TICK_SECONDS:
            self._last = now
            self.sink(f"{self.what}: {self.done}/{self.total} {self.unit}")


_COUNTED = re.compile(r"^(?P<what>.+?): (?:[a-z]+ )?(?P<done>\d+)/(?P<total>\d+)\b")


def counted(line: str) -> tuple[str, int, int] | None:
    """(WHAT, DONE, TOTAL) of a ``WHAT: [word] DONE/TOTAL ...`` line, None for any other."""
    match = _COUNTED.match(line)
    if match is None or int(match["total"]) < 1:
        return None
    return match["what"], int(match["done"]), int(match["total"])


class ProgressLines:
    """A ``Progress`` callback writing to ``stream``: bars on a terminal, lines elsewhere."""

    def __init__(self, stream: TextIO | None = None, bars: bool | None = None):
        self._stream = stream
        self.bars = _is_terminal(self.stream) if bars is None else bars
        self._open: dict[str, Any] = {}
        self._since = time.time()  # when the last line came: where a new bar's work began

    def __call__(self, line: str) -> None:
        step = counted(line) if self.bars else None
        since, self._since = self._since, time.time()
        self._write(line)
        if step is None:
            return
        what, done, total = step
        bar = self._open.get(what)
        if bar is None or bar.total != total:
            if bar is not None:
                bar.close()
            bar = self._open[what] = self._bar(what, total, since)
        bar.update(min(done, total) - bar.n)
        if done >= total:
            bar.close()
            del self._open[what]

    @property
    def stream(self) -> TextIO:
        """The stream given, or else ``sys.stderr`` as it is when a line is written (not as it
        was when the callback was made: a caller that swaps ``sys.stderr``, as a test harness
        capturing output does, gets the lines where it expects them)."""
        return sys.stderr if self._stream is None else self._stream

    def close(self) -> None:
        for bar in self._open.values():
            bar.close()
        self._open.clear()

    def _bar(self, what: str, total: int, since: float) -> Any:
        from tqdm import tqdm  # first use: keeps the start of the CLI quick

        # smoothing 0: the mean rate since the work began, not the burst of the last update
        bar = tqdm(total=total, desc=what, file=self.stream, leave=False, smoothing=0)
        bar.start_t = bar.last_print_t = since
        return bar

    def _write(self, line: str) -> None:
        if self._open:  # above the bars, which are drawn again below it
            from tqdm import tqdm

            tqdm.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
