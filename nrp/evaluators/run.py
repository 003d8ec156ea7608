"""Running evaluators: batched, cached per item, resumable, one table with a column per score.

``evaluate(items, evaluators)`` runs each evaluator over the items: rows found in the cache are
served, the rest are evaluated in batches of ``evaluator.batch_size`` and each batch is stored
as soon as it is done (a killed run continues where it stopped; a re-run computes nothing).
Items with the same content (``cache.item_key``) are evaluated once. ``evaluate_answers``
builds the items from a collection first (``nrp.evaluators.items``) and keeps its cache beside
the collection.

The result has the identity columns (answer_id, llm, prompt, qid, sample when present),
``reference_kind``, and each evaluator's ``output_columns()``; ``attrs["evaluators"]`` maps
each evaluator's spec to what was computed and served.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nrp.collection.collection import Collection
from nrp.evaluators.base import ITEM_COLUMNS, Evaluator, make_evaluators
from nrp.evaluators.cache import EVALUATION_CACHE_FILE, EvaluationCache, item_key
from nrp.evaluators.items import ReferenceSource, build_items
from nrp.executors.base import Executor, active_executor, using_executor
from nrp.progress import Progress
from nrp.settings import settings_with
from nrp.tables import require_columns

IDENTITY_COLUMNS = ("answer_id", "llm", "prompt", "qid", "sample")


def evaluate(
    items: pd.DataFrame,
    evaluators: str | Sequence[str | Evaluator],
    cache: EvaluationCache | str | Path | None = None,
    collection: Collection | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Every evaluator over every item (``ITEM_COLUMNS``); see the module docstring.
    ``executor``: where items missing from the cache are evaluated (``nrp.executors``;
    default: the active executor, else this process); evaluators that are not cacheable (NRP)
    run here, with the executor active for what they call."""
    executor = executor if executor is not None else active_executor()
    require_columns(items, ITEM_COLUMNS, "items")
    built = make_evaluators(evaluators if isinstance(evaluators, str) else list(evaluators))
    if isinstance(cache, str | Path):
        cache = EvaluationCache(cache)
    items = items.reset_index(drop=True)
    keys = [item_key(row) for row in items.to_dict("records")]
    out = items[[c for c in (*IDENTITY_COLUMNS, "reference_kind") if c in items.columns]].copy()
    report: dict[str, dict[str, Any]] = {}
    for evaluator in built:
        if collection is not None:
            evaluator.bind_collection(collection)
        with using_executor(executor):
            values, counts = _run_one(evaluator, items, keys, cache, progress, executor, collection)
        names = evaluator.score_columns() + evaluator.extra_columns()
        for name, column in zip(names, evaluator.output_columns(), strict=True):
            series = values[name]
            out[column] = (
                pd.to_numeric(series, errors="coerce").astype(float)
                if name in evaluator.score_columns()
                else series
            )
        report[evaluator.spec()] = counts
    out.attrs["evaluators"] = report
    return out


def _run_one(
    evaluator: Evaluator,
    items: pd.DataFrame,
    keys: list[str],
    cache: EvaluationCache | None,
    progress: Progress | None,
    executor: Executor | None = None,
    collection: Collection | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    names = evaluator.score_columns() + evaluator.extra_columns()
    scope = evaluator.fingerprint()
    use_cache = cache is not None and evaluator.cacheable
    known: dict[str, dict[str, Any]] = cache.lookup(scope, keys) if use_cache else {}
    served = sum(1 for k in keys if k in known)
    # one evaluation per distinct item content not yet known
    first_of: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key not in known and key not in first_of:
            first_of[key] = i
    todo = list(first_of.values())
    if not evaluator.cacheable:
        todo, first_of = list(range(len(keys))), {}  # evaluated as given, row by row identity
    computed = 0
    fresh: dict[int, dict[str, Any]] = {}
    size = max(1, evaluator.batch_size)
    if executor is not None and evaluator.cacheable and todo:  # partitions computed elsewhere
        from nrp.evaluators.partitions import evaluate_with_executor

        use = cache if use_cache else None
        fresh = evaluate_with_executor(
            executor, evaluator, items, keys, todo, use, collection, progress
        )
        computed, todo = len(todo), []
    for start in range(0, len(todo), size):
        rows = todo[start : start + size]
        batch = items.iloc[rows].reset_index(drop=True)
        result = evaluator.evaluate_checked(batch, names)
        if use_cache:
            cache.store(scope, evaluator.spec(), [keys[i] for i in rows], result)
        for j, i in enumerate(rows):
            fresh[i] = result.iloc[j].to_dict()
        computed += len(rows)
        if progress is not None:
            progress(f"{evaluator.spec()}: {min(start + size, len(todo))}/{len(todo)} evaluated")
    records = []
    for i, key in enumerate(keys):
        if i in fresh:
            records.append(fresh[i])
        elif key in known:
            records.append(known[key])
        else:  # a duplicate of an item evaluated in this run
            records.append(fresh[first_of[key]])
    values = pd.DataFrame.from_records(records, columns=names)
    for name in evaluator.score_columns():
        values[name] = pd.to_numeric(values[name], errors="coerce").astype(float)
    for name in evaluator.extra_columns():  # object: pandas 3 would make a None label NaN
        values[name] = pd.Series([record.get(name) for record in records], dtype=object)
    missing_scores = (
        int(np.isnan(values[evaluator.score_columns()].to_numpy(float)).any(axis=1).sum())
        if evaluator.score_columns()
        else 0
    )
    counts = {
        "items": len(keys),
        "computed": computed,
        "from_cache": served,
        "items_with_missing_scores": missing_scores,
    }
    return values, counts


@dataclass(frozen=True)
class EvaluationSettings:
    """How answers become items (``nrp.evaluators.items.build_items``): where their references
    come from (``references``: auto, collection, pseudo or none; pseudo-references are the
    ``pseudo_k`` best-graded documents of ``pseudo_dimension``), and whether results are kept
    in the evaluation cache beside the collection (``cache``)."""

    references: ReferenceSource = "auto"
    pseudo_dimension: str | None = None
    pseudo_k: int = 3
    cache: bool = True


def evaluate_answers(
    collection: Collection | str,
    answers: pd.DataFrame,
    evaluators: str | Sequence[str | Evaluator],
    settings: EvaluationSettings | None = None,
    *,
    progress: Progress | None = None,
    executor: Executor | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """Items from ``collection`` and ``answers``, evaluated (cache beside the collection).
    ``settings`` and ``overrides`` (its fields: ``references="pseudo"``, ``pseudo_k=1``,
    ``cache=False``): see ``EvaluationSettings``."""
    settings = settings_with(EvaluationSettings, settings, overrides)
    if isinstance(collection, str):
        collection = Collection.load(collection)
    items = build_items(
        collection, answers, settings.references, settings.pseudo_dimension, settings.pseudo_k
    )
    cache = settings.cache
    store = EvaluationCache(collection.path / EVALUATION_CACHE_FILE) if cache else None
    return evaluate(items, evaluators, store, collection, progress, executor)
