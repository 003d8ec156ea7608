"""Folders written by ``nrp train``, as the rankers that read them see them.

A trained folder holds ``training.json`` (its record: which ranker the models are for, the
query-disjoint folds, which fold held each query out), ``folds/0`` .. ``folds/k-1`` (checkpoint f
trained without fold f's queries) and ``all`` (trained on every query). ``cross`` reads folders
of cross-encoders, ``dense`` folders of fine-tuned bi-encoders; both take the same ``fold``
parameter through ``TrainedFolds``:

- ``fold=cross`` (default) scores each row with the fold model that held the row's query out of
  its training, so no query is scored by a model that saw its judgments; queries of the
  training collection without judgments in the trained dimension, which no model saw, go to the
  ``all`` model. A query outside the training collection is an error: it has no held-out model.
- ``fold=all``: the model trained on all queries, for queries outside the collection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nrp import jsontext
from nrp.errors import ConfigError
from nrp.models.checksums import checksum_path
from nrp.rankers.registry import Param
from nrp.spec import format_spec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.collection.collection import Collection

#: the layout of a folder written by ``nrp train`` (``nrp.training`` writes it, this reads it)
TRAINING_FILE = "training.json"
FOLDS_DIR = "folds"
ALL_DIR = "all"
TRAINING_FORMAT = 1
FOLD_CHOICES = ("cross", "all")
#: the ranker a record without a ``ranker`` entry was trained for (the first format had none)
DEFAULT_TRAINED_RANKER = "cross"


def fold_param() -> Param:
    """The ``fold`` parameter of every ranker that reads trained folders."""
    return Param(
        str,
        "cross",
        "folders written by nrp train: cross (each query scored by the fold model that held it "
        "out) or all (the model trained on all queries, for queries outside the collection)",
        FOLD_CHOICES,
    )


def fold_dir(fold: int) -> str:
    """The checkpoint folder of fold ``fold``, relative to a trained folder."""
    return f"{FOLDS_DIR}/{fold}"


def query_hash(text: str) -> str:
    """A short hash of a query's normalised text: ``training.json`` records one per training
    query, so a collection whose qids collide with the training collection's is caught."""
    return hashlib.sha256(normalise_query(text).encode()).hexdigest()[:16]


def normalise_query(text: str) -> str:
    """Query text for equality: case-folded, every run of non-alphanumerics one space."""
    out = "".join(c if c.isalnum() else " " for c in str(text).casefold())
    return " ".join(out.split())


@dataclass(frozen=True)
class TrainedFolder:
    """What a ranker reads of ``training.json``: the ranker the models are for and which fold
    held each query out."""

    path: Path
    content_hash: str
    ranker: str
    collection: str
    folds: int
    qid_fold: Mapping[str, int]
    query_hashes: Mapping[str, str]
    untrained_qids: frozenset[str]

    @classmethod
    def read(cls, folder: str | Path) -> TrainedFolder | None:
        """The folder's training record; None for a plain checkpoint (no ``training.json``)."""
        path = Path(folder) / TRAINING_FILE
        if not path.is_file():
            return None
        raw = path.read_bytes()
        try:
            data = jsontext.loads(raw)
            if data.get("format") != TRAINING_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {TRAINING_FORMAT}")
            folds = data["folds"]
            return cls(
                path=Path(folder),
                content_hash=hashlib.sha256(raw).hexdigest()[:20],
                ranker=str(data.get("ranker", DEFAULT_TRAINED_RANKER)),
                collection=str(data["collection"]["name"]),
                folds=int(folds["k"]),
                qid_fold={str(q): int(f) for q, f in folds["qid_fold"].items()},
                query_hashes={str(q): str(h) for q, h in data["collection"]["queries"].items()},
                untrained_qids=frozenset(str(q) for q in data["collection"]["untrained_qids"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ConfigError(f"{path}: not a training record nrp can read ({error})") from None

    def checkpoint(self, key: str) -> Path:
        """``"all"`` or a fold number as text -> its checkpoint folder."""
        return self.path / (ALL_DIR if key == ALL_DIR else fold_dir(int(key)))

    def model_keys(self, qids: Sequence[str], label: str) -> np.ndarray:
        """The checkpoint that holds each qid out (``fold=cross``): its fold, or ``all`` for
        a query no model trained on; a qid the training never saw is an error."""
        keys = np.empty(len(qids), dtype=object)
        unknown: set[str] = set()
        for i, qid in enumerate(map(str, qids)):
            if qid in self.qid_fold:
                keys[i] = str(self.qid_fold[qid])
            elif qid in self.untrained_qids:
                keys[i] = ALL_DIR
            else:
                unknown.add(qid)
        if unknown:
            shown = ", ".join(sorted(unknown)[:10]) + (" ..." if len(unknown) > 10 else "")
            raise ConfigError(
                f"{label}: {len(unknown)} query id(s) are not queries of {self.collection!r}, "
                f"the collection {self.path} was trained on, so no fold model held them out: "
                f"{shown}; use fold=all (the model trained on all queries) for them"
            )
        return keys


class TrainedFolds:
    """What a ranker with ``model`` and ``fold`` parameters does with a trained folder (a mixin
    before ``Ranker``): read its record, refuse one trained for another ranker, put the record
    and the checkpoints ``fold`` reads into the model checksum, say ``fold`` in its short spec,
    check that ``fold=cross`` ranks the training collection, and pick each row's checkpoint."""

    name: str
    params: dict[str, Any]

    def check_fold(self) -> None:
        """Refuse a ``fold`` that is not one of ``FOLD_CHOICES`` (called by ``__init__``)."""
        if self.params["fold"] not in FOLD_CHOICES:
            raise ConfigError(f"{self.name}: fold must be one of {', '.join(FOLD_CHOICES)}")

    @cached_property
    def trained(self) -> TrainedFolder | None:
        """The training record when ``model`` is a folder written by ``nrp train``."""
        path = Path(str(self.params["model"]))
        folder = TrainedFolder.read(path) if path.is_dir() else None
        if folder is not None and folder.ranker != self.name:
            raise ConfigError(
                f"{self.name}: {path} holds models trained for the {folder.ranker} ranker; "
                f"rank with {folder.ranker}:model={path}"
            )
        return folder

    def trained_checksum(self, trained: TrainedFolder) -> str:
        """The hash of ``training.json`` and the files of every checkpoint ``fold`` reads."""
        keys = [ALL_DIR]
        if self.params["fold"] == "cross":
            keys += [str(fold) for fold in range(trained.folds)]
        files = "+".join(checksum_path(trained.checkpoint(key)) for key in keys)
        return f"training:{trained.content_hash}+{files}"

    def fingerprint_params(self, params: Mapping[str, Any]) -> Any:
        """``fold`` means nothing for a plain checkpoint: left out, so both values share scores."""
        if self.trained is None:
            params = {k: v for k, v in params.items() if k != "fold"}
        return super().fingerprint_params(params)  # type: ignore[misc]

    def spec(self, complete: bool = False) -> str:
        """As every ranker's, but a trained folder's short spec always says its ``fold``, so a
        result table tells cross-fitted scores from the all-queries model's."""
        text = super().spec(complete)  # type: ignore[misc]
        if complete or self.trained is None or "fold=" in text:
            return text
        name, _, rest = text.partition(":")
        params = dict(item.split("=", 1) for item in rest.split(",") if item)
        return format_spec(name, dict(sorted({**params, "fold": self.params["fold"]}.items())))

    def bind_collection(self, collection: Collection) -> None:
        """``fold=cross`` ranks the training collection only: its queries must be the ones the
        folds were drawn from (the same qids with the same query text)."""
        super().bind_collection(collection)  # type: ignore[misc]  # the query field
        trained = self.trained
        if trained is None or self.params["fold"] != "cross":
            return
        topics = collection.topics
        found = dict(zip(topics["qid"].astype(str), topics["query"].astype(str), strict=True))
        shared = [q for q in trained.query_hashes if q in found]
        differ = [q for q in shared if query_hash(found[q]) != trained.query_hashes[q]]
        if not shared or differ:
            what = f"{len(differ)} of its queries differ" if shared else "it has none of its qids"
            raise ConfigError(
                f"{self.name}: {self.params['model']} was trained with query-disjoint folds of "
                f"collection {trained.collection!r}; collection {collection.name!r} is another "
                f"({what}: {', '.join(differ[:5])}): fold=cross cannot hold its queries out; "
                "use fold=all"
            )

    def model_keys(self, qids: Sequence[str]) -> np.ndarray:
        """The checkpoint of each row: ``model`` (a plain folder), ``all`` or a fold number."""
        trained = self.trained
        if trained is None:
            return np.full(len(qids), "model", dtype=object)
        if self.params["fold"] == "all":
            return np.full(len(qids), ALL_DIR, dtype=object)
        return trained.model_keys(qids, self.name)

    def checkpoint_rows(self, qids: Sequence[str]) -> Iterator[tuple[str, np.ndarray]]:
        """(checkpoint, positions of its rows) for each checkpoint the rows of ``qids`` need,
        in a fixed order: each checkpoint scores its rows in one call."""
        keys = self.model_keys(qids)
        for key in sorted(set(keys)):
            yield key, np.flatnonzero(keys == key)
