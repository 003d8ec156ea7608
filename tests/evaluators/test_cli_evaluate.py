"""`nrp evaluate` and `nrp evaluators` end to end on the embedded demo collection: the output
table's columns and rows, the cache on a second run, and a bad answers file (exit 2, one line,
nothing written)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pandas as pd
import pytest

from nrp import ingest
from nrp.cli import main

DEMO = resources.files("nrp") / "data" / "demo"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def nrp(capsys):
    """``nrp ARGS`` through the CLI's ``main`` in this process (the package is imported once,
    which keeps the tests fast); exit code and captured output as a subprocess would give."""

    def run(*args: str) -> Run:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return Run(code, out, err)

    return run


def test_evaluate_the_demo_answers(tmp_path, nrp):
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    out = tmp_path / "evaluations"
    specs = "bleu,rouge,nrp:rankers=tfidf"
    proc = nrp("evaluate", "demo", str(DEMO / "answers.jsonl"), "--evaluators", specs,
               "--out", str(out), "--indexes", ix)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = pd.read_parquet(out / "evaluations.parquet")
    assert list(table.columns) == [
        "answer_id", "llm", "prompt", "qid", "sample", "reference_kind", "bleu",
        "rouge.1", "rouge.2", "rouge.L", "nrp.relevance", "nrp.readability", "nrp.weighted",
    ]  # fmt: skip
    # the demo's 64 answers, every topic with one reference answer and 15 judged documents
    assert len(table) == 64 and table["answer_id"].is_unique
    assert (table["reference_kind"] == "reference").all()
    scores = table[["bleu", "rouge.1", "rouge.2", "rouge.L", "nrp.relevance", "nrp.weighted"]]
    assert scores.notna().all().all()
    assert table["bleu"].between(0, 100).all() and table["rouge.L"].between(0, 1).all()
    csv = pd.read_csv(out / "evaluations.csv")
    assert csv.shape == table.shape
    np.testing.assert_allclose(csv["rouge.1"], table["rouge.1"])
    # NRP as `nrp score` computes it
    scored = tmp_path / "scored"
    proc = nrp("score", "demo", str(DEMO / "answers.jsonl"), "--ranker", "tfidf",
               "--out", str(scored), "--indexes", ix)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = pd.read_parquet(scored / "results.parquet")
    weighted = results[results["dimension"] == "weighted"].set_index("answer_id")["nrp"]
    np.testing.assert_allclose(
        table.set_index("answer_id")["nrp.weighted"], weighted.loc[table["answer_id"]]
    )
    # the report: one line per evaluator; a second run takes BLEU and ROUGE from the cache
    again = nrp("evaluate", "demo", str(DEMO / "answers.jsonl"), "--evaluators", specs,
                "--out", str(out), "--indexes", ix)  # fmt: skip
    assert again.returncode == 0, again.stderr
    report = {line.split()[0]: line.split()[1:] for line in again.stdout.splitlines()[2:5]}
    assert report["bleu"] == ["64", "0", "64", "0"]  # items, computed, from cache, missing
    assert report["rouge"] == ["64", "0", "64", "0"]
    assert report["nrp:rankers=tfidf"][0] == "64"
    assert "64 answers; references: 64 real, 0 pseudo, 0 none" in again.stdout


def test_evaluate_a_bad_answers_file_writes_nothing(tmp_path, nrp):
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        json.dumps({"llm": "m", "prompt": "p", "qid": "d1", "text": "Vitamin C does not help."})
        + "\n"
        + json.dumps({"llm": "m", "prompt": "p", "qid": "zz", "text": "Some answer."})
        + "\n"
    )
    out = tmp_path / "evaluations"
    proc = nrp("evaluate", "demo", str(answers), "--evaluators", "bleu", "--out", str(out),
               "--indexes", ix)  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nrp: error: ") and "answers.jsonl:2:" in lines[0]
    assert "zz" in lines[0]
    assert not out.exists()
    # an unknown evaluator is one line too, before anything is read or written
    proc = nrp("evaluate", "demo", str(answers), "--evaluators", "bleu,meteor", "--out",
               str(out), "--indexes", ix, "--skip-invalid")  # fmt: skip
    assert proc.returncode == 2 and "unknown evaluator 'meteor'" in proc.stderr
    assert not out.exists()
    # a second parameter written after ':' is refused, not taken into the first one's value
    proc = nrp("evaluate", "demo", str(answers), "--evaluators", "bleu,nrp:label=d:rankers=tfidf",
               "--out", str(out), "--indexes", ix, "--skip-invalid")  # fmt: skip
    error = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert error.startswith("nrp: error: evaluator spec 'nrp:label=d:rankers=tfidf': parameter ")
    assert "label='d:rankers=tfidf' holds ':rankers=': parameters are separated by ','" in error
    assert not out.exists()
    # skipping the bad row: the other answer is evaluated (pseudo-references if asked for)
    proc = nrp("evaluate", "demo", str(answers), "--evaluators", "bleu", "--out", str(out),
               "--indexes", ix, "--skip-invalid", "--references", "pseudo",
               "--pseudo-k", "1", "--no-cache")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "skipped 1 invalid answer(s)" in proc.stderr
    table = pd.read_csv(out / "evaluations.csv", keep_default_na=False)
    assert table["qid"].tolist() == ["d1"]
    assert table["reference_kind"].tolist() == ["pseudo-reference"]
    assert sorted(p.name for p in out.iterdir()) == ["evaluations.csv", "evaluations.parquet"]


def test_evaluators_lists_families_and_parameters(nrp):
    proc = nrp("evaluators")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "reference-based:" in text and "nrp:" in text
    for name in ("bleu", "rouge", "bertscore"):
        assert f"\n  {name} (available)" in text
    assert "tokenize='13a'" in text and "rankers='validation'" in text
    assert "label=''" in text
