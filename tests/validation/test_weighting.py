"""The weighted NRP's default (issue 30): a dimension whose chosen ranker is not significantly
better than the random control is left out of the weighted NRP, with the reason printed in
validation, ``nrp score`` and ``nrp summary``; ``--all-dimensions`` (and explicit weights) put it
back. On a hand-made collection of 24 queries, two dimensions:

- ``relevance``: the document that holds the query's word twice is graded 2, the one that holds
  it once 1, two documents without it 0: TF-IDF orders every D_q perfectly (nDCG@10 = 1);
- ``style``: noise: the grade-2 document is the one at position ``(3i + 1) % 4`` of query i,
  whatever its words: TF-IDF's nDCG@10 (0.6404) is above the random ranker's (0.5638), but not
  significantly (randomization test, p 0.2747, one pair: no correction).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from nrp import ingest
from nrp.cli import main
from nrp.collection.collection import Collection
from nrp.positioning.scoring import score_answers
from nrp.validation.selection import default_weights
from nrp.validation.validate import validate

WORDS = [
    "asthma", "bronchitis", "cataract", "dermatitis", "eczema", "fibroma", "gastritis",
    "hepatitis", "insomnia", "jaundice", "keratitis", "laryngitis", "migraine", "nephritis",
    "otitis", "psoriasis", "rhinitis", "sinusitis", "tendinitis", "urticaria", "vertigo",
    "whiplash", "xerosis", "zoster",
]  # fmt: skip
MANIFEST = """\
name: noise-dim
description: hand-made collection with one dimension of noise labels
citation: nrp tests
data_root: .
dimensions:
  relevance:
    description: holds the query word
    grades: {0: "no", 1: "partly", 2: "yes"}
  style:
    description: noise
    grades: {0: "no", 1: "partly", 2: "yes"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance, style]}
"""


def documents(i: int, word: str) -> list[tuple[str, str, int]]:
    """(docno, text, relevance grade) of query i's four documents."""
    other = WORDS[(i + 7) % len(WORDS)]
    return [
        (f"q{i}a", f"{word} {word} treatment and care", 2),
        (f"q{i}b", f"{word} is common in adults", 1),
        (f"q{i}c", f"{other} needs rest", 0),
        (f"q{i}d", "general advice about sleep", 0),
    ]


def write_collection(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.yaml").write_text(MANIFEST)
    topics, docs, qrels = ["qid\tquery"], ["docno\ttext"], ["qid\tdocno\trelevance\tstyle"]
    for i, word in enumerate(WORDS):
        topics.append(f"q{i}\twhat is {word}")
        for position, (docno, text, grade) in enumerate(documents(i, word)):
            docs.append(f"{docno}\t{text}")
            style = 2 if position == (3 * i + 1) % 4 else 0  # noise: unrelated to the text
            qrels.append(f"q{i}\t{docno}\t{grade}\t{style}")
    for name, lines in (("topics", topics), ("documents", docs), ("qrels", qrels)):
        (folder / f"{name}.tsv").write_text("\n".join(lines) + "\n")
    return folder / "manifest.yaml"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("noise-dim")
    ingest(write_collection(root / "data"), indexes_dir=root / "ix")
    return str(root / "ix")


@pytest.fixture(scope="module")
def result(indexes):
    collection = Collection.load("noise-dim", indexes)
    return validate(collection, ["tfidf"], validity=False, cache=False)


ANSWERS = pd.DataFrame(
    [
        {"answer_id": f"a{i}", "llm": "m", "prompt": "p", "qid": f"q{i}", "sample": 0,
         "text": f"{word} {word} {word}: what it is, treatment and care"}
        for i, word in enumerate(WORDS)
    ]
)  # fmt: skip


def test_the_random_control_is_added_and_tested_against(result):
    assert [s.name for s in result.systems] == ["tfidf", "random"]
    relevance, style = result.dimensions["relevance"].choice, result.dimensions["style"].choice
    assert relevance.best == "tfidf" and relevance.control == "random"
    assert result.dimensions["relevance"].summary["tfidf"][result.primary].mean == 1.0
    assert relevance.better_than_control is True and relevance.control_p < 0.05
    assert relevance.control_p == result.dimensions["relevance"].p_against("tfidf", "random")
    assert style.best == "tfidf" and style.better_than_control is False
    assert style.control_difference == pytest.approx(0.6404015779112125 - 0.5637807412715761)
    assert style.control_p == pytest.approx(0.2746725327467253, abs=1e-12)


def test_a_noise_dimension_is_left_out_of_the_weighted_nrp(result):
    weights, left_out, warning = result.weighting()
    assert weights == {"relevance": 1.0, "style": 0.0} and warning is None
    assert list(left_out) == ["style"]
    assert left_out["style"] == (
        "no ranker validated: tfidf is not significantly better than random (mean difference "
        "+0.0766, p corr. 0.275)"
    )
    data = result.to_dict()
    assert data["weights"] == weights and data["left_out"] == left_out
    assert data["dimensions"]["relevance"]["choice"]["against_random"]["random"] == "random"
    text = result.format()
    assert "vs random: tfidf +" in text
    assert "significantly better (p corr." in text and "enters the weighted NRP" in text
    assert "no ranker validated: left out of the weighted NRP by default" in text


def test_scoring_leaves_it_out_and_all_dimensions_puts_it_back(result, indexes):
    collection = Collection.load("noise-dim", indexes)
    frame = score_answers(collection, ANSWERS, result, cache=False)
    assert frame.attrs["weights"] == {"relevance": 1.0, "style": 0.0}
    assert list(frame.attrs["left_out"]) == ["style"]
    # style counts for nothing: not positioned (no rows), unless asked
    assert frame.attrs["not_scored"] == ["style"]
    assert set(frame["dimension"]) == {"relevance", "weighted"}
    assert frame.attrs["counts"]["rankers_scored"] == 1
    by = frame.pivot(index="answer_id", columns="dimension", values="nrp")
    assert (by["weighted"] == by["relevance"]).all()
    every = score_answers(collection, ANSWERS, result, cache=False, every_dimension=True)
    assert set(every["dimension"]) == {"relevance", "style", "weighted"}
    assert every.attrs["not_scored"] == [] and every.attrs["weights"] == frame.attrs["weights"]
    pd.testing.assert_frame_equal(
        every[every["dimension"] != "style"].reset_index(drop=True), frame
    )
    forced = score_answers(collection, ANSWERS, result, cache=False, all_dimensions=True)
    assert forced.attrs["weights"] == {"relevance": 0.5, "style": 0.5}
    assert forced.attrs["left_out"] == {}
    by = forced.pivot(index="answer_id", columns="dimension", values="nrp")
    assert (by["weighted"] == 0.5 * by["relevance"] + 0.5 * by["style"]).all()
    explicit = score_answers(
        collection, ANSWERS, result, cache=False, weights={"relevance": 1, "style": 3}
    )
    assert explicit.attrs["weights"] == {"relevance": 0.25, "style": 0.75}


def test_when_no_dimension_beats_random_all_enter_with_a_warning(indexes):
    collection = Collection.load("noise-dim", indexes)
    only_style = validate(collection, ["tfidf"], validity=False, cache=False, dimensions=["style"])
    weights, left_out, warning = only_style.weighting()
    assert weights == {"style": 1.0} and left_out == {}
    assert "no dimension's chosen ranker is significantly better than random" in warning
    assert warning in only_style.warnings
    assert default_weights({"style": None}) == ({}, {}, None)  # nothing chosen: nothing weighted


def test_without_the_control_the_choice_is_not_tested(indexes):
    collection = Collection.load("noise-dim", indexes)
    plain = validate(collection, ["tfidf"], validity=False, cache=False, random_control=False)
    assert [s.name for s in plain.systems] == ["tfidf"]
    assert plain.dimensions["style"].choice.control is None
    assert plain.weighting() == ({"relevance": 1.0, "style": 1.0}, {}, None)
    assert "vs random: not tested (no random ranker validated); enters" in plain.format()


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out + err


def test_the_commands_print_what_is_left_out_and_why(indexes, tmp_path, capsys):
    code, out = run(capsys, "validate", "noise-dim", "--rankers", "tfidf", "--no-validity",
                    "--indexes", indexes)  # fmt: skip
    assert code == 0
    assert "style: left out" not in out and "no ranker validated: left out of the weighted" in out
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(a) + "\n" for a in ANSWERS.to_dict("records")))
    code, out = run(capsys, "score", "noise-dim", str(answers), "--out", str(tmp_path / "s"),
                    "--indexes", indexes)  # fmt: skip
    assert code == 0
    assert "style: left out of the weighted NRP (no ranker validated: " in out
    assert "not scored (weight 0 in the weighted NRP): style; --every-dimension scores them" in out
    record = json.loads((tmp_path / "s" / "scoring.json").read_text())
    assert record["weights"] == {"relevance": 1.0, "style": 0.0}
    assert list(record["left_out"]) == ["style"]
    code, out = run(capsys, "summary", str(tmp_path / "s"))
    assert code == 0
    assert "weighted NRP (weighted): the mean of relevance 1.000" in out
    assert "  style: left out of the weighted NRP (no ranker validated: " in out
    code, out = run(capsys, "score", "noise-dim", str(answers), "--out", str(tmp_path / "all"),
                    "--all-dimensions", "--indexes", indexes)  # fmt: skip
    assert code == 0 and "left out" not in out
    record = json.loads((tmp_path / "all" / "scoring.json").read_text())
    assert record["weights"] == {"relevance": 0.5, "style": 0.5} and record["left_out"] == {}
