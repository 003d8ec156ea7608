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


def test_the_transformer_ranker_is_validated_beside_the_built_in_ones(found):
    tables, _ = found
    validation = tables["validation"]
    names = [s.name for s in validation.systems]
    assert names == ["pyterrier:key=overlap-v1", "tfidf", "bm25", "guard", "random"]  # control
    assert validation.systems[0].computed == 120  # every document of D_q once
    assert set(validation.chosen()) == {"relevance", "readability"}


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
