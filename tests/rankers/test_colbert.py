"""The colbert ranker on a tiny random ColBERT checkpoint built here and loaded by colbert-ai's
own ``Checkpoint`` (real tokenizer, encoder and masking code, no mocks); MaxSim is checked
against a computation by hand from the checkpoint's weights."""

from __future__ import annotations

import shutil
import string
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("colbert")

from nrp.rankers.colbert import ColBERTIndex, ColBERTRanker
from nrp.rankers.passages import split_passages
from nrp.rankers.registry import make_ranker

WORDS = (
    "the a of and to in is what are how cancer treatment heart disease symptoms flu fever "
    "cough diet sugar blood pressure sleep child children water drink rest doctor pain"
)
QUERY_MAXLEN = 8
DOC_MAXLEN = 24


def build_tiny_colbert(folder: Path, seed: int = 0) -> Path:
    """What colbert's ``Checkpoint(folder)`` needs: a BERT ``config.json`` (model_type bert, so
    ``class_factory`` finds BertPreTrainedModel/BertModel), HF_ColBERT weights (``bert.*`` and the
    projection ``linear.weight``), tokenizer files whose vocabulary has the [unused0]/[unused1]
    query and document markers plus [CLS] [SEP] [MASK] [PAD] and the punctuation marks (masked out
    of documents), and ``artifact.metadata`` with ColBERT's settings (dim, query/doc maxlen)."""
    import torch
    from colbert.infra import ColBERTConfig
    from colbert.modeling.hf_colbert import class_factory
    from transformers import BertConfig, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += list(string.punctuation) + WORDS.split() + ["##s", "##ing"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(
        folder
    )
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    config.save_pretrained(folder)
    settings = ColBERTConfig(dim=16, query_maxlen=QUERY_MAXLEN, doc_maxlen=DOC_MAXLEN)
    torch.manual_seed(seed)
    class_factory(str(folder))(config, settings).save_pretrained(folder)
    settings.save_for_checkpoint(str(folder))
    return folder


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_colbert(tmp_path_factory.mktemp("colbert") / "ckpt")


def ranker(model: Path, **params: object) -> ColBERTRanker:
    spec = ",".join(f"{k}={v}" for k, v in {"model": model, "verbose": False, **params}.items())
    made = make_ranker(f"colbert:{spec}")
    assert isinstance(made, ColBERTRanker)
    return made


def frame(texts: list[str], queries: list[str] | str) -> pd.DataFrame:
    queries = [queries] * len(texts) if isinstance(queries, str) else queries
    return pd.DataFrame(
        {
            "qid": queries,
            "query": queries,
            "docno": [f"d{i}" for i in range(len(texts))],
            "text": texts,
        }
    )


TEXTS = [
    "sugar",
    "heart disease, symptoms of the flu.",
    "blood pressure and sleep; rest and water!",
    "the flu fever and cough in children, drink water and rest, see a doctor for pain. " * 3,
    "what are the symptoms of heart disease?",
    "",
]


def maxsim_by_hand(folder: Path, query: str, text: str) -> float:
    """ColBERT's score from the checkpoint's weights without colbert-ai's code: the query is
    [CLS] [unused0] tokens [SEP] then [MASK] up to query_maxlen (masks not attended to but
    embedded); the document [CLS] [unused1] tokens [SEP] cut at doc_maxlen, punctuation dropped;
    embeddings = normalize(linear(BERT)); score = sum over query tokens of max dot product."""
    import torch
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel, BertTokenizerFast

    tok = BertTokenizerFast.from_pretrained(folder)
    state = load_file(folder / "model.safetensors")
    bert = BertModel(BertConfig.from_pretrained(folder))
    bert.load_state_dict(
        {k.removeprefix("bert."): v for k, v in state.items() if k.startswith("bert.")}
    )
    bert.eval()
    linear = state["linear.weight"]
    ids = tok.convert_tokens_to_ids

    def embed(token_ids: list[int], attention: list[int]) -> torch.Tensor:
        with torch.no_grad():
            hidden = bert(torch.tensor([token_ids]), attention_mask=torch.tensor([attention]))[0][0]
        return torch.nn.functional.normalize(hidden @ linear.T, dim=-1)

    q_tokens = tok(query, add_special_tokens=False)["input_ids"][: QUERY_MAXLEN - 3]
    q_ids = [ids("[CLS]"), ids("[unused0]"), *q_tokens, ids("[SEP]")]
    q_att = [1] * len(q_ids) + [0] * (QUERY_MAXLEN - len(q_ids))
    q_ids += [ids("[MASK]")] * (QUERY_MAXLEN - len(q_ids))
    d_tokens = tok(text, add_special_tokens=False)["input_ids"][: DOC_MAXLEN - 3]
    d_ids = [ids("[CLS]"), ids("[unused1]"), *d_tokens, ids("[SEP]")]
    q_emb = embed(q_ids, q_att)
    d_emb = embed(d_ids, [1] * len(d_ids))
    punctuation = set(ids(list(string.punctuation)))
    d_emb = d_emb[[i for i, t in enumerate(d_ids) if t not in punctuation]]
    return float((q_emb @ d_emb.T).max(dim=1).values.sum())


def test_maxsim_equals_hand_computation(tiny_checkpoint: Path) -> None:
    query = "symptoms of heart disease"
    scores = ranker(tiny_checkpoint, batch=4).score_frame(frame(TEXTS, query))
    expected = [maxsim_by_hand(tiny_checkpoint, query, t) for t in TEXTS]
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    assert np.all(scores <= QUERY_MAXLEN + 1e-5)


def test_batching_keeps_order_and_values(tiny_checkpoint: Path) -> None:
    queries = ["heart disease", "flu fever", "heart disease", "sleep", "flu fever", "diet"]
    one = ranker(tiny_checkpoint, batch=1).score_frame(frame(TEXTS, queries))
    three = ranker(tiny_checkpoint, batch=3).score_frame(frame(TEXTS, queries))
    np.testing.assert_allclose(three, one, atol=1e-5)
    single = ranker(tiny_checkpoint)
    alone = [single.score_frame(frame([t], q))[0] for t, q in zip(TEXTS, queries, strict=True)]
    np.testing.assert_allclose(one, alone, atol=1e-5)
    out = single.transform(frame(TEXTS, queries))
    # a ranking: each query's rows best first; the index labels give the order given back
    assert out.sort_index()["docno"].tolist() == [f"d{i}" for i in range(len(TEXTS))]
    assert out.sort_index()["score"].to_numpy() == pytest.approx(one, abs=1e-5)
    for _qid, rows in out.groupby("qid", sort=False):
        assert rows["rank"].tolist() == list(range(len(rows)))
        assert rows["score"].is_monotonic_decreasing


def test_passage_max_equals_best_passage(tiny_checkpoint: Path) -> None:
    text = TEXTS[3]
    passages = split_passages(text, 6, 4)
    assert len(passages) >= 4
    query = "flu fever"
    each = ranker(tiny_checkpoint).score_frame(frame(passages, query))
    maxp = ranker(tiny_checkpoint, passages=6, stride=4).score_frame(frame([text, "sugar"], query))
    assert maxp[0] == pytest.approx(each.max(), abs=1e-5)
    firstp = ranker(tiny_checkpoint, passages=6, stride=4, aggregate="first")
    assert firstp.score_frame(frame([text], query))[0] == pytest.approx(each[0], abs=1e-5)


def test_fingerprint_follows_weights_and_settings(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    copy = tmp_path / "copy"
    shutil.copytree(tiny_checkpoint, copy)
    base = ranker(copy).fingerprint()
    assert ranker(copy, batch=5).fingerprint() == base
    assert ranker(copy, doc_maxlen=12).fingerprint() != base
    tensors = load_file(copy / "model.safetensors")
    tensors["linear.weight"] = tensors["linear.weight"] * 1.01
    save_file(tensors, copy / "model.safetensors", metadata={"format": "pt"})
    changed = ranker(copy).fingerprint()
    assert changed != base
    metadata = copy / "artifact.metadata"
    metadata.write_text(metadata.read_text().replace('"doc_maxlen": 24', '"doc_maxlen": 20'))
    assert ranker(copy).fingerprint() != changed


def test_maxlen_overrides_reach_the_encoder(tiny_checkpoint: Path) -> None:
    short = ranker(tiny_checkpoint, query_maxlen=6, doc_maxlen=8)
    assert short.encode_queries(["heart disease"]).shape[1] == 6
    docs, kept = short.encode_docs([TEXTS[3]])
    assert docs.shape[1] <= 8 and int(kept.sum()) <= 8


@pytest.mark.slow
def test_plaid_index_search(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """Whole-collection PLAID indexing and search (compiles colbert's C++ extensions on first
    use, cached in TORCH_EXTENSIONS_DIR). PLAID is approximate: the test checks that the top
    document is the one the exact re-ranker puts first on a corpus with an obvious answer."""
    if shutil.which("c++") is None or shutil.which("ninja") is None:
        pytest.skip("PLAID needs a C++ compiler and ninja to build colbert's extensions")
    words = WORDS.split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, 12)) for _ in range(40)]
    texts[7] = "heart disease symptoms heart disease symptoms"
    corpus = pd.DataFrame({"docno": [f"d{i}" for i in range(len(texts))], "text": texts})
    start = time.perf_counter()
    index = ColBERTIndex(str(tiny_checkpoint), tmp_path / "plaid", k=5).build(corpus)
    built = time.perf_counter() - start
    got = index.transform(pd.DataFrame({"qid": ["1"], "query": ["heart disease symptoms"]}))
    print(f"PLAID build {built:.1f}s, build+search {time.perf_counter() - start:.1f}s")
    assert len(got) == 5
    exact = ranker(tiny_checkpoint).score_frame(frame(texts, "heart disease symptoms"))
    assert got.sort_values("rank")["docno"].iloc[0] == f"d{int(np.argmax(exact))}"
