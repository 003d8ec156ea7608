"""Injection: where a ranker puts a generated answer among the judged documents D_q of its query.

For each answer a of query q the result is its score s_a, ``above`` (documents of D_q scored
strictly higher), ``ties`` (scored exactly s_a), ``strict`` (the rank a full re-ranking gives a,
see ``nrp.ranks``) and |D_q|; ``nrp.positioning.scoring`` turns these into r and NRP.

The source study's scripts re-rank all of D_q again for every answer. That is the reference mode
here (``full_rerank=True``: ``ranker.transform`` on D_q plus the answer appended last, nothing
cached). The fast modes compute the same numbers with each document scored once and each answer
scored once, per kind of ranker. Each is a strategy of ``nrp.positioning.strategies`` (the
module of each says how it works):

- **pointwise** (``Pointwise``: dense, monoT5, ColBERT, random): D_q from the score cache, each
  answer one more row.
- **lexical, recomputed statistics** (``LexicalRecomputed``: tfidf, bm25, dph with stats=query,
  the default): D_q tokenised once, D_q plus each answer rescored with statistics that count
  the answer, all answers of a batch in one vectorised pass.
- **lexical, frozen statistics** (``LexicalFrozen``; ``frozen_stats=True``, and always with
  ``stats=collection``): the answer scored against the statistics D_q was scored with, without
  joining them; its reference ``LexicalFrozenReference`` builds a fresh index per answer.
- **pairwise** (``PairwiseTopK``: duoT5): the answer joins the pairwise stage only when the first
  stage puts it in the top k; document pairs cached.

Each ranker declares which of these it is (``Ranker.injection``: "pointwise", "statistics",
"pairwise"), and the strategies ask of it only what a Protocol names
(``nrp.rankers.lexical.StatisticsScorer``, ``nrp.rankers.base.PairwiseScorer``), so a new
ranker, from nrp or another package, needs no change here. The first strategy that supports the
ranker is chosen (``nrp.positioning.strategies.choose``); rankers whose scores depend on the
candidate set in a way no strategy knows (``depends_on_candidate_set`` while declared
pointwise), and lexical rankers on the ``terrier`` or ``pisa`` back-ends with recomputed
statistics, fall back to the reference mode (``FullTransform``): exact, and slower. A ranker
that declares "statistics" or "pairwise" but lacks what the Protocol names is refused with a
``ConfigError`` naming it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from nrp.answers import is_empty
from nrp.collection.collection import Collection
from nrp.errors import NrpError
from nrp.positioning.results_cache import POSITION_COLUMNS, PairCache
from nrp.positioning.strategies import (
    FullTransform,
    InjectedRanking,
    InjectionCounts,
    InjectionState,
    LexicalFrozen,
    LexicalFrozenReference,
    LexicalRecomputed,
    PairwiseTopK,
    Pointwise,
    choose,
    strategy_of_mode,
)
from nrp.rankers.base import REQUIRED_COLUMNS, Ranker
from nrp.rankers.cache import ScoreCache
from nrp.tables import require_columns

__all__ = [
    "ANSWER_COLUMNS",
    "DUOT5_TOP_K",
    "FULL_LEXICAL_FROZEN",
    "FULL_TRANSFORM",
    "LEXICAL_FROZEN",
    "LEXICAL_RECOMPUTED",
    "POINTWISE",
    "AnswerInjector",
    "InjectedRanking",
    "InjectionCounts",
    "describe_mode",
    "injection_mode",
]

#: Injection modes (the ``mode`` of a result; part of the results-cache key): each strategy's
POINTWISE = Pointwise.mode  # "fast:pointwise"
LEXICAL_RECOMPUTED = LexicalRecomputed.mode  # "fast:lexical-recomputed"
LEXICAL_FROZEN = LexicalFrozen.mode  # "fast:lexical-frozen"
DUOT5_TOP_K = PairwiseTopK.mode  # "fast:duot5-top-k"
FULL_TRANSFORM = FullTransform.mode  # "full:transform"
FULL_LEXICAL_FROZEN = LexicalFrozenReference.mode  # "full:lexical-frozen"

ANSWER_COLUMNS = ("answer_id", "qid", "text")


def injection_mode(ranker: Ranker, frozen_stats: bool = False, full_rerank: bool = False) -> str:
    """The mode ``AnswerInjector`` uses for this ranker and these options: that of the first
    strategy that supports it (``nrp.positioning.strategies.choose``; a ``ConfigError`` when
    the ranker lacks what its declared injection needs)."""
    return choose(ranker, frozen_stats=frozen_stats, full_rerank=full_rerank).mode


class AnswerInjector:
    """Positions answers among D_q for one ranker, with the strategy chosen for it
    (``nrp.positioning.strategies.choose``; see the module docstring).

    ``position(answers)`` takes rows (answer_id, qid, text) whose queries have a non-empty D_q
    and returns one row per answer with ``POSITION_COLUMNS``. State kept across calls (D_q's
    scores, lexical indexes, pair scores) makes a run in batches cost what one call would.
    ``counts`` accumulates what was computed.
    """

    def __init__(
        self,
        collection: Collection,
        ranker: Ranker,
        *,
        frozen_stats: bool = False,
        full_rerank: bool = False,
        score_cache: ScoreCache | None = None,
        pair_cache: PairCache | None = None,
        candidates: pd.DataFrame | None = None,
    ):
        chosen = choose(ranker, frozen_stats=frozen_stats, full_rerank=full_rerank)
        self.mode = chosen.mode
        self.state = InjectionState(
            collection,
            ranker,
            score_cache=score_cache,
            pair_cache=pair_cache,
            candidates=candidates,
        )
        self.strategy = chosen(self.state)
        self.counts = self.state.counts
        self._query_docnos: dict[str, tuple[str, frozenset[str]] | None] = {}
        self._streamed_dq: set[str] = set()  # queries whose D_q an embedding stream held

    @property
    def rankings(self) -> dict[str, InjectedRanking] | None:
        """answer_id -> its injected ranking, for every answer positioned (None: not kept)."""
        return self.state.rankings

    def keep_rankings(self) -> None:
        """From now on keep each positioned answer's ``InjectedRanking`` in ``rankings``."""
        if self.state.rankings is None:
            self.state.rankings = {}

    def docs(self, qid: str) -> pd.DataFrame:
        """D_q of a query (qid, query, docno, text), empty when it has none."""
        found = self.state.dq.get(str(qid))
        return found if found is not None else pd.DataFrame(columns=list(REQUIRED_COLUMNS))

    def _query_and_docnos(self, qid: str) -> tuple[str, frozenset[str]] | None:
        """The query D_q was scored with and D_q's docnos (None: no D_q), read once per query."""
        if qid not in self._query_docnos:
            docs = self.state.dq.get(qid)
            self._query_docnos[qid] = (
                None
                if docs is None or docs.empty
                else (str(docs["query"].iloc[0]), frozenset(docs["docno"].astype(str)))
            )
        return self._query_docnos[qid]

    def _answer_frame(
        self, answer_ids: list[str], qids: list[str], texts: list[Any]
    ) -> pd.DataFrame:
        """Answers as ranker rows: the topic's query (as D_q was scored with), docno =
        answer_id. Checks that every query has documents and no answer id is a docno of D_q."""
        queries = []
        for qid, answer_id in zip(qids, answer_ids, strict=True):
            found = self._query_and_docnos(qid)
            if found is None:
                raise NrpError(f"query {qid} has no judged documents with text: cannot rank")
            query, docnos = found
            if answer_id in docnos:
                raise NrpError(
                    f"answer id {answer_id!r} is also a document of query {qid}: answer ids "
                    "name the injected row and must differ from D_q's docnos"
                )
            queries.append(query)
        texts = ranker_texts(texts)
        # object columns: the rows are read back as Python strings, not converted twice
        return pd.DataFrame(
            {"qid": qids, "query": queries, "docno": answer_ids, "text": texts}, dtype=object
        )

    def position(self, answers: pd.DataFrame) -> pd.DataFrame:
        """Score, above, ties, strict and |D_q| of each answer (rows answer_id, qid, text), in
        the order given."""
        require_columns(answers, ANSWER_COLUMNS, "answers")
        rows = self.position_rows(
            answers["answer_id"].astype(str).tolist(),
            answers["qid"].astype(str).tolist(),
            answers["text"].tolist(),
        )
        if not rows:
            return pd.DataFrame(columns=list(POSITION_COLUMNS))
        answer_ids, qids, scores, *counts = zip(*rows, strict=True)
        columns = {"answer_id": list(answer_ids), "qid": list(qids),
                   "score": np.array(scores, dtype=np.float64)}  # fmt: skip
        for name, values in zip(POSITION_COLUMNS[3:], counts, strict=True):
            columns[name] = np.array(values, dtype=np.int64)
        return pd.DataFrame(columns)

    def position_rows(
        self, answer_ids: list[str], qids: list[str], texts: list[Any]
    ) -> list[tuple]:
        """``position`` for answers given as lists (ids and qids as text), one
        ``POSITION_COLUMNS`` tuple per answer in the order given: the same numbers without a
        frame around them (the service's synchronous requests)."""
        if not answer_ids:
            return []
        frame = self._answer_frame(answer_ids, qids, texts)
        empty = [is_empty(text) for text in texts]
        if not any(empty):
            return self.strategy.position(frame)
        # an answer that says nothing (``nrp.answers.is_empty``) is not ranked: no score, every
        # document of D_q above it under every tie rule, so NRP 0 (the source study's rule for
        # an empty answer), after the same checks as a ranked answer's
        said = frame[[not nothing for nothing in empty]].reset_index(drop=True)
        ranked = iter(self.strategy.position(said) if len(said) else [])
        rows: list[tuple] = []
        for answer_id, qid, nothing in zip(answer_ids, qids, empty, strict=True):
            if not nothing:
                rows.append(next(ranked))
                continue
            n_docs = len(self.state.dq[qid])
            rows.append((answer_id, qid, float("nan"), n_docs, 0, n_docs, n_docs))
        return rows

    @contextlib.contextmanager
    def embedding_stream(self, qids: list[str], texts: list[Any]) -> Iterator[None]:
        """While open, the ranker serves the embeddings of these answers (``qids``, ``texts``),
        their queries and, without a score cache, D_q of queries it has not streamed before,
        from one stream embedded now (``DenseRanker.embedding_stream``: one length-sorted pass
        over every text, as a bare ``encode`` of them). Nothing for rankers without one or
        another mode than pointwise. Scores move by float rounding with the stream (about
        1e-7); NRP does not (the tie tolerance; docs/nrp.md)."""
        stream = getattr(self.state.ranker, "embedding_stream", None)
        if stream is None or self.mode != POINTWISE or not qids:
            yield
            return
        streamed: list[str] = []
        for qid in dict.fromkeys(qids):
            found = self._query_and_docnos(qid)
            if found is None:
                continue  # ``position`` says so
            streamed.append(found[0])
            if self.state.score_cache is None and qid not in self._streamed_dq:
                self._streamed_dq.add(qid)
                streamed.extend(self.state.dq[qid]["text"].fillna("").astype(str))
        streamed.extend(ranker_texts(texts))
        with stream(streamed):
            yield

    @contextlib.contextmanager
    def window(self, qids: list[str], texts: list[Any]) -> Iterator[None]:
        """While open, the positioner hands over these answers next, a chunk at a time: the
        ranker's embedding stream of them (``embedding_stream``) and the strategy's window
        (``Strategy.window``)."""
        with self.embedding_stream(qids, texts), self.strategy.window(ranker_texts(texts)):
            yield


def ranker_texts(texts: list[Any]) -> list[str]:
    """Answer texts as ranker rows carry them: a missing one (None, NaN) is ""."""
    return [
        "" if text is None or (isinstance(text, float) and np.isnan(text)) else str(text)
        for text in texts
    ]


def describe_mode(mode: str, ranker: Ranker) -> str:
    """One line saying how a ranker's answers were positioned (for reports and attrs)."""
    return f"{ranker.spec()}: {mode}: {strategy_of_mode(mode).description}"
