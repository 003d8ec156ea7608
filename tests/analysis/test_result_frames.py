"""One vocabulary for the library's result frames (``nrp.tables.FRAME_VOCABULARY``): validation,
the NRP summary and the check all name the system ``name`` and give ``measure``, ``mean``,
``ci_low``, ``ci_high``, ``queries``; p-values as ``p_value`` and ``p_corrected``; per-query long
frames (``name, qid, measure, value``) as ``pt.Experiment(perquery=True)`` gives them; the
summary's rows pooled over prompts (``(all)``) apart from the data. ``validate(..., save=True)``
writes the JSON that ``nrp score`` reads. Values by hand, on the collection of
``tests/rankers/word_collection.py`` and on the summary's hand-made frame."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_summary import HAND, results

import nrp
from nrp.analysis.summary import summarize
from nrp.validation.result import ValidationResult

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rankers"))
from word_collection import brevity, build_words, overlap


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    words = build_words(tmp_path_factory.mktemp("frames"))
    result = nrp.validate(
        words, {"overlap": overlap(), "brevity": brevity()}, validity=False, save=True
    )
    return words, result


def test_validation_frame_names_systems_and_carries_p_values(validated):
    _words, result = validated
    frame = result.to_frame()
    assert list(frame.columns) == [
        "dimension", "name", "measure", "mean", "ci_low", "ci_high", "queries", "chosen",
        "p_value", "p_corrected",
    ]  # fmt: skip
    rel = frame[frame["dimension"] == "relevance"].set_index(["name", "measure"])
    # overlap orders both queries ideally for relevance: nDCG@10 1 on each of the 2 queries
    assert rel.loc[("overlap", "nDCG@10"), "mean"] == 1.0
    assert rel.loc[("overlap", "nDCG@10"), "queries"] == 2
    assert rel.loc[("overlap", "nDCG@10"), "chosen"]
    assert math.isnan(rel.loc[("overlap", "nDCG@10"), "p_value"])  # the chosen one itself
    tests = {frozenset((t.a, t.b)): t for t in result.dimensions["relevance"].tests}
    for other in ("brevity", "random"):
        test = tests[frozenset(("overlap", other))]
        assert rel.loc[(other, "nDCG@10"), "p_value"] == test.p
        assert rel.loc[(other, "nDCG@10"), "p_corrected"] == test.p_corrected
        assert test.p_corrected >= test.p
        assert math.isnan(rel.loc[(other, "AP"), "p_value"])  # tests are on nDCG@10 only


def test_validation_per_query_frame_is_long(validated):
    _words, result = validated
    long = result.to_frame(perquery=True)
    assert list(long.columns) == ["dimension", "name", "qid", "measure", "value"]
    # 2 dimensions x 3 systems (overlap, brevity, the random control) x 3 measures x 2 queries
    assert len(long) == 2 * 3 * 3 * 2
    ndcg = long[(long["dimension"] == "relevance") & (long["measure"] == "nDCG@10")]
    assert ndcg[ndcg["name"] == "overlap"].set_index("qid")["value"].to_dict() == {
        "q1": 1.0,
        "q2": 1.0,
    }
    means = ndcg.groupby("name")["value"].mean()
    summary = result.dimensions["relevance"].summary
    for name in ("overlap", "brevity", "random"):
        assert means[name] == pytest.approx(summary[name]["nDCG@10"].mean)


def test_save_writes_the_file_nrp_score_reads(validated):
    words, result = validated
    path = words.path / nrp.VALIDATION_FILE
    assert path.read_text(encoding="utf-8") == result.to_json()
    assert ValidationResult.from_json(path).chosen() == result.chosen()
    assert [info.name for info in result.systems] == ["overlap", "brevity", "random"]


def test_summary_frame_keeps_the_pooled_rows_apart():
    summary = summarize(results(HAND))
    frame = summary.to_frame()
    assert list(frame.columns)[:8] == [
        "dimension", "ranker", "name", "measure", "mean", "ci_low", "ci_high", "queries",
    ]  # fmt: skip
    # A/p1: q1 (1 + 0.5 + 0) / 3 = 0.5, q2 1.0 -> 0.75; A/p2: q1 0.25, q2 0.75 -> 0.5
    assert frame.set_index("name")["mean"].to_dict() == pytest.approx({"A/p1": 0.75, "A/p2": 0.5})
    assert set(frame["measure"]) == {"nrp"} and frame["answers"].tolist() == [4, 2]
    pooled = summary.to_frame(pooled=True)
    assert pooled["name"].tolist() == ["A/(all)"]
    assert pooled["mean"].iloc[0] == pytest.approx(0.625)  # q1 0.375, q2 0.875
    long = summary.to_frame(perquery=True)
    assert list(long.columns)[:6] == ["dimension", "ranker", "name", "qid", "measure", "value"]
    values = long.set_index(["name", "qid"])["value"].to_dict()
    assert values == pytest.approx(
        {("A/p1", "q1"): 0.5, ("A/p1", "q2"): 1.0, ("A/p2", "q1"): 0.25, ("A/p2", "q2"): 0.75}
    )
    # the tables of the CSV files keep their own columns
    assert "mean_nrp" in summary.means.columns and len(summary.means) == 3


def test_check_frame_speaks_the_same_vocabulary():
    outcome = nrp.check_results(results(HAND), min_nrp=0.6)
    frame = outcome.to_frame().set_index("name")
    assert frame["mean"].to_dict() == pytest.approx({"A/p1": 0.75, "A/p2": 0.5})
    assert frame["queries"].to_dict() == {"A/p1": 2, "A/p2": 2}
    assert set(frame["measure"]) == {"nrp"}
    assert frame["passed"].to_dict() == {"A/p1": True, "A/p2": False}
    assert isinstance(outcome.table, pd.DataFrame) and "mean_nrp" in outcome.table.columns
