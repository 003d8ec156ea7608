"""The example of docs/pyterrier.md runs end to end on the demo collection, and its three tables
agree with nrp's own numbers: pt.Experiment's nDCG@10 of nrp rankers over D_q is validation's,
the doc_score ranker is validated like a built-in one, and NRP as a measure of two answer
pipelines is the mean over queries of what ``nrp.score`` gives the same answers.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

import nrp

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "pyterrier_nrp.py"


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("nrp_docs_pyterrier_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    indexes = tmp_path_factory.mktemp("indexes")
    return module.main(str(indexes)), nrp.Collection.load("demo", indexes)


def test_ndcg_in_pt_experiment_is_validations(found):
    (tables, _demo) = found
    ndcg = tables["ndcg"].set_index("name")["nDCG@10"]
    summary = tables["validation"].dimensions["relevance"].summary
    for spec in ("tfidf", "bm25"):
        assert ndcg[spec] == pytest.approx(summary[spec]["nDCG@10"].mean, abs=1e-12)


def test_a_rank_cutoff_keeps_the_best_document_of_each_query(found):
    tables, demo = found
    candidates = demo.candidates()
    for spec, top in tables["top"].items():
        ranked = nrp.make_ranker(spec).transform(candidates)
        best = ranked.loc[ranked.groupby("qid", sort=False)["score"].idxmax()]
        assert top["rank"].tolist() == [0] * candidates["qid"].nunique()
        assert top.set_index("qid")["docno"].to_dict() == best.set_index("qid")["docno"].to_dict()
    # on the demo, tfidf and bm25 put the same document first on every query (d1: d1-11,
    # 11th of its 15 in the order given), so the NRP of their top documents agrees below
    tfidf, bm25 = (tables["top"][s].set_index("qid")["docno"] for s in ("tfidf", "bm25"))
    assert tfidf.to_dict() == bm25.to_dict() and tfidf["d1"] == "d1-11"


def test_the_transformer_ranker_is_validated_beside_the_built_in_ones(found):
    tables, demo = found
    validation = tables["validation"]
    names = [s.name for s in validation.systems]
    assert names == ["overlap", "tfidf", "bm25", "guard", "random"]  # its name; the control
    assert validation.systems[0].spec == "pyterrier:key=overlap-v1"  # what finds it again
    assert validation.systems[0].computed == 120  # every document of D_q once
    assert set(validation.chosen()) == {"relevance", "readability"}
    saved = (demo.path / nrp.VALIDATION_FILE).read_text(encoding="utf-8")
    assert saved == validation.to_json()  # save=True wrote what nrp score reads


def test_nrp_measures_equal_the_mean_of_nrp_score(found):
    tables, demo = found
    table = tables["nrp"].set_index("name")
    answers = {
        "copy-best": tables["best"],
        "off-topic": pd.Series("Opening hours: 9 to 5.", index=tables["best"].index),
    }
    for name, texts in answers.items():
        frame = pd.DataFrame({"answer_id": texts.index, "qid": texts.index, "text": texts})
        scored = nrp.score(demo, frame.reset_index(drop=True), demo.path / "validation.json")
        means = scored.groupby("dimension")["nrp"].mean()
        for dimension in ("relevance", "readability", "weighted"):
            assert table.loc[name, f"nrp.{dimension}"] == pytest.approx(means[dimension])
    assert (table.loc["copy-best"] > table.loc["off-topic"]).all()
    # the top document as the answer: the same documents for tfidf and bm25 (above)
    assert table.loc["tfidf-top"].tolist() == table.loc["bm25-top"].tolist()
    assert (table.loc["tfidf-top"] > table.loc["off-topic"]).all()
