"""``RankerSpec``: one grammar for every ranker spec, parsed once, with one canonical text that
round-trips; and a list of specs (``parse_rankers``)."""

from __future__ import annotations

import pytest

from nrp.errors import ConfigError
from nrp.rankers.coerce import as_ranker
from nrp.rankers.fusion import FusionRanker
from nrp.rankers.guard import GuardRanker
from nrp.rankers.lexical import LexicalRanker
from nrp.rankers.passages import spec_passages
from nrp.rankers.registry import RankerSpec, make_ranker, parse_rankers, parse_spec

ROUND_TRIPS = [
    # text as written -> canonical text
    ("bm25", "bm25"),
    ("bm25:k1=0.9,b=0.50,k3=8", "bm25:b=0.5,k1=0.9"),
    ("bm25:k1=1.2", "bm25"),  # the default, dropped
    ("guard", "guard"),
    ("guard:ranker=dense", "guard"),  # the guarded ranker's default
    ("guard:content=0.06", "guard:content=0.06"),
    ("guard:ranker=bm25;k1=0.9,content=0.06", "guard:content=0.06,ranker=bm25:k1=0.9"),
    ("guard:ranker=bm25:k1=0.9;b=0.5", "guard:ranker=bm25:b=0.5;k1=0.9"),
    (
        "fuse:rankers=bm25+dense:query=narrative;passages=128,method=rrf",
        "fuse:method=rrf,rankers=bm25+dense:passages=128;query=narrative",
    ),
    ("fuse:rankers=bm25+dense;batch=8", "fuse:rankers=bm25+dense:batch=8"),
    ("guard:ranker=fuse;rankers=bm25+dense", "guard:ranker=fuse:rankers=bm25+dense"),
    ("run:/runs/bm25.run", "run:/runs/bm25.run"),
    ("pyterrier:key=mine", "pyterrier:key=mine"),
]


@pytest.mark.parametrize(("text", "canonical"), ROUND_TRIPS)
def test_a_spec_has_one_canonical_text_that_round_trips(text, canonical):
    spec = RankerSpec.parse(text)
    assert str(spec) == canonical
    assert RankerSpec.parse(canonical) == spec
    assert RankerSpec.parse(str(spec)) == spec
    assert RankerSpec.parse(spec) is spec  # a value is taken as it is


def test_parameters_are_typed_and_only_those_off_their_default_are_kept():
    spec = RankerSpec.parse("bm25:k1=0.9,b=0.50,k3=8.0,formula=nonnegative")
    assert spec.name == "bm25"
    assert spec.params == (("b", 0.5), ("k1", 0.9))
    assert spec.complete_params()["k3"] == 8.0 and spec.complete_params()["stats"] == "query"
    assert RankerSpec.parse("bm25:b=0.5,k1=0.9") == spec and hash(spec) == hash(
        RankerSpec.parse("bm25:b=0.5,k1=0.9")
    )


def test_nested_specs_are_values_in_their_parameters():
    guard = RankerSpec.parse("guard:ranker=bm25;k1=0.9,content=0.06")
    assert guard.parts() == (RankerSpec("bm25", (("k1", 0.9),)),)
    assert guard.given() == {"content": 0.06, "ranker": (RankerSpec("bm25", (("k1", 0.9),)),)}
    fuse = RankerSpec.parse("fuse:rankers=tfidf+dense;batch=8+bm25:b=0.5;k1=1.0")
    assert fuse.parts() == (
        RankerSpec("tfidf"),
        RankerSpec("dense", (("batch", 8),)),
        RankerSpec("bm25", (("b", 0.5), ("k1", 1.0))),
    )
    # the default of a nested parameter is specs too
    assert RankerSpec.parse("guard").complete_params()["ranker"] == (RankerSpec("dense"),)


def test_built_rankers_are_those_the_spec_names():
    guard = make_ranker("guard:ranker=bm25;k1=0.9,content=0.06")
    assert isinstance(guard, GuardRanker) and isinstance(guard.ranker, LexicalRanker)
    assert guard.ranker.params["k1"] == 0.9 and guard.params["content"] == 0.06
    # a ranker object's spec (its name in tables) is what it was before specs were values
    assert guard.spec() == "guard:content=0.06,ranker=bm25:k1=0.9"
    fuse = make_ranker(RankerSpec.parse("fuse:rankers=bm25+tfidf;k1=1.0,method=rrf"))
    assert isinstance(fuse, FusionRanker)
    assert fuse.spec() == "fuse:method=rrf,rankers=bm25+tfidf:k1=1.0"
    assert [r.spec() for r in fuse.rankers] == ["bm25", "tfidf:k1=1.0"]
    # the same text as before, and the parsed value, build the same ranker
    assert (
        make_ranker("bm25:k1=0.9").fingerprint()
        == as_ranker(RankerSpec.parse("bm25:k1=0.90")).fingerprint()
    )
    info, params = parse_spec("fuse:rankers=bm25+tfidf")
    assert info.name == "fuse" and params["rankers"] == (RankerSpec("bm25"), RankerSpec("tfidf"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus:x=1", "unknown ranker 'bogus' in spec 'bogus:x=1'"),
        ("bm25:k9=1", "ranker 'bm25' has no parameter 'k9'"),
        ("bm25:k1=x", "ranker 'bm25': parameter k1='x' is not a float"),
        ("bm25:k1", "ranker spec 'bm25:k1': 'k1' is not key=value"),
        ("guard:ranker=bm25;k9=1", "ranker 'bm25' has no parameter 'k9'"),
        ("guard:ranker=", "ranker 'guard': ranker= names no ranker"),
        ("fuse:rankers=bm25", "ranker 'fuse': rankers='bm25' must name at least two rankers"),
        ("fuse:rankers=bm25+", "ranker 'fuse': rankers='bm25+' must name at least two rankers"),
        ("run:", "a run file is named run:PATH"),
        ("pyterrier:mine", "a wrapped transformer is pyterrier:key=KEY"),
    ],
)
def test_a_wrong_spec_is_refused_when_parsed(text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("+", r"\+")):
        RankerSpec.parse(text)


def test_what_no_registry_entry_builds_is_refused_by_build():
    with pytest.raises(ConfigError, match=r"run:/r\.run is a run file; a run ranks only its own"):
        RankerSpec.parse("run:/r.run").build()
    assert RankerSpec.parse("run:/r.run").is_run and not RankerSpec.parse("bm25").is_run
    with pytest.raises(ConfigError, match="pyterrier:key=nothing: not a ranker the registry"):
        RankerSpec.parse("pyterrier:key=nothing").build()
    with pytest.raises(ConfigError, match="'fuse': rankers='' must name at least two rankers"):
        make_ranker("fuse")
    with pytest.raises(ConfigError, match="a guard inside a guard is not supported"):
        make_ranker("guard:ranker=guard")


def test_a_list_of_specs_splits_where_a_spec_ends():
    specs = parse_rankers("tfidf, bm25:k1=0.9,b=0.5 ,guard:ranker=bm25;k1=0.9,content=0.06,dense")
    assert [str(s) for s in specs] == [
        "tfidf",
        "bm25:b=0.5,k1=0.9",
        "guard:content=0.06,ranker=bm25:k1=0.9",
        "dense",
    ]
    assert parse_rankers(["bm25", RankerSpec("dph")]) == [RankerSpec("bm25"), RankerSpec("dph")]
    assert parse_rankers("") == []


def test_passages_are_counted_through_nested_specs():
    texts = ["one two three four five six seven"]  # 7 words: passages of 4, stride 2 -> 3
    assert spec_passages("dense:passages=4,stride=2", texts) == 3
    assert spec_passages("fuse:rankers=bm25+dense;passages=4;stride=2", texts) == 3
    assert spec_passages("guard:ranker=dense;passages=4;stride=2;aggregate=first", texts) == 0


@pytest.mark.parametrize(
    ("text", "at_bf16"),
    [
        ("dense", "dense:dtype=bf16"),
        ("guard", "guard:ranker=dense:dtype=bf16"),  # the default nested ranker too
        ("guard:content=0.06", "guard:content=0.06,ranker=dense:dtype=bf16"),
        ("guard:ranker=bm25", "guard:ranker=bm25"),  # no neural ranker: unchanged
        ("fuse:rankers=bm25+dense;batch=8", "fuse:rankers=bm25+dense:batch=8;dtype=bf16"),
        ("bm25:k1=0.9", "bm25:k1=0.9"),
        ("run:/tmp/a.run", "run:/tmp/a.run"),
    ],
)
def test_a_precision_reaches_every_neural_ranker_a_spec_names(text, at_bf16):
    spec = RankerSpec.parse(text).at_dtype("bf16")
    assert str(spec) == at_bf16
    assert RankerSpec.parse(str(spec)) == spec  # its text names it
    assert spec.at_dtype("fp32") == RankerSpec.parse(text)  # fp32 is the default: dropped


def test_a_precision_a_ranker_does_not_have_is_refused():
    with pytest.raises(ConfigError, match="dtype='fp8' must be one of fp32, fp16, bf16"):
        RankerSpec.parse("guard").at_dtype("fp8")
