"""nDCG@10, AP and bpref through ir_measures (pytrec_eval), checked against numbers worked out by
hand, including the edge cases the validation relies on: graded gains, judged non-relevant and
unjudged documents, ties in score, queries without relevant documents or missing from the run."""

from __future__ import annotations

import math

import pytest

from nrp.errors import ConfigError
from nrp.measures import MeasureEvaluator, display_name, parse_measures

LOG2_3 = math.log2(3)  # 1.584963
LOG2_5 = math.log2(5)  # 2.321928

QRELS = {
    # q1: graded gains, two judged non-relevant (b, e), a relevant document never retrieved (d)
    "q1": {"a": 2, "b": 0, "c": 1, "d": 1, "e": 0},
    # q2: a tie in score between a relevant and a non-relevant document
    "q2": {"x": 1, "y": 0},
    # q3: judged, but nothing relevant
    "q3": {"z": 0},
    # q4: judged, relevant document, but the run has no row for q4
    "q4": {"w": 1},
}
RUN = {
    "q1": {"b": 3.0, "u": 2.5, "c": 2.0, "a": 1.0},  # u is unjudged
    "q2": {"x": 1.0, "y": 1.0},
    "q3": {"z": 1.0},
    "q5": {"v": 1.0},  # a query nobody judged
}


@pytest.fixture(scope="module")
def values():
    return MeasureEvaluator(parse_measures(["nDCG@10", "AP", "Bpref"]), QRELS).per_query(RUN)


def test_ndcg_graded_gains_and_ideal_from_all_judgments(values):
    # q1 ranking: b(0) u(unjudged=0) c(1) a(2)
    # DCG  = 0/log2(2) + 0/log2(3) + 1/log2(4) + 2/log2(5) = 0.5 + 0.861353 = 1.361353
    # IDCG over all judgments (2, 1, 1, 0, 0; d counts though never retrieved):
    #      = 2/1 + 1/log2(3) + 1/log2(4) = 2 + 0.630930 + 0.5 = 3.130930
    dcg = 1 / 2 + 2 / LOG2_5
    idcg = 2 + 1 / LOG2_3 + 1 / 2
    assert values["nDCG@10"]["q1"] == pytest.approx(dcg / idcg, abs=1e-12)
    assert values["nDCG@10"]["q1"] == pytest.approx(0.434808, abs=1e-6)


def test_ap_counts_unretrieved_relevant_in_r(values):
    # relevant (label >= 1): a, c, d -> R = 3; retrieved relevant at ranks 3 (c) and 4 (a)
    # AP = (P@3 + P@4) / R = (1/3 + 2/4) / 3 = 0.833333 / 3 = 0.277778
    assert values["AP"]["q1"] == pytest.approx((1 / 3 + 2 / 4) / 3, abs=1e-12)


def test_bpref_skips_unjudged_documents(values):
    # R = 3 relevant, N = 2 judged non-relevant (b, e); min(R, N) = 2. The unjudged u is skipped.
    # c: judged non-relevant above = 1 (b) -> 1 - min(1, 3)/2 = 0.5
    # a: judged non-relevant above = 1 (b) -> 0.5
    # bpref = (0.5 + 0.5) / 3 = 0.333333 (were u counted as non-relevant, c and a would get 0)
    assert values["Bpref"]["q1"] == pytest.approx(1 / 3, abs=1e-12)


def test_ties_in_score_are_broken_by_docno_descending(values):
    # x and y both score 1.0; trec_eval puts y (larger docno) first: y(0) x(1)
    # nDCG = (1/log2(3)) / 1 = 0.630930 (it would be 1.0 with x first)
    assert values["nDCG@10"]["q2"] == pytest.approx(1 / LOG2_3, abs=1e-12)
    # AP = P@2 / R = (1/2) / 1 = 0.5; bpref: x has 1 judged non-relevant above, min(R, N) = 1
    # -> 1 - 1/1 = 0
    assert values["AP"]["q2"] == pytest.approx(0.5)
    assert values["Bpref"]["q2"] == 0.0


def test_query_without_relevant_documents_scores_zero(values):
    # ideal DCG = 0: trec_eval reports 0, not undefined
    assert [values[m]["q3"] for m in ("nDCG@10", "AP", "Bpref")] == [0.0, 0.0, 0.0]


def test_judged_query_missing_from_run_scores_zero_and_run_only_query_is_ignored(values):
    assert [values[m]["q4"] for m in ("nDCG@10", "AP", "Bpref")] == [0.0, 0.0, 0.0]
    assert list(values["nDCG@10"]) == ["q1", "q2", "q3", "q4"]  # no q5


def test_graded_gain_with_all_documents_retrieved_in_ideal_order_is_one():
    evaluator = MeasureEvaluator(["nDCG@10"], {"q": {"a": 3, "b": 1, "c": 0}})
    assert evaluator.per_query({"q": {"a": 3.0, "b": 2.0, "c": 1.0}})["nDCG@10"]["q"] == 1.0
    # swapping a and b: DCG = 1 + 3/log2(3) = 2.892789; IDCG = 3 + 1/log2(3) = 3.630930
    swapped = evaluator.per_query({"q": {"b": 3.0, "a": 2.0, "c": 1.0}})["nDCG@10"]["q"]
    assert swapped == pytest.approx((1 + 3 / LOG2_3) / (3 + 1 / LOG2_3), abs=1e-12)


def test_ndcg_cutoff_ignores_documents_below_rank_10():
    qrels = {"q": {f"n{i:02d}": 0 for i in range(10)} | {"r": 1}}
    run = {"q": {f"n{i:02d}": 10.0 - i for i in range(10)} | {"r": -1.0}}  # r at rank 11
    assert MeasureEvaluator(["nDCG@10"], qrels).per_query(run)["nDCG@10"]["q"] == 0.0


def test_parse_measures_and_display_names():
    assert [str(m) for m in parse_measures("nDCG@10, AP, Bpref")] == ["nDCG@10", "AP", "Bpref"]
    assert [display_name(m) for m in ("nDCG@10", "AP", "Bpref")] == ["nDCG@10", "MAP", "bpref"]
    with pytest.raises(ConfigError, match="unknown measure"):
        parse_measures(["nDCG@ten"])
    with pytest.raises(ConfigError, match="given twice"):
        parse_measures(["AP", "AP"])
