"""Fitting the guard's model (``nrp.rankers.guard_model.GuardModel``): the references its
features are computed with (``fluency_reference``, ``document_frequencies``) and the logistic fit
of a detector (``fit_logistic``, ``fit_guard_model``). ``nrp.training.guard_train`` fits the
packaged model with them; the ranker (``nrp.rankers.guard``) only reads a fitted one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import pairwise

import numpy as np
import pandas as pd

from nrp.rankers.guard_features import WORDS, content_terms
from nrp.rankers.guard_model import FEATURES, GuardModel, flagging_threshold
from nrp.rankers.text_pipeline import terrier_stopwords


def fluency_reference(
    texts: Sequence[str], frequent: int = 150, pair_docs: int = 3
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fluency reference of ``texts``: the ``frequent`` function words (Terrier's stopwords)
    of highest document frequency (ties by the word), and the pairs of them adjacent in at least
    ``pair_docs`` texts. Function words only: the order of "of the", "it is", "can be" is
    English, whatever the topic; pairs of topic words ("blood pressure") belong to one domain."""
    words_df: Counter[str] = Counter()
    pairs_df: Counter[str] = Counter()
    for text in texts:
        words = [w.lower() for w in WORDS.findall(text)]
        words_df.update(set(words))
        pairs_df.update({f"{a} {b}" for a, b in pairwise(words)})
    stopwords = terrier_stopwords()
    function = [w for w in words_df if w in stopwords]
    top = sorted(function, key=lambda w: (-words_df[w], w))[:frequent]
    keep = set(top)
    pairs = [p for p, n in pairs_df.items() if n >= pair_docs and set(p.split()) <= keep]
    return tuple(sorted(top)), tuple(sorted(pairs))


def document_frequencies(texts: Sequence[str]) -> tuple[int, dict[str, int]]:
    """The term reference of ``texts`` (``idf_new``, ``oov_new``): the number of distinct
    texts and, per stemmed content term (``content_terms``), the number of them it occurs in."""
    distinct = list(dict.fromkeys(texts))
    counts: Counter[str] = Counter()
    for text in distinct:
        counts.update(set(content_terms(text)))
    return len(distinct), dict(sorted(counts.items()))


def balanced_weights(y: np.ndarray) -> np.ndarray:
    """Row weights that give the two classes of ``y`` (0/1) equal mass, ``len(y)`` in all."""
    n_pos, n_neg = max(1, int(y.sum())), max(1, int(len(y) - y.sum()))
    return np.where(y == 1, 0.5 / n_pos, 0.5 / n_neg) * len(y)


#: fit_logistic: a column spreading less than this over the fitted rows is constant up to float
#: rounding and gets weight 0. All-MiniLM-L6-v2 has such dimensions (answer_like's embedding:
#: one spreads 1.1e-8, values about -4e-8, where the others spread 0.026 or more); the
#: standardised fit weighed it 2.9e7, so a kernel or precision that rounds it otherwise (another
#: CPU's BLAS, a GPU) would move answer_like by up to a logit. Float32 embeddings of one text move
#: by about 1e-7 with their batch: a spread under 1e-6 is not the text's.
FLAT_COLUMN = 1.0e-6


def fit_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """Weights, then the intercept, of an L2-penalised logistic regression of ``y`` (0/1) on the
    columns of ``x`` with row weights, by Newton's method on standardised columns (the
    intercept not penalised; deterministic). A column that spreads less than ``FLAT_COLUMN``
    over the rows gets weight 0: standardised, its rounding would weigh as much as a feature."""
    mean, spread = x.mean(axis=0), x.std(axis=0)
    flat = spread < FLAT_COLUMN
    scale = np.where(flat, 1.0, spread)
    z = np.hstack([np.where(flat, 0.0, (x - mean) / scale), np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], float(l2))
    penalty[-1] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(z @ beta, -60, 60)))
        gradient = z.T @ (weight * (p - y)) + penalty * beta
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    coef = beta[:-1] / scale
    return np.append(coef, beta[-1] - (coef * mean).sum())


def fit_guard_model(
    table: pd.DataFrame,
    is_answer: np.ndarray,
    reference: tuple[tuple[str, ...], tuple[str, ...]],
    *,
    features: Sequence[str] = FEATURES,
    l2: float = 1.0,
    max_flagged: float = 0.01,
    terms: tuple[int, Mapping[str, int]] = (0, {}),
) -> GuardModel:
    """A guard fitted on ``table`` (``GuardFeatures.frame`` rows) where ``is_answer`` says which
    rows are real answers: the two classes weighted to equal mass, the threshold the largest
    probability that flags at most ``max_flagged`` of the real answers. ``reference``: the
    fluency reference the table was computed with; ``terms``: its term reference
    (``document_frequencies``)."""
    y = np.asarray(is_answer, dtype=float)
    x = table[list(features)].to_numpy(dtype=float)
    beta = fit_logistic(x, y, balanced_weights(y), l2)
    model = GuardModel(tuple(features), tuple(float(b) for b in beta[:-1]), float(beta[-1]), 0.5,
                       reference[0], reference[1], terms[0], dict(terms[1]))  # fmt: skip
    answers = model.probability(x)[y == 1]
    threshold = flagging_threshold(answers, max_flagged) if len(answers) else 0.5
    return replace(model, threshold=threshold)
