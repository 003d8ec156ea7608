"""trec-qrels and qrels-wide: CLEF eHealth 2021's three qrels files and its side-by-side file,
and every error path."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from nrp.collection.formats import ReadReport, read_format
from nrp.collection.records import Judgment, Origin
from nrp.errors import ConfigError, InputError

CLEF_DIMENSION_FILES = {
    "relevance": "qrels.txt",
    "readability": "qreadability.txt",
    "credibility": "qcredibility.txt",
}


def read(format_name: str, path: Path, **options) -> tuple[list[Judgment], ReadReport]:
    """Read as ingest does: the format's declared defaults, then the given options."""
    return read_format(format_name, path, **options)


def write(tmp_path: Path, text: str | bytes, name: str = "qrels.txt") -> Path:
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


@pytest.mark.parametrize(("dimension", "name"), CLEF_DIMENSION_FILES.items())
def test_clef_qrels(shared_data, dimension, name):
    path = shared_data("clef-ehealth-2021", "assessments", name)
    judgments, _ = read("trec-qrels", path, dimension=dimension)
    assert len(judgments) == 12_500
    assert len({(j.qid, j.docno) for j in judgments}) == 12_500
    assert len({j.qid for j in judgments}) == 50
    assert len({j.docno for j in judgments}) == 10_182
    assert judgments[0] == Judgment(
        "1", "a6195d99-f7d7-43ec-907c-435cb7a62ee7", dimension, "2", Origin(str(path), 1)
    )
    assert judgments[-1].origin == Origin(str(path), 12_500)


def test_clef_credibility_last_line_without_newline_and_grade_3(shared_data):
    path = shared_data("clef-ehealth-2021", "assessments", "qcredibility.txt")
    assert path.read_bytes().count(b"\n") == 12_499  # the last judgment has no line end
    judgments, _ = read("trec-qrels", path, dimension="credibility")
    assert judgments[-1].grade == "0"
    assert Counter(j.grade for j in judgments) == {"2": 4630, "1": 4550, "0": 2720, "3": 600}


def test_clef_side_by_side_file_is_a_subset_that_agrees(shared_data):
    path = shared_data("clef-ehealth-2021", "assessments", "qrels_cred_read.txt")
    dimensions = {"rel": "relevance", "cred": "credibility", "read": "readability"}
    wide, _ = read("qrels-wide", path, dimensions=dimensions)
    assert len(wide) == 3 * 8_902
    assert wide[0] == Judgment(
        "1", "a6195d99-f7d7-43ec-907c-435cb7a62ee7", "relevance", "2", Origin(str(path), 2)
    )
    single = {}
    for dimension, name in CLEF_DIMENSION_FILES.items():
        qrels = shared_data("clef-ehealth-2021", "assessments", name)
        for j in read("trec-qrels", qrels, dimension=dimension)[0]:
            single[(j.dimension, j.qid, j.docno)] = j.grade
    assert all(single[(j.dimension, j.qid, j.docno)] == j.grade for j in wide)


# --- trec-qrels ---------------------------------------------------------------------------------


def test_blank_lines_skipped_and_no_final_newline(tmp_path):
    path = write(tmp_path, "1 0 d1 2\n\n  \n2\t0\td2  1")
    judgments, _ = read("trec-qrels", path, dimension="relevance")
    assert judgments == [
        Judgment("1", "d1", "relevance", "2", Origin(str(path), 1)),
        Judgment("2", "d2", "relevance", "1", Origin(str(path), 4)),
    ]


@pytest.mark.parametrize(
    ("bad_line", "found"), [("1 0 d3", 3), ("1 0 d3 2 extra", 5), ("1 Q0 d3 2 0.5 run", 6)]
)
def test_malformed_qrels_line(tmp_path, bad_line, found):
    path = write(tmp_path, f"1 0 d1 2\n1 0 d2 0\n\n{bad_line}\n")
    assert error("trec-qrels", path, dimension="relevance") == (
        f"{path}:4: expected 4 fields (qid iteration docno grade), found {found}"
    )


@pytest.mark.parametrize("format_name", ["trec-qrels", "qrels-wide"])
def test_empty_file(tmp_path, format_name):
    path = write(tmp_path, "\n \n")
    options = {"dimension": "relevance"} if format_name == "trec-qrels" else {"dimensions": ["a"]}
    assert error(format_name, path, **options) == f"{path}: file is empty"


@pytest.mark.parametrize("format_name", ["trec-qrels", "qrels-wide"])
def test_non_utf8_bytes(tmp_path, format_name):
    path = write(tmp_path, b"1 0 d1 2\n1 0 d\xff 2\n")
    options = {"dimension": "relevance"} if format_name == "trec-qrels" else {"dimensions": ["a"]}
    assert error(format_name, path, **options) == (
        f"{path}:2: not valid UTF-8: byte 0xff cannot be decoded"
    )


# --- qrels-wide ---------------------------------------------------------------------------------


def test_wide_header_detected_with_a_list(tmp_path):
    path = write(tmp_path, "qid docno rel cred\n1 d1 2 3\n")
    judgments, _ = read("qrels-wide", path, dimensions=["relevance", "credibility"])
    assert judgments == [
        Judgment("1", "d1", "relevance", "2", Origin(str(path), 2)),
        Judgment("1", "d1", "credibility", "3", Origin(str(path), 2)),
    ]


def test_wide_without_header(tmp_path):
    path = write(tmp_path, "1 d1 2 0\n\n2 d2 1 1\n")
    judgments, _ = read("qrels-wide", path, dimensions=["relevance", "credibility"])
    assert [(j.qid, j.dimension, j.grade, j.origin.line) for j in judgments] == [
        ("1", "relevance", "2", 1),
        ("1", "credibility", "0", 1),
        ("2", "relevance", "1", 3),
        ("2", "credibility", "1", 3),
    ]


def test_wide_header_named_like_dimensions_and_forced_header(tmp_path):
    path = write(tmp_path, "topic doc relevance\n1 d1 2\n")
    assert len(read("qrels-wide", path, dimensions=["relevance"])[0]) == 1
    path = write(tmp_path, "q d r\n1 d1 2\n")
    judgments, _ = read("qrels-wide", path, dimensions=["relevance"], header=True)
    assert judgments == [Judgment("1", "d1", "relevance", "2", Origin(str(path), 2))]


def test_wide_mapping_picks_columns_and_reports_the_rest(tmp_path):
    path = write(tmp_path, "qid docno rel cred read\n1 d1 2 3 1\n")
    judgments, report = read("qrels-wide", path, dimensions={"read": "readability"})
    assert judgments == [Judgment("1", "d1", "readability", "1", Origin(str(path), 2))]
    assert report.counts == {"grade columns ignored": 2}


def test_wide_wrong_field_count(tmp_path):
    path = write(tmp_path, "qid docno rel cred\n1 d1 2 3\n1 d2 2\n")
    assert error("qrels-wide", path, dimensions=["relevance", "credibility"]) == (
        f"{path}:3: expected 4 fields (qid docno rel cred), found 3"
    )


def test_wide_wrong_field_count_without_header(tmp_path):
    path = write(tmp_path, "1 d1 2 3\n1 d2 2 3 4\n")
    assert error("qrels-wide", path, dimensions=["relevance", "credibility"]) == (
        f"{path}:2: expected 4 fields (qid docno relevance credibility), found 5"
    )


def test_wide_header_with_other_number_of_grade_columns(tmp_path):
    path = write(tmp_path, "\nqid docno rel cred read\n1 d1 2 3 1\n")
    assert error("qrels-wide", path, dimensions=["relevance", "credibility"]) == (
        f"{path}:2: header has 3 grade column(s) (rel cred read) but 'dimensions' names 2"
    )


def test_wide_mapping_needs_a_header(tmp_path):
    path = write(tmp_path, "1 d1 2\n")
    assert error("qrels-wide", path, dimensions={"rel": "relevance"}) == (
        f"{path}:1: 'dimensions' maps header columns, but the file has no header line"
    )


def test_wide_mapping_column_missing_from_header(tmp_path):
    path = write(tmp_path, "qid docno rel\n1 d1 2\n")
    assert error("qrels-wide", path, dimensions={"rel": "relevance", "cred": "credibility"}) == (
        f"{path}:1: missing column(s) 'cred' (found: rel); grade columns follow qid, docno"
    )


def test_wide_header_only(tmp_path):
    path = write(tmp_path, "qid docno rel\n")
    assert error("qrels-wide", path, dimensions=["relevance"]) == (
        f"{path}: no judgments in the file (only a header line)"
    )


def test_wide_needs_a_dimension(tmp_path):
    path = write(tmp_path, "1 d1\n")
    with pytest.raises(ConfigError, match="must name at least one dimension"):
        read("qrels-wide", path, dimensions=[])


def test_clef_manifest_builds(shared_data):
    """manifests/clef-ehealth-2021.yaml through the builder's reading and checks."""
    from nrp.collection.build import check_and_resolve, read_sources
    from nrp.collection.manifest import Manifest

    shared_data("clef-ehealth-2021")
    manifest = Manifest.load(
        Path(__file__).resolve().parents[2] / "manifests/clef-ehealth-2021.yaml"
    )
    tables, counts, warnings = check_and_resolve(manifest, read_sources(manifest))
    assert len(tables["topics"]) == 50
    assert all(narrative for _, _, narrative in tables["topics"])
    assert len(tables["documents"]) == 236
    assert Counter(row[0] for row in tables["judgments"]) == {
        "relevance": 12_500,
        "readability": 12_500,
        "credibility": 12_500,
    }
    assert len({row[2] for row in tables["judgments"]}) == 10_182
    credibility_gains = Counter(row[5] for row in tables["judgments"] if row[0] == "credibility")
    assert credibility_gains[None] == 600  # label 3: could not judge, excluded
    assert counts["narrative-file topics not in the topic file"] == 5
    assert len(warnings) == 2
