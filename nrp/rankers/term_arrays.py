"""Many texts through Terrier's pipeline at once, as numpy arrays of term ids.

Why: ``text_pipeline.analyse`` makes a Python string per token and a list per text; on 100,000
answers that is 18 million tokens, the largest cost of ``nrp score`` after its start. What the
lexical positioning and the flags need of an answer is less: its length in terms, how often
each query term occurs in it, its distinct terms. Here a batch of texts is cut into tokens in
bulk (``cut``: one ``bytes.translate`` of all their bytes, split and made distinct by pyarrow,
no Python object per token), each *distinct* token sent once through the pipeline
(``text_pipeline._pipeline_term``, memoised in a ``Vocabulary``), and the terms kept as numpy
arrays of term ids (``TermArrays``). The flags cut their texts once, the apostrophe kept, for
their words and their terms (``split_terms``, ``nrp.validation.copy_shares``).

The terms are exactly ``analyse``'s, in the same order: a token is a maximal run of ASCII
letters and digits of the text encoded to ASCII with ``errors="replace"`` (a non-ASCII
character becomes one "?", a separator), which is what ``raw_tokens`` splits; every token then
gets ``_pipeline_term``'s term or is dropped. The tests compare the two on every line of the
MEDIQA 2019, LiveQA 2017 and CLEF eHealth answer files.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nrp.rankers import text_pipeline

#: ``bytes.translate`` table of the flags' tokens: ASCII letters and digits kept as they are,
#: the apostrophe kept, every other byte a space. Lower-cased, such a token is a word of
#: ``nrp.validation.degenerate.WORD``; split at its apostrophes, it is the tokeniser's tokens
#: (``split_terms``).
WORD_TOKENS = bytes(
    b if (chr(b).isascii() and chr(b).isalnum()) or b == ord("'") else ord(" ") for b in range(256)
)


class Vocabulary:
    """Term ids: each term a small integer, each raw token the id of its term (-1: dropped by
    the tokeniser's checks or as a stopword). Ids are never reused, so arrays made with one
    vocabulary stay comparable; learning new tokens takes a lock (positioning may run in
    threads)."""

    def __init__(self) -> None:
        self.terms: list[str] = []
        self._ids: dict[str, int] = {}
        self._raw: dict[str, int] = {}
        self._entries: dict[tuple[str, ...], np.ndarray] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.terms)

    def term_ids(self, terms: Sequence[str]) -> np.ndarray:
        """The ids of terms (stems), new ones added."""
        with self._lock:
            return np.array([self._term_id(t) for t in terms], dtype=np.int64)

    def entry_ids(self, terms: tuple[str, ...]) -> np.ndarray:
        """``term_ids`` of a query's entries, kept: a batch asks again for every answer."""
        found = self._entries.get(terms)
        if found is None:
            found = self._entries[terms] = self.term_ids(terms)
        return found

    def _term_id(self, term: str) -> int:
        found = self._ids.get(term)
        if found is None:
            found = self._ids[term] = len(self.terms)
            self.terms.append(term)
        return found

    def token_ids(self, tokens: list[str]) -> np.ndarray:
        """Per raw token, its term's id or -1 (``text_pipeline._pipeline_term``, once a token)."""
        found = list(map(self._raw.get, tokens))
        if None in found:  # a few new tokens: found by set difference, not a Python loop
            with self._lock:
                for token in set(tokens).difference(self._raw):
                    term = text_pipeline._pipeline_term(token)
                    self._raw[token] = -1 if term is None else self._term_id(term)
            found = list(map(self._raw.__getitem__, tokens))
        return np.array(found, dtype=np.int64)


@dataclass(frozen=True)
class TermArrays:
    """The terms of ``count`` texts: ``terms[k]`` the id of a term (``vocabulary.terms``) of
    text ``owner[k]``; each text's terms in its order, the texts in theirs."""

    terms: np.ndarray
    owner: np.ndarray
    count: int
    vocabulary: Vocabulary

    def lengths(self) -> np.ndarray:
        """Each text's number of terms (``len(analyse(text))``)."""
        return np.bincount(self.owner, minlength=self.count)

    def frequencies(self, pair_owner: np.ndarray, pair_terms: np.ndarray) -> np.ndarray:
        """How often term ``pair_terms[p]`` occurs in text ``pair_owner[p]``, for every pair."""
        if len(pair_terms) == 0:
            return np.zeros(0, dtype=np.int64)
        size = max(len(self.vocabulary), 1)
        wanted = np.zeros(size, dtype=bool)
        wanted[pair_terms] = True
        hit = wanted[self.terms]  # the few tokens that are some pair's term
        keys, starts = sorted_unique(self.owner[hit] * size + self.terms[hit])
        counts = np.diff(starts, append=np.sum(hit))
        pair_keys = pair_owner * size + pair_terms
        if len(keys) == 0:
            return np.zeros(len(pair_keys), dtype=np.int64)
        at = np.minimum(np.searchsorted(keys, pair_keys), len(keys) - 1)
        return np.where(keys[at] == pair_keys, counts[at], 0)

    def texts(self, start: int, stop: int) -> TermArrays:
        """The terms of texts ``start`` to ``stop`` (not included), numbered from 0."""
        low, high = np.searchsorted(self.owner, [start, stop])
        return TermArrays(
            self.terms[low:high], self.owner[low:high] - start, stop - start, self.vocabulary
        )

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """Each text's distinct terms: (owner, term) per distinct pair, by owner then term."""
        size = max(len(self.vocabulary), 1)
        keys, _ = sorted_unique(self.owner * size + self.terms)
        return keys // size, keys % size


def sorted_unique(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys in ascending order, and where each starts among the sorted keys
    (``np.unique``'s result by a plain sort: numpy 2's hashing ``unique`` is several times
    slower on these arrays)."""
    keys = np.sort(keys)
    first = np.ones(len(keys), dtype=bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    return keys[starts], starts


@dataclass(frozen=True)
class Tokens:
    """The tokens of many texts: the distinct ones, and per token (texts in order, each text's
    tokens in order) its index among them and its text."""

    distinct: list[str]
    index: np.ndarray
    owner: np.ndarray


def cut(texts: Sequence[str], table: bytes) -> Tokens:
    """The tokens of each text as ``text.encode("ascii", "replace").translate(table).split()``
    gives them, for a ``table`` that maps every byte not of a token to a space and no byte of
    a token to whitespace (``text_pipeline._SEPARATORS``): the bytes of the texts' UTF-8 are
    mapped in one call (a character other than ASCII is bytes of 0x80 and above, each a
    separator as its single "?" would be; a lone surrogate is passed as its three bytes), then
    pyarrow splits them on spaces and makes the tokens distinct, without a Python string per
    token."""
    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(b) + 1 for b in encoded], out=offsets[1:])  # each text and a space
    data = b" ".join(encoded).translate(table) + b" "
    lists = pc.ascii_split_whitespace(
        pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(offsets), pa.py_buffer(data))
    )
    tokens = lists.flatten().dictionary_encode()
    distinct = tokens.dictionary.to_pylist()
    index = tokens.indices.to_numpy(zero_copy_only=False)
    owner = np.repeat(np.arange(len(texts)), np.diff(lists.offsets.to_numpy()))
    if "" in distinct:  # pyarrow's split gives "" before a leading space and after a trailing
        kept = index != distinct.index("")
        index, owner = index[kept], owner[kept]
    return Tokens(distinct, index, owner)


def split_terms(tokens: Tokens, count: int, vocabulary: Vocabulary) -> TermArrays:
    """``analyse`` of ``count`` texts from their tokens cut with the apostrophe kept in a token
    (``cut(texts, WORD_TOKENS)``): a token split at its apostrophes gives the
    tokeniser's tokens, in order. The flags cut their texts once this way for their words and
    their terms. Each token stands for its first piece; the few later pieces ("t" of "don't")
    are inserted after it."""
    pieces = [
        [piece for piece in token.split("'") if piece] if "'" in token else [token]
        for token in tokens.distinct
    ]
    first = np.full(len(pieces), -1, dtype=np.int64)  # -1: a token of apostrophes alone
    have = [k for k, split in enumerate(pieces) if split]
    first[have] = vocabulary.token_ids([pieces[k][0] for k in have])
    terms, owner = first[tokens.index], tokens.owner
    later = {k: split[1:] for k, split in enumerate(pieces) if len(split) > 1}
    if later:
        more = np.zeros(len(pieces), dtype=np.int64)
        more[list(later)] = [len(rest) for rest in later.values()]
        at = np.flatnonzero(more[tokens.index] > 0)
        held = more[tokens.index[at]]
        ids = {k: vocabulary.token_ids(rest) for k, rest in later.items()}
        values = np.concatenate([ids[k] for k in tokens.index[at].tolist()])
        where = np.repeat(at + 1, held)
        terms = np.insert(terms, where, values)
        owner = np.insert(owner, where, np.repeat(owner[at], held))
    kept = terms >= 0
    return TermArrays(terms[kept], owner[kept], count, vocabulary)


def analyse_texts(texts: Sequence[str], vocabulary: Vocabulary) -> TermArrays:
    """``analyse`` of every text, as one ``TermArrays`` (module docstring)."""
    if not texts:
        empty = np.zeros(0, dtype=np.int64)
        return TermArrays(empty, empty, 0, vocabulary)
    tokens = cut(texts, text_pipeline._SEPARATORS)
    terms = vocabulary.token_ids(tokens.distinct)[tokens.index]
    kept = terms >= 0
    return TermArrays(terms[kept], tokens.owner[kept], len(texts), vocabulary)


class TermsAhead:
    """The terms of a run of texts analysed in one pass (``analyse_texts``), then handed out
    in their order, a few texts at a time (``take``)."""

    def __init__(self, texts: list[str], vocabulary: Vocabulary):
        self.texts, self.arrays, self.next = texts, analyse_texts(texts, vocabulary), 0

    def take(self, texts: list[str]) -> TermArrays | None:
        """The terms of ``texts`` when they are the next of the run (then the run moves on
        past them); None otherwise."""
        stop = self.next + len(texts)
        if texts != self.texts[self.next : stop]:
            return None
        found, self.next = self.arrays.texts(self.next, stop), stop
        return found
