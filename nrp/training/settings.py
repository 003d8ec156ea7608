"""``TrainSettings``: everything ``train_ranker`` is told besides the collection, the dimension and
the output folder, as one object; checked (``checked``) before anything is read or written."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from nrp.errors import ConfigError

#: the rankers ``nrp train`` trains models for
RANKERS = ("cross", "dense")


@dataclass(frozen=True)
class TrainSettings:
    """``ranker``: what is trained, for which ranker: ``cross`` (the base's encoder with a new
    one-output head reading query and text together) or ``dense`` (the base bi-encoder itself,
    its cosine of query and text embeddings; it starts as ``dense:model=BASE``). ``base``: the
    checkpoint fine-tuned (``minilm``: the encoder of the packaged
    all-MiniLM-L6-v2; any local folder). ``folds``/``seed``: the query-disjoint folds
    (``nrp.collection.folds.assign_folds``) and every random choice. ``epochs``, ``batch``
    (documents per step, from one or more queries), ``lr`` (AdamW, linear warm-up over
    ``warmup`` of the steps, then linear decay to 0), ``weight_decay``, ``max_length`` (input
    tokens of query and text together). ``train_layers``: the top N transformer layers are
    trained (with the pooler and head) on features of the frozen layers below, computed once;
    0 trains every layer and the embeddings. ``also``: other collections whose judgments of the
    same dimension are added to training. ``held_out``: collections the models will be
    evaluated on with ``fold=all``: training queries with the same question text are left out.
    ``query``: the topic field read as the query (``Collection.query_fields``; rank with the same
    ``query=`` then). ``also_query``: other topic fields whose texts are added as further
    queries of each training query (same documents and grades, cross-fitted with it; the ranker
    still ranks with ``query``). ``device``: auto, cpu or cuda[:N]. ``max_steps``: stop each
    model after N steps (0: no limit; benchmarks). ``verbose``: progress bars."""

    ranker: str = "cross"
    base: str = "minilm"
    folds: int = 5
    seed: int = 0
    epochs: int = 2
    batch: int = 16
    lr: float = 2e-4
    warmup: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 256
    train_layers: int = 1
    also: Sequence[str] = ()
    held_out: Sequence[str] = ()
    query: str = "query"
    also_query: Sequence[str] = ()
    device: str = "auto"
    max_steps: int = 0
    verbose: bool = True

    def checked(self) -> TrainSettings:
        """These settings with every number in range and the collection lists as tuples."""
        if self.ranker not in RANKERS:
            raise ConfigError(
                f"training: ranker must be one of {', '.join(RANKERS)}, got {self.ranker!r}"
            )
        limits = [
            ("folds", self.folds >= 2, "at least 2"),
            ("epochs", self.epochs >= 1, "at least 1"),
            ("batch", self.batch >= 2, "at least 2 (pairs need two documents)"),
            ("lr", 0 < self.lr < math.inf, "a finite number above 0"),
            ("warmup", 0 <= self.warmup < 1, "in [0, 1)"),
            ("weight_decay", self.weight_decay >= 0, "at least 0"),
            ("max_length", self.max_length >= 8, "at least 8"),
            ("train_layers", self.train_layers >= 0, "at least 0"),
            ("max_steps", self.max_steps >= 0, "at least 0"),
            ("seed", 0 <= self.seed < 2**32, "from 0 to 2**32 - 1 (a random generator's seed)"),
        ]
        for name, ok, what in limits:
            if not ok:
                raise ConfigError(f"training: {name} must be {what}, got {getattr(self, name)}")
        also, held_out = _names(self.also), _names(self.held_out)
        also_query = _names(self.also_query)
        lists = [(also, "also", "collection"), (held_out, "held_out", "collection")]
        for names, what, thing in [*lists, (also_query, "also_query", "field")]:
            if len(set(names)) != len(names):
                raise ConfigError(f"training: {what} names a {thing} twice")
        return replace(self, also=also, held_out=held_out, also_query=also_query)

    def hyper_parameters(self) -> dict[str, Any]:
        """What ``training.json`` records of the optimisation (the data has its own entry)."""
        return {
            "epochs": self.epochs,
            "batch": self.batch,
            "lr": self.lr,
            "warmup": self.warmup,
            "weight_decay": self.weight_decay,
            "max_length": self.max_length,
            "train_layers": self.train_layers,
            "max_steps": self.max_steps,
            "optimizer": "AdamW, linear warm-up and decay, gradient norm clipped at 1",
            "loss": "RankNet: grade-difference-weighted logistic loss on pairs of documents of "
            "one query with different grades",
        }


def _names(value: Sequence[str] | str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    return tuple(str(v) for v in value)
