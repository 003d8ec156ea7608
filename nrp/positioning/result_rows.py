"""The arithmetic of result rows (r under the tie rule, NRP, the weighted combined NRP) on plain
arrays, shared by ``result_frame`` (``score_answers``' rows, a pandas frame) and
``result_rows`` (the same rows as lists of Python values, for a caller with a few answers: the
service's ``POST /v1/score``, where building and reading frames cost more than the arithmetic).

Both build their numbers with the functions here, so a row's values are the same bits either
way (a test compares them)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nrp.collection.manifest import COMBINED
from nrp.ranks import nrp_value, rank_from_counts

#: the values of a position row (``POSITION_COLUMNS``) that rows are computed from
POSITION_FIELDS = ("score", "above", "ties", "strict", "n_docs")


def dimension_values(
    score: np.ndarray,
    above: np.ndarray,
    ties: np.ndarray,
    strict: np.ndarray,
    n_docs: np.ndarray,
    tie_mode: str,
) -> dict[str, np.ndarray]:
    """One dimension's values for every answer: score, r under the tie rule, |D_q|, ties and
    NRP."""
    if tie_mode == "strict":
        rank = np.asarray(strict, dtype=np.float64)
    else:
        rank = rank_from_counts(above, ties, tie_mode)
    n_docs = np.asarray(n_docs, dtype=np.int64)
    return {
        "score": np.asarray(score, dtype=np.float64),
        "rank": np.asarray(rank, dtype=np.float64),
        "n_docs": n_docs,
        "ties": np.asarray(ties, dtype=np.int64),
        "nrp": np.asarray(nrp_value(rank, n_docs), dtype=np.float64)
        if len(n_docs)
        else np.zeros(0),
    }


@dataclass
class ResultArrays:
    """(answers, dimensions + 1) arrays of the result rows' computed columns: a row per
    dimension, then the combined row (``COMBINED``, no ranker, score, rank or ties)."""

    dimension: np.ndarray
    ranker: np.ndarray
    score: np.ndarray
    rank: np.ndarray
    n_docs: np.ndarray
    ties: np.ndarray
    no_ties: np.ndarray  # True where ``ties`` is missing (the combined rows)
    nrp: np.ndarray


def result_arrays(
    n: int,
    dimensions: Sequence[tuple[str, str, Mapping[str, np.ndarray]]],
    weight_of: Mapping[str, float],
) -> ResultArrays:
    """The computed columns of ``n`` answers' rows from each dimension's (name, ranker spec,
    ``dimension_values``). The combined NRP is the weighted sum of the dimensions' NRP in
    dimension order with compensated (Kahan) summation, missing values skipped: the sum pandas'
    ``groupby(...).sum()`` computes, bit for bit."""
    width = len(dimensions) + 1
    out = ResultArrays(
        dimension=np.empty((n, width), dtype=object),
        ranker=np.empty((n, width), dtype=object),
        score=np.full((n, width), np.nan),
        rank=np.full((n, width), np.nan),
        n_docs=np.zeros((n, width), dtype=np.int64),
        ties=np.zeros((n, width), dtype=np.int64),
        no_ties=np.zeros((n, width), dtype=bool),
        nrp=np.zeros((n, width)),
    )
    total, compensation = np.zeros(n), np.zeros(n)
    for order, (name, spec, values) in enumerate(dimensions):
        out.dimension[:, order], out.ranker[:, order] = name, spec
        out.score[:, order], out.rank[:, order] = values["score"], values["rank"]
        out.n_docs[:, order], out.ties[:, order] = values["n_docs"], values["ties"]
        out.nrp[:, order] = values["nrp"]
        weighted = values["nrp"] * weight_of.get(name, np.nan)
        y = weighted - compensation
        t = total + y
        c = t - total - y
        c[np.isnan(c) & ~np.isnan(weighted)] = 0.0  # an infinite term: no compensation
        kept = ~np.isnan(weighted)
        total = np.where(kept, t, total)
        compensation = np.where(kept, c, compensation)
    out.dimension[:, -1], out.ranker[:, -1] = COMBINED, ""
    out.n_docs[:, -1], out.nrp[:, -1] = out.n_docs[:, 0], total
    out.no_ties[:, -1] = True
    return out


def _plain(values: list[Any]) -> list[Any]:
    """Python floats with NaN as None (what JSON and the stored tables write as null)."""
    return [None if isinstance(v, float) and math.isnan(v) else v for v in values]


def result_rows(
    answers: Sequence[Mapping[str, Any]],
    positions: Mapping[str, tuple[str, Sequence[Sequence[Any]]]],
    tie_mode: str,
    weight_of: Mapping[str, float],
) -> list[list[Any]]:
    """``RESULT_COLUMNS`` rows per (answer, dimension), then a combined row per answer, in
    answer order, as lists of Python values (a missing value: None): the rows ``result_frame``
    builds, without a frame. ``answers``: records with answer_id, llm, prompt, qid, sample;
    ``positions``: dimension -> (ranker spec, one ``POSITION_COLUMNS`` tuple per answer, in
    the answers' order); ``weight_of``: normalised weights (``normalised_weights``)."""
    n = len(answers)
    if not n:
        return []
    dimensions = []
    for name, (spec, found) in positions.items():
        columns = np.array([row[2:7] for row in found], dtype=np.float64).reshape(n, 5)
        score, above, ties, strict, n_docs = columns.T
        values = dimension_values(score, above, ties, strict, n_docs, tie_mode)
        dimensions.append((name, spec, values))
    arrays = result_arrays(n, dimensions, weight_of)
    width = len(dimensions) + 1
    cells = zip(
        arrays.dimension.ravel().tolist(),
        arrays.ranker.ravel().tolist(),
        _plain(arrays.score.ravel().tolist()),
        _plain(arrays.rank.ravel().tolist()),
        arrays.n_docs.ravel().tolist(),
        [None if missing else t for t, missing in
         zip(arrays.ties.ravel().tolist(), arrays.no_ties.ravel().tolist(), strict=True)],
        _plain(arrays.nrp.ravel().tolist()),
        strict=True,
    )  # fmt: skip
    rows = []
    for number, computed in enumerate(cells):
        answer = answers[number // width]
        head = [answer[c] for c in ("answer_id", "llm", "prompt", "qid", "sample")]
        rows.append([*head, *computed])
    return rows
