"""``RankerChoice``: which ranker scores each dimension, parsed once where it is given."""

from __future__ import annotations

import pytest
from test_injection import FixedScores, build_tiny, fresh_copy, tiny_answers

from nrp.errors import ConfigError, InputError
from nrp.positioning.choice import RankerChoice
from nrp.positioning.scoring import resolve_rankers, score_answers
from nrp.rankers.registry import RankerSpec
from nrp.validation.validate import validate


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    return build_tiny(tmp_path_factory.mktemp("tiny"))


def test_options_name_one_ranker_or_one_per_dimension():
    every = RankerChoice.from_options(["bm25:k1=0.9,b=0.5"])
    assert every.every == RankerSpec.parse("bm25:b=0.5,k1=0.9") and every.by_dimension == {}
    assert every.rankers(["relevance", "readability"]) == {
        "relevance": RankerSpec("bm25", (("b", 0.5), ("k1", 0.9))),
        "readability": RankerSpec("bm25", (("b", 0.5), ("k1", 0.9))),
    }
    each = RankerChoice.from_options(["relevance=guard:ranker=bm25;k1=0.9", "readability=tfidf"])
    assert each.every is None and each.rankers(["relevance"]) == {
        "relevance": RankerSpec("guard", (("ranker", (RankerSpec("bm25", (("k1", 0.9),)),)),)),
        "readability": RankerSpec("tfidf"),
    }
    assert each.text() == {"relevance": "guard:ranker=bm25:k1=0.9", "readability": "tfidf"}
    assert every.text() == "bm25:b=0.5,k1=0.9"


def test_a_wrong_choice_is_refused_where_it_is_made():
    with pytest.raises(ConfigError, match=r"^unknown ranker 'bogus' in spec 'bogus:x=1'"):
        RankerChoice.from_options(["bogus:x=1"])
    with pytest.raises(ConfigError, match=r"^dimension 'relevance': ranker 'bm25': parameter k1"):
        RankerChoice.from_options(["relevance=bm25:k1=x"])
    with pytest.raises(ConfigError, match=r"^--ranker 'tfidf' is not DIM=VALUE"):
        RankerChoice.from_options(["relevance=bm25", "tfidf"])
    with pytest.raises(ConfigError, match=r"not a ranker spec, Ranker or pt\.Transformer: 3"):
        RankerChoice.of({"relevance": 3})
    with pytest.raises(ConfigError, match="a ranker given as an object has no text"):
        RankerChoice.of(FixedScores()).text()


def test_one_spec_builds_one_ranker_however_it_is_written(tiny, tmp_path):
    collection = fresh_copy(tiny, tmp_path / "c")
    built, warnings = resolve_rankers(
        {"relevance": "bm25:k1=1.2", "readability": RankerSpec("bm25")}, collection
    )
    assert warnings == [] and built["relevance"] is built["readability"]
    with pytest.raises(ConfigError, match=r"^dimension 'relevance': run:my\.run is a run file"):
        resolve_rankers({"relevance": "run:my.run"}, collection)


def test_a_validation_json_is_read_once_and_named_as_given(tiny, tmp_path, monkeypatch):
    collection = fresh_copy(tiny, tmp_path / "c")
    monkeypatch.chdir(tmp_path)
    validate(collection, ["random", "tfidf"], cache=False, validity=False).to_json("v.json")
    choice = RankerChoice.read("v.json")
    assert choice.source == "v.json" and choice.path == (tmp_path / "v.json").resolve()
    assert choice.text() == "v.json" and RankerChoice.of("v.json").path == choice.path
    chosen = choice.validation.chosen()
    assert choice.rankers(["relevance"]) == {d: RankerSpec.parse(s) for d, s in chosen.items()}
    scored = score_answers(collection, tiny_answers(), choice)
    assert scored.attrs["validation"] == str(choice.path)
    with pytest.raises(InputError, match=r"missing\.json: file not found"):
        RankerChoice.read("missing.json")
