"""Each perturbation on hand-written sentences, with the exact expected output, and determinism:
the same answer, perturbation and seed give the same text; another seed may give another."""

from __future__ import annotations

import pytest

from nrp.errors import ConfigError
from nrp.probes.perturbations import (
    PERTURBATIONS,
    PerturbationContext,
    perturb,
    perturbation_names,
)

ANSWER = "Vitamin C is safe for most adults. It can shorten a cold by 8 percent. Take 200 mg daily."
CONTEXT = PerturbationContext(
    answer_id="a1",
    query="Can vitamin C prevent colds?",
    judged=[(2.0, "Best document about vitamin C."), (0.0, "Weak document.")],
    others=["A page about knee pain.", "A page about sleep."],
    numbers=["3", "1000", "2.5"],
    seed=0,
)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("negate", ANSWER,
         "Vitamin C is not safe for most adults. It can not shorten a cold by 8 percent. "
         "Do not take 200 mg daily."),
        ("negate", "Eggs are not harmful. They don't raise cholesterol.",
         "Eggs are harmful. They do raise cholesterol."),
        ("negate", "Take it daily.", "Do not take it daily."),  # an imperative
        ("negate", "He walks to the door. They took a drink.",
         "He does not walk to the door. They did not take a drink."),  # do-support
        ("negate", "Fine by me.", None),  # no verb: does not apply
        ("antonyms", "Exercise is safe and helps more than it harms.",
         "Exercise is unsafe and harms less than it helps."),
        ("antonyms", "Nothing to swap here.", None),
        ("first_sentence", ANSWER, "Vitamin C is safe for most adults."),
        ("first_sentence", "One sentence only.", None),
        ("first_half", "A one. B two. C three. D four.", "A one. B two."),
        ("drop_question_overlap", ANSWER,
         "It can shorten a cold by 8 percent. Take 200 mg daily."),
        ("echo_question", ANSWER, "Can vitamin C prevent colds?"),
        ("pad_empty", "Short answer.",
         "Short answer. This is an important question that many people ask. There are many "
         "factors to consider, and every situation is different. It is always a good idea to "
         "stay informed and to think carefully about it."),
        ("copy_best", ANSWER, "Best document about vitamin C."),
        ("keyword_stuffing", "Yes.",
         "Yes. vitamin prevent colds vitamin prevent colds vitamin prevent colds"),
    ],
)  # fmt: skip
def test_each_perturbation_by_hand(name, text, expected):
    assert perturb(name, text, CONTEXT) == expected


def test_swap_numbers_takes_numbers_of_the_same_kind_from_the_collection():
    out = perturb("swap_numbers", ANSWER, CONTEXT)
    # integers from the collection's integers (3, 1000), units and words kept
    assert out is not None and out != ANSWER
    words, original = out.split(), ANSWER.split()
    assert words[13] in {"3", "1000"} and words[16] in {"3", "1000"}  # were 8 and 200
    assert [w for i, w in enumerate(words) if i not in (13, 16)] == [
        w for i, w in enumerate(original) if i not in (13, 16)
    ]
    # the only decimal of the collection is this one: no other, so ten times it
    assert perturb("swap_numbers", "Take 2.5 mg.", CONTEXT) == "Take 25 mg."
    assert perturb("swap_numbers", "No numbers here.", CONTEXT) is None


def test_seeded_perturbations_are_deterministic():
    text = "One. Two. Three. Four. Five."
    first = perturb("shuffle", text, CONTEXT)
    assert first == perturb("shuffle", text, CONTEXT)
    assert sorted(first.split()) == sorted(text.split()) and first != text
    other = PerturbationContext(**{**CONTEXT.__dict__, "seed": 1})
    assert {perturb("off_topic", ANSWER, c) for c in (CONTEXT, other)} <= set(CONTEXT.others)
    assert perturb("off_topic", ANSWER, CONTEXT) == perturb("off_topic", ANSWER, CONTEXT)
    assert perturb("swap_numbers", ANSWER, CONTEXT) == perturb("swap_numbers", ANSWER, CONTEXT)


def test_names_are_checked():
    assert perturbation_names(None) == list(PERTURBATIONS)
    assert perturbation_names("negate, shuffle,negate") == ["negate", "shuffle"]
    with pytest.raises(ConfigError, match="unknown perturbation 'nope'"):
        perturbation_names("negate,nope")


def test_swap_entities_replaces_each_entity_by_one_of_its_label():
    pytest.importorskip("spacy")
    context = PerturbationContext(
        answer_id="a1",
        query="Who makes aspirin?",
        entities={"ORG": ["Bayer", "Pfizer"], "GPE": ["France", "Germany"]},
    )
    text = "Aspirin was first sold by Bayer in Germany."
    # spaCy finds Bayer (ORG) and Germany (GPE); the only other entity of each label is taken
    assert perturb("swap_entities", text, context) == "Aspirin was first sold by Pfizer in France."
    assert perturb("swap_entities", "Drink water.", context) is None
