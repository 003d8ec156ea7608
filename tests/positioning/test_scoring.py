"""score_answers: the per-answer frame, combined NRP, one ranker scored once, skipped queries,
rankers from a validation JSON (told from a ranker spec ending in .json), input errors, and the
PyTerrier wrapper NRPScorer.

Uses the hand-built collection of test_injection (q1: documents scored 5, 4, 3, 3, 1 by
``FixedScores``; q2: no document with text; q3: two documents)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from test_injection import FixedScores, build_tiny, fresh_copy, tiny_answers

from nrp.analysis.score_files import score
from nrp.errors import ConfigError, InputError, NrpError
from nrp.positioning.choice import RankerChoice
from nrp.positioning.scoring import (
    RESULT_COLUMNS,
    NRPScorer,
    normalised_weights,
    resolve_rankers,
    score_answers,
)
from nrp.rankers.guard import GuardRanker
from nrp.rankers.guard_model import PACKAGED_MODEL, packaged_model
from nrp.validation.result import names_validation_file
from nrp.validation.validate import validate


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    return build_tiny(tmp_path_factory.mktemp("tiny"))


class Reversed(FixedScores):
    """The fixed scores negated: the order of ``FixedScores`` upside down."""

    name = "reversed"

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        return -super().score_frame(frame)


def test_frame_has_a_row_per_answer_and_dimension_then_the_weighted_combination(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    result = score_answers(
        collection,
        tiny_answers(),
        {"relevance": FixedScores(), "readability": Reversed()},
        weights={"relevance": 3, "readability": 1},
    )
    assert list(result.columns) == list(RESULT_COLUMNS)
    assert result["dimension"].tolist() == ["relevance", "readability", "weighted"] * 3
    nrp = result.pivot(index="answer_id", columns="dimension", values="nrp")
    # readability reverses the order: docs -5 -4 -3 -3 -1; 'tie' (-3) has one above, two ties
    assert nrp.loc["top"].to_dict() == {"relevance": 1.0, "readability": 0.0, "weighted": 0.75}
    assert nrp.loc["bottom"].to_dict() == {"relevance": 0.0, "readability": 1.0, "weighted": 0.25}
    assert nrp.loc["tied", "readability"] == 1 - 2 / 5
    assert nrp.loc["tied", "weighted"] == pytest.approx(0.75 * 0.4 + 0.25 * 0.6)
    combined = result[result["dimension"] == "weighted"]
    assert combined["ranker"].eq("").all() and combined["score"].isna().all()
    assert combined["ties"].isna().all() and (combined["n_docs"] == 5).all()
    assert result.attrs["weights"] == {"relevance": 0.75, "readability": 0.25}
    assert result.attrs["single_ranker"] is None
    assert result.attrs["counts"]["rankers_scored"] == 2
    assert set(result.attrs["counts_by_ranker"]) == {"fixed:offset=0.0", "reversed:offset=0.0"}


def test_one_ranker_for_every_dimension_is_scored_once(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    ranker = FixedScores()
    result = score_answers(collection, tiny_answers(), ranker)  # every dimension of tiny
    assert ranker.calls == [5, 3]  # not twice
    assert result.attrs["single_ranker"] == "fixed:offset=0.0"
    assert "scored once" not in result.attrs["note"]  # says it in its own words:
    assert "positioned once" in result.attrs["note"] and "single NRP" in result.attrs["note"]
    nrp = result.pivot(index="answer_id", columns="dimension", values="nrp")
    assert (nrp["relevance"] == nrp["readability"]).all()
    assert (nrp["weighted"] == nrp["relevance"]).all()
    # the same spec string for two dimensions builds one ranker
    specs = score_answers(
        collection, tiny_answers(), {"relevance": "tfidf", "readability": "tfidf"}
    )
    assert specs.attrs["counts"]["rankers_scored"] == 1
    assert specs.attrs["single_ranker"] == "tfidf"


def test_answers_of_queries_without_documents_are_skipped_and_reported(tiny, tmp_path, caplog):
    collection = fresh_copy(tiny, tmp_path / "c")
    answers = pd.concat(
        [tiny_answers(), pd.DataFrame({"answer_id": ["x"], "qid": ["q2"], "text": ["nine"]})]
    )
    with caplog.at_level(logging.WARNING):
        result = score_answers(collection, answers, {"relevance": FixedScores()})
    assert "x" not in set(result["answer_id"])
    assert result.attrs["skipped"] == [
        {"answer_id": "x", "qid": "q2", "reason": "no judged documents with text (empty D_q)"}
    ]
    assert result.attrs["counts"]["answers_skipped"] == 1
    assert "cannot be ranked" in caplog.text


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (pd.DataFrame({"answer_id": ["a"], "qid": ["q9"], "text": ["x"]}), "not topics"),
        (pd.DataFrame({"answer_id": ["a", "a"], "qid": ["q1"] * 2, "text": ["x", "y"]}), "unique"),
        (pd.DataFrame({"answer_id": ["d1"], "qid": ["q1"], "text": ["nine"]}), "also a document"),
        (pd.DataFrame({"answer_id": ["a"], "qid": ["q1"]}), "missing"),
    ],
)
def test_bad_answers_are_errors(tiny, tmp_path, answers, message):
    with pytest.raises(NrpError, match=message):
        score_answers(fresh_copy(tiny, tmp_path / "c"), answers, {"relevance": FixedScores()})


def test_bad_options_are_config_errors(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    with pytest.raises(ConfigError, match="tie rule"):
        score_answers(collection, tiny_answers(), FixedScores(), ties="random")
    with pytest.raises(ConfigError, match="run file"):
        score_answers(collection, tiny_answers(), {"relevance": "run:my.run"})
    with pytest.raises(ConfigError, match="missing"):
        normalised_weights({"relevance": 1}, ["relevance", "readability"])
    with pytest.raises(ConfigError, match="unknown"):
        normalised_weights({"relevance": 1, "clarity": 1}, ["relevance"])
    with pytest.raises(ConfigError, match=">= 0"):
        normalised_weights({"relevance": -1, "readability": 2}, ["relevance", "readability"])
    assert normalised_weights(None, ["a", "b"]) == {"a": 0.5, "b": 0.5}


def test_rankers_come_from_a_validation_json(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    result = validate(collection, ["random", "tfidf"], cache=False, validity=False)
    path = tmp_path / "validation.json"
    result.to_json(path)
    scored = score_answers(collection, tiny_answers(), str(path))
    per_dimension = scored[scored["dimension"] != "weighted"]
    chosen = per_dimension.groupby("dimension")["ranker"].first().to_dict()
    assert chosen == result.chosen()
    # three queries: no chosen ranker is significantly better than the random control, so every
    # dimension enters the weighted NRP, with the warning that says so
    assert scored.attrs["warnings"] == [result.weighting()[2]]
    assert scored.attrs["warnings"][0].startswith("no dimension's chosen ranker is significantly")
    # a validation of another collection (fingerprint) is used, with a warning
    data = json.loads(path.read_text())
    data["collection_fingerprint"] = "0" * 64
    path.write_text(json.dumps(data))
    other = score_answers(collection, tiny_answers(), path)
    assert "may not apply" in other.attrs["warnings"][0]


def test_a_validation_file_is_told_from_a_ranker_spec_ending_in_json(tiny, tmp_path, monkeypatch):
    collection = fresh_copy(tiny, tmp_path / "c")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bm25").write_text("a run file, say")
    (tmp_path / "chosen").write_text("{}")
    path = tmp_path / "chosen.json"
    validate(collection, ["random", "tfidf"], cache=False, validity=False).to_json(path)
    assert names_validation_file(str(path)) and names_validation_file(path)
    # a missing file is still a validation path: reading it says the file is missing
    assert names_validation_file("runs/validation.json")
    assert names_validation_file("validation.json")
    assert names_validation_file("C:\\runs\\v.json")  # "C" is no ranker
    # a ranker whose last parameter is a path (or a model folder) ending in .json
    assert not names_validation_file("guard:model=/tmp/x.json")
    assert not names_validation_file("dense:model=some/dir.json")
    assert not names_validation_file("bm25")  # a ranker's name, though a file is named so
    assert names_validation_file("chosen")  # a file, no ranker's name
    # the word "validation" names no file: the nrp evaluator resolves it to the collection's
    assert not names_validation_file("validation")
    assert (
        RankerChoice.of(str(path)).validation.chosen() == RankerChoice.of(path).validation.chosen()
    )
    with pytest.raises(InputError, match=r"validation\.json: file not found"):
        RankerChoice.of(str(tmp_path / "runs" / "validation.json"))


def test_a_ranker_spec_ending_in_json_is_built_as_the_ranker(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    model = tmp_path / "guard.json"
    model.write_bytes(PACKAGED_MODEL.read_bytes())
    spec = f"guard:ranker=tfidf,model={model}"
    assert RankerChoice.of(spec).validation is None
    built, warnings = resolve_rankers(spec, collection)
    assert warnings == [] and set(built) == {"relevance", "readability"}
    guard = built["relevance"]
    assert isinstance(guard, GuardRanker) and built["readability"] is guard
    assert guard.params["model"] == str(model)
    assert guard.model.digest == packaged_model().digest  # the file given, read


def test_nrp_scorer_is_a_pyterrier_transformer(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    scorer = NRPScorer(collection, FixedScores(), ties="optimistic")
    assert isinstance(scorer, pt.Transformer)
    rows = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q2"],
            "query": ["fixed scores", "fixed scores", "no documents with text"],
            "docno": ["top", "tied", "orphan"],
            "text": ["nine", "tie", "nine"],
            "llm": ["m", "m", "m"],
        }
    )
    pipeline = scorer >> pt.apply.generic(lambda frame: frame.assign(percent=frame["nrp"] * 100))
    out = pipeline(rows)
    assert out["docno"].tolist() == ["top", "tied", "orphan"]
    assert out["llm"].tolist() == ["m"] * 3
    assert out["rank"].tolist()[:2] == [0.0, 2.0]  # optimistic: above its two ties
    assert out["nrp"].tolist()[:2] == [1.0, 1 - 2 / 5]
    assert out["percent"].tolist()[:2] == [100.0, 60.0]
    assert np.isnan(out["nrp"].iloc[2])  # q2 has no documents: cannot be ranked
    assert str(scorer) == "NRP(fixed:offset=0.0, ties=optimistic)"


def test_score_is_score_answers(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    a = score(collection, tiny_answers(), {"relevance": FixedScores()}, ties="pessimistic")
    b = score_answers(collection, tiny_answers(), {"relevance": FixedScores()}, ties="pessimistic")
    pd.testing.assert_frame_equal(a, b)


def test_score_reads_an_answer_file(tiny, tmp_path):
    pytest.importorskip("nrp.answers")
    collection = fresh_copy(tiny, tmp_path / "c")
    path = tmp_path / "answers.jsonl"
    path.write_text(tiny_answers().to_json(orient="records", lines=True))
    from_file = score(collection, path, {"relevance": FixedScores()})
    from_frame = score_answers(collection, tiny_answers(), {"relevance": FixedScores()})
    pd.testing.assert_frame_equal(from_file, from_frame)
