"""Flags of degenerate answers: rules a person can check by hand on one answer.

An answer that only restates or evades the question can still get an NRP near 1 (a ranker that
matches the question's words puts it above every judged document). These flags do not score an
answer; they mark the ones to read before an NRP is believed, and ``nrp summary``, ``nrp report``
and ``nrp check --max-flagged`` count them per LLM x prompt.

Terms. An answer's and a question's *content terms* are Terrier's terms, as the lexical rankers
see them (``nrp.rankers.text_pipeline``): the EnglishTokeniser's tokens, less Terrier's 733
stopwords, Porter-stemmed; each distinct term counts once. *Words* (for copies) are the runs of
letters, digits and apostrophes (``nrp.validation.degenerate.WORD``), lower-cased.

Flags, in this order (``FLAG_NAMES``):

- ``empty``: the answer says nothing: no text, or whitespace only (``nrp.answers.is_empty``). It
  is scored last (NRP 0) and has this flag alone: the others are about what a text says.
- ``question_words``: the answer says (almost) nothing but the question's words: at least
  ``QUESTION_SHARE`` (0.8) of its distinct content terms are terms of the question, or it has no
  content term at all. 0.8 lets one new term in five through (a framing word: "asked",
  "question") and still flags an echo, a keyword list or a question in boilerplate made of
  stopwords ("thank you for your question"); a real answer of any length brings more new terms
  than it repeats.
- ``judged_copy``: a near copy of one of the query's judged documents: at least
  ``COPY_SHARE`` (0.8) of the answer's distinct word ``COPY_GRAM``-grams (5) occur in one judged
  document (a text of fewer than 5 words is one gram: its whole word sequence, so a short answer
  matches only a document that is exactly those words). Five words in a row rarely recur
  between texts written apart (the shingle size of near-duplicate detection), and 0.8 lets a
  few edits through: one changed word breaks at most 5 grams. A copy of part of a document is
  flagged too: its grams all occur in the document.
- ``little_content``: fewer than ``MIN_NEW_TERMS`` (5) distinct content terms that are not the
  question's. A restatement ("So you want to know ...", "Many people wonder ...") or an evasion
  ("it depends, ask a professional") adds two to four; a three-sentence answer adds a dozen.
  A one-line answer ("No.") is flagged as well: a flag asks for reading, it is not a verdict.

``flag_answers(answers, queries, judged)`` gives one row per answer with the flags and the
numbers they were decided on (``question_share``, ``copy_share``, ``new_terms``), so each flag
can be checked against the texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from nrp.answers import EMPTY, is_empty
from nrp.errors import NrpError
from nrp.rankers.term_arrays import WORD_TOKENS, TermArrays, Vocabulary, cut, split_terms
from nrp.rankers.text_pipeline import analyse, english_tokens, porter_stem, terrier_stopwords
from nrp.tables import require_columns
from nrp.validation.copy_shares import CopyShares
from nrp.validation.degenerate import WORD

#: question_words: the least share of an answer's content terms that are the question's
QUESTION_SHARE = 0.8
#: judged_copy: word n-grams compared (n), and the least share of the answer's n-grams that occur
#: in one judged document
COPY_GRAM = 5
COPY_SHARE = 0.8
#: little_content: an answer with fewer content terms that are not the question's is flagged
MIN_NEW_TERMS = 5
#: the flags, in the order the ``flags`` column joins them
FLAG_NAMES = (EMPTY, "question_words", "judged_copy", "little_content")
#: identity columns copied from the answers when they have them
ID_COLUMNS = ("answer_id", "qid", "llm", "prompt", "sample")
#: the numbers the flags are decided on
MEASURE_COLUMNS = ("question_share", "copy_share", "new_terms")

Gram = tuple[str, ...]


def content_terms(text: str) -> frozenset[str]:
    """The distinct Terrier terms of ``text``: tokens less stopwords, Porter-stemmed."""
    stopwords = terrier_stopwords()
    return frozenset(porter_stem(t) for t in english_tokens(text) if t not in stopwords)


def word_grams(text: str, n: int = COPY_GRAM) -> frozenset[Gram]:
    """The distinct lower-cased word n-grams of ``text``; fewer than n words: the whole word
    sequence as one gram (none for a text without words)."""
    words = [w.lower() for w in WORD.findall(text)]
    if len(words) < n:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def question_share(answer_terms: frozenset[str], question_terms: frozenset[str]) -> float:
    """The share of the answer's content terms that are the question's (1.0 without any)."""
    if not answer_terms:
        return 1.0
    return len(answer_terms & question_terms) / len(answer_terms)


def copy_share(answer_grams: frozenset[Gram], documents: Sequence[frozenset[Gram]]) -> float:
    """The largest share of the answer's grams that occur in one document (0.0 without any)."""
    if not answer_grams:
        return 0.0
    best = max((len(answer_grams & doc) for doc in documents), default=0)
    return best / len(answer_grams)


def answer_flags(
    answer: str, question: str, documents: Sequence[frozenset[Gram]]
) -> dict[str, object]:
    """The flags of one answer (``FLAG_NAMES`` -> bool) and their numbers
    (``MEASURE_COLUMNS``); ``documents``: the word grams of the query's judged documents."""
    terms, asked = content_terms(answer), content_terms(question)
    share = question_share(terms, asked)
    copied = copy_share(word_grams(answer), documents)
    new = len(terms - asked)
    said = not is_empty(answer)
    return {
        EMPTY: not said,
        "question_words": said and share >= QUESTION_SHARE,
        "judged_copy": said and copied >= COPY_SHARE,
        "little_content": said and new < MIN_NEW_TERMS,
        "question_share": share,
        "copy_share": copied,
        "new_terms": new,
    }


def flag_answers(
    answers: pd.DataFrame,
    queries: Mapping[str, str],
    judged: Mapping[str, Sequence[str]],
) -> pd.DataFrame:
    """One row per answer: answer_id, qid (llm, prompt, sample when the answers have them),
    ``flags`` (the names of its flags joined by commas in ``FLAG_NAMES`` order, "" for none),
    one boolean column per flag, ``flagged`` (any flag) and the numbers of ``MEASURE_COLUMNS``.

    ``answers``: answer_id, qid, text; ``queries``: qid -> question text; ``judged``: qid -> the
    texts of its judged documents (a qid without any: no copy can be found)."""
    measures = FlagMeasures(answers, queries, judged)
    return measures.frame([row for start in measures.starts for row in measures.rows(start)])


class FlagMeasures:
    """``answer_flags``' numbers for an answer set, ``SLICE`` answers at a time, the slices in
    any order and in any process (``nrp.analysis.flags.flags_aside`` shares them between two),
    then ``frame`` of them all in order. The same numbers as ``answer_flags``: a slice's texts
    cut into tokens once (``WORD_TOKENS``), which give both its content terms, counted as
    arrays of term ids (``split_terms``, ``_content_counts``), and its words, whose grams give
    the copy shares as arrays (``CopyShares``; the few answers it leaves, those of fewer than
    five words first, are computed here one by one); the questions and judged documents of
    every query of the answer set once per process, when the first slice is measured. A
    slice's texts become Python strings only while it is measured."""

    SLICE = 4096

    def __init__(
        self,
        answers: pd.DataFrame,
        queries: Mapping[str, str],
        judged: Mapping[str, Sequence[str]],
    ):
        require_columns(answers, ("answer_id", "qid", "text"), "answers")
        self.answers, self.judged = answers, judged
        self.qids = answers["qid"].astype(str)
        self.questions = {str(q): str(t) for q, t in dict(queries).items()}
        unknown = sorted(set(self.qids) - set(self.questions))
        if unknown:
            raise NrpError(f"no question text for qid {unknown[0]!r} ({len(unknown)} qids unknown)")
        self.starts = range(0, len(answers), self.SLICE)
        self._qid_list = self.qids.tolist()
        self._vocabulary, self._copies = Vocabulary(), CopyShares(COPY_GRAM)
        self._asked: dict[str, np.ndarray] = {}
        self._grams: dict[str, _QueryGrams] = {}

    def rows(self, start: int) -> list[tuple]:
        """The slice at ``start``: per answer a tuple of ``FLAG_NAMES``' booleans, then
        ``MEASURE_COLUMNS``."""
        texts = self.answers["text"].iloc[start : start + self.SLICE]
        batch = texts.where(texts.notna(), "").astype(str).tolist()
        batch_qids = self._qid_list[start : start + len(batch)]
        if not self._asked:  # every query of the answer set at once: one table of grams
            for qid in dict.fromkeys(self._qid_list):
                terms = sorted(set(analyse(self.questions[qid])))
                self._asked[qid] = self._vocabulary.term_ids(terms)
                self._copies.add_query(qid, self.judged.get(qid, ()))
        tokens = cut(batch, WORD_TOKENS)  # one cut: words and Terrier's tokens
        counts = _content_counts(
            split_terms(tokens, len(batch), self._vocabulary), batch_qids, self._asked
        )
        shares = self._copies.of(tokens, len(batch), batch_qids).tolist()
        rows = []
        each = zip(batch, batch_qids, counts, shares, strict=True)
        for text, qid, (terms, common), copied in each:
            share = common / terms if terms else 1.0
            if copied != copied:  # NaN: the few answers ``CopyShares`` leaves to this one
                copied = self._copy_share(text, qid)
            new = terms - common
            said = not is_empty(text)
            rows.append(
                (not said, said and share >= QUESTION_SHARE, said and copied >= COPY_SHARE,
                 said and new < MIN_NEW_TERMS, share, copied, new)
            )  # fmt: skip
        return rows

    def _copy_share(self, text: str, qid: str) -> float:
        """``copy_share`` of one answer, from its word grams."""
        if qid not in self._grams:
            self._grams[qid] = _QueryGrams(self.judged.get(qid, ()))
        answer_grams = _grams(text)
        return self._grams[qid].best(answer_grams) / len(answer_grams) if answer_grams else 0.0

    def frame(self, rows: list[tuple], start: int = 0) -> pd.DataFrame:
        """``flag_answers``' frame from the rows of the answers from ``start`` on, in order
        (every slice's rows: the whole frame)."""
        answers = self.answers.iloc[start : start + len(rows)]
        values = pd.DataFrame(rows, columns=[*FLAG_NAMES, *MEASURE_COLUMNS], index=answers.index)
        out = pd.DataFrame(
            {c: answers[c] for c in ID_COLUMNS if c in answers.columns}, index=answers.index
        )
        out["answer_id"] = answers["answer_id"].astype(str)
        out["qid"] = self.qids.iloc[start : start + len(rows)]
        flags = values[list(FLAG_NAMES)].astype(bool)
        out["flags"] = [",".join(n for n, on in zip(FLAG_NAMES, row, strict=True) if on)
                        for row in flags.itertuples(index=False)]  # fmt: skip
        for name in FLAG_NAMES:
            out[name] = flags[name]
        out["flagged"] = flags.any(axis=1)
        for name in MEASURE_COLUMNS:
            out[name] = values[name]
        out["new_terms"] = out["new_terms"].astype(int)
        return out.reset_index(drop=True)


def _words(text: str) -> list[str]:
    """``[w.lower() for w in WORD.findall(text)]``, by ``bytes.translate`` (``WORD_TOKENS``)."""
    return text.encode("ascii", "replace").translate(WORD_TOKENS).decode("ascii").lower().split()


def _grams(text: str) -> set[Gram]:
    """``word_grams(text)`` as a set (the same grams)."""
    words = _words(text)
    if len(words) < COPY_GRAM:
        return {tuple(words)} if words else set()
    return set(zip(*(words[i:] for i in range(COPY_GRAM)), strict=False))


class _QueryGrams:
    """A query's judged documents as word grams: each document's, and their union (most answers
    share no gram with any document: one set intersection tells)."""

    def __init__(self, documents: Sequence[str]):
        self.documents = [_grams(str(text)) for text in documents]
        self.union: set[Gram] = set().union(*self.documents)

    def best(self, grams: set[Gram]) -> int:
        """The most of ``grams`` that occur in one document (``copy_share``'s numerator)."""
        hits = grams & self.union
        if not hits:
            return 0
        return max(len(hits & document) for document in self.documents)


def _content_counts(
    arrays: TermArrays, qids: list[str], asked: Mapping[str, np.ndarray]
) -> list[tuple[int, int]]:
    """Per text (``arrays``: their terms): its number of distinct content terms
    (``len(content_terms(text))``) and how many of them are its question's (``asked``: each
    qid's question's distinct term ids, each counted when the text has it at all)."""
    count = arrays.count
    owner, _ = arrays.distinct()
    asked_ids = [asked[qid] for qid in qids]
    pair_owner = np.repeat(np.arange(count), [len(ids) for ids in asked_ids])
    pair_terms = np.concatenate(asked_ids) if asked_ids else np.zeros(0, dtype=np.int64)
    present = arrays.frequencies(pair_owner, pair_terms) > 0
    return list(
        zip(
            np.bincount(owner, minlength=count).tolist(),
            np.bincount(pair_owner[present], minlength=count).tolist(),
            strict=True,
        )
    )
