"""Empty answers (no text, or whitespace only): scored last among D_q by every ranker and tie
rule (NRP 0, no score), without being ranked, in every path that positions answers (score_answers
with and without the results cache, the service's rows), and flagged ``empty``.

Uses the hand-built collection of test_injection (q1: documents scored 5, 4, 3, 3, 1 by
``FixedScores``; q3: two documents)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from test_injection import FixedScores, build_tiny, fresh_copy

from nrp.positioning.job import PositionCaches, PositionJob, PositionOptions
from nrp.positioning.positioner import Positioner
from nrp.positioning.scoring import score_answers
from nrp.rankers.lexical import TfIdfRanker
from nrp.ranks import TIE_MODES
from nrp.validation.flags import FLAG_NAMES, flag_answers


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    return build_tiny(tmp_path_factory.mktemp("tiny"))


def answers() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "answer_id": ["top", "nothing", "blank", "null", "q3-blank"],
            "llm": ["m"] * 5,
            "prompt": ["p"] * 5,
            "qid": ["q1", "q1", "q1", "q1", "q3"],
            "sample": [0, 1, 2, 3, 0],
            "text": ["nine", "", " \n\t", None, "\u3000"],
        }
    )


@pytest.mark.parametrize("ties", TIE_MODES)
def test_an_empty_answer_is_last_under_every_tie_rule(tiny, tmp_path, ties):
    ranker = FixedScores()
    result = score_answers(fresh_copy(tiny, tmp_path / "c"), answers(), ranker, ties=ties)
    rows = result[result["dimension"] == "relevance"].set_index("answer_id")
    assert rows.loc["top", "nrp"] == 1.0 and rows.loc["top", "score"] == 9.0
    for answer_id, n_docs in (("nothing", 5), ("blank", 5), ("null", 5), ("q3-blank", 2)):
        row = rows.loc[answer_id]
        assert (row["rank"], row["n_docs"], row["ties"], row["nrp"]) == (n_docs, n_docs, 0, 0.0)
        assert math.isnan(row["score"])  # not ranked: no score
    combined = result[result["dimension"] == "weighted"].set_index("answer_id")["nrp"]
    assert combined.to_dict() == {"top": 1.0, "nothing": 0.0, "blank": 0.0, "null": 0.0,
                                  "q3-blank": 0.0}  # fmt: skip
    # the ranker never saw an empty text: ``FixedScores`` has no score for one (KeyError)


def test_a_lexical_ranker_never_sees_the_empty_answers_and_the_cache_keeps_none(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    first = score_answers(collection, answers(), TfIdfRanker())
    again = score_answers(collection, answers(), TfIdfRanker())
    pd.testing.assert_frame_equal(first, again)
    assert again.attrs["counts"]["answers_from_results_cache"] == 1  # "top" alone was kept
    empty = first[first["answer_id"] != "top"]
    assert (empty["nrp"] == 0.0).all()


def test_the_service_rows_place_an_empty_answer_last(tiny, tmp_path):
    """``Positioner.position_rows`` (the service's synchronous path): the same row."""
    collection = fresh_copy(tiny, tmp_path / "c")
    job = PositionJob(
        collection, FixedScores(), FixedScores().fingerprint(), PositionOptions(),
        PositionCaches.beside(collection, False), collection.candidates(),
    )  # fmt: skip
    rows = Positioner(job).position_rows(["a", "b"], ["q1", "q3"], ["nine", "  "])
    assert rows[0] == ("a", "q1", 9.0, 0, 0, 0, 5)
    assert rows[1][:2] == ("b", "q3") and math.isnan(rows[1][2])
    assert rows[1][3:] == (2, 0, 2, 2)


def test_an_empty_answer_is_flagged_empty_alone():
    frame = answers()
    flags = flag_answers(frame, {"q1": "nine lives", "q3": "other"}, {"q1": ["nine lives"]})
    assert FLAG_NAMES[0] == "empty"
    assert flags["flags"].tolist() == ["question_words,little_content", "empty", "empty",
                                       "empty", "empty"]  # fmt: skip
    assert flags["empty"].tolist() == [False, True, True, True, True]
