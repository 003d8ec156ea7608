"""The evaluation runner (per-item cache, duplicates, edits, labels, resuming a killed run), items
with real and pseudo-references (hand-built collection; LiveQA-Med's 167 reference answers), and
the NRP evaluator against ``score_answers`` itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from judged_tiny import DOCUMENTS, REFERENCES, judged_tiny

from nrp import Collection, ingest
from nrp.errors import ConfigError, NrpError
from nrp.evaluators.base import make_evaluator, make_evaluators
from nrp.evaluators.cache import EvaluationCache
from nrp.evaluators.items import PSEUDO_REFERENCE, REFERENCE, build_items
from nrp.evaluators.nrp_scores import NrpEvaluator, parse_rankers, parse_weights
from nrp.evaluators.reference_based import Rouge
from nrp.evaluators.run import evaluate, evaluate_answers
from nrp.positioning.scoring import score_answers
from nrp.rankers.guard import GuardRanker
from nrp.rankers.guard_model import PACKAGED_MODEL

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Collection:
    return judged_tiny(tmp_path_factory.mktemp("judged-tiny"))


def answers(*rows: tuple[str, str, str]) -> pd.DataFrame:
    """(answer_id, qid, text) rows, one llm and prompt."""
    frame = pd.DataFrame(rows, columns=["answer_id", "qid", "text"])
    return frame.assign(llm="m", prompt="p", sample=0)


ANSWERS = answers(
    ("a1", "q1", "vitamin c does not prevent colds"),
    ("a2", "q1", "vitamin c cures colds"),
    ("a3", "q2", "drink water when thirsty"),
    ("a4", "q3", "coffee is fine"),
    ("a5", "q4", "no documents here"),
)


class CountingRouge(Rouge):
    """ROUGE that records the answer texts of every batch it evaluates."""

    def __init__(self, params=None):
        super().__init__(params)
        self.batches: list[list[str]] = []

    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        self.batches.append(list(items["text"]))
        return super().evaluate(items)


class Killed(Exception):
    """Stands for a run killed part-way."""


class KilledRouge(CountingRouge):
    """ROUGE whose second batch never finishes."""

    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        if len(self.batches) == 1:
            raise Killed
        return super().evaluate(items)


# -- items --------------------------------------------------------------------------------------
def test_items_real_pseudo_and_no_references(tiny):
    items = build_items(tiny, ANSWERS)
    by_id = items.set_index("answer_id")
    # q1: its two reference answers; q2: the two documents with its top grade (2), by docno;
    # q3: best grade 0, nothing to stand in; q4: no documents at all
    assert by_id.loc["a1", "references"] == tuple(t for _, t in REFERENCES)
    assert by_id.loc["a1", "reference_kind"] == REFERENCE
    assert by_id.loc["a3", "references"] == (DOCUMENTS["w1"], DOCUMENTS["w2"])
    assert by_id.loc["a3", "reference_kind"] == PSEUDO_REFERENCE
    assert by_id.loc["a4", "references"] == () and by_id.loc["a4", "reference_kind"] == ""
    assert by_id.loc["a5", "references"] == () and by_id.loc["a5", "contexts"] == ()
    assert by_id.loc["a1", "contexts"] == (DOCUMENTS["c1"], DOCUMENTS["c2"], DOCUMENTS["c3"])
    assert by_id.loc["a1", "question"] == "does vitamin c prevent colds"
    # pseudo only: q1 too gets its top-graded document (c1) instead of its references
    pseudo = build_items(tiny, ANSWERS, references="pseudo", pseudo_k=1).set_index("answer_id")
    assert pseudo.loc["a1", "references"] == (DOCUMENTS["c1"],)
    assert pseudo.loc["a3", "references"] == (DOCUMENTS["w1"],)
    # readability's top grade 1: q1 {c1, c2}, q2 {w1, w3}, q3 {h1}
    readable = build_items(tiny, ANSWERS, "pseudo", pseudo_dimension="readability")
    assert readable["references"].map(len).tolist() == [2, 2, 2, 1, 0]
    none = build_items(tiny, ANSWERS, references="none")
    assert (none["reference_kind"] == "").all() and none["references"].map(len).sum() == 0
    with pytest.raises(NrpError, match="not topics"):
        build_items(tiny, answers(("x", "q9", "text")))


@pytest.mark.shared_data
def test_items_with_liveqa_med_reference_answers(tmp_path, shared_data):
    shared_data("liveqa-med-2017")
    ingest(MANIFESTS / "liveqa-med-2017.yaml", indexes_dir=tmp_path)
    collection = Collection.load("liveqa-med-2017", tmp_path)
    qids = collection.topics["qid"].tolist()
    frame = answers(*[(f"a-{q}", q, "see a doctor") for q in qids])
    items = build_items(collection, frame)
    # 104 questions, every one with reference answers: 167 in all (54 questions have one,
    # 40 two, 8 three, one four, one five)
    assert len(items) == 104
    assert (items["reference_kind"] == REFERENCE).all()
    assert items["references"].map(len).sum() == 167
    assert items["references"].map(len).value_counts().sort_index().to_dict() == {
        1: 54,
        2: 40,
        3: 8,
        4: 1,
        5: 1,
    }
    # contexts: the 2,311 judged (question, answer) pairs; TQ83 has no judgments
    assert items["contexts"].map(len).sum() == 2_311
    assert items.set_index("qid").loc["TQ83", "contexts"] == ()
    # pseudo-references instead: 96 questions have a judged answer above 1-Incorrect
    # (46 best Excellent, 32 Incomplete, 18 Related; 7 only Incorrect, TQ83 none)
    pseudo = build_items(collection, frame, references="pseudo")
    assert (pseudo["reference_kind"] == PSEUDO_REFERENCE).sum() == 96
    assert pseudo["references"].map(len).sum() == 196
    # BLEU of every question's first reference against all its references (itself among
    # them) is 100; of the generic answer against them, far from it
    first = frame.assign(text=[refs[0] for refs in items["references"]])
    scored = evaluate(build_items(collection, first), "bleu")
    assert np.allclose(scored["bleu"], 100.0)
    assert evaluate(items, "bleu")["bleu"].max() < 10


# -- runner -------------------------------------------------------------------------------------
def test_cache_serves_a_second_run_and_re_evaluates_an_edited_answer(tiny, tmp_path):
    items = build_items(tiny, ANSWERS)
    cache = EvaluationCache(tmp_path / "evaluations.sqlite")
    first = CountingRouge()
    result = evaluate(items, [first], cache)
    # a4 (no references) and a5 are evaluated too: their NaN is the evaluator's answer
    assert result.attrs["evaluators"]["rouge"] == {
        "items": 5,
        "computed": 5,
        "from_cache": 0,
        "items_with_missing_scores": 2,
    }
    assert result["rouge.1"].iloc[0] == pytest.approx(1.0)  # a1 equals q1's first reference

    second = CountingRouge()
    again = evaluate(items, [second], cache)
    assert second.batches == []
    assert again.attrs["evaluators"]["rouge"]["computed"] == 0
    assert again.attrs["evaluators"]["rouge"]["from_cache"] == 5
    pd.testing.assert_frame_equal(again, result)

    edited = ANSWERS.copy()
    edited.loc[1, "text"] = "vitamin c prevents colds"
    third = CountingRouge()
    changed = evaluate(build_items(tiny, edited), [third], cache)
    assert third.batches == [["vitamin c prevents colds"]]
    assert changed.attrs["evaluators"]["rouge"]["from_cache"] == 4
    assert changed["rouge.1"].iloc[1] != result["rouge.1"].iloc[1]


def test_a_duplicate_item_is_evaluated_once(tiny):
    # a2 and a6 are the same answer to the same question (same content, other id)
    frame = pd.concat([ANSWERS, answers(("a6", "q1", "vitamin c cures colds"))])
    rouge = CountingRouge()
    result = evaluate(build_items(tiny, frame), [rouge])
    assert sum(len(b) for b in rouge.batches) == 5
    assert result.attrs["evaluators"]["rouge"]["computed"] == 5
    assert result.loc[5, "rouge.1"] == result.loc[1, "rouge.1"]
    assert result["answer_id"].tolist() == ["a1", "a2", "a3", "a4", "a5", "a6"]


def test_columns_labels_and_clashing_columns(tiny):
    result = evaluate(build_items(tiny, ANSWERS), "bleu,rouge,rouge:label=raw,use_stemmer=false")
    assert list(result.columns) == [
        "answer_id", "llm", "prompt", "qid", "sample", "reference_kind",
        "bleu", "rouge.1", "rouge.2", "rouge.L", "raw.rouge.1", "raw.rouge.2", "raw.rouge.L",
    ]  # fmt: skip
    assert result["reference_kind"].tolist() == [REFERENCE, REFERENCE, PSEUDO_REFERENCE, "", ""]
    assert result["bleu"].isna().tolist() == [False, False, False, True, True]
    with pytest.raises(ConfigError, match=r"both write column 'rouge\.1'"):
        make_evaluators("rouge,rouge:use_stemmer=false")
    with pytest.raises(ConfigError, match="unknown evaluator"):
        make_evaluators("bleu,meteor")


def test_a_killed_run_resumes_with_only_the_rest(tiny, tmp_path):
    items = build_items(tiny, ANSWERS)
    cache = EvaluationCache(tmp_path / "evaluations.sqlite")
    killed = KilledRouge({"batch": 2})
    with pytest.raises(Killed):
        evaluate(items, [killed], cache)
    assert killed.batches == [[ANSWERS["text"][0], ANSWERS["text"][1]]]  # stored before the kill
    assert cache.count() == 2
    resumed = CountingRouge({"batch": 2})
    result = evaluate(items, [resumed], cache)
    assert resumed.batches == [list(ANSWERS["text"][2:4]), [ANSWERS["text"][4]]]
    counts = result.attrs["evaluators"]["rouge:batch=2"]
    assert counts["computed"] == 3 and counts["from_cache"] == 2
    pd.testing.assert_frame_equal(result, evaluate(items, [Rouge()]), check_like=True)


# -- the NRP evaluator --------------------------------------------------------------------------
def test_nrp_evaluator_equals_score_answers(tiny):
    result = evaluate_answers(tiny, ANSWERS, "nrp:rankers=tfidf,label=n", cache=False)
    direct = score_answers(tiny, ANSWERS, "tfidf", cache=False)
    expected = direct.pivot(index="answer_id", columns="dimension", values="nrp")
    assert [c for c in result.columns if c.startswith("n.")] == [
        "n.nrp.relevance",
        "n.nrp.readability",
        "n.nrp.weighted",
    ]
    for dimension in ("relevance", "readability", "weighted"):
        got = result.set_index("answer_id")[f"n.nrp.{dimension}"]
        np.testing.assert_allclose(got.loc[["a1", "a2", "a3", "a4"]], expected[dimension].loc[
            ["a1", "a2", "a3", "a4"]])  # fmt: skip
    # a5's query has no judged documents: it cannot be ranked, NaN
    assert (
        result.set_index("answer_id").loc["a5", ["n.nrp.relevance", "n.nrp.weighted"]].isna().all()
    )
    assert result.attrs["evaluators"]["nrp:label=n,rankers=tfidf"]["items_with_missing_scores"] == 1


def test_nrp_evaluator_per_dimension_rankers_and_weights(tiny):
    spec = (
        "nrp:rankers=relevance=tfidf;readability=bm25:stats=collection+k1=1.2,"
        "weights=relevance=3;readability=1"
    )
    evaluator = make_evaluator(spec)
    # known before a collection is bound: the dimensions named in rankers
    assert evaluator.score_columns() == ["nrp.relevance", "nrp.readability", "nrp.weighted"]
    result = evaluate_answers(tiny, ANSWERS.iloc[:4], [evaluator], cache=False)
    rankers = {"relevance": "tfidf", "readability": "bm25:stats=collection,k1=1.2"}
    direct = score_answers(
        tiny, ANSWERS.iloc[:4], rankers, weights={"relevance": 3, "readability": 1}, cache=False
    )
    weighted = direct[direct["dimension"] == "weighted"]["nrp"].to_numpy()
    np.testing.assert_allclose(result["nrp.weighted"], weighted)
    relevance = result["nrp.relevance"].to_numpy()
    readability = result["nrp.readability"].to_numpy()
    np.testing.assert_allclose(result["nrp.weighted"], 0.75 * relevance + 0.25 * readability)


def test_nrp_evaluator_options_and_errors(tiny):
    assert parse_rankers("validation") == "validation"
    assert parse_rankers("bm25:stats=collection+k1=1.2") == "bm25:stats=collection,k1=1.2"
    assert parse_rankers("relevance=tfidf;readability=dph") == {
        "relevance": "tfidf",
        "readability": "dph",
    }
    assert parse_rankers("runs/validation.json") == "runs/validation.json"  # a validation path
    # a ranker whose last parameter ends in .json is a ranker spec, not a validation path
    spec = "guard:ranker=tfidf+model=/tmp/guard.json"
    assert parse_rankers(spec) == "guard:ranker=tfidf,model=/tmp/guard.json"
    assert parse_weights("") is None
    assert parse_weights("relevance=2;readability=1") == {"relevance": 2.0, "readability": 1.0}
    with pytest.raises(ConfigError, match="DIM=NUMBER"):
        parse_weights("relevance=high")
    with pytest.raises(ConfigError, match="not DIM=SPEC"):
        parse_rankers("relevance=tfidf;dph")
    unbound = NrpEvaluator({"rankers": "tfidf"})
    assert unbound.score_columns() == ["nrp.weighted"]
    with pytest.raises(NrpError, match="needs the collection"):
        unbound.evaluate(build_items(tiny, ANSWERS))
    with pytest.raises(ConfigError, match=r"validation\.json"):
        evaluate_answers(tiny, ANSWERS, "nrp", cache=False)  # nothing validated yet
    with pytest.raises(ConfigError, match="no dimension"):
        evaluate_answers(tiny, ANSWERS, "nrp:rankers=clarity=tfidf", cache=False)
    assert make_evaluator("nrp").cacheable is False


def test_nrp_evaluator_takes_a_ranker_spec_ending_in_json(tiny, tmp_path):
    model = tmp_path / "guard.json"
    model.write_bytes(PACKAGED_MODEL.read_bytes())
    evaluator = NrpEvaluator({"rankers": f"guard:ranker=tfidf+model={model}"})
    evaluator.bind_collection(tiny)
    assert evaluator.dimensions() == list(tiny.dimensions)  # one spec for every dimension
    built = evaluator._resolved_rankers()
    assert {type(r) for r in built.values()} == {GuardRanker}
    assert {r.params["model"] for r in built.values()} == {str(model)}
    missing = tmp_path / "runs" / "validation.json"
    with pytest.raises(ConfigError, match=f"no validation JSON at {missing}"):
        NrpEvaluator({"rankers": str(missing)}).bind_collection(tiny)


@pytest.mark.parametrize(
    "spec", ["bleu", "rouge", "bertscore", "heuristics", "judge:mode=rubric", "judge:mode=tfn"]
)
def test_score_columns_follow_one_naming_scheme(spec):
    """Every score column is EVALUATOR.MEASURE, or the evaluator's name for a one-measure
    evaluator (nrp.relevance, rouge.L, bertscore.f1, judge.confidence, heuristics.afas, bleu)."""
    evaluator = make_evaluator(spec)
    columns = evaluator.score_columns()
    assert columns
    for column in columns:
        assert column == evaluator.name or column.startswith(f"{evaluator.name}."), column
