"""``nrp.rankers.term_arrays``: many texts analysed at once give exactly ``analyse``'s terms."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from nrp.rankers import text_pipeline as tp
from nrp.rankers.term_arrays import (
    WORD_TOKENS,
    TermsAhead,
    Vocabulary,
    analyse_texts,
    cut,
    split_terms,
)

EDGE_TEXTS = [
    "",
    "   ",
    "?!",
    "Diabetes and DIABETIC patients: what is HbA1c?",
    "café über 東京 naïve résumé x",  # non-ASCII letters separate tokens
    "a\u00e9b\u2019s don't",
    "' '' don't'' 'tis o'clock's rock'n'roll' 2'000 A'AAAA''",  # apostrophes: pieces of tokens
    "\ud800lone\udfffsurrogates",
    "line\nbreaks\r\nand\ttabs\x00nul\x01",
    "AAAA aaaa aaa 12345 1234 a1b2c3d4e5 " + "x" * 20 + " " + "y" * 21,
    "supercalifragilisticexpialidocious 1990s covid19 3rd",
    "the of and",  # stopwords only
    "end",
]


def _by_text(arrays, count: int) -> list[list[str]]:
    bounds = np.searchsorted(arrays.owner, np.arange(count + 1))
    terms = arrays.vocabulary.terms
    return [[terms[t] for t in arrays.terms[bounds[i] : bounds[i + 1]]] for i in range(count)]


def _check(texts: list[str], vocabulary: Vocabulary) -> None:
    arrays = analyse_texts(texts, vocabulary)
    assert np.all(np.diff(arrays.owner) >= 0)  # texts in order
    expected = [tp.analyse(text) for text in texts]
    assert _by_text(arrays, len(texts)) == expected
    assert arrays.lengths().tolist() == [len(terms) for terms in expected]
    # the flags' one cut (apostrophes kept in tokens, split after) gives the same arrays
    split = split_terms(cut(texts, WORD_TOKENS), len(texts), vocabulary)
    assert np.array_equal(split.terms, arrays.terms) and np.array_equal(split.owner, arrays.owner)


def test_edge_texts_equal_analyse():
    vocabulary = Vocabulary()
    _check(EDGE_TEXTS, vocabulary)
    _check(EDGE_TEXTS[::-1], vocabulary)  # the same vocabulary, tokens already known
    for text in EDGE_TEXTS:
        _check([text], vocabulary)
    assert analyse_texts([], vocabulary).count == 0


def test_frequencies_and_distinct_terms():
    vocabulary = Vocabulary()
    texts = ["diabetes diabetic insulin diabetes", "insulin", "", "the cats and a cat"]
    arrays = analyse_texts(texts, vocabulary)
    queries = [("diabet", "insulin", "diabet", "unknown"), ("insulin",), ("cat",), ("cat", "x")]
    owner = np.repeat(np.arange(4), [len(q) for q in queries])
    wanted = np.concatenate([vocabulary.entry_ids(q) for q in queries])
    counts = [Counter(tp.analyse(t)) for t in texts]
    expected = [counts[i][term] for i, q in enumerate(queries) for term in q]
    assert arrays.frequencies(owner, wanted).tolist() == expected == [3, 1, 3, 0, 1, 0, 2, 0]
    distinct_owner, distinct_terms = arrays.distinct()
    got = [set() for _ in texts]
    for i, t in zip(distinct_owner.tolist(), distinct_terms.tolist(), strict=True):
        got[i].add(vocabulary.terms[t])
    assert got == [set(tp.analyse(t)) for t in texts]


def test_terms_ahead_hands_out_the_next_texts_terms_in_order():
    vocabulary = Vocabulary()
    ahead = TermsAhead(EDGE_TEXTS, vocabulary)
    assert ahead.take(EDGE_TEXTS[1:3]) is None  # not the next texts: the caller analyses them
    for start in range(0, len(EDGE_TEXTS), 5):
        chunk = EDGE_TEXTS[start : start + 5]
        found = ahead.take(chunk)
        assert _by_text(found, len(chunk)) == [tp.analyse(text) for text in chunk]
        assert found.count == len(chunk)
    assert ahead.take(["end"]) is None  # the run is over


@pytest.mark.shared_data
def test_every_line_of_the_shared_files_equals_analyse(shared_data):
    """Every line of the MEDIQA 2019 and LiveQA 2017 files and of the CLEF eHealth answers (real
    texts, non-ASCII included), in batches of 256 and 4,096 as positioning and flags take them,
    with one vocabulary throughout."""
    lines: list[str] = []
    for name in ("mediqa-2019", "liveqa-med-2017", "clef-ehealth-2021/answers"):
        for path in sorted(shared_data(name).rglob("*")):
            if path.is_file() and path.suffix in {".xml", ".csv", ".txt"}:
                lines += path.read_bytes().decode("utf-8", "replace").splitlines()
    assert len(lines) > 100_000
    vocabulary = Vocabulary()
    for size in (256, 4096):
        for start in range(0, len(lines), size):
            _check(lines[start : start + size], vocabulary)
