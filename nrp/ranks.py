"""Where an answer lands among D_q: the rank r, the tie rules and NRP, for every text ranked
among D_q (answers in ``nrp.positioning``, validation's degenerate texts and real answers in
``nrp.validation.validity``, leave-one-out documents in ``nrp.analysis.agreement``).

NRP grades an answer a by r, the zero-based rank of a among the judged documents D_q of its
query: ``r = above + tie term`` with ``above`` the number of documents scored strictly higher
than a and ``ties`` the number scored exactly the same. ``NRP = 1 - r / |D_q|``, in [0, 1]: 1 when
no document is above a, 0 when every document is above it.

Tie rules (``TieMode``):

- ``mid`` (default): ``r = above + ties / 2``, the mid-rank. Among t tied documents the answer is
  in the middle, the expectation of its rank under a random order of the ties; symmetric, so a
  ranker that ties everything gives every answer NRP 0.5 instead of 1 or 0.
- ``optimistic``: ``r = above``, the answer goes above its ties.
- ``pessimistic``: ``r = above + ties``, the answer goes below its ties.
- ``strict``: the rank a full re-ranking gives the answer, as the source study's scripts
  (webis-de/ecir25-ranking-generated-answers, ``indexing/querywise_indexing_T5.py``) computed it:
  the answer row is appended after D_q (``pd.concat([passages_for_query, answer])``), the ranker
  scores the frame and PyTerrier's ``add_ranks`` assigns ``rank`` with
  ``groupby('qid')['score'].rank(ascending=False, method='first') - 1``. ``method='first'``
  breaks ties by position in the frame, earlier rows first, so the appended answer goes below
  every document with exactly its score: ``r = above + ties``. Numerically the pessimistic
  rule; kept as its own name because it is defined by what the deterministic sort did (the
  reference mode, ``full_rerank=True``, takes r from the ``rank`` column of the ranker's
  output, and the tests check that the fast mode's ``above + ties`` equals it).

How equal is "tied": each ranker declares a score tolerance (``Ranker.score_tolerance``, a
relative tolerance; two scores a and d are tied when ``|a - d| <= tol * max(1, |a|)``).

- Lexical models, the random order and every ranker without a model: tolerance 0, exact
  comparison. Their scores come from the same code path: document scores are stored as float64
  and read back bit for bit, and the lexical models score D_q and the answer with the same array
  operations on the same statistics (``LexicalIndex.with_extra`` lays the answer out exactly as a
  fresh index of D_q plus the answer would), so equal inputs give equal floats. An epsilon there
  would only declare genuinely different scores equal.
- Neural models (dense, ColBERT, monoT5, duoT5): a text's score is not bit-for-bit independent
  of the batch it is scored in. Padding to the batch's longest row changes the shapes of the
  matrix products, and fp32 accumulation in another order moves the result by ~1e-7 (relative);
  fp16/bf16 on a GPU by far more. The fast mode scores the answer in another batch than D_q, so
  an answer that copies a document verbatim would, compared exactly, land a hair above or below
  its copy, where the reference mode (same text, other batch again) may put it on the other
  side. The tolerance per dtype (``nrp.models.device.SCORE_TOLERANCE``: fp32 1e-5, fp16 5e-3,
  bf16 2e-2; ``AUTOCAST_TOLERANCE`` 2e-3 for bf16 under autocast) is well above that noise
  and well below the gaps between the scores of different texts, so both modes see the same
  ties. The cost: two different texts scored within the tolerance count as tied, which for
  these models is what they are (the model cannot separate them beyond its own rounding).

The same rule, with the same tolerance, decides ``above`` and ``ties`` in the fast mode, in the
reference mode (which therefore takes ``strict`` from these counts, not from ``add_ranks``, for a
ranker with a tolerance), in the leave-one-out agreement and in validation (a degenerate text's
NRP under ``mid``, and each judged document's win over it: 1 above, 0.5 tied, 0 below).
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from nrp.errors import ConfigError

#: the tie rules, written once: the CLI's --ties choices, the service's schemas, the ``nrp``
#: evaluator's parameter and agreement all read them from here
TieMode = Literal["mid", "optimistic", "pessimistic", "strict"]
TIE_MODES: tuple[str, ...] = get_args(TieMode)
DEFAULT_TIE_MODE: TieMode = "mid"


def check_tie_mode(mode: str) -> TieMode:
    """The mode, or a ConfigError naming the valid ones."""
    if mode not in TIE_MODES:
        raise ConfigError(f"unknown tie rule {mode!r} (use one of {', '.join(TIE_MODES)})")
    return mode  # type: ignore[return-value]


def tie_margin(score: float | np.ndarray, tolerance: float = 0.0):
    """The absolute distance within which a score is tied with ``score``:
    ``tolerance * max(1, |score|)`` (0 for exact rankers)."""
    if tolerance < 0:
        raise ValueError(f"a score tolerance cannot be negative, got {tolerance}")
    return tolerance * np.maximum(1.0, np.abs(score))


def position(
    doc_scores: np.ndarray, answer_score: float, tolerance: float = 0.0
) -> tuple[int, int]:
    """(above, ties): documents scored above the answer by more than the tie margin, and within
    it (exactly equal when ``tolerance`` is 0)."""
    scores = np.asarray(doc_scores, dtype=np.float64)
    above, ties = positions(
        scores, np.zeros(len(scores), dtype=np.int64), np.array([answer_score]), tolerance
    )
    return int(above[0]), int(ties[0])


def compare(
    doc_scores: np.ndarray, answer_scores: float | np.ndarray, tolerance: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Per document, whether it is scored above the answer by more than the tie margin, and
    whether within it (exactly equal when ``tolerance`` is 0): boolean arrays. ``answer_scores``:
    one score for every document, or one per document (its own answer's)."""
    return _compared(_ranked(doc_scores), _ranked(answer_scores), tolerance)


def _ranked(scores: float | np.ndarray) -> np.ndarray:
    """The scores as float64, or a ValueError where one is NaN (the ranker failed)."""
    values = np.asarray(scores, dtype=np.float64)
    if np.isnan(values).any():
        raise ValueError("NaN score: a NaN cannot be ranked (the ranker failed)")
    return values


def _compared(
    scores: np.ndarray, own: np.ndarray, tolerance: float
) -> tuple[np.ndarray, np.ndarray]:
    """``compare`` of checked float64 arrays."""
    if tolerance == 0.0:
        return scores > own, scores == own
    margin = tie_margin(own, tolerance)
    return scores > own + margin, np.abs(scores - own) <= margin


def positions(
    doc_scores: np.ndarray,
    owners: np.ndarray,
    answer_scores: np.ndarray,
    tolerance: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``position`` of many answers at once: ``doc_scores[k]`` is a document of the D_q of
    answer ``owners[k]``; (above, ties) per answer, as int64 arrays."""
    scores, answers = _ranked(doc_scores), _ranked(answer_scores)
    higher, tied = _compared(scores, answers[owners], tolerance)
    count = len(answers)
    return (
        np.bincount(owners, weights=higher, minlength=count).astype(np.int64),
        np.bincount(owners, weights=tied, minlength=count).astype(np.int64),
    )


def rank_from_counts(above: int | np.ndarray, ties: int | np.ndarray, mode: str = DEFAULT_TIE_MODE):
    """r under a tie rule (float: the mid-rank is a half-integer when ties are odd)."""
    mode = check_tie_mode(mode)
    above = np.asarray(above, dtype=np.float64)
    ties = np.asarray(ties, dtype=np.float64)
    if mode == "optimistic":
        r = above
    elif mode == "mid":
        r = above + ties / 2.0
    else:  # pessimistic; strict (the appended answer goes below its ties, see module docstring)
        r = above + ties
    return r if r.ndim else float(r)


def nrp_value(rank: float | np.ndarray, n_docs: int | np.ndarray):
    """``1 - r / |D_q|`` (undefined for an empty D_q: such answers are never ranked)."""
    rank = np.asarray(rank, dtype=np.float64)
    n = np.asarray(n_docs, dtype=np.float64)
    if (n <= 0).any():
        raise ValueError("NRP needs at least one judged document (|D_q| > 0)")
    value = 1.0 - rank / n
    return value if value.ndim else float(value)
