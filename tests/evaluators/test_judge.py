"""The judge evaluator end to end on real (tiny) models: no mocks.

The scripted model (tests/llm/tiny_llm.py) is a LlamaForCausalLM whose weights encode a bigram
table, so its outputs and their probabilities are known by hand: it answers every prompt with
"4 GIVEN TRUE Confidence 0.8 [RESULT] 3"; at the first token the scores 4, 3, 5 have logits
2, 1, 0 (the rest -30); after the score, " GIVEN" 2 and " NOT" 0; after " GIVEN", " TRUE" 1.5
and " FALSE" 0.5. Every expected number below is computed from these logits.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from tiny_llm import SCRIPTED_REPLY, build_scripted_llama, build_tiny_llama

from nrp.errors import ConfigError, InputError
from nrp.evaluators.base import all_evaluators, make_evaluator, make_evaluators
from nrp.evaluators.cache import EvaluationCache
from nrp.evaluators.items import items_from_frame
from nrp.evaluators.judge import Judge, criterion_values
from nrp.evaluators.run import evaluate
from nrp.llm.parsing import mean_sd
from nrp.llm.prompts import TEMPLATE_DIR

E = math.e
#: G-Eval: sum s p(s) over the first token's scores (logits 2, 1, 0 for 4, 3, 5)
GEVAL = (4 * E**2 + 3 * E + 5) / (E**2 + E + 1)
#: p(TRUE) after " GIVEN": logits 1.5 and 0.5
P_TRUE = math.exp(1.5) / (math.exp(1.5) + math.exp(0.5))
#: p(GIVEN) after the score: logits 2 and 0 (" NOT" begins NOT GIVEN)
P_GIVEN = E**2 / (E**2 + 1)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    return str(build_scripted_llama(tmp_path_factory.mktemp("scripted-llama")))


@pytest.fixture
def items():
    return items_from_frame(
        pd.DataFrame(
            {
                "answer_id": ["a", "b", "c"],
                "qid": ["q1", "q2", "q3"],
                "question": ["what is diabetes?", "how to treat a cold?", "is water wet?"],
                "text": ["a disease of blood sugar", "rest and fluids", "yes"],
                "references": [["diabetes is a disease of blood sugar"], ["rest"], []],
            }
        )
    )


def judge(scripted: str, **params) -> Judge:
    return Judge({"model": scripted, "device": "cpu", **params})


def raw(frame: pd.DataFrame, row: int) -> list[dict]:
    return json.loads(frame["judge_raw"][row])


# -- registry and parameters ------------------------------------------------------------------
def test_registered_with_typed_params():
    info = all_evaluators()["judge"]
    assert info.family == "judge"
    evaluator = make_evaluator("judge:mode=tfn,strategy=adaptive,steps=2,threshold=0.7")
    assert isinstance(evaluator, Judge)
    assert (evaluator.params["steps"], evaluator.params["threshold"]) == (2, 0.7)
    assert evaluator.score_columns() == ["judge.confidence"]
    assert evaluator.extra_columns() == ["judge.label", "judge.review", "judge_raw"]
    assert evaluator.template.name == "tfn-adaptive-v1"
    # a base URL's colons and a criteria list's semicolons survive spec splitting
    built = make_evaluators(
        "bleu,judge:backend=openai,base_url=http://127.0.0.1:8000/v1,"
        "criteria=relevance;readability,samples=2,temperature=0.7"
    )
    rubric = built[1]
    assert rubric.params["base_url"] == "http://127.0.0.1:8000/v1"
    assert rubric.score_columns() == [
        "judge.relevance",
        "judge.relevance_sd",
        "judge.readability",
        "judge.readability_sd",
    ]
    assert rubric.extra_columns() == ["judge_raw"]
    assert rubric.template.name == "geval-v1"
    labelled = make_evaluator("judge:label=p,style=prometheus")
    assert labelled.output_columns() == ["p.judge.relevance", "p.judge_raw"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("judge:samples=3", "samples=3 needs temperature > 0"),
        ("judge:criteria=Relevance!", "criterion 'relevance!' must be"),
        ("judge:criteria=relevance;relevance", "criterion relevance named twice"),
        ("judge:criteria=;", "criteria is empty"),
        ("judge:threshold=1.5", r"threshold must be in \[0, 1\]"),
        ("judge:steps=0", "steps must be at least 1"),
        ("judge:template=geval-v9", "unknown prompt template 'geval-v9'"),
        ("judge:mode=score", "must be one of rubric, tfn"),
    ],
)
def test_bad_parameters(spec, message):
    with pytest.raises(ConfigError, match=message):
        make_evaluator(spec)


def test_direct_construction_is_checked_too():
    with pytest.raises(ConfigError, match="parameter mode='score' must be one of rubric, tfn"):
        Judge({"mode": "score"})
    with pytest.raises(ConfigError, match="judge has no parameter"):
        Judge({"temprature": 0.5})


def test_a_template_must_fit_its_mode():
    with pytest.raises(InputError, match=r"geval-v1\.txt: missing section\(s\) \[\[given\]\]"):
        make_evaluator("judge:mode=tfn,strategy=sequential,template=geval-v1")
    with pytest.raises(
        InputError, match=r"geval-v1\.txt:15: unknown placeholder\(s\) \{\{criterion_description"
    ):
        make_evaluator("judge:mode=tfn,template=geval-v1")


def test_criteria_texts():
    known = criterion_values("readability")
    assert known["criterion_title"] == "Readability"
    assert known["rubric_5"].startswith("The answer is clear")
    generic = criterion_values("medical_safety")
    assert generic["criterion_title"] == "Medical safety"
    assert generic["rubric_1"] == "The answer's medical safety is very poor."


# -- prompts ----------------------------------------------------------------------------------
def test_prompts_show_the_reference_where_the_style_wants_it(scripted, items):
    prometheus = judge(scripted, style="prometheus").prompts(items)
    assert len(prometheus) == 3
    assert (
        "###Reference Answer (Score 5):\ndiabetes is a disease of blood sugar"
        in (prometheus[0][1]["content"])
    )
    assert "Reference Answer" not in prometheus[2][1]["content"]  # item c has none
    assert "Score 3: The answer addresses part of the question" in prometheus[0][1]["content"]
    geval = judge(scripted, criteria="relevance;readability").prompts(items)
    assert len(geval) == 6  # item-major: a/relevance, a/readability, b/...
    assert "Readability (1-5): the answer is easy" in geval[1][1]["content"]
    assert "reference answer" not in geval[0][1]["content"]
    with_reference = judge(scripted, reference="yes").prompts(items)
    assert "A reference answer, for comparison:\ndiabetes is" in with_reference[0][1]["content"]
    tfn = judge(scripted, mode="tfn").prompts(items)
    assert len(tfn) == 2  # item c has no expected answer
    assert "Expected answer:\nrest\n" in tfn[1][1]["content"]


# -- rubric -----------------------------------------------------------------------------------
def test_geval_is_probability_weighted(scripted, items):
    out = judge(scripted, criteria="relevance;readability").evaluate(items)
    assert list(out.columns) == ["judge.relevance", "judge.readability", "judge_raw"]
    assert out["judge.relevance"].tolist() == pytest.approx([GEVAL] * 3, abs=1e-5)
    assert out["judge.readability"].tolist() == pytest.approx([GEVAL] * 3, abs=1e-5)
    entries = raw(out, 0)
    assert [e["criterion"] for e in entries] == ["relevance", "readability"]
    assert entries[0]["text"] == SCRIPTED_REPLY
    assert (entries[0]["stated"], entries[0]["weighted"]) == (4, True)
    # without log-probabilities: the stated integer
    plain = judge(scripted, logprobs=False).evaluate(items)
    assert plain["judge.relevance"].tolist() == [4.0, 4.0, 4.0]


def test_prometheus_reads_the_result(scripted, items):
    out = judge(scripted, style="prometheus").evaluate(items)
    assert out["judge.relevance"].tolist() == [3.0, 3.0, 3.0]
    assert raw(out, 1)[0]["stated"] == 3


def test_samples_give_mean_and_sd(scripted, items):
    out = judge(scripted, samples=4, temperature=1.0, seed=5, logprobs=False).evaluate(items)
    assert list(out.columns) == ["judge.relevance", "judge.relevance_sd", "judge_raw"]
    for row in range(3):
        entries = raw(out, row)
        assert [e["seed"] for e in entries] == [5, 6, 7, 8]
        stated = [e["stated"] for e in entries]
        assert set(stated) <= {3, 4, 5}
        mean, sd = mean_sd([float(s) for s in stated])
        assert out["judge.relevance"][row] == pytest.approx(mean)
        assert out["judge.relevance_sd"][row] == pytest.approx(sd, nan_ok=True)
    # the same item content gives the same samples (a seed per sample, not per batch)
    assert raw(out, 0) != [] and [e["text"] for e in raw(out, 0)] == [
        e["text"]
        for e in raw(
            judge(scripted, samples=4, temperature=1.0, seed=5, logprobs=False, batch=1).evaluate(
                items.iloc[[0]]
            ),
            0,
        )
    ]
    # G-Eval weights with the distribution, whatever token was drawn: sd 0
    weighted = judge(scripted, samples=3, temperature=1.0).evaluate(items)
    assert weighted["judge.relevance"].tolist() == pytest.approx([GEVAL] * 3, abs=1e-5)
    assert weighted["judge.relevance_sd"].tolist() == pytest.approx([0.0] * 3, abs=1e-6)


def test_unparseable_output_is_missing_with_the_raw_text_kept(tmp_path, items):
    # a random tiny model writes byte soup: no score, no label; NaN and None, never 0
    noise = str(build_tiny_llama(tmp_path / "noise"))
    out = Judge({"model": noise, "device": "cpu", "max_new_tokens": 6}).evaluate(items)
    assert out["judge.relevance"].isna().all()
    entries = raw(out, 0)
    assert entries[0]["text"] and entries[0]["score"] is None
    assert entries[0]["finish_reason"] == "length"
    tfn = Judge({"model": noise, "device": "cpu", "mode": "tfn"}).evaluate(items)
    assert tfn["judge.label"].tolist() == [None, None, None]
    assert tfn["judge.confidence"].isna().all() and tfn["judge.review"].tolist() == [True] * 3
    assert raw(tfn, 0)[0]["turns"][0]


# -- TRUE / FALSE / NOT GIVEN -----------------------------------------------------------------
def test_tfn_single(scripted, items):
    out = judge(scripted, mode="tfn").evaluate(items)
    assert list(out.columns) == ["judge.confidence", "judge.label", "judge.review", "judge_raw"]
    assert out["judge.label"].tolist() == ["TRUE", "TRUE", None]
    assert out["judge.confidence"][:2].tolist() == pytest.approx([P_TRUE] * 2, abs=1e-5)
    assert math.isnan(out["judge.confidence"][2])
    assert out["judge.review"].tolist() == [False, False, True]  # 0.731 >= 0.5; c: no reference
    assert raw(out, 0)[0]["confidence_source"] == "logprobs"
    assert raw(out, 2) == [{"skipped": "the item has no reference answer"}]
    strict = judge(scripted, mode="tfn", threshold=0.75).evaluate(items)
    assert strict["judge.review"].tolist() == [True, True, True]
    stated = judge(scripted, mode="tfn", logprobs=False).evaluate(items)
    assert stated["judge.confidence"][:2].tolist() == [0.8, 0.8]


def test_tfn_sequential(scripted, items):
    out = judge(scripted, mode="tfn", strategy="sequential").evaluate(items)
    assert out["judge.label"].tolist() == ["TRUE", "TRUE", None]
    # P(GIVEN) * P(TRUE | GIVEN)
    assert out["judge.confidence"][:2].tolist() == pytest.approx([P_GIVEN * P_TRUE] * 2, abs=1e-5)
    assert raw(out, 0)[0]["turns"] == [SCRIPTED_REPLY, SCRIPTED_REPLY]


def test_tfn_adaptive(scripted, items):
    # the reply states no "Label:", so every reasoning turn continues; the last turn's capitals
    # give TRUE: 2 reasoning turns + 1 final turn, each stating 0.8
    out = judge(scripted, mode="tfn", strategy="adaptive", steps=2).evaluate(items)
    assert out["judge.label"].tolist() == ["TRUE", "TRUE", None]
    assert out["judge.confidence"][:2].tolist() == pytest.approx([0.8**3] * 2)
    entries = raw(out, 1)
    assert len(entries[0]["turns"]) == 3 and entries[0]["step_confidences"] == [0.8] * 3
    one_step = judge(scripted, mode="tfn", strategy="adaptive", steps=1).evaluate(items)
    assert one_step["judge.confidence"][:2].tolist() == pytest.approx([0.64] * 2)
    assert one_step["judge.review"].tolist() == [False, False, True]


def test_tfn_samples_vote(scripted, items):
    out = judge(scripted, mode="tfn", strategy="sequential", samples=5, temperature=1.0).evaluate(
        items
    )
    assert list(out.columns) == [
        "judge.confidence",
        "judge.confidence_sd",
        "judge.agreement",
        "judge.label",
        "judge.review",
        "judge_raw",
    ]
    for row in range(2):
        samples = raw(out, row)
        labels = [s["label"] for s in samples]
        winner = max(("TRUE", "FALSE", "NOT GIVEN"), key=labels.count)
        assert out["judge.label"][row] == winner
        assert out["judge.agreement"][row] == labels.count(winner) / 5
        confidences = [s["confidence"] for s in samples if s["label"] == winner]
        mean, sd = mean_sd(confidences)
        assert out["judge.confidence"][row] == pytest.approx(mean)
        assert out["judge.confidence_sd"][row] == pytest.approx(sd, nan_ok=True)
        # each sample's confidence follows its path: P(GIVEN) P(TRUE) or P(GIVEN) P(FALSE),
        # P(NOT GIVEN) when the sample stopped at the first decision
        for sample in samples:
            if sample["label"] == "TRUE" and len(sample["turns"]) == 2:
                assert sample["confidence"] == pytest.approx(P_GIVEN * P_TRUE, abs=1e-5)
            if sample["label"] == "FALSE":
                assert sample["confidence"] == pytest.approx(P_GIVEN * (1 - P_TRUE), abs=1e-5)


# -- forced choice ----------------------------------------------------------------------------
def test_forced_choice_by_hand(scripted, items):
    # G-Eval: the five scores scored as the reply: the same distribution as the first token
    rubric = judge(scripted, decoding="choice").evaluate(items)
    assert rubric["judge.relevance"].tolist() == pytest.approx([GEVAL] * 3, abs=1e-5)
    entry = raw(rubric, 0)[0]
    assert (entry["text"], entry["finish_reason"], entry["stated"]) == ("4", "choice", 4)
    assert set(entry["choice_logprobs"]) == {"1", "2", "3", "4", "5"}
    # after "Label:" the script gives " TRUE" 1, " FALSE" 0, " NOT" 0 (then " GIVEN" ~1):
    # p(TRUE) = e / (e + 1 + 1)
    single = judge(scripted, mode="tfn", decoding="choice").evaluate(items)
    assert single["judge.label"].tolist() == ["TRUE", "TRUE", None]
    assert single["judge.confidence"][:2].tolist() == pytest.approx([E / (E + 2)] * 2, abs=1e-5)
    assert raw(single, 0)[0]["turns"] == ["Label: TRUE"]
    assert raw(single, 0)[0]["confidence_source"] == "choice"
    # after "Decision:" " GIVEN" 1 and " NOT" 0; then " TRUE" 1 and " FALSE" 0
    chain = judge(scripted, mode="tfn", strategy="sequential", decoding="choice").evaluate(items)
    assert chain["judge.confidence"][:2].tolist() == pytest.approx([(E / (E + 1)) ** 2] * 2)
    assert raw(chain, 1)[0]["turns"] == ["Decision: GIVEN", "Label: TRUE"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("judge:decoding=choice,style=prometheus", "prometheus needs the model's own text"),
        ("judge:decoding=choice,mode=tfn,strategy=adaptive", "adaptive needs the model's own"),
        ("judge:decoding=choice,backend=openai", "decoding=choice needs backend=local"),
        ("judge:decoding=choice,samples=2,temperature=1", "deterministic; use samples=1"),
    ],
)
def test_forced_choice_limits(spec, message):
    with pytest.raises(ConfigError, match=message):
        make_evaluator(spec)


# -- cache and fingerprint --------------------------------------------------------------------
def test_second_run_is_served_from_the_cache(scripted, items, tmp_path):
    cache = EvaluationCache(tmp_path / "evaluations.sqlite")
    spec = f"judge:model={scripted},device=cpu,mode=tfn"
    first = evaluate(items, spec, cache)
    (counts,) = first.attrs["evaluators"].values()
    assert (counts["computed"], counts["from_cache"]) == (3, 0)
    second = evaluate(items, spec, cache)
    (counts,) = second.attrs["evaluators"].values()
    assert (counts["computed"], counts["from_cache"]) == (0, 3)
    pd.testing.assert_frame_equal(first, second)
    assert second["judge.label"].tolist() == ["TRUE", "TRUE", None]  # None, not NaN
    # another seed is another cache entry (temperature 0 or not: the key holds it)
    third = evaluate(items, spec + ",seed=1", cache)
    assert next(iter(third.attrs["evaluators"].values()))["computed"] == 3


def test_fingerprint_holds_model_template_and_decoding(scripted, tmp_path):
    base = judge(scripted).fingerprint()
    assert base == judge(scripted, batch=2, concurrency=9, timeout=1.0, retries=0).fingerprint()
    for changed in ({"seed": 1}, {"max_new_tokens": 5}, {"criteria": "readability"}):
        assert judge(scripted, **changed).fingerprint() != base
    # parameters the mode never reads do not split the cache
    assert judge(scripted, steps=7, strategy="adaptive", base_url="http://x").fingerprint() == base
    tfn = judge(scripted, mode="tfn").fingerprint()
    assert judge(scripted, mode="tfn", criteria="fluency").fingerprint() == tfn
    assert judge(scripted, mode="tfn", threshold=0.9).fingerprint() != tfn
    forced = judge(scripted, decoding="choice").fingerprint()
    assert forced != base and judge(scripted, decoding="choice", seed=3).fingerprint() == forced
    other_model = build_tiny_llama(tmp_path / "other")
    assert judge(str(other_model)).fingerprint() != base
    # the template file's content: an edited copy under the same name is another key
    copy = tmp_path / "geval-v1.txt"
    shutil.copy(TEMPLATE_DIR / "geval-v1.txt", copy)
    same_text = judge(scripted, template=str(copy))
    assert same_text.template.sha256 == judge(scripted).template.sha256
    copy.write_text(copy.read_text() + "\nBe strict.\n")
    assert judge(scripted, template=str(copy)).fingerprint() != same_text.fingerprint()


# -- the real offline model -------------------------------------------------------------------
@pytest.mark.slow
def test_smollm2_judges_end_to_end(items):
    """The packaged SmolLM2-135M-Instruct (GGUF) through the whole path: scores on the 1-5
    scale or missing, labels among the three or missing, raw text kept."""
    from nrp.llm.local import smollm2_gguf

    try:
        smollm2_gguf()
    except ConfigError as exc:
        pytest.skip(str(exc))
    two = items.iloc[:2].reset_index(drop=True)
    rubric = Judge({"device": "cpu", "criteria": "relevance", "max_new_tokens": 4})
    first = rubric.evaluate(two)
    scores = first["judge.relevance"].dropna()
    assert ((scores >= 1) & (scores <= 5)).all()
    assert all(raw(first, i)[0]["text"] is not None for i in range(2))
    tfn = Judge({"device": "cpu", "mode": "tfn", "max_new_tokens": 12}).evaluate(two)
    assert set(tfn["judge.label"].dropna()) <= {"TRUE", "FALSE", "NOT GIVEN"}
    assert tfn["judge.review"].tolist() == [
        label is None or not conf >= 0.5
        for label, conf in zip(tfn["judge.label"], tfn["judge.confidence"], strict=True)
    ]
