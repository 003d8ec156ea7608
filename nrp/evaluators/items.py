"""Items: answers joined with what evaluators read beside them.

``build_items(collection, answers)`` gives one row per answer with ``ITEM_COLUMNS``:
the topic's question; references (the collection's reference answers when the query has them,
otherwise pseudo-references: the top-graded judged documents of the query in one dimension,
marked ``reference_kind = "pseudo-reference"`` so no table mistakes them for real references);
and context documents (the judged documents with text of the query, D_q), which reference-free
heuristics check the answer against. ``items_from_frame`` takes items built elsewhere (the
meta-evaluation sets), filling absent columns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
import pandas as pd

from nrp.collection.collection import Collection
from nrp.errors import ConfigError, NrpError
from nrp.evaluators.base import ITEM_COLUMNS
from nrp.tables import require_columns

ReferenceSource = Literal["auto", "collection", "pseudo", "none"]
REFERENCE_SOURCES = ("auto", "collection", "pseudo", "none")
REFERENCE = "reference"
PSEUDO_REFERENCE = "pseudo-reference"


def _texts(values: Iterable[Any]) -> tuple[str, ...]:
    return tuple(str(v) for v in values if v is not None and str(v).strip())


def pseudo_references(
    collection: Collection, dimension: str | None = None, k: int = 3
) -> dict[str, tuple[str, ...]]:
    """qid -> texts of up to ``k`` judged documents with the query's highest grade in
    ``dimension`` (default: the collection's first), ordered by docno. Queries whose best
    grade is the scale's lowest (nothing good was judged) get none."""
    if k < 1:
        raise ConfigError(f"pseudo-references need k >= 1, got {k}")
    dimension = dimension or next(iter(collection.dimensions))
    qrels = collection.qrels(dimension)
    qrels = qrels.assign(qid=qrels["qid"].astype(str), docno=qrels["docno"].astype(str))
    docs = collection.candidates()[["qid", "docno", "text"]].astype({"qid": str, "docno": str})
    judged = qrels.merge(docs, on=["qid", "docno"], how="inner")
    if judged.empty:
        return {}
    lowest = qrels["label"].min()
    out: dict[str, tuple[str, ...]] = {}
    for qid, group in judged.groupby("qid", sort=False):
        best = group["label"].max()
        if best <= lowest:
            continue
        top = group[group["label"] == best].sort_values("docno").head(k)
        out[str(qid)] = _texts(top["text"])
    return out


def build_items(
    collection: Collection,
    answers: pd.DataFrame,
    references: ReferenceSource = "auto",
    pseudo_dimension: str | None = None,
    pseudo_k: int = 3,
    contexts: bool = True,
) -> pd.DataFrame:
    """Items for ``answers`` (answer_id, qid, text; llm, prompt, sample kept when present).

    ``references``: ``auto`` (the collection's references where a query has them, else
    pseudo-references), ``collection`` (real references only), ``pseudo`` (pseudo-references
    only) or ``none``. ``contexts``: attach D_q's texts."""
    if references not in REFERENCE_SOURCES:
        raise ConfigError(
            f"unknown reference source {references!r} (use one of {', '.join(REFERENCE_SOURCES)})"
        )
    require_columns(answers, ("answer_id", "qid", "text"), "answers")
    frame = answers.reset_index(drop=True).copy()
    frame["qid"] = frame["qid"].astype(str)
    frame["answer_id"] = frame["answer_id"].astype(str)
    topics = collection.topics.astype({"qid": str}).set_index("qid")["query"]
    unknown = sorted(set(frame["qid"]) - set(topics.index))
    if unknown:
        raise NrpError(
            f"{len(unknown)} answer qid(s) are not topics of collection {collection.name!r}: "
            f"{', '.join(unknown[:5])}"
        )
    frame["question"] = frame["qid"].map(topics).fillna("").astype(str)

    real: dict[str, tuple[str, ...]] = {}
    if references in ("auto", "collection"):
        refs = collection.references
        if len(refs):
            for qid, group in refs.groupby(refs["qid"].astype(str), sort=False):
                texts = _texts(group["text"])
                if texts:
                    real[str(qid)] = texts
    pseudo: dict[str, tuple[str, ...]] = {}
    if references == "pseudo" or (references == "auto" and set(frame["qid"]) - set(real)):
        pseudo = pseudo_references(collection, pseudo_dimension, pseudo_k)
    ref_column, kind_column = [], []
    for qid in frame["qid"]:
        if qid in real:
            ref_column.append(real[qid])
            kind_column.append(REFERENCE)
        elif qid in pseudo:
            ref_column.append(pseudo[qid])
            kind_column.append(PSEUDO_REFERENCE)
        else:
            ref_column.append(())
            kind_column.append("")
    frame["references"] = ref_column
    frame["reference_kind"] = kind_column

    context_of: dict[str, tuple[str, ...]] = {}
    if contexts:
        candidates = collection.candidates()
        for qid, group in candidates.groupby(candidates["qid"].astype(str), sort=False):
            context_of[str(qid)] = _texts(group["text"])
    frame["contexts"] = [context_of.get(qid, ()) for qid in frame["qid"]]
    frame["text"] = frame["text"].map(lambda t: "" if _missing(t) else str(t))
    return _ordered(frame)


def items_from_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Items from a frame that has at least answer_id, text (qid, question, references,
    contexts optional; references / contexts may be a string or a list of strings)."""
    require_columns(frame, ("answer_id", "text"), "items")
    out = frame.reset_index(drop=True).copy()
    out["answer_id"] = out["answer_id"].astype(str)
    out["qid"] = out["qid"].astype(str) if "qid" in out else out["answer_id"]
    out["question"] = out["question"].fillna("").astype(str) if "question" in out else ""
    out["text"] = out["text"].map(lambda t: "" if _missing(t) else str(t))
    for column in ("references", "contexts"):
        if column not in out:
            out[column] = [()] * len(out)
        else:
            out[column] = [_as_texts(v) for v in out[column]]
    if "reference_kind" not in out:
        out["reference_kind"] = [REFERENCE if refs else "" for refs in out["references"]]
    return _ordered(out)


def _as_texts(value: Any) -> tuple[str, ...]:
    if _missing(value):
        return ()
    if isinstance(value, str):
        return _texts([value])
    return _texts(value)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    rest = [c for c in frame.columns if c not in ITEM_COLUMNS]
    return frame[list(ITEM_COLUMNS) + rest]
