"""`nrp score`, `nrp summary` and `nrp agreement` end to end on the embedded demo collection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources

import pandas as pd
import pytest

from nrp import ingest

DEMO = resources.files("nrp") / "data" / "demo"


def nrp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nrp", *args], capture_output=True, text=True)


def test_score_summary_agreement_on_the_demo(tmp_path):
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    out = tmp_path / "results"
    proc = nrp("score", "demo", str(DEMO / "answers.jsonl"), "--ranker", "relevance=tfidf",
               "--ranker", "readability=bm25:stats=collection", "--out", str(out),
               "--indexes", ix)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = pd.read_parquet(out / "results.parquet")
    assert pd.read_csv(out / "results.csv").shape == results.shape
    # 64 answers x (2 dimensions + the weighted sum)
    assert len(results) == 64 * 3
    assert sorted(results["dimension"].unique()) == ["readability", "relevance", "weighted"]
    per_dim = results[results["dimension"] != "weighted"]
    assert (per_dim["n_docs"] == 15).all()
    # NRP = 1 - r/|D_q| with r the (mid-rank) number of documents above the answer
    assert ((1 - per_dim["rank"] / per_dim["n_docs"]) - per_dim["nrp"]).abs().max() < 1e-12
    weighted = results[results["dimension"] == "weighted"].set_index("answer_id")["nrp"]
    means = per_dim.groupby("answer_id")["nrp"].mean()
    assert (weighted - means.loc[weighted.index]).abs().max() < 1e-12  # equal weights

    proc = nrp("summary", str(out), "--out", str(tmp_path / "summary"))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "summary" / "summary.json").read_text())
    assert summary["means"]
    assert "demo-good" in proc.stdout and "demo-weak" in proc.stdout

    proc = nrp("agreement", "demo", "--rankers", "tfidf", "--indexes", ix)
    assert proc.returncode == 0, proc.stderr
    assert "relevance" in proc.stdout and "readability" in proc.stdout


def test_score_rejects_an_unknown_qid_in_one_line(tmp_path):
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        '{"llm": "m", "prompt": "p", "qid": "d1", "text": "Vitamin C does not prevent colds."}\n'
        '{"llm": "m", "prompt": "p", "qid": "zz", "text": "Some answer."}\n'
    )
    out = tmp_path / "results"
    proc = nrp(
        "score", "demo", str(answers), "--ranker", "tfidf", "--out", str(out), "--indexes", ix
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "answers.jsonl:2:" in lines[0] and "zz" in lines[0]
    assert not out.exists()
    proc = nrp("score", "demo", str(answers), "--ranker", "tfidf", "--out", str(out),
               "--indexes", ix, "--skip-invalid")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "skipped 1 invalid answer(s)" in proc.stderr
    assert pd.read_parquet(out / "results.parquet")["qid"].unique().tolist() == ["d1"]


def test_a_ranker_spec_ending_in_json_is_a_ranker_and_a_missing_validation_file_is_named(
    tmp_path,
):
    """``--ranker guard:...,model=M.json`` builds the guard (which reads M: scoring with it
    needs the MiniLM encoder, minutes here, so M is missing and the guard's error names M, not
    the whole spec as a file), and a missing validation JSON is a one-line error naming it."""
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    answers, out = str(DEMO / "answers.jsonl"), str(tmp_path / "results")
    model = tmp_path / "models" / "guard.json"
    proc = nrp("score", "demo", answers, "--ranker", f"guard:ranker=tfidf,model={model}",
               "--out", out, "--indexes", ix)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"nrp: error: {model}: file not found"]
    missing = tmp_path / "runs" / "validation.json"
    for option in ("--ranker", "--validation"):
        proc = nrp("score", "demo", answers, option, str(missing), "--out", out, "--indexes", ix)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()  # --validation adds "(given as --validation)"
        assert len(lines) == 1 and lines[0].startswith(f"nrp: error: {missing}: file not found")
    assert not (tmp_path / "results").exists()


def test_a_damaged_validation_json_is_a_one_line_error_naming_it(tmp_path):
    """A validation JSON that parses but is not a result nrp wrote (a field of the wrong kind,
    a key nrp does not know, not an object at all) stops ``nrp score --validation`` with one line
    naming the file, exit 2, and nothing written."""
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    good = tmp_path / "validation.json"
    proc = nrp("validate", "demo", "--rankers", "tfidf", "--indexes", ix, "--out", str(good),
               "--validity-kinds", "echo")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(good.read_text())
    validity = data["dimensions"]["relevance"]["validity"]["tfidf"]
    assert set(validity["answers"]) == {
        "relevant", "floored", "short", "short_floored", "short_words",
    }  # fmt: skip
    assert validity["answers"]["floored"] == 0  # tfidf floors nothing
    # one echo per query meets each of its query's relevant documents once
    assert set(validity["by_grade"]) == {"echo"}
    pairs = sum(grade["pairs"] for grade in validity["by_grade"]["echo"].values())
    assert pairs == validity["answers"]["relevant"] > 0
    damaged = {
        "answers": lambda d: d["dimensions"]["relevance"]["validity"]["tfidf"].update(
            answers={"bogus": 1}
        ),
        "kinds": lambda d: d["dimensions"]["relevance"]["validity"]["tfidf"].update(kinds="x"),
        "by_grade": lambda d: d["dimensions"]["relevance"]["validity"]["tfidf"].update(by_grade=5),
        "by_grade pairs": lambda d: d["dimensions"]["relevance"]["validity"]["tfidf"].update(
            by_grade={"echo": {"1": 3}}
        ),
        "no dimensions": lambda d: d.pop("dimensions"),
    }
    out = tmp_path / "results"
    for name, damage in damaged.items():
        copy = json.loads(good.read_text())
        damage(copy)
        bad = tmp_path / f"{name}.json"
        bad.write_text(json.dumps(copy))
        proc = nrp("score", "demo", str(DEMO / "answers.jsonl"), "--validation", str(bad),
                   "--out", str(out), "--indexes", ix)  # fmt: skip
        assert proc.returncode == 2, (name, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, (name, lines)
        assert lines[0].startswith(f"nrp: error: {bad}: not a validation result nrp can read (")
        assert "validate again" in lines[0]
        assert not out.exists()
    (tmp_path / "list.json").write_text("[]")
    proc = nrp("score", "demo", str(DEMO / "answers.jsonl"), "--validation",
               str(tmp_path / "list.json"), "--out", str(out), "--indexes", ix)  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "abbreviation"),
    [
        (["validate", "demo", "--rankers", "tfidf", "--label", "raw"], "--label"),  # --labels
        (["meta", "scores.csv", "labels.csv", "--score", "bleu"], "--score"),  # --scores
        (["check", "results", "--min", "0.5"], "--min"),  # --min-nrp
    ],
)
def test_an_abbreviated_option_is_refused(capsys, argv, abbreviation):
    from nrp.cli import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert f"unrecognized arguments: {abbreviation}" in capsys.readouterr().err


def nrp_into_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """``nrp ARGS`` whose standard output is a pipe nobody reads any more (``| head`` after it
    has read its lines)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "nrp", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    finally:
        os.close(write_end)


def test_a_reader_that_stops_reading_ends_the_command_quietly_with_141(tmp_path):
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    out = tmp_path / "results"
    assert nrp("-q", "score", "demo", str(DEMO / "answers.jsonl"), "--ranker", "relevance=tfidf",
               "--out", str(out), "--indexes", ix).returncode == 0  # fmt: skip
    for args in (["rankers"], ["info", "demo", "--indexes", ix], ["summary", str(out)],
                 ["check", str(out), "--min-nrp", "0.1"]):  # fmt: skip
        proc = nrp_into_closed_pipe(*args)
        assert (proc.returncode, proc.stderr) == (141, ""), args
        # read, the same command prints and succeeds (check: exit 0 or 1, its verdict)
        assert nrp(*args).stdout != ""
    # a library error is still one line and exit 2 when stdout is closed
    proc = nrp_into_closed_pipe("info", "nosuch", "--indexes", ix)
    assert proc.returncode == 2 and proc.stderr.startswith("nrp: error: ")
    assert proc.stderr.count("\n") == 1


def test_score_at_bf16_names_the_precision_of_every_neural_ranker(tmp_path):
    """--dtype bf16: the guard's dense ranker (and its features' encoder) at bf16, named so in
    scoring.json; on a CPU without bfloat16 matrix units one line, exit 2, nothing written."""
    from nrp.models.device import native_bf16

    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    out = tmp_path / "bf16"
    proc = nrp("score", "demo", str(DEMO / "answers.jsonl"), "--ranker", "relevance=guard",
               "--ranker", "readability=bm25", "--dtype", "bf16", "--out", str(out),
               "--indexes", ix)  # fmt: skip
    if not native_bf16():
        assert proc.returncode == 2 and not out.exists()
        assert proc.stderr.strip().count("\n") == 0 and "bfloat16 matrix units" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "scoring.json").read_text())
    assert record["rankers"] == {"relevance": "guard:ranker=dense:dtype=bf16",
                                 "readability": "bm25"}  # fmt: skip
    results = pd.read_parquet(out / "results.parquet")
    assert len(results) == 64 * 3 and results["nrp"].between(0, 1).all()
    proc = nrp("score", "demo", str(DEMO / "answers.jsonl"), "--ranker", "guard", "--dtype",
               "fp16", "--out", str(tmp_path / "x"), "--indexes", ix)  # fmt: skip
    assert proc.returncode == 2 and "invalid choice: 'fp16'" in proc.stderr


def test_score_at_bf16_on_a_cpu_without_bfloat16_units_is_one_line(tmp_path, monkeypatch, capsys):
    import nrp.models.device as device
    from nrp.cli import main

    monkeypatch.setattr(device, "_cpu_flags", lambda: frozenset({"avx2"}))
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    out = tmp_path / "bf16"
    capsys.readouterr()
    code = main(["score", "demo", str(DEMO / "answers.jsonl"), "--ranker", "guard",
                 "--dtype", "bf16", "--out", str(out), "--indexes", ix])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 2 and not out.exists()
    assert err.strip() == (
        "nrp: error: dimension 'relevance': dtype=bf16 on a CPU needs bfloat16 matrix units "
        "(amx_bf16 or avx512_bf16), which this CPU lacks (it would run slower than fp32); "
        "use dtype=fp32"
    )


def test_validate_at_bf16_chooses_rankers_that_score_at_bf16(tmp_path):
    """nrp validate --dtype bf16: every neural candidate at bf16, so the choice names it and
    nrp score's default flow runs at it; --dtype with --runs is refused."""
    from nrp.models.device import native_bf16

    if not native_bf16():
        pytest.skip("this CPU has no bfloat16 matrix units (bf16 is refused: tested apart)")
    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    proc = nrp("validate", "demo", "--rankers", "bm25,dense,guard", "--no-validity",
               "--dtype", "bf16", "--indexes", ix)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "ix" / "demo" / "validation.json").read_text())
    names = [s["name"] for s in record["systems"]]
    assert names[:3] == ["bm25", "dense:dtype=bf16", "guard:ranker=dense:dtype=bf16"]
    out = tmp_path / "scored"
    proc = nrp("score", "demo", str(DEMO / "answers.jsonl"), "--out", str(out), "--indexes", ix)
    assert proc.returncode == 0, proc.stderr
    rankers = json.loads((out / "scoring.json").read_text())["rankers"]
    assert rankers and all(s in names for s in rankers.values())
    run = tmp_path / "a.run"
    run.write_text("d1 Q0 d1-1 1 1.0 x\n")
    proc = nrp("validate", "demo", "--runs", str(run), "--dtype", "bf16", "--indexes", ix)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "nrp: error: --dtype sets the precision of rankers; a run file has none"
    )


def test_a_precision_is_refused_for_a_ranker_given_as_an_object(tmp_path):
    from nrp import Collection, validate
    from nrp.errors import ConfigError
    from nrp.rankers.registry import make_ranker

    ix = str(tmp_path / "ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    collection = Collection.load("demo", ix)
    with pytest.raises(ConfigError, match="is an object and keeps its own"):
        validate(collection, [make_ranker("bm25")], dtype="bf16", validity=False, cache=False)
    from nrp.positioning.scoring import score_answers

    answers = pd.read_json(DEMO / "answers.jsonl", lines=True).head(2)
    answers["answer_id"] = ["a1", "a2"]
    with pytest.raises(ConfigError, match=r"^dimension 'relevance': dtype=bf16 sets the precision"):
        score_answers(collection, answers, make_ranker("bm25"), dtype="bf16", cache=False)
    with pytest.raises(ConfigError, match="dtype='fp8' must be one of"):
        score_answers(collection, answers, "guard", dtype="fp8", cache=False)
