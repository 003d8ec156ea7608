"""A review project: the items people review, who reviews them, and the label scales they use.

One JSON file (``write`` / ``load``), so a project can be made on one machine, copied, and
served by ``nrp serve`` or ``nrp review PROJECT_FILE``. Three kinds of item:

- ``rank``: one query and k candidates (generated answers and/or judged documents), shown
  shuffled under neutral ids c1..ck; the reviewer orders them best first, ties allowed. The
  value saved: ``{"ranking": [[cid, ...], ...]}``, groups best first, a group of several ids a
  tie. Which answer or document each cid is stays in the file (``hidden``), never shown.
- ``grade``: one answer labelled in each of the project's dimensions, on the collection's
  declared scale (the labels and what each means, from the manifest). Value:
  ``{"labels": {dimension: label}}``; a dimension left out is not graded yet.
- ``verify``: a judge's label (with its confidence) shown with the question, the reference and
  the answer, to confirm or correct. Value: ``{"label": LABEL}``, one of the item's choices.

Assignment: each item goes to ``reviews_per_item`` reviewers, in turn (item i to reviewers i,
i+1, ... modulo their number), so the load is even and adding items does not move earlier
assignments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrp import jsontext
from nrp.errors import InputError
from nrp.tables import write_text

KINDS = ("rank", "grade", "verify")
FORMAT = "nrp-review-project/1"
#: reviewer names become file names of the export and part of token scopes
REVIEWER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TFN_LABELS = ("TRUE", "FALSE", "NOT GIVEN")


@dataclass(frozen=True)
class ReviewItem:
    """One thing to review. ``shown``: what the reviewer sees; ``hidden``: what the export
    needs and the reviewer must not see (the sources of a ranking's candidates)."""

    id: str
    kind: str
    qid: str
    shown: Mapping[str, Any]
    hidden: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "qid": self.qid,
            "shown": dict(self.shown),
            "hidden": dict(self.hidden),
        }

    def public(self) -> dict[str, Any]:
        """What a reviewer's browser receives."""
        return {"id": self.id, "kind": self.kind, "qid": self.qid, **dict(self.shown)}


@dataclass(frozen=True)
class ReviewProject:
    """Items, reviewers and scales; ``path``: the file it was read from (or written to)."""

    name: str
    reviewers: tuple[str, ...]
    reviews_per_item: int
    items: tuple[ReviewItem, ...]
    scales: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    origin: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def __post_init__(self) -> None:
        where = str(self.path) if self.path else f"project {self.name!r}"
        if not REVIEWER_NAME.match(self.name):
            raise InputError(where, None, f"project name {self.name!r}: use letters, digits, _.-")
        if not self.reviewers:
            raise InputError(where, None, "no reviewers")
        for name in self.reviewers:
            if not REVIEWER_NAME.match(name):
                raise InputError(where, None, f"reviewer name {name!r}: use letters, digits, _.-")
        if len(set(self.reviewers)) != len(self.reviewers):
            raise InputError(where, None, "a reviewer is named twice")
        if not 1 <= self.reviews_per_item <= len(self.reviewers):
            raise InputError(
                where,
                None,
                f"reviews_per_item {self.reviews_per_item} must be between 1 and the number of "
                f"reviewers ({len(self.reviewers)})",
            )
        seen: set[str] = set()
        for item in self.items:
            if item.kind not in KINDS:
                raise InputError(where, None, f"item {item.id!r}: unknown kind {item.kind!r}")
            if item.id in seen:
                raise InputError(where, None, f"item {item.id!r} is given twice")
            seen.add(item.id)

    # -- items and assignment ------------------------------------------------------------
    def item(self, item_id: str) -> ReviewItem | None:
        return self._by_id.get(item_id)

    @property
    def _by_id(self) -> dict[str, ReviewItem]:
        cached = self.__dict__.get("_index")
        if cached is None:
            cached = {item.id: item for item in self.items}
            object.__setattr__(self, "_index", cached)
        return cached

    def reviewers_of(self, item_id: str) -> tuple[str, ...]:
        """The reviewers an item is assigned to (none for an unknown item)."""
        item = self._by_id.get(item_id)
        return self._assignment()[self._positions[item.id]] if item else ()

    @property
    def _positions(self) -> dict[str, int]:
        cached = self.__dict__.get("_position_index")
        if cached is None:
            cached = {item.id: i for i, item in enumerate(self.items)}
            object.__setattr__(self, "_position_index", cached)
        return cached

    def assigned(self, reviewer: str) -> list[ReviewItem]:
        """The items assigned to ``reviewer``, in project order."""
        return [
            item
            for item, names in zip(self.items, self._assignment(), strict=True)
            if reviewer in names
        ]

    def _assignment(self) -> list[tuple[str, ...]]:
        cached = self.__dict__.get("_assigned")
        if cached is None:
            r = len(self.reviewers)
            cached = [
                tuple(self.reviewers[(i + j) % r] for j in range(self.reviews_per_item))
                for i in range(len(self.items))
            ]
            object.__setattr__(self, "_assigned", cached)
        return cached

    @property
    def kinds(self) -> list[str]:
        return [kind for kind in KINDS if any(item.kind == kind for item in self.items)]

    # -- values --------------------------------------------------------------------------
    def check_value(self, item: ReviewItem, value: Any) -> dict[str, Any]:
        """The value as stored, or an InputError naming the problem (a request's 422)."""
        where = f"item {item.id}"
        if not isinstance(value, dict):
            raise InputError(None, None, f"{where}: the value must be an object")
        if item.kind == "rank":
            groups = value.get("ranking")
            cids = [c["cid"] for c in item.shown["candidates"]]
            if not isinstance(groups, list) or not all(
                isinstance(g, list) and g and all(isinstance(c, str) for c in g) for g in groups
            ):
                raise InputError(None, None, f"{where}: ranking must be a list of non-empty lists")
            flat = [c for g in groups for c in g]
            if sorted(flat) != sorted(cids):
                raise InputError(
                    None, None, f"{where}: ranking must hold each of {', '.join(cids)} once"
                )
            return {"ranking": [list(g) for g in groups]}
        if item.kind == "grade":
            labels = value.get("labels")
            if not isinstance(labels, dict):
                raise InputError(None, None, f"{where}: labels must be an object")
            for dimension, label in labels.items():
                scale = self.scales.get(dimension)
                if scale is None or dimension not in item.shown["dimensions"]:
                    raise InputError(None, None, f"{where}: no dimension {dimension!r}")
                allowed = [g["label"] for g in scale["grades"]]
                if label not in allowed:
                    raise InputError(
                        None,
                        None,
                        f"{where}: {dimension} label {label!r} is not one of {allowed}",
                    )
            return {"labels": {d: labels[d] for d in item.shown["dimensions"] if d in labels}}
        label = value.get("label")
        if label not in item.shown["choices"]:
            raise InputError(
                None, None, f"{where}: label {label!r} is not one of {item.shown['choices']}"
            )
        return {"label": label}

    # -- file ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "name": self.name,
            "reviewers": list(self.reviewers),
            "reviews_per_item": self.reviews_per_item,
            "scales": {k: dict(v) for k, v in self.scales.items()},
            "origin": dict(self.origin),
            "items": [item.to_json() for item in self.items],
        }

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        write_text(path, json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> ReviewProject:
        path = Path(path)
        if not path.is_file():
            raise InputError(path, None, "no such review project file")
        try:
            data = jsontext.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            line = getattr(err, "lineno", None)
            raise InputError(path, line, f"not valid JSON ({getattr(err, 'msg', err)})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(path, None, f"not a review project (format {FORMAT!r} expected)")
        try:
            items = tuple(
                ReviewItem(str(i["id"]), str(i["kind"]), str(i["qid"]), i["shown"], i["hidden"])
                for i in data["items"]
            )
            return cls(
                name=str(data["name"]),
                reviewers=tuple(str(r) for r in data["reviewers"]),
                reviews_per_item=int(data["reviews_per_item"]),
                items=items,
                scales=data.get("scales", {}),
                origin=data.get("origin", {}),
                path=path,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(path, None, f"missing or bad field {err}") from None


def review_store_path(project_file: str | Path) -> Path:
    """Where a project's reviews are saved: ``NAME.reviews.sqlite`` beside its file."""
    project_file = Path(project_file)
    return project_file.with_name(f"{project_file.stem}.reviews.sqlite")
