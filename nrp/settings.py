"""Options that travel together are a frozen dataclass; a library call takes one, plus keyword
overrides of its fields, so ``validate(c, rankers, labels="raw")`` and
``validate(c, rankers, ValidationSettings(labels="raw"))`` are the same call.

``settings_with(cls, settings, overrides)`` is the one place that merges the two and refuses a
keyword that is not a field (a TypeError naming it and the known fields, as Python would).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

S = TypeVar("S")


def settings_with(cls: type[S], settings: S | None, overrides: Mapping[str, Any]) -> S:
    """``settings`` (default: ``cls()``) with ``overrides`` replacing its fields."""
    base = settings if settings is not None else cls()
    if not isinstance(base, cls):
        raise TypeError(f"expected {cls.__name__}, got {type(base).__name__}")
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise TypeError(
            f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
            f"{cls.__name__} has {', '.join(sorted(fields))}"
        )
    return dataclasses.replace(base, **overrides) if overrides else base  # type: ignore[type-var]
