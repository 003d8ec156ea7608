"""Lexical injection with frozen statistics (``frozen_stats=True``; and always with
``stats=collection``): the statistics D_q was scored with are kept and the answer is scored
against them without being added: its own tf and length, D_q's (or the collection's) N, avgdl,
df and F; a term of the answer that D_q's lexicon lacks is skipped (df = 0, Terrier's "term not
found"). D_q's scores come from the score cache; the answer is one pointwise row.

Why ``stats=collection`` is always frozen: the collection's statistics describe the corpus,
which an answer does not join (adding it would change every document's score by a hair and make
D_q's cached scores depend on the answer). The reference for frozen statistics
(``LexicalFrozenReference``) is a fresh index of D_q plus the answer built from scratch per
answer, with the answer left out of the statistics; ``ranker.transform`` cannot be it, since it
counts every row it ranks. Both need the python back-end and a ``StatisticsScorer``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import ClassVar

import numpy as np
import pandas as pd
from pyterrier.model import add_ranks

from nrp.positioning.strategies.base import InjectionState, Strategy, own_score_scope
from nrp.positioning.strategies.statistics import (
    declares_statistics,
    frozen,
    require_python_backend,
)
from nrp.rankers.base import Ranker
from nrp.rankers.lexical import CorpusStatistics, LexicalIndex, StatisticsScorer
from nrp.rankers.lexical_batch import FrozenQuery, score_frozen
from nrp.rankers.term_arrays import TermArrays, TermsAhead, Vocabulary, analyse_texts
from nrp.ranks import position


class _SummedCounts(Mapping[str, int]):
    """df or F of a background corpus plus a few documents it lacks, without copying it."""

    def __init__(self, base: Mapping[str, int], extra: Mapping[str, int]):
        self.base, self.extra = base, extra

    def __getitem__(self, term: str) -> int:
        if term not in self.base and term not in self.extra:
            raise KeyError(term)
        return self.base.get(term, 0) + self.extra.get(term, 0)

    def __iter__(self) -> Iterator[str]:
        yield from self.base
        yield from (t for t in self.extra if t not in self.base)

    def __len__(self) -> int:
        return len(self.base) + sum(1 for t in self.extra if t not in self.base)


class _FrozenStatistics(Strategy):
    """What both frozen-statistics strategies ask of the ranker."""

    needs: ClassVar[type] = StatisticsScorer
    full_rerank: ClassVar[bool]

    @classmethod
    def supports(cls, ranker: Ranker, *, frozen_stats: bool, full_rerank: bool) -> bool:
        return (
            declares_statistics(ranker)
            and frozen(ranker, frozen_stats)
            and full_rerank == cls.full_rerank
        )

    @classmethod
    def check(cls, ranker: Ranker) -> None:
        require_python_backend(ranker)
        super().check(ranker)


class LexicalFrozen(_FrozenStatistics):
    mode: ClassVar[str] = "fast:lexical-frozen"
    description: ClassVar[str] = (
        "statistics frozen at what D_q was scored with; the answer scored against them without "
        "joining them; D_q from the score cache"
    )
    full_rerank: ClassVar[bool] = False

    def __init__(self, state: InjectionState):
        super().__init__(state)
        self._statistics: dict[str, CorpusStatistics] = {}
        self._queries: dict[str, FrozenQuery] = {}
        self._vocabulary = Vocabulary()
        self._ahead: TermsAhead | None = None

    @contextlib.contextmanager
    def window(self, texts: list[str]) -> Iterator[None]:
        """The window's terms in one pass; each chunk then takes its own (its score call, and
        the counts, stay one per chunk)."""
        self._ahead = TermsAhead(texts, self._vocabulary)
        try:
            yield
        finally:
            self._ahead = None

    def _terms(self, texts: list[str]) -> TermArrays:
        """The texts' terms: from the window when they are its next chunk, else analysed."""
        found = self._ahead.take(texts) if self._ahead is not None else None
        return analyse_texts(texts, self._vocabulary) if found is None else found

    @classmethod
    def cache_scopes(
        cls, ranker: Ranker, collection_fingerprint: str
    ) -> tuple[dict[str, str], str | None]:
        return own_score_scope(ranker, collection_fingerprint), None

    def frozen_statistics(self, qid: str) -> CorpusStatistics:
        """The statistics D_q of ``qid`` is scored with: D_q's own (stats=query), or the
        collection's plus any D_q documents the corpus lacks (stats=collection), as the lexical
        ranker counts them (``LexicalIndex.from_texts``)."""
        if qid not in self._statistics:
            docs = self.state.dq[qid]
            texts = docs["text"].fillna("").astype(str).tolist()
            docnos = docs["docno"].astype(str).tolist()
            self._statistics[qid] = _with_background(texts, docnos, self.ranker.background)
        return self._statistics[qid]

    def frozen_query(self, qid: str, query: str) -> FrozenQuery:
        """The query's entries with their frozen statistics, built once per query."""
        if qid not in self._queries:
            self._queries[qid] = FrozenQuery.of(self.frozen_statistics(qid), query)
        return self._queries[qid]

    def position(self, frame: pd.DataFrame) -> list[tuple]:
        """D_q from the score cache; every answer of the batch, over any number of queries,
        tokenised once and scored against its query's frozen statistics in one vectorised pass
        (``nrp.rankers.lexical_batch.score_frozen``; no answer joins N, avgdl, df or F)."""
        state = self.state
        qids = frame["qid"].tolist()
        doc_scores = state.scores_of_docs(qids, self.ranker)
        queries = [
            self.frozen_query(str(q), str(query))
            for q, query in zip(qids, frame["query"].tolist(), strict=True)
        ]
        answers = self._terms(frame["text"].tolist())
        answer_scores = score_frozen(queries, answers, self.ranker.model)
        state.counts.answers_scored += len(frame)
        state.counts.score_calls += 1
        return state.rows_against(frame["docno"].tolist(), qids, answer_scores, doc_scores)


def _with_background(
    texts: list[str], docnos: list[str], background: CorpusStatistics | None
) -> CorpusStatistics:
    """Statistics of D_q's documents alone (no background), or the background's plus those of
    D_q's documents it lacks."""
    if background is None:
        return CorpusStatistics.from_texts(texts, docnos)
    lacking = [i for i, d in enumerate(docnos) if d not in background.docnos]
    if not lacking:
        return background
    own = CorpusStatistics.from_texts([texts[i] for i in lacking], [docnos[i] for i in lacking])
    return CorpusStatistics(
        background.num_docs + own.num_docs,
        background.num_tokens + own.num_tokens,
        _SummedCounts(background.df, own.df),
        _SummedCounts(background.cf, own.cf),
        background.docnos | own.docnos,
    )


class LexicalFrozenReference(_FrozenStatistics):
    mode: ClassVar[str] = "full:lexical-frozen"
    description: ClassVar[str] = (
        "reference for frozen statistics: a fresh index of D_q plus the answer per answer, the "
        "answer left out of the statistics"
    )
    full_rerank: ClassVar[bool] = True

    def position(self, frame: pd.DataFrame) -> list[tuple]:
        """Per answer, a fresh index of D_q plus the answer (everything tokenised again), the
        answer left out of the statistics, every row scored; r from ``add_ranks`` with the
        answer appended last."""
        columns = frame[["docno", "qid", "query", "text"]]
        return [self._one(*answer) for answer in columns.itertuples(index=False)]

    def _one(self, answer_id: str, qid: str, query: str, text: str) -> tuple:
        state, background = self.state, self.ranker.background
        docs = state.dq[qid]
        texts = [*docs["text"].fillna("").astype(str), text]
        counted = [background is None or d not in background.docnos for d in docs["docno"]]
        index = LexicalIndex.from_texts(texts)
        fresh = LexicalIndex(index.postings, np.array([*counted, False]), background)
        scores = fresh.score(query, self.ranker.model)
        state.counts.documents_scored += len(docs)
        state.counts.answers_scored += 1
        state.counts.score_calls += 1
        ranked = add_ranks(
            pd.DataFrame(
                {"qid": qid, "docno": [*docs["docno"].astype(str), answer_id], "score": scores}
            )
        )
        above, ties = position(scores[:-1], scores[-1])  # lexical: exact (tolerance 0)
        state.keep(answer_id, qid, scores[-1], scores[:-1])
        strict = int(ranked["rank"].iloc[-1])
        return (answer_id, qid, float(scores[-1]), above, ties, strict, len(docs))
