"""Label scales: what each raw label of a quality dimension means and which graded gain it has.

Declared in the manifest, next to the data (as ir_datasets' QREL_DEFS), so no code guesses:
CLEF credibility 3 means "assessor could not judge" and is excluded from graded qrels; Cranfield's
1 is its best grade; ArgQuality's z-scores become grades through declared bins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nrp.collection.mapping_files import config_error_at, string_field
from nrp.errors import ConfigError, clip, quote

#: the largest gain a label may have (a 32-bit signed integer, as trec_eval's qrels take)
MAX_GAIN = 2**31 - 1


def normalize_label(raw: Any) -> str:
    """One spelling per label: numeric labels compare numerically ("2", "2.0", 2 are "2")."""
    text = str(raw).strip()
    try:
        value = float(text)
    except ValueError:
        return text
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value)


def numeric_value(raw: str) -> float | None:
    try:
        value = float(str(raw).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Grade:
    """A declared raw label: its gain (None when excluded) and what the assessors meant by it."""

    label: str
    gain: int | None
    meaning: str = ""

    @property
    def excluded(self) -> bool:
        return self.gain is None


@dataclass(frozen=True)
class Bin:
    """Values below ``below`` (the last bin has no bound) get ``gain``."""

    below: float | None
    gain: int
    meaning: str = ""


@dataclass(frozen=True)
class LabelScale:
    dimension: str
    description: str = ""
    grades: Mapping[str, Grade] = field(default_factory=dict)
    bins: tuple[Bin, ...] = ()

    def grade_of(self, raw: str) -> Grade | None:
        """The declared grade of a raw label, or None when the label is outside the scale."""
        if self.bins:
            value = numeric_value(raw)
            if value is None:
                return None
            for bin_ in self.bins:
                if bin_.below is None or value < bin_.below:
                    return Grade(normalize_label(raw), bin_.gain, bin_.meaning)
            return None
        return self.grades.get(normalize_label(raw))

    def declared(self) -> str:
        """The declared labels, for error messages."""
        if self.bins:
            return "numeric values (binned)"
        return ", ".join(self.grades)

    def to_json(self) -> dict[str, Any]:
        return {
            "dimension": self.dimension,
            "description": self.description,
            "grades": [
                {"label": g.label, "gain": g.gain, "meaning": g.meaning}
                for g in self.grades.values()
            ],
            "bins": [{"below": b.below, "gain": b.gain, "meaning": b.meaning} for b in self.bins],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LabelScale:
        grades = {g["label"]: Grade(g["label"], g["gain"], g["meaning"]) for g in data["grades"]}
        bins = tuple(Bin(b["below"], b["gain"], b["meaning"]) for b in data["bins"])
        return cls(data["dimension"], data.get("description", ""), grades, bins)

    @classmethod
    def from_manifest(cls, dimension: str, spec: Any, where: str) -> LabelScale:
        """Parse one entry of a manifest's ``dimensions``; ``where`` names the manifest file."""
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where}: dimensions.{dimension} must be a mapping")
        unknown = set(spec) - {"description", "grades", "bins"}
        if unknown:
            listed = quote(sorted(map(str, unknown)))
            raise ConfigError(f"{where}: dimensions.{dimension}: unknown key(s) {listed}")
        has_grades, has_bins = "grades" in spec, "bins" in spec
        if has_grades == has_bins:
            raise ConfigError(f"{where}: dimensions.{dimension} needs exactly one of grades, bins")
        description = string_field(
            spec.get("description"), f"dimensions.{dimension}.description", config_error_at(where)
        )
        if has_grades:
            return cls(dimension, description, _parse_grades(dimension, spec["grades"], where))
        return cls(dimension, description, bins=_parse_bins(dimension, spec["bins"], where))


def _gain(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: a gain must be a non-negative integer, got {quote(value)}")
    if value > MAX_GAIN:
        raise ConfigError(f"{where}: gain {quote(value)} is out of range (0 to {MAX_GAIN:,})")
    return value


def _parse_grades(dimension: str, spec: Any, where: str) -> dict[str, Grade]:
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigError(f"{where}: dimensions.{dimension}.grades must be a non-empty mapping")
    grades: dict[str, Grade] = {}
    for raw_label, value in spec.items():
        label = normalize_label(raw_label)
        at = f"{where}: dimensions.{dimension}.grades.{clip(str(raw_label))}"
        if label in grades:
            raise ConfigError(f"{at}: label declared twice")
        if isinstance(value, Mapping):
            unknown = set(value) - {"grade", "meaning", "exclude"}
            if unknown:
                raise ConfigError(f"{at}: unknown key(s) {quote(sorted(map(str, unknown)))}")
            fail = config_error_at(at)
            meaning = string_field(value.get("meaning"), "meaning", fail, scalars=True)
            if value.get("exclude"):
                if "grade" in value:
                    raise ConfigError(f"{at}: an excluded label has no grade")
                grades[label] = Grade(label, None, meaning)
                continue
            if "grade" in value:
                gain = _gain(value["grade"], at)
            else:
                gain = _gain(_label_as_int(label, at), at)
            grades[label] = Grade(label, gain, meaning)
        else:  # short form `2: highly relevant`: the label is its own gain
            meaning = string_field(value, "a label's meaning", config_error_at(at), scalars=True)
            grades[label] = Grade(label, _gain(_label_as_int(label, at), at), meaning)
    return grades


def _bound(value: Any, at: str) -> float:
    """A bin's ``below``: a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{at}: `below` must be a number, got {quote(value)}")
    try:
        bound = float(value)
    except (ValueError, OverflowError):
        bound = math.nan
    if not math.isfinite(bound):
        raise ConfigError(f"{at}: `below` must be a finite number, got {quote(value)}")
    return bound


def _label_as_int(label: str, at: str) -> int:
    if len(label.lstrip("-+0")) > 18:  # no int() of a 5,000-digit label
        raise ConfigError(f"{at}: label {quote(label)} is out of range as a gain; give a `grade`")
    try:
        return int(label)
    except ValueError:
        raise ConfigError(
            f"{at}: label {quote(label)} is not an integer; give it a `grade`"
        ) from None


def _parse_bins(dimension: str, spec: Any, where: str) -> tuple[Bin, ...]:
    at = f"{where}: dimensions.{dimension}.bins"
    if not isinstance(spec, list) or not spec:
        raise ConfigError(f"{at} must be a non-empty list")
    bins: list[Bin] = []
    for position, entry in enumerate(spec):
        if not isinstance(entry, Mapping) or "grade" not in entry:
            raise ConfigError(f"{at}[{position}] must be a mapping with a grade")
        below = entry.get("below")
        last = position == len(spec) - 1
        if (below is None) != last:
            raise ConfigError(f"{at}[{position}]: every bin but the last needs `below`")
        if below is not None:
            below = _bound(below, f"{at}[{position}]")
            if bins and bins[-1].below is not None and below <= bins[-1].below:
                raise ConfigError(f"{at}[{position}]: bounds must increase")
        bins.append(
            Bin(
                below,
                _gain(entry["grade"], f"{at}[{position}]"),
                string_field(
                    entry.get("meaning"), "meaning", config_error_at(f"{at}[{position}]"), "", True
                ),
            )
        )
    return tuple(bins)
