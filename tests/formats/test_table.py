"""table: CSV/TSV/JSONL holding topics, documents, judgments (long and wide) or references;
CLEF eHealth 2021's passage file, and every error path."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrp.collection.formats import ReadReport, read_format
from nrp.collection.records import Document, Judgment, Origin, Record, Reference, Topic
from nrp.errors import ConfigError, InputError


def read(path: Path, **options) -> tuple[list[Record], ReadReport]:
    """Read as ingest does: the format's declared defaults, then the given options."""
    return read_format("table", path, **options)


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def error(path: Path, **options) -> str:
    with pytest.raises(InputError) as caught:
        read(path, **options)
    return str(caught.value)


# --- real data ----------------------------------------------------------------------------------


def test_clef_passages(shared_data):
    path = shared_data("clef-ehealth-2021", "passages", "doc_passages_236.tsv")
    documents, report = read(path, holds="documents")
    assert len(documents) == 236
    assert len({doc.docno for doc in documents}) == 236
    first = documents[0]
    assert first.docno == "00f5466a-db61-4143-8c66-a47e56cd1461"
    assert first.text.startswith("CORONAVIRUS: DELAYS FOR ROUTINE SURGERIES, VISITOR RESTRICTIONS")
    assert (first.url, first.title, first.origin) == (None, None, Origin(str(path), 2))
    assert documents[-1].origin == Origin(str(path), 237)
    assert max(len(doc.text.split()) for doc in documents) == 512  # cut to at most 512 words
    assert not report.counts


def test_clef_passage_judgments_wide(shared_data):
    path = shared_data("clef-ehealth-2021", "passages", "doc_passages_250pairs_judgments.tsv")
    judgments, _ = read(
        path, holds="judgments", dimensions=["relevance", "readability", "credibility"]
    )
    assert len(judgments) == 750
    assert judgments[:3] == [
        Judgment("1", "e6ab23e9-9d83-4c75-92e7-445db55795f4", dimension, "2", Origin(str(path), 2))
        for dimension in ("relevance", "readability", "credibility")
    ]


# --- each kind of record ------------------------------------------------------------------------


def test_topics_csv_with_renamed_columns_and_quoted_newlines(tmp_path):
    path = write(
        tmp_path,
        "topics.csv",
        'Topic ID,Question,extra\n1,"What is\nflu?",x\n2, cold ,y\n',
    )
    topics, _ = read(path, holds="topics", columns={"qid": "Topic ID", "query": "Question"})
    assert topics == [
        Topic("1", "What is\nflu?", None, Origin(str(path), 2)),
        Topic("2", "cold", None, Origin(str(path), 4)),
    ]


def test_topic_fields_from_named_columns(tmp_path):
    path = write(
        tmp_path,
        "topics.tsv",
        "qid\tquery\tNIST paraphrase\tsummary\n1\tflu cure?\tHow is flu treated?\t\n2\tcold\t\t\n",
    )
    topics, _ = read(
        path, holds="topics", fields={"paraphrase": "NIST paraphrase", "summary": "summary"}
    )
    assert topics == [
        Topic("1", "flu cure?", None, Origin(str(path), 2), {"paraphrase": "How is flu treated?"}),
        Topic("2", "cold", None, Origin(str(path), 3)),  # empty cells: no field
    ]
    listed, _ = read(path, holds="topics", fields=["summary"])
    assert [t.fields for t in listed] == [None, None]
    assert error(path, holds="topics", fields=["paraphrase"]).startswith(
        f"{path}:1: missing column(s) 'paraphrase'"
    )
    with pytest.raises(ConfigError, match="'fields' only apply to topics"):
        read(path, holds="documents", fields=["summary"])


def test_documents_tsv_with_url_and_title(tmp_path):
    path = write(tmp_path, "docs.tsv", "docno\ttext\turl\ttitle\nd1\tsome text\thttp://a\t\n")
    documents, _ = read(path, holds="documents")
    assert documents == [Document("d1", "some text", "http://a", None, Origin(str(path), 2))]


def test_references_jsonl(tmp_path):
    path = write(
        tmp_path,
        "refs.jsonl",
        '{"qid": 7, "text": "answer one", "ref_id": "a"}\n\n{"qid": "7", "text": "answer two"}\n',
    )
    references, _ = read(path, holds="references")
    assert references == [
        Reference("7", "answer one", "a", Origin(str(path), 1)),
        Reference("7", "answer two", None, Origin(str(path), 3)),
    ]


def test_judgments_long_form(tmp_path):
    path = write(tmp_path, "rel.csv", "qid,docno,score\n1,d1,2\n1,d2,-0.5\n")
    judgments, _ = read(path, holds="judgments", dimension="quality", columns={"grade": "score"})
    assert judgments == [
        Judgment("1", "d1", "quality", "2", Origin(str(path), 2)),
        Judgment("1", "d2", "quality", "-0.5", Origin(str(path), 3)),
    ]


def test_judgments_wide_form_mapping_skips_empty_cells(tmp_path):
    path = write(tmp_path, "wide.tsv", "qid\tdocno\trel\tcred\n1\td1\t2\t\n1\td2\t0\t3\n")
    judgments, report = read(
        path, holds="judgments", dimensions={"rel": "relevance", "cred": "credibility"}
    )
    assert judgments == [
        Judgment("1", "d1", "relevance", "2", Origin(str(path), 2)),
        Judgment("1", "d2", "relevance", "0", Origin(str(path), 3)),
        Judgment("1", "d2", "credibility", "3", Origin(str(path), 3)),
    ]
    assert report.counts == {"empty credibility grades skipped": 1}


def test_fieldnames_for_a_file_without_header_and_delimiter_option(tmp_path):
    path = write(tmp_path, "topics.txt", "1;flu\n2;cold\n")
    topics, _ = read(path, holds="topics", fieldnames=["qid", "query"], delimiter=";")
    assert [(topic.qid, topic.query, topic.origin.line) for topic in topics] == [
        ("1", "flu", 1),
        ("2", "cold", 2),
    ]


# --- errors -------------------------------------------------------------------------------------


def test_missing_required_column_names_the_header_line(tmp_path):
    path = write(tmp_path, "docs.tsv", "\ndocno\tbody\nd1\ttext\n")
    assert error(path, holds="documents") == (
        f"{path}:2: missing column(s) 'text' (found: docno, body)"
    )


def test_missing_column_asked_for_by_name(tmp_path):
    path = write(tmp_path, "docs.csv", "docno,text\nd1,t\n")
    assert error(path, holds="documents", columns={"url": "link"}) == (
        f"{path}:1: missing column(s) 'link' (found: docno, text)"
    )


def test_missing_key_in_jsonl_names_its_line(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"qid": "1", "query": "a"}\n{"qid": "2"}\n')
    assert error(path, holds="topics") == f"{path}:2: missing column(s) 'query' (found: qid)"


@pytest.mark.parametrize(
    ("holds", "text", "problem"),
    [
        ("topics", "qid,query\n1,a\n ,b\n", "qid (column 'qid') is empty"),
        ("topics", "qid,query\n1,a\n2,  \n", "query (column 'query') is empty"),
        ("documents", "docno,text\nd1,a\nd2,\n", "text (column 'text') is empty"),
        ("references", "qid,text\n1,a\n1,\n", "text (column 'text') is empty"),
    ],
)
def test_empty_id_or_text(tmp_path, holds, text, problem):
    path = write(tmp_path, "t.csv", text)
    assert error(path, holds=holds) == f"{path}:3: {problem}"


def test_empty_grade_in_long_form(tmp_path):
    path = write(tmp_path, "q.csv", "qid,docno,grade\n1,d1,\n")
    assert error(path, holds="judgments", dimension="relevance") == (
        f"{path}:2: grade (column 'grade') is empty"
    )


def test_duplicate_topic_id_names_both_lines(tmp_path):
    path = write(tmp_path, "t.tsv", "qid\tquery\n1\ta\n2\tb\n1\tc\n")
    assert error(path, holds="topics") == f"{path}:4: qid '1' appears twice: first at {path}:2"


def test_wrong_field_count(tmp_path):
    path = write(tmp_path, "t.tsv", "qid\tquery\n1\ta\n2\tb\textra\n")
    assert error(path, holds="topics") == f"{path}:3: expected 2 fields (qid, query), found 3"


def test_empty_file(tmp_path):
    path = write(tmp_path, "t.csv", "\n")
    assert error(path, holds="topics") == f"{path}: file is empty"


def test_header_only(tmp_path):
    path = write(tmp_path, "t.csv", "qid,query\n")
    assert error(path, holds="topics") == f"{path}: no topics in the file (only a header row)"


def test_non_utf8_bytes(tmp_path):
    path = write(tmp_path, "t.tsv", b"qid\tquery\n1\ta\n2\tna\xefve\n")
    assert error(path, holds="topics") == f"{path}:3: not valid UTF-8: byte 0xef cannot be decoded"


def test_invalid_json_line(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"qid": "1", "query": "a"}\n{"qid": \n')
    assert error(path, holds="topics") == f"{path}:2: invalid JSON: Expecting value at column 9"


def test_unknown_suffix_needs_delimiter(tmp_path):
    path = write(tmp_path, "t.dat", "qid,query\n1,a\n")
    assert error(path, holds="topics") == (
        f"{path}: cannot tell the delimiter of a '.dat' file; set 'delimiter'"
    )


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"holds": "answers"}, "option 'holds' must be one of"),
        ({"holds": "topics", "columns": {"text": "t"}}, "'columns' names text"),
        ({"holds": "judgments"}, "exactly one of 'dimension'"),
        ({"holds": "judgments", "dimension": "a", "dimensions": ["b"]}, "exactly one of"),
        ({"holds": "topics", "dimension": "a"}, "only apply to judgments"),
        ({"holds": "topics", "fieldnames": ["qid", "text"]}, "'fieldnames' lacks column(s) query"),
    ],
)
def test_option_errors(tmp_path, options, problem):
    path = write(tmp_path, "t.tsv", "1\ta\n")
    with pytest.raises(ConfigError) as caught:
        read(path, **options)
    assert problem in str(caught.value)
