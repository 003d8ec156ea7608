"""``RankerChoice``: which ranker scores answers in each dimension, parsed once from what a caller
gives (``nrp score --ranker``/``--validation``, the service's body, the ``nrp`` evaluator's
``rankers``, ``score_answers``' ``rankers``).

A choice is one of three:

- a validation's choice: a ``ValidationResult``, or the path of a validation JSON (read here;
  a text names one when it is no ranker spec: ``names_validation_file``), whose chosen ranker
  per dimension and weighting scoring uses;
- one ranker for every dimension: a spec (text or ``RankerSpec``), a ``Ranker`` or any
  PyTerrier transformer;
- dimension -> one of those.

Every spec text is parsed here (``RankerSpec.parse``), so what lies below the choice is values,
never a text to be told apart: a wrong spec is a ``ConfigError`` when the choice is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyterrier as pt

from nrp.errors import ConfigError
from nrp.rankers.base import Ranker
from nrp.rankers.registry import RankerSpec
from nrp.validation.result import ValidationResult, names_validation_file

#: one ranker as a choice names it
OneRanker = RankerSpec | Ranker | pt.Transformer


@dataclass(frozen=True)
class RankerChoice:
    """``validation``: the validation whose choice scores (``path``: its JSON's absolute path
    when read from a file; ``source``: how errors and warnings name it); else ``every``: one
    ranker for every dimension, or ``by_dimension``: dimension -> ranker."""

    validation: ValidationResult | None = None
    path: Path | None = None
    source: str = "the validation result"
    every: OneRanker | None = None
    by_dimension: Mapping[str, OneRanker] = field(default_factory=dict)

    @classmethod
    def of(cls, value: RankerChoiceLike) -> RankerChoice:
        """The choice ``value`` gives (a ``RankerChoice``: itself); ``ConfigError`` for a spec
        that is wrong, ``InputError`` for a validation JSON that cannot be read."""
        if isinstance(value, RankerChoice):
            return value
        if isinstance(value, ValidationResult):
            return cls(validation=value)
        if isinstance(value, str | Path) and names_validation_file(value):
            return cls.read(value)
        if isinstance(value, Mapping):
            by_dimension = {}
            for dimension, one in value.items():
                try:
                    by_dimension[str(dimension)] = _one(one)
                except ConfigError as error:
                    raise ConfigError(f"dimension {dimension!r}: {error}") from None
            return cls(by_dimension=by_dimension)
        return cls(every=_one(value))

    @classmethod
    def read(cls, path: str | Path) -> RankerChoice:
        """The choice of the validation JSON at ``path`` (``InputError`` when it cannot be read)."""
        return cls(ValidationResult.from_json(Path(path)), Path(path).resolve(), str(path))

    @classmethod
    def from_options(cls, items: Sequence[str]) -> RankerChoice:
        """``--ranker`` options: one ``SPEC`` for every dimension, or ``DIM=SPEC`` each (an
        ``=`` before the spec's first ``:`` names the dimension; ``bm25:k1=1.2`` is a spec)."""
        if len(items) == 1 and not names_dimension(items[0]):
            return cls.of(items[0])
        pairs: dict[str, str] = {}
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise ConfigError(f"--ranker {item!r} is not DIM=VALUE")
            pairs[key.strip()] = value.strip()
        return cls.of(pairs)

    def text(self) -> str | dict[str, str]:
        """The choice as text (a setting written to a file): the validation JSON's path as
        given, one spec, or dimension -> spec; ``ConfigError`` for an object no text names."""
        if self.path is not None:
            return self.source
        if self.validation is None and isinstance(self.every, RankerSpec):
            return str(self.every)
        if self.validation is None and self.every is None:
            texts = {d: str(r) for d, r in self.by_dimension.items() if isinstance(r, RankerSpec)}
            if len(texts) == len(self.by_dimension):
                return texts
        raise ConfigError("a ranker given as an object has no text: give its spec")

    def rankers(self, dimensions: Sequence[str]) -> dict[str, OneRanker]:
        """dimension -> ranker as given (every one of ``dimensions`` for one ranker), or the
        validation's chosen spec per dimension."""
        if self.validation is not None:
            chosen = self.validation.chosen()
            if not chosen:
                raise ConfigError(f"{self.source}: validation chose no ranker for any dimension")
            return {d: RankerSpec.parse(spec) for d, spec in chosen.items()}
        if self.every is not None:
            return dict.fromkeys(dimensions, self.every)
        return dict(self.by_dimension)


def _one(value: str | OneRanker) -> OneRanker:
    if isinstance(value, str | Path):
        return RankerSpec.parse(str(value))
    if isinstance(value, RankerSpec | Ranker | pt.Transformer):
        return value
    raise ConfigError(f"not a ranker spec, Ranker or pt.Transformer: {value!r}")


def names_dimension(item: str) -> bool:
    """``DIM=SPEC`` (an ``=`` before any ``:``), not a spec such as ``bm25:k1=1.2``."""
    return "=" in item.split(":", 1)[0]


#: what ``RankerChoice.of`` reads
RankerChoiceLike = (
    RankerChoice | ValidationResult | str | Path | OneRanker | Mapping[str, str | OneRanker]
)
