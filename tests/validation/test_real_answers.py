"""Real answers in validation (``nrp validate --real-answers``) and the guard's calibration
cross-fitted, on a hand-made collection where every figure is computed by hand: a guard with one
detector that reads ``log_novel`` alone (the probability of a real answer is then
``(n + 1) / (n + 2)`` for a text that adds ``n`` new content terms to its question), over a ranker
that scores the share of the question's words a text holds."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_validity_selection import MANIFEST, QuestionOverlap

from nrp import Collection, ingest
from nrp.errors import ConfigError
from nrp.rankers.guard import GuardRanker
from nrp.rankers.guard_model import GuardModel
from nrp.validation import ValidationResult, validate
from nrp.validation.validity import (
    CrossFitted,
    RealAnswers,
    ScoredText,
    Validity,
    real_answer_figures,
    with_real_answers,
)

TOPICS = {"q1": "knee pain", "q2": "dry cough", "q3": "sore throat", "q4": "back pain"}
#: qid -> its two judged answers (both relevant) and the new content terms each adds
DOCS = {
    "q1": [("a1", "Ibuprofen.", 1), ("a2", "Ibuprofen, rest, ice, elevation.", 4)],
    "q2": [("b1", "Honey and lemon.", 2), ("b2", "Honey, lemon, steam, water, sleep.", 5)],
    "q3": [("c1", "Lozenges.", 1), ("c2", "Gargling.", 1)],
    "q4": [("d1", "Stretching, walking, heat.", 3),
           ("d2", "Stretching, walking, heat, massage, yoga, posture.", 6)],
}  # fmt: skip
#: real answers nobody judged: the question alone (no new term: flagged), and an answer
REAL = [
    {"llm": "people", "prompt": "forum", "qid": "q1", "text": "Knee pain?"},
    {"llm": "people", "prompt": "forum", "qid": "q1",
     "text": "Knee pain eases with ibuprofen, rest and ice."},
    {"llm": "people", "prompt": "forum", "qid": "q2", "text": "Dry cough."},
]  # fmt: skip


def _collection(root: Path, name: str, topics: dict, docs: dict, qrels: str) -> Collection:
    """A collection of ``topics`` (qid -> query), ``docs`` (docno -> text) and TREC ``qrels``,
    ingested under ``root``."""
    data = root / "data"
    data.mkdir()
    (data / "manifest.yaml").write_text(MANIFEST.replace("name: answers", f"name: {name}"))
    (data / "topics.tsv").write_text(
        "qid\tquery\n" + "".join(f"{q}\t{t}\n" for q, t in topics.items())
    )
    (data / "docs.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t}\n" for d, t in docs.items())
    )
    (data / "rel.qrels").write_text(qrels)
    ingest(data / "manifest.yaml", indexes_dir=root / "ix")
    return Collection.load(name, root / "ix")


@pytest.fixture(scope="module")
def remedies(tmp_path_factory) -> Collection:
    root = tmp_path_factory.mktemp("real")
    docs = {d: text for rows in DOCS.values() for d, text, _ in rows}
    qrels = "".join(f"{q} 0 {d} 2\n" for q, rows in DOCS.items() for d, _, _ in rows)
    collection = _collection(root, "remedies", TOPICS, docs, qrels)
    # floored on any evidence (a detector below its threshold at all), and on half (ln 2)
    GuardModel(("log_novel",), (1.0,), 0.0, 0.99, floor_evidence=0.0).to_json(root / "novel.json")
    GuardModel(("log_novel",), (1.0,), 0.0, 0.99).to_json(root / "half.json")
    return collection


def _guard(collection: Collection, model_file: str = "novel.json") -> GuardRanker:
    """The one-detector guard over question overlap, each detector's threshold calibrated to
    flag a quarter of the collection's judged answers; it floors a text on any evidence (a
    detector below its threshold), or on ``half.json``'s floor (ln 2)."""
    model = collection.path.parent.parent / model_file
    guard = GuardRanker({"model": str(model), "calibrate": 0.25}, ranker=QuestionOverlap())
    guard.bind_collection(collection)
    return guard


def _answers_file(folder: Path, rows: list[dict]) -> Path:
    path = folder / "real.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_detector_reads_the_new_terms_counted_by_hand(remedies):
    guard = _guard(remedies)
    rows = [(TOPICS[q], text, n) for q, docs in DOCS.items() for _, text, n in docs]
    table = guard.features().frame([q for q, _, _ in rows], [t for _, t, _ in rows])
    assert np.allclose(table["log_novel"], [np.log(1 + n) for _, _, n in rows])
    # calibrated on all eight: p = 2/3, 2/3, 2/3, 3/4, 4/5, ...; flags a quarter at most: the
    # third lowest, 2/3, flags none of them (in-sample, by construction)
    assert guard.detectors().threshold == pytest.approx(2 / 3)
    assert not guard.flags(remedies.candidates()).any()


def test_cross_fitted_calibration_flags_what_the_other_half_says(remedies):
    """The questions drawn into two parts with seed 0: q1 and q2, q3 and q4. Part 1's
    thresholds from part 0 (p 2/3, 3/4, 5/6, 6/7: the second lowest, 3/4) flag q3's two answers
    (2/3); part 0's from part 1 (2/3, 2/3, 4/5, 7/8: 2/3) flag none. 2 of 8, where in-sample
    calibration flags 0."""
    assert (np.random.default_rng(0).permutation(4) % 2).tolist() == [0, 0, 1, 1]
    for kept in remedies.path.glob("guard-crossfit-*.json"):
        kept.unlink()
    assert _guard(remedies).cross_fitted_floors(2, 0) == (8, 2)
    assert QuestionOverlap().cross_fitted_floors(2, 0) is None
    # kept beside the collection, and read from there by the next guard
    (kept,) = remedies.path.glob("guard-crossfit-*.json")
    assert json.loads(kept.read_text()) == [8, 2]
    kept.write_text("[8, 5]\n")
    assert _guard(remedies).cross_fitted_floors(2, 0) == (8, 5)
    kept.write_text("not json")  # computed again
    assert _guard(remedies).cross_fitted_floors(2, 0) == (8, 2)
    kept.unlink()
    # the floor at ln 2: q3's answers are at 8/9 of part 0's threshold (evidence 0.118): none
    assert _guard(remedies, "half.json").cross_fitted_floors(2, 0) == (8, 0)


def test_real_answers_floored_flagged_and_their_place_under_the_ranker_alone(remedies, tmp_path):
    """The guard floors "Knee pain?" and "Dry cough." (no new term: p 1/2 under 2/3): NRP 0,
    where question overlap alone puts them above both judged answers (NRP 1): two lost their
    place. The answer that adds four terms keeps NRP 1. 2 of 3 floored fails the rule (2%)."""
    guard = _guard(remedies)
    path = _answers_file(tmp_path, REAL)
    result = validate(
        remedies, {"gate": guard, "overlap": QuestionOverlap()}, cache=False,
        validity_kinds="echo", real_answers=[path],
    )  # fmt: skip
    validity = result.dimensions["relevance"].validity
    real = validity["gate"].real
    assert real == RealAnswers(
        answers=3, floored=2, flagged=2, nrp=pytest.approx(1 / 3), base="question_overlap",
        base_nrp=1.0, lost=2, sources=(str(path),), read=3,
    )  # fmt: skip
    assert validity["overlap"].real == RealAnswers(3, 0, 0, 1.0, sources=(str(path),), read=3)
    assert not validity["gate"].passed
    assert validity["gate"].reason == "real answers: 2 of 3 floored (66.7% > 2.0%)"
    assert validity["gate"].cross_fitted == CrossFitted(answers=8, floored=2, folds=2)
    assert validity["overlap"].cross_fitted is None
    assert result.settings["real_answers"] == [str(path)]
    table = result.tables()["relevance"]
    assert "real answers (" in table and "judged answers floored under cross-fitted" in table
    row = next(line.split() for line in table.splitlines() if line.split()[:1] == ["gate"]
               and "(66.7%)" in line)  # fmt: skip
    assert row == ["gate", "2", "(66.7%)", "2", "0.333", "question_overlap", "1.000", "2"]
    assert "gate 2/8 (25.0%)" in table
    again = ValidationResult.from_dict(json.loads(result.to_json()))
    assert again.dimensions["relevance"].validity["gate"] == validity["gate"]
    # a looser bound: the echoes are floored and the guard passes
    looser = validate(
        remedies, {"gate": _guard(remedies)}, cache=False, validity_kinds="echo",
        real_answers=[path], validity_max_floored=0.7,
    )  # fmt: skip
    assert result.dimensions["relevance"].choice is None
    assert result.warnings == [
        "'relevance': no ranker passed validity; 1 of them (gate) floor too many of the real "
        "answers given, the others let degenerate texts score high: nothing is chosen (the "
        "validity table says each one's reason)"
    ]
    assert looser.dimensions["relevance"].validity["gate"].passed
    assert looser.dimensions["relevance"].choice.best == "gate"


def test_the_figures_of_real_answers_by_hand():
    dq = {"d1": 0.9, "d2": 0.5, "d3": 0.1, "d4": 0.5}
    scored = [ScoredText("q", "real", 0.6, dq), ScoredText("q", "real", 0.5, dq)]
    alone = [ScoredText("q", "real", 0.95, dq), ScoredText("q", "real", 0.95, dq)]
    figures = real_answer_figures(
        scored, 0.0, np.array([False, True]), np.array([True, True]), ("dense", alone, 0.0),
        ["a.jsonl"], read=5,
    )  # fmt: skip
    # 0.6: one above of four, NRP 0.75; 0.5: one above, two tied (half each): 1 - 2/4 = 0.5;
    # alone both first: NRP 1.0; none more than 0.5 below it
    assert figures == RealAnswers(2, 1, 2, 0.625, "dense", 1.0, 0, ("a.jsonl",), 5)
    assert figures.floored_share == 0.5
    validity = Validity({}, {}, None, True, rule={"min_wins": 0.9, "max_nrp": 0.3})
    failed = with_real_answers(validity, figures, None, 0.4)
    assert (failed.passed, failed.reason) == (False, "real answers: 1 of 2 floored (50.0% > 40.0%)")
    assert failed.rule == {"min_wins": 0.9, "max_nrp": 0.3, "max_floored": 0.4}
    assert with_real_answers(validity, figures, None, 0.5).passed
    # a ranker that failed already keeps its first reason
    echo = Validity({}, {}, None, False, "echo: mean NRP 1.000 (> 0.3)")
    assert with_real_answers(echo, figures, None, 0.4).reason == "echo: mean NRP 1.000 (> 0.3)"


def _nrp(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nrp", *args], capture_output=True, text=True, cwd=cwd
    )


def test_the_cli_reports_real_answers_and_refuses_a_bad_file_before_any_work(remedies, tmp_path):
    indexes = str(remedies.path.parent)
    good = _answers_file(tmp_path, REAL)
    out = tmp_path / "v.json"
    done = _nrp("validate", "remedies", "--indexes", indexes, "--rankers", "tfidf",
                "--validity-kinds", "echo", "--no-cache", "--real-answers", str(good),
                "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"real answers ({good}: 3 read, 3 to a question with D_q)" in done.stdout
    tfidf = json.loads(out.read_text())["dimensions"]["relevance"]["validity"]["tfidf"]
    assert (tfidf["real"]["answers"], tfidf["real"]["floored"]) == (3, 0)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(REAL[0]) + "\n" + json.dumps({**REAL[1], "qid": "q9"}) + "\n")
    cases = {
        str(bad): f"{bad}:2",
        str(tmp_path / "missing.jsonl"): "missing.jsonl",
        "references": "has no reference answers",
    }
    for given, expected in cases.items():
        fresh = tmp_path / f"{len(given)}.json"
        failed = _nrp("validate", "remedies", "--indexes", indexes, "--rankers", "tfidf",
                      "--real-answers", given, "--out", str(fresh), cwd=tmp_path)  # fmt: skip
        assert failed.returncode == 2, failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1 and expected in failed.stderr
        assert "Traceback" not in failed.stderr and not fresh.exists()
    assert not (remedies.path / "validation.json").exists()
    for bound in ("1.5", "-0.1"):  # a share: from 0 to 1
        failed = _nrp("validate", "remedies", "--indexes", indexes, "--rankers", "tfidf",
                      "--validity-max-floored", bound, "--real-answers", str(good),
                      "--out", str(tmp_path / "bound.json"), cwd=tmp_path)  # fmt: skip
        assert failed.returncode == 2 and failed.stderr.strip() == (
            "nrp: error: validity_max_floored must lie between 0 and 1"
        )
        assert not (tmp_path / "bound.json").exists()
    with pytest.raises(ConfigError, match="real answers are ranked in validity"):
        validate(remedies, ["tfidf"], cache=False, validity=False, real_answers=[str(good)])


QUESTION = "Should my 85 year old father stop his metformin?"
JUDGED = {
    "m1": "Lactic acidosis is a rare but serious side effect of metformin. The risk is higher in "
    "people with poor kidney function, which is more common with age, so doctors check kidney "
    "tests before and during treatment.",
    "m2": "Older adults can usually take metformin. The dose may be lowered when the kidneys work "
    "less well, and the drug is stopped before scans with contrast dye or major surgery.",
    "m3": "Symptoms of lactic acidosis include unusual muscle pain, trouble breathing, stomach "
    "pain and feeling very weak or tired; anyone with them should get medical help at once.",
}
#: plain clinical prose as a drug label words it: few of its function-word pairs are attested,
#: and the word salad detector (``disorder``) that read fluency alone held it for word salad at
#: 0.79 of its threshold (the union of detectors flagged it); reading its sentence starts too
#: (``order``), no detector doubts it. The same words shuffled are floored.
LABEL = (
    "Metformin, as with all biguanides, may in some cases lead to lactic acidosis, which when it "
    "does occur is fatal in about half of such cases; for this reason those over 80 should not "
    "be given it unless renal function is normal."
)


@pytest.fixture(scope="module")
def metformin(tmp_path_factory) -> Collection:
    root = tmp_path_factory.mktemp("metformin")
    return _collection(root, "metformin", {"m": QUESTION}, JUDGED, "m 0 m1 2\nm 0 m2 2\nm 0 m3 1\n")


def test_a_drug_label_sentence_keeps_its_place_and_an_echo_and_word_salad_do_not(
    metformin, tmp_path
):
    from nrp.rankers.guard_model import FLOOR_EVIDENCE
    from nrp.rankers.registry import make_ranker

    guard = make_ranker("guard")
    guard.bind_collection(metformin)
    words = LABEL.split()
    random.Random(7).shuffle(words)
    salad = " ".join(words)  # "when may half normal. is does to it lactic given unless ..."
    frame = pd.DataFrame({"qid": "m", "query": QUESTION, "docno": ["label", "echo", "salad"],
                          "text": [LABEL, QUESTION, salad]})  # fmt: skip
    detectors = guard.detectors()
    table = guard.features().frame([QUESTION] * 3, [LABEL, QUESTION, salad])
    assert table["order"].tolist() == [1.0, 1.0, pytest.approx(2 / 3)]  # "normal. is"
    shares = detectors.shares(table)
    names = [d.fitted_on["name"] for d in (detectors, *detectors.also)]
    doubting = [{n for n, share in zip(names, row, strict=True) if share < 1} for row in shares]
    assert doubting[0] == set()  # the label: no detector doubts it
    assert "disorder" in doubting[2]
    assessed = guard.assess(frame)
    assert assessed["evidence"][0] == 0.0
    assert min(assessed["evidence"][1], assessed["evidence"][2]) > FLOOR_EVIDENCE
    assert assessed["flagged"].tolist() == [False, True, True]
    path = _answers_file(tmp_path, [
        {"llm": "label", "prompt": "p", "qid": "m", "text": LABEL},
        {"llm": "echo", "prompt": "p", "qid": "m", "text": QUESTION},
    ])  # fmt: skip
    result = validate(metformin, ["guard"], cache=False, validity_kinds="echo",
                      real_answers=[path], random_control=False)  # fmt: skip
    real = result.dimensions["relevance"].validity["guard"].real
    assert (real.answers, real.floored, real.flagged) == (2, 1, 1)
    # dense alone: the echo above all three judged answers (NRP 1), the label above two (2/3);
    # guarded, the echo below all three (NRP 0: it lost its place), the label where it was
    assert (real.base, real.base_nrp, real.nrp) == ("dense", pytest.approx(5 / 6),
                                                    pytest.approx(1 / 3))  # fmt: skip
    assert real.lost == 1
