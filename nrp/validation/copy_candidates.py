"""Which answers may share a word n-gram with a judged document of their query: the answers the
``judged_copy`` flag must look at word by word.

Why: the flag compares an answer's distinct word 5-grams with each judged document's
(``nrp.validation.flags``); built as Python tuples, that costs as much as the rest of the flags
together, and almost every answer shares no gram with any judged document of its query, so
its copy share is 0.0 whatever its grams are. Here every gram of a slice of answers is hashed
at once with numpy (a polynomial of its words' ids, modulo 2**64, with a constant of its query
mixed in) and looked up among the hashes of the query's documents' grams. Equal grams of one
query have equal hashes, so an answer whose hashes meet none shares no gram with its query's
documents: its copy share is 0.0 exactly. An answer whose hashes meet one (a shared gram, or
seldom two grams with the same hash) is a candidate, and so is every answer of fewer than n
words (its one gram is its whole word sequence): the flags compute those exactly.

Words are ``nrp.validation.flags``'s (``WORD_BYTES``: runs of ASCII letters, digits and
apostrophes, lowercased), cut by ``nrp.rankers.term_arrays.cut``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nrp.rankers.term_arrays import cut

#: ``bytes.translate`` table of the flags' words: ASCII letters and digits lower-cased, the
#: apostrophe kept, every other byte a space. A text encoded with ``errors="replace"`` (each
#: non-ASCII character a "?", then a space) and split on whitespace gives exactly
#: ``[w.lower() for w in WORD.findall(text)]`` (``nrp.validation.degenerate.WORD``).
WORD_BYTES = bytes(
    ord(chr(b).lower()) if (chr(b).isascii() and chr(b).isalnum()) or b == ord("'") else ord(" ")
    for b in range(256)
)
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd: a gram's words all count
_NO_KEYS = np.zeros(0, dtype=np.uint64)
#: the low bits of a hash that index ``CopyCandidates``'s bitmap (2**24 bits: about 1% of them
#: set by 150 queries' documents, so a lookup of an answer's hash seldom goes further)
_BITMAP_BITS = 24
_BITMAP_MASK = np.uint64((1 << _BITMAP_BITS) - 1)


class CopyCandidates:
    """Grams of ``n`` words hashed per query (module docstring): ``add_query`` once per query
    with its judged documents, then ``of`` per slice of answers."""

    def __init__(self, n: int):
        self.n = n
        self._words: dict[str, int] = {}
        self._salts: dict[str, np.uint64] = {}
        self._keys: list[np.ndarray] = []
        self._sorted: np.ndarray | None = _NO_KEYS
        self._bitmap = np.zeros(1 << _BITMAP_BITS, dtype=bool)  # a document hash's low bits

    def add_query(self, qid: str, documents: Sequence[str]) -> None:
        """The query's judged documents' grams (a document of fewer than n words has none that
        an answer of n words or more can share)."""
        salt = np.uint64((len(self._salts) + 1) * int(_MULTIPLIER) % 2**64)  # no overflow
        self._salts[qid] = salt
        hashes, _, _ = self._grams([str(text) for text in documents])
        self._keys.append(hashes ^ salt)
        self._sorted = None  # sorted again by the next ``of``
        self._bitmap[self._keys[-1] & _BITMAP_MASK] = True

    def of(self, texts: list[str], qids: list[str]) -> list[bool]:
        """Per answer: True when it may share a gram with its query's documents, or has fewer
        than n words (each qid added first)."""
        hashes, owner, words = self._grams(texts)
        salts = np.array([self._salts[qid] for qid in qids], dtype=np.uint64)
        keys = hashes ^ salts[owner]
        candidate = words < self.n
        maybe = np.flatnonzero(self._bitmap[keys & _BITMAP_MASK])  # few: looked up
        if self._sorted is None:
            self._sorted = np.sort(np.concatenate(self._keys))
        if len(maybe):
            at = np.minimum(np.searchsorted(self._sorted, keys[maybe]), len(self._sorted) - 1)
            candidate[owner[maybe[self._sorted[at] == keys[maybe]]]] = True
        return candidate.tolist()

    def _grams(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The hash of every gram of n words within one text, its text, and each text's number
        of words."""
        if not texts:
            return _NO_KEYS, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        tokens = cut(texts, WORD_BYTES)
        words = self._words
        ids = np.array([words.setdefault(w, len(words)) for w in tokens.distinct], np.uint64)
        ids = ids[tokens.index]
        counts = np.bincount(tokens.owner, minlength=len(texts))
        starts = len(ids) - self.n + 1
        if starts <= 0:
            return _NO_KEYS, np.zeros(0, dtype=np.int64), counts
        hashes = ids[:starts].copy()
        for k in range(1, self.n):
            hashes = hashes * _MULTIPLIER + ids[k : k + starts]
        within = tokens.owner[:starts] == tokens.owner[self.n - 1 :]
        return hashes[within], tokens.owner[:starts][within], counts
