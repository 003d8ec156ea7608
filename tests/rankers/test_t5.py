"""monot5 and duot5 on tiny random T5 checkpoints built here: the real code paths, no mocks.

Every expected number is computed in the test straight from the model's logits (log-softmax
over the 'true' and 'false' logits at the first decoder step), never by nrp's own functions.
"""

from __future__ import annotations

import logging
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import torch
from tiny_models import build_tiny_t5, build_tiny_t5_tokenizer
from transformers import T5ForConditionalGeneration, T5Tokenizer

from nrp.errors import ConfigError
from nrp.models.device import SCORE_TOLERANCE
from nrp.rankers.registry import all_rankers, make_ranker, parse_spec
from nrp.rankers.t5 import (
    DuoT5Ranker,
    MonoT5Ranker,
    default_tokenizer,
    ordered_pairs,
    pairs_against,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def t5(tmp_path_factory) -> dict[str, Path]:
    """A tokenizer and three tiny checkpoints: mono (seed 0, 64 input tokens), duo (seed 1, 256
    tokens: room for two documents), mono2 (seed 2)."""
    root = tmp_path_factory.mktemp("tiny-t5")
    tok = build_tiny_t5_tokenizer(root / "tok")
    return {
        "tok": tok,
        "mono": build_tiny_t5(root / "mono", tok, seed=0),
        "duo": build_tiny_t5(root / "duo", tok, seed=1, n_positions=256),
        "mono2": build_tiny_t5(root / "mono2", tok, seed=2),
    }


class Reference:
    """The expected numbers, computed directly with transformers (pyterrier-t5's input form)."""

    def __init__(self, folder: Path):
        self.tok = T5Tokenizer.from_pretrained(str(folder))
        self.model = T5ForConditionalGeneration.from_pretrained(str(folder)).eval()
        self.true = self.tok.encode("true")[0]
        self.false = self.tok.encode("false")[0]

    def ids(self, text: str) -> list[int]:
        return self.tok(text)["input_ids"][:-1]  # without </s>

    def log_p_true(self, ids: list[int]) -> float:
        with torch.no_grad():
            logits = self.model(
                input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([[0]])
            ).logits[0, 0]
        pair = torch.stack([logits[self.true], logits[self.false]])
        return torch.log_softmax(pair, dim=0)[0].item()

    def mono(self, query: str, text: str, budget: int | None = None) -> float:
        ids = self.ids(f"Query: {query} Document: {text}")
        if budget is not None:
            ids = ids[:budget]
        return self.log_p_true(ids + self.tok("Relevant:")["input_ids"])

    def duo(self, query: str, a: str, b: str) -> float:
        ids = (
            self.ids(f"Query: {query}") + self.ids(f"Document0: {a}") + self.ids(f"Document1: {b}")
        )
        return self.log_p_true(ids + self.tok("Relevant:")["input_ids"])


@pytest.fixture(scope="module")
def mono_ref(t5) -> Reference:
    return Reference(t5["mono"])


@pytest.fixture(scope="module")
def duo_ref(t5) -> Reference:
    return Reference(t5["duo"])


DOCS = [
    "diabetes is a disease of blood sugar",
    "the quick brown fox",
    "rest and fluids help with a cold",
    "patients with high blood pressure should reduce salt",
    "aspirin reduces fever",
    "water is wet",
    "the cat sleeps in the sun every day",
]


def frame(queries: dict[str, str], docs: dict[str, list[str]]) -> pd.DataFrame:
    rows = [
        {"qid": qid, "query": queries[qid], "docno": f"{qid}-d{i}", "text": text}
        for qid, texts in docs.items()
        for i, text in enumerate(texts)
    ]
    return pd.DataFrame(rows)


def test_tiny_tokenizer_encodes_true_and_false_as_single_real_tokens(t5):
    tok = T5Tokenizer.from_pretrained(str(t5["tok"]))
    for word in ("true", "false"):
        ids = tok.encode(word)
        assert len(ids) == 2 and ids[1] == tok.eos_token_id  # one piece, then </s>
        assert ids[0] != tok.unk_token_id
        assert tok.convert_ids_to_tokens(ids[0]) == f"▁{word}"
    assert tok.encode("true")[0] != tok.encode("false")[0]


def test_monot5_score_is_log_softmax_of_true_false_logits(t5, mono_ref):
    inp = frame({"q1": "what is diabetes", "q2": "cold"}, {"q1": DOCS[:4], "q2": DOCS[4:]})
    ranker = make_ranker(f"monot5:model={t5['mono']},batch=3,device=cpu,verbose=false")
    out = ranker.transform(inp).sort_index()
    expected = [mono_ref.mono(q, d) for q, d in zip(inp["query"], inp["text"], strict=True)]
    np.testing.assert_allclose(out["score"], expected, rtol=0, atol=1e-6)
    assert (out["score"] <= 0).all()
    assert not out["truncated"].any()
    # ranks follow scores within each query
    for _, group in out.groupby("qid"):
        assert group.sort_values("rank")["score"].is_monotonic_decreasing


def test_monot5_input_is_the_papers_single_string_prompt(mono_ref):
    # pyterrier-t5 tokenizes 'Query: q Document: d' and 'Relevant:' apart; on this tokenizer the
    # result is the same token sequence as the monoT5 paper's one string.
    parts = (
        mono_ref.ids("Query: cold Document: water is wet") + mono_ref.tok("Relevant:")["input_ids"]
    )
    assert parts == mono_ref.tok("Query: cold Document: water is wet Relevant:")["input_ids"]


def test_monot5_equals_pyterrier_t5_at_batch_size_one(t5):
    pyterrier_t5 = pytest.importorskip("pyterrier_t5")
    inp = frame({"q1": "what is diabetes"}, {"q1": DOCS})
    theirs = pyterrier_t5.MonoT5ReRanker(
        tok_model=str(t5["mono"]), model=str(t5["mono"]), batch_size=1, device="cpu", verbose=False
    ).transform(inp.copy())
    ours = MonoT5Ranker({"model": str(t5["mono"]), "device": "cpu", "verbose": False})
    np.testing.assert_allclose(ours.score_frame(inp), theirs["score"], rtol=0, atol=1e-6)


def test_monot5_scores_do_not_depend_on_batching(t5):
    texts = [" ".join(DOCS[: i % 5 + 1]) for i in range(11)]  # lengths differ, some repeat
    inp = frame({"q1": "blood sugar"}, {"q1": texts})
    scores = {
        batch: MonoT5Ranker(
            {"model": str(t5["mono"]), "batch": batch, "device": "cpu", "verbose": False}
        ).score_frame(inp)
        for batch in (1, 3, 8)
    }
    np.testing.assert_allclose(scores[8], scores[1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(scores[3], scores[1], rtol=0, atol=1e-6)


def test_monot5_passages_max_and_first(t5, mono_ref):
    words = [f"w{i}" for i in range(23)]
    long_doc = " ".join(words)
    # 10-word passages every 5 words, the last one ending at the text's end: 0-9, 5-14, 10-19,
    # 15-22 (15 + 10 >= 23 stops)
    passages = [" ".join(words[s : s + 10]) for s in (0, 5, 10, 15)]
    inp = frame({"q1": "fox"}, {"q1": [long_doc, "the quick brown fox"]})
    alone = [mono_ref.mono("fox", p) for p in passages]
    common = {"model": str(t5["mono"]), "device": "cpu", "verbose": False, "passages": 10}
    best = MonoT5Ranker({**common, "aggregate": "max"}).score_frame(inp)
    first = MonoT5Ranker({**common, "aggregate": "first"}).score_frame(inp)
    assert best[0] == pytest.approx(max(alone), abs=1e-6)
    assert first[0] == pytest.approx(alone[0], abs=1e-6)
    assert max(alone) > alone[0]  # the two aggregates really differ on this document
    # a short document is its own single passage
    assert best[1] == pytest.approx(mono_ref.mono("fox", "the quick brown fox"), abs=1e-6)
    assert first[1] == pytest.approx(best[1], abs=1e-12)


def test_monot5_counts_and_marks_truncated_documents(t5, mono_ref, caplog):
    long_a = " ".join(DOCS)  # far more than 64 tokens
    long_b = " ".join(reversed(DOCS))
    inp = frame({"q1": "blood sugar"}, {"q1": ["water is wet", long_a, "aspirin", long_b]})
    ranker = MonoT5Ranker({"model": str(t5["mono"]), "device": "cpu", "verbose": False})
    with caplog.at_level(logging.WARNING, logger="nrp.rankers.t5"):
        out = ranker.transform(inp).sort_index()
    assert out["truncated"].tolist() == [False, True, False, True]
    assert "2 of 4 documents were cut at 64 input tokens" in caplog.text
    # the cut keeps the first n_positions - len('Relevant: </s>') text tokens and the prompt
    budget = 64 - len(mono_ref.tok("Relevant:")["input_ids"])
    assert len(mono_ref.ids(f"Query: blood sugar Document: {long_a}")) > budget
    assert out["score"][1] == pytest.approx(mono_ref.mono("blood sugar", long_a, budget), abs=1e-6)
    # passages short enough are scored whole: nothing is cut
    caplog.clear()
    split = MonoT5Ranker(
        {"model": str(t5["mono"]), "device": "cpu", "verbose": False, "passages": 8}
    )
    with caplog.at_level(logging.WARNING, logger="nrp.rankers.t5"):
        split.score_frame(inp)
    assert not split.truncated.any() and "were cut" not in caplog.text


def symmetric_sum(docnos: list[str], log_p: dict[tuple[str, str], float]) -> dict[str, float]:
    """Pradeep et al. 2021 SYM-SUM: s_i = sum_j p_ij + (1 - p_ji)."""
    return {
        i: sum(math.exp(log_p[i, j]) + 1 - math.exp(log_p[j, i]) for j in docnos if j != i)
        for i in docnos
    }


def test_duot5_orders_top_k_by_pair_aggregate_and_keeps_monot5_order_below(t5, mono_ref, duo_ref):
    query = "blood sugar"
    inp = frame({"q1": query}, {"q1": DOCS})
    k = 4
    ranker = make_ranker(
        f"duot5:model={t5['duo']},mono_model={t5['mono']},k={k},device=cpu,verbose=false,batch=5"
    )
    out = ranker.transform(inp)

    texts = dict(zip(inp["docno"], inp["text"], strict=True))
    mono = {d: mono_ref.mono(query, t) for d, t in texts.items()}
    by_mono = sorted(texts, key=lambda d: -mono[d])
    top, below = by_mono[:k], by_mono[k:]
    log_p = {(a, b): duo_ref.duo(query, texts[a], texts[b]) for a in top for b in top if a != b}
    expected = symmetric_sum(top, log_p)
    expected_order = sorted(top, key=lambda d: -expected[d]) + below

    ranked = out.sort_values("rank")
    assert ranked["docno"].tolist() == expected_order
    got = dict(zip(out["docno"], out["duo_score"], strict=True))
    for d in top:
        assert got[d] == pytest.approx(expected[d], abs=1e-5)
    assert all(np.isnan(got[d]) for d in below)
    # monotone final score: 1 + aggregate above, monoT5 log-probabilities below
    scores = dict(zip(out["docno"], out["score"], strict=True))
    for d in top:
        assert scores[d] == pytest.approx(1 + expected[d], abs=1e-5)
    for d in below:
        assert scores[d] == pytest.approx(mono[d], abs=1e-6)
    assert min(scores[d] for d in top) > max(scores[d] for d in below)
    assert ranked["score"].is_monotonic_decreasing


LONG_DOCS = [" ".join(DOCS[i:] + DOCS[:i]) for i in range(4)]  # each far over half of 64 tokens


@pytest.mark.parametrize(
    ("checkpoint", "docs", "cut"),
    [("duo", DOCS, False), ("mono", LONG_DOCS, True)],  # 'mono': 64 tokens, pairs are cut
    ids=["whole", "truncated"],
)
def test_duot5_pyterrier_t5_aggregate_equals_pyterrier_t5(t5, checkpoint, docs, cut):
    pyterrier_t5 = pytest.importorskip("pyterrier_t5")
    inp = frame({"q1": "cold", "q2": "fever"}, {"q1": docs[:4], "q2": docs[3:]})
    theirs = pyterrier_t5.DuoT5ReRanker(
        tok_model=str(t5[checkpoint]),
        model=str(t5[checkpoint]),
        batch_size=1,
        device="cpu",
        verbose=False,
    ).transform(inp.copy())
    ranker = DuoT5Ranker(
        {
            "model": str(t5[checkpoint]),
            "mono_model": str(t5["mono"]),
            "agg": "pyterrier-t5",
            "k": 10,  # every document in the pairwise stage, as pyterrier-t5 re-ranks them all
            "device": "cpu",
            "verbose": False,
        }
    )
    ours = ranker.transform(inp)
    assert (ranker.truncated_pairs > 0) == cut
    merged = ours.merge(
        theirs[["qid", "docno", "score"]], on=["qid", "docno"], suffixes=("", "_pt")
    )
    np.testing.assert_allclose(merged["duo_score"], merged["score_pt"], rtol=0, atol=1e-5)


class CountingPairCache:
    """What a pair-score cache does: keyed by (qid, docno_a, docno_b), scores only the missing
    pairs with the wrapped scorer."""

    def __init__(self, scorer):
        self.scorer = scorer
        self.known: dict[tuple[str, str, str], float] = {}
        self.computed = 0

    def __call__(self, pairs: pd.DataFrame) -> np.ndarray:
        keys = list(zip(pairs["qid"], pairs["docno_a"], pairs["docno_b"], strict=True))
        missing = [i for i, key in enumerate(keys) if key not in self.known]
        if missing:
            fresh = self.scorer(pairs.iloc[missing])
            self.known.update({keys[i]: s for i, s in zip(missing, fresh, strict=True)})
            self.computed += len(missing)
        return np.array([self.known[key] for key in keys])


def test_duot5_pair_scores_can_be_cached_and_a_new_answer_costs_2k_pairs(t5, duo_ref):
    query = "blood sugar"
    docs = frame({"q1": query}, {"q1": DOCS})
    k = 3
    params = {"model": str(t5["duo"]), "mono_model": str(t5["mono"]), "k": k, "device": "cpu"}
    ranker = DuoT5Ranker({**params, "verbose": False})
    cache = CountingPairCache(ranker.score_pairs)
    ranker.pair_scorer = cache
    mono_docs = ranker.mono.score_frame(docs)
    ranker.rerank(docs, mono_docs)
    assert cache.computed == k * (k - 1)

    # one new answer compared with monoT5's top k documents: only its 2k pairs are new
    answer = pd.DataFrame(
        [{"qid": "q1", "query": query, "docno": "answer-1", "text": "sugar in the blood"}]
    )
    with_answer = pd.concat([docs, answer], ignore_index=True)
    mono_all = np.concatenate([mono_docs, ranker.mono.score_frame(answer)])
    include = np.r_[np.zeros(len(docs), dtype=bool), True]
    cached = ranker.rerank(with_answer, mono_all, include=include)
    assert cache.computed == k * (k - 1) + 2 * k

    # the same pairs scored in other batches (cached ones earlier, the rest now): equal up to
    # fp32's batch-to-batch rounding, the tolerance the tie rule uses (seen: 9e-8 absolute)
    fresh = DuoT5Ranker({**params, "verbose": False})
    np.testing.assert_allclose(
        fresh.rerank(with_answer, mono_all, include=include),
        cached,
        rtol=SCORE_TOLERANCE["fp32"],
        atol=0,
    )
    # the pair scores are log P(a more relevant than b) of the duo model itself
    texts = dict(zip(with_answer["docno"], with_answer["text"], strict=True))
    for (_, a, b), value in list(cache.known.items())[:4]:
        assert value == pytest.approx(duo_ref.duo(query, texts[a], texts[b]), abs=1e-6)
    # the answer's new pairs are exactly pairs_against(answer, top k)
    top = docs.iloc[np.argsort(-mono_docs, kind="stable")[:k]]
    new_pairs = pairs_against(answer, top)
    assert len(new_pairs) == 2 * k
    assert {(a, b) for a, b in zip(new_pairs["docno_a"], new_pairs["docno_b"], strict=True)} == {
        (x, y) for d in top["docno"] for x, y in (("answer-1", d), (d, "answer-1"))
    }


def test_ordered_pairs_are_all_permutations_and_need_unique_docnos():
    inp = frame({"q1": "x", "q2": "y"}, {"q1": ["a", "b", "c"], "q2": ["d"]})
    pairs = ordered_pairs(inp)
    assert list(zip(pairs["docno_a"], pairs["docno_b"], strict=True)) == [
        ("q1-d0", "q1-d1"),
        ("q1-d0", "q1-d2"),
        ("q1-d1", "q1-d0"),
        ("q1-d1", "q1-d2"),
        ("q1-d2", "q1-d0"),
        ("q1-d2", "q1-d1"),
    ]
    with pytest.raises(ValueError, match="unique docnos"):
        ordered_pairs(pd.concat([inp, inp.iloc[:1]]))


def test_fingerprint_changes_with_the_model_weights(t5):
    def mono(folder: Path) -> str:
        return MonoT5Ranker({"model": str(folder)}).fingerprint()

    assert mono(t5["mono"]) == mono(t5["mono"])
    assert mono(t5["mono"]) != mono(t5["mono2"])

    def duo(**params) -> DuoT5Ranker:
        return DuoT5Ranker({"model": str(t5["duo"]), "mono_model": str(t5["mono"]), **params})

    assert duo().fingerprint() != duo(mono_model=str(t5["mono2"])).fingerprint()
    assert duo().fingerprint() != duo(model=str(t5["mono2"])).fingerprint()
    # a pair score depends on the duo checkpoint only, not on k or the first stage
    assert duo().pair_fingerprint() == duo(k=7, mono_model=str(t5["mono2"])).pair_fingerprint()
    assert duo().pair_fingerprint() != duo(model=str(t5["mono2"])).pair_fingerprint()


def test_tokenizer_defaults_and_a_tokenizer_without_true_false_is_refused(t5, tmp_path):
    assert default_tokenizer("castorini/monot5-base-msmarco", None) == "t5-base"
    assert default_tokenizer(str(t5["mono"]), None) == str(t5["mono"])
    assert default_tokenizer(str(t5["mono"]), "/elsewhere") == "/elsewhere"
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(ConfigError, match="no tokenizer"):
        MonoT5Ranker({"model": str(bare)})
    # a tokenizer where 'true' is not one piece: scoring would read the logit of '▁' or <unk>
    plain = build_tiny_t5_tokenizer(tmp_path / "plain", special_true_false=False)
    ranker = MonoT5Ranker({"model": str(t5["mono"]), "tok_model": str(plain), "device": "cpu"})
    with pytest.raises(ConfigError, match="single pieces"):
        ranker.score_frame(frame({"q1": "x"}, {"q1": ["y"]}))


def test_registry_specs_and_no_torch_at_import():
    rankers = all_rankers()
    assert {"monot5", "duot5"} <= set(rankers)
    info, params = parse_spec("monot5:model=/m,batch=64,passages=100,aggregate=first")
    assert info.name == "monot5"
    assert params["batch"] == 64 and params["passages"] == 100 and params["aggregate"] == "first"
    assert params["tok_model"] is None and params["dtype"] == "fp32"
    _, duo = parse_spec("duot5:k=20,mono_model=/m")
    assert duo["k"] == 20 and duo["agg"] == "sym-sum" and duo["batch"] == 32
    with pytest.raises(ConfigError):
        parse_spec("duot5:agg=mean")
    code = (
        "import sys, nrp.rankers.t5; print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.split() == ["False", "False"]


def test_score_cache_serves_a_second_run_without_loading_the_model(t5, tmp_path):
    from nrp.rankers.cache import CachedRanker, ScoreCache

    inp = frame({"q1": "blood sugar", "q2": "cold"}, {"q1": DOCS[:4], "q2": DOCS[4:]})
    spec = f"duot5:model={t5['duo']},mono_model={t5['mono']},k=3,device=cpu,verbose=false"
    cache = ScoreCache(tmp_path / "scores.sqlite")
    first = CachedRanker(make_ranker(spec), cache, "collection-fp").transform(inp)
    again_ranker = make_ranker(spec)
    again = CachedRanker(again_ranker, cache, "collection-fp")
    second = again.transform(inp)
    assert again.computed == 0
    assert again_ranker.t5._model is None and again_ranker.mono.t5._model is None  # lazy
    pd.testing.assert_frame_equal(
        first.sort_values(["qid", "docno"]).reset_index(drop=True),
        second.sort_values(["qid", "docno"]).reset_index(drop=True),
    )


def test_batched_sentencepiece_ids_equal_the_tokenizers_own(t5, shared_data):
    """The fast path (one ``sp_model.encode`` call) gives the slow T5 tokenizer's ids for every
    MEDIQA 2019 test answer, and texts holding an added token (``</s>``) take the tokenizer's
    own path, which maps it to its special id."""
    import xml.etree.ElementTree as ET

    from nrp.rankers.t5 import T5RelevanceModel

    tree = ET.parse(shared_data("mediqa-2019", "MEDIQA2019-Task3-QA-TestSet-wLabels.xml"))
    answers = [(node.text or "") for node in tree.iter("AnswerText")]
    tricky = ["", "  two  spaces\tand\nnewline", "▁under", "a </s> inside", "<pad>x", "Zürich é"]
    model = T5RelevanceModel(
        str(t5["mono"]),
        None,
        batch=4,
        device="cpu",
        dtype="fp32",
        verbose=False,
        max_length=0,
        label="monot5",
    )
    model.load()
    texts = answers + tricky
    assert len(answers) == 1107
    own = model._tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    assert model._encode(texts) == own
    eos = model._tokenizer.eos_token_id
    assert eos in model._encode(["a </s> inside"])[0]
