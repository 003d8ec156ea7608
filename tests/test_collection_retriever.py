"""A collection's D_q as a PyTerrier retriever and its qrels restricted to D_q: the pair that
gives ``pt.Experiment`` the nDCG@10 validation reports (the embedded demo collection: 8 topics,
15 documents with text each, two judged documents without text)."""

from __future__ import annotations

from importlib import resources

import ir_measures
import pyterrier as pt
import pytest

import nrp
from nrp import Collection, ingest
from nrp.errors import NrpError


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Collection:
    indexes = tmp_path_factory.mktemp("indexes")
    ingest(resources.files("nrp") / "data" / "demo" / "manifest.yaml", indexes_dir=indexes)
    return Collection.load("demo", indexes)


def test_the_qrels_of_d_q_leave_out_judged_documents_without_text(demo):
    every = demo.qrels("relevance")
    in_dq = demo.qrels("relevance", scope="candidates")
    assert (len(every), len(in_dq)) == (122, 120)
    left_out = set(zip(every["qid"], every["docno"], strict=True)) - set(
        zip(in_dq["qid"], in_dq["docno"], strict=True)
    )
    assert left_out == {("d8", "d8-16"), ("d8", "d8-17")}  # judged, no text
    kept = every.merge(in_dq[["qid", "docno"]], on=["qid", "docno"]).reset_index(drop=True)
    assert in_dq.equals(kept)  # the official qrels' order and labels
    raw = demo.qrels("readability", labels="raw", scope="candidates")
    assert len(raw) == 120 and list(raw.columns) == ["qid", "docno", "label"]
    with pytest.raises(NrpError, match="scope must be 'all' or 'candidates', not 'dq'"):
        demo.qrels("relevance", scope="dq")


def test_the_retriever_gives_each_query_its_d_q(demo):
    found = demo.retriever()(demo.topics)
    candidates = demo.candidates()
    assert (
        found[["qid", "docno", "text"]]
        .reset_index(drop=True)
        .equals(candidates[["qid", "docno", "text"]])
    )
    assert (found["score"] == 0.0).all()
    assert found.groupby("qid", sort=False)["rank"].apply(list).tolist() == [list(range(15))] * 8
    one = demo.retriever()(demo.topics.iloc[[2]])
    assert one["qid"].unique().tolist() == [demo.topics["qid"].iloc[2]] and len(one) == 15


def test_retriever_then_ranker_with_the_qrels_of_d_q_is_validations_ndcg(demo):
    qrels = demo.qrels("relevance", scope="candidates")
    table = pt.Experiment(
        [demo.retriever() >> nrp.make_ranker(s) for s in ("tfidf", "bm25")], demo.topics, qrels,
        [ir_measures.nDCG @ 10], names=["tfidf", "bm25"], verbose=False,
    ).set_index("name")  # fmt: skip
    summary = nrp.validate(demo, ["tfidf", "bm25"], validity=False, cache=False)
    for spec in ("tfidf", "bm25"):
        expected = summary.dimensions["relevance"].summary[spec]["nDCG@10"].mean
        assert table.loc[spec, "nDCG@10"] == pytest.approx(expected, abs=1e-12)
    official = pt.Experiment(
        [demo.retriever() >> nrp.make_ranker("bm25")], demo.topics, demo.qrels("relevance"),
        [ir_measures.nDCG @ 10], verbose=False,
    )["nDCG@10"].iloc[0]  # fmt: skip
    # judged documents without text count in the official qrels' ideal ranking
    assert official < table.loc["bm25", "nDCG@10"]
