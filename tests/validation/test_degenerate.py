"""Degenerate texts built from a collection (nrp.validation.degenerate) and validity measured
from ranked texts (nrp.validation.validity), with values worked out by hand."""

from __future__ import annotations

import random
import re
from collections import Counter

import pandas as pd
import pytest

from nrp.errors import ConfigError
from nrp.validation.degenerate import (
    DOCNO_PREFIX,
    FAMILIES,
    HELD_OUT_FAMILY,
    KINDS,
    QueryMaterial,
    _AllBut,
    _draw_more,
    content_words,
    degenerate_frame,
    degenerate_text,
    draw_other_answer,
    kind_names,
    query_materials,
)
from nrp.validation.validity import (
    FlooredAnswers,
    RealAnswers,
    ScoredText,
    Validity,
    floored_answers,
    measure_validity,
    with_fallback,
    with_real_answers,
)

QUERY = "Can ibuprofen raise blood pressure in older adults?"
BEST = "Ibuprofen can raise blood pressure. It holds salt and water. Ask before long use."
OTHER = "Melatonin helps with jet lag. It is sold without prescription."
MATERIAL = QueryMaterial("q1", QUERY, [BEST, "Ibuprofen is an NSAID."], OTHER)


def test_every_kind_has_one_family_and_evasion_is_held_out():
    assert sorted(k for kinds in FAMILIES.values() for k in kinds) == sorted(KINDS)
    assert HELD_OUT_FAMILY == "evasion"
    assert FAMILIES["evasion"] == ("padded", "evasive", "refusal", "asked")


def test_fixed_kinds_by_hand():
    assert degenerate_text("echo", MATERIAL) == QUERY
    assert degenerate_text("first_sentence", MATERIAL) == "Ibuprofen can raise blood pressure."
    assert degenerate_text("other_best", MATERIAL) == OTHER
    shuffled = degenerate_text("shuffled", MATERIAL, seed=3)
    assert shuffled != BEST and sorted(shuffled.split()) == sorted(BEST.split())


def test_keywords_are_the_questions_content_words():
    # "Can", "in" are function words; "older" and the rest carry content
    assert content_words(QUERY) == ["ibuprofen", "raise", "blood", "pressure", "older", "adults"]
    for index in range(8):
        text = degenerate_text("keywords", MATERIAL, index=index)
        found = re.findall(r"[a-z]+", text.lower())
        assert set(found) - {"keywords"} == set(content_words(QUERY))


def test_composed_kinds_contain_the_question_and_vary_with_the_draw():
    for kind in ("restated", "padded", "evasive", "refusal", "spliced"):
        texts = {degenerate_text(kind, MATERIAL, seed=0, index=i) for i in range(6)}
        assert len(texts) >= 3, kind  # composed wording: not one fixed sentence
        for text in texts:
            assert "ibuprofen raise blood pressure in older adults" in text.lower(), kind
    assert degenerate_text("spliced", MATERIAL, index=0).endswith(
        ("Melatonin helps with jet lag.", "It is sold without prescription.")
    )
    # the same seed and index give the same text
    again = degenerate_text("evasive", MATERIAL, seed=1)
    assert degenerate_text("evasive", MATERIAL, seed=1) == again


def test_asked_is_questions_about_the_questions_words_and_nothing_else():
    """One to three questions back to the asker, each about a run of one or two of the question's
    content words: every sentence ends with a question mark, and the question is not in it."""
    from nrp.rankers.guard_features import asks_only

    texts = {degenerate_text("asked", MATERIAL, seed=0, index=i) for i in range(8)}
    assert len(texts) >= 6  # composed wording
    words = content_words(QUERY)
    for text in texts:
        asks = re.split(r"(?<=\?) ", text)
        assert 1 <= len(asks) <= 3 and all(a.endswith("?") for a in asks)
        assert asks_only(text) == 1.0
        assert "ibuprofen raise blood pressure" not in text.lower()
        assert any(w in text for w in words)
    assert degenerate_text("asked", MATERIAL, seed=0, index=0) == (
        degenerate_text("asked", MATERIAL, seed=0, index=0)
    )


def test_kinds_that_do_not_apply_give_none():
    bare = QueryMaterial("q2", "the of and", [], None)
    for kind in ("keywords", "asked", "shuffled", "first_sentence", "other_best", "spliced"):
        assert degenerate_text(kind, bare) is None, kind
    one_sentence = QueryMaterial("q3", QUERY, ["Only one sentence here"], None)
    assert degenerate_text("first_sentence", one_sentence) is None


def test_kind_names_take_families_and_refuse_unknown_names():
    assert kind_names("damaged,echo") == ["echo", "shuffled", "first_sentence"]
    assert kind_names(None) == list(KINDS)
    with pytest.raises(ConfigError, match="unknown degenerate kind 'echoes'"):
        kind_names("echoes")


def test_frame_from_candidates_orders_documents_by_grade():
    candidates = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q2"],
            "query": [QUERY, QUERY, "melatonin jet lag"],
            "docno": ["a", "b", "c"],
            "text": ["Ibuprofen is an NSAID.", BEST, OTHER],
        }
    )
    materials = query_materials(candidates, {("q1", "b"): 2.0, ("q1", "a"): 1.0})
    assert materials[0].best_documents == [BEST, "Ibuprofen is an NSAID."]
    assert materials[0].other_best == OTHER and materials[1].other_best == BEST
    frame = degenerate_frame(materials, "echo,first_sentence", per_kind=3)
    assert frame[["qid", "kind"]].values.tolist() == [
        ["q1", "echo"],
        ["q1", "first_sentence"],
        ["q2", "echo"],
        ["q2", "first_sentence"],
    ]
    assert frame["docno"].str.startswith(f"{DOCNO_PREFIX}:").all()
    assert frame["family"].tolist() == ["mirror", "damaged", "mirror", "damaged"]


def _pools(shared_grade: float = 1.0) -> tuple[pd.DataFrame, dict[tuple[str, str], float]]:
    """Three queries; q2's best document (``s``) is judged for q1 too, as pools share documents."""
    candidates = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q2", "q3"],
            "query": [QUERY, QUERY, "Is ibuprofen bad for the kidneys?", "melatonin jet lag"],
            "docno": ["a", "s", "s", "c"],
            "text": [BEST, "Ibuprofen is an NSAID.", "Ibuprofen is an NSAID.", OTHER],
        }
    )
    grades = {("q1", "a"): 2.0, ("q1", "s"): shared_grade, ("q2", "s"): 2.0, ("q3", "c"): 1.0}
    return candidates, grades


@pytest.mark.parametrize("seed", range(12))
def test_another_query_s_best_document_is_never_one_of_the_query_s_own(seed):
    candidates, grades = _pools()
    materials = {m.qid: m for m in query_materials(candidates, grades, seed)}
    # q1's other questions: q2 (its best is q1's own "s") and q3: only q3's is an answer elsewhere
    assert materials["q1"].other_best == OTHER
    # q2 and q3 draw as they always did: between the other two queries' best documents
    assert materials["q2"].other_best == random.Random(f"{seed}/q2/other").choice([BEST, OTHER])
    assert materials["q3"].other_best == random.Random(f"{seed}/q3/other").choice(
        [BEST, "Ibuprofen is an NSAID."]
    )


def test_no_other_query_s_best_document_left_means_no_other_best():
    candidates, grades = _pools()
    two = candidates[candidates["qid"] != "q3"]
    materials = {m.qid: m for m in query_materials(two, grades, 0)}
    assert materials["q1"].other_best is None
    assert materials["q2"].other_best == BEST
    frame = degenerate_frame(list(materials.values()), "other_best,spliced")
    assert frame[["qid", "kind"]].values.tolist() == [["q2", "spliced"], ["q2", "other_best"]]
    # graded 0 for q1, its judges said it does not answer q1: it is another question's answer
    candidates, grades = _pools(shared_grade=0.0)
    two = candidates[candidates["qid"] != "q3"]
    assert query_materials(two, grades, 0)[0].other_best == "Ibuprofen is an NSAID."
    assert draw_other_answer(random.Random(0), [BEST, BEST], [BEST, OTHER]) is None
    assert draw_other_answer(random.Random(0), [], [BEST]) is None
    assert draw_other_answer(random.Random(0), [BEST, OTHER], iter([BEST])) == OTHER


def test_measure_validity_by_hand():
    # q1: D_q scores d1 0.9 (relevant), d2 0.5 (relevant), d3 0.1; q2: d4 0.8 (relevant), d5 0.2
    q1 = {"d1": 0.9, "d2": 0.5, "d3": 0.1}
    q2 = {"d4": 0.8, "d5": 0.2}
    scored = [
        ScoredText("q1", "echo", 1.0, q1),  # above all: wins 0, NRP 1
        ScoredText("q1", "echo", 0.5, q1),  # tied with d2: wins (1 + 0.5)/2, NRP 1 - 1.5/3
        ScoredText("q2", "echo", 0.0, q2),  # below all: wins 1, NRP 0
        ScoredText("q1", "shuffled", 0.05, q1),  # below all: wins 1, NRP 0
    ]
    relevant = {"q1": {"d1", "d2"}, "q2": {"d4"}}
    validity = measure_validity(scored, relevant, min_wins=0.9, max_nrp=0.3)
    echo = validity.kinds["echo"]
    # per query first: q1 (0 + 0.75) / 2 = 0.375, q2 1.0 -> mean 0.6875
    assert echo.wins == pytest.approx(0.6875)
    # NRP: q1 (1 + 0.5) / 2 = 0.75, q2 0 -> 0.375
    assert echo.nrp == pytest.approx(0.375)
    assert (echo.texts, echo.queries) == (3, 2)
    assert validity.kinds["shuffled"].wins == 1.0 and validity.kinds["shuffled"].nrp == 0.0
    assert not validity.passed
    assert validity.reason == "echo: judged documents above it in 0.688 of pairs (< 0.9)"
    assert validity.families["mirror"].wins == pytest.approx(0.6875)
    # the fallback: the same rule with a lower share of wins; never above the rule's own
    assert validity.fallback_reason == validity.reason and validity.rule["fallback_wins"] == 0.9
    assert with_fallback(validity, 0.6).fallback_reason == "echo: mean NRP 0.375 (> 0.3)"
    looser = measure_validity(scored, relevant, min_wins=0.9, max_nrp=0.5)
    echo_passes = with_fallback(looser, 0.6)
    assert echo_passes.fallback_reason == "" and echo_passes.rule["fallback_wins"] == 0.6
    assert not echo_passes.passed and echo_passes.reason == validity.reason
    assert with_fallback(looser, 0.7).fallback_reason == (
        "echo: judged documents above it in 0.688 of pairs (< 0.7)"
    )
    assert with_fallback(looser, 0.99).rule["fallback_wins"] == 0.9
    # flooring too many real answers fails the fallback too: 1 of 20 > 2%
    real = RealAnswers(answers=20, floored=1, flagged=1, nrp=0.8)
    floored = with_real_answers(echo_passes, real, None, max_floored=0.02)
    assert floored.fallback_reason == "real answers: 1 of 20 floored (5.0% > 2.0%)"
    assert floored.reason == validity.reason  # its first failing kind stays the reason
    # a query the dimension does not evaluate is left out
    only_q2 = measure_validity(scored, {"q2": {"d4"}}, min_wins=0.9, max_nrp=0.3)
    assert only_q2.passed and only_q2.kinds["echo"].wins == 1.0


def test_measure_validity_by_grade_by_hand():
    """The pairs of each grade of the judged document, pooled over queries: ties half."""
    q1 = {"d1": 0.9, "d2": 0.5, "d3": 0.1}
    q2 = {"d4": 0.8, "d5": 0.2}
    scored = [
        ScoredText("q1", "echo", 1.0, q1),  # d1 below it (0), d2 below it (0)
        ScoredText("q1", "echo", 0.5, q1),  # d1 above (1), d2 tied (0.5)
        ScoredText("q2", "echo", 0.0, q2),  # d4 above (1)
        ScoredText("q1", "shuffled", 0.05, q1),  # d1 and d2 above (1, 1)
    ]
    relevant = {"q1": {"d1", "d2"}, "q2": {"d4"}}
    grades = {("q1", "d1"): 2.0, ("q1", "d2"): 1.0, ("q2", "d4"): 2.0}
    validity = measure_validity(scored, relevant, grades=grades)
    assert validity.by_grade == {
        "echo": {"1": {"pairs": 2, "wins": 0.25}, "2": {"pairs": 3, "wins": 2 / 3}},
        "shuffled": {"1": {"pairs": 1, "wins": 1.0}, "2": {"pairs": 1, "wins": 1.0}},
    }
    # the per-query means are those of the test above, grades or not
    assert validity.kinds == measure_validity(scored, relevant).kinds
    assert measure_validity(scored, relevant).by_grade == {}
    assert Validity.from_dict(validity.to_dict()) == validity
    older = {k: v for k, v in validity.to_dict().items() if k != "by_grade"}  # a file before it
    assert Validity.from_dict(older).by_grade == {}


def test_floored_answers_by_hand():
    """The relevant judged documents with a text, how many of them the ranker floors, and the
    same among those of at most 60 words."""
    relevant = {"q1": {"d1", "d2", "d3"}, "q2": {"d4"}}
    words = {("q1", "d1"): 10, ("q1", "d2"): 61, ("q1", "d3"): 60, ("q2", "d5"): 5}
    floored = frozenset({("q1", "d1"), ("q1", "d2"), ("q2", "d5")})  # d5: not relevant
    # d4 has no text (not in words): not counted; short: d1 (10 words) and d3 (60)
    answers = floored_answers(floored, relevant, words)
    assert answers == FlooredAnswers(relevant=3, floored=2, short=2, short_floored=1)
    assert answers.short_words == 60
    assert floored_answers(frozenset(), relevant, words).floored == 0
    scored = [ScoredText("q1", "echo", 0.0, {"d1": 0.9})]
    validity = measure_validity(scored, {"q1": {"d1"}}, answers=answers)
    again = Validity.from_dict(validity.to_dict())
    assert again.answers == answers and again == validity
    older = {k: v for k, v in validity.to_dict().items() if k != "answers"}  # a file before it
    assert Validity.from_dict(older).answers is None


def test_a_query_s_other_best_draws_count_as_one_text_beyond_their_kind():
    """Three other_best draws of q1 win 0, 0.5 and 1 (mean 0.5); its echo wins 1. The kind's
    figure is the draws' mean; the family's and all texts' count the draws once: q1's all
    texts (1 + 0.5) / 2 = 0.75, not (1 + 0 + 0.5 + 1) / 4 = 0.625."""
    q1 = {"d1": 0.9, "d2": 0.5, "d3": 0.1}
    scored = [
        ScoredText("q1", "echo", 0.0, q1),  # below d1, d2: wins 1, NRP 0
        ScoredText("q1", "other_best", 1.0, q1),  # above both: wins 0, NRP 1
        ScoredText("q1", "other_best", 0.7, q1),  # between: wins 0.5, NRP 1 - 1/3
        ScoredText("q1", "other_best", 0.2, q1),  # below both, above d3: wins 1, NRP 1 - 2/3
        ScoredText("q2", "other_best", 0.0, {"d4": 0.8}),  # one draw: wins 1, NRP 0
    ]
    validity = measure_validity(scored, {"q1": {"d1", "d2"}, "q2": {"d4"}})
    other = validity.kinds["other_best"]
    assert (other.texts, other.queries) == (4, 2)
    assert other.wins == pytest.approx((0.5 + 1.0) / 2)
    assert validity.families["off_topic"].wins == pytest.approx(0.75)
    assert validity.families["off_topic"].texts == 4
    assert validity.overall.wins == pytest.approx(((1.0 + 0.5) / 2 + 1.0) / 2)
    assert validity.overall.texts == 5
    # NRP of q1's draws: 1, 2/3 and 1/3 (three documents), mean 2/3; q2's 0; q1's echo 0
    assert other.nrp == pytest.approx((2 / 3 + 0.0) / 2)
    assert validity.overall.nrp == pytest.approx(((0.0 + 2 / 3) / 2 + 0.0) / 2)


def test_measure_validity_tolerance_makes_close_scores_ties():
    scored = [ScoredText("q1", "echo", 0.500001, {"d1": 0.5})]
    exact = measure_validity(scored, {"q1": {"d1"}})
    assert exact.kinds["echo"].wins == 0.0
    tolerant = measure_validity(scored, {"q1": {"d1"}}, tolerance=1e-5)
    assert tolerant.kinds["echo"].wins == 0.5 and tolerant.kinds["echo"].nrp == 0.5


def test_a_text_shared_by_two_queries_is_scored_against_each_query():
    """Another query's best document can be the same text, and docno, for two queries: each
    keeps the score its own query gives it."""
    import numpy as np

    from nrp.rankers.base import Ranker
    from nrp.validation.validity import score_texts

    class QueryLength(Ranker):
        name = "query_length"

        def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
            return frame["query"].str.len().to_numpy(dtype=float)

    texts = pd.DataFrame(
        {"qid": ["q1", "q2"], "query": ["ab", "abcd"], "docno": ["~degenerate:x", "~degenerate:x"],
         "text": ["same", "same"], "kind": ["other_best", "other_best"]}
    )  # fmt: skip
    run = {"q1": {"d1": 1.0}, "q2": {"d2": 1.0}}
    scored = score_texts(QueryLength(), pd.DataFrame(), texts, run)
    assert [(t.qid, t.score) for t in scored] == [("q1", 2.0), ("q2", 4.0)]


def _five_pools() -> tuple[pd.DataFrame, dict[tuple[str, str], float]]:
    """Six queries, each with one judged document; q0's relevant document is q1's best too, and
    q4 and q5 share their best document (pools share documents)."""
    texts = {
        "q0": "Shared answer.",
        "q1": "Shared answer.",
        "q2": "Answer two.",
        "q3": "Answer three.",
        "q4": "Answer four and five.",
        "q5": "Answer four and five.",
    }
    candidates = pd.DataFrame(
        {
            "qid": list(texts),
            "query": [f"question {q}" for q in texts],
            "docno": [f"d-{text}" for text in texts.values()],
            "text": list(texts.values()),
        }
    )
    grades = {(q, f"d-{text}"): 1.0 for q, text in texts.items()}
    return candidates, grades


@pytest.mark.parametrize("seed", range(8))
def test_several_other_queries_are_drawn_each_text_once_and_the_first_as_with_one(seed):
    candidates, grades = _five_pools()
    one = {m.qid: m for m in query_materials(candidates, grades, seed)}
    many = {m.qid: m for m in query_materials(candidates, grades, seed, draws=5)}
    for qid, material in many.items():
        # the first draw is the one-draw material's, so one draw's figures are unchanged
        assert material.other_best == one[qid].other_best
        assert one[qid].more_other_best == ()
        drawn = [material.other_best, *material.more_other_best]
        assert len(drawn) == len(set(drawn))
    # q0's relevant "Shared answer." is never drawn for it: left are three distinct texts
    assert sorted([many["q0"].other_best, *many["q0"].more_other_best]) == [
        "Answer four and five.", "Answer three.", "Answer two.",
    ]  # fmt: skip
    # q4: five other queries, whose best texts are four distinct ones, none its own text
    assert sorted([many["q4"].other_best, *many["q4"].more_other_best]) == [
        "Answer three.", "Answer two.", "Shared answer.",
    ]  # fmt: skip
    assert sorted([many["q2"].other_best, *many["q2"].more_other_best]) == [
        "Answer four and five.", "Answer three.", "Shared answer.",
    ]  # fmt: skip
    # two draws: one more, drawn with the seed
    two = {m.qid: m for m in query_materials(candidates, grades, seed, draws=2)}
    assert all(len(m.more_other_best) == 1 for m in two.values())
    assert two["q2"].more_other_best[0] in many["q2"].more_other_best


class _Counting(random.Random):
    """A real generator that counts its draws."""

    def __init__(self, seed: str) -> None:
        super().__init__(seed)
        self.draws = 0

    def randrange(self, *args, **kwargs):  # type: ignore[override]
        self.draws += 1
        return super().randrange(*args, **kwargs)


def test_more_draws_stop_when_no_text_is_left_to_find():
    # 400 queries sharing two best documents, then one with a text of its own
    texts = ["A", "B"] * 200 + ["C"]
    counts = Counter(texts)
    others = _AllBut(texts, 0, counts)  # query 0's own "A" left out: 199 "A", 200 "B", "C"
    assert (len(others), others.distinct) == (400, 3)
    assert ("A" in others, "C" in others, "D" in others) == (True, True, False)
    alone = _AllBut(texts, 400, counts)  # the query whose best is "C": no other "C"
    assert (alone.distinct, "C" in alone, "A" in alone) == (2, False, True)
    assert _AllBut(texts, None, counts).distinct == 3
    # nothing left: no draw at all (it used to try all 400 other queries, about 2,400 draws)
    rng = _Counting("0/q/other/more")
    assert _draw_more(rng, alone, {"A", "B"}, 4) == []
    assert rng.draws == 0
    # one text left: it is found, and the draws stop there
    rng = _Counting("0/q/other/more")
    assert _draw_more(rng, others, {"A", "B"}, 4) == ["C"]
    replay = random.Random("0/q/other/more")
    until_c = 1 + next(i for i in range(10_000) if others[replay.randrange(400)] == "C")
    assert rng.draws == until_c


def test_the_frame_gives_one_other_best_text_per_query_drawn_whatever_per_kind_says():
    candidates, grades = _five_pools()
    materials = query_materials(candidates, grades, 0, draws=5)
    for per_kind in (1, 2, 4):
        frame = degenerate_frame(materials, "other_best,echo", per_kind=per_kind)
        counts = frame.groupby(["qid", "kind"]).size().to_dict()
        assert counts == {
            **{(q, "echo"): 1 for q in ("q0", "q1", "q2", "q3", "q4", "q5")},
            **{(q, "other_best"): 3 for q in ("q0", "q1", "q2", "q3", "q4", "q5")},
        }
    material = materials[2]
    assert degenerate_text("other_best", material, index=0) == material.other_best
    assert degenerate_text("other_best", material, index=2) == material.more_other_best[1]
    assert degenerate_text("other_best", material, index=3) is None
