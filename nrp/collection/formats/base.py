"""What every input format declares, and the report readers write their counts and warnings to.

A format is declared with ``register(Format(...))`` in its module (the built-in modules are
listed in ``__init__``; another package adds its own through the ``nrp.formats`` entry-point
group, see docs/extending.md). Like ir_measures' measures, a format describes itself: its name,
what it provides, and each option with type, default and description, so ``nrp formats`` can
list them and a manifest's options are checked in one place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrp.collection.records import Record


@dataclass(frozen=True)
class Option:
    type: type | tuple[type, ...]
    description: str
    default: Any = None
    required: bool = False
    #: the value names a file relative to the source's folder (kept under the data root)
    path: bool = False


@dataclass
class ReadReport:
    """Counts and warnings a reader hands back: data that is still usable but worth reporting
    (documents dropped as too short, records skipped by a declared rule). Never for errors."""

    counts: Counter = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    #: counts that a warning tells in detail (``counted_warning``): shown once, as the warning
    warned: set[str] = field(default_factory=set)

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] += n

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def counted_warning(self, what: str, n: int, message: str) -> None:
        """Count ``n`` of ``what`` and warn with ``message``, which says the same in detail:
        ``nrp info`` shows the warning, not the count beside it."""
        self.count(what, n)
        self.warned.add(what)
        self.warn(message)


Reader = Callable[[Path, Mapping[str, Any], ReadReport], Iterator[Record]]


@dataclass(frozen=True)
class Format:
    name: str
    description: str
    provides: tuple[str, ...]  # subset of: topics, documents, judgments, references
    read: Reader
    options: Mapping[str, Option] = field(default_factory=dict)
    path_is_folder: bool = False
    #: for an input that is not a file under the data root (an ir_datasets id): what names it,
    #: from the source's options (``irds:vaswani``). Such a source has no ``path`` in the
    #: manifest, and ingest fingerprints the records it reads instead of file bytes.
    locator: Callable[[Mapping[str, Any]], str] | None = None

    @property
    def reads_files(self) -> bool:
        return self.locator is None
