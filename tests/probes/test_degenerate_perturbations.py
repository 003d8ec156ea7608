"""The perturbations drawn from validity's generators (restated, padded, evasive, refusal,
keyword_list, asked): the text is ``nrp.validation.degenerate``'s own for the answer and seed, the
same seed gives the same text, and ``keyword_list`` lists exactly the question's content
words."""

from __future__ import annotations

import re

import pytest

from nrp.probes.perturbations import PERTURBATIONS, PerturbationContext, perturb
from nrp.validation.degenerate import QueryMaterial, degenerate_text

QUERY = "Can vitamin C prevent colds in children?"
# degenerate.content_words: not a function word ("can", "in"), at least 3 characters ("C")
CONTENT_WORDS = ["vitamin", "prevent", "colds", "children"]
NEW = {"restated": "restated", "padded": "padded", "evasive": "evasive", "refusal": "refusal",
       "keyword_list": "keywords", "asked": "asked"}  # fmt: skip


def context(seed: int = 0, answer_id: str = "a1") -> PerturbationContext:
    return PerturbationContext(
        answer_id=answer_id,
        query=QUERY,
        judged=[(2.0, "Vitamin C does not prevent colds."), (0.0, "Colds are viral.")],
        others=["A page about knee pain."],
        seed=seed,
    )


@pytest.mark.parametrize(("name", "kind"), NEW.items())
def test_the_text_is_the_generators_and_deterministic(name, kind):
    assert PERTURBATIONS[name].kind == "other"
    text = perturb(name, "Vitamin C does not prevent colds.", context(7))
    documents = ["Vitamin C does not prevent colds.", "Colds are viral."]
    material = QueryMaterial("a1", QUERY, documents, "A page about knee pain.")
    assert text == degenerate_text(kind, material, 7)
    assert perturb(name, "another answer", context(7)) == text  # the answer is replaced
    texts = {perturb(name, "x", context(seed)) for seed in range(20)}
    assert len(texts) > 1  # the seed draws the wording
    others = {perturb(name, "x", context(7, f"a{i}")) for i in range(20)}
    assert len(others) > 1  # each answer its own draw


@pytest.mark.parametrize("name", ["restated", "padded", "evasive", "refusal"])
def test_the_framed_kinds_carry_the_question(name):
    for seed in range(10):
        text = perturb(name, "x", context(seed))
        assert "vitamin C prevent colds in children" in text


def test_keyword_list_gives_exactly_the_questions_content_words():
    styles = set()
    for seed in range(20):
        text = perturb("keyword_list", "x", context(seed))
        words = re.findall(r"[A-Za-z0-9']+", text)
        if words[0] == "Keywords":
            styles.add("Keywords:")
            words = words[1:]
        else:
            styles.add(text[0] if text[0] in "-#" else "comma")
        assert sorted(w.lower() for w in words) == sorted(CONTENT_WORDS)
    assert styles == {"Keywords:", "-", "#", "comma"}  # every layout was drawn
    assert perturb("keyword_list", "x", context(0)) == perturb("keyword_list", "y", context(0))
    empty = PerturbationContext(answer_id="a1", query="Is it?")  # no content word
    assert perturb("keyword_list", "x", empty) is None
