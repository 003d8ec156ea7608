"""Any PyTerrier transformer as an nrp ranker (nrp.rankers.pyterrier): ``pt.apply.doc_score`` on
the hand-made collection of ``word_collection`` (scores counted by hand there), and pyterrier_t5's
``MonoT5ReRanker`` on a tiny random T5 built here, whose expected numbers come straight from the
transformer itself.

NRP by hand under overlap (ties mid, r = above + ties / 2, NRP = 1 - r / |D_q|): q1's D_q scores
3, 2, 1, 0 and q2's 3, 2, 0. "fever in children today" (3) ties a1: r = 0.5, NRP = 1 - 0.5/4;
"fever and children" (2) has a1 above and ties a2: r = 1.5, NRP = 1 - 1.5/4; "nothing here" (0)
on q2 has two above and ties b3: r = 2.5, NRP = 1 - 2.5/3.
"""

from __future__ import annotations

import pandas as pd
import pyterrier as pt
import pytest
from word_collection import DOCS, Counting, brevity, build_words, overlap, overlap_score

from nrp import api, engine
from nrp.errors import ConfigError, NrpError
from nrp.positioning.injection import FULL_TRANSFORM, POINTWISE, injection_mode
from nrp.rankers.coerce import as_ranker
from nrp.rankers.pyterrier import TransformerRanker, derived_key, from_transformer

ANSWERS = pd.DataFrame(
    {
        "answer_id": ["top", "mid", "none"],
        "qid": ["q1", "q1", "q2"],
        "text": ["fever in children today", "fever and children", "nothing here"],
    }
)
EXPECTED_NRP = {"top": 1 - 0.5 / 4, "mid": 1 - 1.5 / 4, "none": 1 - 2.5 / 3}
EXPECTED_SCORE = {"top": 3.0, "mid": 2.0, "none": 0.0}


@pytest.fixture
def words(tmp_path):
    return build_words(tmp_path)


def _nrp(result: pd.DataFrame, dimension: str = "relevance") -> dict[str, float]:
    rows = result[result["dimension"] == dimension]
    return dict(zip(rows["answer_id"], rows["nrp"], strict=True))


# -- doc_score as a ranker ---------------------------------------------------------------------
def test_score_takes_a_doc_score_transformer_with_exact_nrp(words):
    result = api.score(words, ANSWERS, pt.apply.doc_score(overlap_score))
    for dimension in ("relevance", "readability", "weighted"):
        assert _nrp(result, dimension) == EXPECTED_NRP
    rows = result[result["dimension"] == "relevance"].set_index("answer_id")
    assert rows["score"].to_dict() == EXPECTED_SCORE
    assert rows["rank"].to_dict() == {"top": 0.5, "mid": 1.5, "none": 2.5}
    assert rows["ties"].to_dict() == {"top": 1, "mid": 1, "none": 1}
    spec = rows["ranker"].iloc[0]
    assert spec.startswith("pyterrier:key=repr-")
    assert result.attrs["injection"][spec].startswith(f"{spec}: {POINTWISE}: ")
    counts = result.attrs["counts"]  # fast mode: 7 documents and 3 answers, each scored once
    assert (counts["documents_scored"], counts["answers_scored"]) == (7, 3)


def test_the_adapter_ranks_d_q_as_the_transformer_scores_it(words):
    ranker = from_transformer(overlap(), fingerprint="overlap-v1")
    ranked = ranker.transform(words.candidates()).set_index("docno")
    assert ranked["score"].to_dict() == {
        "a1": 3.0, "a2": 2.0, "a3": 1.0, "a4": 0.0, "b1": 3.0, "b2": 2.0, "b3": 0.0,
    }  # fmt: skip
    assert ranked["rank"].to_dict() == {
        "a1": 0, "a2": 1, "a3": 2, "a4": 3, "b1": 0, "b2": 1, "b3": 2,
    }  # fmt: skip
    assert ranker.injection == "pointwise" and injection_mode(ranker) == POINTWISE
    assert ranker.spec() == "pyterrier:key=overlap-v1" and ranker.score_tolerance == 0.0


def test_validate_and_nrp_with_transformers_score_d_q_once_and_each_answer_once(words):
    scorer = Counting(overlap_score)
    ranker = from_transformer(pt.apply.doc_score(scorer), fingerprint="overlap-counted")
    result = api.validate(words, [ranker, brevity()], validity=False)
    # every document of D_q, once, after the batch probe: a1, a2, b1, b2 together, then alone
    assert scorer.rows == 8 + 7
    summary = result.dimensions["relevance"].summary
    assert summary["pyterrier:key=overlap-counted"]["nDCG@10"].mean == 1.0
    chosen = result.chosen()
    assert chosen["relevance"] == "pyterrier:key=overlap-counted"
    assert chosen["readability"] == as_ranker(brevity()).spec()  # derived key, stable
    # NRP: D_q's scores from the score cache, one row per answer (fast mode)
    nrp = api.score(words, ANSWERS, ranker)  # bound again: probed once per ranker
    assert scorer.rows == 8 + 7 + 3 and _nrp(nrp) == EXPECTED_NRP
    again = api.score(words, ANSWERS, ranker)  # the results cache: nothing computed
    assert scorer.rows == 18 and _nrp(again) == EXPECTED_NRP
    # the validation JSON names the wrapped transformer by spec: found again in this process
    path = words.path / "validation.json"
    result.to_json(path)
    by_json = api.score(words, ANSWERS, path, cache=False)  # no cache: D_q and answers again
    assert _nrp(by_json, "relevance") == EXPECTED_NRP and scorer.rows == 18 + 7 + 3


def test_nrp_scorer_and_position_job_take_a_transformer(words):
    scorer = api.NRPScorer(words, overlap(), cache=False)
    out = scorer.transform(ANSWERS.rename(columns={"answer_id": "docno"}))
    assert dict(zip(out["docno"], out["nrp"], strict=True)) == EXPECTED_NRP
    assert out["n_docs"].tolist() == [4.0, 4.0, 3.0]
    # one transformer, not in a list (and no random control, which could win on 3 queries)
    single = api.validate(words, overlap(), validity=False, random_control=False)
    assert set(single.chosen().values()) == {f"pyterrier:key={derived_key(overlap())}"}
    job = engine.PositionJob.of(words, overlap())
    positions = engine.Positioner(job).position_now(ANSWERS)
    assert positions["above"].tolist() == [0, 1, 2] and positions["ties"].tolist() == [1, 1, 1]


def test_the_declared_tolerance_decides_ties(words):
    def nudged(row) -> float:  # "today" lifts the score by a hair
        return overlap_score(row) + (1e-9 if "today" in row["text"] else 0.0)

    answer = pd.DataFrame({"answer_id": ["a"], "qid": ["q1"], "text": ["fever children today"]})
    exact = api.score(words, answer, from_transformer(pt.apply.doc_score(nudged)), cache=False)
    assert _nrp(exact) == {"a": 1 - 1 / 4}  # a1 above, a2 below by 1e-9: r = 1
    lenient = from_transformer(pt.apply.doc_score(nudged), tolerance=1e-6)
    assert lenient.score_tolerance == 1e-6
    assert _nrp(api.score(words, answer, lenient, cache=False)) == {"a": 1 - 1.5 / 4}


def test_full_rerank_for_a_transformer_whose_scores_depend_on_the_candidates(words):
    def share_of_query(frame: pd.DataFrame) -> list[float]:  # normalised over the rows given
        raw = [overlap_score(row) for _, row in frame.iterrows()]
        return [x / max(sum(raw), 1.0) for x in raw]

    ranker = from_transformer(
        pt.apply.doc_score(share_of_query, batch_size=100), depends_on_candidate_set=True
    )
    assert injection_mode(ranker) == FULL_TRANSFORM
    assert _nrp(api.score(words, ANSWERS, ranker, cache=False)) == EXPECTED_NRP


# -- scores that depend on the batch: probed when bound -------------------------------------------
def by_batch_max(frame: pd.DataFrame) -> list[float]:
    """overlap divided by the largest overlap of the rows given together (at least 1)."""
    raw = [overlap_score(row) for _, row in frame.iterrows()]
    return [x / max(max(raw), 1.0) for x in raw]


def test_a_batch_dependent_transformer_is_found_and_re_ranked_in_full(words):
    ranker = from_transformer(pt.apply.doc_score(by_batch_max, batch_size=100))
    assert injection_mode(ranker) == POINTWISE  # as declared, until probed
    with pytest.warns(UserWarning, match="depend on the batch") as caught:
        ranker.bind_collection(words)
    # probe rows a1, a2, b1, b2 (overlap 3, 2, 3, 2): together 1, 2/3, 1, 2/3; alone 1 each
    assert ranker.batch_difference == pytest.approx(1 / 3)
    assert ranker.batch_dependent and ranker.depends_on_candidate_set
    assert injection_mode(ranker) == FULL_TRANSFORM
    assert "NRP re-ranks D_q plus each answer in full" in ranker.description
    assert len([w for w in caught if "depend on the batch" in str(w.message)]) == 1
    # full re-rank: dividing by the max of D_q plus the answer keeps the order, NRP is exact
    assert _nrp(api.score(words, ANSWERS, ranker, cache=False)) == EXPECTED_NRP
    # unprobed, the fast mode compares "mid" scored alone (2 / 2 = 1) with D_q's scores (2 / 3
    # for a2): it ties a1 instead of sitting between a1 and a2
    blind = from_transformer(pt.apply.doc_score(by_batch_max, batch_size=100), check_batch=False)
    mid = ANSWERS[ANSWERS["answer_id"] == "mid"]
    assert _nrp(api.score(words, mid, blind, cache=False)) == {"mid": 1 - 0.5 / 4}
    assert _nrp(api.score(words, mid, ranker, cache=False)) == {"mid": EXPECTED_NRP["mid"]}


def test_a_pointwise_transformer_passes_the_probe_silently(words, recwarn):
    ranker = from_transformer(overlap(), fingerprint="overlap-probed")
    ranker.bind_collection(words)
    assert ranker.batch_difference == 0.0 and not ranker.batch_dependent
    assert injection_mode(ranker) == POINTWISE
    assert not [w for w in recwarn if "depend on the batch" in str(w.message)]
    assert ranker.description.endswith("pointwise: D_q scored once, each answer one more row")


def test_monot5_reranker_with_batches_of_four_is_re_ranked_in_full(words, tiny_t5):
    pyterrier_t5 = pytest.importorskip("pyterrier_t5")
    folder = str(tiny_t5)
    t5 = pyterrier_t5.MonoT5ReRanker(folder, folder, batch_size=4, device="cpu", verbose=False)
    ranker = from_transformer(t5, fingerprint="tiny-monot5-batch4", tolerance=1e-5)
    with pytest.warns(UserWarning, match="depend on the batch"):
        ranker.bind_collection(words)
    assert ranker.batch_difference > 1e-3  # padding moves scores by ~1e-2 on this model
    assert injection_mode(ranker) == FULL_TRANSFORM


def scorer_of(constant: float):
    def score(row) -> float:  # one name for every constant: two rankers, one function name
        return constant

    return pt.apply.doc_score(score)


def test_without_a_name_a_function_or_short_repr_is_shown_not_the_derived_key(words):
    shown = from_transformer(overlap())
    assert str(shown) == "overlap_score" and shown.spec().startswith("pyterrier:key=repr-")
    result = api.validate(words, [shown, brevity()], validity=False, random_control=False)
    assert [info.name for info in result.systems] == ["overlap_score", "brevity_score"]
    assert result.chosen()["relevance"] == shown.spec()
    anonymous = from_transformer(pt.apply.doc_score(lambda row: 1.0))
    assert str(anonymous) == anonymous.spec()  # a lambda: nothing to show but the key
    fingerprinted = from_transformer(overlap(), fingerprint="overlap-v2")
    assert str(fingerprinted) == "pyterrier:key=overlap-v2"  # the user's own name for it
    one, two = from_transformer(scorer_of(1.0)), from_transformer(scorer_of(2.0))
    assert str(one) == "score" and str(two) == f"score [{two.params['key'][:13]}]"
    assert str(from_transformer(scorer_of(1.0))) == "score"  # the same key: the same name
    assert str(from_transformer(pt.Transformer.from_df(words.candidates()))).startswith(
        "pyterrier:key=repr-"
    )  # a repr with an address, or too long to show


def test_a_display_name_shows_in_tables_and_the_spec_still_finds_it(words):
    ranker = from_transformer(overlap(), name="overlap")
    assert str(ranker) == "overlap" and ranker.spec().startswith("pyterrier:key=repr-")
    result = api.validate(words, [ranker, brevity()], validity=False, random_control=False)
    assert [info.name for info in result.systems] == ["overlap", str(as_ranker(brevity()))]
    assert result.chosen()["relevance"] == ranker.spec()  # the spec rebuilds it
    # names for any rankers, as pt.Experiment's names: a mapping of name to ranker
    named = api.validate(
        words, {"words": overlap(), "short": brevity()}, validity=False, random_control=False
    )
    assert [info.name for info in named.systems] == ["words", "short"]
    assert named.dimensions["relevance"].choice.best == "words"
    assert named.dimensions["readability"].choice.best == "short"
    with pytest.raises(ConfigError, match="ranker name 'same' given twice"):
        api.validate(words, [from_transformer(overlap(), name="same"),
                             from_transformer(brevity(), name="same")], validity=False)  # fmt: skip
    with pytest.raises(ConfigError, match="name"):
        from_transformer(overlap(), name=" ")


# -- keys, specs and errors --------------------------------------------------------------------
def test_derived_keys_tell_functions_apart_and_are_stable():
    assert repr(overlap()) == repr(brevity()) == "pt.apply.doc_score()"
    assert derived_key(overlap()) == derived_key(overlap())
    assert derived_key(overlap()) != derived_key(brevity())
    # callables without code are keyed by their repr (an address: this process only)
    assert derived_key(pt.apply.doc_score(Counting(overlap_score))) != derived_key(
        pt.apply.doc_score(Counting(overlap_score))
    )
    assert as_ranker(overlap()).spec() == f"pyterrier:key={derived_key(overlap())}"


def test_bad_input_is_a_one_line_error(words):
    with pytest.raises(ConfigError, match="not a PyTerrier transformer"):
        TransformerRanker(lambda frame: frame)
    with pytest.raises(ConfigError, match="already an nrp ranker"):
        from_transformer(api.make_ranker("random"))
    with pytest.raises(ConfigError, match="tolerance"):
        from_transformer(overlap(), tolerance=-1.0)
    with pytest.raises(ConfigError, match="fingerprint"):
        from_transformer(overlap(), fingerprint="a,b")
    with pytest.raises(ConfigError, match="not wrapped in this process"):
        as_ranker("pyterrier:key=never-wrapped")
    with pytest.raises(ConfigError, match="dimension 'relevance': not a ranker spec"):
        api.score(words, ANSWERS, {"relevance": 42})
    first_only = pt.apply.generic(lambda frame: frame.head(1).assign(score=1.0))
    with pytest.raises(NrpError, match="returned 1 rows for 4"):  # the batch probe's 4 rows
        api.validate(words, [first_only])
    with pytest.raises(NrpError, match="returned 1 rows for 7"):
        api.validate(words, [from_transformer(first_only, check_batch=False)])


# -- pyterrier_t5's MonoT5ReRanker on a tiny T5 ------------------------------------------------
@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("sentencepiece")
    from tiny_models import build_tiny_t5, build_tiny_t5_tokenizer

    root = tmp_path_factory.mktemp("tiny-t5")
    return build_tiny_t5(root / "mono", build_tiny_t5_tokenizer(root / "tok"), seed=0)


def _expected_nrp(scores: dict[str, float], docs: dict[str, list[float]], tol: float) -> dict:
    """r = above + ties / 2 with ties within ``tol * max(1, |s|)`` (nrp.ranks)."""
    out = {}
    for answer_id, qid in zip(ANSWERS["answer_id"], ANSWERS["qid"], strict=True):
        s, margin = scores[answer_id], tol * max(1.0, abs(scores[answer_id]))
        above = sum(d > s + margin for d in docs[qid])
        ties = sum(abs(d - s) <= margin for d in docs[qid])
        out[answer_id] = 1 - (above + ties / 2) / len(docs[qid])
    return out


def test_monot5_reranker_validated_and_used_for_nrp(words, tiny_t5):
    pyterrier_t5 = pytest.importorskip("pyterrier_t5")
    folder = str(tiny_t5)
    # batch_size=1: pyterrier_t5 pads a batch before its prompt, so its scores move with the
    # batch (by ~1e-2 on this model; nrp.rankers.t5): only one row per batch is pointwise
    t5 = pyterrier_t5.MonoT5ReRanker(folder, folder, batch_size=1, device="cpu", verbose=False)
    one = pyterrier_t5.MonoT5ReRanker(folder, folder, batch_size=1, device="cpu", verbose=False)
    ranker = from_transformer(t5, fingerprint="tiny-monot5-seed0", tolerance=1e-5)
    candidates = words.candidates()
    direct = one.transform(candidates)
    docs = {q: group["score"].tolist() for q, group in direct.groupby("qid")}
    rows = ANSWERS.assign(query=ANSWERS["qid"].map(candidates.groupby("qid")["query"].first()))
    scored = one.transform(rows.rename(columns={"answer_id": "docno"}))
    answer_scores = dict(zip(scored["docno"], scored["score"], strict=True))
    validation = api.validate(words, [ranker, "random"], validity=False)
    assert validation.systems[0].fingerprint == ranker.fingerprint()
    assert validation.systems[0].computed == len(candidates)
    result = api.score(words, ANSWERS, ranker)
    rel = result[result["dimension"] == "relevance"].set_index("answer_id")
    assert rel["score"].to_dict() == pytest.approx(answer_scores, rel=1e-5)
    assert rel["nrp"].to_dict() == _expected_nrp(answer_scores, docs, 1e-5)
    # an answer copying a document verbatim ties with it under the declared tolerance
    copy = pd.DataFrame({"answer_id": ["copy"], "qid": ["q1"], "text": [DOCS["a2"][1]]})
    position = engine.Positioner(engine.PositionJob.of(words, ranker)).position_now(copy)
    assert position["ties"].iloc[0] >= 1
    assert str(t5) in repr(ranker)
