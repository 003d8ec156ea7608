"""Validity's degenerate texts ranked by a lexical ranker in one vectorised pass per query
(``nrp.validation.validity._rescored_in_batches``) give exactly the floats a fresh ranking of
D_q plus each text gives (the path every other non-pointwise ranker takes): on a hand-made pool
with a repeated docno, under stats=query and stats=collection, and on MEDIQA 2019."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from nrp.rankers.lexical import BM25Ranker, DPHRanker, TfIdfRanker
from nrp.rankers.registry import make_ranker
from nrp.validation import validity
from nrp.validation.validity import ScoredText, rescores_in_batches, score_texts

Q1, Q2 = "ibuprofen blood pressure", "melatonin jet lag"
CANDIDATES = pd.DataFrame(
    {
        "qid": ["q1", "q1", "q1", "q1", "q2", "q2"],
        "query": [Q1] * 4 + [Q2] * 2,
        "docno": ["d1", "d2", "d3", "d1", "d4", "d1"],  # d1 twice in q1's pool, and in q2's
        "text": [
            "Ibuprofen can raise blood pressure; it holds salt and water.",
            "Blood pressure rises with salt. Ask before long use of ibuprofen.",
            "Melatonin helps with jet lag.",
            "Ibuprofen can raise blood pressure; it holds salt and water.",
            "Melatonin taken at bedtime shortens jet lag.",
            "Ibuprofen can raise blood pressure; it holds salt and water.",
        ],
    }
)
TEXTS = pd.DataFrame(
    {
        "qid": ["q1", "q2", "q1", "q1", "q2"],
        "query": [Q1, Q2, Q1, Q1, Q2],
        "docno": [f"~degenerate:{c}" for c in "abcde"],
        "text": [
            "ibuprofen blood pressure ibuprofen blood pressure",
            "melatonin jet lag?",
            "",
            "I cannot answer questions about blood pressure.",
            "Ibuprofen can raise blood pressure; it holds salt and water.",
        ],
        "kind": ["echo", "echo", "empty", "refusal", "other_best"],
    }
)


def run_of(ranker, candidates: pd.DataFrame) -> dict[str, dict[str, float]]:
    ranked = ranker.ranked_in_order(candidates)
    run: dict[str, dict[str, float]] = {}
    for row in ranked.itertuples(index=False):
        run.setdefault(str(row.qid), {})[str(row.docno)] = float(row.score)
    return run


def one_by_one(ranker, candidates: pd.DataFrame, texts: pd.DataFrame) -> list[ScoredText]:
    """The reference: D_q plus one text ranked afresh, text by text (``score_texts``' path
    for every non-pointwise ranker that does not rescore in batches)."""
    scored = []
    for row in texts.itertuples(index=False):
        dq = candidates[candidates["qid"] == row.qid]
        one = pd.DataFrame([[row.qid, row.query, row.docno, row.text]], columns=dq.columns)
        ranked = ranker.ranked_in_order(pd.concat([dq, one], ignore_index=True))
        scores = dict(zip(ranked["docno"], ranked["score"].astype(float), strict=True))
        own = scores.pop(row.docno)
        scored.append(ScoredText(row.qid, row.kind, own, scores))
    return scored


@pytest.mark.parametrize("cls", [TfIdfRanker, BM25Ranker, DPHRanker])
@pytest.mark.parametrize("stats", ["query", "collection"])
def test_batches_equal_a_fresh_ranking_of_dq_plus_each_text(cls, stats):
    corpus = CANDIDATES.drop_duplicates("docno")[["docno", "text"]]
    ranker = cls({"stats": stats}, corpus=corpus if stats == "collection" else None)
    assert rescores_in_batches(ranker)
    found = score_texts(ranker, CANDIDATES, TEXTS, run_of(ranker, CANDIDATES))
    assert found == one_by_one(ranker, CANDIDATES, TEXTS)  # every float, bit for bit
    # D_q holds one document per docno: q1's pool is d1, d2, d3 (d1's second row shares its
    # score), and the text's own docno is not among them
    assert [list(t.documents) for t in found] == [
        ["d1", "d2", "d3"], ["d4", "d1"], ["d1", "d2", "d3"], ["d1", "d2", "d3"], ["d4", "d1"]
    ]  # fmt: skip
    # the echo of q1's question tops q1's pool; the empty text scores 0
    assert found[0].score > max(found[0].documents.values()) and found[2].score == 0.0
    # another query's best document, injected as a text of its own, scores as d1 does in q2's
    # pool plus it (the same words, counted twice in the statistics)
    assert found[4].score == pytest.approx(found[4].documents["d1"], abs=0.0)


def test_only_rankers_computing_their_statistics_in_python_rescore_in_batches():
    assert rescores_in_batches(make_ranker("tfidf"))
    assert rescores_in_batches(make_ranker("bm25:stats=collection"))
    assert not rescores_in_batches(make_ranker("bm25:backend=pisa"))
    assert not rescores_in_batches(make_ranker("random"))


@pytest.mark.shared_data
def test_batches_equal_a_fresh_ranking_on_mediqa(tmp_path, shared_data):
    """Every degenerate text of MEDIQA 2019's first 12 questions (the kinds and draws
    validation makes), under each lexical ranker validation runs by default and bm25 with the
    collection's statistics: the same floats as D_q plus the text ranked afresh."""
    from nrp import Collection, ingest
    from nrp.validation.settings import ValidationSettings
    from nrp.validation.validate import validity_texts

    shared_data("mediqa-2019")
    manifest = Path(__file__).resolve().parents[2] / "manifests" / "mediqa-2019.yaml"
    ingest(manifest, indexes_dir=tmp_path)
    collection = Collection.load("mediqa-2019", tmp_path)
    candidates = collection.candidates()[["qid", "query", "docno", "text"]]
    first = candidates["qid"].drop_duplicates().head(12)
    texts = validity_texts(collection, candidates, ValidationSettings().checked(collection))
    texts = texts[texts["qid"].isin(first)].reset_index(drop=True)
    assert len(texts) == 276  # 23 for each of these 12 questions
    for spec in ("tfidf", "dph", "bm25", "bm25:stats=collection"):
        ranker = make_ranker(spec)
        ranker.bind_collection(collection)
        found = score_texts(ranker, candidates, texts, run_of(ranker, candidates))
        assert found == one_by_one(ranker, candidates, texts[list(texts.columns)]), spec


def test_the_batch_path_is_the_one_score_texts_takes(monkeypatch):
    """``score_texts`` hands a lexical ranker's texts to the batch path (and nothing else)."""
    calls = []
    batched = validity._rescored_in_batches

    def counted(*args):
        calls.append(len(args[2]))
        return batched(*args)

    monkeypatch.setattr(validity, "_rescored_in_batches", counted)
    ranker = TfIdfRanker()
    score_texts(ranker, CANDIDATES, TEXTS, run_of(ranker, CANDIDATES))
    assert calls == [5]
