"""The strict reading helpers every format uses."""

import pytest

from nrp.collection.reading import iter_lines, iter_table, parse_xml, read_text
from nrp.errors import InputError


def test_lines_split_on_newline_only(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("one\u2028still one\r\ntwo\fstill two\nthree", encoding="utf-8")
    assert list(iter_lines(path)) == [
        (1, "one\u2028still one"),
        (2, "two\fstill two"),
        (3, "three"),
    ]


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "a.tsv"
    path.write_bytes(b"qid\tquery\nq1\tok\nq2\tcaf\xe9\n")
    with pytest.raises(InputError, match=r"a.tsv:3: not valid UTF-8: byte 0xe9"):
        read_text(path)


@pytest.mark.parametrize("content", [b"", b"  \n\n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "e.csv"
    path.write_bytes(content)
    with pytest.raises(InputError, match=r"e.csv: file is empty"):
        list(iter_table(path))


def test_table_rows_keep_the_line_a_multiline_record_starts_on(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('id,text\na,"first\nsecond"\nb,third\nc\n')
    rows = iter_table(path)
    assert next(rows) == (2, {"id": "a", "text": "first\nsecond"})
    assert next(rows) == (4, {"id": "b", "text": "third"})
    with pytest.raises(InputError, match=r"t.csv:5: expected 2 fields \(id, text\), found 1"):
        next(rows)


def test_xml_lines_and_mixed_content_order(tmp_path):
    path = tmp_path / "x.xml"
    path.write_text("<root>\n  <p>A <b>bold</b> need.</p>\n</root>\n")
    root = parse_xml(path)
    p = root.find("p")
    assert p.line == 2
    assert p.itertext() == "A bold need."
    path.write_text("<root>\n<p>unclosed\n</root>\n")
    with pytest.raises(InputError, match=r"x.xml:3: malformed XML: mismatched tag"):
        parse_xml(path)
