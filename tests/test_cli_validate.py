"""`nrp validate` from the command line: rankers and external runs, JSON for later steps,
one-line errors with nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_ingest import write_collection

from nrp import ingest


def nrp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nrp", *args], capture_output=True, text=True)


def test_validate_rankers_writes_the_choice(tmp_path):
    ingest(write_collection(tmp_path / "data"), indexes_dir=tmp_path / "ix")
    out = tmp_path / "new" / "folder" / "validation.json"  # --out into folders not yet made
    proc = nrp("validate", "tiny", "--rankers", "tfidf,random", "--indexes", str(tmp_path / "ix"),
               "--out", str(out), "--no-validity")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert [s["spec"] for s in data["systems"]] == ["tfidf", "random"]
    assert set(data["chosen"]) == {"relevance", "credibility"}
    assert "tiny / relevance: labels graded" in proc.stdout
    # the default output path lies beside the collection
    proc = nrp("validate", "tiny", "--rankers", "tfidf", "--indexes", str(tmp_path / "ix"),
               "--no-validity")  # fmt: skip
    assert proc.returncode == 0
    assert (tmp_path / "ix" / "tiny" / "validation.json").is_file()


def test_validate_runs_and_bad_run_file(tmp_path):
    ingest(write_collection(tmp_path / "data"), indexes_dir=tmp_path / "ix")
    good = tmp_path / "good.run"
    # d9 has no text in the store: external runs need none, and it is not dropped
    good.write_text("q1 Q0 d9 1 3.0 mine\nq1 Q0 d1 2 2.0 mine\nq1 Q0 d2 3 1.0 mine\n"
                    "q2 Q0 d3 1 1.0 mine\n")  # fmt: skip
    out = tmp_path / "runs.json"
    proc = nrp("validate", "tiny", "--runs", str(good), "--indexes", str(tmp_path / "ix"),
               "--out", str(out), "--dimensions", "relevance")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["systems"][0]["name"] == "good"
    per_query = data["dimensions"]["relevance"]["per_query"]["good"]
    # q1 ranks d9 (gain 0), d1 (2), d2 (1): DCG = 2/log2(3) + 1/log2(4) = 1.761860;
    # ideal 2, 1, 0: 2 + 1/log2(3) = 2.630930; nDCG = 0.669672. q2 ranks its one relevant first.
    assert abs(per_query["nDCG@10"]["q1"] - 0.669672) < 1e-6 and per_query["nDCG@10"]["q2"] == 1
    # AP q1: relevant d1 at rank 2 (P = 1/2), d2 at rank 3 (P = 2/3): (1/2 + 2/3) / 2
    assert abs(per_query["AP"]["q1"] - 7 / 12) < 1e-12
    # bpref q1: the one judged non-relevant document (d9) is above both relevant ones: 0
    assert per_query["Bpref"]["q1"] == 0
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 2.0 mine\nq1 Q0 d2 2 high mine\n")
    out2 = tmp_path / "bad.json"
    proc = nrp("validate", "tiny", "--runs", str(bad), "--indexes", str(tmp_path / "ix"),
               "--out", str(out2))  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrp: error: ") and "bad.run:2:" in lines[0]
    assert not out2.exists()


def test_validate_without_rankers_ranks_the_default_set(tmp_path):
    ingest(write_collection(tmp_path / "data"), indexes_dir=tmp_path / "ix")
    proc = nrp("validate", "tiny", "--indexes", str(tmp_path / "ix"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "ix" / "tiny" / "validation.json").read_text())
    assert [s["spec"] for s in data["systems"]] == [
        "tfidf", "dph", "bm25", "dense", "guard", "guard:content=0.06", "random"
    ]  # fmt: skip


def test_runs_keep_the_rankers_choice_and_score_reads_it_by_default(tmp_path):
    """validate --runs writes validation-runs.json, so the rankers' validation.json that nrp
    score reads without --validation is kept; without either file, score is one line."""
    ix = tmp_path / "ix"
    ingest(write_collection(tmp_path / "data"), indexes_dir=ix)
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        '{"answer_id": "a1", "llm": "m", "prompt": "p", "qid": "q1", "sample": 0, '
        '"text": "vitamin c colds study"}\n'
    )
    proc = nrp("score", "tiny", str(answers), "--indexes", str(ix), "--out", str(tmp_path / "s0"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("nrp: error: no ranker chosen for tiny: run nrp validate tiny")
    assert not (tmp_path / "s0").exists()
    proc = nrp("validate", "tiny", "--rankers", "tfidf", "--indexes", str(ix), "--no-validity")
    assert proc.returncode == 0
    choice = (ix / "tiny" / "validation.json").read_bytes()
    run = tmp_path / "mine.run"
    run.write_text("q1 Q0 d1 1 2.0 mine\nq1 Q0 d2 2 1.0 mine\nq2 Q0 d3 1 1.0 mine\n")
    proc = nrp("validate", "tiny", "--runs", str(run), "--indexes", str(ix))
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {ix / 'tiny' / 'validation-runs.json'}" in proc.stdout
    assert (ix / "tiny" / "validation.json").read_bytes() == choice
    runs = json.loads((ix / "tiny" / "validation-runs.json").read_text())
    assert [s["name"] for s in runs["systems"]] == ["mine"]
    proc = nrp("score", "tiny", str(answers), "--indexes", str(ix), "--out", str(tmp_path / "s1"))
    assert proc.returncode == 0, proc.stderr
    import pandas as pd

    scored = pd.read_csv(tmp_path / "s1" / "results.csv")
    assert scored["dimension"].tolist() == ["relevance", "credibility", "weighted"]
    assert scored["ranker"].tolist()[:2] == ["tfidf", "tfidf"]  # validation.json's choice


def test_meta_reads_an_nrp_score_folder(tmp_path):
    """nrp score writes one row per answer and dimension; nrp meta reads its folder as one row
    per answer with nrp.<dimension> columns (the nrp evaluator's names)."""
    ix = tmp_path / "ix"
    ingest(write_collection(tmp_path / "data"), indexes_dir=ix)
    answers = tmp_path / "answers.jsonl"
    rows = [("q1", "a1", "vitamin c colds vitamin"), ("q1", "a2", "weather report"),
            ("q2", "b1", "ibuprofen blood pressure"), ("q2", "b2", "weather report")]  # fmt: skip
    answers.write_text(
        "".join(
            json.dumps({"answer_id": a, "llm": "m", "prompt": "p", "qid": q, "sample": 0,
                        "text": t}) + "\n"
            for q, a, t in rows
        )
    )  # fmt: skip
    out = tmp_path / "scored"
    proc = nrp("score", "tiny", str(answers), "--ranker", "tfidf", "--indexes", str(ix),
               "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    human = tmp_path / "human.csv"
    # q1: the on-topic answer is better; q2: the judge says the reverse
    human.write_text("qid,answer_id,grade\nq1,a1,2\nq1,a2,0\nq2,b1,0\nq2,b2,2\n")
    from nrp import api

    run = api.meta_from_files(out, human, system_column=None)
    assert run.counts["joined"] == 4 and run.counts["scores_without_human"] == 0
    assert run.score_columns == ["nrp.relevance", "nrp.credibility", "nrp.weighted"]
    nrp_of = run.joined.set_index(["qid", "answer_id"])["nrp.relevance"]
    assert nrp_of[("q1", "a1")] > nrp_of[("q1", "a2")]  # on topic: ranked above
    assert nrp_of[("q2", "b1")] > nrp_of[("q2", "b2")]
    per_query = run.result.per_query
    taus = per_query[per_query["score"] == "nrp.relevance"].set_index("qid")["kendall_tau"]
    assert taus.to_dict() == {"q1": 1.0, "q2": -1.0}  # two items each: +1 agrees, -1 reverses
    assert run.result.row("nrp.relevance", "grade")["tau_mean"] == 0.0
    # the CLI reads the same folder
    proc = nrp("meta", str(out), str(human), "--system-column", "none")
    assert proc.returncode == 0, proc.stderr
    assert "4 items joined" in proc.stdout


def test_meta_keys_items_by_query_and_id(tmp_path):
    """Ids repeat across queries (judged docnos under two topics): with a qid column on both
    sides, (qid, id) names an item; without one on the human side, one line says why not."""
    from nrp import api
    from nrp.errors import InputError

    scores = tmp_path / "scores.csv"
    scores.write_text("qid,answer_id,metric\nq1,d1,0.9\nq1,d2,0.1\nq2,d1,0.2\nq2,d2,0.8\n")
    human = tmp_path / "human.csv"
    human.write_text("qid,answer_id,grade\nq1,d1,2\nq1,d2,1\nq2,d1,2\nq2,d2,1\nq3,d1,1\n")
    run = api.meta_from_files(scores, human, system_column=None)
    assert run.counts == {"score_rows": 4, "human_rows": 5, "joined": 4,
                          "scores_without_human": 0, "human_without_scores": 1}  # fmt: skip
    per_query = run.result.per_query.set_index("qid")["kendall_tau"]
    assert per_query.to_dict() == {"q1": 1.0, "q2": -1.0}
    bare = tmp_path / "bare.csv"
    bare.write_text("answer_id,grade\nd1,2\nd2,1\n")
    with pytest.raises(InputError) as error:
        api.meta_from_files(scores, bare, system_column=None)
    assert str(error.value).endswith(
        "answer_id 'd1' names items of several queries; the other file has no qid column "
        "to tell them apart (give both a qid column)"
    )


def test_an_error_about_a_given_path_names_the_argument_to_change(tmp_path):
    """A path that is missing or in the way: the one line says which argument gave it; an error
    inside a file's content does not (the file is what to fix)."""
    ix = tmp_path / "ix"
    ingest(write_collection(tmp_path / "data"), indexes_dir=ix)
    missing = tmp_path / "missing.run"
    proc = nrp("validate", "tiny", "--runs", str(missing), "--indexes", str(ix))
    assert proc.stderr == f"nrp: error: {missing}: file not found (given as --runs)\n"
    proc = nrp("score", "tiny", str(tmp_path / "none.jsonl"), "--ranker", "tfidf",
               "--indexes", str(ix), "--out", str(tmp_path / "o"))  # fmt: skip
    assert proc.stderr.endswith("none.jsonl: file or folder not found (the ANSWERS argument)\n")
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 high mine\n")
    proc = nrp("validate", "tiny", "--runs", str(bad), "--indexes", str(ix))
    assert proc.returncode == 2 and proc.stderr.startswith(f"nrp: error: {bad}:1: ")
    assert "given as" not in proc.stderr
