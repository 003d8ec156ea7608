"""Run files: TREC and CSV/TSV read strictly, every error naming file and line on one line."""

from __future__ import annotations

import pytest

from nrp.errors import InputError
from nrp.validation.runs import read_run

TREC = "q1 Q0 d1 1 3.5 mine\nq1 Q0 d2 2 1.0 mine\n\nq2 Q0 d3 1 -2e-1 mine\n"


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_trec_run_is_read_with_lines_tags_and_fingerprint(tmp_path):
    run = read_run(write(tmp_path, "sys.run", TREC))
    assert run.format == "trec" and run.tags == ("mine",) and run.stem == "sys"
    assert run.frame[["qid", "docno", "score", "line"]].values.tolist() == [
        ["q1", "d1", 3.5, 1],
        ["q1", "d2", 1.0, 2],
        ["q2", "d3", -0.2, 4],
    ]
    assert len(run.fingerprint) == 20 and run.warnings == []


def test_csv_and_tsv_runs(tmp_path):
    csv = read_run(write(tmp_path, "a.csv", "qid,docno,score,extra\nq1,d1,0.5,x\nq1,d2,0.25,y\n"))
    assert csv.frame[["qid", "docno", "score"]].values.tolist() == [
        ["q1", "d1", 0.5],
        ["q1", "d2", 0.25],
    ]
    tsv = read_run(write(tmp_path, "b.tsv", "docno\tqid\tscore\nd1\tq1\t2\n"))
    assert tsv.frame[["qid", "docno", "score"]].values.tolist() == [["q1", "d1", 2.0]]


@pytest.mark.parametrize(
    ("name", "content", "where", "problem"),
    [
        ("f.run", "q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.5\n", ":2", "expected 6 whitespace-separated"),
        ("f.run", "q1 Q0 d1 1 1.0 t\n\nq1 Q0 d2 2 high t\n", ":3", "score 'high' is not a number"),
        ("f.run", "q1 Q0 d1 1 nan t\n", ":1", "score 'nan' is not a finite number"),
        ("f.run", "q1 Q0 d1 first 1.0 t\n", ":1", "rank 'first' is not an integer"),
        ("f.run", "q1 Q0 d1 1 1 t\nq1 Q0 d2 2 0 t\nq1 Q0 d1 3 0 t\n", ":3",
         "(q1, d1) ranked twice (first on line 1)"),
        ("f.run", "", "", "file is empty"),
        ("f.run", "  \n\n", "", "file is empty"),
        ("f.run", b"q1 Q0 d1 1 1.0 t\nq1 Q0 d\xe92 2 0.5 t\n", ":2", "not valid UTF-8"),
        ("f.csv", "qid,docno,score\nq1,d1,0.5\nq1,d2\n", ":3", "expected 3 fields"),
        ("f.csv", "qid,docno,score\nq1,d1,abc\n", ":2", "score 'abc' is not a number"),
        ("f.csv", "qid,doc,score\nq1,d1,1\n", ":1",
         "missing column(s) 'docno' (found: qid, doc, score)"),
        ("f.tsv", "qid\tdocno\tscore\n", "", "run has no rows"),
    ],
)  # fmt: skip
def test_errors_name_file_and_line(tmp_path, name, content, where, problem):
    path = write(tmp_path, name, content)
    with pytest.raises(InputError) as err:
        read_run(path)
    message = str(err.value)
    assert message.startswith(f"{path}{where}: ")
    assert problem in message
    assert "\n" not in message


def test_ranks_that_disagree_with_scores_give_a_warning(tmp_path):
    # rank 1 has the lower score: trec_eval (and nrp) order by score, so the author is told
    run = read_run(write(tmp_path, "w.run", "q1 Q0 d1 1 0.1 t\nq1 Q0 d2 2 0.9 t\n"))
    assert len(run.warnings) == 1
    assert "ranks disagree with scores in 1 queries (first: q1)" in run.warnings[0]


def test_ids_are_read_in_nfc(tmp_path):
    nfd, nfc = "e\u0301", "\u00e9"  # "é" as e + combining acute, and as one code point
    trec = read_run(write(tmp_path, "n.run", f"q{nfd} Q0 d{nfd} 1 1.0 t\n"))
    table = read_run(write(tmp_path, "n.tsv", f"qid\tdocno\tscore\nq{nfd}\td{nfd}\t1\n"))
    for run in (trec, table):
        assert run.frame[["qid", "docno"]].values.tolist() == [[f"q{nfc}", f"d{nfc}"]]
    with pytest.raises(InputError, match=r"n2.run:2: .* ranked twice \(first on line 1\)"):
        read_run(write(tmp_path, "n2.run", f"q{nfc} Q0 d1 1 1 t\nq{nfd} Q0 d1 2 0 t\n"))
