"""validate() and validate_runs() end to end on a tiny collection ingested from hand-written
files: exact per-query nDCG@10 worked out by hand, graded vs raw labels, qrels scope, the score
cache, JSON round trip, the text table."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from nrp import Collection, ingest
from nrp.errors import ConfigError
from nrp.rankers.base import Ranker
from nrp.rankers.random_order import RandomOrder
from nrp.rankers.registry import make_ranker
from nrp.validation import ValidationResult, chosen_rankers, validate, validate_runs

LOG2_3, LOG2_5, LOG2_6 = math.log2(3), math.log2(5), math.log2(6)

MANIFEST = """\
name: tiny
data_root: .
dimensions:
  relevance:
    grades: {0: not relevant, 1: partly relevant, 2: relevant}
  credibility:
    grades:
      0: not credible
      1: somewhat credible
      2: credible
      3: {exclude: true, meaning: assessor could not judge}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: docs.tsv, holds: documents}
  - {format: trec-qrels, path: rel.qrels, dimension: relevance}
  - {format: trec-qrels, path: cred.qrels, dimension: credibility}
"""
TOPICS = "qid\tquery\nq1\tvitamin c colds\nq2\tibuprofen blood pressure\nq3\tmelatonin sleep\n"
# Query words found in each text (the overlap ranker's score) in brackets.
DOCS = (
    "docno\ttext\n"
    "d1\tVitamin C does not prevent colds in most people.\n"  # q1: vitamin c colds [3]
    "d2\tColds are caused by viruses.\n"  # q1: colds [1]
    "d3\tVitamin D and sunlight.\n"  # q1: vitamin [1]
    "d4\tZinc lozenges may shorten a cold.\n"  # q1: none ("cold" is not "colds") [0]
    "d5\tIbuprofen can raise blood pressure.\n"  # q2: ibuprofen blood pressure [3]
    "d6\tBlood tests explained.\n"  # q2: blood [1]
    "d7\tParacetamol is gentler on the stomach than ibuprofen.\n"  # q2: ibuprofen [1]
    "d8\tMelatonin helps jet lag sleep.\n"  # q3: melatonin sleep [2]
    "d9\tSleep hygiene tips.\n"  # q3: sleep [1]
)
# d10 is judged but has no text: not in D_q. q3 has no relevant document.
REL = "q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 0\nq1 0 d4 1\nq1 0 d10 1\nq2 0 d5 1\nq2 0 d6 0\nq2 0 d7 2\n"
REL += "q3 0 d8 0\nq3 0 d9 0\n"
# 3 = could not judge: left out of graded qrels, gain 3 in raw qrels.
CRED = "q1 0 d1 1\nq1 0 d2 3\nq1 0 d3 0\nq1 0 d4 2\nq2 0 d5 2\nq2 0 d6 3\nq2 0 d7 0\nq3 0 d8 1\n"


class QueryWordOverlap(Ranker):
    """Score = number of distinct query words in the text (lower-cased word tokens)."""

    name = "overlap"

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        def words(text: str) -> set[str]:
            return set(re.findall(r"\w+", text.lower()))

        return np.array(
            [len(words(q) & words(t)) for q, t in zip(frame["query"], frame["text"], strict=True)],
            dtype=float,
        )


def ingest_tiny(tmp_path, renamed: dict[str, str] | None = None) -> Collection:
    """The tiny collection, ids in ``renamed`` (whole words: q1, d1) written as their values."""
    data = tmp_path / "data"
    data.mkdir()
    for name, text in [
        ("manifest.yaml", MANIFEST),
        ("topics.tsv", TOPICS),
        ("docs.tsv", DOCS),
        ("rel.qrels", REL),
        ("cred.qrels", CRED),
    ]:
        for old, new in (renamed or {}).items():
            text = re.sub(rf"\b{old}\b", new, text)
        (data / name).write_text(text)
    ingest(data / "manifest.yaml", indexes_dir=tmp_path / "indexes")
    return Collection.load("tiny", tmp_path / "indexes")


@pytest.fixture
def tiny(tmp_path) -> Collection:
    return ingest_tiny(tmp_path)


# -- relevance, graded labels, qrels = judgments of D_q (d10 left out) ----------------------------
# overlap, q1: scores d1 3, d2 1, d3 1, d4 0; the d2/d3 tie goes to d3 (docno descending):
#   d1(2) d3(0) d2(0) d4(1): DCG = 2 + 1/log2(5) = 2.430677; IDCG = 2 + 1/log2(3) = 2.630930
OVERLAP_REL_Q1 = (2 + 1 / LOG2_5) / (2 + 1 / LOG2_3)  # 0.923884
# overlap, q2: d5 3, d6 1, d7 1; tie -> d7 first: d5(1) d7(2) d6(0)
#   DCG = 1 + 2/log2(3) = 2.261860; IDCG = 2.630930
OVERLAP_REL_Q2 = (1 + 2 / LOG2_3) / (2 + 1 / LOG2_3)  # 0.859719
# random (seed 0): hash scores q1 d2 .648, d1 .430, d3 .409, d4 .354; q2 d6 .958, d7 .947, d5 .352
#   q1: d2(0) d1(2) d3(0) d4(1): DCG = 2/log2(3) + 1/log2(5) = 1.692537 -> / 2.630930
#   q2: d6(0) d7(2) d5(1): DCG = 2/log2(3) + 1/log2(4) = 1.761860 -> / 2.630930
RANDOM_REL_Q1 = (2 / LOG2_3 + 1 / LOG2_5) / (2 + 1 / LOG2_3)  # 0.643325
RANDOM_REL_Q2 = (2 / LOG2_3 + 1 / 2) / (2 + 1 / LOG2_3)  # 0.669674


def test_validate_exact_per_query_ndcg_and_choice(tiny):
    result = validate(tiny, [QueryWordOverlap(), "random"], validity=False)
    rel = result.dimensions["relevance"]
    # q3 has judgments but no relevant one: listed, not averaged
    assert rel.judged_queries == ["q1", "q2", "q3"]
    assert rel.evaluated_queries == ["q1", "q2"]
    assert rel.excluded_queries == {"without a relevant judgment": ["q3"]}
    assert rel.out_of_scope_judgments == 1  # (q1, d10): no text
    assert rel.judgments == 7  # judgments of the evaluated queries in D_q: q1 d1-d4, q2 d5-d7
    ndcg = rel.per_query["overlap"]["nDCG@10"]
    assert ndcg["q1"] == pytest.approx(OVERLAP_REL_Q1, abs=1e-12)
    assert ndcg["q2"] == pytest.approx(OVERLAP_REL_Q2, abs=1e-12)
    random_ndcg = rel.per_query["random"]["nDCG@10"]
    assert random_ndcg == pytest.approx({"q1": RANDOM_REL_Q1, "q2": RANDOM_REL_Q2}, abs=1e-12)
    summary = rel.summary["overlap"]["nDCG@10"]
    assert summary.mean == pytest.approx((OVERLAP_REL_Q1 + OVERLAP_REL_Q2) / 2)
    assert summary.n == 2
    # t-interval with 2 queries: mean +- t(0.975, 1) * s / sqrt(2), t(0.975, 1) = 12.706205,
    # clipped to nDCG's range [0, 1] (its upper end, 1.2995, lies past 1)
    half = 12.706205 * abs(OVERLAP_REL_Q1 - OVERLAP_REL_Q2) / math.sqrt(2) / math.sqrt(2)
    assert summary.mean + half > 1
    assert (summary.ci_low, summary.ci_high) == pytest.approx(
        (max(0.0, summary.mean - half), 1.0), abs=1e-6
    )
    # one pair; exact randomization over 2 queries (4 sign vectors): both differences positive,
    # only (+,+) and (-,-) reach |mean| -> p = 2/4 = 0.5; Holm over one test leaves it
    (test,) = rel.tests
    assert (test.a, test.b, test.p, test.p_corrected) == ("overlap", "random", 0.5, 0.5)
    assert rel.choice.best == "overlap" and rel.choice.runner_up == "random"
    assert rel.choice.runner_up_not_significantly_worse
    assert result.chosen() == {"relevance": "overlap", "credibility": "overlap"}
    assert result.labels == "graded" and result.qrels_scope == "candidates"


# -- credibility: graded (3 left out) vs raw (3 is the top gain) ---------------------------------
# overlap ranks q1 d1 d3 d2 d4, q2 d5 d7 d6, q3 d8 d9.
# graded q1: d1(1) d3(0) d2(unjudged) d4(2): DCG = 1 + 2/log2(5) = 1.861353;
#            IDCG = 2 + 1/log2(3) = 2.630930 -> 0.707489
# raw    q1: d1(1) d3(0) d2(3) d4(2): DCG = 1 + 3/log2(4) + 2/log2(5) = 3.361353;
#            IDCG = 3 + 2/log2(3) + 1/log2(4) = 4.761860
# graded q2: d5(2) d7(0) d6(unjudged): DCG = IDCG = 2 -> 1
# raw    q2: d5(2) d7(0) d6(3): DCG = 2 + 3/2 = 3.5; IDCG = 3 + 2/log2(3) = 4.261860
# q3: d8(1) first in both modes -> 1
CRED_GRADED = {"q1": (1 + 2 / LOG2_5) / (2 + 1 / LOG2_3), "q2": 1.0, "q3": 1.0}
CRED_RAW = {
    "q1": (1 + 3 / 2 + 2 / LOG2_5) / (3 + 2 / LOG2_3 + 1 / 2),  # 0.705891
    "q2": 3.5 / (3 + 2 / LOG2_3),  # 0.821243
    "q3": 1.0,
}


def test_graded_and_raw_labels(tiny):
    graded = validate(tiny, [QueryWordOverlap()], dimensions=["credibility"], validity=False)
    raw = validate(
        tiny, [QueryWordOverlap()], labels="raw", dimensions=["credibility"], validity=False
    )
    graded_ndcg = graded.dimensions["credibility"].per_query["overlap"]["nDCG@10"]
    raw_ndcg = raw.dimensions["credibility"].per_query["overlap"]["nDCG@10"]
    assert graded_ndcg == pytest.approx(CRED_GRADED, abs=1e-12)
    assert raw_ndcg == pytest.approx(CRED_RAW, abs=1e-12)
    assert graded_ndcg["q1"] == pytest.approx(0.707489, abs=1e-6)
    assert (graded.labels, raw.labels) == ("graded", "raw")
    assert graded.dimensions["credibility"].judgments == 6  # two 3s left out
    assert raw.dimensions["credibility"].judgments == 8
    assert "labels raw" in raw.tables()["credibility"]


def test_qrels_scope_all_and_query_set_judged(tiny):
    result = validate(
        tiny, [QueryWordOverlap()], dimensions=["relevance"], qrels_scope="all", query_set="judged"
    )
    rel = result.dimensions["relevance"]
    # d10 (relevant, no text) now counts in the ideal DCG of q1:
    # IDCG = 2 + 1/log2(3) + 1/log2(4) = 3.130930; DCG as before 2.430677 -> 0.776344
    assert rel.per_query["overlap"]["nDCG@10"]["q1"] == pytest.approx(
        (2 + 1 / LOG2_5) / (2 + 1 / LOG2_3 + 1 / 2), abs=1e-12
    )
    # q3 (no relevant judgment) is averaged as 0
    assert rel.evaluated_queries == ["q1", "q2", "q3"]
    assert rel.per_query["overlap"]["nDCG@10"]["q3"] == 0.0
    assert rel.summary["overlap"]["nDCG@10"].n == 3


def test_second_validation_computes_nothing_and_json_round_trips(tiny, tmp_path):
    first = validate(tiny, [QueryWordOverlap(), "random"], validity=False)
    assert [s.computed for s in first.systems] == [9, 9]  # |D_q| summed over q1-q3
    again = validate(tiny, [QueryWordOverlap(), "random"], validity=False)
    assert [s.computed for s in again.systems] == [0, 0]
    assert again.to_dict() == {**first.to_dict(), "systems": again.to_dict()["systems"]}
    assert (tiny.path / "scores.sqlite").is_file()

    path = tmp_path / "validation.json"
    first.to_json(path)
    data = json.loads(path.read_text())
    assert data["collection"] == "tiny"
    assert data["collection_fingerprint"] == tiny.meta["fingerprint"]
    assert data["labels"] == "graded" and data["primary_measure"] == "nDCG@10"
    assert data["systems"][1]["spec"] == "random"
    assert data["systems"][1]["fingerprint"] == make_ranker("random").fingerprint()
    assert "highest mean" in data["selection_rule"]
    loaded = ValidationResult.from_json(path)
    assert loaded.to_dict() == first.to_dict()
    assert chosen_rankers(path) == {"relevance": "overlap", "credibility": "overlap"}
    assert chosen_rankers(data) == chosen_rankers(first)


def test_table_lists_rankers_best_first_with_marks(tiny):
    table = validate(tiny, [RandomOrder(), QueryWordOverlap()], validity=False).tables()[
        "relevance"
    ]
    lines = table.splitlines()
    assert lines[0].startswith("tiny / relevance: labels graded, qrels candidates")
    assert "2 of 3 judged queries averaged (excluded: 1 without a relevant judgment)" in lines[0]
    rows = [line.split() for line in lines if line.startswith("  overlap") or "random" in line[:9]]
    assert rows[0][0] == "overlap" and rows[0][-1] == "best"
    assert rows[1][0] == "random" and rows[1][-2:] == ["0.500", "="]
    assert "runner-up random is NOT significantly worse" in table


def test_cache_off_and_bad_options(tiny):
    result = validate(tiny, "random:seed=3", cache=False, dimensions=["relevance"])
    assert result.systems[0].computed == 9
    with pytest.raises(ConfigError, match="no dimension 'novelty'"):
        validate(tiny, ["random"], dimensions=["novelty"])
    with pytest.raises(ConfigError, match="given twice"):
        validate(tiny, ["random", "random:seed=0"])
    with pytest.raises(ConfigError, match="labels must be"):
        validate(tiny, ["random"], labels="binary")


def test_settings_object_and_keywords_are_the_same_call(tiny):
    """``ValidationSettings`` carries the options together; its fields as keywords override it,
    and a keyword that is not a field is refused by name."""
    from nrp.validation.settings import ValidationSettings

    settings = ValidationSettings(dimensions=["relevance"], test="t", ci="bootstrap")
    by_object = validate(tiny, ["random"], settings, cache=False)
    by_keywords = validate(tiny, ["random"], cache=False, dimensions=["relevance"], test="t",
                           ci="bootstrap")  # fmt: skip
    assert by_object.to_dict() == by_keywords.to_dict()
    assert by_object.settings["test"] == "t" and list(by_object.dimensions) == ["relevance"]
    overridden = validate(tiny, ["random"], settings, cache=False, test="randomization")
    assert overridden.settings["test"] == "randomization"
    with pytest.raises(TypeError, match="'labelz'"):
        validate(tiny, ["random"], labelz="raw")
    with pytest.raises(ConfigError, match="labels must be"):
        validate(tiny, ["random"], ValidationSettings(labels="binary"))


# -- external runs --------------------------------------------------------------------------------
def test_validate_runs_keeps_documents_without_text_and_warns_about_unknown_qids(tiny, tmp_path):
    run = tmp_path / "mine.run"
    # q1: d1 3, d10 2 (judged relevant, no text), d3 1, d2 1 (tie: d3 first), d4 0
    run.write_text(
        "q1 Q0 d1 1 3 tagA\nq1 Q0 d10 2 2 tagA\nq1 Q0 d2 3 1 tagA\nq1 Q0 d3 4 1 tagA\n"
        "q1 Q0 d4 5 0 tagA\nq9 Q0 d1 1 1 tagA\n"
    )
    result = validate_runs(tiny, [run], dimensions=["relevance"])
    rel = result.dimensions["relevance"]
    # qrels scope "all": d1(2) d10(1) d3(0) d2(0) d4(1):
    # DCG = 2 + 1/log2(3) + 1/log2(6) = 3.017783; IDCG = 2 + 1/log2(3) + 1/log2(4) = 3.130930
    assert rel.per_query["mine"]["nDCG@10"]["q1"] == pytest.approx(
        (2 + 1 / LOG2_3 + 1 / LOG2_6) / (2 + 1 / LOG2_3 + 1 / 2), abs=1e-12
    )
    assert rel.per_query["mine"]["nDCG@10"]["q2"] == 0.0  # no rows for q2: scored 0
    assert result.systems[0].kind == "run" and result.systems[0].spec == f"run:{run}"
    assert any("1 qid(s) not in collection 'tiny' ignored: q9" in w for w in result.warnings)
    assert any("mine: no documents for 1 evaluated queries" in w for w in result.warnings)
    assert result.qrels_scope == "all"
    by_tag = validate_runs(tiny, [run], dimensions=["relevance"], names="tag")
    assert by_tag.systems[0].name == "tagA"


def test_run_with_a_rankers_scores_evaluates_exactly_like_the_ranker(tiny, tmp_path):
    ranked = QueryWordOverlap().transform(tiny.candidates())
    path = tmp_path / "overlap.csv"
    ranked[["qid", "docno", "score"]].to_csv(path, index=False)
    from_run = validate_runs(tiny, [path], qrels_scope="candidates")
    from_ranker = validate(tiny, [QueryWordOverlap()], cache=False, validity=False)
    for dimension in ("relevance", "credibility"):
        assert (
            from_run.dimensions[dimension].per_query["overlap"]
            == from_ranker.dimensions[dimension].per_query["overlap"]
        )


def test_a_run_with_nfd_ids_meets_the_collections_nfc_ids(tmp_path):
    qid, docno = "q\u00e91", "d\u00e91"  # "qé1", "dé1": é as one code point (NFC)
    tiny = ingest_tiny(tmp_path, {"q1": qid, "d1": docno})
    assert qid in set(tiny.topics["qid"])
    nfd_qid, nfd_docno = "qe\u03011", "de\u03011"  # the same ids, e + combining acute (NFD)
    run = tmp_path / "mine.run"
    run.write_text(
        f"{nfd_qid} Q0 {nfd_docno} 1 3 t\n{nfd_qid} Q0 d10 2 2 t\n{nfd_qid} Q0 d2 3 1 t\n"
        f"{nfd_qid} Q0 d3 4 1 t\n{nfd_qid} Q0 d4 5 0 t\n",
        encoding="utf-8",
    )
    result = validate_runs(tiny, [run], dimensions=["relevance"])
    # as in the test above: dé1(2) d10(1) d3(0) d2(0) d4(1)
    assert result.dimensions["relevance"].per_query["mine"]["nDCG@10"][qid] == pytest.approx(
        (2 + 1 / LOG2_3 + 1 / LOG2_6) / (2 + 1 / LOG2_3 + 1 / 2), abs=1e-12
    )
    assert not any("not in collection" in w for w in result.warnings)
