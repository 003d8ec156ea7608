"""Injection: where a ranker puts a generated answer among the judged documents D_q of its query.

For each answer a of query q the result is its score s_a, ``above`` (documents of D_q scored
strictly higher), ``ties`` (scored exactly s_a), ``strict`` (the rank a full re-ranking gives a,
see ``nrp.positioning.ties``) and |D_q|; ``nrp.positioning.scoring`` turns these into r and NRP.

The source study's scripts re-rank all of D_q again for every answer. That is the reference mode
here (``full_rerank=True``: ``ranker.transform`` on D_q plus the answer appended last, nothing
cached). The fast mode computes the same numbers with each document scored once and each answer
scored once, per kind of ranker:

- **pointwise** (dense, monot5, colbert, random, any ranker whose score of a row does not depend
  on the other rows): D_q's scores come from the score cache (``CachedRanker``: computed once,
  then served); the answers are scored as extra rows (docno = answer_id), all answers of a batch
  in one ``score_frame`` call across queries: one model row per answer.
- **lexical, stats=query** (tfidf, bm25, dph; the default): an answer joins D_q's index, so N,
  avgdl, df and F change and every document of D_q must be rescored, exactly as the source
  study's per-query index did. D_q is tokenised once per query (``LexicalRanker.build_index``)
  and its postings of the query's terms kept (``QueryPostings``); the answers of a batch, over
  any number of queries, are tokenised once each and D_q plus each answer rescored in one
  vectorised pass (``nrp.rankers.lexical_batch``; ``documents_rescored`` counts those rows; no
  model, no per-answer frame). The floats equal those of ``index.with_extra(answer).score(query)``
  and of a fresh index of D_q plus the answer (same postings, same integer statistics, same
  operations in the same order), so ties are exact.
- **lexical, frozen statistics** (``frozen_stats=True``; and always with ``stats=collection``):
  the statistics D_q was scored with are kept and the answer is scored against them without
  being added: its own tf and length, D_q's (or the collection's) N, avgdl, df and F; a term
  of the answer that D_q's lexicon lacks is skipped (df = 0, Terrier's "term not found"). D_q's
  scores come from the score cache; the answer is one pointwise row. Why ``stats=collection``
  is always frozen: the collection's statistics describe the corpus, which an answer does not
  join (adding it would change every document's score by a hair and make D_q's cached scores
  depend on the answer). The reference for frozen statistics is a fresh index of D_q plus the
  answer built from scratch per answer, with the answer left out of the statistics
  (``_frozen_reference``); ``ranker.transform`` cannot be it, since it counts every row it
  ranks.
- **duoT5**: monoT5 scores of D_q come from the score cache (monoT5's own scope, shared with a
  ``monot5`` ranker of the same checkpoint); each answer's monoT5 score is computed once. As
  ``DuoT5Ranker.transform`` would, the answer enters the pairwise stage only when its monoT5
  score puts it into the top k of D_q plus the answer; it is then compared with the top k-1
  documents: 2(k-1) pair evaluations, all answers' pairs in one batch. Document-document pair
  scores of each query's monoT5 top k are scored once and kept in the pair cache
  (``nrp.positioning.results_cache.PairCache``). Final scores come from ``DuoT5Ranker.rerank``
  itself, with
  its pair scorer serving the cached and batched pairs, so aggregation and combination are the
  ranker's own code. Comparing every answer with the top k regardless of its monoT5 score (as
  ``rerank(include=...)`` allows) would be a different ranker from the one validated: an answer
  in the pairwise stage always lands above every document outside it, so r <= k for any
  answer, however poor.

Each ranker declares which of these it is (``Ranker.injection``: "pointwise", "statistics" for
the lexical models, "pairwise" for duoT5), so a new ranker needs no change here. Rankers whose
scores depend on the candidate set in a way this module does not know
(``depends_on_candidate_set`` while declared pointwise), and lexical rankers on the
``terrier`` or ``pisa`` back-ends with recomputed statistics, fall back to the reference mode:
exact, and slower.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from pyterrier.model import add_ranks

from nrp.collection.collection import Collection
from nrp.errors import NrpError
from nrp.positioning.results_cache import POSITION_COLUMNS, PairCache
from nrp.positioning.ties import position, positions
from nrp.rankers import text_pipeline
from nrp.rankers.base import REQUIRED_COLUMNS, Ranker
from nrp.rankers.cache import CachedRanker, ScoreCache
from nrp.rankers.lexical import CorpusStatistics, LexicalIndex, LexicalRanker
from nrp.rankers.lexical_batch import QueryPostings, score_with_each_extra
from nrp.rankers.t5 import DuoT5Ranker, ordered_pairs, pairs_against, top_k_mask
from nrp.validation import fusion_weights as _fusion_weights  # noqa: F401  (fuse: weights=fit)

#: Injection modes (the ``mode`` of a result; part of the results-cache key).
POINTWISE = "fast:pointwise"
LEXICAL_RECOMPUTED = "fast:lexical-recomputed"
LEXICAL_FROZEN = "fast:lexical-frozen"
DUOT5_TOP_K = "fast:duot5-top-k"
FULL_TRANSFORM = "full:transform"
FULL_LEXICAL_FROZEN = "full:lexical-frozen"

ANSWER_COLUMNS = ("answer_id", "qid", "text")


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


def injection_mode(ranker: Ranker, frozen_stats: bool = False, full_rerank: bool = False) -> str:
    """The mode ``AnswerInjector`` uses for this ranker and these options, from the kind of
    injection the ranker declares (``Ranker.injection``: pointwise, statistics, pairwise)."""
    kind = ranker.injection
    if kind == "statistics":
        python = ranker.params.get("backend", "python") == "python"
        if frozen_stats or ranker.params.get("stats") == "collection":
            if not python:
                raise NrpError(
                    f"{ranker.spec()}: frozen statistics (frozen_stats, or stats=collection) are "
                    "computed with the python back-end only; use backend=python"
                )
            return FULL_LEXICAL_FROZEN if full_rerank else LEXICAL_FROZEN
        # the terrier / pisa back-ends have no incremental index
        return LEXICAL_RECOMPUTED if python and not full_rerank else FULL_TRANSFORM
    if full_rerank:
        return FULL_TRANSFORM
    if kind == "pairwise":
        return DUOT5_TOP_K
    if ranker.depends_on_candidate_set:
        return FULL_TRANSFORM  # a set-dependent ranker we cannot decompose: re-rank exactly
    return POINTWISE


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


class AnswerInjector:
    """Positions answers among D_q for one ranker (see the module docstring for the modes).

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
        self.collection = collection
        self.ranker = ranker
        self.mode = injection_mode(ranker, frozen_stats, full_rerank)
        self.tolerance = float(ranker.score_tolerance)  # the tie rule's, in every mode
        self.score_cache = score_cache
        self.pair_cache = pair_cache
        self.fingerprint = str(collection.meta["fingerprint"])
        self.counts = InjectionCounts()
        # D_q with the ranker's query field; an answer takes its query from these rows
        frame = ranker.formulate(collection.candidates() if candidates is None else candidates)
        self._dq: dict[str, pd.DataFrame] = {
            str(qid): group[list(REQUIRED_COLUMNS)].reset_index(drop=True)
            for qid, group in frame.groupby(frame["qid"].astype(str), sort=False)
        }
        self._doc_scores: dict[tuple[str, str], np.ndarray] = {}  # (scorer fp, qid) -> scores
        self._indexes: dict[str, LexicalIndex] = {}
        self._postings: dict[str, QueryPostings] = {}
        self._query_docnos: dict[str, tuple[str, frozenset[str]] | None] = {}
        self._statistics: dict[str, CorpusStatistics] = {}
        self._pairs: dict[tuple[str, str, str], float] = {}  # doc-doc duoT5 pairs
        self._pairs_ready: set[str] = set()
        # fingerprints hash model files (a T5 checkpoint: a gigabyte): computed once per scorer
        self._fingerprints: dict[int, str] = {}
        self._cached_rankers: dict[int, CachedRanker] = {}
        self._pair_scope_key: str | None = None
        #: answer_id -> its injected ranking, for every answer positioned (None: not kept)
        self.rankings: dict[str, InjectedRanking] | None = None

    def keep_rankings(self) -> None:
        """From now on keep each positioned answer's ``InjectedRanking`` in ``rankings``."""
        if self.rankings is None:
            self.rankings = {}

    def _keep(
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
                docnos = self._dq[qid]["docno"].astype(str).tolist()
            ranking = InjectedRanking(qid, list(docnos), np.array(doc_scores), float(score))
            self.rankings[str(answer_id)] = ranking

    # -- inputs ------------------------------------------------------------------------------
    def docs(self, qid: str) -> pd.DataFrame:
        """D_q of a query (qid, query, docno, text), empty when it has none."""
        found = self._dq.get(str(qid))
        return found if found is not None else pd.DataFrame(columns=list(REQUIRED_COLUMNS))

    def _query_and_docnos(self, qid: str) -> tuple[str, frozenset[str]] | None:
        """The query D_q was scored with and D_q's docnos (None: no D_q), read once per query."""
        if qid not in self._query_docnos:
            docs = self._dq.get(qid)
            self._query_docnos[qid] = (
                None
                if docs is None or docs.empty
                else (str(docs["query"].iloc[0]), frozenset(docs["docno"].astype(str)))
            )
        return self._query_docnos[qid]

    def _answer_frame(self, answers: pd.DataFrame) -> pd.DataFrame:
        """Answers as ranker rows: the topic's query (as D_q was scored with), docno =
        answer_id. Checks that every query has documents and no answer id is a docno of D_q."""
        qids = answers["qid"].astype(str).tolist()
        answer_ids = answers["answer_id"].astype(str).tolist()
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
        texts = [
            "" if text is None or (isinstance(text, float) and np.isnan(text)) else str(text)
            for text in answers["text"].tolist()
        ]
        # object columns: the rows are read back as Python strings, not converted twice
        return pd.DataFrame(
            {"qid": qids, "query": queries, "docno": answer_ids, "text": texts}, dtype=object
        )

    # -- entry point -------------------------------------------------------------------------
    def position(self, answers: pd.DataFrame) -> pd.DataFrame:
        """Score, above, ties, strict and |D_q| of each answer (rows answer_id, qid, text), in
        the order given."""
        missing = [c for c in ANSWER_COLUMNS if c not in answers.columns]
        if missing:
            raise ValueError(f"answers need columns {list(ANSWER_COLUMNS)}; missing {missing}")
        frame = self._answer_frame(answers.reset_index(drop=True))
        if frame.empty:
            return pd.DataFrame(columns=list(POSITION_COLUMNS))
        run: Callable[[pd.DataFrame], list[tuple]] = {
            POINTWISE: self._pointwise,
            LEXICAL_RECOMPUTED: self._lexical_recomputed,
            LEXICAL_FROZEN: self._lexical_frozen,
            DUOT5_TOP_K: self._duot5,
            FULL_TRANSFORM: self._full_transform,
            FULL_LEXICAL_FROZEN: self._frozen_reference,
        }[self.mode]
        rows = run(frame)
        out = pd.DataFrame(rows, columns=list(POSITION_COLUMNS))
        for column in ("above", "ties", "strict", "n_docs"):
            out[column] = out[column].astype(np.int64)
        out["score"] = out["score"].astype(np.float64)
        return out

    def _row(self, answer_id: str, qid: str, score: float, doc_scores: np.ndarray) -> tuple:
        """One result row; strict = above + ties (the appended answer goes below its ties)."""
        above, ties = position(doc_scores, score, self.tolerance)
        self._keep(answer_id, qid, score, doc_scores)
        return (answer_id, qid, float(score), above, ties, above + ties, len(doc_scores))

    def _rows_against(
        self,
        answer_ids: list[str],
        qids: list[str],
        scores: np.ndarray,
        doc_scores: Mapping[str, np.ndarray],
    ) -> list[tuple]:
        """``_rows`` with D_q's scores per query (the same for every answer of a query)."""
        own = [doc_scores[q] for q in qids]
        owners = np.repeat(np.arange(len(qids)), [len(d) for d in own])
        return self._rows(answer_ids, qids, np.asarray(scores), np.concatenate(own), owners)

    def _rows(
        self,
        answer_ids: list[str],
        qids: list[str],
        scores: np.ndarray,
        doc_scores: np.ndarray,
        owners: np.ndarray,
    ) -> list[tuple]:
        """``_row`` of many answers at once: ``doc_scores`` concatenates each answer's D_q
        scores (D_q's order), ``owners`` the answer (index) each belongs to."""
        above, ties = positions(doc_scores, owners, scores, self.tolerance)
        n_docs = np.bincount(owners, minlength=len(scores))
        if self.rankings is not None:
            ends = np.cumsum(n_docs)
            for i, (answer_id, qid) in enumerate(zip(answer_ids, qids, strict=True)):
                self._keep(answer_id, qid, scores[i], doc_scores[ends[i] - n_docs[i] : ends[i]])
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

    def _scores_of_docs(self, qids: list[str], scorer: Ranker) -> dict[str, np.ndarray]:
        """D_q's scores by ``scorer`` for each query: served from memory or the score cache,
        the missing ones computed in one call."""
        key = self.fingerprint_of(scorer)
        todo = [q for q in dict.fromkeys(qids) if (key, q) not in self._doc_scores]
        if todo:
            rows = pd.concat([self._dq[q] for q in todo], ignore_index=True)
            if self.score_cache is not None:
                if id(scorer) not in self._cached_rankers:
                    self._cached_rankers[id(scorer)] = CachedRanker(
                        scorer, self.score_cache, self.fingerprint
                    )
                cached = self._cached_rankers[id(scorer)]
                before = cached.computed
                out = cached.transform(rows)
                self.counts.documents_scored += cached.computed - before
                self.counts.score_calls += int(cached.computed > before)
                by_key = dict(
                    zip(
                        zip(out["qid"].astype(str), out["docno"].astype(str), strict=True),
                        out["score"].to_numpy(dtype=np.float64),
                        strict=True,
                    )
                )
                scores = np.array(
                    [
                        by_key[(q, d)]
                        for q, d in zip(
                            rows["qid"].astype(str), rows["docno"].astype(str), strict=True
                        )
                    ],
                    dtype=np.float64,
                )
            else:
                scores = np.asarray(scorer.score_frame(rows), dtype=np.float64)
                self.counts.documents_scored += len(rows)
                self.counts.score_calls += 1
            start = 0
            for q in todo:
                n = len(self._dq[q])
                self._doc_scores[(key, q)] = scores[start : start + n]
                start += n
        return {q: self._doc_scores[(key, q)] for q in qids}

    def _score_answers(self, frame: pd.DataFrame, scorer: Ranker) -> np.ndarray:
        """Every answer row scored once, across queries, in one call."""
        scores = np.asarray(scorer.score_frame(frame), dtype=np.float64)
        self.counts.answers_scored += len(frame)
        self.counts.score_calls += 1
        return scores

    # -- pointwise ---------------------------------------------------------------------------
    def _pointwise(self, frame: pd.DataFrame) -> list[tuple]:
        qids = frame["qid"].tolist()
        doc_scores = self._scores_of_docs(qids, self.ranker)
        answer_scores = self._score_answers(frame, self.ranker)
        return self._rows_against(frame["docno"].tolist(), qids, answer_scores, doc_scores)

    # -- lexical -----------------------------------------------------------------------------
    def _lexical(self) -> LexicalRanker:
        assert isinstance(self.ranker, LexicalRanker)
        return self.ranker

    def _index(self, qid: str) -> LexicalIndex:
        """D_q's index with the ranker's statistics, tokenised once per query."""
        if qid not in self._indexes:
            docs = self._dq[qid]
            self._indexes[qid] = self._lexical().build_index(
                docs["text"].fillna("").astype(str).tolist(), docs["docno"].astype(str).tolist()
            )
        return self._indexes[qid]

    def _query_postings(self, qid: str, query: str) -> QueryPostings:
        """D_q's postings of the query's terms and its statistics, built once per query."""
        if qid not in self._postings:
            self._postings[qid] = QueryPostings.of(self._index(qid), query)
        return self._postings[qid]

    def _lexical_recomputed(self, frame: pd.DataFrame) -> list[tuple]:
        """Each answer with D_q rescored on statistics that count it, as
        ``index.with_extra(answer).score(query)`` gives them, all answers of the batch in one
        vectorised pass (``nrp.rankers.lexical_batch``)."""
        qids = frame["qid"].tolist()
        queries = [
            self._query_postings(q, query)
            for q, query in zip(qids, frame["query"].tolist(), strict=True)
        ]
        term_lists = [text_pipeline.analyse(text) for text in frame["text"].tolist()]
        scored = score_with_each_extra(queries, term_lists, self._lexical().model)
        self.counts.documents_rescored += int(scored.n_docs.sum())
        self.counts.answers_scored += len(frame)
        doc_scores, owners = scored.document_scores()
        return self._rows(frame["docno"].tolist(), qids, scored.answer_scores(), doc_scores, owners)

    def frozen_statistics(self, qid: str) -> CorpusStatistics:
        """The statistics D_q of ``qid`` is scored with: D_q's own (stats=query), or the
        collection's plus any D_q documents the corpus lacks (stats=collection), as the lexical
        ranker counts them (``LexicalIndex.from_texts``)."""
        if qid not in self._statistics:
            docs = self._dq[qid]
            texts = docs["text"].fillna("").astype(str).tolist()
            docnos = docs["docno"].astype(str).tolist()
            background = self._lexical().background
            if background is None:
                stats = CorpusStatistics.from_texts(texts, docnos)
            else:
                lacking = [i for i, d in enumerate(docnos) if d not in background.docnos]
                if not lacking:
                    stats = background
                else:
                    own = CorpusStatistics.from_texts(
                        [texts[i] for i in lacking], [docnos[i] for i in lacking]
                    )
                    stats = CorpusStatistics(
                        background.num_docs + own.num_docs,
                        background.num_tokens + own.num_tokens,
                        _SummedCounts(background.df, own.df),
                        _SummedCounts(background.cf, own.cf),
                        background.docnos | own.docnos,
                    )
            self._statistics[qid] = stats
        return self._statistics[qid]

    def _lexical_frozen(self, frame: pd.DataFrame) -> list[tuple]:
        """D_q from the score cache; the answers of a query scored together, each against the
        frozen statistics only (``counted`` False: no answer joins N, avgdl, df or F)."""
        model = self._lexical().model
        qids = frame["qid"].tolist()
        doc_scores = self._scores_of_docs(qids, self.ranker)
        answer_scores = np.zeros(len(frame), dtype=np.float64)
        for qid, rows in frame.groupby("qid", sort=False).indices.items():
            group = frame.iloc[rows]
            postings = LexicalIndex.from_texts(group["text"].tolist()).postings
            frozen = LexicalIndex(
                postings, np.zeros(len(group), dtype=bool), self.frozen_statistics(str(qid))
            )
            answer_scores[rows] = frozen.score(str(group["query"].iloc[0]), model)
        self.counts.answers_scored += len(frame)
        self.counts.score_calls += 1
        return self._rows_against(frame["docno"].tolist(), qids, answer_scores, doc_scores)

    def _frozen_reference(self, frame: pd.DataFrame) -> list[tuple]:
        """Reference for frozen statistics: per answer, a fresh index of D_q plus the answer
        (everything tokenised again), the answer left out of the statistics, every row scored;
        r from ``add_ranks`` with the answer appended last."""
        ranker = self._lexical()
        background = ranker.background
        rows = []
        for answer_id, qid, query, text in frame[["docno", "qid", "query", "text"]].itertuples(
            index=False
        ):
            docs = self._dq[qid]
            texts = [*docs["text"].fillna("").astype(str), text]
            counted = [background is None or d not in background.docnos for d in docs["docno"]]
            index = LexicalIndex.from_texts(texts)
            fresh = LexicalIndex(index.postings, np.array([*counted, False]), background)
            scores = fresh.score(query, ranker.model)
            self.counts.documents_scored += len(docs)
            self.counts.answers_scored += 1
            self.counts.score_calls += 1
            ranked = add_ranks(
                pd.DataFrame(
                    {"qid": qid, "docno": [*docs["docno"].astype(str), answer_id], "score": scores}
                )
            )
            above, ties = position(scores[:-1], scores[-1])  # lexical: exact (tolerance 0)
            self._keep(answer_id, qid, scores[-1], scores[:-1])
            strict = int(ranked["rank"].iloc[-1])
            rows.append((answer_id, qid, float(scores[-1]), above, ties, strict, len(docs)))
        return rows

    # -- reference: full re-ranking ----------------------------------------------------------
    def _full_transform(self, frame: pd.DataFrame) -> list[tuple]:
        """As the source scripts: per answer, D_q with the answer appended last, re-ranked from
        scratch by ``ranker.transform`` (no cache); strict = the answer's ``rank`` (exact
        rankers) or above + ties under the ranker's tolerance (neural rankers)."""
        duo = self.ranker if isinstance(self.ranker, DuoT5Ranker) else None
        original = duo.pair_scorer if duo is not None else None
        if duo is not None:

            def counting(pairs: pd.DataFrame) -> np.ndarray:
                self.counts.pair_evaluations += len(pairs)
                return original(pairs)

            duo.pair_scorer = counting
        rows = []
        try:
            for i in range(len(frame)):
                answer = frame.iloc[[i]]
                qid, answer_id = str(answer["qid"].iloc[0]), str(answer["docno"].iloc[0])
                docs = self._dq[qid]
                ranked = self.ranker.transform(pd.concat([docs, answer], ignore_index=True))
                self.counts.score_calls += 1
                self.counts.documents_scored += len(docs)
                self.counts.answers_scored += 1
                is_answer = (ranked["docno"].astype(str) == answer_id).to_numpy()
                score = float(ranked.loc[is_answer, "score"].iloc[0])
                doc_scores = ranked.loc[~is_answer, "score"].to_numpy(dtype=np.float64)
                above, ties = position(doc_scores, score, self.tolerance)
                docnos = ranked.loc[~is_answer, "docno"].astype(str).tolist()
                self._keep(answer_id, qid, score, doc_scores, docnos)
                # exact rankers: the rank add_ranks gave the appended answer (the tests check it
                # equals above + ties); with a tolerance, ties are not exact equalities that a
                # sort could see, and the same rule as the fast mode applies
                strict = (
                    int(ranked.loc[is_answer, "rank"].iloc[0])
                    if self.tolerance == 0.0
                    else above + ties
                )
                rows.append((answer_id, qid, score, above, ties, strict, len(docs)))
        finally:
            if duo is not None:
                duo.pair_scorer = original
        return rows

    # -- duoT5 -------------------------------------------------------------------------------
    def _duo(self) -> DuoT5Ranker:
        assert isinstance(self.ranker, DuoT5Ranker)
        return self.ranker

    def _pair_scope(self) -> str:
        if self._pair_scope_key is None:
            self._pair_scope_key = PairCache.scope(self.fingerprint, self._duo().pair_fingerprint())
        return self._pair_scope_key

    def _ensure_document_pairs(self, qids: list[str], mono: dict[str, np.ndarray]) -> None:
        """Pair scores among each query's monoT5 top k documents: from the pair cache, the
        missing ones scored in one call and stored. Any top-k stage of D_q plus one answer
        needs only these (the top k, or the top k-1 and the answer)."""
        duo = self._duo()
        todo = [q for q in dict.fromkeys(qids) if q not in self._pairs_ready]
        if not todo:
            return
        if self.pair_cache is not None:
            self._pairs.update(self.pair_cache.lookup(self._pair_scope(), todo))
        needed = []
        for qid in todo:
            docs = self._dq[qid]
            top = docs[top_k_mask([qid] * len(docs), mono[qid], duo.params["k"])]
            needed.append(ordered_pairs(top))
        pairs = pd.concat(needed, ignore_index=True)
        keys = list(zip(pairs["qid"], pairs["docno_a"], pairs["docno_b"], strict=True))
        known = np.array([k in self._pairs for k in keys], dtype=bool)
        self.counts.pairs_from_cache += int(known.sum())
        missing = pairs[~known].reset_index(drop=True)
        if len(missing):
            log_p = np.asarray(duo.score_pairs(missing), dtype=np.float64)
            self.counts.pair_evaluations += len(missing)
            self.counts.score_calls += 1
            fresh = [
                (k[0], k[1], k[2], p)
                for k, p in zip(
                    zip(missing["qid"], missing["docno_a"], missing["docno_b"], strict=True),
                    log_p,
                    strict=True,
                )
            ]
            self._pairs.update({(q, a, b): p for q, a, b, p in fresh})
            if self.pair_cache is not None:
                self.pair_cache.store(self._pair_scope(), fresh)
        self._pairs_ready.update(todo)

    def _duot5(self, frame: pd.DataFrame) -> list[tuple]:
        duo = self._duo()
        k = duo.params["k"]
        qids = frame["qid"].tolist()
        mono = self._scores_of_docs(qids, duo.mono)
        answer_mono = self._score_answers(frame, duo.mono)
        self._ensure_document_pairs(qids, mono)
        # which answers reach the pairwise stage, and the pairs they need: one batch for all
        stages, needed = [], []
        for i, qid in enumerate(qids):
            docs = self._dq[qid]
            both = pd.concat([docs, frame.iloc[[i]]], ignore_index=True)
            scores = np.append(mono[qid], answer_mono[i])
            in_stage = top_k_mask([qid] * len(both), scores, k)
            stages.append((both, scores))
            if in_stage[-1] and in_stage[:-1].any():
                needed.append(pairs_against(frame.iloc[[i]], docs[in_stage[:-1]]))
        answer_pairs: dict[tuple[str, str, str], float] = {}
        if needed:
            pairs = pd.concat(needed, ignore_index=True)
            log_p = np.asarray(duo.score_pairs(pairs), dtype=np.float64)
            self.counts.pair_evaluations += len(pairs)
            self.counts.score_calls += 1
            answer_pairs = dict(
                zip(
                    zip(pairs["qid"], pairs["docno_a"], pairs["docno_b"], strict=True),
                    log_p,
                    strict=True,
                )
            )

        def serve(pairs: pd.DataFrame) -> np.ndarray:
            out = np.empty(len(pairs), dtype=np.float64)
            for j, key in enumerate(
                zip(
                    pairs["qid"].astype(str),
                    pairs["docno_a"].astype(str),
                    pairs["docno_b"].astype(str),
                    strict=True,
                )
            ):
                found = self._pairs.get(key, answer_pairs.get(key))
                if found is None:  # never expected: the stage is the one computed above
                    raise RuntimeError(f"duoT5 pair {key} was not prepared")
                out[j] = found
            return out

        original = duo.pair_scorer
        duo.pair_scorer = serve
        rows = []
        try:
            for (both, scores), answer_id, qid in zip(stages, frame["docno"], qids, strict=True):
                final = duo.rerank(both, scores)
                rows.append(self._row(answer_id, qid, final[-1], final[:-1]))
        finally:
            duo.pair_scorer = original
        return rows


def describe_mode(mode: str, ranker: Ranker) -> str:
    """One line saying how a ranker's answers were positioned (for reports and attrs)."""
    text = {
        POINTWISE: "D_q scored once (score cache), each answer scored once as an extra row",
        LEXICAL_RECOMPUTED: "D_q tokenised once; D_q and the answer rescored with statistics "
        "that include the answer (as the source study's per-query index)",
        LEXICAL_FROZEN: "statistics frozen at what D_q was scored with; the answer scored "
        "against them without joining them; D_q from the score cache",
        DUOT5_TOP_K: "monoT5 of D_q cached; answer's monoT5 once; duoT5 pairs with the top "
        "k-1 documents when the answer reaches monoT5's top k; document pairs cached",
        FULL_TRANSFORM: "reference: D_q plus the answer re-ranked from scratch per answer "
        "(ranker.transform)",
        FULL_LEXICAL_FROZEN: "reference for frozen statistics: a fresh index of D_q plus the "
        "answer per answer, the answer left out of the statistics",
    }[mode]
    return f"{ranker.spec()}: {mode}: {text}"
