"""Passages for documents longer than a model reads, and the parameters every neural ranker
declares (``batch``, ``device``, ``dtype``, ``verbose``; ``passages``, ``stride``, ``aggregate``),
so the dense, ColBERT, T5 and cross-encoder rankers spell and apply them the same way.

- ``split_passages(text, length, stride)``, ``explode_passages(frame, length, stride)``,
  ``aggregate_passages(scores, owner, n_docs, how)``: score passages, keep one score per document
- ``score_counting_cuts(frame, score_rows, length, ...)`` and ``report_cuts(...)``: the same for
  a model that cuts its inputs at a token limit, with one flag per row saying whether any of its
  text was cut, and the one warning that reports it (monoT5, the cross-encoder)
- ``neural_params(batch=...)`` / ``passage_params()``: the ``Param`` entries for a RankerInfo
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nrp.errors import ConfigError
from nrp.models.device import DTYPES
from nrp.spec import Param

if TYPE_CHECKING:
    from nrp.rankers.registry import RankerSpec

AGGREGATES = ("max", "first")


# -- passages -----------------------------------------------------------------------------------
def split_passages(text: str, length: int, stride: int = 0) -> list[str]:
    """Split ``text`` into windows of ``length`` words, starting every ``stride`` words
    (``stride=0``: half the length, the overlapping windows of MaxP). The last window ends at the
    text's end; ``length=0`` keeps the whole text as one passage. Never empty: an empty text gives
    one empty passage, so every document keeps a score."""
    if length <= 0:
        return [text]
    stride = stride if stride > 0 else max(1, length // 2)
    words = text.split()
    if len(words) <= length:
        return [" ".join(words)] if words else [text]
    passages = []
    start = 0
    while True:
        passages.append(" ".join(words[start : start + length]))
        if start + length >= len(words):
            break
        start += stride
    return passages


def count_passages(text: str, length: int, stride: int = 0) -> int:
    """How many passages ``split_passages`` cuts ``text`` into, without cutting it."""
    if length <= 0:
        return 1
    stride = stride if stride > 0 else max(1, length // 2)
    words = len(text.split())
    return 1 if words <= length else -(-(words - length) // stride) + 1


def spec_passages(spec: str | RankerSpec, texts: Sequence[str]) -> int:
    """The passages a ranker spec cuts ``texts`` (answers) into, summed over the spec and the
    rankers nested in it (``guard:ranker=``, ``fuse:rankers=``): ``count_passages`` for each
    ranker with ``passages=N`` (N > 0, ``aggregate=max``), nothing for one that reads a text
    whole or only its first passage. What a request costs a neural ranker beyond one model
    input per answer, known before anything is computed."""
    from nrp.rankers.registry import RankerSpec

    parsed = RankerSpec.parse(spec)
    params = parsed.complete_params()
    total = 0
    length = int(params.get("passages", 0) or 0)
    if length > 0 and params.get("aggregate", "max") != "first":
        stride = int(params.get("stride", 0) or 0)
        total += sum(count_passages(str(t), length, stride) for t in texts)
    return total + sum(spec_passages(part, texts) for part in parsed.parts())


def explode_passages(
    frame: pd.DataFrame, length: int, stride: int = 0, aggregate: str = "max"
) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per passage (same columns, ``text`` replaced by the passage) and, for each
    passage row, the index of the frame row it came from. With ``aggregate=first`` only each
    document's first passage is kept (nothing else would count)."""
    check_aggregate(aggregate)
    rows, owner = [], []
    texts = frame["text"].fillna("").astype(str).tolist()
    for i, text in enumerate(texts):
        passages = split_passages(text, length, stride)
        if aggregate == "first":
            passages = passages[:1]
        rows.extend(passages)
        owner.extend([i] * len(passages))
    owner_array = np.asarray(owner, dtype=np.int64)
    exploded = frame.iloc[owner_array].reset_index(drop=True).assign(text=rows)
    return exploded, owner_array


def aggregate_passages(
    scores: np.ndarray, owner: np.ndarray, n_docs: int, how: str = "max"
) -> np.ndarray:
    """One score per document from its passages' scores: ``max`` (MaxP: a document is as
    relevant as its best passage) or ``first`` (FirstP: the opening passage)."""
    check_aggregate(how)
    scores = np.asarray(scores, dtype=float)
    out = np.full(n_docs, -np.inf)
    if how == "max":
        np.maximum.at(out, owner, scores)
    else:
        first = np.full(n_docs, -1)
        for position in range(len(owner) - 1, -1, -1):
            first[owner[position]] = position
        out = scores[first]
    return out


def score_with_passages(
    frame: pd.DataFrame,
    score: Callable[[pd.DataFrame], np.ndarray],
    length: int,
    stride: int = 0,
    aggregate: str = "max",
) -> np.ndarray:
    """Score a (qid, query, docno, text) frame passage by passage and aggregate per row; with
    ``length=0`` this is just ``score(frame)``. The one entry point rankers call."""
    if length <= 0:
        return np.asarray(score(frame), dtype=float)
    exploded, owner = explode_passages(frame, length, stride, aggregate)
    return aggregate_passages(score(exploded), owner, len(frame), aggregate)


def score_counting_cuts(
    frame: pd.DataFrame,
    score_rows: Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray]],
    length: int,
    stride: int = 0,
    aggregate: str = "max",
) -> tuple[np.ndarray, np.ndarray]:
    """``score_with_passages`` for a scorer that also says which of its inputs it cut at the
    model's token limit (``score_rows(frame) -> (scores, cut)``): the document scores and, per
    row of ``frame``, whether any of its text (any of its passages) was cut."""
    if length <= 0:
        scores, cut = score_rows(frame)
        return np.asarray(scores, dtype=float), np.asarray(cut, dtype=bool)
    exploded, owner = explode_passages(frame, length, stride, aggregate)
    scores, cut = score_rows(exploded)
    truncated = np.zeros(len(frame), dtype=bool)
    np.logical_or.at(truncated, owner, np.asarray(cut, dtype=bool))
    return aggregate_passages(scores, owner, len(frame), aggregate), truncated


def report_cuts(
    log: logging.Logger, spec: str, truncated: np.ndarray, max_input: int, length: int
) -> None:
    """One warning when documents were cut at the model's input limit: how many, where, and
    what to do (``passages=N``, or shorter passages)."""
    if not truncated.any():
        return
    what = f"documents (in {length}-word passages)" if length > 0 else "documents"
    hint = "a shorter passages=N" if length > 0 else "passages=N to score them whole"
    log.warning(
        "%s: %d of %d %s were cut at %d input tokens (the model reads no further); use %s",
        spec,
        int(truncated.sum()),
        len(truncated),
        what,
        max_input,
        hint,
    )


def check_aggregate(how: str) -> None:
    if how not in AGGREGATES:
        raise ConfigError(f"unknown passage aggregate {how!r} (use one of {', '.join(AGGREGATES)})")


# -- shared Param entries -----------------------------------------------------------------------
def neural_params(batch: int = 32) -> dict[str, Param]:
    """``batch``, ``device``, ``dtype``, ``verbose`` as every neural ranker declares them."""
    return {
        "batch": Param(
            int, batch, "texts per forward pass (sorted by length to save padding)", minimum=1
        ),
        "device": Param(str, "auto", "auto (cuda when available), cpu or cuda[:N]"),
        "dtype": Param(str, "fp32", "fp32; fp16 or bf16 on a GPU only", DTYPES),
        "verbose": Param(bool, True, "progress bar on a terminal"),
    }


def passage_params() -> dict[str, Param]:
    """``passages``, ``stride``, ``aggregate``: how long documents are split and re-joined."""
    return {
        "passages": Param(
            int,
            0,
            "split documents into passages of N words (0: whole text, "
            "truncated at the model's maximum length)",
            minimum=0,
        ),
        "stride": Param(
            int, 0, "words between passage starts (0: half the passage length)", minimum=0
        ),
        "aggregate": Param(
            str, "max", "document score from its passages: max (MaxP) or first (FirstP)", AGGREGATES
        ),
    }
