"""Many texts through Terrier's pipeline at once, as numpy arrays of term ids.

Why: ``text_pipeline.analyse`` makes a Python string per token and a list per text; on 100,000
answers that is 18 million tokens, the largest cost of ``nrp score`` after its start. What the
lexical positioning and the flags need of an answer is less: its length in terms, how often
each query term occurs in it, its distinct terms. Here the texts are cut into tokens in bulk
(numpy over their bytes), the tokens made distinct by pyarrow's ``dictionary_encode`` (no
Python object per token), and each *distinct* token sent once through the pipeline
(``text_pipeline._pipeline_term``, memoised in a ``Vocabulary``).

The terms are exactly ``analyse``'s, in the same order: a token is a maximal run of ASCII
letters and digits of the text encoded to ASCII with ``errors="replace"`` (a non-ASCII
character becomes one "?", a separator), which is what ``raw_tokens`` splits; every token then
gets ``_pipeline_term``'s term or is dropped. The tests compare the two on every MEDIQA text
and on generated answers.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from nrp.rankers import text_pipeline

#: ``bytes.translate`` tables: per byte 1 for an ASCII letter or digit, else 0; and the bytes
#: that are not (the separators ``text_pipeline._SEPARATORS`` turns into spaces)
_TOKEN_FLAGS = bytes(int(chr(b).isascii() and chr(b).isalnum()) for b in range(256))
_SEPARATOR_BYTES = bytes(b for b in range(256) if not _TOKEN_FLAGS[b])


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
        if None in found:
            with self._lock:
                for i, token in enumerate(tokens):
                    if found[i] is None:
                        term = text_pipeline._pipeline_term(token)
                        found[i] = self._raw[token] = -1 if term is None else self._term_id(term)
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

    def of_text(self, i: int) -> list[str]:
        """Text i's terms as strings (``analyse(text)``)."""
        return [self.vocabulary.terms[t] for t in self.terms[self.owner == i]]

    def frequencies(self, pair_owner: np.ndarray, pair_terms: np.ndarray) -> np.ndarray:
        """How often term ``pair_terms[p]`` occurs in text ``pair_owner[p]``, for every pair."""
        if len(pair_terms) == 0:
            return np.zeros(0, dtype=np.int64)
        size = max(len(self.vocabulary), 1)
        wanted = np.zeros(size, dtype=bool)
        wanted[pair_terms] = True
        hit = wanted[self.terms]  # the few tokens that are some pair's term
        keys, counts = np.unique(self.owner[hit] * size + self.terms[hit], return_counts=True)
        pair_keys = pair_owner * size + pair_terms
        if len(keys) == 0:
            return np.zeros(len(pair_keys), dtype=np.int64)
        at = np.minimum(np.searchsorted(keys, pair_keys), len(keys) - 1)
        return np.where(keys[at] == pair_keys, counts[at], 0)

    def distinct(self) -> tuple[np.ndarray, np.ndarray]:
        """Each text's distinct terms: (owner, term) per distinct pair, by owner then term."""
        size = max(len(self.vocabulary), 1)
        keys = np.unique(self.owner * size + self.terms)
        return keys // size, keys % size


def analyse_texts(texts: Sequence[str], vocabulary: Vocabulary) -> TermArrays:
    """``analyse`` of every text, as one ``TermArrays`` (module docstring)."""
    if not texts:
        empty = np.zeros(0, dtype=np.int64)
        return TermArrays(empty, empty, 0, vocabulary)
    # UTF-8 (a lone surrogate passed as its three bytes): a character other than ASCII is
    # bytes of 0x80 and above, separators as the single "?" of the ASCII encoding is
    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    data = b"\n".join(encoded)  # texts apart by a newline, a separator
    edges = np.diff(
        np.frombuffer(data.translate(_TOKEN_FLAGS), dtype=np.int8),
        prepend=np.int8(0),
        append=np.int8(0),
    )
    bounds = np.flatnonzero(edges)  # a token's start, then its end, for every token
    starts = bounds[0::2]
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(bounds[1::2] - starts, out=offsets[1:])
    chars = data.translate(None, _SEPARATOR_BYTES)  # the tokens' bytes, end to end
    tokens = pa.LargeStringArray.from_buffers(
        len(starts), pa.py_buffer(offsets), pa.py_buffer(chars)
    ).dictionary_encode()
    ids = vocabulary.token_ids(tokens.dictionary.to_pylist())
    terms = ids[tokens.indices.to_numpy(zero_copy_only=False)]
    text_starts = np.zeros(len(texts), dtype=np.int64)
    np.cumsum([len(b) + 1 for b in encoded[:-1]], out=text_starts[1:])
    kept = terms >= 0
    owner = np.searchsorted(text_starts, starts[kept], side="right") - 1
    return TermArrays(terms[kept], owner, len(texts), vocabulary)
