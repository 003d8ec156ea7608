"""scripts/fit_guard.py: the boilerplate it mines from the fitting documents, worked out by hand
(the negatives of the guard's ``generic`` detector, in no wording of nrp's own), and the
non-answers and answers an LLM writes for the fitting questions, with a tiny random Llama built
here, and the direction of ``answer_like`` fitted on toy embeddings."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fit_guard.py"
fit_guard = SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="fit_guard"))

REFERRAL = "Talk to your healthcare provider about your options."
DISCLAIMER = "This page does not replace the advice of a professional."


def candidates() -> pd.DataFrame:
    rows = [
        ("q1", "Is coffee bad?", f"Coffee raises blood pressure for a few hours. {REFERRAL}"),
        ("q2", "Can I run with asthma?", f"Warm up slowly and carry an inhaler. {REFERRAL} "
         f"{DISCLAIMER}"),
        ("q3", "What is gout?", f"Gout is arthritis caused by uric acid crystals. {DISCLAIMER}"),
        ("q4", "Does zinc help colds?", "Zinc lozenges may shorten a cold by a day. Ok."),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["qid", "query", "text"]).assign(docno="d")


def test_boilerplate_is_what_the_documents_of_several_questions_repeat():
    mined = fit_guard.boilerplate_texts(candidates(), min_questions=2, per_query=1, seed=0)
    # REFERRAL is in the documents of q1 and q2, DISCLAIMER in q2 and q3: each question gets
    # the sentences its own documents do not have ("Ok." is too short to count)
    by_question = dict(zip(mined["qid"], mined["text"], strict=True))
    assert by_question["q1"] == f"Is coffee bad? {DISCLAIMER}"
    assert by_question["q3"] == f"What is gout? {REFERRAL}"
    assert "q2" not in by_question  # both sentences are its own
    # q4 has neither: one to three of both, drawn with the seed (here both)
    assert by_question["q4"] == f"Does zinc help colds? {DISCLAIMER} {REFERRAL}"
    assert set(mined["kind"]) == {"boilerplate"} and set(mined["family"]) == {"mined"}
    # no sentence repeated by three questions: nothing is mined
    assert fit_guard.boilerplate_texts(candidates(), 3, 1, 0).empty


def test_near_best_is_the_best_document_of_the_closest_other_questions():
    from nrp.validation.degenerate import QueryMaterial

    materials = [
        QueryMaterial("q1", "warfarin dose", ["W best", "W other"], None),
        QueryMaterial("q2", "warfarin storage", ["S best"], None),
        QueryMaterial("q3", "gout diet", ["G best"], None),
        QueryMaterial("q4", "no documents", [], None),
    ]
    judged = pd.DataFrame(
        [("q1", "W best"), ("q1", "W other"), ("q2", "S best"), ("q2", "W other"),
         ("q3", "G best")], columns=["qid", "text"],
    )  # fmt: skip
    # hand-made unit vectors: q1 and q2 are close (cosine 0.8), q3 is far from both
    vectors = {
        "warfarin dose": [1.0, 0.0, 0.0],
        "warfarin storage": [0.8, 0.6, 0.0],
        "gout diet": [0.0, 0.6, 0.8],
    }
    asked: list[list[str]] = []

    def embed(texts):
        asked.append(list(texts))
        return np.array([vectors[t] for t in texts])

    near = fit_guard.near_best_texts(materials, judged, 1, embed)
    assert asked == [["warfarin dose", "warfarin storage", "gout diet"]]  # q4 has no document
    by_question = dict(zip(near["qid"], near["text"], strict=True))
    # q1's closest is q2 (0.8 against 0.0); q2's closest is q1 (0.8 against 0.36); q3's is q2
    # (0.36 against 0.0)
    assert by_question == {"q1": "S best", "q2": "W best", "q3": "S best"}
    assert set(near["kind"]) == {"near_best"} and set(near["family"]) == {"mined"}
    # two per question: each gets its closest and then its next
    two = fit_guard.near_best_texts(materials, judged, 2, embed)
    assert two.groupby("qid")["text"].apply(list).to_dict() == {
        "q1": ["S best", "G best"],
        "q2": ["W best", "G best"],
        "q3": ["S best", "W best"],
    }
    # a document judged for the question itself is skipped: with q1's best judged for q2 too,
    # q2 gets its next neighbour's (q3's)
    judged.loc[len(judged)] = ("q2", "W best")
    skipped = fit_guard.near_best_texts(materials, judged, 1, embed)
    assert dict(zip(skipped["qid"], skipped["text"], strict=True))["q2"] == "G best"
    assert fit_guard.near_best_texts(materials, judged, 0, embed).empty


def test_negative_kinds_accepts_the_mined_kind_beside_the_generated_ones():
    assert fit_guard.negative_kinds("boilerplate") == ["boilerplate"]
    assert fit_guard.negative_kinds("echo,boilerplate") == ["echo", "boilerplate"]
    assert fit_guard.negative_kinds("other_best,near_best") == ["other_best", "near_best"]


def test_written_non_answers_are_one_reply_per_question_and_prompt_kept_for_the_next_fit(
    tmp_path, monkeypatch
):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parent / "llm"))
    from tiny_llm import build_tiny_llama

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = build_tiny_llama(tmp_path / "tiny")
    args = SimpleNamespace(
        indexes=tmp_path / "indexes", written_tokens=4, seed=0,
        written_llm=f"local:model={model},name=tiny,device=cpu",
    )  # fmt: skip
    args.indexes.mkdir()
    prompts = [p.stem for p in fit_guard.written_prompts()]
    assert prompts == ["deflect", "disclaimer", "paraphrase", "stall"]
    # none of them is the outside check's prompt
    check = (SCRIPT.parents[1] / "docs" / "examples" / "evasive-reply.txt").read_text()
    assert all(p.read_text() != check for p in fit_guard.written_prompts())
    written = fit_guard.written_non_answers(candidates(), args)
    assert len(written) == 16  # 4 questions x 4 prompts
    assert sorted(set(written["kind"])) == [f"written:{p}" for p in prompts]
    assert set(written["family"]) == {"written"} and set(written["docno"]) == {""}
    assert written.groupby("kind")["qid"].apply(sorted).tolist() == [["q1", "q2", "q3", "q4"]] * 4
    questions = dict(zip(candidates()["qid"], candidates()["query"], strict=True))
    assert all(
        questions[q] == query for q, query in zip(written["qid"], written["query"], strict=True)
    )
    assert written["text"].str.strip().ne("").all()
    # kept beside the collections: the next fit reads the same replies and generates none
    kept = args.indexes / "guard-written-non-answers.jsonl"
    store = args.indexes / ".guard-written-non-answers.jsonl.store.jsonl"
    lines = store.read_text().count("\n")
    assert kept.is_file() and lines == 16
    again = fit_guard.written_non_answers(candidates(), args)
    pd.testing.assert_frame_equal(again, written)
    assert store.read_text().count("\n") == lines
    # the same LLM's answers under nrp's own answer prompts: positives of answer_like's direction
    answers = fit_guard.written_answers(candidates(), args)
    assert sorted(answers["kind"].value_counts().items()) == [
        ("llm_answer:long-qa", 4), ("llm_answer:short-qa", 4)
    ]  # fmt: skip
    assert set(answers["family"]) == {"llm_answer"}
    assert (args.indexes / "guard-written-answers.jsonl").is_file()


def test_answer_like_of_a_fitting_row_comes_from_a_direction_fitted_without_its_question():
    """Embeddings where the first coordinate tells answers (+1) from written non-answers (-1)
    and the second is noise: the direction's weight is on the first. A row outside ``within``
    gets the direction of all ``within`` rows; a row inside it the value of a direction fitted
    without its question (another value, of the same sign)."""
    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(10) for _ in range(4)]
    kind = ["judged", "judged", "written:stall", "llm_answer:short-qa"] * 10
    rows = pd.DataFrame({"qid": qids, "kind": kind,
                         "family": [k.split(":")[0] for k in kind]})  # fmt: skip
    sign = np.where(rows["kind"].eq("written:stall"), -1.0, 1.0)
    embeddings = np.column_stack([sign + rng.normal(0, 0.3, 40), rng.normal(0, 1, 40)])
    answers = rows["kind"].eq("judged").to_numpy()
    within = rows["qid"].ne("q9").to_numpy()
    args = SimpleNamespace(direction_l2=1.0, seed=0)
    column, (weights, offset) = fit_guard.answer_like_column(embeddings, rows, answers, within,
                                                             args)  # fmt: skip
    assert weights[0] > 0 and abs(weights[0]) > 5 * abs(weights[1])
    assert column[~within] == pytest.approx(embeddings[~within] @ weights + offset)
    assert not np.allclose(column[within], embeddings[within] @ weights + offset)
    assert (np.sign(column) == sign).all()


def test_terse_answers_are_the_share_of_first_sentences_drawn_with_the_seed():
    """``--terse-answers``: of 2,000 rows, the 1,000 first sentences all join the real answers at
    1 and none at 0; at 0.25 the rows whose draw (numpy's generator, seed 0, one per row) is
    under 0.25, counted here from the same draws: a first sentence only, never another kind."""
    kinds = np.array(["first_sentence", "echo"] * 1000)
    rows = pd.DataFrame({"kind": kinds})
    first = kinds == "first_sentence"
    assert (fit_guard.terse_answers(rows, 1.0, 0) == first).all()
    assert not fit_guard.terse_answers(rows, 0.0, 0).any()
    quarter = fit_guard.terse_answers(rows, 0.25, 0)
    draws = np.random.default_rng(0).random(2000)
    assert quarter.sum() == (first & (draws < 0.25)).sum()
    assert 200 < quarter.sum() < 300 and not quarter[~first].any()
    assert (fit_guard.terse_answers(rows, 0.25, 1) != quarter).any()  # another seed, another draw


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--cross-fit", "1"], "--cross-fit must be at least 2, got 1"),
        (["--cross-fit", "-3"], "--cross-fit must be at least 2, got -3"),
        (["--written-tokens", "0"], "--written-tokens must be at least 1, got 0"),
        (["--direction-l2", "0"], "--direction-l2 must be above 0, got 0.0"),
        (["--terse-answers", "1.5"], "--terse-answers must be a share from 0 to 1, got 1.5"),
        (["--terse-answers", "-0.1"], "--terse-answers must be a share from 0 to 1, got -0.1"),
        (
            ["--fluency-collections", "argquality-20,nope"],
            "--fluency-collections: no manifests/nope.yaml",
        ),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2_before_anything_is_read_or_written(
    tmp_path, capsys, option, message
):
    indexes, out = tmp_path / "indexes", tmp_path / "guard.json"
    assert fit_guard.main([*option, "--indexes", str(indexes), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"fit_guard: {message}\n"
    assert not indexes.exists() and not out.exists()  # nothing ingested, generated or written


def test_the_fluency_collections_documents_are_read_from_an_ingest_of_their_manifest(
    tmp_path, shared_data
):
    """``--fluency-collections argquality-20``: the collection is ingested into an empty indexes
    folder from its manifest and its 1,590 distinct texts are returned (1,610 judged arguments:
    four judged under two topics, and some arguments share a text); none without the option."""
    shared_data("argquality-20")
    args = SimpleNamespace(fluency_collections="argquality-20", indexes=tmp_path / "indexes")
    texts = fit_guard.fluency_documents(args)
    assert len(texts) == len(set(texts)) == 1590
    assert (tmp_path / "indexes" / "argquality-20").is_dir()
    assert fit_guard.fluency_documents(SimpleNamespace(fluency_collections=" ", indexes=None)) == []


def test_the_feature_cache_computes_only_the_rows_it_lacks(tmp_path):
    """A cached row whose spec_rd is unknown (NaN: its question has no other judged answer) is
    read from the cache, not computed again on every run; a row the cache lacks is computed."""
    from nrp.rankers.guard_features import GuardFeatures
    from nrp.rankers.guard_model import GuardModel

    class Encoder:  # a text's counts of two words, unit length
        def fingerprint(self) -> str:
            return "two-words"

        def encode(self, texts, desc=None):
            rows = np.array([[t.count("apple"), t.count("pear")] for t in texts], float) + 1e-9
            return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    computed: list[int] = []

    class Counted(GuardFeatures):
        def frame(self, queries, texts):
            computed.append(len(texts))
            return super().frame(queries, texts)

    documents = {"Which fruit?": ["apple", "apple pear"], "Which tree?": ["pear grows on trees"]}
    features = Counted(GuardModel(("spec_rd",), (1.0,), 0.0, 0.5), Encoder(), [], documents)
    rows = pd.DataFrame({"query": ["Which fruit?", "Which tree?", "Lone?"],
                         "text": ["apple apple", "pear", "apple"]})  # fmt: skip
    cache = tmp_path / "features.pkl"
    first = fit_guard.feature_table(rows, features, cache)
    assert np.isnan(first["spec_rd"].iloc[2]) and not first["spec_rd"].iloc[:2].isna().any()
    again = fit_guard.feature_table(rows, features, cache)
    more = pd.concat([rows, pd.DataFrame({"query": ["Which tree?"], "text": ["pear pear"]})])
    fit_guard.feature_table(more.reset_index(drop=True), features, cache)
    assert computed == [3, 1]  # all three; none; the new row alone
    pd.testing.assert_frame_equal(again, first)
