"""nrp's rankers return a ranking as PyTerrier's retrievers do: each query's rows best first, a
0-based ``rank``, queries in the order they first appear, tied scores in the order given. So
``candidates >> ranker % 1``, or a step that reads each query's first row, sees the best document.

On the hand-made collection of ``word_collection`` (overlap scores by hand: q1 a1 3, a2 2, a3 1,
a4 0; q2 b1 3, b2 2, b3 0), D_q is given in reverse, so input order and ranking differ; the
"fever" scorer gives a1, a2 and a3 one tied score (1) and a4 0.
"""

from __future__ import annotations

from importlib import resources

import pyterrier as pt
import pytest
from word_collection import build_words, overlap

import nrp
from nrp.rankers.cache import CachedRanker, ScoreCache
from nrp.rankers.pyterrier import from_transformer


@pytest.fixture
def words(tmp_path):
    return build_words(tmp_path)


def _reversed(frame):
    return frame.iloc[::-1].reset_index(drop=True)


def test_a_ranker_returns_each_query_best_first_with_exact_ranks(words):
    ranker = from_transformer(overlap(), fingerprint="overlap-order")
    given = _reversed(words.candidates())
    assert given["docno"].tolist() == ["b3", "b2", "b1", "a4", "a3", "a2", "a1"]
    ranked = ranker.transform(given)
    # q2 appears first in the input, so it comes first
    assert ranked["docno"].tolist() == ["b1", "b2", "b3", "a1", "a2", "a3", "a4"]
    assert ranked["score"].tolist() == [3.0, 2.0, 0.0, 3.0, 2.0, 1.0, 0.0]
    assert ranked["rank"].tolist() == [0, 1, 2, 0, 1, 2, 3]
    assert ranked.index.tolist() == [2, 1, 0, 6, 5, 4, 3]  # each row's place in the input
    assert ranked.sort_index()["docno"].tolist() == given["docno"].tolist()
    # scored: the same scores and ranks, rows in the order given (what nrp's engines read)
    scored = ranker.ranked_in_order(given)
    assert scored["docno"].tolist() == given["docno"].tolist()
    assert scored["rank"].tolist() == [2, 1, 0, 3, 2, 1, 0]


def test_tied_scores_keep_the_order_given(words):
    fever = pt.apply.doc_score(lambda row: float("fever" in row["text"].split()))
    ranker = from_transformer(fever, fingerprint="fever-order")
    q1 = _reversed(words.candidates().query("qid == 'q1'"))  # a4 a3 a2 a1
    ranked = ranker.transform(q1)
    assert ranked["docno"].tolist() == ["a3", "a2", "a1", "a4"]
    assert ranked["rank"].tolist() == [0, 1, 2, 3]


def test_the_score_cache_returns_the_same_ranking(words):
    ranker = from_transformer(overlap(), fingerprint="overlap-cached")
    cached = CachedRanker(ranker, ScoreCache(words.path / "scores.sqlite"), "fp")
    given = _reversed(words.candidates())
    first = cached.transform(given)
    again = cached.transform(given)  # every score from the cache now
    assert cached.computed == 7
    for ranked in (first, again):
        assert ranked["docno"].tolist() == ["b1", "b2", "b3", "a1", "a2", "a3", "a4"]
        assert ranked["rank"].tolist() == [0, 1, 2, 0, 1, 2, 3]


def test_a_rank_cutoff_of_one_keeps_each_query_best_document(words):
    ranker = from_transformer(overlap(), fingerprint="overlap-cutoff")
    candidates = pt.Transformer.from_df(_reversed(words.candidates()))
    top = (candidates >> ranker % 1)(words.topics)  # from_df gives the topics' order
    assert top["docno"].tolist() == ["a1", "b1"] and top["score"].tolist() == [3.0, 3.0]
    # a step that takes each query's first row (an answer pipeline) sees the same documents
    first = (candidates >> ranker)(words.topics).groupby("qid", sort=False).head(1)
    assert first["docno"].tolist() == ["a1", "b1"]


def test_bm25_on_the_demo_collection_is_sorted_as_the_issue_pipeline_needs(tmp_path):
    nrp.ingest(resources.files("nrp") / "data" / "demo" / "manifest.yaml", indexes_dir=tmp_path)
    demo = nrp.Collection.load("demo", tmp_path)
    candidates = pt.Transformer.from_df(demo.candidates())
    ranked = (candidates >> nrp.make_ranker("bm25"))(demo.topics)
    for _qid, rows in ranked.groupby("qid", sort=False):
        assert rows["score"].is_monotonic_decreasing
        assert rows["rank"].tolist() == list(range(len(rows)))
    # d1's best document under bm25 (11th of its 15 in the order given)
    d1 = ranked[ranked["qid"] == "d1"]
    assert d1["docno"].iloc[0] == "d1-11" and d1["score"].iloc[0] == pytest.approx(5.330667)
    top = (candidates >> nrp.make_ranker("bm25") % 1)(demo.topics)
    best = ranked.loc[ranked.groupby("qid", sort=False)["score"].idxmax()]
    assert top["docno"].tolist() == best["docno"].tolist()
