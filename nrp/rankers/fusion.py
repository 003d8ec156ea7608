"""``fuse``: one ranking from several rankers, by a weighted sum of per-query normalised scores
(CombSUM over min-max scores) or by weighted reciprocal rank fusion (RRF).

Spec. The sub-rankers are joined by ``+``; a sub-ranker's own parameters are separated by ``;``
(a comma would end the ``rankers`` value, since spec parameters are split on commas)::

    fuse:rankers=bm25+dense                              equal weights, min-max sum
    fuse:rankers=bm25+dense:query=paraphrase,method=rrf,k=60
    fuse:rankers=bm25:k1=0.9+dense:query=narrative;passages=128,weights=0.3+0.7
    fuse:rankers=bm25+dense,weights=fit,dimension=relevance,folds=5,seed=0

(``dense;batch=8`` is read as ``dense:batch=8``; quote the spec in a shell, where ``;`` ends a
command). A ``fuse`` inside ``fuse`` is refused.

Why min-max per query. Rankers score on unrelated scales (BM25 is unbounded, cosine lies in
[-1, 1], monoT5 gives log-probabilities), and the scale moves from query to query, so raw scores
cannot be added. Min-max over the query's candidates maps each ranker's best document to 1 and its
worst to 0 (CombSUM over min-max scores: Fox & Shaw 1994, Lee 1997), so every ranker spans the
same range on every query and a weight is the share of that range it decides; it needs no
assumption about the shape of the score distribution (z-scores do) and keeps the fused scores of
D_q in [0, 1]. RRF (Cormack et al. 2009) uses ranks only: a document adds ``weight / (k + rank)``
per ranker.

Why this is pointwise for NRP. Normalising over the rows ranked together would make a document's
score move when an answer joins D_q (a new maximum rescales everyone). So the statistics are D_q's
own and frozen: a ranker's min and max (RRF: its ranking) over the judged documents D_q of the
query, never over an injected answer. An answer's raw score is mapped with D_q's min and max, not
clipped (above D_q's best it gets more than 1), and its RRF rank is 1 + the number of D_q
documents the ranker scores strictly higher. A row's fused score then depends on that row and D_q
alone, so NRP's fast mode (D_q scored once, one model call per answer) gives exactly what a full
re-ranking of D_q plus the answer gives, and D_q's fused scores are cached like any pointwise
ranker's. When a sub-ranker is not pointwise (lexical statistics over D_q, duoT5's top k), its own
scores change with the answer and the fusion declares ``depends_on_candidate_set``: NRP re-ranks
D_q plus the answer in full (exact, slower), with the statistics over D_q's rows in that ranking.
A fusion not bound to a collection normalises over the rows it is given, per query.

Sub-rankers' scores. Bound to a collection, a sub-ranker's scores of D_q's documents are read
from, and stored in, the score cache beside it under the sub-ranker's own fingerprint: the scores
validating that ranker stores, so fusing validated rankers scores no document of D_q again.
Other rows (answers) are scored directly and never cached under a sub-ranker.

Weights. Given (``weights=0.3+0.7``; none: equal), or ``weights=fit``: chosen on training folds
only. The queries with a D_q are split into query-disjoint folds (``nrp.collection.folds``,
``folds`` and ``seed``); for each fold, the weights on a simplex grid (step 0.1) that maximise the
mean nDCG@10 of the *other* folds' queries in ``dimension`` fuse that fold's queries. The fitting
is ``nrp.rankers.fusion_weights`` (over ``nrp.measures``, the layer below), which
``bind_collection`` calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from nrp.errors import ConfigError, NrpError
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, CachedRanker, ScoreCache
from nrp.rankers.fusion_weights import FittedWeights, fit_weights
from nrp.rankers.registry import (
    SPEC_SEPARATOR,
    Param,
    RankerInfo,
    nested_specs,
    nested_text,
    register,
)
from nrp.spec import format_spec

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pathlib import Path

    from nrp.collection.collection import Collection

METHODS = ("minmax", "rrf")
FIT = "fit"

PARAMS: dict[str, Param] = {
    "rankers": Param(
        str,
        "",
        "the rankers fused, joined by + (bm25+dense); a ranker's own parameters separated by ; "
        "(dense:query=paraphrase;passages=128)",
        nested=True,
        several=True,
    ),
    "method": Param(
        str,
        "minmax",
        "minmax (weighted sum of scores min-max normalised over D_q) or rrf (weighted "
        "reciprocal rank fusion over D_q's ranking)",
        METHODS,
    ),
    "weights": Param(
        str,
        "",
        "one weight per ranker joined by + (0.3+0.7); empty: equal weights; fit: chosen per "
        "fold on the other folds' queries (nDCG@10 in dimension)",
    ),
    "k": Param(int, 60, "rrf: a document at rank r adds weight / (k + r)", minimum=0),
    "dimension": Param(str, "", "weights=fit: the dimension whose nDCG@10 the weights maximise"),
    "folds": Param(int, 5, "weights=fit: query-disjoint folds", minimum=2),
    "seed": Param(int, 0, "weights=fit: seed of the fold assignment"),
}
_FIT_ONLY = ("dimension", "folds", "seed")


def join_specs(rankers: Sequence[Ranker], complete: bool = False) -> str:
    """The nested value that rebuilds ``rankers`` (``bm25:k1=0.9;b=0.5+dense``)."""
    return nested_text(r.spec(complete) for r in rankers)


class FusionRanker(Ranker):
    """Weighted fusion of sub-rankers with D_q's frozen statistics (module docstring).

    ``rankers``: the sub-ranker objects (default: built from ``params["rankers"]``), for use in
    Python with rankers no spec names."""

    name: ClassVar[str] = "fuse"
    injection: ClassVar[str] = "pointwise"

    def __init__(self, params: Mapping[str, Any] | None = None, rankers: Sequence[Ranker] = ()):
        merged = {key: p.default for key, p in PARAMS.items()}
        merged.update(params or {})
        if not rankers:
            specs = nested_specs(merged["rankers"], PARAMS["rankers"], self.name, "rankers")
            if not specs:
                raise ConfigError(
                    "ranker 'fuse': rankers='' must name at least two rankers joined by + "
                    "(rankers=bm25+dense)"
                )
            rankers = [spec.build() for spec in specs]
        subs = list(rankers)
        if any(isinstance(r, FusionRanker) for r in subs):
            raise ConfigError("ranker 'fuse': a fuse inside a fuse is not supported")
        if len(subs) < 2:
            raise ConfigError("ranker 'fuse': fusing needs at least two rankers")
        merged["rankers"] = join_specs(subs)
        super().__init__(merged)
        self.rankers: list[Ranker] = subs
        self.weights = self._given_weights()
        self.depends_on_candidate_set = any(
            r.injection != "pointwise" or r.depends_on_candidate_set for r in self.rankers
        )
        self.fitted: FittedWeights | None = None
        self._dq: dict[str, pd.DataFrame] | None = None  # bound: D_q rows per qid
        self._dq_texts: dict[str, str] = {}  # bound: "qid\0docno" of every D_q row -> its text
        self._reference: dict[str, np.ndarray] = {}  # qid -> sub-scores of D_q (pointwise)
        self._cache_at: tuple[Path, str] | None = None  # bound: score cache path, collection fp
        self._cached: dict[int, CachedRanker] = {}

    def _given_weights(self) -> tuple[float, ...] | None:
        """The weights the spec gives (None for ``fit``), checked."""
        text, n = str(self.params["weights"]).strip(), len(self.rankers)
        if text != FIT:
            for key in _FIT_ONLY:
                if self.params[key] != PARAMS[key].default:
                    raise ConfigError(f"ranker 'fuse': {key} applies with weights=fit only")
        if text == FIT:
            return None
        if not text:
            return tuple([1.0 / n] * n)
        try:
            weights = tuple(float(w) for w in text.split(SPEC_SEPARATOR))
        except ValueError:
            raise ConfigError(
                f"ranker 'fuse': weights={text!r} are not numbers joined by +"
            ) from None
        if len(weights) != n or min(weights) < 0 or sum(weights) <= 0:
            raise ConfigError(
                f"ranker 'fuse': weights={text!r} must be {n} non-negative numbers joined by + "
                "(one per ranker, not all 0), or fit"
            )
        return weights

    def parts(self) -> tuple[Ranker, ...]:
        return tuple(self.rankers)

    # -- identity -----------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """Name and parameters, with each sub-ranker's fingerprint in place of its spec."""
        identity = super().identity()
        identity["params"]["rankers"] = [r.fingerprint() for r in self.rankers]
        return identity

    def spec(self, complete: bool = False) -> str:
        if not complete:
            return super().spec()
        params = {**self.params, "rankers": join_specs(self.rankers, complete=True)}
        return format_spec(self.name, {k: v for k, v in sorted(params.items()) if v is not None})

    @property
    def score_tolerance(self) -> float:
        return max(r.score_tolerance for r in self.rankers)

    # -- binding ------------------------------------------------------------------------------
    def bind_collection(self, collection: Collection) -> None:
        """Bind every sub-ranker; keep D_q per query (the frozen statistics); fit the weights
        (``weights=fit``) on the collection's folds."""
        super().bind_collection(collection)
        for ranker in self.rankers:
            ranker.bind_collection(collection)
        candidates = collection.candidates()
        self._dq = {
            str(qid): rows.reset_index(drop=True)
            for qid, rows in candidates.groupby(candidates["qid"].astype(str), sort=False)
        }
        self._dq_texts = judged_texts(candidates)
        self._reference, self._cached = {}, {}
        self._cache_at = (collection.path / SCORE_CACHE_FILE, str(collection.meta["fingerprint"]))
        if self.weights is None:
            self.fitted = fit_weights(collection, self)

    def weights_for(self, qid: str) -> tuple[float, ...]:
        """The weights that fuse query ``qid`` (for ``fit``: those of its fold)."""
        if self.weights is not None:
            return self.weights
        if self.fitted is None:
            raise NrpError(f"{self.spec()}: weights=fit are fitted by bind_collection(collection)")
        fold = self.fitted.folds.get(str(qid))
        if fold is None:
            raise NrpError(
                f"{self.spec()}: query {qid!r} is in no fold of the fitted weights (a query "
                "without judged documents with text)"
            )
        return self.fitted.weights[fold]

    # -- scoring ------------------------------------------------------------------------------
    def raw_scores(self, frame: pd.DataFrame) -> np.ndarray:
        """(rankers, rows): each sub-ranker's scores of ``frame``, each with its query field."""
        frame = frame.reset_index(drop=True)
        return np.vstack([self._sub_scores(i, frame) for i in range(len(self.rankers))])

    def _sub_scores(self, index: int, frame: pd.DataFrame) -> np.ndarray:
        """One sub-ranker's scores. Bound to a collection, the rows of D_q come from the score
        cache beside it under the sub-ranker's own fingerprint (what validating it stores, so
        fusing validated rankers scores no document again); a sub-ranker whose scores depend on
        the rows ranked together uses it only for whole D_q's without other rows."""
        ranker = self.rankers[index]
        rows = ranker.formulate(frame)
        in_dq = judged_rows(frame, self._dq_texts)
        pointwise = ranker.injection == "pointwise" and not ranker.depends_on_candidate_set
        whole = in_dq.all() and all(
            frame.loc[group, "docno"].nunique() == len(self._dq[str(qid)])
            for qid, group in frame.groupby(frame["qid"].astype(str)).groups.items()
        )
        if self._cache_at is None or not in_dq.any() or not (pointwise or whole):
            return np.asarray(ranker.score_frame(rows), dtype=np.float64)
        if index not in self._cached:
            self._cached[index] = CachedRanker(
                ranker, ScoreCache(self._cache_at[0]), self._cache_at[1]
            )
        return scores_with_cache(self._cached[index], rows, in_dq)

    def contributions(self, frame: pd.DataFrame, raw: np.ndarray) -> np.ndarray:
        """(rankers, rows): what each sub-ranker adds per unit of weight to each row's fused
        score: its score min-max normalised with D_q's statistics, or 1 / (k + rank in D_q)."""
        out = np.empty_like(raw)
        qids = frame["qid"].astype(str)
        for qid, rows in frame.groupby(qids, sort=False).indices.items():
            reference = self._reference_scores(str(qid), frame.iloc[rows], raw[:, rows])
            out[:, rows] = self._contribution(raw[:, rows], reference)
        return out

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        frame = frame.reset_index(drop=True)
        parts = self.contributions(frame, self.raw_scores(frame))
        fused = np.zeros(len(frame), dtype=np.float64)
        qids = frame["qid"].astype(str)
        for qid, rows in frame.groupby(qids, sort=False).indices.items():
            for weight, part in zip(self.weights_for(str(qid)), parts[:, rows], strict=True):
                fused[rows] += weight * part  # element by element: the same float in any batch
        return fused

    def _contribution(self, scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
        if self.params["method"] == "rrf":
            ranks = np.empty_like(scores)
            for i, (row, ref) in enumerate(zip(scores, reference, strict=True)):
                ordered = np.sort(ref)
                ranks[i] = 1 + len(ref) - np.searchsorted(ordered, row, side="right")
            return 1.0 / (self.params["k"] + ranks)
        low, high = reference.min(axis=1), reference.max(axis=1)
        span = np.where(high > low, high - low, 1.0)  # one score for all of D_q: no spread
        return (scores - low[:, None]) / span[:, None]

    def _reference_scores(self, qid: str, rows: pd.DataFrame, raw: np.ndarray) -> np.ndarray:
        """(rankers, |D_q|): the sub-scores of D_q that normalise query ``qid``: D_q's rows of
        ``rows`` when it holds all of them, else D_q scored on its own (once per query for
        pointwise sub-rankers). Unbound, or a query outside the collection: ``rows`` itself."""
        dq = None if self._dq is None else self._dq.get(qid)
        if dq is None:
            return raw
        docnos = rows["docno"].astype(str)
        in_dq = (docnos.isin(set(dq["docno"].astype(str))) & ~docnos.duplicated()).to_numpy()
        if in_dq.sum() == len(dq):
            reference = raw[:, in_dq]
        elif qid in self._reference:
            return self._reference[qid]
        else:
            reference = self.raw_scores(dq)
        if not self.depends_on_candidate_set:
            self._reference[qid] = reference
        return reference


def scores_with_cache(cached: CachedRanker, rows: pd.DataFrame, in_dq: np.ndarray) -> np.ndarray:
    """A wrapped ranker's scores of ``rows`` (formulated for it): the rows of D_q (``in_dq``)
    through its score cache (read, or computed and stored), every other row (an answer) computed
    directly and never stored under it."""
    ranked = cached.ranked_in_order(rows[in_dq])
    by_key = dict(zip(row_keys(ranked), ranked["score"].astype(float), strict=True))
    scores = row_keys(rows).map(by_key).to_numpy(dtype=np.float64, copy=True)
    if not in_dq.all():
        others = rows[~in_dq].reset_index(drop=True)
        scores[~in_dq] = np.asarray(cached.ranker.score_frame(others), dtype=np.float64)
    return scores


def row_keys(frame: pd.DataFrame) -> pd.Series:
    """The key of each row: its qid and docno joined by a NUL character."""
    return frame["qid"].astype(str) + "\0" + frame["docno"].astype(str)


def judged_texts(candidates: pd.DataFrame) -> dict[str, str]:
    """Each judged document's row key (``row_keys``) -> its text: what ``judged_rows`` reads."""
    return dict(zip(row_keys(candidates), candidates["text"].astype(str), strict=True))


def judged_rows(frame: pd.DataFrame, judged: Mapping[str, str]) -> np.ndarray:
    """True for each row of ``frame`` that is a judged document: its key (qid, docno) and its
    text are one of ``judged`` (``judged_texts``). A text of its own under a judged document's
    docno is no judged document: its score is computed, and never read from or stored under
    the document's key in the score cache."""
    keys = row_keys(frame).tolist()
    texts = frame["text"].fillna("").astype(str).tolist()
    return np.array([judged.get(k) == t for k, t in zip(keys, texts, strict=True)], dtype=bool)


def _build(params: dict[str, Any]) -> FusionRanker:
    return FusionRanker(params)


register(
    RankerInfo(
        name="fuse",
        description="fusion of rankers: weighted sum of scores min-max normalised over D_q, or "
        "reciprocal rank fusion; weights given or fitted on training folds (weights=fit)",
        backend="python",
        build=_build,
        params=PARAMS,
    )
)
