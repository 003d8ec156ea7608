"""Validity inside validation, on a hand-made collection: a ranker that prefers the question's
words is refused by the selection rule with the reason printed, the guarded ranker is chosen,
and the JSON carries it all."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from nrp import Collection, ingest
from nrp.errors import ConfigError, NrpWarning
from nrp.rankers.base import Ranker
from nrp.validation import ValidationResult, validate
from nrp.validation.selection import Choice, choose

MANIFEST = """\
name: answers
data_root: .
dimensions:
  relevance:
    grades: {0: wrong, 1: partial, 2: good}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: docs.tsv, holds: documents}
  - {format: trec-qrels, path: rel.qrels, dimension: relevance}
"""
TOPICS = (
    "qid\tquery\n"
    "q1\tDoes vitamin C prevent colds?\n"
    "q2\tCan ibuprofen raise blood pressure?\n"
    "q3\tIs melatonin safe for children?\n"
)
DOCS = {
    "d1": "Large trials found that taking vitamin C every day does not lower the number of "
    "colds for most people. It may shorten a cold by a few hours, and in athletes under heavy "
    "physical stress it halved the risk.",
    "d2": "Colds are caused by viruses that spread by hand contact and droplets. Washing hands "
    "often is the measure with the best evidence for preventing them.",
    "d3": "Zinc lozenges started within a day of the first symptoms may shorten a cold slightly, "
    "but they often leave a bad taste and nausea.",
    "d4": "Ibuprofen and other NSAIDs make the kidneys keep salt and water, which can push blood "
    "pressure up by a few points. People treated for hypertension should ask before long use.",
    "d5": "Short courses at the lowest dose are usually safe for most adults. Checking blood "
    "pressure after a week of regular use shows whether it rose.",
    "d6": "Paracetamol is an alternative for pain that does not act on the kidneys in the same "
    "way, and doctors often suggest it for people with heart disease.",
    "d7": "Short-term use at low doses appears safe for most children, according to small "
    "trials. Paediatricians advise fixing sleep routines first and asking before supplements.",
    "d8": "Melatonin is a hormone the brain makes in the dark. Supplements are sold without "
    "prescription in some countries and need one in others.",
    "d9": "Long-term effects on puberty are not known, because few studies followed children for "
    "more than a year; doses in products often differ from the label.",
}
QRELS = (
    "q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 1\nq2 0 d4 2\nq2 0 d5 1\nq2 0 d6 0\n"
    "q3 0 d7 2\nq3 0 d8 1\nq3 0 d9 1\n"
)


class QuestionOverlap(Ranker):
    """Score = the share of the question's words found in the text: an echo scores 1."""

    name = "question_overlap"

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        def words(text: str) -> set[str]:
            return {w.strip("?.,").lower() for w in text.split()}

        return np.array(
            [
                len(words(q) & words(t)) / len(words(q))
                for q, t in zip(frame["query"], frame["text"], strict=True)
            ]
        )


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> Collection:
    root = tmp_path_factory.mktemp("validity")
    data = root / "data"
    data.mkdir()
    (data / "manifest.yaml").write_text(MANIFEST)
    (data / "topics.tsv").write_text(TOPICS)
    (data / "docs.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t}\n" for d, t in DOCS.items())
    )
    (data / "rel.qrels").write_text(QRELS)
    ingest(data / "manifest.yaml", indexes_dir=root / "ix")
    return Collection.load("answers", root / "ix")


#: nine answers on three questions: too few texts for the guard's figures on composed kinds
#: (its held-out evasion family, spliced questions) to mean much, so these tests rank the kinds
#: that mirror the question word for word (validation on real collections: docs/validity.md)
KINDS = "echo,restated,keywords"


def test_a_ranker_of_question_words_is_passed_over_with_its_reason(answers):
    result = validate(answers, [QuestionOverlap(), "guard"], cache=False, validity_kinds=KINDS)
    dim = result.dimensions["relevance"]
    overlap = dim.validity["question_overlap"]
    # the echo holds every question word: score 1, above every judged document of its query
    assert overlap.kinds["echo"].wins == 0.0 and overlap.kinds["echo"].nrp == 1.0
    assert not overlap.passed
    assert overlap.reason == "echo: judged documents above it in 0.000 of pairs (< 0.95)"
    guard = dim.validity["guard"]
    assert guard.passed, guard.reason
    assert guard.kinds["echo"].wins == 1.0 and guard.kinds["echo"].nrp == 0.0
    assert dim.choice.best == "guard"
    if dim.summary["question_overlap"]["nDCG@10"].mean > dim.summary["guard"]["nDCG@10"].mean:
        assert dim.choice.passed_over == (("question_overlap", overlap.reason),)
    table = result.tables()["relevance"]
    assert "question_overlap" in table and "FAIL" in table and "pass" in table
    # the JSON keeps the validity and reads back equal
    again = ValidationResult.from_dict(json.loads(result.to_json()))
    assert again.dimensions["relevance"].validity["guard"].kinds["echo"].wins == 1.0
    assert again.dimensions["relevance"].choice == dim.choice


def test_nothing_passes_nothing_is_chosen_and_a_warning_names_the_command(answers):
    with pytest.warns(NrpWarning):  # said in Python too (the next test)
        result = validate(answers, [QuestionOverlap()], cache=False, validity_kinds=KINDS)
    assert result.dimensions["relevance"].choice is None
    assert result.chosen() == {}
    (warning,) = result.warnings
    assert "no ranker passed validity" in warning
    assert "nrp validate answers --rankers dense,guard:ranker=dense" in warning
    assert "no ranker passed validity: nothing chosen" in result.tables()["relevance"]
    # without validity the same ranker is chosen
    assert validate(answers, [QuestionOverlap()], cache=False, validity=False).chosen() == {
        "relevance": "question_overlap"
    }


def test_python_says_why_nothing_was_chosen_and_prints_the_clis_tables(answers):
    reason = r"'relevance': no ranker passed validity .* \(print the result for its tables\)"
    with pytest.warns(NrpWarning, match=reason):
        result = validate(answers, {"overlap": QuestionOverlap()}, cache=False,
                          validity_kinds=KINDS)  # fmt: skip
    assert result.chosen() == {}
    text = str(result)
    assert text == result.format() and not text.startswith("ValidationResult(")
    assert "no ranker passed validity: nothing chosen" in text and "overlap" in text
    assert "FAIL" in text and "echo" in text  # the validity table, as the CLI prints it
    assert text.endswith(f"warnings:\n  {result.warnings[0]}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", NrpWarning)  # a choice made: no warning
        validate(answers, [QuestionOverlap(), "guard"], cache=False, validity_kinds=KINDS)


def test_the_cli_prints_who_was_passed_over_and_why(answers):
    proc = subprocess.run(
        [sys.executable, "-m", "nrp", "validate", "answers", "--rankers", "tfidf,guard",
         "--indexes", str(answers.path.parent), "--out", str(answers.path / "v.json"),
         "--validity-kinds", KINDS],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads((answers.path / "v.json").read_text())
    assert data["chosen"] == {"relevance": "guard"}
    tfidf = data["dimensions"]["relevance"]["validity"]["tfidf"]
    assert tfidf["passed"] is False and tfidf["reason"].startswith("echo: ")
    assert "tfidf" in proc.stdout and "FAIL" in proc.stdout
    for line in proc.stdout.splitlines():
        if line.strip().startswith("passed over: tfidf"):
            assert "(fails validity: echo: judged documents above it in" in line
    bad = subprocess.run(
        [sys.executable, "-m", "nrp", "validate", "answers", "--rankers", "tfidf",
         "--validity-min-wins", "2", "--indexes", str(answers.path.parent)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "validity_min_wins, validity_fallback_wins and validity_max_nrp must lie" in bad.stderr


def test_validation_reports_the_chosen_rankers_worst_kind_by_grade(answers):
    """validation.json holds each kind's pairs by the judged document's grade (1 and 2 here),
    and the table a line for the chosen ranker's worst kind; a file written before it has no
    such line."""
    result = validate(answers, ["tfidf", "guard"], cache=False, validity_kinds=KINDS)
    dimension = result.dimensions["relevance"]
    assert dimension.choice.best == "guard"
    guard = dimension.validity["guard"]
    # the echo, one per query, meets every relevant document of its query once: grade 2 d1, d4,
    # d7; grade 1 d2, d3 (q1), d5 (q2), d8, d9 (q3)
    assert {g: v["pairs"] for g, v in guard.by_grade["echo"].items()} == {"1": 5, "2": 3}
    assert set(guard.by_grade) == set(guard.kinds)
    worst = min(guard.kinds.values(), key=lambda g: (g.wins, g.group))
    parts = ", ".join(
        f"grade {g} {v['wins']:.3f} ({v['pairs']} pairs)"
        for g, v in guard.by_grade[worst.group].items()
    )
    line = (
        "    guard's worst kind by the judged document's grade (pairs pooled over queries): "
        f"{worst.group}: {parts}"
    )
    assert line in result.tables()["relevance"].splitlines()
    data = json.loads(result.to_json())
    again = ValidationResult.from_dict(data).dimensions["relevance"].validity["guard"]
    assert again.by_grade == guard.by_grade
    for validity_of in data["dimensions"]["relevance"]["validity"].values():
        del validity_of["by_grade"]
    assert (
        "by the judged document's grade"
        not in ValidationResult.from_dict(data).tables()["relevance"]
    )


def test_other_best_ranks_the_best_documents_of_the_other_queries_drawn(answers):
    """Each question's other_best texts are the best documents of the other questions drawn
    (five by default; two other questions here): q1 meets d4 and d7 with its d1 (grade 2) and
    d2, d3 (grade 1); q2 d1 and d7 with d4 (2) and d5 (1; d6 is graded 0); q3 d1 and d4 with d7
    (2), d8 and d9 (1). One draw: each question meets one of them."""
    result = validate(answers, ["tfidf"], cache=False, validity_kinds="other_best")
    tfidf = result.dimensions["relevance"].validity["tfidf"]
    assert {g: v["pairs"] for g, v in tfidf.by_grade["other_best"].items()} == {"1": 10, "2": 6}
    assert json.loads(result.to_json())["settings"]["validity_other_draws"] == 5
    one = (
        validate(
            answers, ["tfidf"], cache=False, validity_kinds="other_best", validity_other_draws=1
        )
        .dimensions["relevance"]
        .validity["tfidf"]
    )
    assert {g: v["pairs"] for g, v in one.by_grade["other_best"].items()} == {"1": 5, "2": 3}
    bad = subprocess.run(
        [sys.executable, "-m", "nrp", "validate", "answers", "--rankers", "tfidf",
         "--validity-other-draws", "0", "--indexes", str(answers.path.parent),
         "--out", str(answers.path / "draws.json")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "validity_other_draws must be at least 1" in bad.stderr
    assert not (answers.path / "draws.json").exists()


def test_validation_counts_the_judged_answers_a_ranker_floors(answers):
    """Beside validity: the graded-relevant judged documents each ranker puts on its floor (the
    guard's flags; a ranker that only orders floors none), all and those of at most 60 words
    (here every one). The guard flags d1 (grade 2) alone of the eight, as its own ``assess``
    says."""
    from nrp.rankers.registry import make_ranker
    from nrp.validation.validity import FlooredAnswers

    result = validate(answers, ["tfidf", "guard"], cache=False, validity_kinds=KINDS)
    validity = result.dimensions["relevance"].validity
    guard = make_ranker("guard")
    guard.bind_collection(answers)
    candidates = answers.candidates()
    flagged = candidates[guard.assess(candidates)["flagged"].to_numpy()]
    assert flagged["docno"].tolist() == ["d1"]
    assert validity["guard"].answers == FlooredAnswers(8, 1, 8, 1)
    assert validity["tfidf"].answers == validity["random"].answers == FlooredAnswers(8, 0, 8, 0)
    table = result.tables()["relevance"]
    assert "answers floored (<= 60 words)" in table
    below = table.split("(<= 60 words)")[1].splitlines()[1:]
    rows = [line.split() for line in below if line.split()[0] in ("tfidf", "guard", "random")]
    assert {row[0]: row[-3:-1] for row in rows} == {
        "tfidf": ["0/8", "(0/8)"], "guard": ["1/8", "(1/8)"], "random": ["0/8", "(0/8)"],
    }  # fmt: skip
    again = ValidationResult.from_dict(json.loads(result.to_json()))
    assert again.dimensions["relevance"].validity["guard"].answers == FlooredAnswers(8, 1, 8, 1)
    # a file written before the count: read back without it, shown as -
    data = json.loads(result.to_json())
    for validity_of in data["dimensions"]["relevance"]["validity"].values():
        del validity_of["answers"]
    older = ValidationResult.from_dict(data).tables()["relevance"]
    below = older.split("answers floored")[2].splitlines()[1:]
    rows = [line.split() for line in below if line.split()[0] in ("tfidf", "guard", "random")]
    assert "words)" not in older and [row[-2] for row in rows] == ["-", "-", "-"]
    assert not make_ranker("tfidf").floors(np.array([-7000.0, 0.5])).any()
    assert guard.floors(np.array([-7000.0, -5000.0, -4999.0, 0.5])).tolist() == [
        True, False, False, False,
    ]  # fmt: skip


def test_choose_skips_failed_rankers_and_names_those_above():
    means = {"a": {"m": 0.9}, "b": {"m": 0.8}, "c": {"m": 0.7}}
    p = {frozenset(("a", "b")): 0.01, frozenset(("a", "c")): 0.01, frozenset(("b", "c")): 0.2}
    choice = choose(means, ["m"], ["a", "b", "c"], p, failed={"a": "echo: 0.1"})
    assert (choice.best, choice.runner_up, choice.runner_up_p) == ("b", "c", 0.2)
    assert choice.passed_over == (("a", "echo: 0.1"),)
    assert choose(means, ["m"], ["a"], p, failed={"a": "x"}) is None


def test_choose_falls_back_only_when_every_ranker_failed():
    means = {"a": {"m": 0.9}, "b": {"m": 0.8}, "c": {"m": 0.7}}
    p = {frozenset(("a", "b")): 0.01, frozenset(("a", "c")): 0.01, frozenset(("b", "c")): 0.2}
    every = {"a": "echo: 0.1", "b": "other_best: 0.93", "c": "keywords: 0.94"}
    # a fails the fallback (0.9) too; b and c pass it: b, named as chosen under the fallback
    fallback = (0.9, {"a": "echo: 0.1 (< 0.9)"})
    choice = choose(means, ["m"], ["a", "b", "c"], p, failed=every, fallback=fallback)
    assert (choice.best, choice.runner_up, choice.fallback_wins) == ("b", "c", 0.9)
    assert choice.passed_over == (("a", "echo: 0.1 (< 0.9)"),)
    assert Choice.from_dict(json.loads(json.dumps(choice.to_dict()))) == choice
    # c passes the rule itself: no fallback, c chosen over b
    passed_c = {"a": every["a"], "b": every["b"]}
    choice = choose(means, ["m"], ["a", "b", "c"], p, failed=passed_c, fallback=fallback)
    assert (choice.best, choice.fallback_wins) == ("c", None)
    # every ranker fails the fallback too: nothing chosen
    assert choose(means, ["m"], ["a"], p, failed=every, fallback=(0.9, every)) is None
    # a choice written before the fallback reads back as made under the rule
    old = {k: v for k, v in choice.to_dict().items() if k != "fallback_wins"}
    assert Choice.from_dict(old).fallback_wins is None


def test_where_nothing_passes_the_fallback_chooses_and_says_so(answers):
    # question_overlap puts every echo above every judged document: wins 0.0, NRP 1.0. With the
    # NRP bound out of the way (1.0), it fails a rule of 0.5 wins and passes a fallback of 0.0
    rule = dict(validity_kinds=KINDS, validity_min_wins=0.5, validity_max_nrp=1.0)
    with pytest.warns(NrpWarning, match="chosen under the fallback"):
        result = validate(
            answers, [QuestionOverlap()], cache=False, validity_fallback_wins=0.0, **rule
        )
    dim = result.dimensions["relevance"]
    overlap = dim.validity["question_overlap"]
    assert not overlap.passed and overlap.fallback_reason == ""
    assert overlap.reason == "echo: judged documents above it in 0.000 of pairs (< 0.5)"
    assert overlap.rule["fallback_wins"] == 0.0
    assert dim.choice.best == "question_overlap" and dim.choice.fallback_wins == 0.0
    assert result.chosen() == {"relevance": "question_overlap"}
    warning = result.warnings[0]  # (then: three queries, not significantly above random)
    assert warning == (
        "'relevance': no ranker passed validity (judged documents above each degenerate kind "
        "in 0.5 of pairs); question_overlap is chosen under the fallback (0.0): the validity "
        "table says each ranker's worst kind"
    )
    table = result.tables()["relevance"]
    assert "no ranker passed validity (0.5): chosen under the fallback" in table
    assert "(fallback, chosen from where none passes: >= 0.0 wins)" in table
    assert any(line.rstrip().endswith("fallback") for line in table.splitlines())
    again = ValidationResult.from_dict(json.loads(result.to_json()))
    assert again.dimensions["relevance"].choice == dim.choice
    assert again.dimensions["relevance"].validity["question_overlap"] == overlap
    # the default fallback (0.90) is above what it reaches: nothing chosen; a fallback above
    # the rule's share is the rule's share (no fallback)
    with pytest.warns(NrpWarning, match="nothing is chosen"):
        assert validate(answers, [QuestionOverlap()], cache=False, **rule).chosen() == {}
    with pytest.warns(NrpWarning, match="nothing is chosen"):
        above = validate(
            answers, [QuestionOverlap()], cache=False, validity_fallback_wins=0.8, **rule
        )
    assert above.settings["validity_fallback_wins"] == 0.5
    with pytest.raises(ConfigError, match="validity_fallback_wins and validity_max_nrp must lie"):
        validate(answers, [QuestionOverlap()], cache=False, validity_fallback_wins=-0.1)


def test_with_the_chosen_guard_an_echo_gets_nrp_0_and_a_real_answer_does_not(answers):
    from nrp.positioning.scoring import score_answers

    validation = validate(answers, ["tfidf", "guard"], cache=False, validity_kinds=KINDS)
    assert validation.chosen() == {"relevance": "guard"}
    topics = answers.topics
    rows = [
        {"answer_id": f"echo-{q}", "llm": "echo", "qid": q, "text": text}
        for q, text in zip(topics["qid"], topics["query"], strict=True)
    ]
    rows.append(
        {"answer_id": "real-q1", "llm": "real", "qid": "q1",
         "text": "Taking vitamin C every day does not prevent colds in the general population, "
         "according to large trials; it can make a cold a little shorter. People under heavy "
         "physical stress, such as marathon runners, had about half as many colds."}
    )  # fmt: skip
    results = score_answers(answers, pd.DataFrame(rows), validation, cache=False)
    nrp = results[results["dimension"] == "relevance"].set_index("answer_id")["nrp"]
    # each echo is flagged: every judged document ranks above it (3 of 3: NRP 1 - 3/3)
    assert nrp[["echo-q1", "echo-q2", "echo-q3"]].tolist() == [0.0, 0.0, 0.0]
    assert nrp["real-q1"] > 0
    # tfidf alone would have put every echo first
    plain = score_answers(answers, pd.DataFrame(rows), "tfidf", cache=False)
    assert (plain[plain["answer_id"].str.startswith("echo")]["nrp"] == 1.0).all()


def test_the_bound_guard_calibrates_each_detector_on_the_collections_judged_answers(answers):
    """``calibrate=S``: each detector's threshold is set so that it flags S of the collection's
    judged answers (gain above 0: eight here) where that loosens it (the fitted threshold where it
    is lower), kept beside the collection and read from there by the next guard; 0, or too few
    answers for S, keeps the model's thresholds."""
    from nrp.rankers.guard_model import packaged_model
    from nrp.rankers.registry import make_ranker

    relevant = answers.candidates().merge(
        answers.qrels("relevance").query("label > 0")[["qid", "docno"]]
    )
    assert len(relevant) == 8
    guard = make_ranker("guard:calibrate=0.125")
    guard.bind_collection(answers)
    calibrated = guard.detectors()
    table = guard.features().frame(relevant["query"].tolist(), relevant["text"].tolist())
    model = packaged_model()
    flags = {}
    for detector, before in zip((calibrated, *calibrated.also), (model, *model.also), strict=True):
        p = detector.probability(table[list(detector.features)].to_numpy(dtype=float))
        # the second lowest (flags one of eight), unless the fitted threshold is lower
        assert detector.threshold == min(np.sort(p)[1], before.threshold)
        flags[detector.fitted_on["name"]] = int((p < detector.threshold).sum())
    # here every detector was fitted stricter than these answers need: none is tightened to them
    # (the second lowest of mirror's is 0.87 against its fitted 0.16); generic and hollow flag
    # their lowest (0.004 under 0.039, 0.010 under 0.074), the others none
    assert calibrated == model
    assert flags == {
        "mirror": 0, "generic": 1, "elsewhere": 0, "off_topic": 0, "disorder": 0, "hollow": 1,
        "asking": 0,
    }  # fmt: skip
    # the floor: the evidence that floors one of eight (the second largest), unless the fitted
    # one (ln 2) is above it; here it is: one detector each on two answers, not half below
    evidence = np.sort(calibrated.evidence(table))[::-1]
    assert calibrated.floor_evidence == max(np.log(2), evidence[1]) == np.log(2)
    assert guard.assess(relevant)["flagged"].sum() == (evidence > np.log(2) * (1 + 1e-5)).sum()
    (kept,) = answers.path.glob("guard-thresholds-*.json")
    thresholds = [d.threshold for d in (calibrated, *calibrated.also)]
    written = {"thresholds": thresholds, "floor_evidence": np.log(2)}
    assert json.loads(kept.read_text()) == written
    # the next guard reads them (a value changed in the file is what it uses)
    kept.write_text(json.dumps({"thresholds": [0.5, *thresholds[1:]], "floor_evidence": 3.0}))
    again = make_ranker("guard:calibrate=0.125")
    again.bind_collection(answers)
    assert (again.detectors().threshold, again.detectors().floor_evidence) == (0.5, 3.0)
    for damaged in ("[1, 2]", "not json", json.dumps(thresholds)):  # computed again, written
        kept.write_text(damaged)
        third = make_ranker("guard:calibrate=0.125")
        third.bind_collection(answers)
        assert [d.threshold for d in (third.detectors(), *third.detectors().also)] == thresholds
        assert json.loads(kept.read_text()) == written
    for spec in ("guard:calibrate=0", "guard:calibrate=0.1"):  # 0.1: needs ten answers
        other = make_ranker(spec)
        other.bind_collection(answers)
        assert other.detectors() is other.model == model
    assert make_ranker("guard").detectors() is model  # unbound
    assert make_ranker("guard").params["calibrate"] == 0.01
    assert len({make_ranker(f"guard:calibrate={s}").fingerprint() for s in (0, 0.01, 0.1)}) == 3
