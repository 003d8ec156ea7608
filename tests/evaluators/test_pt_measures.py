"""NRP as a measure in pt.Experiment (nrp.evaluators.pt_measures), over two toy answer pipelines
on the hand-made collection of tests/rankers/word_collection.py (scores counted there).

Validation chooses overlap for relevance and brevity for readability. The pipelines answer each
query with a copy of its best judged document (q1: a1, q2: b1) or with an off-topic sentence of
10 words and no query word. NRP = 1 - r / |D_q|, r = above + ties / 2 (ties mid):

    relevance (overlap)      copy: q1 3 ties a1: r 0.5 -> 7/8;  q2 3 ties b1: r 0.5 -> 5/6
                             off:  q1 0: 3 above, ties a4: 1/8; q2 0: 2 above, ties b3: 1/6
    readability (brevity)    copy: q1 -5: 2 above, ties a1: 3/8; q2 -6: 2 above, ties b1: 1/6
                             off:  -10, below every document: 0 and 0
    weighted (equal)         copy: q1 5/8, q2 1/2;  off: q1 1/16, q2 1/12
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import ir_measures
import pandas as pd
import pyterrier as pt
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rankers"))
from word_collection import DOCS, Counting, brevity_score, build_words, overlap_score

from nrp import api
from nrp.errors import ConfigError
from nrp.evaluators.pt_measures import nrp_measures
from nrp.rankers.pyterrier import from_transformer

OFF_TOPIC = "the weather will be sunny and warm all day today"
EXPECTED = {  # pipeline -> measure -> qid -> NRP
    "copy": {
        "nrp.relevance": {"q1": 7 / 8, "q2": 5 / 6},
        "nrp.readability": {"q1": 3 / 8, "q2": 1 / 6},
        "nrp.weighted": {"q1": 5 / 8, "q2": 1 / 2},
    },
    "off": {
        "nrp.relevance": {"q1": 1 / 8, "q2": 1 / 6},
        "nrp.readability": {"q1": 0.0, "q2": 0.0},
        "nrp.weighted": {"q1": 1 / 16, "q2": 1 / 12},
    },
}


@pytest.fixture
def validated(tmp_path):
    """The collection with its validation.json, and the counters of the two rankers' rows."""
    words = build_words(tmp_path)
    overlap, brevity = Counting(overlap_score), Counting(brevity_score)
    rankers = [
        from_transformer(pt.apply.doc_score(overlap), fingerprint="overlap-v1"),
        from_transformer(pt.apply.doc_score(brevity), fingerprint="brevity-v1"),
    ]
    api.validate(words, rankers, validity=False).to_json(words.path / "validation.json")
    return words, overlap, brevity


def _best_documents() -> dict[str, str]:
    best: dict[str, tuple[int, str]] = {}
    for qid, text, relevance, _ in DOCS.values():
        if relevance > best.get(qid, (-1, ""))[0]:
            best[qid] = (relevance, text)
    return {qid: text for qid, (_, text) in best.items()}


def pipelines() -> dict[str, pt.Transformer]:
    best = _best_documents()
    return {
        "copy": pt.apply.generic(lambda topics: topics.assign(qanswer=topics["qid"].map(best))),
        "off": pt.apply.generic(lambda topics: topics.assign(qanswer=OFF_TOPIC)),
    }


def _mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values)


def test_experiment_reports_nrp_per_dimension_and_weighted(validated):
    words, overlap, brevity = validated
    # validation scored D_q once each, after the batch probe (4 rows together, then alone)
    assert (overlap.rows, brevity.rows) == (8 + 7, 8 + 7)
    measures = nrp_measures(words, cache=False)
    assert [str(m) for m in measures] == ["nrp.relevance", "nrp.readability", "nrp.weighted"]
    assert set(ir_measures.run_inputs(measures)) == {"query_id", "qanswer"}
    table = pt.Experiment(
        list(pipelines().values()), words.topics, words.qrels("relevance"), measures,
        names=list(pipelines()), validate="ignore",
    ).set_index("name")  # fmt: skip
    for name, by_measure in EXPECTED.items():
        for measure, per_query in by_measure.items():
            assert table.loc[name, measure] == pytest.approx(_mean(per_query), abs=1e-12)
    # one positioning per pipeline for the three measures: D_q (no cache) and 2 answers each
    # (the rankers are found again by spec, already probed)
    assert (overlap.rows, brevity.rows) == (15 + 2 * (7 + 2), 15 + 2 * (7 + 2))
    per_query = pt.Experiment(
        list(pipelines().values()), words.topics, words.qrels("relevance"), measures,
        names=list(pipelines()), perquery=True, validate="ignore",
    )  # fmt: skip
    found = {(r.name, r.measure, r.qid): r.value for r in per_query.itertuples()}
    expected = {
        (name, measure, qid): value
        for name, by_measure in EXPECTED.items()
        for measure, values in by_measure.items()
        for qid, value in values.items()
    }
    assert found == pytest.approx(expected, abs=1e-12)


def test_nrp_and_ndcg_in_one_experiment_over_a_pipeline_that_ranks_and_answers(validated):
    words, _, _ = validated
    ranker = from_transformer(pt.apply.doc_score(overlap_score), fingerprint="overlap-v1")
    # D_q ranked by overlap, each query answered with its top document (the rows keep qanswer)
    answer_top = pt.apply.generic(
        lambda ranked: ranked.assign(
            qanswer=ranked.sort_values("rank").groupby("qid")["text"].transform("first")
        )
    )
    pipeline = words.retriever() >> ranker >> answer_top
    table = pt.Experiment(
        [pipeline], words.topics, words.qrels("relevance", scope="candidates"),
        [ir_measures.nDCG @ 10, *nrp_measures(words, cache=False)], names=["ranks-and-answers"],
        validate="ignore",
    ).set_index("name")  # fmt: skip
    row = table.loc["ranks-and-answers"]
    assert row["nDCG@10"] == 1.0  # overlap orders D_q as the grades do (a1 > a2 > ...)
    # the top documents as answers: a1 and b1, the copies of the "copy" pipeline
    for measure, per_query in EXPECTED["copy"].items():
        assert row[measure] == pytest.approx(_mean(per_query), abs=1e-12)


def test_weights_and_other_rankers_are_options(validated):
    words, _, _ = validated
    weighted = nrp_measures(words, weights={"relevance": 3, "readability": 1})[-1]
    table = pt.Experiment(
        list(pipelines().values()), words.topics, words.qrels("relevance"), [weighted],
        names=list(pipelines()), validate="ignore",
    ).set_index("name")  # fmt: skip
    copy = (0.75 * 7 / 8 + 0.25 * 3 / 8 + 0.75 * 5 / 6 + 0.25 * 1 / 6) / 2
    off = (0.75 * 1 / 8 + 0.75 * 1 / 6) / 2
    assert table["nrp.weighted"].to_dict() == pytest.approx({"copy": copy, "off": off})
    # one ranker for every dimension: overlap, so readability is overlap's NRP too
    single = nrp_measures(words, pt.apply.doc_score(overlap_score), cache=False)
    table = pt.Experiment(
        [pipelines()["copy"]], words.topics, words.qrels("relevance"), single,
        names=["copy"], validate="ignore",
    ).set_index("name")  # fmt: skip
    assert table.loc["copy", "nrp.readability"] == pytest.approx((7 / 8 + 5 / 6) / 2)


def test_a_query_without_an_answer_counts_0_as_in_ir_measures_or_nan_when_asked(validated):
    words, _, _ = validated
    only_q1 = pt.apply.generic(
        lambda topics: topics[topics["qid"] == "q1"].assign(qanswer=DOCS["a1"][1])
    )

    def values(**options) -> dict:
        per_query = pt.Experiment(
            [only_q1], words.topics, words.qrels("relevance"), nrp_measures(words, **options),
            names=["q1 only"], perquery=True, validate="ignore",
        )  # fmt: skip
        return {(r.measure, r.qid): r.value for r in per_query.itertuples()}

    counted = values()
    assert counted[("nrp.relevance", "q1")] == 7 / 8
    assert counted[("nrp.relevance", "q2")] == 0.0  # as ir_measures counts a query a run lacks
    means = pt.Experiment(
        [only_q1], words.topics, words.qrels("relevance"), nrp_measures(words),
        names=["q1 only"], validate="ignore",
    )  # fmt: skip
    assert means["nrp.relevance"].iloc[0] == pytest.approx(7 / 8 / 2)  # over both queries
    marked = values(missing="nan")
    assert marked[("nrp.relevance", "q1")] == 7 / 8
    assert math.isnan(marked[("nrp.relevance", "q2")])
    with pytest.raises(ConfigError, match="missing must be 'zero' or 'nan', not 'none'"):
        nrp_measures(words, missing="none")


def test_errors_name_what_to_change(validated, tmp_path):
    words, _, _ = validated
    no_answer = pt.apply.generic(lambda topics: topics.assign(answer="x"))
    with pytest.raises(ConfigError, match="column 'qanswer'"):
        pt.Experiment([no_answer], words.topics, words.qrels("relevance"),
                      nrp_measures(words), validate="ignore")  # fmt: skip
    (words.path / "validation.json").unlink()
    with pytest.raises(ConfigError, match="run `nrp validate words` first"):
        nrp_measures(words)
    with pytest.raises(ConfigError, match="weights"):
        nrp_measures(words, "random", weights={"relevance": 1})
    with pytest.raises(TypeError, match="ScoreSettings"):
        nrp_measures(words, "random", tie="mid")


def test_the_weighted_measure_weighs_as_nrp_score_does(validated, tmp_path):
    """``nrp.weighted`` of a validation whose weighting leaves readability out (its ranker not
    better than random) is relevance's NRP, as ``nrp score`` weighs it, not the mean of the
    two dimensions."""
    import dataclasses

    from nrp.validation.result import ValidationResult

    words, _, _ = validated
    path = words.path / "validation.json"
    result = ValidationResult.from_json(path)
    better = {"relevance": True, "readability": False}
    for dimension, found in result.dimensions.items():
        found.choice = dataclasses.replace(
            found.choice, control="random", control_difference=0.1, control_p=0.5,
            better_than_control=better[dimension],
        )  # fmt: skip
    result.to_json(path)
    assert result.weighting()[0] == {"relevance": 1.0, "readability": 0.0}
    table = pt.Experiment(
        list(pipelines().values()), words.topics, words.qrels("relevance"),
        nrp_measures(words, cache=False), names=list(pipelines()), validate="ignore",
    ).set_index("name")  # fmt: skip
    for name, by_measure in EXPECTED.items():
        relevance = _mean(by_measure["nrp.relevance"])
        assert table.loc[name, "nrp.weighted"] == pytest.approx(relevance, abs=1e-12)
    frame = api.score(words, pd.DataFrame({"answer_id": ["a"], "qid": ["q1"], "text": ["x"]}),
                      path, cache=False)  # fmt: skip
    assert frame.attrs["weights"] == {"relevance": 1.0, "readability": 0.0}
    # the NRP evaluator of nrp evaluate weighs alike
    evaluator = api.make_evaluator("nrp:cache=false")
    evaluator.bind_collection(words)
    best = _best_documents()
    items = pd.DataFrame({"answer_id": ["c1", "c2"], "qid": ["q1", "q2"],
                          "text": [best["q1"], best["q2"]]})  # fmt: skip
    found = evaluator.evaluate(items)
    assert found["nrp.relevance"].tolist() == pytest.approx([7 / 8, 5 / 6])
    assert found["nrp.weighted"].tolist() == found["nrp.relevance"].tolist()
