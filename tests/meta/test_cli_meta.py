"""`nrp meta` end to end on tiny files: output files with hand-computed values, rankings as human
input, the categorical report with its review plot, and exit 2 with one line (nothing written)
on bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pytest

from nrp.cli import main

SCORES = """\
answer_id,qid,llm,bleu,judge_raw
a1,q1,A,1,x
a2,q1,B,2,x
a3,q1,C,2,x
a4,q1,D,3,x
b1,q2,A,3,x
b2,q2,B,1,x
b3,q2,C,2,x
"""
HUMAN = "answer_id,relevance\na1,1\na2,1\na3,2\na4,2\nb1,0\nb2,2\nb3,1\n"


def nrp(*args: str) -> subprocess.CompletedProcess:
    """The installed command in a subprocess: the real end to end path."""
    return subprocess.run([sys.executable, "-m", "nrp", *args], capture_output=True, text=True)


@pytest.fixture
def nrp_here(capsys):
    """``nrp.cli.main`` in this process (no interpreter start-up): returncode, stdout, stderr."""

    def run(*args: str) -> subprocess.CompletedProcess:
        code = main(list(args))
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, captured.out, captured.err)

    return run


@pytest.fixture
def files(tmp_path):
    (tmp_path / "scores.csv").write_text(SCORES, encoding="utf-8")
    (tmp_path / "human.csv").write_text(HUMAN, encoding="utf-8")
    return tmp_path


def test_meta_writes_tables_with_hand_values(files):
    out = files / "out"
    proc = nrp("meta", str(files / "scores.csv"), str(files / "human.csv"), "--out", str(out),
               "--bootstrap", "200")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "meta.json", "meta_per_query.csv", "meta_summary.csv", "meta_systems.csv",
    ]  # fmt: skip
    data = json.loads((out / "meta.json").read_text())
    (row,) = data["summary"]  # bleu x relevance: judge_raw is text, not a score
    # q1: x = [1, 2, 2, 3], y = [1, 1, 2, 2]: tau-b = 3 / sqrt(20) (see test_correlation);
    # q2: x = [3, 1, 2], y = [0, 2, 1]: -1
    assert row["tau_mean"] == pytest.approx((3 / math.sqrt(20) - 1) / 2)
    assert row["queries_used"] == 2
    # system level (llm, found automatically): A (1+3)/2 = 2 vs (1+0)/2 = 0.5, B 1.5 vs 1.5,
    # C 2 vs 1.5, D 3 vs 2. Pairs: AB x> y< D; AC x= y< tie-x; AD x< y< C; BC x< y= tie-y;
    # BD C; CD C: C = 3, D = 1, n0 = 6, ties x 1, ties y 1: tau-b = 2 / sqrt(5 * 5) = 0.4
    assert row["n_systems"] == 4
    assert row["tau_system"] == pytest.approx(0.4)
    systems = pd.read_csv(out / "meta_systems.csv")
    assert systems.set_index("system").loc["A", "mean_score"] == pytest.approx(2.0)
    assert len(pd.read_csv(out / "meta_per_query.csv")) == 2
    assert "relevance: 7 items, 2 queries" in proc.stdout


def test_meta_with_rankings(files, nrp_here):
    (files / "rank.jsonl").write_text(
        '{"qid": "q1", "ranking": ["a4", "a3", "a2", "a1"]}\n'
        '{"qid": "q2", "ranking": ["b1", "b3", "b2"]}\n',
        encoding="utf-8",
    )
    proc = nrp_here("meta", str(files / "scores.csv"), str(files / "rank.jsonl"),
                    "--bootstrap", "0", "--system-column", "none")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "rankings read as grades" in proc.stdout
    # q1 grades a4 3, a3 2, a2 1, a1 0 against bleu [1, 2, 2, 3]: 5 concordant pairs and one
    # tied in bleu (a2, a3): tau-b = 5 / sqrt(5 * 6); q2 grades b1 2, b3 1, b2 0 = bleu order: 1
    expected = (5 / math.sqrt(30) + 1) / 2
    assert f"{expected:.3f}" in proc.stdout


def test_categorical_with_review_plot(tmp_path, nrp_here):
    (tmp_path / "judge.csv").write_text(
        "answer_id,judge.label,judge.confidence\n"
        "1,TRUE,0.9\n2,TRUE,0.8\n3,FALSE,0.3\n4,FALSE,0.6\n5,TRUE,0.4\n6,,\n",
        encoding="utf-8",
    )
    (tmp_path / "human.csv").write_text(
        "answer_id,label\n1,TRUE\n2,TRUE\n3,TRUE\n4,FALSE\n5,FALSE\n6,NOT GIVEN\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    proc = nrp_here("meta", str(tmp_path / "judge.csv"), str(tmp_path / "human.csv"),
                    "--categorical", "--label-column", "judge.label",
                    "--confidence-column", "judge.confidence", "--thresholds", "0.35,0.5",
                    "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "categorical.json").read_text())["summary"]
    assert summary["accuracy"] == pytest.approx(0.5)
    assert summary["macro_accuracy"] == pytest.approx((2 / 3 + 0.5 + 0) / 3)
    review = pd.read_csv(out / "categorical_review.csv").set_index("threshold")
    assert review.loc[0.5, "share_wrong_caught"] == 1.0
    assert (out / "review.png").stat().st_size > 0 and (out / "review.svg").stat().st_size > 0


def test_bad_human_file_exits_2_with_one_line_and_writes_nothing(files):
    (files / "human.csv").write_text("answer_id,relevance\na1,1\na2,1\na3,high\n")
    out = files / "out"
    proc = nrp("meta", str(files / "scores.csv"), str(files / "human.csv"), "--out", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nrp: error: ")
    assert lines[0].endswith("human.csv:4: relevance 'high' is not a number")
    assert not out.exists()


def test_unknown_score_column_and_no_common_ids(files, nrp_here):
    proc = nrp_here(
        "meta", str(files / "scores.csv"), str(files / "human.csv"), "--scores", "rouge"
    )
    assert proc.returncode == 2 and "no score column(s) ['rouge']" in proc.stderr
    (files / "other.csv").write_text("answer_id,relevance\nz1,1\n")
    proc = nrp_here("meta", str(files / "scores.csv"), str(files / "other.csv"))
    assert proc.returncode == 2 and "no item ids in common" in proc.stderr
