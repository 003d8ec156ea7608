"""scripts/studies/non_answer_forms.py: the hand-written non-answers of the outside check, one per
question and form, on the demo collection (its eight questions), texts worked out by hand."""

from __future__ import annotations

import json
import runpy
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest

from nrp import ingest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "non_answer_forms.py"
forms = SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="non_answer_forms"))
DEMO = resources.files("nrp") / "data" / "demo"


def test_the_question_words_are_its_long_non_stopwords_in_order_twice():
    assert forms.words("is it safe to take ibuprofen with high blood pressure") == [
        "safe", "take", "ibuprofen", "high", "blood", "pressure",
        "safe", "take", "ibuprofen", "high", "blood", "pressure",
    ]  # fmt: skip
    assert forms.words("is it ok?") == ["this", "that", "this", "that"]


def test_one_answer_per_question_and_form_of_each_set(tmp_path):
    ix = tmp_path / "ix"
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    out = tmp_path / "forms.jsonl"
    assert forms.main(["demo", str(out), "--indexes", str(ix)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 8 * (12 + 7 + 6)
    assert [r["prompt"] for r in rows].count("A") == 8 * 12
    assert [r["prompt"] for r in rows].count("C") == 8 * 6
    by = {(r["qid"], r["llm"]): r["text"] for r in rows}
    question = "can vitamin c prevent colds"
    assert by[("d1", "echo_twice")] == f"{question} {question}"
    assert by[("d1", "yes_echo")] == f"Yes. {question}"
    assert by[("d1", "echo_upper")] == question.upper()
    assert by[("d2", "hedge_mention")] == (
        "There are several things to consider regarding safe and take. Each of them deserves "
        "careful thought before any decision is made."
    )
    assert by[("d1", "ref_mention")].startswith("For reliable details on vitamin, the National")
    # one typo per 25 characters, at least one: the question keeps its length
    typo = by[("d1", "echo_typos")]
    assert len(typo) == len(question) and typo != question
    assert sum(a != b for a, b in zip(typo, question, strict=True)) <= 1
    assert by[("d3", "hotline")].startswith("If you have concerns about much, you can call")
    assert forms.main(["demo", str(out), "--indexes", str(ix), "--sets", "CB"]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 8 * (6 + 7)


def test_a_set_named_twice_or_unknown_is_exit_2(capsys):
    for sets in ("AA", "D", ""):
        with pytest.raises(SystemExit) as stop:
            forms.main(["demo", "out.jsonl", "--sets", sets])
        assert stop.value.code == 2
        assert f"--sets: each of A, B, C at most once, not {sets!r}" in capsys.readouterr().err


def test_an_unknown_collection_or_a_missing_folder_is_exit_2_and_nothing_written(tmp_path, capsys):
    out = tmp_path / "forms.jsonl"
    with pytest.raises(SystemExit) as stop:
        forms.main(["no-such-collection", str(out), "--indexes", str(tmp_path / "ix")])
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("non_answer_forms: error: collection 'no-such-collection': ")
    assert "no-such-collection.yaml" in error and not out.exists()
    assert not (tmp_path / "ix").exists()  # nothing ingested
    with pytest.raises(SystemExit) as stop:
        forms.main(["demo", str(tmp_path / "none" / "forms.jsonl")])
    assert stop.value.code == 2
    assert f"{tmp_path / 'none' / 'forms.jsonl'}: its folder does not exist" in (
        capsys.readouterr().err
    )
