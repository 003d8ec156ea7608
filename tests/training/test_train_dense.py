"""``nrp train --ranker dense``: the bi-encoder itself fine-tuned on the hand-made collection
whose grade is one word (``handmade``), read back by the ``dense`` ranker. Before training the
model is the ``dense`` ranker's own; after, it learns the word (nDCG@10 from chance to 1); each
query is scored by the fold model that held it out; the same seed gives the same scores; a
folder trained for one ranker is refused by the other."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
import handmade

from nrp import api
from nrp.cli import main
from nrp.collection.folds import assign_folds
from nrp.errors import ConfigError
from nrp.rankers.registry import make_ranker
from nrp.training.data import gather
from nrp.training.dense_model import SCALE, DenseTraining
from nrp.training.model import resolve_base

# 8 epochs of full fine-tuning teach the tiny bi-encoder the word (about 6 s on one thread)
LEARN = {"ranker": "dense", "epochs": 8, "lr": 3e-3, "batch": 16, "train_layers": 0}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return handmade.build(tmp_path_factory.mktemp("handmade-dense"))


def train(built, out, **settings):
    return api.train_ranker(
        "words",
        "relevance",
        out,
        indexes_dir=built["indexes"],
        verbose=False,
        device="cpu",
        **{"base": str(built["dense_base"]), **settings},
    )


@pytest.fixture(scope="module")
def learnt(built, tmp_path_factory):
    return train(built, tmp_path_factory.mktemp("learnt-dense") / "model", **LEARN)


@pytest.mark.parametrize("train_layers", [0, 1])
def test_before_training_the_scores_are_the_dense_rankers(built, train_layers):
    """The path training takes (bottom states, top layers, mean pooling) gives SCALE x the
    cosine the dense ranker computes with the base model, pair for pair."""
    collection = api.Collection.load("words", built["indexes"])
    data = gather(collection, "relevance")
    kind = DenseTraining(resolve_base(str(built["dense_base"])), "cpu")
    model = kind.fresh(0)
    features, cut, limit = kind.features(data.examples, 256, train_layers)
    frozen = {0: 0, 1: 1}[train_layers]  # 2 layers: train_layers=1 freezes the bottom one
    assert (cut, limit, features.frozen) == (0, 64, frozen)
    indices = list(range(len(data.examples)))
    features.compute(model, indices, 16)
    kind.check(features, indices[:4])
    model.eval()
    import torch

    with torch.inference_mode():
        ours = features.scores(model, indices).numpy() / SCALE
    ranker = make_ranker(f"dense:model={built['dense_base']},verbose=false")
    theirs = ranker.score_frame(data.examples[["qid", "query", "docno", "text"]])
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_a_fine_tuned_bi_encoder_learns_the_word(built, learnt):
    collection = api.Collection.load("words", built["indexes"])
    specs = [
        f"dense:model={built['dense_base']},verbose=false",
        f"dense:model={learnt.out},verbose=false",
        f"dense:model={learnt.out},fold=all,verbose=false",
        "random",
    ]
    result = api.validate(collection, specs, dimensions=["relevance"], cache=False)
    summary = result.dimensions["relevance"].summary
    means = {name: summary[name]["nDCG@10"].mean for name in summary}
    assert means[f"dense:model={built['dense_base']}"] < 0.75 and means["random"] < 0.75
    assert means[f"dense:fold=cross,model={learnt.out}"] >= 0.98  # cross-fitted
    assert means[f"dense:fold=all,model={learnt.out}"] >= 0.98
    record = learnt.record
    assert record["ranker"] == "dense" and record["data"]["pairs"] == 140
    assert record["hyper_parameters"]["score"].startswith("20 x cosine")
    assert (learnt.out / "all" / "modules.json").is_file()  # a sentence-transformers folder
    assert "rank with dense:model=" in learnt.format()
    frame = learnt.to_frame()  # one row per model, as a notebook shows it
    assert frame["model"].tolist() == [f"folds/{f}" for f in range(5)] + ["all"]
    assert frame["trained_queries"].tolist() == [16] * 5 + [20]
    assert frame["held_out_queries"].tolist() == [4] * 5 + [0]
    assert frame["loss"].tolist() == [e["loss"][-1] for e in record["models"]["folds"]] + [
        record["models"]["all"]["loss"][-1]
    ]


def test_each_query_is_scored_by_the_bi_encoder_that_held_it_out(built, learnt):
    record = json.loads((learnt.out / "training.json").read_text())
    qid_fold = record["folds"]["qid_fold"]
    assert qid_fold == assign_folds([f"q{i:02d}" for i in range(1, 21)], 5, 0)
    for entry in record["models"]["folds"]:
        assert not set(entry["trained_queries"]) & set(entry["held_out_queries"])
    collection = api.Collection.load("words", built["indexes"])
    candidates = collection.candidates()
    ranker = make_ranker(f"dense:model={learnt.out},verbose=false")
    ranker.bind_collection(collection)
    scores = ranker.score_frame(candidates)
    folds = candidates["qid"].map(qid_fold).to_numpy()
    for fold in range(5):
        spec = f"dense:model={learnt.out}/folds/{fold},verbose=false"
        alone = make_ranker(spec).score_frame(candidates)
        rows = folds == fold
        np.testing.assert_allclose(scores[rows], alone[rows], rtol=1e-6, atol=1e-7)
        other = make_ranker(f"dense:model={learnt.out}/folds/{(fold + 1) % 5},verbose=false")
        assert np.abs(scores[rows] - other.score_frame(candidates)[rows]).max() > 1e-3


def test_the_same_seed_gives_the_same_dense_scores_bitwise(built, tmp_path):
    settings = {"ranker": "dense", "epochs": 2, "lr": 1e-3, "batch": 8, "folds": 2}
    first = train(built, tmp_path / "first", **settings)
    second = train(built, tmp_path / "second", **settings)
    assert first.record["hyper_parameters"]["frozen_layers"] == 1  # the frozen-feature path
    candidates = api.Collection.load("words", built["indexes"]).candidates()
    for fold in ("cross", "all"):
        spec = "dense:model={},fold=" + fold + ",verbose=false"
        one = make_ranker(spec.format(first.out)).score_frame(candidates)
        two = make_ranker(spec.format(second.out)).score_frame(candidates)
        base = make_ranker(f"dense:model={built['dense_base']},verbose=false")
        assert np.array_equal(one, two)
        assert not np.allclose(one, base.score_frame(candidates))  # training moved them
    assert (first.out / "training.json").read_bytes() == (second.out / "training.json").read_bytes()


def test_a_folder_trained_for_one_ranker_is_refused_by_the_other(built, learnt, capsys):
    with pytest.raises(ConfigError, match="trained for the dense ranker; rank with dense:model="):
        make_ranker(f"cross:model={learnt.out}").model_checksum()
    answers = built["indexes"].parent / "answers.jsonl"
    answers.write_text(
        '{"answer_id": "a1", "llm": "m", "prompt": "p", "qid": "q01", "sample": 0, '
        '"text": "proven asthma care"}\n'
    )
    code = main(
        ["score", "words", str(answers), "--ranker", f"cross:model={learnt.out}",
         "--indexes", str(built["indexes"]), "--out", str(answers.parent / "scored")]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "trained for the dense ranker" in err
    assert not (answers.parent / "scored").exists()


def test_embedding_apart_from_queries_needs_fold_all(built, learnt):
    with pytest.raises(ConfigError, match="needs fold=all"):
        make_ranker(f"dense:model={learnt.out}").encode(["proven asthma"])
    every = make_ranker(f"dense:model={learnt.out},fold=all,verbose=false")
    alone = make_ranker(f"dense:model={learnt.out}/all,verbose=false")
    np.testing.assert_array_equal(every.encode(["proven asthma"]), alone.encode(["proven asthma"]))


def test_a_base_without_mean_pooling_is_refused_before_writing(built, tmp_path, capsys):
    cls_base = handmade.build_sentence_model(built["base"], tmp_path / "cls", pooling="cls")
    out = tmp_path / "out"
    code = main(
        ["train", "words", "--dimension", "relevance", "--ranker", "dense", "--base",
         str(cls_base), "--out", str(out), "--indexes", str(built["indexes"]),
         "--device", "cpu"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "mean pooling" in err
    assert not out.exists() and list(tmp_path.iterdir()) == [cls_base]


def test_an_unknown_ranker_is_one_line(built, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        ["train", "words", "--dimension", "relevance", "--ranker", "bm25", "--out", str(out),
         "--indexes", str(built["indexes"])]
    )  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.endswith("training: ranker must be one of cross, dense, got 'bm25'")
    assert not out.exists()
