"""Lexical injection with recomputed statistics (tfidf, bm25, dph with stats=query, the
default; any ranker declaring "statistics" that is a ``StatisticsScorer``): an answer joins
D_q's index, so N, avgdl, df and F change and every document of D_q must be rescored, exactly as
the source study's per-query index did. D_q is tokenised once per query (``build_index``) and its
postings of the query's terms kept (``QueryPostings``); the answers of a batch, over any number of
queries, are tokenised once each and D_q plus each answer rescored in one vectorised pass
(``nrp.rankers.lexical_batch``; ``documents_rescored`` counts those rows; no model, no
per-answer frame). The floats equal those of ``index.with_extra(answer).score(query)`` and of a
fresh index of D_q plus the answer (same postings, same integer statistics, same operations in
the same order), so ties are exact."""

from __future__ import annotations

from typing import ClassVar

import pandas as pd

from nrp.positioning.strategies.base import InjectionState, Strategy
from nrp.positioning.strategies.statistics import declares_statistics, frozen, python_backend
from nrp.rankers.base import Ranker
from nrp.rankers.lexical import LexicalIndex, StatisticsScorer
from nrp.rankers.lexical_batch import QueryPostings, score_with_each_extra
from nrp.rankers.term_arrays import Vocabulary, analyse_texts


class LexicalRecomputed(Strategy):
    mode: ClassVar[str] = "fast:lexical-recomputed"
    description: ClassVar[str] = (
        "D_q tokenised once; D_q and the answer rescored with statistics that include the "
        "answer (as the source study's per-query index)"
    )
    needs: ClassVar[type] = StatisticsScorer
    whole_windows: ClassVar[bool] = True

    @classmethod
    def supports(cls, ranker: Ranker, *, frozen_stats: bool, full_rerank: bool) -> bool:
        return (
            declares_statistics(ranker)
            and not frozen(ranker, frozen_stats)
            and python_backend(ranker)
            and not full_rerank
        )

    def __init__(self, state: InjectionState):
        super().__init__(state)
        self._indexes: dict[str, LexicalIndex] = {}
        self._postings: dict[str, QueryPostings] = {}
        self._vocabulary = Vocabulary()

    def index(self, qid: str) -> LexicalIndex:
        """D_q's index with the ranker's statistics, tokenised once per query."""
        if qid not in self._indexes:
            docs = self.state.dq[qid]
            self._indexes[qid] = self.ranker.build_index(
                docs["text"].fillna("").astype(str).tolist(), docs["docno"].astype(str).tolist()
            )
        return self._indexes[qid]

    def _query_postings(self, qid: str, query: str) -> QueryPostings:
        """D_q's postings of the query's terms and its statistics, built once per query."""
        if qid not in self._postings:
            self._postings[qid] = QueryPostings.of(self.index(qid), query)
        return self._postings[qid]

    def position(self, frame: pd.DataFrame) -> list[tuple]:
        """Each answer with D_q rescored on statistics that count it, as
        ``index.with_extra(answer).score(query)`` gives them, all answers of the batch in one
        vectorised pass (``nrp.rankers.lexical_batch``)."""
        qids = frame["qid"].tolist()
        queries = [
            self._query_postings(q, query)
            for q, query in zip(qids, frame["query"].tolist(), strict=True)
        ]
        answers = analyse_texts(frame["text"].tolist(), self._vocabulary)
        scored = score_with_each_extra(queries, answers, self.ranker.model)
        self.state.counts.documents_rescored += int(scored.n_docs.sum())
        self.state.counts.answers_scored += len(frame)
        doc_scores, owners = scored.document_scores()
        answer_ids = frame["docno"].tolist()
        return self.state.rows(answer_ids, qids, scored.answer_scores(), doc_scores, owners)
