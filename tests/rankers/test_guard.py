"""The guard (nrp.rankers.guard): features worked out by hand, the logistic fit, and the ranker
over the packaged all-MiniLM-L6-v2 (real encoder, real model file): unflagged texts keep the
guarded ranker's exact scores, texts that only mirror or evade the question go below them."""

from __future__ import annotations

import math
import random
import re
from dataclasses import replace
from importlib import resources

import numpy as np
import pandas as pd
import pytest

from nrp.errors import ConfigError
from nrp.rankers.guard import FLAG_OFFSET, GuardRanker
from nrp.rankers.guard_features import (
    GuardFeatures,
    asks_only,
    fluency,
    information_features,
    judged_documents,
    lexical_features,
    order,
    rest_of,
    unquoted,
)
from nrp.rankers.guard_model import FEATURES, GuardModel, packaged_model
from nrp.rankers.registry import make_ranker
from nrp.training.guard_fit import (
    document_frequencies,
    fit_guard_model,
    fit_logistic,
    fluency_reference,
)

QUESTION = "Can ibuprofen raise blood pressure?"
ANSWERS = [
    "Yes. Ibuprofen and other NSAIDs make the kidneys hold on to salt and water, which can push "
    "blood pressure up by a few points. The effect is larger in people who already take "
    "medicine for hypertension, so they should ask their doctor before long use.",
    "NSAIDs such as ibuprofen can reduce the effect of diuretics and ACE inhibitors. Short "
    "courses at the lowest dose are usually safe; checking blood pressure after a week of "
    "regular use shows whether it rose.",
    "Paracetamol is an alternative for pain that does not affect the kidneys in the same way, "
    "and it is often recommended for people with high blood pressure who need a painkiller.",
]
ECHO = QUESTION
REFUSAL = (
    "I am sorry, but I cannot answer whether ibuprofen can raise blood pressure. Please ask "
    "someone else about it. Thank you for understanding."
)


def test_lexical_features_by_hand():
    # question terms (Terrier stopwords out, Porter stems): ibuprofen, rais, blood, pressur;
    # text terms: ibuprofen, rais, blood, pressur, adult ("in", "some" are stopwords)
    share, log_novel, rest = lexical_features(
        QUESTION, "Ibuprofen raises blood pressure in some adults."
    )
    assert share == pytest.approx(1 / 5)
    assert log_novel == pytest.approx(math.log(2))
    assert rest == "in some adults"
    assert lexical_features(QUESTION, QUESTION) == (0.0, 0.0, "")
    assert rest_of("Blood pressure?", {"blood", "pressur"}) == ""  # nothing new left


def test_information_features_by_hand():
    text = "I am sorry, I cannot say. Ask my doctor about ibuprofen and aspirin."
    # 13 words, 3 of them the first person singular (i, i, my); new content terms beyond the
    # question's (can, ibuprofen, rais, blood, pressur): sorri, sai, ask, doctor, aspirin; in a
    # reference of 9 documents doctor is in 4 and sorri in 1, the other three in none:
    # idf log(10/5), log(10/2), log(10/1) x 3: their mean is 4 log(10) / 5; 3 of 5 unknown
    first, idf, oov = information_features(QUESTION, text, 9, {"doctor": 4, "sorri": 1})
    assert first == pytest.approx(3 / 13)
    assert idf == pytest.approx(4 * math.log(10) / 5)
    assert oov == pytest.approx(3 / 5)
    assert information_features(QUESTION, QUESTION, 9, {}) == (0.0, 0.0, 0.0)  # nothing new
    assert information_features(QUESTION, "", 9, {}) == (0.0, 0.0, 0.0)
    # the reference: per stemmed content term, the number of distinct texts it occurs in
    assert document_frequencies(["Sorry, sorry.", "a doctor", "a doctor", "Doctors agree"]) == (
        3,
        {"agre": 1, "doctor": 2, "sorri": 1},
    )


def test_answer_like_is_the_linear_model_on_the_text_embedding_and_needs_its_direction():
    encoder = make_ranker("dense:model=minilm")
    direction = tuple(np.linspace(-1.0, 1.0, 384))
    features = list(FEATURES)
    model = GuardModel(tuple(features), (0.0,) * len(features), 0.0, 0.5,
                       reference_documents=9, answer_direction=direction,
                       answer_offset=0.25)  # fmt: skip
    table = GuardFeatures(model, encoder).frame([QUESTION, QUESTION], [ANSWERS[0], REFUSAL])
    embeddings = encoder.encode([ANSWERS[0], REFUSAL])
    assert table["answer_like"].to_numpy() == pytest.approx(
        embeddings @ np.asarray(direction) + 0.25, abs=1e-9
    )
    data = {"features": ["answer_like"], "weights": [1.0], "intercept": 0.0, "threshold": 0.5}
    with pytest.raises(ValueError, match="answer_like needs an answer_direction"):
        GuardModel.from_dict(data)
    with pytest.raises(ValueError, match="idf_new and oov_new need reference_documents"):
        GuardModel.from_dict({**data, "features": ["idf_new"]})
    read = GuardModel.from_dict({**data, "answer_direction": [0.5] * 384, "answer_offset": -1})
    assert read.answer_direction == (0.5,) * 384 and read.answer_offset == -1.0


def test_fluency_by_hand():
    frequent = frozenset({"the", "of", "is", "a"})
    attested = frozenset({"of the", "is a"})
    # pairs of frequent words: "is a", "of the" (both attested); 4 attested pairs of prior
    assert fluency("It is a matter of the heart", frequent, attested) == 1.0
    # "the of", "of is" (not attested), "is a" (attested): (1 + 4) / (3 + 4)
    assert fluency("heart the of is a matter", frequent, attested) == pytest.approx(5 / 7)
    assert fluency("no frequent pair here", frequent, attested) == 1.0
    salad = " ".join(["the"] * 40)  # 39 pairs "the the", none attested: 4 / 43
    assert fluency(salad, frequent, attested) == pytest.approx(4 / 43)
    texts = ["the cat of the house", "of the dog", "the of", "it is a dog"]
    words, pairs = fluency_reference(texts, 3, 2)
    # function words by document frequency: the 3, of 3, a 1, is 1, it 1 (ties by the word);
    # cat, dog, house are no function words
    assert words == ("a", "of", "the")
    assert pairs == ("of the",)


def test_asks_only_by_hand():
    """1 when every sentence holding a word ends with a question mark (closing quotes after it
    allowed; a line break ends a sentence too), else 0."""
    assert asks_only("Can diabetes be cured?") == 1.0
    assert asks_only("Why do you ask? Is it for you?\n\nOr for someone else?") == 1.0
    assert asks_only('Is it "bad?"  Or is it good?') == 1.0
    assert asks_only("Diabetes - what to ask your doctor: What causes it?") == 1.0
    assert asks_only("Can it be cured? Yes, with insulin.") == 0.0  # it states something
    assert asks_only("It is chronic. What else?") == 0.0
    assert asks_only("What is it? It is") == 0.0  # the last sentence has no question mark
    assert asks_only("") == 0.0 and asks_only("... ?") == 0.0  # no word: nothing asked


def test_order_by_hand():
    """Words after a sentence's end that begin with a capital or a digit are in place, those
    that begin lower case and capitalised function words inside a sentence are not; two in
    place of prior; a line, a colon, a list's mark or an opening bracket starts a sentence; an
    abbreviation or an ellipsis ends none."""
    assert order("Take it with food. The dose is 5 mg. 10 mg at most.") == 1.0  # (2+2)/(2+2)
    salad = "Noonan abnormally. body through that families It disease (inherited). a can"
    # "body" and "a" after a sentence's end, "It" inside one: (0 + 2) / (3 + 2)
    assert order(salad) == pytest.approx(2 / 5)
    assert order("The rash itches") == 1.0  # nothing to go by
    assert order("Symptoms:\n- The rash\n- It itches: The skin (The face) 1. The hands") == 1.0
    abbreviated = "Take it, e.g. with food, as the U.S. label says. it helps"
    assert order(abbreviated) == pytest.approx(2 / 3)
    assert order("It may wait... then the rash fades.") == 1.0
    assert order("rest, The doctor said. and So on") == pytest.approx(2 / 4)  # The, and
    # Title Case ("Ways To Reduce Your Risk"), a list's marks and signs begin what follows them
    assert order("Ways To Reduce Your Risk Of It. A) It helps (b) The dose 1. https://x") == 1.0
    assert order("It may help. b. The dose. c) The time 🤔 It") == 1.0
    assert order("") == 1.0
    # written without capitals: lower-case starts are the writer's way, not word salad
    assert order("good posture matters. here are some exercises. stand up straight.") == 1.0
    assert order("good posture matters. Here it is. stand up.") == pytest.approx(3 / 4)
    # escaped line breaks and characters read as what they stand for
    assert order("It may include:\\n\\u2022 Fatigue. \\u2022 Pain.\\nMajor risks: none.") == 1.0


def test_fit_logistic_separates_and_the_threshold_flags_at_most_the_share_asked():
    x = np.array([[0.0], [0.1], [0.2], [0.8], [0.9], [1.0]])
    y = np.array([0, 0, 0, 1, 1, 1], dtype=float)
    beta = fit_logistic(x, y, np.ones(6), l2=0.1)
    assert beta[0] > 0  # more of the feature, more likely an answer
    table = pd.DataFrame({"novel_share": x[:, 0]})
    model = fit_guard_model(table, y == 1, ((), ()), features=("novel_share",), max_flagged=0.0)
    p = model.probability(x)
    assert (p[y == 1] >= model.threshold).all() and (p[y == 0] < model.threshold).all()


def test_a_column_flat_up_to_rounding_gets_no_weight():
    """A second column that spreads 1e-8 (an embedding dimension that is zero up to float
    rounding) and happens to separate the classes: standardised it would get a weight of order
    1e8; it gets 0, and the fit on the first column is the fit without it."""
    x = np.array([[0.0], [0.1], [0.2], [0.8], [0.9], [1.0]])
    y = np.array([0, 0, 0, 1, 1, 1], dtype=float)
    flat = np.array([[-4e-8], [-4e-8], [-4e-8], [-2e-8], [-2e-8], [-2e-8]])
    with_flat = fit_logistic(np.hstack([x, flat]), y, np.ones(6), l2=0.1)
    assert with_flat[1] == 0.0
    assert with_flat[[0, 2]] == pytest.approx(fit_logistic(x, y, np.ones(6), l2=0.1), rel=1e-12)
    constant = fit_logistic(np.hstack([x, np.full((6, 1), 3.0)]), y, np.ones(6), l2=0.1)
    assert constant[1] == 0.0  # exactly constant: no weight either, as before


@pytest.fixture(scope="module")
def encoder():
    return make_ranker("dense:model=minilm")


def test_packaged_model_file_is_complete():
    model = packaged_model()
    assert model.features and len(model.weights) == len(model.features)
    assert 0 < model.threshold < 1
    # fitted by nrp train guard on MEDIQA train+val: training set 1 (104 questions) the
    # references, three questions left out, 126 fitted on
    fitted = model.fitted_on
    assert fitted["collection"] == "mediqa-2019-train" and fitted["dimension"] == "relevance"
    assert (fitted["queries"], fitted["reference_queries"]) == (126, 104)
    assert fitted["settings"]["reference_queries"] == ["t1-*"]
    assert fitted["left_out"] == fitted["settings"]["leave_out"] == ["v-24", "v-38", "t2-103"]
    assert fitted["settings"]["held_out"] == "evasion"
    # real answers: the 1,069 judged documents, 305 Excellent ones after their question, and the
    # 125 first sentences of the best judged documents (terse answers, all of them)
    assert fitted["settings"]["terse_answers"] == 1.0 and fitted["real_answers"] == 1499
    assert "of the" in model.attested_pairs
    # the detectors of boilerplate after the question, of another question's text after it,
    # of another question's answer, of word salad, of replies that give no answer, and of
    # texts that only ask
    generic, elsewhere, off_topic, disorder, hollow, asking = model.also
    assert disorder.features == ("fluency", "order") and min(disorder.weights) > 0
    assert disorder.fitted_on["negative_kinds"] == "shuffled"
    assert "spec_rd" in generic.features and 0 < generic.threshold < 1
    assert generic.fitted_on["negative_kinds"] == "boilerplate"  # mined, in no wording of nrp's
    assert "margin_rq" in elsewhere.features and 0 < elsewhere.threshold < 1
    assert off_topic.fitted_on["negative_kinds"] == "other_best"
    assert hollow.features == ("answer_like", "first_person", "idf_new", "oov_new")
    assert hollow.fitted_on["negative_kinds"] == "written"  # the LLM's own non-answers
    assert asking.features == ("asks_only",) and asking.weights[0] < 0
    # its negatives: the echoed questions (those ending with a question mark ask only)
    assert asking.fitted_on["negative_kinds"] == "echo"
    assert len(model.answer_direction) == 384  # all-MiniLM-L6-v2's embedding
    # the term reference: training set 1's 785 distinct documents, never fitted on
    assert model.reference_documents == 785 and model.document_frequency["diabet"] > 10
    # no detector was fitted on the held-out family
    kinds = ",".join(d.fitted_on["negative_kinds"] for d in (model, *model.also))
    assert not {"padded", "evasive", "refusal", "asked"} & set(kinds.split(","))


def test_a_cut_rest_is_the_first_words_of_the_rest():
    """``rest_words``: the rest (the text without the question's words) cut to its first N
    words; a text with nothing new has no rest, cut or not."""
    terms = {"ibuprofen", "rais", "blood", "pressur"}
    text = "Ibuprofen raises blood pressure in some adults who take it daily."
    assert rest_of(text, terms) == "in some adults who take it daily"
    assert rest_of(text, terms, 3) == "in some adults"
    assert rest_of(text, terms, 50) == rest_of(text, terms)
    assert rest_of("Blood pressure?", {"blood", "pressur"}, 3) == ""
    share, log_novel, rest = lexical_features(QUESTION, text, rest_words=3)
    assert rest == "in some adults"
    # novel_share and log_novel read the whole text, cut or not
    assert (share, log_novel) == lexical_features(QUESTION, text)[:2]


def test_a_model_that_cuts_its_rest_reads_the_rests_first_words():
    """A model's ``rest_words`` cuts the rest every feature of the rest reads: by hand with the
    vocabulary encoder, the rest "banana banana cherry cherry cherry" against the other
    questions "banana" and "cherry", whole (cosines 2/sqrt(13), 3/sqrt(13)) and cut to its
    first two words "banana banana" (cosines 1, 0); the question's own words are none of the
    four, so cos_rq is 0 either way."""
    question, text = "Is apple good?", "Apple: banana banana cherry cherry cherry."
    others = [question, "banana", "cherry"]  # (the encoder splits at spaces alone)
    whole_model = GuardModel(("margin_rq",), (1.0,), 0.0, 0.5)
    cut_model = replace(whole_model, rest_words=2)
    whole = GuardFeatures(whole_model, VocabularyEncoder(), others).frame([question], [text])
    cut = GuardFeatures(cut_model, VocabularyEncoder(), others).frame([question], [text])
    root = math.sqrt(13)
    assert whole.loc[0, "margin_rq"] == pytest.approx(-3 / root)
    assert whole.loc[0, "spec_rq"] == pytest.approx(-(2 + 3) / root / 2)
    assert cut.loc[0, "margin_rq"] == pytest.approx(-1.0)
    assert cut.loc[0, "spec_rq"] == pytest.approx(-0.5)
    assert whole.loc[0, "cos_rq"] == cut.loc[0, "cos_rq"] == 0.0
    # the features that do not read the rest are the same
    same = [f for f in FEATURES if f not in ("spec_rq", "margin_rq")]
    pd.testing.assert_frame_equal(whole[same], cut[same])


def test_a_model_that_cuts_its_rest_says_so_in_its_file(tmp_path):
    """A model with ``rest_words`` is written with the feature definitions of a cut rest
    (``CUT_REST_DEFINITIONS``), so that a reader of whole rests refuses it; read back, it cuts
    the same; a file of the whole rest's definitions that says ``rest_words`` is refused, as
    is a count that is not a whole number. A model of whole rests hashes as before the field
    (the packaged guard's fingerprint, c08c395db6ee9c6bc8c3, and its thresholds files)."""
    import json

    from nrp.errors import ModelError
    from nrp.rankers.guard_model import CUT_REST_DEFINITIONS, FEATURE_DEFINITIONS

    model = GuardModel(("log_novel",), (1.0,), 0.0, 0.5, rest_words=48)
    path = tmp_path / "cut.json"
    model.to_json(path)
    data = json.loads(path.read_text())
    assert data["format"]["features_version"] == CUT_REST_DEFINITIONS == 6
    assert data["rest_words"] == 48 and GuardModel.from_json(path) == model
    assert model.digest != replace(model, rest_words=0).digest
    old = tmp_path / "old.json"
    old.write_text(
        json.dumps({**data, "format": {**data["format"], "features_version": FEATURE_DEFINITIONS}})
    )
    with pytest.raises(ModelError, match=re.escape(
            f"{old}: not a guard model (rest_words 48 in a file of features_version 5; a model "
            "that cuts its rest is written with 6)")):  # fmt: skip
        _ = make_ranker(f"guard:model={old}").model
    for bad in (-1, 2.5, "48", True):
        wrong = tmp_path / "wrong.json"
        wrong.write_text(json.dumps({**data, "rest_words": bad}))
        with pytest.raises(ModelError, match=re.escape(f"rest_words {bad!r} (must be a whole")):
            _ = make_ranker(f"guard:model={wrong}").model
    assert packaged_model().rest_words == 0
    assert make_ranker("guard").fingerprint() == "c08c395db6ee9c6bc8c3"


class VocabularyEncoder:
    """A real encoder of the test's own: a text's counts of four words, unit length (no word:
    the zero vector), so every cosine below is worked out by hand."""

    words = ("apple", "banana", "cherry", "doctor")

    def fingerprint(self) -> str:
        return "vocabulary-encoder"

    def encode(self, texts, desc=None):
        rows = np.array([[t.lower().split().count(w) for w in self.words] for t in texts], float)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def test_spec_rd_by_hand():
    """spec_rd: the rest's mean cosine with its question's closest judged documents minus the
    mean of the same over the other questions; documents contained in the text left out."""
    documents = {
        "Which fruit?": ["apple apple", "apple banana"],
        "Which clinic?": ["cherry", "cherry doctor"],
        "Which snack?": ["banana"],
    }
    model = GuardModel(("spec_rd",), (1.0,), 0.0, 0.5)
    features = GuardFeatures(model, VocabularyEncoder(), list(documents), documents)
    queries = ["Which fruit?"] * 4 + ["Unknown question?"]
    texts = ["apple", "doctor", "apple apple", "Which fruit?", "apple"]
    spec = features.frame(queries, texts)["spec_rd"].to_numpy()
    half = 1 / math.sqrt(2)
    # "apple": fruit documents 1 and 1/sqrt2 (mean), clinic 0 and 0, snack 0
    assert spec[0] == pytest.approx((1 + half) / 2)
    # "doctor": fruit 0; clinic (0 + 1/sqrt2) / 2; snack 0; the others' mean is half of that
    assert spec[1] == pytest.approx(0 - (half / 2 + 0) / 2)
    # a judged document itself: "apple apple" left out, "apple banana" 1/sqrt2 remains
    assert spec[2] == pytest.approx(half)
    assert spec[3] == 0.0  # nothing beyond the question
    assert math.isnan(spec[4])  # a question without judged documents: unknown
    lone = GuardFeatures(model, VocabularyEncoder(), ["Which snack?"], {"Which snack?": ["x"]})
    assert math.isnan(lone.frame(["Which snack?"], ["apple"])["spec_rd"].iloc[0])


class CountingEncoder(VocabularyEncoder):
    def __init__(self):
        self.documents_encoded = 0

    def encode(self, texts, desc=None):
        if desc == "guard documents":
            self.documents_encoded += len(texts)
        return super().encode(texts, desc)


def test_spec_rd_compares_with_the_judged_answers_only():
    """With the qrels, a question's documents of gain 0 (a pool's own deferrals) are not what
    spec_rd compares with; documents without a judgment in that dimension neither."""
    candidates = pd.DataFrame(
        {"qid": ["q1", "q1", "q1", "q2", "q2"],
         "query": ["Which fruit?"] * 3 + ["Which clinic?"] * 2,
         "docno": ["d1", "d2", "d3", "d4", "d5"],
         "text": ["apple apple", "ask your doctor", "banana", "cherry", "banana cherry"]}
    )  # fmt: skip
    qrels = pd.DataFrame(
        {"qid": ["q1", "q1", "q2", "q2"], "docno": ["d1", "d2", "d4", "d5"], "label": [2, 0, 1, 1]}
    )
    assert judged_documents(candidates) == {
        "Which fruit?": ["apple apple", "ask your doctor", "banana"],
        "Which clinic?": ["cherry", "banana cherry"],
    }
    assert judged_documents(candidates, qrels) == {
        "Which fruit?": ["apple apple"], "Which clinic?": ["cherry", "banana cherry"]
    }  # fmt: skip
    # the rest "please consult a doctor" is the "doctor" axis. Every document: q1's three give
    # cosines 0, 1 (its own deferral), 0 -> mean 1/3; q2's 0, 0 -> spec_rd 1/3, as if the
    # deferral were about fruit. The judged answers only: 0 - 0
    model = GuardModel(("spec_rd",), (1.0,), 0.0, 0.5)
    for documents, expected in ((judged_documents(candidates), 1 / 3),
                                (judged_documents(candidates, qrels), 0.0)):  # fmt: skip
        features = GuardFeatures(model, VocabularyEncoder(), [], documents)
        value = features.frame(["Which fruit?"], ["please consult a doctor"])["spec_rd"].iloc[0]
        assert value == pytest.approx(expected)


def test_judged_documents_embeddings_are_kept_in_the_store(tmp_path):
    """The documents are encoded once per collection, not once per process: a second process
    (a new GuardFeatures) reads the stored file; a damaged file is computed and written again."""
    documents = {"Which fruit?": ["apple apple", "apple banana"], "Which clinic?": ["cherry"]}
    model = GuardModel(("spec_rd",), (1.0,), 0.0, 0.5)
    first = CountingEncoder()
    spec = GuardFeatures(model, first, list(documents), documents, tmp_path).frame(
        ["Which fruit?"], ["banana split"]
    )["spec_rd"]
    (stored,) = tmp_path.glob("guard-documents-*.npy")
    assert first.documents_encoded == 3 and np.load(stored).shape == (3, 4)
    second = CountingEncoder()
    again = GuardFeatures(model, second, list(documents), documents, tmp_path).frame(
        ["Which fruit?"], ["banana bread"]
    )["spec_rd"]
    assert second.documents_encoded == 0
    assert again.iloc[0] == pytest.approx(spec.iloc[0])  # same rest: "banana"
    stored.write_bytes(b"not an array")
    third = CountingEncoder()
    GuardFeatures(model, third, list(documents), documents, tmp_path).frame(
        ["Which fruit?"], ["banana cake"]
    )
    assert third.documents_encoded == 3 and np.load(stored).shape == (3, 4)
    assert [p.name for p in tmp_path.iterdir()] == [stored.name]  # nothing half-written left
    # a folder that cannot be written (a file is in its place) keeps nothing and fails nothing
    nowhere = tmp_path / "a-file"
    nowhere.write_text("not a folder")
    fourth = CountingEncoder()
    GuardFeatures(model, fourth, list(documents), documents, nowhere).frame(
        ["Which fruit?"], ["banana pie"]
    )
    assert fourth.documents_encoded == 3 and nowhere.read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", stored.name]


def test_a_detector_abstains_on_a_feature_it_cannot_know():
    table = pd.DataFrame({"novel_share": [0.0, 0.0], "spec_rd": [float("nan"), 0.0]})
    generic = GuardModel(("spec_rd",), (10.0,), -5.0, 0.5)  # flags spec_rd 0
    mirror = GuardModel(("novel_share",), (10.0,), 6.0, 0.5, also=(generic,))  # flags nothing
    share = mirror.answer_share(table)
    s = 1 / (1 + math.exp(-5))
    assert share == pytest.approx([1 / (1 + math.exp(-6)) / 0.5, (1 - s) / 0.5])
    assert share.tolist()[0] > 1 > share.tolist()[1]


def test_any_detector_flags_and_the_share_is_the_least(tmp_path):
    table = pd.DataFrame({name: [0.0, 1.0] for name in ("novel_share", "cos_tq")})
    first = GuardModel(("novel_share",), (10.0,), -5.0, 0.5)  # p = sigmoid(10 x - 5)
    second = GuardModel(("cos_tq",), (-10.0,), 5.0, 0.5)  # p = sigmoid(5 - 10 x)
    both = GuardModel(("novel_share",), (10.0,), -5.0, 0.5, also=(second,))
    s = 1 / (1 + math.exp(-5))  # sigmoid(5)
    assert first.answer_share(table) == pytest.approx([(1 - s) / 0.5, s / 0.5])
    assert both.answer_share(table) == pytest.approx([(1 - s) / 0.5, (1 - s) / 0.5])
    path = tmp_path / "guard.json"
    both.to_json(path)
    assert GuardModel.from_json(path) == both


def test_calibrated_thresholds_by_hand():
    """Each detector's threshold: the probability of the answer at ``floor(share * n)`` in order
    (so it flags that many), over the rows where it does not abstain; with fewer than
    ``1 / share`` rows the model's own."""
    x = np.arange(12, dtype=float) / 10  # novel_share 0.0 .. 1.1
    table = pd.DataFrame({"novel_share": x, "spec_rd": [np.nan, np.nan, *x[2:]]})
    generic = GuardModel(("spec_rd",), (2.0,), -1.0, 0.5)
    mirror = GuardModel(("novel_share",), (4.0,), -2.0, 0.9, also=(generic,))
    calibrated = mirror.calibrated(table, 0.25)
    sigmoid = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    assert calibrated.threshold == pytest.approx(sigmoid(4 * 0.3 - 2))  # 12 rows: the 4th
    assert calibrated.also[0].threshold == pytest.approx(sigmoid(2 * 0.4 - 1))  # 10: the 3rd
    flagged = calibrated.answer_share(table) < 1  # mirror: 0.0-0.2; generic: 0.2, 0.3
    assert x[flagged] == pytest.approx([0.0, 0.1, 0.2, 0.3])
    assert calibrated.weights == mirror.weights and calibrated.also[0].weights == generic.weights
    assert mirror.calibrated(table, 0.05) == mirror  # 12 rows: fewer than 20
    assert mirror.calibrated(table, 0.1).also[0].threshold == pytest.approx(sigmoid(2 * 0.3 - 1))
    partly = mirror.calibrated(table, 0.09)  # twelve rows needed: the known ten are too few
    assert partly.threshold == pytest.approx(sigmoid(4 * 0.1 - 2)) and partly.also[0] == generic
    # calibration loosens a detector, never tightens it: one whose fitted threshold is below the
    # 4th row's probability (0.2 < 0.31) keeps it, and flags two rows (0.12, 0.17), not four
    loose = GuardModel(("novel_share",), (4.0,), -2.0, 0.2)
    assert loose.calibrated(table, 0.25) == loose
    assert x[loose.answer_share(table) < 1] == pytest.approx([0.0, 0.1])


def test_guard_keeps_dense_scores_of_answers_and_puts_mirrors_below(encoder):
    frame = pd.DataFrame(
        {
            "qid": "q1",
            "query": QUESTION,
            "docno": ["a1", "a2", "a3", "echo", "refusal"],
            "text": [*ANSWERS, ECHO, REFUSAL],
        }
    )
    dense = make_ranker("dense").score_frame(frame)
    guard = make_ranker("guard")
    assessed = guard.assess(frame)
    assert assessed["flagged"].tolist() == [False, False, False, True, True]
    scores = guard.score_frame(frame)
    assert scores[:3] == pytest.approx(dense[:3], abs=1e-6)  # the ranker's own scores
    assert dense[3] > dense[:3].max()  # dense alone puts the echo first
    assert scores[3:].max() < -FLAG_OFFSET / 2 < scores[:3].min()
    # flagged texts among themselves by the guard's share (probability over threshold)
    share = assessed["answer_share"].to_numpy()
    assert (share[3:] < 1).all() and (share[:3] >= 1).all()
    assert (scores[3] < scores[4]) == (share[3] < share[4])


def test_a_text_within_the_tolerance_of_a_threshold_is_at_it_not_flagged(encoder):
    """A calibrated threshold is a real answer's own probability: a text whose probability is
    below a threshold by less than ``THRESHOLD_TOLERANCE`` of it (float rounding) adds no
    evidence, one below it by more adds ``-ln(share)``; the text is flagged (floored) when its
    evidence exceeds the model's ``floor_evidence`` (ln 2: a detector at half its threshold).
    ``threshold=`` sets the first detector's."""
    import math

    from nrp.rankers.guard_model import FLOOR_EVIDENCE, THRESHOLD_TOLERANCE

    frame = pd.DataFrame({"qid": "q1", "query": QUESTION, "docno": ["a1"], "text": ANSWERS[:1]})
    guard = make_ranker("guard")
    table = guard.assess(frame)
    first = guard.detectors()
    p = first.probability(table[list(first.features)].to_numpy(dtype=float))[0]
    # no detector of the packaged model flags it (asking's threshold is the probability of
    # every text that states something: its share is 1 exactly)
    assert table["answer_share"][0] == 1 and not table["flagged"][0]
    assert table["evidence"][0] == 0 and math.log(2) == FLOOR_EVIDENCE
    for above, evidence in ((0.4, 0.0), (4.0, math.log(1 + 4.0 * THRESHOLD_TOLERANCE))):
        threshold = float(p * (1 + above * THRESHOLD_TOLERANCE))  # above p by 0.4, 4 tolerances
        assessed = make_ranker(f"guard:threshold={threshold!r}").assess(frame)
        assert assessed["answer_share"][0] == pytest.approx(p / threshold, rel=1e-12)
        assert assessed["answer_share"][0] < 1
        assert assessed["evidence"][0] == pytest.approx(evidence, rel=1e-6, abs=1e-12)
        assert assessed["flagged"].tolist() == [False]


def test_evidence_adds_up_over_the_detectors_below_their_thresholds():
    """Evidence: the sum of ``-ln(share)`` over the detectors below their threshold (by more
    than the tolerance); floored above ``floor`` (ln 2): one detector under half its threshold,
    or two at 0.7 of theirs, but not one at half exactly, nor one at 0.6 and one at 0.9."""
    import math

    from nrp.rankers.guard_model import evidence_of, floored, flooring_evidence

    shares = np.array(
        [[0.5, 2.0], [0.6, 0.9], [1 - 1e-6, 0.1], [np.inf, 1.0], [0.49, 1.5], [0.7, 0.7]]
    )
    evidence = evidence_of(shares)
    expected = [math.log(2), -math.log(0.6) - math.log(0.9), math.log(10), 0.0,
                -math.log(0.49), -2 * math.log(0.7)]  # fmt: skip
    assert evidence == pytest.approx(expected, rel=1e-12)
    assert floored(evidence, math.log(2)).tolist() == [False, False, True, False, True, True]
    # calibration: the least floor that floors at most the share: 1 of 6 at 1/6 (ln 10 alone
    # above the second largest, 0.713), none at 0.1 (the largest, ln 10)
    assert flooring_evidence(evidence, 1 / 6) == pytest.approx(-math.log(0.49))
    assert flooring_evidence(evidence, 0.1) == pytest.approx(math.log(10))


def test_the_features_encoder_runs_at_the_guarded_dense_rankers_dtype(encoder):
    """guard:ranker=dense;dtype=bf16 embeds its features in bf16 too, with the guarded ranker
    (one model, one stream); its fingerprint is its own."""
    from nrp.models.device import native_bf16

    if not native_bf16():
        pytest.skip("this CPU has no bfloat16 matrix units (a dense ranker at bf16 is refused)")
    fast = make_ranker("guard:ranker=dense;dtype=bf16")
    assert fast.features().encoder is fast.ranker
    assert fast.features().encoder.params["dtype"] == "bf16"
    assert fast.fingerprint() != make_ranker("guard").fingerprint()
    assert fast.score_tolerance == 2e-3
    lexical = make_ranker("guard:ranker=bm25")
    assert lexical.features().encoder.params["dtype"] == "fp32"


def test_one_embedding_stream_serves_the_guarded_dense_ranker_and_the_features(encoder):
    import nrp.rankers.guard_features as features_module

    frame = pd.DataFrame(
        {"qid": "q1", "query": QUESTION, "docno": ["a1", "a2", "a3", "echo", "refusal"],
         "text": [*ANSWERS, ECHO, REFUSAL]}
    )  # fmt: skip
    guard = make_ranker("guard")
    assert guard.features().encoder is guard.ranker  # the default: dense with the encoder's model
    lexical = make_ranker("guard:ranker=bm25")
    assert lexical.features().encoder.fingerprint() == make_ranker("dense").fingerprint()
    apart = make_ranker("guard")  # as before: features with an encoder of their own
    apart._features = GuardFeatures(apart.model, make_ranker("dense:model=minilm"))
    model = guard.ranker.model  # one loaded model for all of them
    embedded: list[str] = []
    real_encode = model.encode

    def counting(texts, *args, **kwargs):
        embedded.extend(texts)
        return real_encode(texts, *args, **kwargs)

    def scored(ranker, stream=None):
        features_module._MEMO.clear()
        embedded.clear()
        if stream is None:
            return ranker.score_frame(frame), list(embedded)
        with ranker.embedding_stream(stream):
            return ranker.score_frame(frame), list(embedded)

    model.encode = counting
    try:
        apart_scores, apart_texts = scored(apart)
        shared_scores, shared_texts = scored(guard)
        streamed_scores, streamed_texts = scored(guard, [QUESTION, *frame["text"]])
        embedded.clear()
        content = make_ranker("guard:content=0.06").score_frame(frame)  # features known now
        content_texts = list(embedded)
    finally:
        del model.encode
    # apart: the ranker embeds the question and the five texts as it scores them (the echo
    # without the question it copies: ""), the features the question, the five texts and the
    # five rests ("." for the echo's, which has none)
    assert len(apart_texts) == (1 + 5) + (1 + 5) + 5 and apart_texts[-1] == "."
    # shared, within the call or in the positioner's stream: the question and the four other
    # texts once (the echo is the question), then what the stream lacks: the echo without the
    # question (the ranker's) and the rests (the features')
    for texts in (shared_texts, streamed_texts):
        assert sorted(texts[:5]) == sorted([QUESTION, *ANSWERS, REFUSAL])
        assert texts[5:] == ["", *apart_texts[-5:]]
    # features known (validation's second guard over the same texts): the ranker's alone
    assert sorted(content_texts) == sorted(["", QUESTION, *ANSWERS, REFUSAL])
    flagged = [False, False, False, True, True]
    for scores in (shared_scores, streamed_scores):
        assert scores == pytest.approx(apart_scores, rel=1e-6, abs=1e-6)
        assert (scores < -FLAG_OFFSET / 2).tolist() == flagged
    assert (content < -FLAG_OFFSET / 2).tolist() == flagged


def test_unquoted_by_hand():
    question = "Can ibuprofen raise blood pressure in older adults?"  # eight words
    copied = "can ibuprofen raise blood pressure in older adults? Yes, it can."
    assert unquoted(question, copied, 0.5) == "Yes, it can."  # all eight in a row, and "?"
    # half the question is four words; three in a row are the text's own: the same string back
    own = "Ibuprofen may raise blood pressure a little."  # "raise blood pressure"
    assert unquoted(question, own, 0.5) is own
    # case and punctuation aside: "Blood  Pressure, in older adults" is five words in a row
    five = "Blood  Pressure, in older adults: rises."
    assert unquoted(question, five, 0.5) == "rises."
    assert unquoted(question, five, 0.75) is five  # 0.75 of eight: six words
    # "in older adults" (three) stays, "Can ibuprofen raise blood" (four) goes
    two = "Blood pressure rises in older adults. Can ibuprofen raise blood? Rarely."
    assert unquoted(question, two, 0.5) == "Blood pressure rises in older adults. Rarely."
    assert unquoted(question, copied, 0) is copied  # 0: off
    # a run one of the question's judged answers says too is what answers say: it stays
    heading = ["Can ibuprofen raise blood pressure in older adults? It can, slightly."]
    assert unquoted(question, copied, 0.5, heading) is copied
    # an answer says "raise blood pressure in older adults": the three runs of four inside it
    # stay; "can ibuprofen raise blood" and "ibuprofen raise blood pressure" go
    partial = ["NSAIDs raise blood pressure in older adults."]
    assert unquoted(question, copied, 0.5, partial) == "in older adults? Yes, it can."
    # a question under four words is never cut, whatever the share (QUOTED_WORDS)
    assert unquoted("Why is that?", "Why is that? Because.", 0.5) == "Why is that? Because."


def test_the_guard_scores_an_answer_after_its_question_as_the_answer(encoder):
    """A real answer that restates the question first keeps the guarded ranker's score of the
    answer itself (what it copies from the question is not scored); with quoted=0 the copy
    lifts it, as it lifts an echo."""
    restated = f"{QUESTION} {ANSWERS[0]}"
    frame = pd.DataFrame(
        {"qid": "q1", "query": QUESTION, "docno": ["a1", "r1"], "text": [ANSWERS[0], restated]}
    )
    dense = make_ranker("dense").score_frame(frame)
    guard = make_ranker("guard")
    assert guard.params["quoted"] == 0.3
    assert guard.assess(frame)["flagged"].tolist() == [False, False]
    scores = guard.score_frame(frame)
    assert scores[1] == pytest.approx(dense[0], abs=1e-6)
    assert scores[0] == pytest.approx(dense[0], abs=1e-6)
    whole = make_ranker("guard:quoted=0").score_frame(frame)
    assert whole[1] == pytest.approx(dense[1], abs=1e-6) and dense[1] > dense[0]


def test_the_disorder_detector_flags_word_salad_and_no_answer(encoder):
    """The answers' own words shuffled: every content term new, close to the question, only
    the order gone. The disorder detector (fluency alone) puts it below its threshold and every
    real answer above it."""
    words = " ".join(ANSWERS).split()
    random.Random(0).shuffle(words)
    frame = pd.DataFrame(
        {"qid": "q1", "query": QUESTION, "docno": ["a1", "a2", "a3", "salad"],
         "text": [*ANSWERS, " ".join(words)]}
    )  # fmt: skip
    assessed = make_ranker("guard").assess(frame)
    # 10 adjacent pairs of frequent words, 2 of them attested, with the prior's 4
    assert assessed["fluency"].iloc[3] == pytest.approx(6 / 14)
    disorder = next(d for d in packaged_model().also if d.fitted_on["name"] == "disorder")
    p = disorder.probability(assessed[list(disorder.features)].to_numpy())
    assert (p[:3] >= disorder.threshold).all() and p[3] < disorder.threshold
    assert assessed["flagged"].tolist() == [False, False, False, True]


def test_the_hollow_detector_flags_refusals_in_wordings_of_the_tests_own(encoder):
    """Replies that decline in the manner of a language model, in words written for this test
    (no fitting text has them): the packaged guard flags all four and none of the three real
    answers. The first two pass every other detector: the ``hollow`` one flags them."""
    declines = [
        "As an AI assistant, I'm not in a position to offer guidance on medications. I would "
        "recommend that you speak with your physician or pharmacist, who can look at your full "
        "history.",
        "I appreciate you reaching out with this. I'm unable to share medical advice here, but I "
        "hope you find the support you need from a qualified professional soon.",
        "Thanks so much for your message! I totally understand why you'd want to know more about "
        "this, and I wish I could help, but my role doesn't allow me to comment on health "
        "matters.",
        REFUSAL,
    ]
    texts = [*ANSWERS, *declines]
    docnos = [f"d{i}" for i in range(len(texts))]
    frame = pd.DataFrame({"qid": "q1", "query": QUESTION, "docno": docnos, "text": texts})
    assessed = make_ranker("guard").assess(frame)
    assert assessed["flagged"].tolist() == [False] * 3 + [True] * 4
    model = packaged_model()
    hollow = next(d for d in model.also if d.fitted_on["name"] == "hollow")
    others = [replace(model, also=()), *(d for d in model.also if d is not hollow)]
    for row in (3, 4):
        values = assessed.iloc[[row]]
        assert hollow.answer_share(values)[0] < 1  # hollow flags it ...
        assert all(d.answer_share(values)[0] >= 1 for d in others)  # ... and no other does


def test_the_asking_detector_flags_questions_in_place_of_an_answer(encoder):
    """Replies that only ask, in wordings of the test's own: the packaged guard flags all four
    (each by the ``asking`` detector; the first two by no other) and keeps the real answers
    and an answer that opens with the question."""
    asks = [
        "Have you had your blood pressure checked lately? Which painkiller are you taking, and "
        "how often?",
        "Why do you ask? Is it for yourself or for someone in your family?",
        "Could you say more about your situation? How long have you been taking it?",
        "Ibuprofen and blood pressure: is there a link?",
    ]
    opens = (
        "Does ibuprofen raise blood pressure? It can: NSAIDs make the kidneys hold on to salt "
        "and water, so the pressure rises by a few points."
    )
    texts = [*ANSWERS, *asks, opens]
    docnos = [f"d{i}" for i in range(len(texts))]
    frame = pd.DataFrame({"qid": "q1", "query": QUESTION, "docno": docnos, "text": texts})
    assessed = make_ranker("guard").assess(frame)
    assert assessed["asks_only"].tolist() == [0.0] * 3 + [1.0] * 4 + [0.0]
    assert assessed["flagged"].tolist() == [False] * 3 + [True] * 4 + [False]
    model = packaged_model()
    asking = next(d for d in model.also if d.fitted_on["name"] == "asking")
    others = [replace(model, also=()), *(d for d in model.also if d is not asking)]
    assert (asking.answer_share(assessed.iloc[3:7]) < 1).all()
    for row in (3, 4):
        assert all(d.answer_share(assessed.iloc[[row]])[0] >= 1 for d in others)


def test_a_guard_fitted_in_the_test_flags_an_unseen_echo(encoder):
    """A guard trained on a handful of answers and echoes (features from the real encoder)
    flags the echo of a question it never saw and keeps that question's real answer."""
    questions = [
        "Does vitamin C prevent colds?",
        "Is melatonin safe for children?",
        "How much water should I drink a day?",
        "Can coffee cause heart palpitations?",
    ]
    answers = [
        "Large trials found that taking vitamin C every day does not lower the number of colds "
        "for most people, though it may shorten them slightly in athletes.",
        "Short-term use at low doses appears safe for most children, but paediatricians advise "
        "fixing sleep routines first and asking before giving supplements.",
        "Most adults need about two litres of fluid a day from food and drinks, more in hot "
        "weather or during exercise; thirst is a reliable guide.",
        "Caffeine can trigger extra beats in sensitive people; in studies moderate coffee "
        "intake did not raise the risk of rhythm disorders.",
    ]
    reference = fluency_reference(answers, frequent=30, pair_docs=1)
    provisional = GuardModel(("novel_share",), (0.0,), 0.0, 0.5, *reference)
    features = GuardFeatures(provisional, encoder, questions)
    queries = questions * 2
    texts = answers + questions  # the answers, then the echoes
    table = features.frame(queries, texts)
    used = ("novel_share", "log_novel", "cos_tq", "cos_rq")
    model = fit_guard_model(table, np.array([1] * 4 + [0] * 4), reference, features=used)
    unseen_q = "Can ibuprofen raise blood pressure?"
    fresh = GuardFeatures(model, encoder, [*questions, unseen_q])
    p = model.probability(
        fresh.frame([unseen_q, unseen_q], [unseen_q, ANSWERS[0]])[list(used)].to_numpy()
    )
    assert p[0] < model.threshold <= p[1]


def test_a_model_file_that_differs_in_one_reference_value_is_another_fingerprint(tmp_path):
    """The fingerprint reads a hash of the whole model, not its path: a copy of the packaged model
    is the same guard, one document frequency changed in it another (whose cached scores are not
    reused)."""
    model = packaged_model()
    same, other = tmp_path / "same.json", tmp_path / "other.json"
    model.to_json(same)
    frequency = dict(model.document_frequency)
    frequency["diabet"] += 1
    replace(model, document_frequency=frequency).to_json(other)
    packaged = make_ranker("guard").fingerprint()
    assert make_ranker(f"guard:model={same}").fingerprint() == packaged  # the content, not the path
    assert make_ranker(f"guard:model={other}").fingerprint() != packaged


def test_spec_and_parameters():
    guard = make_ranker("guard:ranker=bm25;k1=0.9")
    assert guard.ranker.spec() == "bm25:k1=0.9"
    assert guard.spec() == "guard:ranker=bm25:k1=0.9"
    assert make_ranker(guard.spec()).fingerprint() == guard.fingerprint()
    two = make_ranker("guard:ranker=dense;query=narrative;passages=64")
    assert two.ranker.spec() == "dense:passages=64,query=narrative"
    assert make_ranker(two.spec()).fingerprint() == two.fingerprint()
    assert guard.depends_on_candidate_set  # lexical statistics over D_q: full re-rank
    assert not make_ranker("guard").depends_on_candidate_set
    assert make_ranker("guard").fingerprint() != make_ranker("guard:threshold=0.5").fingerprint()
    with pytest.raises(ConfigError, match="a guard inside a guard"):
        GuardRanker({}, ranker=make_ranker("guard"))
    with pytest.raises(ConfigError, match="threshold must lie in"):
        make_ranker("guard:threshold=2")
    for bad in ("-1", "1e308"):  # 1e308 pushed every text past the floor: all answers last
        with pytest.raises(ConfigError, match="content must be from 0 to 100"):
            make_ranker(f"guard:content={bad}")
    with pytest.raises(ConfigError, match="content must be at least 0"):
        GuardRanker({"content": -1})
    assert make_ranker("guard").fingerprint() != make_ranker("guard:quoted=0").fingerprint()
    for bad in ("-1", "2"):
        with pytest.raises(ConfigError, match="quoted"):
            make_ranker(f"guard:quoted={bad}")
    for bad in ("-0.01", "0.6", "x"):
        with pytest.raises(ConfigError, match="calibrate"):
            make_ranker(f"guard:calibrate={bad}")


def test_a_bad_model_file_is_one_model_error(tmp_path):
    """A ``ModelError`` (a ``ConfigError``: one line in the CLI; the service answers "not a
    model this server offers" and tells nothing of the file). A NaN threshold scored before
    (issue 60, item 4)."""
    from nrp.errors import ModelError

    bad = tmp_path / "guard.json"
    head = '{"format": {"schema": 1, "features_version": 5, "calibration": 3}, '
    bad.write_text(head + '"features": ["nope"], "weights": [1], "intercept": 0, "threshold": 0.5}')
    with pytest.raises(ModelError, match="unknown features"):
        _ = make_ranker(f"guard:model={bad}").model
    with pytest.raises(ModelError, match="file not found"):
        _ = make_ranker(f"guard:model={tmp_path / 'missing.json'}").model
    for field, value in (("threshold", "NaN"), ("threshold", "0"), ("intercept", "Infinity"),
                         ("floor_evidence", "-1")):  # fmt: skip
        values = {"threshold": "0.5", "intercept": "0", field: value}
        bad.write_text(head + f'"features": ["log_novel"], "weights": [1], "intercept": '
                       f'{values["intercept"]}, "threshold": {values["threshold"]}'
                       + (f', "floor_evidence": {value}' if field == "floor_evidence" else "")
                       + "}")  # fmt: skip
        with pytest.raises(ModelError, match="not a guard model"):
            _ = make_ranker(f"guard:model={bad}").model


def test_a_model_file_says_what_it_is_and_a_foreign_one_is_refused(tmp_path, capsys):
    """Issue 71: a model file carries its format (schema, feature definitions, calibration
    rule); a file without it, of another schema or feature definitions, or missing a field is
    refused in one line naming the file, exit 2, nothing scored."""
    import json

    from nrp.cli import main
    from nrp.errors import ModelError
    from nrp.rankers.guard_model import (
        FEATURE_DEFINITIONS,
        MODEL_SCHEMA,
        PACKAGED_MODEL,
        model_format,
    )

    packaged = json.loads(PACKAGED_MODEL.read_text(encoding="utf-8"))
    assert packaged["format"] == model_format() == {
        "schema": MODEL_SCHEMA, "features_version": FEATURE_DEFINITIONS, "calibration": 3,
    }  # fmt: skip
    written = tmp_path / "written.json"
    GuardModel(("log_novel",), (1.0,), 0.0, 0.5).to_json(written)
    assert json.loads(written.read_text())["format"] == model_format()
    assert GuardModel.from_json(written).weights == (1.0,)
    cases = {
        "none": ({k: v for k, v in packaged.items() if k != "format"}, "no format block"),
        "schema": ({**packaged, "format": {**packaged["format"], "schema": 2}},
                   "format schema 2, where this nrp reads 1"),
        "features": ({**packaged, "format": {**packaged["format"], "features_version": 0}},
                     "format features_version 0, where this nrp reads 5"),
        "field": ({k: v for k, v in packaged.items() if k != "threshold"},
                  "missing field 'threshold'"),
    }  # fmt: skip
    demo = tmp_path / "ix"
    from nrp import ingest

    ingest(resources.files("nrp") / "data" / "demo" / "manifest.yaml", indexes_dir=demo)
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"llm": "m", "prompt": "p", "qid": "d1", "text": "Vitamin C."}\n')
    for name, (data, problem) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        with pytest.raises(ModelError, match=re.escape(problem)):
            _ = make_ranker(f"guard:model={path}").model
        out = tmp_path / f"out-{name}"
        code = main(["score", "demo", str(answers), "--ranker", f"guard:ranker=tfidf,model={path}",
                     "--out", str(out), "--indexes", str(demo)])  # fmt: skip
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and str(path) in err[0] and problem in err[0]
        assert not out.exists()


def test_the_fingerprint_reads_what_the_model_computes_not_the_record_of_its_fitting(tmp_path):
    """A refit to the same weights (``nrp train guard``) writes another ``fitted_on``: the same
    guard, whose cached scores are reused; a detector renamed is another guard."""
    model = packaged_model()
    refit, renamed = tmp_path / "refit.json", tmp_path / "renamed.json"
    replace(model, fitted_on={**model.fitted_on, "fitted_by": "another run"}).to_json(refit)
    also = (replace(model.also[0], fitted_on={"name": "other"}), *model.also[1:])
    replace(model, also=also).to_json(renamed)
    packaged = make_ranker("guard").fingerprint()
    assert make_ranker(f"guard:model={refit}").fingerprint() == packaged
    assert make_ranker(f"guard:model={renamed}").fingerprint() != packaged
