"""``result_frame``: the rows of ``score_answers`` (and of ``POST /v1/score``) from positions.

Hand-computed values: one answer, three dimensions with weights 0.1, 0.3, 0.6 and NRP 2/3, 2/3,
5/9 (r = 1 of 3, 1 of 3, 4 of 9 documents). The combined NRP is 0.6 exactly as pandas'
compensated group sum gives it (a plain left-to-right sum of the weighted NRP gives
0.6000000000000001); a second answer shows the tie rules and rows in answer order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nrp.positioning.result_rows import result_rows
from nrp.positioning.scoring import RESULT_COLUMNS, result_frame

ANSWERS = pd.DataFrame(
    {
        "answer_id": ["a", "b"],
        "llm": ["m", "m"],
        "prompt": ["p", "q"],
        "qid": ["1", "2"],
        "sample": [0, 3],
        "text": ["x", "y"],
    },
    index=[7, 3],  # any index: rows follow the answers' order
)


def positions(above: list[int], ties: list[int], n_docs: list[int]) -> pd.DataFrame:
    above_, ties_ = np.array(above), np.array(ties)
    return pd.DataFrame(
        {
            "answer_id": ["b", "a"],  # positions in another order than the answers
            "qid": ["2", "1"],
            "score": [0.5, 1.5],
            "above": above_,
            "ties": ties_,
            "strict": above_ + ties_,
            "n_docs": n_docs,
        }
    ).set_index("answer_id")


POSITIONS = {
    "relevance": ("bm25", positions([0, 1], [2, 0], [4, 3])),
    "readability": ("tfidf", positions([1, 1], [0, 0], [4, 3])),
    "safety": ("bm25", positions([2, 4], [1, 0], [4, 9])),
}
WEIGHTS = {"relevance": 0.1, "readability": 0.3, "safety": 0.6}


def test_rows_per_dimension_then_the_compensated_weighted_combination():
    frame = result_frame(ANSWERS, POSITIONS, "optimistic", WEIGHTS)
    assert list(frame.columns) == list(RESULT_COLUMNS)
    assert frame["answer_id"].tolist() == ["a"] * 4 + ["b"] * 4
    assert frame["dimension"].tolist() == ["relevance", "readability", "safety", "weighted"] * 2
    assert frame["ranker"].tolist() == ["bm25", "tfidf", "bm25", ""] * 2
    a = frame.iloc[:4]
    assert a["rank"].tolist()[:3] == [1.0, 1.0, 4.0] and np.isnan(a["rank"].iloc[3])
    assert a["nrp"].tolist()[:3] == [1 - 1 / 3, 1 - 1 / 3, 1 - 4 / 9]
    assert a["nrp"].iloc[3] == 0.6  # 0.1 * 2/3 + 0.3 * 2/3 + 0.6 * 5/9
    assert a["n_docs"].tolist() == [3, 3, 9, 3]
    assert a["ties"].tolist()[:3] == [0, 0, 0] and a["ties"].isna().tolist() == [False] * 3 + [True]
    assert frame["score"].tolist()[:3] == [1.5, 1.5, 1.5] and frame["score"].isna().sum() == 2
    assert str(frame["ties"].dtype) == "Int64"
    assert frame["sample"].tolist() == [0] * 4 + [3] * 4


def test_tie_rules_of_the_second_answer():
    # answer b: relevance above 0 with 2 ties of 4 documents, safety above 2 with 1 tie of 4
    expected = {"optimistic": [0.0, 2.0], "mid": [1.0, 2.5], "pessimistic": [2.0, 3.0]}
    for rule, (relevance, safety) in expected.items():
        b = result_frame(ANSWERS, POSITIONS, rule, WEIGHTS).iloc[4:]
        assert b["rank"].tolist()[0] == relevance and b["rank"].tolist()[2] == safety
        nrp = [1 - relevance / 4, 1 - 1 / 4, 1 - safety / 4]
        assert b["nrp"].tolist()[:3] == nrp
    strict = result_frame(ANSWERS, POSITIONS, "strict", WEIGHTS).iloc[4:]
    assert strict["rank"].tolist()[:3] == [2.0, 1.0, 3.0]


def test_no_answers_no_rows():
    frame = result_frame(ANSWERS.iloc[:0], POSITIONS, "mid", WEIGHTS)
    assert list(frame.columns) == list(RESULT_COLUMNS) and frame.empty


def test_result_rows_are_result_frames_rows_without_a_frame():
    # the service's rows (``result_rows``: positions as tuples in answer order) hold the very
    # values of ``result_frame``'s, missing ones as None, for every tie rule
    records = ANSWERS.to_dict("records")
    for rule in ("optimistic", "mid", "pessimistic", "strict"):
        tuples = {
            name: (spec, list(found.reindex(ANSWERS["answer_id"]).reset_index().itertuples(
                index=False, name=None)))
            for name, (spec, found) in POSITIONS.items()
        }  # fmt: skip
        rows = result_rows(records, tuples, rule, WEIGHTS)
        frame = result_frame(ANSWERS, POSITIONS, rule, WEIGHTS)
        expected = [
            [None if v is pd.NA or (isinstance(v, float) and np.isnan(v)) else v for v in row]
            for row in frame.astype(object).itertuples(index=False, name=None)
        ]
        assert rows == expected
        assert [[type(v) for v in row] for row in rows] == [
            [type(v) for v in row] for row in expected
        ]
    assert result_rows([], {}, "mid", WEIGHTS) == []
