"""``train_ranker``: fine-tune a cross-encoder on one dimension of a collection's judgments, one
model per query-disjoint fold plus one on all queries, into a folder the ``cross`` ranker loads.

The folder (written beside its final place and renamed into it, so a failed or interrupted run
leaves no folder a ranker could load):

- ``training.json``: base-model checksum, data fingerprint (collection fingerprints, dimension,
  label scales), folds and seed with the fold of every query, hyper-parameters, the queries each
  model trained on and held out, its loss per epoch, and the training queries left out for
  asking a question the models are evaluated on;
- ``folds/0`` .. ``folds/k-1``: checkpoint f trained without fold f's queries;
- ``all``: trained on every query.

Every input is checked before anything is written: an unknown collection or dimension, a
dimension with one grade, fewer queries than folds, a missing base folder, an existing output
folder are each one error line.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.collection.collection import Collection
from nrp.errors import ConfigError
from nrp.models.checksums import checksum_path
from nrp.models.device import resolve_device
from nrp.progress import Progress
from nrp.rankers.trained import ALL_DIR, TRAINING_FILE, TRAINING_FORMAT, fold_dir
from nrp.settings import settings_with
from nrp.tables import FrameView
from nrp.training.data import TrainingData, gather
from nrp.training.dense_model import DenseTraining
from nrp.training.fit import Arrays, FitHistory, FitPlan, fit
from nrp.training.model import CrossTraining, resolve_base
from nrp.training.settings import TrainSettings
from nrp.version import __version__

#: what each ``--ranker`` trains (``TrainSettings.ranker``)
KINDS: dict[str, type[CrossTraining] | type[DenseTraining]] = {
    "cross": CrossTraining,
    "dense": DenseTraining,
}
#: pairs compared through both model paths before training (``Features.check``)
CHECKED_PAIRS = 4


def training_kind(ranker: str, base: Path, device: str) -> CrossTraining | DenseTraining:
    """The model family ``ranker`` trains (``CrossTraining``'s interface)."""
    return KINDS[ranker](base, device)


@dataclass
class TrainingResult(FrameView):
    """What ``train_ranker`` did: the folder, its ``training.json`` record, and timings
    (not in the record: two identical runs write identical records). ``documents_trained``:
    (query, document) pairs passed through training steps, all models and epochs together;
    ``documents_planned``: the same without ``max_steps``."""

    out: Path
    record: dict[str, Any]
    seconds: float
    feature_seconds: float
    training_seconds: float
    held_out_seconds: float
    documents_trained: int
    documents_planned: int

    @property
    def pairs_per_second(self) -> float:
        """(query, document) pairs passed through training per second of training."""
        return self.documents_trained / max(self.training_seconds, 1e-9)

    def to_frame(self) -> pd.DataFrame:
        """One row per model (folds, then all): queries trained and held out, pairs, steps,
        the loss of each epoch's end and the held-out loss (fold models)."""
        entries = [*self.record["models"]["folds"], self.record["models"]["all"]]
        return pd.DataFrame(
            [
                {
                    "model": entry["path"],
                    "trained_queries": len(entry["trained_queries"]),
                    "held_out_queries": len(entry.get("held_out_queries", [])),
                    "pairs": entry["pairs"],
                    "steps": entry["steps"],
                    "loss": entry["loss"][-1] if entry["loss"] else None,
                    "held_out_loss": (entry.get("held_out_loss") or [None])[-1],
                }
                for entry in entries
            ]
        )

    def format(self) -> str:
        record = self.record
        data, overlap = record["data"], record["overlap"]["counts"]
        lines = [
            f"trained {record['collection']['name']} / {record['dimension']}: "
            f"{data['pairs']} judged pairs of {data['queries']} queries "
            f"({', '.join(s['name'] for s in data['sources'])}), {record['folds']['k']} folds, "
            f"seed {record['folds']['seed']}",
            f"left out for their question text: {overlap['excluded_queries']} training "
            f"queries ({overlap['excluded_pairs']} pairs); {overlap['same_text_across_folds']} "
            "from fold models whose held-out queries ask the same",
        ]
        for entry in [*record["models"]["folds"], record["models"]["all"]]:
            lines.append(_model_line(entry))
        lines.append(
            f"{data['cut']} {'texts' if record['ranker'] == 'dense' else 'pairs'} cut at "
            f"{record['hyper_parameters']['max_length']} tokens; "
            f"{self.seconds:.1f} s ({self.feature_seconds:.1f} s frozen features, "
            f"{self.training_seconds:.1f} s training at {self.pairs_per_second:.1f} pairs/s, "
            f"{self.held_out_seconds:.1f} s held-out loss)"
        )
        field = data["query_field"]
        spec = f"{record['ranker']}:model={self.out}"
        spec += "" if field == "query" else f",query={field}"
        lines.append(
            f"wrote {self.out}: rank with {spec} (fold=cross: each query by the model that held "
            "it out; fold=all: other collections)"
        )
        return "\n".join(lines)


def _model_line(entry: dict[str, Any]) -> str:
    loss = " -> ".join(f"{v:.4f}" for v in entry["loss"])
    held = entry.get("held_out_loss") or []
    held_text = f"; held-out loss {' -> '.join(f'{v:.4f}' for v in held)}" if held else ""
    return (
        f"{entry['path']}: {len(entry['trained_queries'])} queries, {entry['pairs']} pairs "
        f"trained, {len(entry.get('held_out_queries', []))} held out; loss {loss}{held_text}"
    )


def train_ranker(
    collection: str | Collection,
    dimension: str,
    out: str | Path,
    settings: TrainSettings | None = None,
    *,
    indexes_dir: str | Path | None = None,
    progress: Progress | None = None,
    **overrides: Any,
) -> TrainingResult:
    """Train cross-fitted cross-encoders on ``dimension`` of ``collection`` into ``out``.
    ``settings`` and ``overrides`` (its fields: ``folds=5``, ``also=[...]``, ...): see
    ``TrainSettings``. Collections are names under ``indexes_dir`` or ``Collection`` objects.
    ``progress``: called with one line per epoch of each model."""
    start = time.perf_counter()
    checked = settings_with(TrainSettings, settings, overrides).checked()
    out = Path(out)
    if out.exists():
        raise ConfigError(f"{out} exists: give a folder that does not (nothing was written)")
    main = _collection(collection, indexes_dir)
    also = [_collection(c, indexes_dir) for c in checked.also]
    held_out = [_collection(c, indexes_dir) for c in checked.held_out]
    data = gather(
        main, dimension, also, held_out, checked.folds, checked.seed, checked.query,
        checked.also_query,
    )  # fmt: skip
    base = resolve_base(checked.base)
    device = resolve_device(checked.device)
    with _staging(out) as folder:
        run = TrainingRun(data, base, device, checked, progress)
        record = run.train_all(folder)
        (folder / TRAINING_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return TrainingResult(
        out=out,
        record=record,
        seconds=time.perf_counter() - start,
        feature_seconds=run.feature_seconds,
        training_seconds=run.training_seconds,
        held_out_seconds=run.held_out_seconds,
        documents_trained=run.documents,
        documents_planned=run.planned,
    )


def _collection(value: str | Collection, indexes_dir: str | Path | None) -> Collection:
    return value if isinstance(value, Collection) else Collection.load(str(value), indexes_dir)


@contextlib.contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """A fresh folder beside ``out``, renamed to ``out`` when the block succeeds; when it
    fails, removed, with the parent folders it had to create."""
    missing = [p for p in [out.parent, *out.parent.parents] if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        yield folder
        folder.rename(out)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        for parent in missing:  # deepest first
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise


class TrainingRun:
    """One ``train_ranker`` call: encodings and frozen features shared by all models."""

    def __init__(
        self,
        data: TrainingData,
        base: Path,
        device: str,
        settings: TrainSettings,
        progress: Progress | None,
    ):
        self.data, self.base, self.device = data, base, device
        self.settings, self.progress = settings, progress
        self.feature_seconds = self.training_seconds = self.held_out_seconds = 0.0
        self.documents = self.planned = 0
        examples = data.examples
        keys = examples["key"].to_numpy()
        codes = {key: i for i, key in enumerate(dict.fromkeys(keys))}
        self.arrays = Arrays(
            gains=np.array(examples["gain"], dtype=np.int64),
            weights=np.array(examples["weight"], dtype=np.float32),
            groups=np.array([codes[k] for k in keys], dtype=np.int64),
        )
        self.by_key: dict[str, list[int]] = {}
        for index, key in enumerate(keys):
            self.by_key.setdefault(key, []).append(index)

    def plans(self) -> list[FitPlan]:
        """One plan per fold (without its queries), then the all-queries model."""
        data = self.data
        plans = [
            FitPlan(
                name=fold_dir(fold),
                number=fold,
                train=self._groups(data.training_keys(fold)),
                held_out=self._groups(data.fold_keys(fold)),
            )
            for fold in range(data.folds)
        ]
        plans.append(FitPlan(ALL_DIR, data.folds, self._groups(data.training_keys(None))))
        return plans

    def _groups(self, keys: Sequence[str]) -> dict[str, list[int]]:
        return {key: self.by_key[key] for key in keys if key in self.by_key}

    def train_all(self, folder: Path) -> dict[str, Any]:
        """Train and save every model into ``folder``; the ``training.json`` record."""
        settings = self.settings
        kind = training_kind(settings.ranker, self.base, self.device)
        model = kind.fresh(settings.seed)
        features, cut, max_input = kind.features(
            self.data.examples, settings.max_length, settings.train_layers
        )
        plans = self.plans()
        used = sorted(
            {i for p in plans for g in (p.train, p.held_out) for v in g.values() for i in v}
        )
        started = time.perf_counter()
        features.compute(model, used, settings.batch)
        kind.check(features, used[:CHECKED_PAIRS])
        self.feature_seconds = time.perf_counter() - started
        entries = []
        for plan in plans:
            if plan.number:
                model = kind.fresh(settings.seed)
            history = fit(model, features, self.arrays, plan, settings, self.progress)
            self.training_seconds += history.seconds
            self.held_out_seconds += history.held_out_seconds
            self.documents += history.documents
            self.planned += history.planned
            kind.save(folder / plan.name)
            entries.append(self._entry(plan, history))
        return self._record(entries, cut, features.frozen, max_input, kind)

    def _entry(self, plan: FitPlan, history: FitHistory) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "path": plan.name,
            "trained_queries": sorted(plan.train),
            "pairs": sum(len(v) for v in plan.train.values()),
            "steps": history.steps,
            "loss": history.loss,
        }
        if plan.name != ALL_DIR:
            entry["fold"] = plan.number
            entry["held_out_queries"] = self.data.fold_keys(plan.number)
            entry["held_out_loss"] = history.held_out_loss
            entry["left_out_same_text"] = self.data.same_text.get(plan.number, [])
        return entry

    def _record(
        self,
        entries: list[dict[str, Any]],
        cut: int,
        frozen: int,
        max_input: int,
        kind: CrossTraining | DenseTraining,
    ) -> dict[str, Any]:
        torch = lazy_libs.torch()
        transformers = lazy_libs.transformers()

        data, settings = self.data, self.settings
        examples = data.examples
        return {
            "format": TRAINING_FORMAT,
            "ranker": settings.ranker,
            "kind": f"{kind.label} checkpoints trained by nrp train",
            "dimension": data.dimension,
            "collection": {
                "name": data.collection.name,
                "fingerprint": str(data.collection.meta.get("fingerprint", "")),
                "queries": data.query_hashes,
                "untrained_qids": data.untrained_qids,
            },
            "base": {
                "model": settings.base,
                "path": str(self.base),
                "checksum": checksum_path(self.base),
            },
            "data": {
                "fingerprint": data.fingerprint(),
                "sources": data.sources,
                "query_field": settings.query,
                "also_query": list(settings.also_query),
                "pairs": len(examples),
                "queries": int(examples["key"].nunique()),
                "labels": "graded gains of the manifest's scale; excluded labels left out",
                "cut": cut,
            },
            "folds": {
                "k": data.folds,
                "seed": settings.seed,
                "assignment": "nrp.collection.folds.assign_folds",
                "qid_fold": dict(sorted(data.qid_fold.items())),
            },
            "hyper_parameters": {
                **settings.hyper_parameters(),
                "max_length": max_input,
                "frozen_layers": frozen,
                "score": kind.score,
            },
            "environment": {
                "device": self.device,
                "nrp": __version__,
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
            "overlap": data.overlap_record(),
            "models": {"folds": entries[:-1], "all": entries[-1]},
        }
