"""trec-topics-xml and trec-topics-sgml: CLEF eHealth 2021's real topic files, the XML variants
(attribute ids, <num>, <title>, <description>), classic TREC SGML, and every error path."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrp import Collection, ingest
from nrp.collection.formats import ReadReport, read_format
from nrp.collection.info import collection_info, render_info
from nrp.collection.records import Origin, Topic
from nrp.errors import InputError

CLEF_FIRST_QUERY = (
    "What are the most common chronic diseases? What effects do chronic diseases have for the "
    "society and the individual?"
)
CLEF_FIRST_NARRATIVE = (
    "I am a medical student and I read that chronic diseases are long lasting conditions with "
    "persistent effects which are becoming increasingly common. I want to know more about chronic "
    "diseases: the most common ones, and what effects they have for the society and the "
    "individual."
)


def read(format_name: str, path: Path, **options) -> tuple[list[Topic], ReadReport]:
    """Read as ingest does: the format's declared defaults, then the given options."""
    return read_format(format_name, path, **options)


def write(tmp_path: Path, text: str | bytes, name: str = "topics.xml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def error(format_name: str, path: Path, **options) -> str:
    with pytest.raises(InputError) as caught:
        read(format_name, path, **options)
    return str(caught.value)


# --- real data ----------------------------------------------------------------------------------


def test_clef_topics(shared_data):
    path = shared_data("clef-ehealth-2021", "topics", "topics.txt")
    topics, report = read("trec-topics-xml", path)
    assert len(topics) == 50
    assert len({topic.qid for topic in topics}) == 50
    assert topics[0] == Topic("1", CLEF_FIRST_QUERY, None, Origin(str(path), 2))
    assert topics[1].qid == "8"
    assert topics[1].query == "best apps daily activity exercise diabetes"
    assert not report.counts and not report.warnings


def test_clef_topics_with_narratives_from_the_second_file(shared_data):
    path = shared_data("clef-ehealth-2021", "topics", "topics.txt")
    topics, report = read("trec-topics-xml", path, narratives="topics_narrative.txt")
    assert len(topics) == 50
    assert all(topic.narrative for topic in topics)
    assert topics[0] == Topic("1", CLEF_FIRST_QUERY, CLEF_FIRST_NARRATIVE, Origin(str(path), 2))
    assert report.counts == {
        "bare '&' read as text": 2,
        "narrative-file topics not in the topic file": 5,
    }
    assert "topic(s) 133, 141, 146, 147, 150 are not in" in report.warnings[1]


def test_clef_manifest_has_query_and_narrative_fields(shared_data, tmp_path):
    shared_data("clef-ehealth-2021")
    root = Path(__file__).resolve().parents[2]
    ingest(root / "manifests" / "clef-ehealth-2021.yaml", indexes_dir=tmp_path)
    collection = Collection.load("clef-ehealth-2021", tmp_path)
    assert collection.query_fields == ["query", "narrative"]
    assert list(collection.topic_fields.columns) == ["qid"]  # nothing beyond the two
    narratives = collection.topic_texts("narrative")
    assert len(narratives) == 50 and narratives["1"] == CLEF_FIRST_NARRATIVE
    d_q = collection.candidates(query_field="narrative")
    assert d_q["query"].tolist() == d_q["qid"].map(narratives).tolist()
    assert len(d_q) == len(collection.candidates()) == 434  # 236 passages, shared by topics
    # nrp info tells each reader warning once: the warning, not also its count
    text = render_info(collection_info(collection))
    ingest_part = text[text.index("\ningest\n") :]
    assert "bare '&'" in ingest_part and "not in the topic file" not in ingest_part
    assert ingest_part.count("bare '&'") == 1 and ingest_part.count("are not in") == 1
    assert "\n  judgment lines read: 37,500\n" in ingest_part


def test_clef_narrative_file_alone_has_55_topics(shared_data):
    path = shared_data("clef-ehealth-2021", "topics", "topics_narrative.txt")
    topics, report = read("trec-topics-xml", path)
    assert len(topics) == 55
    topic_109 = next(topic for topic in topics if topic.qid == "109")
    assert topic_109.narrative.startswith("i’ve been diagnosed w ehlers danlos syndrome & POTS")
    assert report.warnings == [f"{path}: 2 bare '&' (not valid XML) read as text, line(s) 214"]


# --- XML variants -------------------------------------------------------------------------------


def test_xml_variants_attribute_id_num_title_and_description(tmp_path):
    path = write(
        tmp_path,
        '<?xml version="1.0"?>\n'
        "<topics>\n"
        '  <topic number="3" type="faceted">\n'
        "    <title>  heart\n attack  </title>\n"
        "    <description>What are the signs?</description>\n"
        "  </topic>\n"
        "  <topic>\n"
        "    <num>Number: 7</num>\n"
        "    <query>flu &amp; cold</query>\n"
        "    <narrative>A <b>bold</b></narrative>\n"
        "  </topic>\n"
        "</topics>\n",
    )
    topics, _ = read("trec-topics-xml", path)
    assert topics == [
        Topic("3", "heart attack", "What are the signs?", Origin(str(path), 3)),
        Topic("7", "flu & cold", "A bold", Origin(str(path), 8)),
    ]


def test_xml_other_elements_are_topic_fields(tmp_path):
    path = write(
        tmp_path,
        "<topics><topic><id>1</id><title>flu</title><description>What helps?</description>"
        "<narrative>n</narrative><fact-1>x</fact-1><Persona>a nurse</Persona><empty/>"
        "<description>second</description></topic></topics>",
    )
    topics, _ = read("trec-topics-xml", path)
    # named by tag, lower-cased; the first of a tag; not a name a spec cannot write (fact-1)
    assert topics[0].fields == {"description": "What helps?", "persona": "a nurse"}
    assert (topics[0].query, topics[0].narrative) == ("flu", "n")


def test_xml_query_and_narrative_element_options(tmp_path):
    path = write(
        tmp_path,
        "<topics><topic><id>1</id><query>q</query><question>Why?</question>"
        "<background>bg</background><narrative>n</narrative></topic></topics>",
    )
    topics, _ = read(
        "trec-topics-xml", path, query_element="question", narrative_element="background"
    )
    assert topics == [Topic("1", "Why?", "bg", Origin(str(path), 1))]


def test_xml_narratives_file_must_agree_on_queries(tmp_path):
    main = write(tmp_path, "<topics>\n<topic><id>1</id><query>a</query></topic>\n</topics>\n")
    write(
        tmp_path,
        "<topics>\n\n<topic><id>1</id><query>b</query><narrative>n</narrative></topic>\n</topics>",
        name="narr.xml",
    )
    message = error("trec-topics-xml", main, narratives="narr.xml")
    assert (
        message == f"{tmp_path / 'narr.xml'}:3: topic '1': query 'b' differs from 'a' at {main}:2"
    )


def test_xml_narratives_file_without_a_topic_warns(tmp_path):
    main = write(
        tmp_path,
        "<topics>\n<topic><id>1</id><query>a</query></topic>\n"
        "<topic><id>2</id><query>b</query></topic>\n</topics>\n",
    )
    write(
        tmp_path,
        "<topics><topic><id>1</id><query>a</query><narrative>n</narrative></topic></topics>",
        name="narr.xml",
    )
    topics, report = read("trec-topics-xml", main, narratives="narr.xml")
    assert [(topic.qid, topic.narrative) for topic in topics] == [("1", "n"), ("2", None)]
    assert report.counts == {"topics without narrative": 1}


# --- XML errors ---------------------------------------------------------------------------------


def test_xml_topic_without_id(tmp_path):
    path = write(
        tmp_path,
        "<topics>\n  <topic><id>1</id><query>a</query></topic>\n"
        "  <topic>\n    <query>b</query>\n  </topic>\n</topics>\n",
    )
    assert error("trec-topics-xml", path) == (
        f"{path}:3: topic has no id (no <id>, <num>, <number>, <qid>, <topic_id> or id attribute)"
    )


def test_xml_empty_query(tmp_path):
    path = write(
        tmp_path, "<topics>\n<topic>\n<id>4</id>\n<query>  \n</query>\n</topic>\n</topics>"
    )
    assert error("trec-topics-xml", path) == f"{path}:4: topic '4': <query> is empty"


def test_xml_topic_without_query(tmp_path):
    path = write(tmp_path, "<topics>\n<topic>\n<id>4</id>\n</topic>\n</topics>")
    assert error("trec-topics-xml", path) == (
        f"{path}:2: topic '4' has no query (<query> or <title>)"
    )


def test_xml_duplicate_topic_id_names_both_lines(tmp_path):
    path = write(
        tmp_path,
        "<topics>\n<topic><id>5</id><query>a</query></topic>\n\n"
        "<topic><id> 5 </id><query>b</query></topic>\n</topics>\n",
    )
    assert error("trec-topics-xml", path) == (
        f"{path}:4: topic id '5' appears twice: first at {path}:2"
    )


def test_xml_malformed(tmp_path):
    path = write(tmp_path, "<topics>\n<topic><id>1</id>\n<query>a</qury>\n</topic>\n</topics>\n")
    assert error("trec-topics-xml", path) == f"{path}:3: malformed XML: mismatched tag"


def test_xml_without_topics(tmp_path):
    path = write(tmp_path, "<topics>\n</topics>\n")
    assert error("trec-topics-xml", path) == f"{path}:1: no <topic> element under <topics>"


@pytest.mark.parametrize("format_name", ["trec-topics-xml", "trec-topics-sgml"])
def test_empty_file(tmp_path, format_name):
    path = write(tmp_path, " \n\n")
    assert error(format_name, path) == f"{path}: file is empty"


@pytest.mark.parametrize("format_name", ["trec-topics-xml", "trec-topics-sgml"])
def test_non_utf8_bytes(tmp_path, format_name):
    path = write(tmp_path, b"<topics>\n<topic><id>1</id>\n<query>caf\xe9</query>\n</topic>\n")
    assert error(format_name, path) == (f"{path}:3: not valid UTF-8: byte 0xe9 cannot be decoded")


# --- SGML ---------------------------------------------------------------------------------------

TREC_SGML = """\

<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international
criminal activity.

<narr> Narrative:
A relevant document must as a minimum identify the organization.
</top>

<top>
<head> Tipster Topic Description
<num> Number:  051 </num>
<dom> Domain:  International Economics
<title> Topic:  Airbus Subsidies </title>
<desc> Description:
Document will discuss government assistance to Airbus.
</top>
"""


def test_sgml_classic_trec_topics(tmp_path):
    path = write(tmp_path, TREC_SGML, name="topics.301-350")
    topics, _ = read("trec-topics-sgml", path)
    assert topics == [
        Topic(
            "301",
            "International Organized Crime",
            "A relevant document must as a minimum identify the organization.",
            Origin(str(path), 2),
            # the other text elements are topic fields (bm25:query=desc)
            {"desc": "Identify organizations that participate in international criminal activity."},
        ),
        Topic(
            "051",
            "Airbus Subsidies",
            "Document will discuss government assistance to Airbus.",  # no <narr>: <desc>
            Origin(str(path), 14),
            {"head": "Tipster Topic Description", "dom": "International Economics"},
        ),
    ]


def test_sgml_description_as_query(tmp_path):
    path = write(tmp_path, TREC_SGML, name="topics.301-350")
    topics, _ = read("trec-topics-sgml", path, query_element="desc", narrative_element="narr")
    assert topics[0].query == (
        "Identify organizations that participate in international criminal activity."
    )
    assert topics[1].narrative is None


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("<top>\n<title> t\n</top>\n", 1, "topic has no <num>"),
        (
            "<top>\n<num> Number: 1\n<title>\n\n<desc> d\n</top>\n",
            3,
            "topic '1': its query is empty",
        ),
        ("<top>\n<num> Number: 1\n<desc> d\n</top>\n", 1, "topic '1' has no query (<title>)"),
        ("<top>\n<num> 1\n<title> a\n", 1, "<top> is not closed by </top>"),
        ("<top>\n<num> 1\n<top>\n", 3, "<top> at line 1 is not closed before this <top>"),
        ("<num> 1\n", 1, "<num> outside <top>...</top>"),
        ("<top><num> 1 <title> a </top>\nstray\n", 2, "text outside <top>...</top>: 'stray'"),
        ("<top><num> 1 <title> a </top>\n</top>\n", 2, "</top> without a <top>"),
        (
            "<top>\n<num> 1\n<title> a\n<title> b\n</top>\n",
            4,
            "<title> appears twice in one topic: first at line 3",
        ),
    ],
)
def test_sgml_errors(tmp_path, text, line, problem):
    path = write(tmp_path, text, name="topics.sgml")
    assert error("trec-topics-sgml", path) == f"{path}:{line}: {problem}"


def test_sgml_duplicate_topic_id_names_both_lines(tmp_path):
    path = write(tmp_path, "<top><num> 9 <title> a </top>\n<top>\n<num> 9\n<title> b\n</top>\n")
    assert error("trec-topics-sgml", path) == (
        f"{path}:2: topic id '9' appears twice: first at {path}:1"
    )


def test_xml_file_read_as_sgml_has_no_top(tmp_path):
    path = write(tmp_path, "<topics><topic><id>1</id></topic></topics>\n", name="t.sgml")
    assert error("trec-topics-sgml", path) == f"{path}:1: <topics> outside <top>...</top>"
