"""``nrp.validation.copy_shares``: the copy shares of a slice of answers as arrays, worked out by
hand, and the answers it leaves to the caller (NaN) when hashes alone cannot be trusted: the
flags then still give ``answer_flags``' numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from nrp.rankers.term_arrays import WORD_TOKENS, cut
from nrp.validation import copy_shares
from nrp.validation.copy_shares import CopyShares
from nrp.validation.flags import answer_flags, flag_answers, word_grams

DOCUMENTS = {
    "q1": ["A b c d e f.", "x y z a b c d e"],
    "q2": ["one two three four five six", "short doc"],
}


def shares_of(answers: list[tuple[str, str]]) -> list[float]:
    shares = CopyShares(5)
    for qid, documents in DOCUMENTS.items():
        shares.add_query(qid, documents)
    texts, qids = [text for _, text in answers], [qid for qid, _ in answers]
    return shares.of(cut(texts, WORD_TOKENS), len(texts), qids).tolist()


def test_copy_shares_by_hand():
    found = shares_of(
        [
            # grams abcde, bcdef, cdefg: the first document holds two, the second one
            ("q1", "a B c d e f g"),
            # abcde bcdea cdeab deabc eabcd and abcde again: five distinct, one held
            ("q1", "a b c d e a b c d e"),
            # q2's grams are not q1's: the same words under q1 share nothing
            ("q1", "one two three four five six"),
            ("q2", "one two three four five six"),
            ("q2", "short doc"),  # fewer than five words: the caller's
            ("q2", ""),
            ("q1", "x y z a b c d e f"),  # xyzab yzabc zabcd abcde (doc 2) + bcdef: 4 of 5
        ]
    )
    assert found[:4] == [2 / 3, 1 / 5, 0.0, 1.0]
    assert math.isnan(found[4]) and math.isnan(found[5])
    assert found[6] == 4 / 5


def test_grams_across_two_answers_are_not_one_gram():
    """A gram whose words run from one answer into the next is no gram: "y z a b c" ... would be
    the second document's."""
    assert shares_of([("q1", "x y z a b"), ("q1", "c d e f g")]) == [1.0, 0.0]


TEXTS = [
    ("q1", "a b c d e f"),
    ("q1", "x y z a b c d e f"),
    ("q1", "e d c b a f e d c b a"),
    ("q2", "one two three four five six seven"),
    ("q2", "six five four three two one"),
    ("q2", "short doc"),
    ("q1", "a b c d e d c b a"),
]


def _same_as_answer_flags(documents: dict[str, list[str]]) -> list[bool]:
    """flag_answers on TEXTS equals answer_flags one at a time; which copy shares CopyShares
    left to the caller (NaN)."""
    answers = pd.DataFrame(
        {"answer_id": [str(i) for i in range(len(TEXTS))], "qid": [q for q, _ in TEXTS],
         "text": [t for _, t in TEXTS]}
    )  # fmt: skip
    questions = {"q1": "what is a?", "q2": "what is one?"}
    frame = flag_answers(answers, questions, documents)
    expected = [
        answer_flags(t, questions[q], [word_grams(d) for d in documents[q]]) for q, t in TEXTS
    ]
    assert frame[list(expected[0])].to_dict("records") == expected
    shares = CopyShares(5)
    for qid, texts in documents.items():
        shares.add_query(qid, texts)
    texts, qids = [text for _, text in TEXTS], [qid for qid, _ in TEXTS]
    return np.isnan(shares.of(cut(texts, WORD_TOKENS), len(texts), qids)).tolist()


def test_hash_collisions_are_left_to_the_caller(monkeypatch):
    """With a multiplier of 1 a gram's hash is the sum of its words' ids (its query's number
    mixed in), so "a b c d e" and "e d c b a" collide. An answer holding both is left to the
    caller, and so is every answer of a query whose documents hold both; the flags stay
    exact."""
    assert _same_as_answer_flags(DOCUMENTS) == [False] * 5 + [True, False]
    monkeypatch.setattr(copy_shares, "_MULTIPLIER", np.uint64(1))
    assert _same_as_answer_flags(DOCUMENTS)[5:] == [True, True]
    both = {**DOCUMENTS, "q1": [*DOCUMENTS["q1"], "e d c b a"]}
    left = _same_as_answer_flags(both)
    assert [left[i] for i, (qid, _) in enumerate(TEXTS) if qid == "q1"] == [True] * 4


def test_word_ids_too_large_to_pack_are_left_to_the_caller(monkeypatch):
    """With two bits per word id, the ids of these texts no longer fit an exact key: every
    answer whose hashes meet a document's is left to the caller (not the reversed texts), and
    the flags stay exact."""
    monkeypatch.setattr(copy_shares, "_ID_BITS", 2)
    assert _same_as_answer_flags(DOCUMENTS) == [True, True, False, True, False, True, True]
