"""``fuse``: min-max and reciprocal rank fusion of two toy rankers with fixed scores, worked out by
hand; the spec syntax (``+`` between rankers, ``;`` inside one); D_q's frozen statistics, so that
an answer is pointwise and NRP's fast mode equals a full re-ranking; weights fitted on training
folds only (changing the judgments of a fold's own queries never changes its weights); fusion in
validation and in ``score_answers``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from nrp import Collection, ingest
from nrp.collection.folds import assign_folds
from nrp.components import component_spec
from nrp.errors import ConfigError
from nrp.positioning.injection import FULL_TRANSFORM, POINTWISE, injection_mode
from nrp.positioning.scoring import score_answers
from nrp.rankers.base import Ranker
from nrp.rankers.fusion import FusionRanker, judged_rows, judged_texts
from nrp.rankers.fusion_weights import weight_grid
from nrp.rankers.registry import RankerInfo, all_rankers, make_ranker, register, unregister
from nrp.spec import split_specs
from nrp.validation import validate

# q1: four documents; q2: three. Each toy ranker gives a fixed score per text.
DOCS = {"d1": "alpha", "d2": "beta", "d3": "gamma", "d4": "delta", "e1": "eps", "e2": "zeta"}
DOCS |= {"e3": "eta"}
TOY_A = {"alpha": 4.0, "beta": 3.0, "gamma": 2.0, "delta": 0.0, "eps": 1.0, "zeta": 2.0}
TOY_A |= {"eta": 3.0, "high": 5.0, "low": -4.0}
TOY_B = {"alpha": 1.0, "beta": 5.0, "gamma": 3.0, "delta": 1.0, "eps": 10.0, "zeta": 10.0}
TOY_B |= {"eta": 0.0, "high": 2.0, "low": 1.0}
MANIFEST = """\
name: fusion
data_root: .
dimensions:
  relevance:
    grades: {0: not relevant, 1: partly relevant, 2: relevant}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: docs.tsv, holds: documents}
  - {format: trec-qrels, path: rel.qrels, dimension: relevance}
"""


class ToyA(Ranker):
    name: ClassVar[str] = "toy_a"
    table: ClassVar[dict[str, float]] = TOY_A
    rows_scored: ClassVar[list[int]] = []  # rows of every score_frame call, both toys

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        self.rows_scored.append(len(frame))
        return np.array([self.table[t] for t in frame["text"]], dtype=float)


class ToyB(ToyA):
    name: ClassVar[str] = "toy_b"
    table: ClassVar[dict[str, float]] = TOY_B


@pytest.fixture(scope="module", autouse=True)
def toy_rankers() -> Iterator[None]:
    all_rankers()  # the built-ins first
    for cls in (ToyA, ToyB):
        register(RankerInfo(cls.name, "fixed scores", "python", lambda p, c=cls: c(p)))
    yield
    for cls in (ToyA, ToyB):
        unregister(cls.name)


def build(folder: Path, qrels: str, topics: list[str] | None = None) -> Collection:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.yaml").write_text(MANIFEST)
    qids = topics or ["q1", "q2"]
    (folder / "topics.tsv").write_text(
        "qid\tquery\n" + "".join(f"{q}\tquestion {q}\n" for q in qids)
    )
    (folder / "docs.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t}\n" for d, t in DOCS.items())
    )
    (folder / "rel.qrels").write_text(qrels)
    ingest(folder / "manifest.yaml", indexes_dir=folder / "indexes")
    return Collection.load("fusion", folder / "indexes")


# d2 is the relevant document of q1, e3 of q2
QRELS = "q1 0 d1 0\nq1 0 d2 2\nq1 0 d3 1\nq1 0 d4 0\nq2 0 e1 0\nq2 0 e2 0\nq2 0 e3 2\n"


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    return build(tmp_path_factory.mktemp("fusion"), QRELS)


def scores_of(spec: str, collection: Collection) -> dict[str, float]:
    ranker = make_ranker(spec)
    ranker.bind_collection(collection)
    ranked = ranker.transform(collection.candidates())
    return dict(zip(ranked["docno"], ranked["score"], strict=True))


# -- hand-computed scores ------------------------------------------------------------------------
def test_min_max_fusion_by_hand(toy):
    # q1: toy_a 4 3 2 0 -> (s - 0) / 4 = 1, .75, .5, 0; toy_b 1 5 3 1 -> (s - 1) / 4 = 0, 1, .5, 0
    # q2: toy_a 1 2 3 -> 0, .5, 1; toy_b 10 10 0 -> 1, 1, 0
    equal = scores_of("fuse:rankers=toy_a+toy_b", toy)
    assert equal == {"d1": 0.5, "d2": 0.875, "d3": 0.5, "d4": 0.0, "e1": 0.5, "e2": 0.75, "e3": 0.5}
    weighted = scores_of("fuse:rankers=toy_a+toy_b,weights=0.3+0.7", toy)
    expected = {"d1": 0.3, "d2": 0.3 * 0.75 + 0.7, "d3": 0.5, "d4": 0.0, "e1": 0.7}
    expected |= {"e2": 0.3 * 0.5 + 0.7, "e3": 0.3}
    assert weighted == pytest.approx(expected, abs=1e-15)


def test_reciprocal_rank_fusion_by_hand(toy):
    # q1: toy_a ranks d1..d4 1 2 3 4; toy_b ranks d2 1, d3 2, and d1, d4 tied at 3 (1 + the
    # number scored higher); q2: toy_a e3 1, e2 2, e1 3; toy_b e1, e2 tied at 1, e3 3
    ranks = {"d1": (1, 3), "d2": (2, 1), "d3": (3, 2), "d4": (4, 3), "e1": (3, 1)}
    ranks |= {"e2": (2, 1), "e3": (1, 3)}
    for k in (60, 1):
        fused = scores_of(f"fuse:rankers=toy_a+toy_b,method=rrf,k={k}", toy)
        expected = {d: 0.5 / (k + a) + 0.5 / (k + b) for d, (a, b) in ranks.items()}
        assert fused == pytest.approx(expected, abs=1e-15)


def test_an_answer_is_normalised_with_d_q_statistics_not_clipped(toy):
    ranker = make_ranker("fuse:rankers=toy_a+toy_b")
    ranker.bind_collection(toy)
    answers = pd.DataFrame(
        {"qid": ["q1", "q1"], "query": ["x", "x"], "docno": ["a1", "a2"], "text": ["high", "low"]}
    )
    # alone (fast mode): toy_a 5 -> 5/4, toy_b 2 -> 1/4; toy_a -4 -> -1, toy_b 1 -> 0
    np.testing.assert_array_equal(ranker.score_frame(answers), [0.75, -0.5])
    # with D_q (a full re-ranking): the answers join neither min nor max, D_q keeps its scores
    both = pd.concat([toy.candidates("q1"), answers], ignore_index=True)
    np.testing.assert_array_equal(ranker.score_frame(both), [0.5, 0.875, 0.5, 0.0, 0.75, -0.5])
    # unbound, a fusion normalises over the rows it is given: "low" is the new minimum
    unbound = make_ranker("fuse:rankers=toy_a+toy_b").score_frame(both)
    np.testing.assert_allclose(
        unbound[:4], [0.5 * 8 / 9 + 0, 0.5 * 7 / 9 + 0.5, 0.5 * 6 / 9 + 0.25, 4 / 18]
    )


def test_a_text_of_its_own_under_a_judged_docno_is_scored_and_never_cached(toy):
    """The score cache holds D_q's scores by (qid, docno): a row that carries a judged
    document's docno with another text is no judged document. It is scored as its own text,
    neither read from the cache nor stored there."""
    assert scores_of("fuse:rankers=toy_a+toy_b", toy)["d1"] == 0.5  # alpha: the cache filled
    ranker = make_ranker("fuse:rankers=toy_a+toy_b")
    ranker.bind_collection(toy)
    mimic = pd.DataFrame({"qid": ["q1"], "query": ["x"], "docno": ["d1"], "text": ["high"]})
    np.testing.assert_array_equal(ranker.score_frame(mimic), [0.75])  # high's, as above
    assert scores_of("fuse:rankers=toy_a+toy_b", toy)["d1"] == 0.5  # and not stored as d1's
    judged = judged_texts(toy.candidates())
    both = pd.concat([toy.candidates("q1"), mimic], ignore_index=True)
    assert judged_rows(both, judged).tolist() == [True, True, True, True, False]


# -- spec, identity ------------------------------------------------------------------------------
def test_spec_syntax_and_identity():
    ranker = make_ranker(
        "fuse:rankers=bm25:k1=0.9+dense:query=paraphrase;passages=128,method=rrf,k=10"
    )
    assert [r.spec() for r in ranker.rankers] == [
        "bm25:k1=0.9",
        "dense:passages=128,query=paraphrase",
    ]
    assert (
        ranker.spec()
        == "fuse:k=10,method=rrf,rankers=bm25:k1=0.9+dense:passages=128;query=paraphrase"
    )
    assert make_ranker(ranker.spec()).fingerprint() == ranker.fingerprint()
    shipped = component_spec(ranker, all_rankers(), make_ranker)
    assert shipped is not None and make_ranker(shipped).fingerprint() == ranker.fingerprint()
    # a list of specs keeps the fusion whole; a sub-ranker's batch does not change the scores
    assert split_specs("tfidf,fuse:rankers=bm25+dense,method=rrf,dense") == [
        "tfidf",
        "fuse:rankers=bm25+dense,method=rrf",
        "dense",
    ]
    plain = make_ranker("fuse:rankers=bm25+dense")
    assert make_ranker("fuse:rankers=bm25+dense;batch=8").fingerprint() == plain.fingerprint()
    assert make_ranker("fuse:rankers=dense+bm25").fingerprint() != plain.fingerprint()
    assert (
        make_ranker("fuse:rankers=bm25+dense,weights=0.5+0.5").fingerprint() != plain.fingerprint()
    )
    assert weight_grid(2) == [(i / 10, (10 - i) / 10) for i in range(11)]
    assert len(weight_grid(3)) == 66 and all(abs(sum(w) - 1) < 1e-12 for w in weight_grid(3))


def test_injection_is_pointwise_unless_a_ranker_depends_on_the_set(toy):
    assert injection_mode(make_ranker("fuse:rankers=toy_a+toy_b")) == POINTWISE
    assert injection_mode(make_ranker("fuse:rankers=toy_a+random")) == POINTWISE
    assert injection_mode(make_ranker("fuse:rankers=toy_a+bm25")) == FULL_TRANSFORM
    assert make_ranker("fuse:rankers=toy_a+bm25").depends_on_candidate_set


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fuse:rankers=bm25", "must name at least two rankers joined by +"),
        ("fuse", "must name at least two rankers joined by +"),
        ("fuse:rankers=bm25++dense", "must name at least two rankers joined by +"),
        ("fuse:rankers=bm25+fuse", "must name at least two rankers"),  # the inner one
        ("fuse:rankers=bm25+nope", "unknown ranker 'nope'"),
        ("fuse:rankers=bm25+dense,weights=1", "must be 2 non-negative numbers joined by +"),
        ("fuse:rankers=bm25+dense,weights=1+-1", "must be 2 non-negative numbers"),
        ("fuse:rankers=bm25+dense,weights=0+0", "not all 0"),
        ("fuse:rankers=bm25+dense,weights=a+b", "are not numbers joined by +"),
        ("fuse:rankers=bm25+dense,folds=3", "folds applies with weights=fit only"),
        ("fuse:rankers=bm25+dense,k=-1", r"k='-1' is out of range \(k must be >= 0\)"),
    ],
)
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(ConfigError, match=message) as caught:
        make_ranker(spec)
    assert "\n" not in str(caught.value)


def test_a_fuse_inside_a_fuse_is_refused():
    inner = make_ranker("fuse:rankers=bm25+dense")
    with pytest.raises(ConfigError, match="a fuse inside a fuse"):
        FusionRanker(rankers=[inner, make_ranker("bm25")])


def test_sub_rankers_read_their_own_query_field(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "manifest.yaml").write_text(MANIFEST)
    (folder / "topics.tsv").write_text("qid\tquery\tnarrative\nq1\tapple\tbanana\n")
    (folder / "docs.tsv").write_text(
        "docno\ttext\nd1\tapple pie\nd2\tbanana bread\nd3\tapple banana\n"
    )
    (folder / "rel.qrels").write_text("q1 0 d1 0\nq1 0 d2 2\nq1 0 d3 1\n")
    ingest(folder / "manifest.yaml", indexes_dir=tmp_path / "indexes")
    collection = Collection.load("fusion", tmp_path / "indexes")
    by_query = scores_of("tfidf", collection)
    by_narrative = scores_of("tfidf:query=narrative", collection)
    fused = scores_of("fuse:rankers=tfidf+tfidf:query=narrative", collection)

    def minmax(scores: dict[str, float]) -> dict[str, float]:
        low, high = min(scores.values()), max(scores.values())
        return {d: (s - low) / (high - low) for d, s in scores.items()}

    expected = {d: 0.5 * minmax(by_query)[d] + 0.5 * minmax(by_narrative)[d] for d in fused}
    assert fused == pytest.approx(expected, abs=1e-12)
    assert by_query["d2"] == 0 < by_narrative["d2"]


# -- validation and NRP --------------------------------------------------------------------------
def test_fusion_is_validated_like_any_ranker(toy):
    result = validate(
        toy,
        "toy_a,toy_b,fuse:rankers=toy_a+toy_b,fuse:rankers=toy_a+toy_b,method=rrf",
        cache=False,
        validity=False,
    )
    ndcg = {
        name: values["nDCG@10"] for name, values in result.dimensions["relevance"].per_query.items()
    }
    # q1 minmax: d2 .875, then d3 and d1 tied at .5 (docno descending: d3 first), d4 -> ideal
    assert ndcg["fuse:rankers=toy_a+toy_b"]["q1"] == 1.0
    # q2 minmax: e2 .75, then e3 and e1 tied at .5 (e3 first): the relevant e3 at rank 2
    ideal = 2.0
    assert ndcg["fuse:rankers=toy_a+toy_b"]["q2"] == pytest.approx((2 / np.log2(3)) / ideal)
    assert ndcg["toy_b"]["q2"] == pytest.approx((2 / np.log2(4)) / ideal)  # e3 last


def test_fusing_validated_rankers_scores_no_document_again(tmp_path):
    collection = build(tmp_path / "c", QRELS)
    validate(collection, "toy_a,toy_b", validity=False)  # the score cache beside the collection
    ToyA.rows_scored.clear()
    result = validate(
        collection,
        "fuse:rankers=toy_a+toy_b,fuse:rankers=toy_a+toy_b,method=rrf",
        validity=False,
    )
    assert ToyA.rows_scored == []  # D_q's sub-scores come from the cache
    assert (
        result.dimensions["relevance"].per_query["fuse:rankers=toy_a+toy_b"]["nDCG@10"]["q1"] == 1
    )


def answers_for(collection: Collection) -> pd.DataFrame:
    texts = ["high", "low", "beta", "eta"]  # a copy of d2 (q1) and of e3 (q2) tie with them
    rows = [(f"{q}/{t}", q, t) for q in ("q1", "q2") for t in texts]
    frame = pd.DataFrame(rows, columns=["answer_id", "qid", "text"])
    return frame.assign(llm="m", prompt="p", sample=0)


@pytest.mark.parametrize(
    "spec",
    [
        "fuse:rankers=toy_a+toy_b",
        "fuse:rankers=toy_a+toy_b,method=rrf",
        "fuse:rankers=toy_a+toy_b,weights=0.9+0.1,method=rrf,k=1",
        "fuse:rankers=toy_a+random",
    ],
)
def test_nrp_fast_mode_equals_a_full_re_ranking(toy, tmp_path, spec):
    answers = answers_for(toy)
    fast = score_answers(toy, answers, spec, cache=False)
    full = score_answers(toy, answers, spec, cache=False, full_rerank=True)
    assert fast.attrs["injection"][make_ranker(spec).spec()].split(": ")[1] == POINTWISE
    for column in ("answer_id", "score", "rank", "ties", "nrp", "n_docs"):
        pd.testing.assert_series_equal(fast[column], full[column], check_dtype=False)
    # one scoring per answer: D_q's statistics come from D_q, not from re-ranking it per answer
    assert fast.attrs["counts"]["answers_scored"] == len(answers)


def test_nrp_positions_by_hand(toy):
    out = score_answers(toy, answers_for(toy), "fuse:rankers=toy_a+toy_b,method=rrf", cache=False)
    out = out[out["dimension"] == "relevance"].set_index("answer_id")
    row = out.loc["q1/high"]
    # toy_a 5 beats all of D_q (rank 1), toy_b 2 is below beta and gamma (rank 3): the RRF of
    # d1 (ranks 1 and 3), so the answer is tied with d1 and below d2 only
    assert (row["score"], row["ties"], row["rank"]) == (0.5 / 61 + 0.5 / 63, 1, 1.5)
    copy = out.loc["q1/beta"]
    assert (copy["ties"], copy["rank"]) == (1, 0.5)  # a copy of d2 ties with d2 at the top


# -- weights fitted on training folds ------------------------------------------------------------
QIDS = [f"t{i}" for i in range(9)]


def fold_collection(folder: Path, flipped: set[str] = frozenset()) -> Collection:
    """Nine queries over the same four documents: beta (toy_b's best) is relevant unless the query
    is flipped, then alpha (toy_a's best) is."""
    qrels = ""
    for qid in QIDS:
        best = "d1" if qid in flipped else "d2"
        qrels += "".join(f"{qid} 0 {d} {2 if d == best else 0}\n" for d in ("d1", "d2", "d3", "d4"))
    return build(folder, qrels, QIDS)


def test_fitted_weights_never_see_the_held_out_queries(tmp_path):
    spec = "fuse:rankers=toy_a+toy_b,weights=fit,folds=3,seed=7"
    base = make_ranker(spec)
    base.bind_collection(fold_collection(tmp_path / "base"))
    fitted = base.fitted
    assert fitted.folds == assign_folds(QIDS, 3, 7)
    held_out = {q for q, f in fitted.folds.items() if f == 0}
    # every query says beta, toy_b's best (toy_a puts it second): toy_b alone ranks perfectly,
    # and (0, 1) is the first vector of the grid
    assert list(fitted.weights) == [(0.0, 1.0)] * 3 and fitted.training == [1.0] * 3
    # now fold 0's own queries want alpha: fold 0's weights must not move, the others' may
    changed = make_ranker(spec)
    changed.bind_collection(fold_collection(tmp_path / "changed", flipped=held_out))
    assert changed.fitted.weights[0] == fitted.weights[0]
    assert changed.fitted.training[0] == fitted.training[0]
    assert changed.fitted.weights[1:] != fitted.weights[1:]  # the test can see a change
    # the queries of fold 0 are fused with fold 0's weights
    q = sorted(held_out)[0]
    assert changed.weights_for(q) == changed.fitted.weights[0]
    assert "fold 0: 0+1 (training nDCG@10 1.0000)" in changed.fitted.describe()


def test_fit_needs_a_dimension_of_the_collection(toy):
    ranker = make_ranker("fuse:rankers=toy_a+toy_b,weights=fit,folds=2,dimension=nope")
    with pytest.raises(
        ConfigError, match=r"needs dimension=NAME, one of the collection's dimensions \(relevance\)"
    ):
        ranker.bind_collection(toy)
    too_many = make_ranker("fuse:rankers=toy_a+toy_b,weights=fit,folds=3")
    with pytest.raises(ConfigError, match="2 queries cannot be split into 3 query-disjoint folds"):
        too_many.bind_collection(toy)


def test_fit_validates_and_scores(tmp_path):
    collection = fold_collection(tmp_path / "c", flipped={"t0", "t1"})
    spec = "fuse:rankers=toy_a+toy_b,weights=fit,folds=3"
    result = validate(collection, f"toy_a,{spec}", cache=False, validity=False)
    summary = result.dimensions["relevance"].summary  # random: the control validation adds
    assert set(summary) == {"toy_a", make_ranker(spec).spec(), "random"}
    answers = pd.DataFrame({"answer_id": ["a", "b"], "qid": ["t0", "t5"], "text": ["high", "low"]})
    fast = score_answers(collection, answers, spec, cache=False)
    full = score_answers(collection, answers, spec, cache=False, full_rerank=True)
    for column in ("score", "rank", "ties", "nrp"):
        pd.testing.assert_series_equal(fast[column], full[column], check_dtype=False)


def test_fitted_fusion_in_a_fresh_nrp_agreement_process(tmp_path):
    """`nrp agreement` with a fitted fusion in a new interpreter: the weight fitter is installed
    however the library was entered (it once needed nrp.validation imported first), and the
    figures equal the in-process call's."""
    import json
    import subprocess
    import sys
    from importlib import resources

    from nrp import api

    manifest = resources.files("nrp") / "data" / "demo" / "manifest.yaml"
    api.ingest(str(manifest), indexes_dir=tmp_path / "ix")
    spec = "fuse:rankers=tfidf+bm25,weights=fit,folds=2,dimension=relevance"
    out = tmp_path / "agreement"
    proc = subprocess.run(
        [sys.executable, "-m", "nrp", "agreement", "demo", "--rankers", spec,
         "--out", str(out), "--indexes", str(tmp_path / "ix")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    written = json.loads((out / "agreement.json").read_text())["summary"]
    direct = api.agreement(
        api.Collection.load("demo", tmp_path / "ix"), [spec], dimensions=["relevance"]
    ).summary
    written = [row for row in written if row["dimension"] == "relevance"]
    assert len(written) == len(direct) == 1
    assert written[0]["tau_mean"] == pytest.approx(direct["tau_mean"].iloc[0], abs=1e-12)
    assert written[0]["tau_pooled"] == pytest.approx(direct["tau_pooled"].iloc[0], abs=1e-12)


def test_fitted_fusion_through_the_api_in_a_fresh_interpreter(tmp_path):
    """`nrp.api.make_ranker` alone builds a fitted fusion that scores, in a new interpreter that
    imported nothing else of nrp (the fitter was once installed only by importing
    nrp.validation), and its NRP equals the in-process call's."""
    import json
    import subprocess
    import sys
    from importlib import resources

    from nrp import api

    demo = resources.files("nrp") / "data" / "demo"
    api.ingest(str(demo / "manifest.yaml"), indexes_dir=tmp_path / "ix")
    spec = "fuse:rankers=tfidf+bm25,weights=fit,dimension=relevance"
    code = (
        "import json, sys\n"
        "import nrp.api as api\n"
        "collection = api.Collection.load('demo', sys.argv[1])\n"
        "ranker = api.make_ranker(sys.argv[2])\n"
        "answers = api.read_answers(sys.argv[3]).answers\n"
        "frame = api.score_answers(collection, answers, {'relevance': ranker}, cache=False)\n"
        "print(json.dumps({'fitted': ranker.fitted.describe(), 'nrp': frame['nrp'].tolist()}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ix"), spec, str(demo / "answers.jsonl")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fresh = json.loads(proc.stdout.strip().splitlines()[-1])
    collection = api.Collection.load("demo", tmp_path / "ix")
    ranker = api.make_ranker(spec)
    answers = api.read_answers(str(demo / "answers.jsonl")).answers
    here = api.score_answers(collection, answers, {"relevance": ranker}, cache=False)
    assert fresh["fitted"] == ranker.fitted.describe()
    assert fresh["fitted"].startswith("fold 0: ")
    assert len(fresh["nrp"]) >= len(answers) > 0
    assert fresh["nrp"] == here["nrp"].tolist()
