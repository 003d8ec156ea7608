"""A ranker from what a caller hands over: a spec string, a ``Ranker``, or any PyTerrier
transformer (``as_ranker``), and a list of them (``as_rankers``)."""

from __future__ import annotations

from typing import Any

import pyterrier as pt

from nrp.errors import ConfigError
from nrp.rankers import pyterrier as adapter
from nrp.rankers.base import Ranker
from nrp.rankers.registry import make_ranker
from nrp.spec import split_specs


def as_ranker(choice: Any) -> Ranker:
    """A spec string (built by ``make_ranker``; ``pyterrier:key=KEY`` is the transformer wrapped
    under that key in this process), a ``Ranker`` (itself), or any other ``pt.Transformer``
    (wrapped by ``nrp.rankers.pyterrier.from_transformer``, its cache key derived from repr)."""
    if isinstance(choice, str):
        if choice.strip().partition(":")[0] == adapter.NAME:
            return adapter.wrapped(choice)
        return make_ranker(choice)
    if isinstance(choice, Ranker):
        return choice
    if isinstance(choice, pt.Transformer):
        return adapter.from_transformer(choice)
    raise ConfigError(f"not a ranker spec, Ranker or pt.Transformer: {choice!r}")


def as_rankers(choices: Any) -> list[Ranker]:
    """``as_ranker`` of each: a comma-separated string of specs, one ranker-ish value, or a
    sequence of them."""
    if isinstance(choices, str):
        return [as_ranker(spec) for spec in split_specs(choices)]
    if isinstance(choices, pt.Transformer):
        return [as_ranker(choices)]
    return [as_ranker(choice) for choice in choices]
