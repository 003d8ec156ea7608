"""The ``cross`` ranker on tiny BERT classifiers built here: scores equal the model's own logits
(and sentence-transformers' CrossEncoder), two-label heads, cut inputs counted, batching,
passages, fingerprints, and folders written by ``nrp train``: each query scored by the fold
model that held it out."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pandas as pd
import pytest

from nrp.errors import ConfigError
from nrp.rankers.registry import all_rankers, make_ranker
from nrp.rankers.trained import TRAINING_FILE, TRAINING_FORMAT, query_hash

pytest.importorskip("transformers")
from tiny_models import build_tiny_bert_classifier

WORDS = [
    "what",
    "helps",
    "a",
    "cold",
    "rest",
    "and",
    "fluids",
    "vitamin",
    "c",
    "does",
    "not",
    "prevent",
    "colds",
    "water",
    "is",
    "wet",
]
FRAME = pd.DataFrame(
    {
        "qid": ["1", "1", "1", "2"],
        "query": ["what helps a cold"] * 3 + ["vitamin c"],
        "docno": ["a", "b", "c", "d"],
        "text": [
            "rest and fluids help a cold",
            "water is wet",
            "vitamin c does not prevent colds and rest helps",
            "vitamin c does not prevent colds",
        ],
    }
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("cross")
    return {
        "one": build_tiny_bert_classifier(root / "one", WORDS, seed=0),
        "two": build_tiny_bert_classifier(root / "two", WORDS, seed=1, num_labels=2),
        "short": build_tiny_bert_classifier(root / "short", WORDS, seed=0, max_positions=12),
        "fold0": build_tiny_bert_classifier(root / "fold0", WORDS, seed=10),
        "fold1": build_tiny_bert_classifier(root / "fold1", WORDS, seed=11),
        "all": build_tiny_bert_classifier(root / "all", WORDS, seed=12),
    }


def direct_logits(folder, frame, max_length=None):
    """The checkpoint's logits, each pair alone, straight from transformers."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    rows = []
    for query, text in zip(frame["query"], frame["text"], strict=True):
        encoded = tokenizer(
            query, text, truncation="longest_first" if max_length else False,
            max_length=max_length, return_tensors="pt",
        )  # fmt: skip
        with torch.inference_mode():
            rows.append(model(**encoded).logits[0].float().numpy())
    return np.array(rows)


def test_one_label_score_is_the_logit_and_crossencoder_agrees(models):
    ranker = make_ranker(f"cross:model={models['one']},verbose=false")
    out = ranker.transform(FRAME)
    expected = direct_logits(models["one"], FRAME)[:, 0]
    np.testing.assert_allclose(out["score"].to_numpy(), expected, rtol=1e-5, atol=1e-6)
    assert out["truncated"].tolist() == [False] * 4
    assert ranker.injection == "pointwise" and ranker.score_tolerance == 1e-5
    # sentence-transformers' CrossEncoder reads the same folder; its default activation for one
    # label is the sigmoid, which keeps the order
    st = pytest.importorskip("sentence_transformers")
    predicted = st.CrossEncoder(str(models["one"]), device="cpu").predict(
        list(zip(FRAME["query"], FRAME["text"], strict=True)), batch_size=4
    )
    np.testing.assert_allclose(predicted, 1 / (1 + np.exp(-expected)), rtol=1e-5)


def test_two_labels_score_is_log_softmax_of_the_last(models):
    out = make_ranker(f"cross:model={models['two']},verbose=false").ranked_in_order(
        FRAME
    )  # in order
    logits = direct_logits(models["two"], FRAME)
    expected = logits[:, 1] - np.log(np.exp(logits).sum(axis=1))
    np.testing.assert_allclose(out["score"].to_numpy(), expected, rtol=1e-5, atol=1e-6)
    assert (out["score"] < 0).all()


def test_batches_and_length_sorting_change_scores_by_rounding_only(models):
    one = make_ranker(f"cross:model={models['one']},batch=1,verbose=false").score_frame(FRAME)
    three = make_ranker(f"cross:model={models['one']},batch=3,verbose=false").score_frame(FRAME)
    np.testing.assert_allclose(one, three, rtol=1e-5, atol=1e-6)


def test_inputs_over_the_limit_are_cut_counted_and_reported(models, caplog):
    # 12 positions: [CLS] q [SEP] t [SEP]; a: 1+4+1+6+1 = 13, b: 10, c: 16, d: 1+2+1+6+1 = 11
    ranker = make_ranker(f"cross:model={models['short']},verbose=false")
    with caplog.at_level(logging.WARNING, logger="nrp.rankers.cross"):
        out = ranker.transform(FRAME)
    assert out["truncated"].tolist() == [True, False, True, False]
    assert "2 of 4 documents were cut at 12 input tokens" in caplog.text
    expected = direct_logits(models["short"], FRAME, max_length=12)[:, 0]
    np.testing.assert_allclose(out["score"].to_numpy(), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match="max_length=20 is above the model's limit of 12"):
        make_ranker(f"cross:model={models['short']},max_length=20").score_frame(FRAME)


def test_passages_score_a_document_by_its_best_passage(models):
    ranker = make_ranker(f"cross:model={models['one']},passages=3,stride=3,verbose=false")
    scores = ranker.score_frame(FRAME)
    # row c: "vitamin c does | not prevent colds | and rest helps"
    passages = pd.DataFrame(
        {
            "qid": "1",
            "query": "what helps a cold",
            "docno": "c",
            "text": ["vitamin c does", "not prevent colds", "and rest helps"],
        }
    )
    whole = make_ranker(f"cross:model={models['one']},verbose=false").score_frame(passages)
    assert scores[2] == pytest.approx(whole.max(), rel=1e-5)


def test_registry_spec_and_errors(models):
    info = all_rankers()["cross"]
    assert {"model", "fold", "max_length", "batch", "device", "dtype", "passages"} <= set(
        info.params
    )
    with pytest.raises(ConfigError, match="cross needs model=DIR"):
        make_ranker("cross")
    with pytest.raises(ConfigError, match="is not a local folder, a packaged model"):
        make_ranker("cross:model=/nonexistent/folder").score_frame(FRAME)
    # fold means nothing for a plain checkpoint: same fingerprint, same cached scores
    plain_cross = make_ranker(f"cross:model={models['one']}")
    plain_all = make_ranker(f"cross:model={models['one']},fold=all")
    assert plain_cross.fingerprint() == plain_all.fingerprint()
    assert plain_cross.spec() == f"cross:model={models['one']}"


# -- a folder written by nrp train, built by hand ------------------------------------------------
@pytest.fixture
def trained(models, tmp_path):
    """folds/0, folds/1 and all: three different tiny models; q1 in fold 0, q2 in fold 1,
    q3 a topic without judgments (no model trained on it)."""
    folder = tmp_path / "trained"
    for source, target in [("fold0", "folds/0"), ("fold1", "folds/1"), ("all", "all")]:
        shutil.copytree(models[source], folder / target)
    record = {
        "format": TRAINING_FORMAT,
        "collection": {
            "name": "tiny",
            "fingerprint": "f",
            "queries": {
                "1": query_hash("what helps a cold"),
                "2": query_hash("Vitamin C?"),
                "3": query_hash("sleep"),
            },
            "untrained_qids": ["3"],
        },
        "folds": {"k": 2, "seed": 0, "qid_fold": {"1": 0, "2": 1}},
    }
    (folder / TRAINING_FILE).write_text(json.dumps(record))
    return folder


def test_fold_cross_scores_each_query_with_the_model_that_held_it_out(models, trained):
    frame = pd.concat(
        [FRAME, FRAME.iloc[[0]].assign(qid="3", docno="e")], ignore_index=True
    )  # rows: q1 a b c, q2 d, q3 e
    ranker = make_ranker(f"cross:model={trained},verbose=false")
    scores = ranker.score_frame(frame)
    fold0 = direct_logits(models["fold0"], frame)[:, 0]
    fold1 = direct_logits(models["fold1"], frame)[:, 0]
    every = direct_logits(models["all"], frame)[:, 0]
    expected = np.array([fold0[0], fold0[1], fold0[2], fold1[3], every[4]])
    np.testing.assert_allclose(scores, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(fold0[:3], fold1[:3])  # the models differ, so the routing shows
    assert sorted(ranker._models) == ["0", "1", "all"]  # each loaded once, on first use
    assert ranker.spec() == f"cross:fold=cross,model={trained}"
    # fold=all: every row by the all-queries model
    everything = make_ranker(f"cross:model={trained},fold=all,verbose=false")
    np.testing.assert_allclose(everything.score_frame(frame), every, rtol=1e-5, atol=1e-6)
    assert sorted(everything._models) == ["all"]
    assert everything.fingerprint() != ranker.fingerprint()


def test_only_the_fold_models_needed_are_loaded(trained):
    ranker = make_ranker(f"cross:model={trained},verbose=false")
    ranker.score_frame(FRAME[FRAME["qid"] == "2"])
    assert sorted(ranker._models) == ["1"]


def test_queries_outside_the_training_collection_are_refused(trained):
    ranker = make_ranker(f"cross:model={trained},verbose=false")
    with pytest.raises(ConfigError, match=r"2 query id\(s\) are not queries of 'tiny'.*q8, q9.*"
                       "use fold=all"):  # fmt: skip
        ranker.score_frame(FRAME.assign(qid=["q8", "q9", "q8", "1"]))

    class Other:
        name = "other"
        topics = pd.DataFrame({"qid": ["1", "2"], "query": ["what helps a cold", "sleep"]})

    with pytest.raises(
        ConfigError, match=r"collection 'other' is another \(1 of its queries differ"
    ):
        ranker.bind_collection(Other())
    Other.topics = pd.DataFrame({"qid": ["1", "2"], "query": ["What helps a COLD!", "vitamin c"]})
    ranker.bind_collection(Other())  # the same questions: accepted


def test_fingerprint_follows_training_json(trained):
    before = make_ranker(f"cross:model={trained}").fingerprint()
    record = json.loads((trained / TRAINING_FILE).read_text())
    record["folds"]["seed"] = 1
    (trained / TRAINING_FILE).write_text(json.dumps(record))
    assert make_ranker(f"cross:model={trained}").fingerprint() != before
