"""Review projects made from nrp outputs: a collection, generated answers, a judge's labels.

- ``rank_items``: per query, k candidates drawn from the query's answers and/or its judged
  documents, shuffled with a seed (a ``random.Random`` seeded by the seed and the qid, so a
  query's draw does not depend on the other queries), shown as c1..ck with their sources
  hidden: a reviewer who knew which system wrote an answer would rank the system.
- ``grade_items``: one item per answer, graded in the chosen dimensions on the collection's
  declared scales (labels and meanings from the manifest, ``nrp.collection.labels``).
- ``verify_items``: the answers whose judge label has a confidence under ``threshold`` (or no
  confidence, or no label: what ``judge.review`` flags), with the question, the reference and
  the answer; the choices are TRUE / FALSE / NOT GIVEN, or a rubric's scores (``choices``
  1..5, ``label_column`` a ``judge.CRITERION`` column, ``confidence_column`` any column whose
  low values call for a look, such as ``judge.agreement``). Numeric labels are compared as
  the collection's labels are (4.0 is "4").

``create_review_project`` puts the chosen kinds into one project. The texts come from
``nrp.evaluators.items.build_items`` (the question, the collection's references or
pseudo-references), the judge's labels from an ``nrp evaluate`` output read by
``nrp.meta.readers.read_table``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.collection.collection import Collection
from nrp.collection.labels import normalize_label
from nrp.errors import ConfigError, InputError
from nrp.evaluators.items import build_items
from nrp.meta.readers import read_table
from nrp.review.project import KINDS, TFN_LABELS, ReviewItem, ReviewProject
from nrp.settings import settings_with
from nrp.tables import require_columns

LABEL_COLUMN = "judge.label"
CONFIDENCE_COLUMN = "judge.confidence"


def scales_of(collection: Collection, dimensions: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The declared label scales of ``dimensions``: description and labels with meanings."""
    out = {}
    for dimension in dimensions:
        scale = collection.dimensions.get(dimension)
        if scale is None:
            raise ConfigError(
                f"collection {collection.name!r} has no dimension {dimension!r} "
                f"(it has: {', '.join(collection.dimensions)})"
            )
        if scale.bins:
            raise ConfigError(f"dimension {dimension!r} is binned: it has no labels to choose")
        out[dimension] = {
            "description": scale.description,
            "grades": [
                {"label": g.label, "meaning": g.meaning}
                for g in scale.grades.values()
                if not g.excluded
            ],
        }
    return out


def rank_items(
    collection: Collection,
    answers: pd.DataFrame | None,
    documents: bool,
    k: int,
    seed: int,
) -> list[ReviewItem]:
    """One ``rank`` item per query with at least two candidates (see the module docstring)."""
    if k < 2:
        raise ConfigError(f"a ranking needs k >= 2 candidates, got {k}")
    pools: dict[str, list[tuple[str, str, str]]] = {}  # qid -> (kind, id, text)
    if answers is not None:
        for row in answers.itertuples():
            pools.setdefault(str(row.qid), []).append(("answer", str(row.answer_id), row.text))
    if documents:
        for row in collection.candidates().itertuples():
            pools.setdefault(str(row.qid), []).append(("document", str(row.docno), row.text))
    questions = collection.topics.astype({"qid": str}).set_index("qid")["query"]
    items = []
    for qid in questions.index:
        pool = pools.get(qid, [])
        if len(pool) < 2:
            continue
        drawn = list(pool)
        random.Random(f"{seed}:{qid}").shuffle(drawn)
        drawn = drawn[:k]
        cids = [f"c{i + 1}" for i in range(len(drawn))]
        items.append(
            ReviewItem(
                id=f"rank:{qid}",
                kind="rank",
                qid=qid,
                shown={
                    "question": str(questions[qid]),
                    "candidates": [
                        {"cid": c, "text": str(t)} for c, (_, _, t) in zip(cids, drawn, strict=True)
                    ],
                },
                hidden={
                    "sources": {
                        c: {"kind": kind, "id": source}
                        for c, (kind, source, _) in zip(cids, drawn, strict=True)
                    }
                },
            )
        )
    return items


def _first_reference(references: Any) -> str:
    return str(references[0]) if len(references) else ""


def grade_items(items: pd.DataFrame, dimensions: Sequence[str]) -> list[ReviewItem]:
    """One ``grade`` item per answer of ``items`` (``build_items`` rows)."""
    return [
        ReviewItem(
            id=f"grade:{row.answer_id}",
            kind="grade",
            qid=str(row.qid),
            shown={
                "question": row.question,
                "answer": row.text,
                "dimensions": list(dimensions),
            },
            hidden={"answer_id": str(row.answer_id)},
        )
        for row in items.itertuples()
    ]


def verify_items(
    items: pd.DataFrame,
    evaluations: pd.DataFrame,
    threshold: float,
    label_column: str = LABEL_COLUMN,
    confidence_column: str = CONFIDENCE_COLUMN,
    choices: Sequence[str] = TFN_LABELS,
) -> list[ReviewItem]:
    """One ``verify`` item per answer whose judge label is missing or has a confidence under
    ``threshold``, in the order of ``evaluations``."""
    path = evaluations.attrs.get("path")
    require_columns(
        evaluations,
        ("answer_id", label_column, confidence_column),
        path or "evaluations",
        hint="an `nrp evaluate` judge output?",
    )
    by_id = items.set_index("answer_id")
    out = []
    for row in evaluations.to_dict("records"):
        answer_id = str(row["answer_id"])
        label = row[label_column]
        missing = label is None or (isinstance(label, float) and math.isnan(label))
        label = None if missing or str(label).strip() == "" else normalize_label(label)
        confidence = row[confidence_column]
        confidence = None if confidence is None or math.isnan(float(confidence)) else confidence
        if label is not None and confidence is not None and float(confidence) >= threshold:
            continue
        if answer_id not in by_id.index:
            raise InputError(path, None, f"answer_id {answer_id!r} is not among the answers")
        item = by_id.loc[answer_id]
        out.append(
            ReviewItem(
                id=f"verify:{answer_id}",
                kind="verify",
                qid=str(item["qid"]),
                shown={
                    "question": item["question"],
                    "reference": _first_reference(item["references"]),
                    "answer": item["text"],
                    "judge_label": None if label is None else str(label),
                    "confidence": None if confidence is None else float(confidence),
                    "choices": list(choices),
                },
                hidden={"answer_id": answer_id},
            )
        )
    return out


@dataclass(frozen=True)
class ReviewSettings:
    """How ``create_review_project`` draws and shows its items (module docstring): reviews per
    item; rank: judged documents among the candidates (``documents``), ``k`` candidates drawn
    with ``seed``; grade: the ``dimensions`` (default: all of the collection's); verify: the
    judge's ``evaluations`` file, the answers whose ``confidence_column`` is under
    ``threshold``, their ``label_column`` and the reviewer's ``choices``."""

    reviews_per_item: int = 1
    documents: bool = False
    evaluations: str | Path | None = None
    dimensions: Sequence[str] | None = None
    k: int = 5
    seed: int = 0
    threshold: float = 0.5
    label_column: str = LABEL_COLUMN
    confidence_column: str = CONFIDENCE_COLUMN
    choices: Sequence[str] = TFN_LABELS


def create_review_project(
    name: str,
    kinds: Sequence[str],
    collection: Collection,
    reviewers: Sequence[str],
    answers: pd.DataFrame | None = None,
    settings: ReviewSettings | None = None,
    **overrides: Any,
) -> ReviewProject:
    """A project with the items of each of ``kinds`` (rank, grade, verify); ``settings`` (or
    its fields as keywords: ``k=5, seed=3``) say how (``ReviewSettings``)."""
    s = settings_with(ReviewSettings, settings, overrides)
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown or not kinds:
        raise ConfigError(f"review kinds must be among {', '.join(KINDS)}, got {list(kinds)}")
    needs_answers = [kind for kind in kinds if kind in ("grade", "verify")]
    if needs_answers and answers is None:
        raise ConfigError(f"{' and '.join(needs_answers)} review needs answers")
    if "rank" in kinds and answers is None and not s.documents:
        raise ConfigError("rank review needs answers, judged documents, or both")
    built = build_items(collection, answers, contexts=False) if answers is not None else None
    chosen = list(s.dimensions or collection.dimensions)
    scales: dict[str, dict[str, Any]] = {}
    items: list[ReviewItem] = []
    origin: dict[str, Any] = {"collection": collection.name}
    if "rank" in kinds:
        items += rank_items(collection, answers, s.documents, s.k, s.seed)
        origin.update(k=s.k, seed=s.seed)
    if "grade" in kinds:
        scales = scales_of(collection, chosen)
        items += grade_items(built, chosen)
    if "verify" in kinds:
        if s.evaluations is None:
            raise ConfigError(
                "verify review needs the judge's evaluations (an `nrp evaluate` output)"
            )
        table = read_table(s.evaluations, text_columns=["answer_id", "qid"])
        choices = [str(c) for c in s.choices]
        items += verify_items(
            built, table, s.threshold, s.label_column, s.confidence_column, choices
        )
        origin.update(
            evaluations=str(Path(s.evaluations).resolve()),
            threshold=s.threshold,
            label_column=s.label_column,
            confidence_column=s.confidence_column,
        )
    return ReviewProject(name, tuple(reviewers), s.reviews_per_item, tuple(items), scales, origin)
