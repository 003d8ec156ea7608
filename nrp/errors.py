"""Errors that reach the user as one line: where (file, line) and what is wrong."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: the most characters of one value an error message quotes: a 5 MB cell or label stays out of
#: the message (the value is cut, and the message says how long it was)
QUOTE_LIMIT = 200
#: the longest problem text an ``InputError`` keeps, whatever it quotes (several values, a list)
PROBLEM_LIMIT = 1000
#: the longest error line the CLI prints (a file name and a problem; any error, an OSError too)
MESSAGE_LIMIT = 2 * PROBLEM_LIMIT


def clip(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was when cut."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for an error message, quoting at most ``limit`` characters of it."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    return clip(repr(value), limit)


def one_line(text: object, limit: int = PROBLEM_LIMIT) -> str:
    """``text`` on one line (its whitespace runs made one space) and at most ``limit``
    characters: what an error message may show, whatever it was built from."""
    return clip(" ".join(str(text).split()), limit)


class NrpError(Exception):
    """Base class of every error nrp reports to a user (the CLI prints it and exits 2)."""


class NrpWarning(UserWarning):
    """A result that holds less than was asked of it (validation chose no ranker for a
    dimension), said in Python where nobody prints the result; the same text is in the result's
    ``warnings`` and its printed tables, which the CLI prints instead of this warning."""


class InputError(NrpError):
    """Bad input: names the file, the line where known, and the problem, on one line."""

    def __init__(self, path: str | Path | None, line: int | None, problem: str):
        self.path = None if path is None else str(path)
        self.line = line
        # always one line, and never a whole file's worth of quoted data
        self.problem = one_line(problem)
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.problem}"


class ColumnsError(InputError, ValueError):
    """A table without columns its reader needs (``nrp.tables.require_columns``, the one check
    of a table's columns): names the table (its file, or what it is), the header line where
    known, every missing column and the columns found. A ``ValueError`` too, as a Python caller
    of a PyTerrier transformer expects of a frame without its columns."""

    def __init__(
        self,
        source: str | Path | None,
        line: int | None,
        missing: Sequence[object],
        found: Sequence[object],
        hint: str = "",
    ):
        self.missing, self.found = tuple(missing), tuple(found)
        listed = ", ".join(quote(str(column)) for column in self.missing)
        present = clip(", ".join(map(str, self.found))) or "none"
        problem = f"missing column(s) {listed} (found: {present})" + (f"; {hint}" if hint else "")
        super().__init__(source, line, problem)


class ConfigError(NrpError):
    """A manifest, spec string or option that is not valid (file and key named in the message)."""


class ModelError(ConfigError):
    """A model that cannot be used: not a local folder or packaged model (hub access off), or a
    folder its loader refuses. ``spec`` and ``param`` name the spec and parameter, ``value`` the
    model as given: the service answers with them alone (``not a model this server offers``),
    never with the loader's message, which may quote the files it read."""

    def __init__(self, message: str, *, spec: str, param: str, value: str, kind: str = "ranker"):
        super().__init__(message)
        self.spec, self.param, self.value, self.kind = spec, param, value, kind

    @property
    def what(self) -> str:
        """``ranker 'cross' parameter model``: the words the service's request checks use."""
        return f"{self.kind} {self.spec!r} parameter {self.param}"
