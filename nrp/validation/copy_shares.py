"""The ``judged_copy`` flag's copy share of many answers at once, exactly, with numpy.

An answer's copy share is the largest share of its distinct lower-cased word n-grams that occur
in one judged document of its query (``nrp.validation.flags.copy_share``). Built as Python
tuples per answer, that costs more than the rest of the flags together. Here a slice of answers
is computed as arrays:

1. Every gram of n words within one text gets a hash (a polynomial of its words' ids, modulo
   2**64, with a constant of its query mixed in) and an exact key (its words' ids packed
   ``_ID_BITS`` to a column, the query's number in a column of its own). Equal grams of one
   query have equal hashes and equal keys; equal keys mean equal grams.
2. The answers' hashes are looked up among the distinct grams of their queries' documents (a
   bitmap of low bits first, then a binary search); a found hash counts only when the exact
   keys are equal too. An answer that meets none has copy share 0.0.
3. For the others, each distinct matched gram is counted once per document that holds it, and
   the best document's count is divided by the answer's number of distinct grams (repeated
   grams found by sorting their hashes, their keys compared).

What is left to the caller, as NaN (``nrp.validation.flags`` computes those one by one, the old
way): an answer of fewer than n words (its one gram is its whole word sequence), an answer of
a query whose documents hold two grams of one hash, an answer with two different grams of one
hash, and a word id too large to pack (after 2**21 distinct words). None of these changes a
number; on MEDIQA-sized collections the last three never occur.

Words are ``nrp.validation.flags``'s: runs of ASCII letters, digits and apostrophes,
lower-cased. They come from tokens cut by ``nrp.rankers.term_arrays.cut`` with its
``WORD_TOKENS`` (case kept, so the same cut gives Terrier's tokens too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from nrp.rankers.term_arrays import WORD_TOKENS, Tokens, cut, sorted_unique

_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd: a gram's words all count
#: bits per word id in an exact key (three ids to a 64-bit column)
_ID_BITS = 21
_PER_COLUMN = 3
_NO_KEYS = np.zeros(0, dtype=np.uint64)
#: the low bits of a hash that index the bitmap (2**24 bits: about 1% of them set by 150
#: queries' documents, so a lookup of an answer's hash seldom goes further)
_BITMAP_BITS = 24
_BITMAP_MASK = np.uint64((1 << _BITMAP_BITS) - 1)


@dataclass(frozen=True)
class _Grams:
    """Grams of n words within one text of a batch: per gram its hash (query constant mixed
    in), text and first word (``position`` in ``ids``, the batch's word ids); per text its
    query's number and number of words; whether every id fits an exact key."""

    hashes: np.ndarray
    owner: np.ndarray
    position: np.ndarray
    ids: np.ndarray
    query: np.ndarray
    words: np.ndarray
    n: int
    packed: bool

    def take(self, rows: np.ndarray) -> _Grams:
        """These grams only."""
        return replace(self, hashes=self.hashes[rows], owner=self.owner[rows],
                       position=self.position[rows])  # fmt: skip

    def keys(self) -> list[np.ndarray]:
        """Each gram's exact key: its query's number, then its words' ids, ``_PER_COLUMN`` to
        a column."""
        keys = [self.query[self.owner]]
        for first in range(0, self.n, _PER_COLUMN):
            column = np.zeros(len(self.position), dtype=np.uint64)
            for k in range(first, min(first + _PER_COLUMN, self.n)):
                column = (column << np.uint64(_ID_BITS)) | self.ids[self.position + k]
            keys.append(column)
        return keys


class CopyShares:
    """Copy shares of answers (module docstring): ``add_query`` once per query with its judged
    documents, then ``of`` per slice of answers."""

    def __init__(self, n: int):
        self.n = n
        self._ids: dict[str, int] = {}  # token as cut -> its lower-cased word's id
        self._words: dict[str, int] = {}
        self._queries: dict[str, int] = {}
        self._documents: list[_Grams] = []  # per query: its documents' distinct grams
        self._doc_base: list[int] = [0]  # each query's first document number
        self._table: _Table | None = None
        self._bitmap = np.zeros(1 << _BITMAP_BITS, dtype=bool)  # a document hash's low bits

    def add_query(self, qid: str, documents: Sequence[str]) -> None:
        """The query's judged documents (a document of fewer than n words has no gram an
        answer of n words or more can share)."""
        number = self._queries[qid] = len(self._queries)
        texts = [str(text) for text in documents]
        numbers = np.full(len(texts), number, dtype=np.int64)
        grams = self._grams(cut(texts, WORD_TOKENS), len(texts), numbers)
        self._documents.append(grams)
        self._doc_base.append(self._doc_base[-1] + len(texts))
        self._bitmap[grams.hashes & _BITMAP_MASK] = True
        self._table = None  # built again by the next ``of``

    def of(self, tokens: Tokens, count: int, qids: list[str]) -> np.ndarray:
        """Per answer (``count`` texts cut with ``WORD_TOKENS``, each qid added first): its
        copy share, or NaN where the caller must compute it (module docstring)."""
        if self._table is None:
            self._table = _Table.of(self._documents, self._doc_base, len(self._queries))
        table, queries = self._table, np.array([self._queries[q] for q in qids], dtype=np.int64)
        grams = self._grams(tokens, count, queries)
        shares = np.where(grams.words < self.n, np.nan, 0.0)
        maybe = grams.take(np.flatnonzero(self._bitmap[grams.hashes & _BITMAP_MASK]))
        hit, at = table.find(maybe)
        if not (grams.packed and table.packed):  # hashes alone say who is looked at
            shares[np.unique(maybe.owner[hit])] = np.nan
            return shares
        matched = at >= 0
        owners = np.unique(maybe.owner[matched])
        owners = owners[grams.words[owners] >= self.n]
        best = table.best(maybe.owner[matched], at[matched], count)
        distinct, collided = _distinct_counts(grams, owners, count)
        shares[owners] = best[owners] / distinct[owners]
        shares[owners[collided[owners]]] = np.nan
        shares[table.doubtful[queries] & (grams.words >= self.n)] = np.nan
        return shares

    def _grams(self, tokens: Tokens, count: int, queries: np.ndarray) -> _Grams:
        """Every gram of n words within one text (``queries``: each text's query number)."""
        ids = self._word_ids(tokens.distinct)[tokens.index].astype(np.uint64)
        words = np.bincount(tokens.owner, minlength=count)
        query = queries.astype(np.uint64)
        packed = len(self._words) <= 1 << _ID_BITS
        starts = len(ids) - self.n + 1
        if starts <= 0:
            empty = np.zeros(0, dtype=np.int64)
            return _Grams(_NO_KEYS, empty, empty, ids, query, words, self.n, packed)
        hashes = ids[:starts].copy()
        for k in range(1, self.n):
            hashes = hashes * _MULTIPLIER + ids[k : k + starts]
        position = np.flatnonzero(tokens.owner[:starts] == tokens.owner[self.n - 1 :])
        owner = tokens.owner[position]
        salts = (query + np.uint64(1)) * _MULTIPLIER
        return _Grams(hashes[position] ^ salts[owner], owner, position, ids, query, words,
                      self.n, packed)  # fmt: skip

    def _word_ids(self, distinct: list[str]) -> np.ndarray:
        """Each token's lower-cased word's id, new words added."""
        found = list(map(self._ids.get, distinct))
        if None in found:
            words = self._words
            for token in [token for token in distinct if token not in self._ids]:
                # in the order met (ids, and so hashes, the same in every run)
                self._ids[token] = words.setdefault(token.lower(), len(words))
            found = list(map(self._ids.__getitem__, distinct))
        return np.array(found, dtype=np.int64)


@dataclass(frozen=True)
class _Table:
    """The distinct grams of every added query's documents, by hash: ``hashes`` ascending,
    their exact ``keys``, and per gram the documents that hold it (``documents[start[g]:
    start[g + 1]]``, numbered across queries); ``doubtful``: per query, whether its documents
    share a hash with a different gram (its answers are left to the caller)."""

    hashes: np.ndarray
    keys: list[np.ndarray]
    start: np.ndarray
    documents: np.ndarray
    doubtful: np.ndarray
    packed: bool

    @classmethod
    def of(cls, per_query: list[_Grams], doc_base: list[int], queries: int) -> _Table:
        packed = all(grams.packed for grams in per_query)
        if not sum(len(grams.hashes) for grams in per_query):
            empty = np.zeros(0, dtype=np.int64)
            return cls(_NO_KEYS, [], np.zeros(1, np.int64), empty, np.zeros(queries, bool), packed)
        hashes = np.concatenate([g.hashes for g in per_query])
        order = np.argsort(hashes, kind="stable")
        hashes = hashes[order]
        each = [grams.keys() for grams in per_query]
        keys = [np.concatenate([k[c] for k in each])[order] for c in range(len(each[0]))]
        sizes = [len(grams.hashes) for grams in per_query]
        base = np.repeat(np.array(doc_base[:-1], dtype=np.int64), sizes)
        documents = (np.concatenate([g.owner for g in per_query]) + base)[order]
        new = np.ones(len(hashes), dtype=bool)
        np.not_equal(hashes[1:], hashes[:-1], out=new[1:])
        first = np.flatnonzero(new)
        gram = np.cumsum(new) - 1
        same = np.logical_and.reduce([column == column[first][gram] for column in keys])
        doubtful = np.zeros(queries, dtype=bool)
        doubtful[keys[0][~same].astype(np.int64)] = True
        doubtful[keys[0][first][gram[~same]].astype(np.int64)] = True
        total = int(doc_base[-1]) or 1
        pairs, _ = sorted_unique(gram * total + documents)
        start = np.searchsorted(pairs // total, np.arange(len(first) + 1))
        unique_keys = [column[first] for column in keys]
        return cls(hashes[first], unique_keys, start, pairs % total, doubtful, packed)

    def find(self, grams: _Grams) -> tuple[np.ndarray, np.ndarray]:
        """Per gram: whether its hash is a document gram's, and that gram's number when the
        exact keys are equal too (-1 otherwise)."""
        if not len(self.hashes) or not len(grams.hashes):
            none = np.zeros(len(grams.hashes), dtype=bool)
            return none, np.full(len(grams.hashes), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.hashes, grams.hashes), len(self.hashes) - 1)
        hit = self.hashes[at] == grams.hashes
        rows = np.flatnonzero(hit)
        exact = np.ones(len(rows), dtype=bool)
        for mine, theirs in zip(grams.take(rows).keys(), self.keys, strict=True):
            exact &= theirs[at[rows]] == mine
        found = np.full(len(at), -1, dtype=np.int64)
        found[rows[exact]] = at[rows[exact]]
        return hit, found

    def best(self, owner: np.ndarray, gram: np.ndarray, count: int) -> np.ndarray:
        """Per text: the most of its distinct matched grams (``owner[i]`` holds gram
        ``gram[i]``) that one document holds."""
        best = np.zeros(count, dtype=np.int64)
        if not len(gram):
            return best
        grams = len(self.start) - 1
        pairs, _ = sorted_unique(owner.astype(np.int64) * grams + gram)
        owner, gram = pairs // grams, pairs % grams
        held = self.start[gram + 1] - self.start[gram]
        offsets = np.arange(int(held.sum())) - np.repeat(np.cumsum(held) - held, held)
        documents = self.documents[np.repeat(self.start[gram], held) + offsets]
        total = int(self.documents.max()) + 1
        keys, starts = sorted_unique(np.repeat(owner, held) * total + documents)
        counts = np.diff(starts, append=len(documents))
        np.maximum.at(best, keys // total, counts)
        return best


def _distinct_counts(
    grams: _Grams, owners: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per text of ``owners``: its number of distinct grams, and whether two different grams of
    it share a hash (then the count is the caller's to make)."""
    wanted = np.zeros(count, dtype=bool)
    wanted[owners] = True
    grams = grams.take(np.flatnonzero(wanted[grams.owner]))
    # the text's number in the high bits, the hash's low bits below (its high bits depend
    # little on the last words: they are added last, not multiplied)
    low = np.uint64(64 - max(count - 1, 1).bit_length())
    combined = (grams.owner.astype(np.uint64) << low) | (
        grams.hashes & ((np.uint64(1) << low) - np.uint64(1))
    )
    order = np.argsort(combined)
    combined, owner = combined[order], grams.owner[order]
    equal = combined[1:] == combined[:-1]
    exact = equal.copy()
    for column in grams.take(order).keys()[1:]:
        exact &= column[1:] == column[:-1]
    repeated = np.bincount(owner[1:][exact], minlength=count)
    collided = np.zeros(count, dtype=bool)
    collided[owner[1:][equal & ~exact]] = True
    return np.bincount(owner, minlength=count) - repeated, collided
