"""``--ranker`` and ``--rankers`` are one option in both ``nrp validate`` and ``nrp score``:
validate takes comma-separated specs or the option repeated, score a SPEC or DIM=SPEC per
repetition; on the demo collection each spelling gives the same file as the other."""

from __future__ import annotations

import json
from importlib import resources

import pandas as pd
import pytest

from nrp import ingest
from nrp.cli import main

DEMO = resources.files("nrp") / "data" / "demo"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    ix = tmp_path_factory.mktemp("ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    return ix


def validate(indexes, out, *rankers: str) -> dict:
    args = ["validate", "demo", *rankers, "--no-validity", "--no-cache", "--indexes", str(indexes)]
    assert main([*args, "--out", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize(
    "rankers",
    [
        ["--ranker", "tfidf,bm25"],
        ["--ranker", "tfidf", "--ranker", "bm25"],
        ["--rankers", "tfidf", "--rankers", "bm25"],
        ["--rankers", "tfidf", "--ranker", "bm25"],
    ],
)
def test_validate_takes_both_spellings(rankers, indexes, tmp_path, capsys):
    reference = validate(indexes, tmp_path / "rankers.json", "--rankers", "tfidf,bm25")
    assert validate(indexes, tmp_path / "other.json", *rankers) == reference
    # the random baseline is always added; tfidf is best on relevance, bm25 on readability
    assert [system["spec"] for system in reference["systems"]] == ["tfidf", "bm25", "random"]
    assert reference["chosen"] == {"relevance": "tfidf", "readability": "bm25"}
    capsys.readouterr()


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (["--ranker", "bm25"], ["--rankers", "bm25"]),
        (
            ["--ranker", "relevance=tfidf", "--ranker", "readability=bm25"],
            ["--rankers", "relevance=tfidf", "--rankers", "readability=bm25"],
        ),
    ],
)
def test_score_takes_both_spellings(one, other, indexes, tmp_path, capsys):
    frames = []
    for name, rankers in (("one", one), ("other", other)):
        out = tmp_path / name
        args = ["score", "demo", str(DEMO / "answers.jsonl"), *rankers, "--out", str(out)]
        assert main([*args, "--indexes", str(indexes)]) == 0
        frames.append(pd.read_csv(out / "results.csv"))
    pd.testing.assert_frame_equal(frames[0], frames[1])
    chosen = frames[0].fillna({"ranker": ""}).groupby("dimension")["ranker"].unique()
    relevance = "bm25" if one[1] == "bm25" else "tfidf"
    assert chosen.map(list).to_dict() == {
        "relevance": [relevance],
        "readability": ["bm25"],
        "weighted": [""],
    }
    assert len(frames[0]) == 64 * 3  # 64 answers x (relevance, readability, weighted)
    capsys.readouterr()
