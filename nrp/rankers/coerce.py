"""A ranker from what a caller hands over: a spec (text or ``RankerSpec``), a ``Ranker``, or any
PyTerrier transformer (``as_ranker``), and a list of them (``as_rankers``)."""

from __future__ import annotations

from collections.abc import Iterable

import pyterrier as pt

from nrp.errors import ConfigError
from nrp.rankers import pyterrier as adapter
from nrp.rankers.base import Ranker
from nrp.rankers.registry import RankerSpec, parse_rankers

#: what ``as_ranker`` takes
RankerLike = str | RankerSpec | Ranker | pt.Transformer


def as_ranker(choice: RankerLike) -> Ranker:
    """A spec (``RankerSpec.build``; ``pyterrier:key=KEY`` is the transformer wrapped under
    that key in this process), a ``Ranker`` (itself), or any other ``pt.Transformer`` (wrapped
    by ``nrp.rankers.pyterrier.from_transformer``, its cache key derived from repr)."""
    if isinstance(choice, str | RankerSpec):
        spec = RankerSpec.parse(choice)
        return adapter.wrapped(str(spec)) if spec.is_wrapped else spec.build()
    if isinstance(choice, Ranker):
        return choice
    if isinstance(choice, pt.Transformer):
        return adapter.from_transformer(choice)
    raise ConfigError(f"not a ranker spec, Ranker or pt.Transformer: {choice!r}")


def as_rankers(choices: RankerLike | Iterable[RankerLike]) -> list[Ranker]:
    """``as_ranker`` of each: a comma-separated text of specs (``parse_rankers``), one
    ranker-ish value, or a sequence of them."""
    if isinstance(choices, str | RankerSpec):
        return [as_ranker(spec) for spec in parse_rankers(choices)]
    if isinstance(choices, pt.Transformer):
        return [as_ranker(choices)]
    return [as_ranker(choice) for choice in choices]
