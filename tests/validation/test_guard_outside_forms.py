"""The default guard on non-answers in wordings no generator of nrp has
(scripts/studies/non_answer_forms.py, docs/validity.md "Non-answers in wordings of no generator"),
on real data: MEDIQA 2019 test's first 50 questions, each form written for each, judged by
``guard:content=0.06`` bound to the collection (thresholds calibrated on its judged answers), as
`nrp score` judges them (skipped with a reason when ../shared is absent)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pandas as pd
import pytest

from nrp import Collection
from nrp.rankers.registry import make_ranker

ROOT = Path(__file__).resolve().parents[2]
forms = runpy.run_path(str(ROOT / "scripts" / "studies" / "non_answer_forms.py"), run_name="forms")


@pytest.fixture(scope="module")
def mediqa(tmp_path_factory, mediqa_validated) -> Collection:
    """A copy of the test run's MEDIQA validation: the guard's calibration on its judged
    answers is kept there (validation calibrated ``guard:content=0.06``), so binding reads it."""
    indexes = mediqa_validated(tmp_path_factory.mktemp("mediqa") / "indexes")
    return Collection.load("mediqa-2019", indexes)


def test_the_guard_floors_what_mirrors_declines_or_chats_and_lets_referrals_through(mediqa):
    guard = make_ranker("guard:content=0.06")
    guard.bind_collection(mediqa)
    qids, texts = mediqa.topics["qid"].astype(str), mediqa.topics["query"].astype(str)
    topics = list(zip(qids, texts, strict=True))
    rows = pd.DataFrame(forms["answers"](topics[:50], "ABC"))
    assert len(rows) == 50 * 25
    questions = dict(topics)
    assessed = guard.assess(
        pd.DataFrame(
            {"qid": rows["qid"], "query": rows["qid"].map(questions), "text": rows["text"]}
        )
    )
    flagged = pd.Series(assessed["flagged"].to_numpy(), index=rows["llm"])
    counts = flagged.groupby(level=0, sort=False).sum().astype(int).to_dict()
    # all of them: the question mirrored, a refusal, a disclaimer, small talk
    everything = ("ai_disclaimer", "dont_know", "echo_twice", "echo_typos", "echo_upper",
                  "smalltalk", "not_qualified")  # fmt: skip
    assert {form: counts[form] for form in everything} == dict.fromkeys(everything, 50)
    # since the floor of evidence (docs/studies/guard-study.md) a form one detector doubts near its
    # threshold is not floored: fewer of those that name the question's words are (topic_dodge
    # 43 -> 28, search_advice 38 -> 24, hedge_mention 42 -> 31), and the ranker places them;
    # since the disorder detector reads word order too (feature definitions 5) a few more
    # referrals are (search_advice 24 -> 26, vague_mention 9 -> 11, forum 2 -> 4, pamphlet
    # 0 -> 1, hedge_mention 31 -> 32; ref_mention 9 -> 8)
    assert counts == {
        **dict.fromkeys(everything, 50),
        "generic_health": 0, "topic_dodge": 28, "keywords_sentence": 25, "yes_echo": 48,
        "medicine_definition": 0, "search_advice": 26, "restate_long": 48, "wellness": 0,
        "encyclopedic": 0, "ref_mention": 8, "vague_mention": 11, "hedge_mention": 32,
        # referrals in other words mostly pass (docs/validity.md: graded related by the judges)
        "consult_named": 3, "pamphlet": 1, "forum": 4, "overview_vague": 9, "hotline": 1,
        "generic_fact": 0,
    }  # fmt: skip
