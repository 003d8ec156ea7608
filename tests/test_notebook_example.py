"""docs/examples/notebook.py, the notebook-style walk-through, runs end to end: MEDIQA 2019 from
../shared ingested and validated with the default rankers, the demo answers scored with the
rankers validation chose, and pyterrier_t5's MonoT5ReRanker (a tiny random T5 built here)
validated and used for NRP. Its tables hold the library's own figures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

import nrp

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "notebook.py"


@pytest.fixture(scope="module")
def tables(tmp_path_factory, shared_data, mediqa_validated):
    """The notebook's tables, run on a copy of the test run's MEDIQA validation (built by the
    same calls as the notebook's): its ingest finds the collection built, its validation
    serves every score and calibration from what is kept beside it."""
    mediqa = shared_data("mediqa-2019")
    pytest.importorskip("pyterrier_t5")
    pytest.importorskip("sentencepiece")
    sys.path.insert(0, str(ROOT / "tests" / "rankers"))
    from tiny_models import build_tiny_t5, build_tiny_t5_tokenizer

    root = tmp_path_factory.mktemp("notebook-example")
    model = build_tiny_t5(root / "mono", build_tiny_t5_tokenizer(root / "tok"), seed=0)
    spec = importlib.util.spec_from_file_location("nrp_docs_notebook_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    indexes = mediqa_validated(root / "indexes")
    return module.main(str(indexes), mediqa, str(model)), indexes


def test_mediqa_is_ingested_and_validated_with_the_default_rankers(tables):
    found, indexes = tables
    collection = nrp.Collection.load("mediqa-2019", indexes)
    assert len(collection.topics) == 150 and len(collection.candidates()) == 1107
    validation = found["mediqa_validation"]
    assert validation["name"].tolist() == [
        "tfidf", "dph", "bm25", "dense", "guard", "guard:content=0.06", "random"
    ]  # fmt: skip
    saved = nrp.ValidationResult.from_json(indexes / "mediqa-2019" / "validation.json")
    summary = saved.dimensions["relevance"].summary
    for row in validation.itertuples():
        assert row.mean == summary[row.name]["nDCG@10"].mean
    chosen = found["mediqa_chosen"]
    assert dict(zip(chosen["dimension"], chosen["ranker"], strict=True)) == saved.chosen()
    # the rankers an echo of the question tops are passed over: a guarded one is chosen
    assert saved.chosen()["relevance"].startswith("guard")
    assert not saved.dimensions["relevance"].validity["dense"].passed


def test_demo_answers_are_scored_with_the_chosen_rankers(tables):
    found, indexes = tables
    means = found["demo_mean_nrp"]
    demo = nrp.Collection.load("demo", indexes)
    answers = pd.read_json(
        ROOT / "nrp" / "data" / "demo" / "answers.jsonl", lines=True, dtype={"qid": str}
    )
    chosen = found["demo_validation"]
    chosen = chosen[chosen["chosen"] & (chosen["measure"] == "nDCG@10")]
    again = nrp.score_answers(
        demo, answers, dict(zip(chosen["dimension"], chosen["name"], strict=True))
    )
    weighted = again[again["dimension"] == "weighted"].groupby(["llm", "prompt"])["nrp"].mean()
    for row in means.itertuples():
        assert row.nrp == pytest.approx(weighted[(row.llm, row.prompt)], abs=1e-12)
    assert len(means) == answers[["llm", "prompt"]].drop_duplicates().shape[0]


def test_a_pyterrier_t5_reranker_is_validated_and_used_for_nrp(tables):
    found, _ = tables
    validation = found["monot5_validation"]
    ndcg = validation[validation["measure"] == "nDCG@10"]
    # the adapter, tfidf, and the random control validation adds
    assert len(ndcg) == 3 and ndcg["name"].iloc[1] == "tfidf"
    assert ndcg["name"].iloc[2] == "random"
    assert ndcg["name"].iloc[0].startswith("pyterrier:key=monot5-")  # the adapter's spec
    nrp_means = found["monot5_nrp"]
    assert nrp_means["nrp"].between(0, 1).all() and len(nrp_means) >= 2
