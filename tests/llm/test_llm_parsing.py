"""Reading judge outputs: hand-written outputs and log-probabilities, values computed by hand."""

from __future__ import annotations

import math

import pytest

from nrp.llm.backends import Completion, TokenLogprob
from nrp.llm.parsing import (
    GIVEN_LABELS,
    TFN_LABELS,
    choice_probability,
    confidence_product,
    find_choice,
    find_confidence,
    find_prometheus_score,
    find_rubric_score,
    label_reading,
    majority_label,
    mean_sd,
    rubric_score,
    weighted_score,
)


def completion(pieces: list[tuple[str, float, tuple[tuple[str, float], ...]]]) -> Completion:
    logprobs = tuple(TokenLogprob(t, lp, top) for t, lp, top in pieces)
    return Completion(
        text="".join(t for t, _, _ in pieces),
        finish_reason="stop",
        tokens=tuple(t for t, _, _ in pieces),
        logprobs=logprobs,
    )


# -- rubric scores ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value", "start"),
    [
        ("4", 4, 0),
        ("4.", 4, 0),
        ("  **3** - mostly relevant", 3, 4),
        ("Score: 5", 5, 7),
        ("Relevance score (1-5): 2", 2, 23),
        ("Rating = 1. The answer is off topic.", 1, 9),
        ("I would give it 4/5 because it is good.", 4, 16),
        ("It deserves a 3 out of 5.", 3, 14),
        ("Step 1: read. Score: 4", 4, 21),  # "Score:" wins over a leading or earlier digit
    ],
)
def test_rubric_scores_read(text, value, start):
    found = find_rubric_score(text)
    assert (found.value, found.start) == (value, start)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The answer is relevant.",
        "Score: 4.5",  # a decimal is not a score of the 1-5 scale
        "Score: 7",
        "45",
        "Score: 10",
        "It has 3 parts and 2 errors",  # digits without a score form are not guessed
        "1. Read the question, then the answer.\n2. Judge",  # the prompt's steps echoed
        "2) the answer",
    ],
)
def test_rubric_scores_not_guessed(text):
    assert find_rubric_score(text) is None


def test_prometheus_result_is_the_last_one():
    text = "Feedback: a score of 2 would be unfair; the response is clear. [RESULT] 4"
    found = find_prometheus_score(text)
    assert found.value == 4 and text[found.start] == "4"
    assert find_prometheus_score("Feedback: ok [RESULT] (5)").value == 5
    assert find_prometheus_score("Feedback: ok\nResult: 3").value == 3
    assert find_prometheus_score("[RESULT] 2 ... on second thought [RESULT] 3").value == 3
    assert find_prometheus_score("Feedback: the answer is fine. Score 4") is None
    assert find_prometheus_score("[RESULT] 6") is None


def test_geval_weighting_by_hand():
    # p(1..5) from logprobs; " 4" and "4" both count for 4; "x" is not a score
    alternatives = [
        ("4", math.log(0.5)),
        (" 4", math.log(0.1)),
        ("3", math.log(0.2)),
        ("5", math.log(0.1)),
        ("x", math.log(0.1)),
    ]
    # (4 * 0.6 + 3 * 0.2 + 5 * 0.1) / 0.9 = 3.5 / 0.9
    assert weighted_score(alternatives) == pytest.approx(3.5 / 0.9)
    assert weighted_score([("a", -0.1), ("b", -2.0)]) is None
    assert weighted_score([("2", 0.0)]) == pytest.approx(2.0)


def test_geval_score_from_a_completion():
    # "Score: 4": the digit token's alternatives weight the score
    top = (("4", math.log(0.6)), ("3", math.log(0.3)), ("2", math.log(0.05)))
    reading = rubric_score(
        completion([("Score", -0.1, ()), (":", -0.1, ()), (" 4", math.log(0.6), top)])
    )
    # (4 * 0.6 + 3 * 0.3 + 2 * 0.05) / 0.95
    assert reading.score == pytest.approx(3.4 / 0.95)
    assert reading.stated == 4 and reading.weighted


def test_geval_adds_the_chosen_token_missing_from_the_top_list():
    # sampled token "2" (p 0.1) is not among the returned top-2: it is added
    top = (("4", math.log(0.6)), ("3", math.log(0.3)))
    reading = rubric_score(completion([("2", math.log(0.1), top)]))
    assert reading.score == pytest.approx((2.4 + 0.9 + 0.2) / 1.0)


def test_geval_falls_back_to_the_stated_integer():
    # no log-probabilities: the parsed integer
    plain = Completion(text="Score: 3", finish_reason="stop")
    assert rubric_score(plain) == rubric_score(plain)
    assert rubric_score(plain).score == 3.0 and not rubric_score(plain).weighted
    # the digit shares its token with a period: its alternatives are not score tokens
    glued = completion([("4.", math.log(0.5), (("4.", math.log(0.5)), ("3", -1.0)))])
    assert rubric_score(glued).score == 4.0 and not rubric_score(glued).weighted


def test_unparseable_is_nan_never_zero():
    reading = rubric_score(Completion(text="The answer seems fine to me.", finish_reason="stop"))
    assert math.isnan(reading.score) and reading.stated is None
    reading = rubric_score(Completion(text="Feedback: good.", finish_reason="length"), "prometheus")
    assert math.isnan(reading.score)


# -- labels -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Label: TRUE\nConfidence: 0.9", "TRUE"),
        ("label: not  given", "NOT GIVEN"),
        ("FALSE. The answer says the opposite.", "FALSE"),
        ('"true"', "TRUE"),
        ("The expected answer says nothing, so: NOT GIVEN", "NOT GIVEN"),
        ("Verdict: FALSE, although one might think it is TRUE", "FALSE"),
        ("It is TRUE or FALSE, hard to say", None),  # two labels in capitals: not guessed
        ("the answer is probably true", None),  # lower case in running text is not a label
        ("Label: LABEL\nConfidence: C", None),  # the format echoed back
        ("", None),
    ],
)
def test_tfn_labels(text, label):
    found = find_choice(text, TFN_LABELS)
    assert (found.value if found else None) == label


def test_not_given_is_never_read_as_given():
    assert find_choice("NOT GIVEN", GIVEN_LABELS).value == "NOT GIVEN"
    assert find_choice("Decision: GIVEN", GIVEN_LABELS).value == "GIVEN"
    assert find_choice("The information is NOT GIVEN here", GIVEN_LABELS).value == "NOT GIVEN"
    # keyed_only: a reasoning step that mentions a label has not chosen it
    assert find_choice("Step: the answer is TRUE", TFN_LABELS, keyed_only=True) is None
    assert find_choice("Label: TRUE", TFN_LABELS, keyed_only=True).value == "TRUE"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Confidence: 0.85", 0.85),
        ("confidence = .5", 0.5),
        ("Confidence: 80%", 0.8),
        ("my confidence is 1", 1.0),
        ("Confidence: 8", None),  # 8 of what? not guessed
        ("Confidence: high", None),
        ("no number here", None),
    ],
)
def test_confidences(text, value):
    assert find_confidence(text) == (pytest.approx(value) if value is not None else None)


def test_label_probability_by_hand():
    # first-token alternatives: " TRUE" 0.5, "T" 0.1 (both begin TRUE), " FALSE" 0.2,
    # " NOT" 0.1 (NOT GIVEN), " The" 0.1 (no label): p(TRUE) = 0.6 / 0.9
    alternatives = [
        (" TRUE", math.log(0.5)),
        ("T", math.log(0.1)),
        (" FALSE", math.log(0.2)),
        (" NOT", math.log(0.1)),
        (" The", math.log(0.1)),
    ]
    assert choice_probability(alternatives, "TRUE") == pytest.approx(0.6 / 0.9)
    assert choice_probability(alternatives, "NOT GIVEN") == pytest.approx(0.1 / 0.9)
    assert choice_probability([(" The", -0.1)], "TRUE") is None


def test_label_reading_prefers_logprobs_then_stated():
    top = ((" TRUE", math.log(0.7)), (" FALSE", math.log(0.2)), (" NOT", math.log(0.1)))
    pieces = [("Label", -0.1, ()), (":", -0.1, ()), (" TRUE", math.log(0.7), top)]
    pieces += [("\nConfidence: 0.4", -0.1, ())]
    reading = label_reading(completion(pieces))
    assert (reading.label, reading.source) == ("TRUE", "logprobs")
    assert reading.confidence == pytest.approx(0.7)
    stated = label_reading(completion(pieces), use_logprobs=False)
    assert (stated.label, stated.confidence, stated.source) == ("TRUE", 0.4, "stated")
    bare = label_reading(Completion(text="Label: FALSE", finish_reason="stop"))
    assert bare.label == "FALSE" and math.isnan(bare.confidence)
    none = label_reading(Completion(text="I cannot tell.", finish_reason="stop"))
    assert none.label is None and math.isnan(none.confidence)


def test_confidence_product_by_hand():
    assert confidence_product([0.9, 0.8, 0.5]) == pytest.approx(0.36)
    assert confidence_product([1.0]) == 1.0
    assert math.isnan(confidence_product([0.9, None, 0.5]))
    assert math.isnan(confidence_product([]))


# -- several samples --------------------------------------------------------------------------
def test_mean_and_sd_over_parsed_samples():
    mean, sd = mean_sd([3.0, math.nan, 5.0, 4.0])
    assert mean == pytest.approx(4.0) and sd == pytest.approx(1.0)  # sample sd of 3, 4, 5
    mean, sd = mean_sd([2.0, math.nan])
    assert mean == 2.0 and math.isnan(sd)
    mean, sd = mean_sd([math.nan])
    assert math.isnan(mean) and math.isnan(sd)


def test_majority_label_and_agreement():
    vote = majority_label([("TRUE", 0.9), ("FALSE", 0.6), ("TRUE", 0.7), (None, math.nan)])
    assert vote.label == "TRUE"
    assert vote.agreement == pytest.approx(2 / 4)  # the unparsed sample agrees with nobody
    assert vote.confidence == pytest.approx(0.8)
    assert vote.confidence_sd == pytest.approx(math.sqrt(0.02))
    # a tie: the larger summed confidence wins
    tie = majority_label([("TRUE", 0.3), ("FALSE", 0.9)])
    assert (tie.label, tie.agreement) == ("FALSE", 0.5)
    # equal counts and confidences: the order of the labels
    assert majority_label([("FALSE", 0.5), ("TRUE", 0.5)]).label == "TRUE"
    empty = majority_label([(None, math.nan), (None, math.nan)])
    assert empty.label is None and empty.agreement == 0.0 and math.isnan(empty.confidence)


def test_token_offsets():
    c = completion([("Label", 0.0, ()), (":", 0.0, ()), (" TRUE", 0.0, ())])
    assert [c.token_at(i) for i in (0, 4, 5, 6, 10)] == [0, 0, 1, 2, 2]
    assert c.token_at(11) is None
