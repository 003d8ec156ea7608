"""D_q plus each of many answers, scored in one pass: the lexical NRP step, vectorised.

Why: with recomputed statistics (stats=query) an answer joins D_q's statistics, so each answer
needs D_q rescored with N, avgdl, df and F that count it
(``LexicalIndex.with_extra(answer).score(query, model)``). Done answer by answer, that costs
Python and numpy call overhead per answer and query term, far more than the arithmetic. Here
every posting of a batch of answers (over any number of queries) is weighted by one call of
the model's own ``weight`` and summed into per-answer rows by one ``np.bincount``:

- ``QueryPostings.of(index, query)``: what D_q contributes, built once per query: the query's
  entries (term, keyFrequency), D_q's postings of their terms (entry, document, tf), document
  lengths, df, F, N and token count without any answer.
- ``score_with_each_extra(queries, answers, model)``: for answer i (its query's postings
  ``queries[i]``, its terms text i of ``answers``, ``nrp.rankers.term_arrays``: the batch's
  terms as arrays of term ids, each answer's tf of its query's terms counted by numpy) the
  scores of D_q then of the answer, as ``with_extra`` would give them; all answers' rows in
  one flat array.

The floats equal those of ``with_extra(answer).score_terms(...)``: the same integer statistics
(N + 1, tokens + the answer's length, df + 1 and F + tf for the terms the answer has) turned
into floats the same way, the same element-wise operations of the same ``weight`` (numpy
applies a ufunc element by element, so an element computed among many gets the operations it
got alone), and per document the same order of summation, starting from 0.0 and adding the
query's entries in order (``np.bincount`` adds its weights in input order). The positioning
tests compare the two on every answer of MEDIQA 2019, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nrp.rankers import text_pipeline
from nrp.rankers.lexical import (
    CorpusStatistics,
    LexicalIndex,
    StatisticsScorer,
    TermStatistics,
    WeightingModel,
)
from nrp.rankers.term_arrays import TermArrays, Vocabulary, analyse_texts


@dataclass(frozen=True, eq=False)
class QueryPostings:
    """D_q's part in scoring D_q plus one answer for one query (module docstring)."""

    terms: tuple[str, ...]  # the query's entries' terms, in order (a term may repeat)
    key_frequency: np.ndarray  # per entry
    df: np.ndarray  # per entry: documents with the term, without the answer
    cf: np.ndarray  # per entry: occurrences of the term, without the answer
    num_docs: int  # N without the answer
    num_tokens: int  # tokens without the answer
    num_base_docs: int  # |D_q|
    entry: np.ndarray  # per posting of D_q: its entry (ascending)
    doc: np.ndarray  # per posting: the document (numbered as in the index)
    tf: np.ndarray  # per posting: the term's frequency in the document
    doc_length: np.ndarray  # per posting: the document's length

    @classmethod
    def of(cls, index: LexicalIndex, query: str) -> QueryPostings:
        """From D_q's index (without extras) and the query text."""
        if index.extras:
            raise ValueError("QueryPostings needs D_q's own index, without extra documents")
        entries = text_pipeline.query_terms(query)
        num_docs, num_tokens = index.collection_size()
        lengths = index.postings.doc_lengths.astype(np.float64)
        frequencies = [index.term_frequencies(term) for term, _ in entries]
        entry, doc, tf = [], [], []
        for e, (term, _) in enumerate(entries):
            docs, tfs = index.postings.postings(term)
            entry.append(np.full(len(docs), e, dtype=np.int64))
            doc.append(docs)
            tf.append(tfs)
        doc_array = np.concatenate(doc) if doc else np.zeros(0, dtype=np.int64)
        return cls(
            terms=tuple(term for term, _ in entries),
            key_frequency=np.array([k for _, k in entries], dtype=np.float64),
            df=np.array([df for df, _ in frequencies], dtype=np.int64),
            cf=np.array([cf for _, cf in frequencies], dtype=np.int64),
            num_docs=int(num_docs),
            num_tokens=int(num_tokens),
            num_base_docs=index.num_base_docs,
            entry=np.concatenate(entry) if entry else np.zeros(0, dtype=np.int64),
            doc=doc_array,
            tf=np.concatenate(tf) if tf else np.zeros(0, dtype=np.float64),
            doc_length=lengths[doc_array],
        )


def _entry_frequencies(
    queries: Sequence[QueryPostings | FrozenQuery], answers: TermArrays
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per answer, its query's number of entries; per (answer, entry) pair, in answer then entry
    order: the answer, and the tf of the entry's term in the answer."""
    n_entries = np.array([len(q.terms) for q in queries], dtype=np.int64)
    pair_owner = np.repeat(np.arange(len(queries)), n_entries)
    entry_ids = answers.vocabulary.entry_ids
    pair_terms = np.concatenate([entry_ids(q.terms) for q in queries])
    return n_entries, pair_owner, answers.frequencies(pair_owner, pair_terms)


@dataclass(frozen=True)
class ExtraScores:
    """Scores of D_q plus each answer: answer i's documents at ``flat[starts[i] : starts[i] +
    n_docs[i]]`` (in D_q's order), its own score at ``flat[starts[i] + n_docs[i]]``."""

    flat: np.ndarray
    starts: np.ndarray
    n_docs: np.ndarray

    @property
    def answer_slots(self) -> np.ndarray:
        return self.starts + self.n_docs

    def answer_scores(self) -> np.ndarray:
        return self.flat[self.answer_slots]

    def document_scores(self) -> tuple[np.ndarray, np.ndarray]:
        """Every answer's D_q scores, concatenated, and the answer each belongs to."""
        is_answer = np.zeros(len(self.flat), dtype=bool)
        is_answer[self.answer_slots] = True
        owners = np.repeat(np.arange(len(self.starts)), self.n_docs)
        return self.flat[~is_answer], owners


def score_with_each_extra(
    queries: Sequence[QueryPostings], answers: TermArrays, model: WeightingModel
) -> ExtraScores:
    """For each answer i, D_q of ``queries[i]`` and the answer with terms those of text i of
    ``answers`` scored with statistics that count the answer (module docstring)."""
    count = len(queries)
    n_docs = np.array([q.num_base_docs for q in queries], dtype=np.int64)
    sizes = n_docs + 1
    starts = np.zeros(count, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    if count == 0:
        return ExtraScores(np.zeros(0), starts, n_docs)
    # per (answer, entry): the answer's tf and the statistics counting the answer
    n_entries, pair_owner, pair_tf = _entry_frequencies(queries, answers)
    entry_starts = np.zeros(count, dtype=np.int64)
    np.cumsum(n_entries[:-1], out=entry_starts[1:])
    lengths = answers.lengths()
    num_docs = np.array([q.num_docs for q in queries], dtype=np.int64) + 1
    num_tokens = np.array([q.num_tokens for q in queries], dtype=np.int64) + lengths
    avg_doc_len = num_tokens / num_docs
    pair_df = np.concatenate([q.df for q in queries]) + (pair_tf > 0)
    pair_cf = np.concatenate([q.cf for q in queries]) + pair_tf
    pair_kf = np.concatenate([q.key_frequency for q in queries])
    # D_q's postings, for every answer of the query; then the answers' own
    per_answer = np.array([len(q.doc) for q in queries], dtype=np.int64)
    doc_pair = np.concatenate([q.entry for q in queries]) + np.repeat(entry_starts, per_answer)
    doc_slot = np.concatenate([q.doc for q in queries]) + np.repeat(starts, per_answer)
    own_pair = np.flatnonzero(pair_tf > 0)
    own_owner = pair_owner[own_pair]
    pair = np.concatenate([doc_pair, own_pair])
    slot = np.concatenate([doc_slot, (starts + n_docs)[own_owner]])
    tf = np.concatenate([*(q.tf for q in queries), pair_tf[own_pair].astype(np.float64)])
    dl = np.concatenate([*(q.doc_length for q in queries), lengths[own_owner].astype(np.float64)])
    owner = pair_owner[pair]
    stats = TermStatistics(
        num_docs[owner].astype(np.float64),
        avg_doc_len[owner],
        pair_df[pair].astype(np.float64),
        pair_cf[pair].astype(np.float64),
        pair_kf[pair],
    )
    # each slot receives its query's entries in ascending order (D_q's postings are entry-major,
    # an answer's own slot only its own entries): the order of ``score_terms``
    weights = model.weight(tf, dl, stats)
    flat = np.bincount(slot, weights=weights, minlength=int(sizes.sum()))
    return ExtraScores(flat, starts, n_docs)


@dataclass(frozen=True, eq=False)
class FrozenQuery:
    """What scoring an answer against frozen statistics needs of one query: its entries (term,
    keyFrequency) and their df and F, N and avgdl of the statistics (D_q's own, or the
    collection's), none of which an answer changes."""

    terms: tuple[str, ...]
    key_frequency: np.ndarray
    df: np.ndarray
    cf: np.ndarray
    num_docs: int
    avg_doc_len: float

    @classmethod
    def of(cls, statistics: CorpusStatistics, query: str) -> FrozenQuery:
        entries = text_pipeline.query_terms(query)
        num_docs, num_tokens = statistics.num_docs, statistics.num_tokens
        return cls(
            terms=tuple(term for term, _ in entries),
            key_frequency=np.array([k for _, k in entries], dtype=np.float64),
            df=np.array([statistics.df.get(term, 0) for term, _ in entries], dtype=np.int64),
            cf=np.array([statistics.cf.get(term, 0) for term, _ in entries], dtype=np.int64),
            num_docs=int(num_docs),
            # as ``LexicalIndex.score_terms`` computes it (Python's division of the integers)
            avg_doc_len=num_tokens / num_docs if num_docs else 0.0,
        )


def score_frozen(
    queries: Sequence[FrozenQuery], answers: TermArrays, model: WeightingModel
) -> np.ndarray:
    """Answer i (the terms of text i of ``answers``) scored against the frozen statistics of
    ``queries[i]``, all answers in one pass: the floats of ``LexicalIndex(postings of the
    answers, counted nothing, the statistics).score(query)``: per answer, the model's weight of
    each entry whose term it has and the statistics know (df > 0; Terrier skips a term not
    found), added in entry order starting from 0.0 (``np.bincount`` adds in input order)."""
    count = len(queries)
    if count == 0:
        return np.zeros(0, dtype=np.float64)
    _, pair_owner, pair_tf = _entry_frequencies(queries, answers)
    pair_df = np.concatenate([q.df for q in queries])
    scored = np.flatnonzero((pair_tf > 0) & (pair_df > 0))
    owner = pair_owner[scored]
    lengths = answers.lengths().astype(np.float64)
    num_docs = np.array([q.num_docs for q in queries], dtype=np.float64)
    avg_doc_len = np.array([q.avg_doc_len for q in queries], dtype=np.float64)
    stats = TermStatistics(
        num_docs[owner],
        avg_doc_len[owner],
        pair_df[scored].astype(np.float64),
        np.concatenate([q.cf for q in queries])[scored].astype(np.float64),
        np.concatenate([q.key_frequency for q in queries])[scored],
    )
    weights = model.weight(pair_tf[scored].astype(np.float64), lengths[owner], stats)
    return np.bincount(owner, weights=weights, minlength=count)


def scores_with_each_text(
    ranker: StatisticsScorer,
    query: str,
    documents: Sequence[str],
    docnos: Sequence[str],
    texts: Sequence[str],
) -> tuple[np.ndarray, np.ndarray]:
    """D_q (``documents``, one per docno of ``docnos``) plus each of ``texts`` in turn, scored
    by ``ranker`` for ``query`` with statistics that count the text, as a fresh index of D_q
    plus the text gives them (``ranker.build_index([*documents, text], [*docnos, DOCNO])`` for
    a docno neither D_q nor the ranker's background corpus holds): D_q's scores per text (one
    row per text, D_q's order) and each text's own score. D_q is tokenised once, the texts in
    one vectorised pass (module docstring)."""
    index = ranker.build_index(list(documents), list(docnos))
    postings = QueryPostings.of(index, query)
    scored = score_with_each_extra(
        [postings] * len(texts), analyse_texts(list(texts), Vocabulary()), ranker.model
    )
    doc_scores, _ = scored.document_scores()
    return doc_scores.reshape(len(texts), len(docnos)), scored.answer_scores()
