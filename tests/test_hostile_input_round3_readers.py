"""Hostile input, third round (issue 60), the readers' items: JSON nested deeper than any input
needs, in every file a user hands over (item 1), and numbers inside a parameter's range where the
arithmetic does not hold (item 3, below).

Item 1. Python's parser recursed once per level (a RecursionError traceback at a
thousand levels) and pyarrow's JSON reader overflowed the stack at twenty thousand (a segfault,
exit 139, killing a service's worker with it). Every reader now checks the nesting first
(``nrp.jsontext``): one line ``nrp: error: FILE:LINE: ... nested more than 100 levels deep``,
exit 2, nothing written. The commands run in a child process, so that the crash they gave before
fails the test instead of ending the test run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_hostile_input import DEMO, nrp, one_line_error

from nrp import jsontext

DEEP = 20_000
ANSWER = {"llm": "m", "prompt": "p", "qid": "d1", "text": "Vitamin C does not prevent colds."}


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def child(*argv: str | Path, cwd: Path) -> tuple[int, str]:
    """``nrp ARGV`` in a child process: its exit code and stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "nrp", *map(str, argv)], capture_output=True, text=True, cwd=cwd
    )
    return done.returncode, done.stderr


def refused(code: int, err: str, where: str) -> None:
    assert code == 2, (code, err[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nrp: error: {where}"), err[-2000:]
    assert "nested more than 100 levels deep" in lines[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    indexes = tmp_path_factory.mktemp("demo") / "ix"
    code, err = child("ingest", DEMO / "manifest.yaml", "--indexes", indexes, cwd=indexes.parent)
    assert code == 0, err
    return indexes


def test_the_bound_is_on_nesting_not_on_brackets_in_text():
    assert jsontext.loads(nested(100)) == json.loads(nested(100))
    with pytest.raises(jsontext.TooDeep) as found:
        jsontext.loads('{"a": ' + nested(101) + "}")
    # the bracket that went too deep: the object and 100 arrays, the 100th at column 106
    assert (found.value.msg, found.value.lineno, found.value.colno) == (
        "nested more than 100 levels deep", 1, 106,
    )  # fmt: skip
    assert isinstance(found.value, json.JSONDecodeError)  # every reader words it as bad JSON
    text = json.dumps({"text": "[" * 500 + '\\" {{{', "list": [[1], [2]]})
    assert jsontext.loads(text)["text"].startswith("[[[")  # brackets in a string are text
    with pytest.raises(jsontext.TooDeep):
        jsontext.loads(("[" * DEEP).encode())  # bytes, unclosed: refused before parsing


@pytest.mark.parametrize("where", ["answer", "report"])
def test_a_deeply_nested_answer_or_report_is_one_line_and_nothing_is_scored(demo, tmp_path, where):
    answers = tmp_path / "answers.jsonl"
    said = [{"text": "Vitamin C does not prevent colds.", "citations": [0]}]
    report = {
        "metadata": {"run_id": "r", "topic_id": "d1"},
        "references": ["doc-1"],
        "answer": said,
    }
    first = ANSWER if where == "answer" else report
    row = json.dumps({**first, "extra": "X"}).replace('"X"', nested(DEEP))  # its extra field
    answers.write_text(json.dumps(first) + "\n" + row + "\n")
    out = tmp_path / "out"
    code, err = child("score", "demo", answers, "--ranker", "tfidf", "--out", out,
                      "--indexes", demo, cwd=tmp_path)  # fmt: skip
    refused(code, err, f"{answers}:2: ")
    assert not out.exists()


def test_a_deeply_nested_table_in_a_manifest_is_one_line_and_nothing_is_built(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.yaml").write_text(
        "name: tiny\ndimensions:\n  relevance:\n    grades: {0: no, 1: yes}\nsources:\n"
        "  - {format: table, path: topics.jsonl, holds: topics}\n"
        "  - {format: table, path: docs.jsonl, holds: documents}\n"
        "  - {format: trec-qrels, path: rel.qrels, dimension: relevance}\n"
    )
    (data / "topics.jsonl").write_text(json.dumps({"qid": "q1", "query": "vitamin c"}) + "\n")
    doc = json.dumps({"docno": "d1", "text": "Colds.", "extra": "X"}).replace('"X"', nested(DEEP))
    (data / "docs.jsonl").write_text(doc + "\n")
    (data / "rel.qrels").write_text("q1 0 d1 1\n")
    indexes = tmp_path / "ix"
    code, err = child("ingest", data / "manifest.yaml", "--indexes", indexes, cwd=tmp_path)
    refused(code, err, f"{data / 'docs.jsonl'}:1: ")
    assert not (indexes / "tiny").exists() or not any((indexes / "tiny").iterdir())


def test_a_deeply_nested_label_studio_export_is_one_line(tmp_path):
    scores = tmp_path / "scores.csv"
    scores.write_text("answer_id,qid,score\na,q1,0.5\nb,q1,0.2\n")
    export = tmp_path / "export.json"
    export.write_text('[{"id": 1, "data": ' + nested(DEEP) + "}]")
    code, err = child("meta", scores, export, cwd=tmp_path)
    refused(code, err, f"{export}:1: ")


@pytest.mark.parametrize("kind", ["validation", "guard model"])
def test_a_deeply_nested_validation_or_guard_model_file_is_one_line(demo, tmp_path, kind):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n")
    deep = tmp_path / "deep.json"
    deep.write_text('{"format_version": 1, "x": ' + nested(DEEP) + "}")
    choice = ("--validation", deep) if kind == "validation" else ("--ranker", f"guard:model={deep}")
    code, err = child("score", "demo", answers, *choice, "--out", tmp_path / "out",
                      "--indexes", demo, cwd=tmp_path)  # fmt: skip
    refused(code, err, f"{deep}")
    assert not (tmp_path / "out").exists()


# --- item 3: ranges where the arithmetic holds ---------------------------------------------------
# Hostile input, third round (issue 60, item 3): numbers inside a parameter's range where the
# arithmetic does not hold. ``bm25:k1=1e308`` (and tfidf's, and k3) overflowed ``tf * (k1 + 1)``:
# every score NaN, a ValueError traceback in ``nrp score``, an IntegrityError in ``nrp validate``
# (a NaN stored as NULL); ``guard:content=1e308`` pushed every text past the guard's floor, every
# answer last with no warning. The ranges now end where the arithmetic holds (k1, k3 at most 1000;
# content at most 100): one line, exit 2, nothing written; the largest value scores.


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bm25:k1=1e308", "ranker 'bm25': parameter k1='1e308' is out of range (k1 must be from 0 "
         "to 1000)"),
        ("tfidf:k1=1e200", "ranker 'tfidf': parameter k1='1e200' is out of range (k1 must be from "
         "0 to 1000)"),
        ("bm25:k3=1e308", "ranker 'bm25': parameter k3='1e308' is out of range (k3 must be from 0 "
         "to 1000)"),
        ("guard:ranker=bm25,content=1e308", "ranker 'guard': parameter content='1e308' is out of "
         "range (content must be from 0 to 100)"),
    ],
)  # fmt: skip
def test_a_number_past_where_the_arithmetic_holds_is_one_line(demo, tmp_path, spec, message):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n")
    out = tmp_path / "out"
    scored = nrp("score", "demo", answers, "--ranker", spec, "--out", out, "--indexes", demo)
    assert one_line_error(*scored[::2]).endswith(message)
    assert not out.exists()
    validated = nrp("validate", "demo", "--rankers", f"{spec},tfidf", "--no-validity",
                    "--out", tmp_path / "v.json", "--indexes", demo)  # fmt: skip
    assert one_line_error(*validated[::2]).endswith(message)
    assert not (tmp_path / "v.json").exists()


def test_the_largest_values_in_range_score_finite_numbers(demo, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n")
    for spec in ("bm25:k1=1000,k3=1000", "tfidf:k1=1000", "guard:ranker=bm25,content=100"):
        out = tmp_path / spec.replace(":", "_").replace(",", "_").replace("=", "_")
        code, _, err = nrp("score", "demo", answers, "--ranker", spec, "--out", out,
                           "--indexes", demo)  # fmt: skip
        assert code == 0, err
        results = pd.read_parquet(out / "results.parquet")
        ranked = results[results["dimension"] != "weighted"]  # (a weighted row has no score)
        assert len(ranked) == 2 and all(math.isfinite(v) for v in ranked["score"])  # two dimensions
        assert results["nrp"].notna().all()
