"""nrp's ROUGE scorer (``nrp.evaluators.rouge``) gives rouge-score's numbers: the bit-parallel
LCS equals the dynamic-programming table on every pair, and ``score_multi`` equals
``rouge_score``'s ``RougeScorer.score_multi`` to the last bit on real MEDIQA answers."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

import pytest
from rouge_score import rouge_scorer  # absl's handler is on the real stderr: tests/conftest.py

from nrp.evaluators.rouge import ROUGE_TYPES, RougeScorer, lcs_length


def positions(tokens: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, token in enumerate(tokens):
        out[token] = out.get(token, 0) | (1 << i)
    return out


def test_lcs_by_hand():
    # "a b c b d a b" and "b d c a b a": LCS 4 (b c a b, b d a b, ...), the textbook pair
    a, b = list("abcbdab"), list("bdcaba")
    assert lcs_length(positions(a), len(a), b) == 4
    assert lcs_length(positions(b), len(b), a) == 4
    assert lcs_length(positions(a), len(a), []) == 0
    assert lcs_length({}, 0, b) == 0
    assert lcs_length(positions(a), len(a), a) == 7


def test_lcs_equals_the_table_on_random_pairs():
    rng = random.Random(7)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 90))]
        b = [rng.choice("abcdef") for _ in range(rng.randint(0, 90))]
        table = rouge_scorer._lcs_table(a, b)
        assert lcs_length(positions(a), len(a), b) == table[-1][-1]


@pytest.mark.parametrize("use_stemmer", [True, False])
def test_score_multi_equals_rouge_score_on_mediqa(shared_data, use_stemmer):
    path = shared_data("mediqa-2019", "MEDIQA2019-Task3-QA-TestSet-wLabels.xml")
    questions = ET.parse(path).getroot().findall("Question")[:12]
    theirs = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)
    ours = RougeScorer(use_stemmer=use_stemmer)
    pairs = 0
    for question in questions:
        texts = [a.findtext("AnswerText") or "" for a in question.iter("Answer")]
        references = texts[:3]
        for text in [*texts[3:], question.findtext("QuestionText") or "", ""]:
            expected = theirs.score_multi(references, text)
            got = ours.score_multi(references, text)
            for kind in ROUGE_TYPES:
                assert tuple(got[kind]) == tuple(expected[kind]), (kind, text[:40])
            pairs += 1
    assert pairs > 50
