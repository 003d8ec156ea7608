"""Ranker specs are parsed in one place; the score cache computes each (qid, docno) once."""

import numpy as np
import pandas as pd
import pytest

from nrp.errors import ConfigError
from nrp.rankers.base import Ranker
from nrp.rankers.cache import CachedRanker, ScoreCache
from nrp.rankers.registry import all_rankers, make_ranker, parse_spec, split_specs


def test_registry_lists_the_zoo():
    assert {"tfidf", "dph", "bm25", "dense", "colbert", "monot5", "duot5", "random"} <= set(
        all_rankers()
    )


def test_split_specs_keeps_a_spec_s_own_commas():
    assert split_specs("tfidf, monot5:model=/m,batch=8 ,bm25:k1=0.9,b=0.4,dense") == [
        "tfidf",
        "monot5:model=/m,batch=8",
        "bm25:k1=0.9,b=0.4",
        "dense",
    ]


def test_parse_spec_types_and_defaults():
    info, params = parse_spec("bm25:k1=0.9,b=0.4")
    assert info.name == "bm25"
    assert (params["k1"], params["b"], params["k3"]) == (0.9, 0.4, 8.0)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bm42", "unknown ranker 'bm42'"),
        ("bm25:k9=1", "ranker 'bm25' has no parameter 'k9'"),
        ("bm25:k1=high", r"parameter k1='high' is not a float"),
        ("bm25:k1", r"'k1' is not key=value"),
        ("bm25:stats=global", "must be one of"),
        ("bm25:k1=0.9:b=0.4", r"parameter k1='0.9:b=0.4' holds ':b=': parameters are separated"),
    ],
)
def test_bad_specs_are_config_errors(spec, message):
    with pytest.raises(ConfigError, match=message):
        parse_spec(spec)


@pytest.mark.parametrize(
    ("spec", "injection"),
    [
        ("tfidf", "statistics"),
        ("bm25:stats=collection,collection=c", "statistics"),
        ("dph", "statistics"),
        ("duot5:model=/m,mono_model=/m", "pairwise"),
        ("monot5:model=/m", "pointwise"),
        ("dense", "pointwise"),
        ("colbert", "pointwise"),
        ("random", "pointwise"),
    ],
)
def test_each_ranker_declares_how_it_is_injected(spec, injection):
    info, params = parse_spec(spec)
    assert info.build(params).injection == injection


class WordOverlap(Ranker):
    """Score = query words in the text, divided by |D_q| when ``per_set`` (a set-dependent
    score), counting every row it scores."""

    name = "overlap"

    def __init__(self, per_set=False):
        super().__init__({"per_set": per_set})
        self.depends_on_candidate_set = per_set
        self.scored = 0

    def score_frame(self, frame):
        self.scored += len(frame)
        scores = np.array(
            [
                len(set(q.split()) & set(t.split()))
                for q, t in zip(frame["query"], frame["text"], strict=True)
            ],
            dtype=float,
        )
        if self.depends_on_candidate_set:
            scores /= frame.groupby("qid")["qid"].transform("size").to_numpy()
        return scores


def frame(rows):
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "text"])


D_Q = frame(
    [
        ("q1", "a b c", "d1", "a b c"),
        ("q1", "a b c", "d2", "a"),
        ("q1", "a b c", "d3", "x"),
        ("q2", "x y", "d4", "x y"),
    ]
)


def test_second_run_computes_nothing(tmp_path):
    cache = ScoreCache(tmp_path / "scores.sqlite")
    first = CachedRanker(WordOverlap(), cache, "collection-fp")
    out = first.transform(D_Q)
    assert out["score"].tolist() == [3.0, 1.0, 0.0, 2.0]
    assert out["rank"].tolist() == [0, 1, 2, 0]
    assert first.computed == 4
    again = CachedRanker(WordOverlap(), ScoreCache(tmp_path / "scores.sqlite"), "collection-fp")
    assert again.transform(D_Q)["score"].tolist() == [3.0, 1.0, 0.0, 2.0]
    assert again.computed == 0 and again.ranker.scored == 0
    # another collection fingerprint (a rebuilt collection) never sees these scores
    other = CachedRanker(WordOverlap(), cache, "rebuilt-fp")
    other.transform(D_Q)
    assert other.computed == 4


def test_pointwise_ranker_scores_only_missing_rows(tmp_path):
    cache = ScoreCache(tmp_path / "scores.sqlite")
    CachedRanker(WordOverlap(), cache, "fp").transform(D_Q.iloc[:2])
    later = CachedRanker(WordOverlap(), cache, "fp")
    later.transform(D_Q)
    assert later.computed == 2  # d3 and d4 only


def test_set_dependent_ranker_recomputes_whole_queries(tmp_path):
    cache = ScoreCache(tmp_path / "scores.sqlite")
    CachedRanker(WordOverlap(per_set=True), cache, "fp").transform(D_Q.iloc[:2])
    later = CachedRanker(WordOverlap(per_set=True), cache, "fp")
    out = later.transform(D_Q)
    assert later.computed == 4  # q1 lacked d3, so all of q1 (3 rows) plus q2 (1 row)
    assert out["score"].tolist() == [1.0, 1 / 3, 0.0, 2.0]


def test_fingerprint_ignores_batch_but_not_model_parameters():
    a, b = make_ranker("bm25:k1=1.2"), make_ranker("bm25:k1=0.9")
    assert a.fingerprint() != b.fingerprint()
    assert make_ranker("dense:batch=8").fingerprint() == make_ranker("dense:batch=64").fingerprint()


def test_composite_rankers_declare_their_parts():
    assert [r.spec() for r in make_ranker("fuse:rankers=bm25+tfidf").parts()] == ["bm25", "tfidf"]
    assert [r.spec() for r in make_ranker("guard:ranker=bm25").parts()] == ["bm25"]
    guard_of_fuse = make_ranker("guard:ranker=fuse:rankers=bm25+dph")
    (fuse,) = guard_of_fuse.parts()
    assert [r.spec() for r in fuse.parts()] == ["bm25", "dph"]
    assert [r.spec() for r in make_ranker("duot5:k=5").parts()] == ["monot5"]
    for spec in ("bm25", "tfidf", "dph", "random", "monot5"):
        assert make_ranker(spec).parts() == ()


@pytest.mark.parametrize(
    "spec, fingerprint",
    [
        # the cache keys of results already on disk: declaring parts changed none of them
        ("bm25", "cf74f133fa19eaf15afc"),
        ("dph", "132647dee4974112fb6d"),
        ("random:seed=3", "649d0cc55036c6e58d38"),
        ("fuse:rankers=bm25+tfidf", "d7fdf4e9d3b5dc145a8d"),
        # the packaged guard model is hashed, and the calibration rule (CALIBRATION 3 and the
        # model's floor of evidence changed it); what the model computes, not the record of
        # its fitting (a refit to the same weights keeps it; the refit by nrp train guard,
        # weights within 1.6e-5 of the model before, changed it; so did the feature definitions
        # 5, the disorder detector reading order beside fluency)
        ("guard:ranker=bm25", "8469aa6872d2a81efa11"),
    ],
)
def test_fingerprints_of_plain_and_composite_rankers_are_pinned(spec, fingerprint):
    assert make_ranker(spec).fingerprint() == fingerprint


def test_a_nested_spec_keeps_its_own_parameters_after_a_colon():
    # guard declares `model` too: in `ranker=` the `:model=` is the guarded ranker's
    guard = make_ranker("guard:ranker=dense:model=mpnet")
    assert guard.params["model"] == ""
    assert [r.spec() for r in guard.parts()] == ["dense:model=mpnet"]
    with pytest.raises(ConfigError, match=r"threshold='0.5:model=x' holds ':model='"):
        make_ranker("guard:threshold=0.5:model=x")
