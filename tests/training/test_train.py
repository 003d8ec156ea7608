"""``nrp train`` / ``train_ranker`` on a hand-made collection whose grade is one word
(``handmade``), with a tiny BERT built here: it learns (nDCG@10 from chance to 1), folds never
leak, the same seed gives the same scores, overlaps with other collections are left out, and
bad input is one error line with nothing written."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("transformers")
import handmade

from nrp import api
from nrp.cli import main
from nrp.collection.folds import assign_folds
from nrp.errors import ConfigError
from nrp.rankers.registry import make_ranker
from nrp.training.data import gather, same_question

# 8 epochs of full fine-tuning teach the tiny model the word (about 6 s on one thread)
LEARN = {"epochs": 8, "lr": 3e-3, "batch": 16, "train_layers": 0, "device": "cpu"}
QUICK = {"epochs": 1, "lr": 1e-3, "batch": 16, "device": "cpu", "max_steps": 2}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return handmade.build(tmp_path_factory.mktemp("handmade"))


def train(built, out, collection="words", **settings):
    return api.train_ranker(
        collection,
        "relevance",
        out,
        indexes_dir=built["indexes"],
        verbose=False,
        **{"base": str(built["base"]), **settings},
    )


@pytest.fixture(scope="module")
def learnt(built, tmp_path_factory):
    return train(built, tmp_path_factory.mktemp("learnt") / "model", **LEARN)


def test_a_cross_encoder_learns_the_word(built, learnt):
    collection = api.Collection.load("words", built["indexes"])
    specs = [
        f"cross:model={built['base']},verbose=false",
        f"cross:model={learnt.out},verbose=false",
        f"cross:model={learnt.out},fold=all,verbose=false",
        "random",
    ]
    result = api.validate(collection, specs, dimensions=["relevance"], cache=False)
    summary = result.dimensions["relevance"].summary
    means = {name: summary[name]["nDCG@10"].mean for name in summary}
    untrained = means[f"cross:model={built['base']}"]
    cross = means[f"cross:fold=cross,model={learnt.out}"]
    every = means[f"cross:fold=all,model={learnt.out}"]
    assert untrained < 0.75 and means["random"] < 0.75  # chance: 3 relevant of 8, random order
    assert cross >= 0.98  # cross-fitted: every query ranked by a model that never saw it
    assert every >= 0.98
    # the training data: 8 judged documents per query, one labelled X ("could not judge"):
    # 7 graded pairs x 20 queries, 60 with the word
    record = learnt.record
    assert record["data"]["pairs"] == 140 and record["data"]["queries"] == 20
    assert record["data"]["fingerprint"] and record["base"]["checksum"]
    assert [len(e["loss"]) for e in record["models"]["folds"]] == [8] * 5
    assert record["models"]["all"]["loss"][-1] < record["models"]["all"]["loss"][0]


def test_excluded_labels_never_train(built):
    data = gather(api.Collection.load("words", built["indexes"]), "relevance")
    judgments = api.Collection.load("words", built["indexes"]).judgments("relevance")
    excluded = set(judgments.loc[judgments["raw_label"] == "X", "docno"])
    assert len(excluded) == 20
    assert not excluded & set(data.examples["docno"])
    assert sorted(data.examples["gain"].value_counts().items()) == [(0, 80), (1, 60)]


def test_folds_never_leak_and_each_query_is_scored_by_the_model_that_held_it_out(built, learnt):
    record = json.loads((learnt.out / "training.json").read_text())
    qid_fold = record["folds"]["qid_fold"]
    assert qid_fold == assign_folds([f"q{i:02d}" for i in range(1, 21)], 5, 0)
    everyone = set(qid_fold)
    for entry in record["models"]["folds"]:
        trained, held = set(entry["trained_queries"]), set(entry["held_out_queries"])
        assert held == {q for q, f in qid_fold.items() if f == entry["fold"]} and len(held) == 4
        assert not trained & held
        assert trained == everyone - held and entry["pairs"] == 16 * 7
    assert set(record["models"]["all"]["trained_queries"]) == everyone
    collection = api.Collection.load("words", built["indexes"])
    candidates = collection.candidates()
    ranker = make_ranker(f"cross:model={learnt.out},verbose=false")
    ranker.bind_collection(collection)
    scores = ranker.score_frame(candidates)
    by_fold = {
        fold: make_ranker(f"cross:model={learnt.out}/folds/{fold},verbose=false").score_frame(
            candidates
        )
        for fold in range(5)
    }
    folds = candidates["qid"].map(qid_fold).to_numpy()
    for fold in range(5):
        rows = folds == fold
        np.testing.assert_allclose(scores[rows], by_fold[fold][rows], rtol=1e-6, atol=1e-7)
        other = by_fold[(fold + 1) % 5][rows]
        assert np.abs(scores[rows] - other).max() > 1e-3  # another fold's model differs


def test_the_same_seed_gives_the_same_scores_bitwise(built, tmp_path):
    settings = {"epochs": 2, "lr": 1e-3, "batch": 8, "folds": 2, "train_layers": 1}
    first = train(built, tmp_path / "first", device="cpu", **settings)
    second = train(built, tmp_path / "second", device="cpu", **settings)
    other_seed = train(built, tmp_path / "seed1", device="cpu", seed=1, **settings)
    assert first.record["hyper_parameters"]["frozen_layers"] == 1  # the frozen-feature path
    candidates = api.Collection.load("words", built["indexes"]).candidates()

    def scores(result, fold):
        spec = f"cross:model={result.out},fold={fold},verbose=false"
        return make_ranker(spec).score_frame(candidates)

    for fold in ("cross", "all"):
        assert np.array_equal(scores(first, fold), scores(second, fold))
        assert not np.array_equal(scores(first, fold), scores(other_seed, fold))
    assert (first.out / "training.json").read_bytes() == (second.out / "training.json").read_bytes()


def test_also_adds_other_judgments_and_leaves_out_shared_questions(built, tmp_path, capsys):
    out = tmp_path / "transfer"
    argv = ["train", "words", "--dimension", "relevance", "--out", str(out), "--also", "other"]
    argv += ["--base", str(built["base"]), "--indexes", str(built["indexes"])]
    argv += ["--epochs", "1", "--device", "cpu", "--max-steps", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed and "left out for their question text: 2" in printed
    record = json.loads((out / "training.json").read_text())
    # other's q01 "What HELPS  asthma?" and q02 "What HELPS  gout?" ask words' q01 and q05
    assert record["overlap"]["excluded"] == {
        "other/q01": "same question as words/q01",
        "other/q02": "same question as words/q05",
    }
    assert record["overlap"]["counts"] == {
        "excluded_queries": 2,
        "excluded_pairs": 14,
        "same_text_across_folds": 0,
    }
    assert record["data"]["pairs"] == 140 + 6 * 7
    for entry in [*record["models"]["folds"], record["models"]["all"]]:
        trained = set(entry["trained_queries"])
        assert {"other/q03", "other/q04", "other/q05", "other/q06"} <= trained
        assert not {"other/q01", "other/q02"} & trained
    assert [s["name"] for s in record["data"]["sources"]] == ["words", "other"]


def test_held_out_collections_questions_train_no_model(built, tmp_path):
    result = train(built, tmp_path / "held", held_out=["other"], **QUICK)
    record = result.record
    assert record["overlap"]["excluded"] == {
        "q01": "same question as held-out query other/q01",
        "q05": "same question as held-out query other/q02",
    }
    for entry in [*record["models"]["folds"], record["models"]["all"]]:
        assert not {"q01", "q05"} & set(entry["trained_queries"])
    assert {"q01", "q05"} <= set(record["folds"]["qid_fold"])  # still scored cross-fitted


def test_same_question_takes_equal_texts_and_near_duplicates():
    assert same_question({"what helps asthma"}, {"x", "what helps asthma"})
    # {what, helps, asthma} / {what, helps, really, asthma}: Jaccard 3/4 = 0.75 >= 0.7
    assert same_question({"what helps asthma"}, {"what really helps asthma"})
    # {what, helps, gout} / {what, helps, gout, at, night}: 3/5 = 0.6 < 0.7
    assert not same_question({"what helps gout"}, {"what helps gout at night"})
    assert not same_question(set(), {"what helps gout"})


def test_held_out_near_duplicates_are_left_out_like_equal_questions(built, tmp_path):
    near = handmade.write_collection(
        tmp_path / "near", built["indexes"], "near", ["really asthma", "gout at night"], seed=4
    )
    words = api.Collection.load("words", built["indexes"])
    data = gather(words, "relevance", held_out=[near], folds=5, seed=0)
    # "what helps really asthma" nearly asks q01 "what helps asthma"; q05's gout question is
    # only 3 of 5 words of "what helps gout at night"
    assert data.excluded == {"q01": "same question as held-out query near/q01"}
    assert "Jaccard similarity >= 0.7" in data.overlap_record()["rule"]


def test_a_question_asked_twice_is_left_out_of_the_other_fold_model(built, tmp_path):
    twins = handmade.write_collection(
        tmp_path / "twins", built["indexes"], "twins", ["asthma", "asthma", "gout", "flu"], seed=3
    )
    data = gather(twins, "relevance", folds=2, seed=0)
    folds = assign_folds(["q01", "q02", "q03", "q04"], 2, 0)
    if folds["q01"] == folds["q02"]:
        assert data.same_text == {}
    else:
        assert data.same_text == {folds["q01"]: ["q02"], folds["q02"]: ["q01"]}
        assert "q02" not in data.training_keys(folds["q01"])
        assert "q02" in data.training_keys(None)


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--dimension", "flat"], "dimension 'flat' of collection 'words' has grade 0 only"),
        (["--folds", "21"], "has 20 judged queries, fewer than 21 folds"),
        (["--base", "/nonexistent/base"], "base model folder /nonexistent/base does not exist"),
        (["--dimension", "nope"], "collection 'words' has no dimension 'nope'"),
        (["--also", "nowhere"], "unknown collection 'nowhere'"),
        (["--folds", "1"], "training: folds must be at least 2, got 1"),
        (["--base", "BROKEN"], "/broken: no usable tokenizer"),
        # issue 60, item 6: each of these started training before
        (["--lr", "inf"], "training: lr must be a finite number above 0, got inf"),
        (
            ["--seed", "-1"],
            "training: seed must be from 0 to 2**32 - 1 (a random generator's seed), got -1",
        ),
        (["--train-layers", "999"], "train_layers=999 is more than the model's 2 layers"),
    ],
    ids=[
        "one-grade",
        "few-queries",
        "no-base",
        "no-dimension",
        "no-collection",
        "one-fold",
        "broken",
        "lr-inf",
        "seed-negative",
        "layers-over",
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(built, tmp_path, capsys, args, problem):
    out = tmp_path / "models" / "out"
    argv = ["train", "words", "--dimension", "relevance", "--out", str(out)]
    argv += ["--base", str(built["base"]), "--indexes", str(built["indexes"]), *args]
    broken = tmp_path / "broken"  # a checkpoint folder whose config names no model: fails late
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-model"}')
    argv = [str(broken) if a == "BROKEN" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nrp: error: ") and problem in err
    assert not out.exists() and not (tmp_path / "models").exists()


def test_an_existing_out_folder_is_refused(built, tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    argv = ["train", "words", "--dimension", "relevance", "--out", str(out)]
    assert main([*argv, "--indexes", str(built["indexes"])]) == 2
    assert "exists: give a folder that does not" in capsys.readouterr().err
    assert list(out.iterdir()) == []


def test_nrp_and_leave_one_out_agreement_use_the_held_out_models(built, learnt):
    """The trained folder through the positioning engine: an answer with the word is ranked
    above every document without it, scored by the model that held its query out."""
    import pandas as pd

    collection = api.Collection.load("words", built["indexes"])
    spec = f"cross:model={learnt.out},verbose=false"
    answers = pd.DataFrame(
        {
            "answer_id": ["with", "without"],
            "qid": ["q04", "q04"],
            "text": ["proven care for acne daily", "care for acne daily"],
        }
    )
    rows = api.score_answers(collection, answers, {"relevance": spec}, cache=False)
    relevance = rows[rows["dimension"] == "relevance"].set_index("answer_id")
    # D_q of q04 ("what helps acne"): 8 documents, 3 with the word; only they may beat "with"
    assert relevance.loc["with", "nrp"] >= 1 - 3 / 8
    assert relevance.loc["without", "nrp"] <= 1 - 3 / 8
    fold = learnt.record["folds"]["qid_fold"]["q04"]
    held_out = make_ranker(f"cross:model={learnt.out}/folds/{fold},verbose=false")
    frame = answers.assign(query="what helps acne", docno=answers["answer_id"])
    expected = held_out.score_frame(frame)
    np.testing.assert_allclose(
        relevance.loc[["with", "without"], "score"].to_numpy(), expected, rtol=1e-6, atol=1e-7
    )
    result = api.agreement(collection, [spec], dimensions=["relevance"], cache=False)
    row = result.row("relevance", f"cross:fold=cross,model={learnt.out}")
    assert row["tau_mean"] > 0.6 and row["queries_used"] == 20


def test_a_topic_field_can_be_the_trained_query(built, tmp_path):
    result = train(built, tmp_path / "narrative", query="narrative", held_out=["other"], **QUICK)
    assert result.record["data"]["query_field"] == "narrative"
    assert f"rank with cross:model={result.out},query=narrative " in result.format()
    data = gather(api.Collection.load("words", built["indexes"]), "relevance", field="narrative")
    q01 = data.examples[data.examples["key"] == "q01"].iloc[0]
    assert (q01["query"], q01["question"]) == ("care for asthma", "what helps asthma")
    # other's narratives "care for asthma" / "care for gout" ask words' q01 and q05 too
    assert sorted(result.record["overlap"]["excluded"]) == ["q01", "q05"]


def test_a_model_without_a_bert_style_encoder_trains_only_whole(built, tmp_path):
    import torch
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    from nrp.errors import ConfigError

    base = tmp_path / "distil"
    shutil.copytree(built["base"], base, ignore=shutil.ignore_patterns("*.json", "*.safetensors"))
    size = len(handmade.vocabulary()) + 5
    config = DistilBertConfig(
        vocab_size=size, dim=16, n_layers=2, n_heads=2, hidden_dim=32, num_labels=1
    )
    torch.manual_seed(0)
    DistilBertForSequenceClassification(config).save_pretrained(base)
    with pytest.raises(ConfigError, match="train_layers=1 needs a BERT-style encoder"):
        train(built, tmp_path / "out", base=str(base), train_layers=1, **QUICK)
    assert not (tmp_path / "out").exists()
    result = train(built, tmp_path / "whole", base=str(base), train_layers=0, **QUICK)
    assert result.record["hyper_parameters"]["frozen_layers"] == 0


def test_also_query_adds_each_querys_other_text_in_its_own_fold(built, tmp_path, capsys):
    words = api.Collection.load("words", built["indexes"])
    other = api.Collection.load("other", built["indexes"])
    data = gather(words, "relevance", held_out=[other], folds=5, seed=0, also_query=["narrative"])
    # 140 graded pairs, and again with each topic's narrative "care for TOPIC" as the query
    assert len(data.examples) == 280
    assert data.variants == {f"q{n:02d}#narrative": f"q{n:02d}" for n in range(1, 21)}
    q01 = data.examples[data.examples["key"] == "q01"]
    again = data.examples[data.examples["key"] == "q01#narrative"]
    assert set(again["query"]) == {"care for asthma"}
    assert set(again["question"]) == {"what helps asthma"}
    assert list(again["docno"]) == list(q01["docno"]) and list(again["gain"]) == list(q01["gain"])
    # q01 and q05 ask other's questions: left out, and their narratives with them
    assert sorted(data.excluded) == ["q01", "q05"]
    assert data.overlap_record()["counts"]["excluded_pairs"] == 4 * 7
    everything = data.training_keys(None)
    assert len(everything) == 2 * 18 and not {"q01#narrative", "q05#narrative"} & set(everything)
    for fold in range(5):
        held = set(data.fold_keys(fold))
        trained = data.training_keys(fold)
        assert not {key.partition("#")[0] for key in trained} & held
        assert {f"{q}#narrative" for q in set(everything) & set(words.topics["qid"]) - held} == {
            key for key in trained if "#" in key
        }
    # the command: recorded, and the fold models' training queries never hold their own
    out = tmp_path / "also-query"
    argv = ["train", "words", "--dimension", "relevance", "--out", str(out)]
    argv += ["--also-query", "narrative", "--base", str(built["base"])]
    argv += ["--indexes", str(built["indexes"]), "--epochs", "1", "--device", "cpu"]
    assert main([*argv, "--max-steps", "1"]) == 0
    record = json.loads((out / "training.json").read_text())
    assert record["data"]["also_query"] == ["narrative"] and record["data"]["pairs"] == 280
    for entry in record["models"]["folds"]:
        owners = {key.partition("#")[0] for key in entry["trained_queries"]}
        assert not owners & set(entry["held_out_queries"])
        assert len(entry["trained_queries"]) == 2 * len(owners)
    assert "wrote" in capsys.readouterr().out


def test_also_query_refuses_an_unknown_field_and_the_trained_one(built):
    words = api.Collection.load("words", built["indexes"])
    with pytest.raises(ConfigError, match="has no topic field 'nope'"):
        gather(words, "relevance", also_query=["nope"])
    with pytest.raises(ConfigError, match="'query' is the trained query field"):
        gather(words, "relevance", also_query=["query"])
