"""Webis-ArgQuality-20 readers: real data counts, manifest bins, and every error path."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from nrp.collection.formats import argquality, read_format
from nrp.collection.formats.base import ReadReport
from nrp.collection.labels import LabelScale
from nrp.collection.records import Document, Judgment, Topic
from nrp.errors import ConfigError, InputError

ROOT = Path(__file__).resolve().parents[2]
FORMATS = {fmt.name: fmt for fmt in argquality.FORMATS}
HEADER = (
    "Topic ID,Argument ID,Discussion ID,Premise,Relevance,Is Argument?,Rhetorical Quality,"
    "Logical Quality,Dialectical Quality,Text Length,Stance,Combined Quality\n"
)


def read(name: str, path: Path, **options) -> tuple[list, ReadReport]:
    """Read as ingest does: the format's declared defaults, then the given options."""
    return read_format(name, path, **options)


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# --- real data ---------------------------------------------------------------------------------


def test_real_topics(shared_data):
    path = shared_data("argquality-20", "full", "webis-argquality20-topics.csv")
    topics, _ = read("argquality-topics", path)
    assert len(topics) == 20
    assert sorted(int(t.qid) for t in topics) == list(range(1, 21))
    first = topics[0]
    assert (first.qid, first.query) == ("1", "Should the Federal Minimum Wage Be Increased?")
    assert first.origin.line == 2
    # the file writes "Is a  Universal Basic Income beneficial?" with two spaces
    assert topics[1].query == "Is a Universal Basic Income beneficial?"
    short, _ = read("argquality-topics", path, query="short")
    assert [t.query for t in short[:2]] == ["Minimum Wage", "Universal Basic Income"]
    # both formulations and the category are topic fields, whichever is the query
    assert short[1].fields == first.fields | {
        "long": "Is a Universal Basic Income beneficial?",
        "short": "Universal Basic Income",
    }
    assert first.fields == {
        "long": "Should the Federal Minimum Wage Be Increased?",
        "short": "Minimum Wage",
        "category": "Economy & Taxes",
    }
    assert all(set(t.fields) == {"long", "short", "category"} for t in topics)


def test_real_arguments(shared_data):
    path = shared_data("argquality-20", "full", "webis-argquality20-arguments.csv")
    records, report = read("argquality-arguments", path)
    docs = [r for r in records if isinstance(r, Document)]
    judgments = [r for r in records if isinstance(r, Judgment)]
    assert len(docs) == 1610
    assert len({d.docno for d in docs}) == 1606  # four arguments judged under two topics
    assert len(judgments) == 5 * 1610
    assert Counter(j.dimension for j in judgments) == {
        name: 1610 for name in ("relevance", "rhetorical", "logical", "dialectical", "combined")
    }
    assert len({j.qid for j in judgments}) == 20
    assert docs[0].docno == "15859-4"
    assert docs[0].text.startswith("My opponent is using a huge logical fallacy;")
    assert docs[0].origin.line == 2
    assert judgments[0] == Judgment(
        "10", "15859-4", "relevance", "0.8044698538620362", docs[0].origin
    )
    assert report.counts["argquality rows judged not an argument (Is Argument? = False)"] == 339
    # a repeated docno is the same argument (same text) in two topics, never two pairs in one
    pairs = Counter((j.qid, j.docno) for j in judgments if j.dimension == "relevance")
    assert max(pairs.values()) == 1
    texts: dict[str, str] = {}
    for doc in docs:
        assert texts.setdefault(doc.docno, doc.text) == doc.text
    values = [float(j.grade) for j in judgments]
    assert min(values) == pytest.approx(-6.37882234841261)
    assert max(values) == pytest.approx(3.0300020559087573)


def test_real_non_arguments_dropped(shared_data):
    path = shared_data("argquality-20", "full", "webis-argquality20-arguments.csv")
    records, report = read("argquality-arguments", path, non_arguments="drop")
    assert sum(isinstance(r, Document) for r in records) == 1271
    assert sum(isinstance(r, Judgment) for r in records) == 5 * 1271
    assert report.counts["argquality non-arguments dropped (non_arguments: drop)"] == 339
    # what is left is the z-normalised population: the -4.0 floor is gone
    assert all(float(r.grade) != -4.0 for r in records if isinstance(r, Judgment))


def test_manifest_bins_give_the_declared_histograms(shared_data):
    """The bins of manifests/argquality-20.yaml applied to the real scores."""
    path = shared_data("argquality-20", "full", "webis-argquality20-arguments.csv")
    manifest = ROOT / "manifests" / "argquality-20.yaml"
    dimensions = yaml.safe_load(manifest.read_text(encoding="utf-8"))["dimensions"]
    scales = {
        name: LabelScale.from_manifest(name, spec, str(manifest))
        for name, spec in dimensions.items()
    }
    records, _ = read("argquality-arguments", path)
    histogram: dict[str, Counter] = {name: Counter() for name in scales}
    for judgment in records:
        if isinstance(judgment, Judgment):
            histogram[judgment.dimension][
                scales[judgment.dimension].grade_of(judgment.grade).gain
            ] += 1
    assert histogram["combined"] == {0: 551, 1: 350, 2: 533, 3: 176}
    assert histogram["relevance"] == {0: 572, 1: 350, 2: 457, 3: 231}
    assert histogram["rhetorical"] == {0: 526, 1: 405, 2: 498, 3: 181}
    assert histogram["logical"] == {0: 536, 1: 395, 2: 503, 3: 176}
    assert histogram["dialectical"] == {0: 526, 1: 395, 2: 510, 3: 179}


def test_manifest_builds(shared_data):
    """The whole manifest through the builder's reading and checks (labels, qids, duplicates)."""
    from nrp.collection.build import check_and_resolve, read_sources
    from nrp.collection.manifest import Manifest

    shared_data("argquality-20")
    manifest = Manifest.load(ROOT / "manifests" / "argquality-20.yaml")
    tables, counts, _ = check_and_resolve(manifest, read_sources(manifest))
    assert len(tables["topics"]) == 20
    assert len(tables["documents"]) == 1606
    assert len(tables["judgments"]) == 8050
    assert counts["identical duplicate documents merged"] == 4


# --- small files: options ----------------------------------------------------------------------

ROWS = (
    '1,3,100,"A premise,\nover two lines",0.5,True,1.2,-0.3,0.1,5,True,0.7\n'
    "1,4,100,Not an argument,-4.0,False,-4.0,-4.0,-4.0,3,False,-4.0\n"
)


def test_small_arguments_file(tmp_path):
    path = write(tmp_path, "args.csv", HEADER + ROWS)
    records, report = read("argquality-arguments", path)
    assert [type(r).__name__ for r in records] == ["Document"] + ["Judgment"] * 5 + ["Document"] + [
        "Judgment"
    ] * 5
    assert records[0] == Document("100-3", "A premise,\nover two lines", origin=records[0].origin)
    assert records[0].origin.line == 2
    assert records[6].origin.line == 4  # the quoted premise spans lines 2-3
    assert [(j.dimension, j.grade) for j in records[1:6]] == [
        ("relevance", "0.5"),
        ("rhetorical", "1.2"),
        ("logical", "-0.3"),
        ("dialectical", "0.1"),
        ("combined", "0.7"),
    ]
    assert report.counts["argquality rows judged not an argument (Is Argument? = False)"] == 1


def test_dimensions_option_chooses_columns(tmp_path):
    path = write(tmp_path, "args.csv", HEADER + ROWS)
    records, _ = read("argquality-arguments", path, dimensions={"Combined Quality": "quality"})
    assert [(j.dimension, j.grade) for j in records if isinstance(j, Judgment)] == [
        ("quality", "0.7"),
        ("quality", "-4.0"),
    ]


def test_drop_non_arguments(tmp_path):
    path = write(tmp_path, "args.csv", HEADER + ROWS)
    records, _ = read("argquality-arguments", path, non_arguments="drop")
    assert {r.docno for r in records} == {"100-3"}


def test_empty_premise_keeps_judgments(tmp_path):
    path = write(tmp_path, "args.csv", HEADER + '2,1,7,"  ",0.5,True,1,1,1,0,True,1\n')
    records, report = read("argquality-arguments", path)
    assert all(isinstance(r, Judgment) for r in records) and len(records) == 5
    assert report.counts["argquality arguments without premise text"] == 1


@pytest.mark.parametrize(
    ("name", "options", "match"),
    [
        ("argquality-topics", {"query": "medium"}, "option 'query'"),
        ("argquality-arguments", {"non_arguments": "maybe"}, "option 'non_arguments'"),
        ("argquality-arguments", {"dimensions": {}}, "option 'dimensions'"),
        (
            "argquality-arguments",
            {"dimensions": {"Relevance": "x", "Logical Quality": "x"}},
            "twice",
        ),
    ],
)
def test_bad_option_values(tmp_path, name, options, match):
    path = write(tmp_path, "x.csv", HEADER + ROWS)
    with pytest.raises(ConfigError, match=match):
        read(name, path, **options)


# --- small files: errors -----------------------------------------------------------------------


def test_empty_file(tmp_path):
    for name in FORMATS:
        path = write(tmp_path, f"{name}.csv", "\n  \n")
        with pytest.raises(InputError, match="file is empty") as err:
            read(name, path)
        assert str(err.value).startswith(f"{path}: ")


def test_header_only(tmp_path):
    topics = write(tmp_path, "topics.csv", "Topic ID,Category,Long Query,Short Query\n")
    with pytest.raises(InputError, match="no topics after the header"):
        read("argquality-topics", topics)
    args = write(tmp_path, "args.csv", HEADER)
    with pytest.raises(InputError, match="no arguments after the header"):
        read("argquality-arguments", args)


def test_non_utf8_names_the_line(tmp_path):
    path = write(
        tmp_path,
        "topics.csv",
        b"Topic ID,Category,Long Query,Short Query\n1,X,Good?,G\n2,X,Caf\xe9 open?,C\n",
    )
    with pytest.raises(InputError, match="not valid UTF-8") as err:
        read("argquality-topics", path)
    assert str(err.value).startswith(f"{path}:3: ")


def test_missing_query_column(tmp_path):
    path = write(tmp_path, "topics.csv", "Topic ID,Category,Short Query\n1,X,Good\n")
    with pytest.raises(
        InputError,
        match="missing column\\(s\\) 'Long Query' \\(found: Topic ID, Category, Short Query\\)",
    ) as err:
        read("argquality-topics", path)
    assert str(err.value).startswith(f"{path}:2: ")
    topics, _ = read("argquality-topics", path, query="short")
    # the formulations present are topic fields too; the absent long form is left out
    fields = {"short": "Good", "category": "X"}
    assert topics == [Topic("1", "Good", origin=topics[0].origin, fields=fields)]


def test_missing_score_column(tmp_path):
    header = HEADER.replace(",Dialectical Quality", "")
    row = "1,3,100,Text,0.5,True,1.2,-0.3,5,True,0.7\n"
    path = write(tmp_path, "args.csv", header + row)
    with pytest.raises(InputError, match="missing column\\(s\\) 'Dialectical Quality'") as err:
        read("argquality-arguments", path)
    assert str(err.value).startswith(f"{path}:2: ")


def test_non_numeric_score(tmp_path):
    bad = "1,5,100,Text,0.5,True,1.2,n/a,0.1,1,True,0.7\n"
    path = write(tmp_path, "args.csv", HEADER + ROWS + bad)
    with pytest.raises(InputError, match="column 'Logical Quality': 'n/a' is not a number") as err:
        read("argquality-arguments", path)
    assert str(err.value).startswith(f"{path}:5: ")


def test_infinite_or_empty_score(tmp_path):
    for value in ("inf", "", "nan"):
        row = f"1,5,100,Text,{value},True,1.2,0.3,0.1,1,True,0.7\n"
        path = write(tmp_path, "args.csv", HEADER + row)
        with pytest.raises(InputError, match="column 'Relevance'") as err:
            read("argquality-arguments", path)
        assert str(err.value).startswith(f"{path}:2: ")


def test_bad_is_argument_value(tmp_path):
    row = "1,5,100,Text,0.5,yes,1.2,0.3,0.1,1,True,0.7\n"
    path = write(tmp_path, "args.csv", HEADER + row)
    with pytest.raises(InputError, match="'Is Argument\\?': expected True or False") as err:
        read("argquality-arguments", path)
    assert str(err.value).startswith(f"{path}:2: ")


def test_missing_ids(tmp_path):
    row = "1,,100,Text,0.5,True,1.2,0.3,0.1,1,True,0.7\n"
    path = write(tmp_path, "args.csv", HEADER + row)
    with pytest.raises(InputError, match="Argument ID is missing") as err:
        read("argquality-arguments", path)
    assert str(err.value).startswith(f"{path}:2: ")


def test_duplicate_topic(tmp_path):
    path = write(
        tmp_path, "topics.csv", "Topic ID,Category,Long Query,Short Query\n1,X,A?,A\n1,X,B?,B\n"
    )
    with pytest.raises(InputError, match="Topic ID '1' given twice \\(first at line 2\\)") as err:
        read("argquality-topics", path)
    assert str(err.value).startswith(f"{path}:3: ")


def test_wrong_field_count(tmp_path):
    path = write(tmp_path, "args.csv", HEADER + "1,3,100,Text,0.5\n")
    with pytest.raises(InputError, match="expected 12 fields") as err:
        read("argquality-arguments", path)
    assert str(err.value).startswith(f"{path}:2: ")
