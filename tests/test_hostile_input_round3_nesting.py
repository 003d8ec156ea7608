"""Hostile input, third round (issue 60, item 1): JSON nested deeper than any input needs, in every
file a user hands over. Python's parser recursed once per level (a RecursionError traceback at a
thousand levels) and pyarrow's JSON reader overflowed the stack at twenty thousand (a segfault,
exit 139, killing a service's worker with it). Every reader now checks the nesting first
(``nrp.jsontext``): one line ``nrp: error: FILE:LINE: ... nested more than 100 levels deep``,
exit 2, nothing written. The commands run in a child process, so that the crash they gave before
fails the test instead of ending the test run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_hostile_input import DEMO

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
