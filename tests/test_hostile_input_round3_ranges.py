"""Hostile input, third round (issue 60, item 3): numbers inside a parameter's range where the
arithmetic does not hold. ``bm25:k1=1e308`` (and tfidf's, and k3) overflowed ``tf * (k1 + 1)``:
every score NaN, a ValueError traceback in ``nrp score``, an IntegrityError in ``nrp validate``
(a NaN stored as NULL); ``guard:content=1e308`` pushed every text past the guard's floor, every
answer last with no warning. The ranges now end where the arithmetic holds (k1, k3 at most 1000;
content at most 100): one line, exit 2, nothing written; the largest value scores."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from test_hostile_input import DEMO, nrp, one_line_error

ANSWER = {"llm": "m", "prompt": "p", "qid": "d1", "text": "Vitamin C does not prevent colds."}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    indexes = tmp_path_factory.mktemp("demo") / "ix"
    assert nrp("ingest", DEMO / "manifest.yaml", "--indexes", indexes)[0] == 0
    return indexes


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
