"""What may share a model call: the service's batch keys, typed.

Batching is the service's one say over the library's work (``nrp.service.compute``), and what
decides it are these keys, each a frozen (hashable) dataclass whose fields name the options
work must agree on to be computed together:

- ``BatchKey``: job units (one query's answers for one ranker or evaluator) that the store may
  hand out together. The store keeps it as text (``BatchKey.text``, a column it compares
  whole); ``BatchKey.parse`` reads it back by field name.
- ``PositionKey``: answers of synchronous requests positioned in one ``position_rows`` call.
- ``RowKey``: requests whose rows come from one ``result_rows`` call.

Why not a JSON list: a list is unpacked by position, so a new option (or two swapped) breaks
every reader silently; a field is read by name, and a key that lacks one does not build.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

RANK, EVALUATE = "rank", "evaluate"  # the kinds of job unit


@dataclass(frozen=True)
class BatchKey:
    """Which job units may share a model call: same kind, collection and ranker or evaluator
    spec, and the options of that kind (positioning options for rank units, the references
    rule for evaluator units)."""

    kind: str
    collection: str
    spec: str
    frozen_stats: bool = False  # rank units
    full_rerank: bool = False  # rank units
    references: str = "auto"  # evaluator units

    @classmethod
    def rank(cls, collection: str, spec: str, frozen_stats: bool, full_rerank: bool) -> BatchKey:
        return cls(RANK, collection, spec, bool(frozen_stats), bool(full_rerank))

    @classmethod
    def evaluate(cls, collection: str, spec: str, references: str) -> BatchKey:
        return cls(EVALUATE, collection, spec, references=references)

    def options(self) -> dict[str, Any]:
        """The options that matter to this kind of unit, by name."""
        if self.kind == EVALUATE:
            return {"references": self.references}
        return {"frozen_stats": self.frozen_stats, "full_rerank": self.full_rerank}

    @property
    def text(self) -> str:
        """The key as the store keeps it: units whose texts are equal share a batch (the text
        of queued units written before this class, so a store keeps its queue)."""
        return json.dumps([self.kind, self.collection, self.spec, self.options()], sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> BatchKey:
        """The key of a stored ``text``."""
        kind, collection, spec, options = json.loads(text)
        return cls(kind, collection, spec, **options)


@dataclass(frozen=True)
class PositionKey:
    """What the positions of a synchronous request's answers are shared by: collection,
    ranker spec and positioning options."""

    collection: str
    spec: str
    frozen_stats: bool
    full_rerank: bool

    @classmethod
    def of(cls, payload: Mapping[str, Any], spec: str) -> PositionKey:
        return cls(
            payload["collection"], spec, bool(payload["frozen_stats"]), bool(payload["full_rerank"])
        )


@dataclass(frozen=True)
class RowKey:
    """What a synchronous request's rows depend on besides its answers' positions:
    collection, positioning options, ranker spec per dimension (in the request's order),
    tie rule and weights (None: equal)."""

    collection: str
    frozen_stats: bool
    full_rerank: bool
    ties: str
    rankers: tuple[tuple[str, str], ...]
    weights: tuple[tuple[str, float], ...] | None

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> RowKey:
        weights = payload.get("weights")
        return cls(
            payload["collection"],
            bool(payload["frozen_stats"]),
            bool(payload["full_rerank"]),
            str(payload["ties"]),
            tuple(payload["rankers"].items()),
            None if weights is None else tuple(weights.items()),
        )

    def position_key(self, spec: str) -> PositionKey:
        """Where the positions of one of its rankers are found."""
        return PositionKey(self.collection, spec, self.frozen_stats, self.full_rerank)
