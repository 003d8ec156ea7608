"""What every injection strategy shares: the strategy's shape (``Strategy``) and the state of one
ranker on one collection (``InjectionState``: D_q of each query, D_q's scores from the score
cache, the counts, the kept rankings, and the rows a strategy returns)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import pandas as pd

from nrp.collection.collection import Collection
from nrp.errors import ConfigError
from nrp.positioning.results_cache import PairCache
from nrp.rankers.base import REQUIRED_COLUMNS, Ranker, missing_members
from nrp.rankers.cache import CachedRanker, ScoreCache
from nrp.ranks import position, positions


class InjectedRanking(NamedTuple):
    """What the ranker made of D_q with one answer injected: D_q's docnos and scores (as
    scored beside the answer: lexical statistics and duoT5's pairwise stage include it) and the
    answer's score. Kept only when asked (``AnswerInjector.keep_rankings``: ``nrp score
    --trec``)."""

    qid: str
    docnos: list[str]
    doc_scores: np.ndarray
    score: float


@dataclass
class InjectionCounts:
    """What the ranker computed (the benchmark's model-call counts).

    ``answers_scored``: answer rows scored (one per answer and ranker in every mode).
    ``documents_scored``: D_q rows the ranker scored: score-cache misses in the fast mode (0 on
    a second run), |D_q| per answer in the reference mode. ``documents_rescored``: lexical
    stats=query, D_q rows rescored with the answer's statistics on the index built once (array
    arithmetic, no tokenisation, no model). ``pair_evaluations``: duoT5 pairs the duoT5 model
    scored; ``pairs_from_cache``: document pairs served by the pair cache. ``score_calls``:
    ``score_frame`` / ``score_pairs`` / ``transform`` calls made. ``answers_from_results_cache``:
    answers whose position was served by the results cache (set by ``scoring``).
    """

    answers_scored: int = 0
    documents_scored: int = 0
    documents_rescored: int = 0
    pair_evaluations: int = 0
    pairs_from_cache: int = 0
    score_calls: int = 0
    answers_from_results_cache: int = 0

    def add(self, other: InjectionCounts) -> InjectionCounts:
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)
        return self

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class InjectionState:
    """One ranker's answers positioned among D_q of one collection: D_q per query (with the
    ranker's query field), D_q's scores by any scorer (memory, then the score cache, the missing
    ones computed in one call), the counts, and the rows every strategy returns. Kept across
    ``position`` calls, so a run in batches costs what one call would."""

    def __init__(
        self,
        collection: Collection,
        ranker: Ranker,
        *,
        score_cache: ScoreCache | None = None,
        pair_cache: PairCache | None = None,
        candidates: pd.DataFrame | None = None,
    ):
        self.collection = collection
        self.ranker = ranker
        self.tolerance = float(ranker.score_tolerance)  # the tie rule's, in every mode
        self.score_cache = score_cache
        self.pair_cache = pair_cache
        self.fingerprint = str(collection.meta["fingerprint"])
        self.counts = InjectionCounts()
        # D_q with the ranker's query field; an answer takes its query from these rows
        frame = ranker.formulate(collection.candidates() if candidates is None else candidates)
        self.dq: dict[str, pd.DataFrame] = {
            str(qid): group[list(REQUIRED_COLUMNS)].reset_index(drop=True)
            for qid, group in frame.groupby(frame["qid"].astype(str), sort=False)
        }
        self._doc_scores: dict[tuple[str, str], np.ndarray] = {}  # (scorer fp, qid) -> scores
        # fingerprints hash model files (a T5 checkpoint: a gigabyte): computed once per scorer
        self._fingerprints: dict[int, str] = {}
        self._cached_rankers: dict[int, CachedRanker] = {}
        #: answer_id -> its injected ranking, for every answer positioned (None: not kept)
        self.rankings: dict[str, InjectedRanking] | None = None

    # -- kept rankings -----------------------------------------------------------------------
    def keep(
        self,
        answer_id: str,
        qid: str,
        score: float,
        doc_scores: np.ndarray,
        docnos: list[str] | None = None,
    ) -> None:
        """Keep the answer's injected ranking when asked; ``docnos``: in ``doc_scores``' order
        (default: D_q's own order)."""
        if self.rankings is not None:
            if docnos is None:
                docnos = self.dq[qid]["docno"].astype(str).tolist()
            ranking = InjectedRanking(qid, list(docnos), np.array(doc_scores), float(score))
            self.rankings[str(answer_id)] = ranking

    # -- result rows -------------------------------------------------------------------------
    def row(self, answer_id: str, qid: str, score: float, doc_scores: np.ndarray) -> tuple:
        """One result row; strict = above + ties (the appended answer goes below its ties)."""
        above, ties = position(doc_scores, score, self.tolerance)
        self.keep(answer_id, qid, score, doc_scores)
        return (answer_id, qid, float(score), above, ties, above + ties, len(doc_scores))

    def rows_against(
        self,
        answer_ids: list[str],
        qids: list[str],
        scores: np.ndarray,
        doc_scores: Mapping[str, np.ndarray],
    ) -> list[tuple]:
        """``rows`` with D_q's scores per query (the same for every answer of a query)."""
        own = [doc_scores[q] for q in qids]
        owners = np.repeat(np.arange(len(qids)), [len(d) for d in own])
        return self.rows(answer_ids, qids, np.asarray(scores), np.concatenate(own), owners)

    def rows(
        self,
        answer_ids: list[str],
        qids: list[str],
        scores: np.ndarray,
        doc_scores: np.ndarray,
        owners: np.ndarray,
    ) -> list[tuple]:
        """One result row per answer (``POSITION_COLUMNS``; strict = above + ties, the appended
        answer goes below its ties): ``doc_scores`` concatenates each answer's D_q scores (D_q's
        order), ``owners`` the answer (index) each belongs to."""
        above, ties = positions(doc_scores, owners, scores, self.tolerance)
        n_docs = np.bincount(owners, minlength=len(scores))
        if self.rankings is not None:
            ends = np.cumsum(n_docs)
            for i, (answer_id, qid) in enumerate(zip(answer_ids, qids, strict=True)):
                self.keep(answer_id, qid, scores[i], doc_scores[ends[i] - n_docs[i] : ends[i]])
        return list(
            zip(
                answer_ids,
                qids,
                scores.tolist(),
                above.tolist(),
                ties.tolist(),
                (above + ties).tolist(),
                n_docs.tolist(),
                strict=True,
            )
        )

    # -- D_q scores from the score cache -----------------------------------------------------
    def fingerprint_of(self, scorer: Ranker) -> str:
        """``scorer.fingerprint()``, computed once per scorer object."""
        if id(scorer) not in self._fingerprints:
            self._fingerprints[id(scorer)] = scorer.fingerprint()
        return self._fingerprints[id(scorer)]

    def scores_of_docs(self, qids: list[str], scorer: Ranker) -> dict[str, np.ndarray]:
        """D_q's scores by ``scorer`` for each query: served from memory or the score cache,
        the missing ones computed in one call."""
        key = self.fingerprint_of(scorer)
        todo = [q for q in dict.fromkeys(qids) if (key, q) not in self._doc_scores]
        if todo:
            rows = pd.concat([self.dq[q] for q in todo], ignore_index=True)
            if self.score_cache is not None:
                scores = self._cached_scores(rows, scorer, self.score_cache)
            else:
                scores = np.asarray(scorer.score_frame(rows), dtype=np.float64)
                self.counts.documents_scored += len(rows)
                self.counts.score_calls += 1
            start = 0
            for q in todo:
                n = len(self.dq[q])
                self._doc_scores[(key, q)] = scores[start : start + n]
                start += n
        return {q: self._doc_scores[(key, q)] for q in qids}

    def _cached_scores(self, rows: pd.DataFrame, scorer: Ranker, cache: ScoreCache) -> np.ndarray:
        """Scores of ``rows`` through the score cache, in the rows' order."""
        if id(scorer) not in self._cached_rankers:
            self._cached_rankers[id(scorer)] = CachedRanker(scorer, cache, self.fingerprint)
        cached = self._cached_rankers[id(scorer)]
        before = cached.computed
        out = cached.ranked_in_order(rows)
        self.counts.documents_scored += cached.computed - before
        self.counts.score_calls += int(cached.computed > before)
        by_key = dict(
            zip(
                zip(out["qid"].astype(str), out["docno"].astype(str), strict=True),
                out["score"].to_numpy(dtype=np.float64),
                strict=True,
            )
        )
        return np.array(
            [
                by_key[(q, d)]
                for q, d in zip(rows["qid"].astype(str), rows["docno"].astype(str), strict=True)
            ],
            dtype=np.float64,
        )

    def score_answers(self, frame: pd.DataFrame, scorer: Ranker) -> np.ndarray:
        """Every answer row scored once, across queries, in one call."""
        scores = np.asarray(scorer.score_frame(frame), dtype=np.float64)
        self.counts.answers_scored += len(frame)
        self.counts.score_calls += 1
        return scores


class Strategy:
    """One way of injecting answers among D_q (the shape of ir_measures' providers).

    ``supports(ranker, frozen_stats, full_rerank)`` says from the ranker's declaration
    (``Ranker.injection``, its parameters) and the options whether this strategy is the one;
    ``nrp.positioning.strategies.choose`` takes the first that does, full re-ranking last.
    ``needs`` is the Protocol of ``nrp.rankers.base`` the strategy uses of the ranker (None:
    only ``Ranker``); ``check`` refuses a ranker without it. ``mode`` names the strategy in the
    results-cache key, ``description`` in reports. An instance positions the answers of one
    ranker: ``position(frame)`` takes answer rows as ranker rows (qid, query, docno =
    answer_id, text) and returns one ``POSITION_COLUMNS`` tuple per answer.
    """

    mode: ClassVar[str]
    description: ClassVar[str]
    needs: ClassVar[type | None] = None
    #: True for a strategy that positions any number of answers in one vectorised pass: the
    #: positioner hands it a whole stream window (``positioner.STREAM_ANSWERS``) at once and
    #: still stores and reports the positions by ``chunk_size``; its per-call costs (frames,
    #: numpy calls, each distinct token looked up) are paid per window, not per chunk. Not
    #: for a strategy that counts its calls (``score_calls``): the counts are in the results'
    #: attributes, which would then change with the window
    whole_windows: ClassVar[bool] = False

    def __init__(self, state: InjectionState):
        self.state = state
        self.ranker: Any = state.ranker  # the Protocol ``needs`` names (checked when chosen)

    def window(self, texts: list[str]) -> contextlib.AbstractContextManager[None]:
        """While open, the answers' texts the positioner hands over next (as ranker rows
        carry them), in this order, a chunk at a time: a strategy may prepare them all at
        once. Nothing by default."""
        return contextlib.nullcontext()

    @classmethod
    def supports(cls, ranker: Ranker, *, frozen_stats: bool, full_rerank: bool) -> bool:
        raise NotImplementedError

    @classmethod
    def check(cls, ranker: Ranker) -> None:
        """A ``ConfigError`` naming what the ranker lacks of ``needs``."""
        if cls.needs is None:
            return
        missing = missing_members(ranker, cls.needs)
        if missing:
            raise ConfigError(
                f"ranker {ranker.spec()} declares injection {ranker.injection!r}, which "
                f"positions answers through {cls.needs.__name__} "
                f"({cls.needs.__module__}), but lacks {', '.join(missing)}; implement "
                "them, or declare another injection (docs/extending.md)"
            )

    @classmethod
    def cache_scopes(
        cls, ranker: Ranker, collection_fingerprint: str
    ) -> tuple[dict[str, str], str | None]:
        """The score-cache scopes (scope -> scorer spec) and the pair-cache scope this strategy
        reads (an executor's workers get a snapshot of them): none by default."""
        return {}, None

    def position(self, frame: pd.DataFrame) -> list[tuple]:
        raise NotImplementedError


def own_score_scope(ranker: Ranker, collection_fingerprint: str) -> dict[str, str]:
    """The score-cache scope of a ranker's own scores of D_q (``CachedRanker``'s)."""
    return {f"{collection_fingerprint[:20]}/{ranker.fingerprint()}": ranker.spec()}
