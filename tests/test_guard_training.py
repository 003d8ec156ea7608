"""The guard's fitting rows and fit (``nrp.training.guard_data``, ``guard_train``): the boilerplate
mined from the fitting documents, worked out by hand (the negatives of the guard's ``generic``
detector, in no wording of nrp's own), the non-answers and answers an LLM writes for the fitting
questions, with a tiny random Llama built here, the direction of ``answer_like`` fitted on toy
embeddings, and the settings' checks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nrp.errors import ConfigError
from nrp.training import guard_data, guard_train
from nrp.training.guard_settings import GuardTrainSettings

ROOT = Path(__file__).resolve().parents[1]

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
    mined = guard_data.boilerplate_texts(candidates(), min_questions=2, per_query=1, seed=0)
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
    assert guard_data.boilerplate_texts(candidates(), 3, 1, 0).empty


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

    near = guard_data.near_best_texts(materials, judged, 1, embed)
    assert asked == [["warfarin dose", "warfarin storage", "gout diet"]]  # q4 has no document
    by_question = dict(zip(near["qid"], near["text"], strict=True))
    # q1's closest is q2 (0.8 against 0.0); q2's closest is q1 (0.8 against 0.36); q3's is q2
    # (0.36 against 0.0)
    assert by_question == {"q1": "S best", "q2": "W best", "q3": "S best"}
    assert set(near["kind"]) == {"near_best"} and set(near["family"]) == {"mined"}
    # two per question: each gets its closest and then its next
    two = guard_data.near_best_texts(materials, judged, 2, embed)
    assert two.groupby("qid")["text"].apply(list).to_dict() == {
        "q1": ["S best", "G best"],
        "q2": ["W best", "G best"],
        "q3": ["S best", "W best"],
    }
    # a document judged for the question itself is skipped: with q1's best judged for q2 too,
    # q2 gets its next neighbour's (q3's)
    judged.loc[len(judged)] = ("q2", "W best")
    skipped = guard_data.near_best_texts(materials, judged, 1, embed)
    assert dict(zip(skipped["qid"], skipped["text"], strict=True))["q2"] == "G best"
    assert guard_data.near_best_texts(materials, judged, 0, embed).empty


def test_negative_kinds_accepts_the_mined_kind_beside_the_generated_ones():
    assert guard_train.negative_kinds("boilerplate") == ["boilerplate"]
    assert guard_train.negative_kinds("echo,boilerplate") == ["echo", "boilerplate"]
    assert guard_train.negative_kinds("other_best,near_best") == ["other_best", "near_best"]


def test_written_non_answers_are_one_reply_per_question_and_prompt_kept_for_the_next_fit(
    tmp_path, monkeypatch
):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(Path(__file__).resolve().parent / "llm"))
    from tiny_llm import build_tiny_llama

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = build_tiny_llama(tmp_path / "tiny")
    settings = GuardTrainSettings(
        written_tokens=4, seed=0, written_llm=f"local:model={model},name=tiny,device=cpu"
    )
    indexes = tmp_path / "indexes"
    indexes.mkdir()
    prompts = [p.stem for p in guard_data.written_prompts()]
    assert prompts == ["deflect", "disclaimer", "paraphrase", "stall"]
    # none of them is the outside check's prompt
    check = (ROOT / "docs" / "examples" / "evasive-reply.txt").read_text()
    assert all(p.read_text() != check for p in guard_data.written_prompts())
    written = guard_data.written_non_answers(candidates(), settings, indexes)
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
    kept = indexes / "guard-written-non-answers.jsonl"
    store = indexes / ".guard-written-non-answers.jsonl.store.jsonl"
    lines = store.read_text().count("\n")
    assert kept.is_file() and lines == 16
    again = guard_data.written_non_answers(candidates(), settings, indexes)
    pd.testing.assert_frame_equal(again, written)
    assert store.read_text().count("\n") == lines
    # the same LLM's answers under nrp's own answer prompts: positives of answer_like's direction
    answers = guard_data.written_answers(candidates(), settings, indexes)
    assert sorted(answers["kind"].value_counts().items()) == [
        ("llm_answer:long-qa", 4), ("llm_answer:short-qa", 4)
    ]  # fmt: skip
    assert set(answers["family"]) == {"llm_answer"}
    assert (indexes / "guard-written-answers.jsonl").is_file()


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
    settings = GuardTrainSettings(direction_l2=1.0, seed=0)
    column, (weights, offset) = guard_train.answer_like_column(embeddings, rows, answers, within,
                                                               settings)  # fmt: skip
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
    assert (guard_data.terse_answers(rows, 1.0, 0) == first).all()
    assert not guard_data.terse_answers(rows, 0.0, 0).any()
    quarter = guard_data.terse_answers(rows, 0.25, 0)
    draws = np.random.default_rng(0).random(2000)
    assert quarter.sum() == (first & (draws < 0.25)).sum()
    assert 200 < quarter.sum() < 300 and not quarter[~first].any()
    assert (guard_data.terse_answers(rows, 0.25, 1) != quarter).any()  # another seed, another draw


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cross_fit", 1, "cross_fit must be 0 (none) or at least 2, got 1"),
        ("cross_fit", -3, "cross_fit must be 0 (none) or at least 2, got -3"),
        ("written_tokens", 0, "written_tokens must be at least 1, got 0"),
        ("direction_l2", 0.0, "direction_l2 must be a finite number above 0, got 0.0"),
        ("terse_answers", 1.5, "terse_answers must be a share from 0 to 1, got 1.5"),
        ("terse_answers", -0.1, "terse_answers must be a share from 0 to 1, got -0.1"),
        ("near_best", -1, "near_best must be at least 0, got -1"),
        ("rest_words", -2, "rest_words must be at least 0 (0: the whole rest), got -2"),
        (
            "held_out",
            "nope",
            "held_out must be a family (mirror, evasion, damaged, off_topic), got 'nope'",
        ),
    ],
)
def test_a_bad_setting_is_one_line_before_anything_is_read(field, value, message):
    with pytest.raises(ConfigError) as raised:
        GuardTrainSettings(**{field: value}).checked()
    assert str(raised.value) == f"guard training: {message}"


def test_the_reference_questions_are_the_patterns_or_every_fourth_drawn_with_the_seed():
    """``t1-*`` sets training set 1 aside as MEDIQA's packaged fit does; with no pattern every
    fourth question of a seeded shuffle is a reference; left-out questions are neither."""
    qids = ["t1-1", "t1-2", "t2-1", "t2-2", "v-1", "v-24"] * 2
    settings = GuardTrainSettings(reference_queries=("t1-*",), leave_out=("v-24",))
    assert guard_data.split_questions(qids, settings) == (["t2-1", "t2-2", "v-1"], ["t1-1", "t1-2"])
    many = [f"q{i:02d}" for i in range(12)]
    fitted, reference = guard_data.split_questions(many, GuardTrainSettings(seed=0))
    shuffled = list(many)
    np.random.default_rng(0).shuffle(shuffled)
    assert reference == sorted(shuffled[::4]) and len(reference) == 3
    assert sorted(fitted + reference) == many
    _, other = guard_data.split_questions(many, GuardTrainSettings(seed=1))
    assert other != reference


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
    first = guard_data.feature_table(rows, features, cache)
    assert np.isnan(first["spec_rd"].iloc[2]) and not first["spec_rd"].iloc[:2].isna().any()
    again = guard_data.feature_table(rows, features, cache)
    more = pd.concat([rows, pd.DataFrame({"query": ["Which tree?"], "text": ["pear pear"]})])
    guard_data.feature_table(more.reset_index(drop=True), features, cache)
    assert computed == [3, 1]  # all three; none; the new row alone
    pd.testing.assert_frame_equal(again, first)
    # a cache of another rest_words (the rest's features read other texts): every row again
    cut = Counted(GuardModel(("spec_rd",), (1.0,), 0.0, 0.5, rest_words=1), Encoder(), [],
                  documents)  # fmt: skip
    guard_data.feature_table(rows, cut, cache)
    guard_data.feature_table(rows, cut, cache)
    assert computed == [3, 1, 3]  # then none: the cache is the cut rest's now


@pytest.fixture(scope="module")
def demo_fitting(tmp_path_factory):
    """The demo collection ingested, and a tiny random Llama to write the replies with."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from importlib import resources

    from nrp import ingest

    sys.path.insert(0, str(Path(__file__).resolve().parent / "llm"))
    from tiny_llm import build_tiny_llama

    folder = tmp_path_factory.mktemp("guard-fit")
    ingest(resources.files("nrp") / "data" / "demo" / "manifest.yaml", indexes_dir=folder / "ix")
    model = build_tiny_llama(folder / "tiny")
    return folder / "ix", f"local:model={model},name=tiny,device=cpu"


def test_nrp_train_guard_fits_a_model_that_guard_model_reads_back(
    demo_fitting, tmp_path, capsys, monkeypatch
):
    """``nrp train guard demo``: 6 of the demo's 8 questions fitted on (d7, d8 the references),
    the written replies generated once and kept beside the collection, the model file written
    with its format block and what it was fitted on; ``guard:model=FILE`` scores with it. A
    second fit reads the kept replies and writes the same bytes."""
    import json

    from nrp import Collection
    from nrp.cli import main
    from nrp.rankers.guard_model import GuardModel, model_format
    from nrp.rankers.registry import make_ranker

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    indexes, llm = demo_fitting
    out = tmp_path / "guard.json"
    command = ["train", "guard", "demo", "--out", str(out), "--indexes", str(indexes),
               "--reference-queries", "d7", "d8", "--written-llm", llm,
               "--written-tokens", "4", "--restated-grade", "2"]  # fmt: skip
    assert main(command) == 0
    printed = capsys.readouterr().out.splitlines()
    print("\n".join(printed))
    # no sentence recurs in the documents of 5 demo questions: no boilerplate, no generic
    names = [name for name, _, _ in guard_train.DETECTORS if name != "generic"]
    assert [line.split(":")[0] for line in printed[: len(names)]] == names
    assert printed[len(names)] == (
        "generic: not fitted (no boilerplate texts among the fitting texts)"
    )
    assert printed[-1].startswith(f"wrote {out}")
    data = json.loads(out.read_text())
    assert data["format"] == model_format()
    fitted = data["fitted_on"]
    collection = Collection.load("demo", indexes)
    assert fitted["collection"] == "demo"
    assert fitted["collection_fingerprint"] == collection.meta["fingerprint"]
    assert (fitted["queries"], fitted["reference_queries"], fitted["dimension"]) == (
        6,
        2,
        "relevance",
    )
    assert fitted["settings"]["written_tokens"] == 4
    assert fitted["settings"]["reference_queries"] == ["d7", "d8"]
    # 4 written prompts x 6 questions, 2 answer prompts x 6 questions, kept beside the collection
    kept = collection.path / ".guard-written-non-answers.jsonl.store.jsonl"
    assert kept.read_text().count("\n") == 24
    assert (collection.path / ".guard-written-answers.jsonl.store.jsonl").read_text().count(
        "\n") == 12  # fmt: skip
    # each detector flags at most 1% of the real answers at its threshold, and every echo
    assert fitted["flagged_share_at_threshold"]["judged"] <= 0.05
    assert fitted["flagged_share_at_threshold"]["echo"] == 1.0
    # floored: the evidence summed over the detectors above the floor, as the guard scores
    floored = fitted["floored_share_at_fit"]
    assert floored["echo"] == 1.0
    assert all(floored[k] <= fitted["flagged_share_at_threshold"][k] for k in floored)
    model = GuardModel.from_json(out)
    assert [d.fitted_on["name"] for d in (model, *model.also)] == names
    ranker = make_ranker(f"guard:ranker=tfidf,model={out}")
    assert ranker.model == model
    echo = "Does vitamin C prevent colds?"
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"llm": "m", "prompt": "p", "qid": "d1", "text": echo}) + "\n")
    assert main(["score", "demo", str(answers), "--ranker", f"relevance=guard:ranker=tfidf,"
                 f"model={out}", "--out", str(tmp_path / "scored"), "--indexes",
                 str(indexes)]) == 0  # fmt: skip
    again = tmp_path / "again.json"
    assert main([*command[:4], str(again), *command[5:]]) == 0
    assert again.read_bytes() == out.read_bytes()
    assert kept.read_text().count("\n") == 24  # nothing generated the second time
    # --rest-words: the model keeps it and says so in its format block; the guard reads it
    cut = tmp_path / "cut.json"
    assert main([*command[:4], str(cut), *command[5:], "--rest-words", "3"]) == 0
    data = json.loads(cut.read_text())
    assert data["rest_words"] == 3 and data["format"] == model_format(3)
    assert data["format"]["features_version"] == 6 and data["fitted_on"]["settings"][
        "rest_words"] == 3  # fmt: skip
    assert make_ranker(f"guard:ranker=tfidf,model={cut}").model.rest_words == 3
    assert kept.read_text().count("\n") == 24


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--cross-fit", "1"], "guard training: cross_fit must be 0 (none) or at least 2, got 1"),
        (
            ["--held-out", "mirror"],
            "guard training: held_out 'mirror' is fitted on by mirror, "
            "elsewhere, asking: hold out a family no detector is fitted on",
        ),
        (
            ["--dimension", "nope"],
            "guard training: demo has no dimension 'nope' (it has relevance, readability)",
        ),
        (["--fluency-collections", "nope"], "unknown collection 'nope'"),
        (
            ["--rest-words", "-1"],
            "guard training: rest_words must be at least 0 (0: the whole rest), got -1",
        ),
    ],
)
def test_a_bad_option_is_one_line_exit_2_and_nothing_generated_or_written(
    demo_fitting, tmp_path, capsys, option, message
):
    import shutil

    from nrp.cli import main

    indexes = tmp_path / "ix"
    shutil.copytree(demo_fitting[0], indexes)
    for kept in (indexes / "demo").glob("*guard-written*"):
        kept.unlink()
    out = tmp_path / "guard.json"
    assert main(["train", "guard", "demo", "--out", str(out), "--indexes", str(indexes),
                 *option]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists() and not list((indexes / "demo").glob("*guard-written*"))


def test_nrp_train_guard_is_read_as_the_guards_command_and_nrp_train_is_left_alone():
    from nrp.cli.train import guard_argv

    assert guard_argv(["-q", "train", "guard", "demo"]) == ["-q", "train-guard", "demo"]
    assert guard_argv(["train", "guard", "--help"]) == ["train-guard", "--help"]
    for untouched in (["train", "demo", "--dimension", "guard"], ["score", "guard"],
                      ["train", "--out", "guard"], ["train"], []):  # fmt: skip
        assert guard_argv(untouched) == untouched
