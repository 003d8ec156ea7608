"""The ``warc`` format on WARC files built here the way CommonCrawl writes them: one gzip member
per record (warcinfo, then request/response/metadata per page), members concatenated."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from nrp.collection.formats import ReadReport, get_format
from nrp.collection.records import Document, Origin
from nrp.errors import InputError

WARC = get_format("warc")
DEFAULTS = {"docno_header": "WARC-Record-ID", "min_length": 50}

NAV = "Home About us Contact"
FOOTER = "Copyright 2021 Example Health. All rights reserved."
MS = (
    "Fatigue is one of the most common symptoms of multiple sclerosis and affects about "
    "80 percent of people with the disease."
)
BP = "Ibuprofen and other NSAIDs can raise blood pressure, especially in people with hypertension."
CAFE = "Le café et la crème brûlée sont délicieux, même pour un naïf qui préfère le thé glacé."


def page(title: str, main: str, charset: str | None = None) -> str:
    """A web page with navigation and footer around one main paragraph."""
    meta = f'<meta charset="{charset}">' if charset else ""
    return (
        f"<!DOCTYPE html><html><head>{meta}<title>{title}</title></head><body>"
        '<header><nav><ul><li><a href="/">Home</a></li><li><a href="/about">About us</a></li>'
        '<li><a href="/contact">Contact</a></li></ul></nav></header>'
        f"<main><article><h1>{title}</h1><p>{main}</p></article></main>"
        f'<footer><p>{FOOTER}</p><a href="/privacy">Privacy policy</a></footer>'
        "</body></html>"
    )


def record(warc_type: str, block: bytes, uri: str | None, record_id: str, **headers: str) -> bytes:
    """One WARC/1.0 record (headers, block, the two CRLFs that end it)."""
    lines = ["WARC/1.0", f"WARC-Type: {warc_type}", "WARC-Date: 2021-01-16T03:41:45Z"]
    lines.append(f"WARC-Record-ID: <urn:uuid:{record_id}>")
    if uri is not None:
        lines.append(f"WARC-Target-URI: {uri}")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    content_type = {
        "response": "application/http; msgtype=response",
        "request": "application/http; msgtype=request",
        "warcinfo": "application/warc-fields",
        "metadata": "application/warc-fields",
    }[warc_type]
    lines += [f"Content-Type: {content_type}", f"Content-Length: {len(block)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + block + b"\r\n\r\n"


def response(
    uri: str,
    record_id: str,
    body: bytes,
    content_type: str = "text/html; charset=UTF-8",
    status: str = "200 OK",
    **headers: str,
) -> bytes:
    http = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return record("response", http + body, uri, record_id, **headers)


def request(uri: str, record_id: str) -> bytes:
    host = uri.split("/")[2]
    block = f"GET / HTTP/1.1\r\nHost: {host}\r\nUser-Agent: CCBot/2.0\r\n\r\n".encode()
    return record("request", block, uri, record_id)


def write_warc(path: Path, records: list[bytes], compress: bool = True) -> list[tuple[int, int]]:
    """Write records (each its own gzip member when compressed); (offset, length) of each."""
    parts = [gzip.compress(r, mtime=0) if compress else r for r in records]
    spans, offset = [], 0
    for part in parts:
        spans.append((offset, len(part)))
        offset += len(part)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(parts))
    return spans


def read(path: Path, **options) -> tuple[list[Document], ReadReport]:
    report = ReadReport()
    return list(WARC.read(path, {**DEFAULTS, **options}, report)), report


def crawl(path: Path, compress: bool = True) -> list[tuple[int, int]]:
    """A small crawl: two HTML pages, a short page, a latin-1 page, a PDF, a 404, a redirect."""
    warcinfo = record("warcinfo", b"software: test\r\nformat: WARC 1.0\r\n", None, "00-info")
    return write_warc(
        path,
        [
            warcinfo,
            request("https://ms.example/fatigue", "01-req"),
            response(
                "https://ms.example/fatigue",
                "11111111-1111-4111-8111-111111111111",
                page("Fatigue in MS", MS).encode(),
                WARC_TREC_ID="clueweb-0001",
            ),
            record("metadata", b"fetchTimeMs: 12\r\n", "https://ms.example/fatigue", "01-meta"),
            response(
                "https://bp.example/nsaid",
                "22222222-2222-4222-8222-222222222222",
                page("NSAIDs", BP).encode(),
                WARC_TREC_ID="clueweb-0002",
            ),
            response(
                "https://short.example/",
                "33333333-3333-4333-8333-333333333333",
                b"<html><head><title>Short</title></head><body><p>Too short.</p></body></html>",
                WARC_TREC_ID="clueweb-0003",
            ),
            response(
                "https://cafe.example/",
                "44444444-4444-4444-8444-444444444444",
                page("Café", CAFE).encode("latin-1"),
                content_type="text/html; charset=ISO-8859-1",
                WARC_TREC_ID="clueweb-0004",
            ),
            response(
                "https://pdf.example/a.pdf",
                "55555555-5555-4555-8555-555555555555",
                b"%PDF-1.4 " + b"x" * 200,
                content_type="application/pdf",
                WARC_TREC_ID="clueweb-0005",
            ),
            response(
                "https://gone.example/",
                "66666666-6666-4666-8666-666666666666",
                page("Not found", "This page does not exist any more, sorry about that.").encode(),
                status="404 Not Found",
                WARC_TREC_ID="clueweb-0006",
            ),
        ],
        compress,
    )


EXPECTED_COUNTS = {
    "warc records skipped: not a response": 3,
    "warc responses skipped: not HTML (Content-Type)": 1,
    "warc responses skipped: HTTP status not 2xx": 1,
    "documents dropped: text shorter than 50 characters": 1,
}


@pytest.mark.parametrize("name", ["crawl.warc.gz", "crawl.warc"])
def test_html_responses_become_documents_with_main_content(tmp_path, name):
    path = tmp_path / name
    crawl(path, compress=name.endswith(".gz"))
    docs, report = read(path)
    assert [d.docno for d in docs] == [
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
        "44444444-4444-4444-8444-444444444444",
    ]
    assert [d.url for d in docs] == [
        "https://ms.example/fatigue",
        "https://bp.example/nsaid",
        "https://cafe.example/",
    ]
    assert [d.title for d in docs] == ["Fatigue in MS", "NSAIDs", "Café"]
    assert [d.text for d in docs] == [f"Fatigue in MS {MS}", f"NSAIDs {BP}", f"Café {CAFE}"]
    for doc in docs:
        assert NAV not in doc.text and "Home" not in doc.text and FOOTER not in doc.text
        assert doc.origin == Origin(str(path), None)
    assert dict(report.counts) == EXPECTED_COUNTS


def test_docno_header_option_and_min_length(tmp_path):
    path = tmp_path / "crawl.warc.gz"
    crawl(path)
    docs, _ = read(path, docno_header="WARC-TREC-ID")
    assert [d.docno for d in docs] == ["clueweb-0001", "clueweb-0002", "clueweb-0004"]
    docs, _ = read(path, docno_header="WARC-Target-URI")
    assert [d.docno for d in docs] == [
        "https://ms.example/fatigue",
        "https://bp.example/nsaid",
        "https://cafe.example/",
    ]
    docs, report = read(path, min_length=0)
    assert [d.text for d in docs if d.title == "Short"] == ["Too short."]
    assert "documents dropped: text shorter than 0 characters" not in report.counts


def test_chunked_gzip_bodies_are_decoded(tmp_path):
    """Crawlers other than CommonCrawl keep the body as sent: chunked and gzip-encoded."""
    encoded = gzip.compress(page("Fatigue in MS", MS).encode())
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (encoded[:40], encoded[40:]))
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n"
    records = [
        record("response", http + b"Transfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\n\r\n",
               "https://a.example/", "aaaa"),
        record("response", http.replace(b"gzip", b"br") + b"\r\n" + b"\x8b\x02\x80" * 30,
               "https://b.example/", "bbbb"),
    ]  # fmt: skip
    write_warc(tmp_path / "c.warc.gz", records)
    docs, report = read(tmp_path / "c.warc.gz")
    assert [(d.docno, d.text) for d in docs] == [("aaaa", f"Fatigue in MS {MS}")]
    assert dict(report.counts) == {
        "warc responses skipped: HTTP body not decodable (Content-Encoding)": 1
    }


def test_folder_of_warc_files_is_read_recursively_in_order(tmp_path):
    crawl(tmp_path / "b" / "two.warc.gz")
    write_warc(
        tmp_path / "a" / "one.warc",
        [response("https://one.example/", "aaaa", page("One", BP).encode())],
        compress=False,
    )
    (tmp_path / "README.txt").write_text("not a WARC file")
    docs, report = read(tmp_path)
    assert [d.docno for d in docs] == [
        "aaaa",
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
        "44444444-4444-4444-8444-444444444444",
    ]
    assert docs[0].origin == Origin(str(tmp_path / "a" / "one.warc"), None)
    assert dict(report.counts) == EXPECTED_COUNTS


@pytest.mark.parametrize(
    "cut, problem",
    [
        (30, "record at byte offset {last}: record is cut short"),  # in the HTML payload
        (330, "record at byte offset {last}: WARC header has no valid Content-Length"),
        (4, "gzip member at byte offset {last} is cut short"),  # in the gzip trailer
    ],
)
def test_truncated_warc_gz_names_file_and_record_offset(tmp_path, cut, problem):
    path = tmp_path / "cut.warc.gz"
    spans = crawl(path)
    data = path.read_bytes()
    assert spans[-1][1] > 330
    path.write_bytes(data[:-cut])
    with pytest.raises(InputError) as err:
        read(path)
    last = spans[-1][0]
    assert err.value.path == str(path)
    assert problem.format(last=last) in err.value.problem
    assert "\n" not in str(err.value)


def test_truncated_plain_warc_names_record_offset(tmp_path):
    path = tmp_path / "cut.warc"
    spans = crawl(path, compress=False)
    path.write_bytes(path.read_bytes()[:-60])
    with pytest.raises(InputError, match=rf"record at byte offset {spans[-1][0]}: record is cut"):
        read(path)


def test_corrupt_member_is_an_input_error_not_a_traceback(tmp_path):
    path = tmp_path / "bad.warc.gz"
    spans = crawl(path)
    data = bytearray(path.read_bytes())
    start, length = spans[4]  # the second page's member: damage its deflate data
    for i in range(start + 20, start + length - 20):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as err:
        read(path)
    assert str(err.value).startswith(f"{path}: corrupt WARC after the record at byte offset")
    assert err.value.line is None


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"", "file is empty"),
        (b"this is a text file, not a WARC\n" * 5, "corrupt WARC at the first record"),
        (gzip.compress(b"<html>no warc here</html>", mtime=0), "corrupt WARC at the first record"),
    ],
)
def test_not_a_warc_file(tmp_path, content, problem):
    path = tmp_path / "x.warc.gz"
    path.write_bytes(content)
    with pytest.raises(InputError, match=problem):
        read(path)


def test_missing_folder_empty_folder_and_missing_docno_header(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no \.warc or \.warc\.gz files"):
        read(tmp_path / "empty")
    path = tmp_path / "c.warc.gz"
    spans = crawl(path)
    with pytest.raises(InputError, match=rf"byte offset {spans[2][0]} has no WARC-TREC-ID2 header"):
        read(path, docno_header="WARC-TREC-ID2")


def test_declares_its_options():
    assert WARC.provides == ("documents",)
    assert {k: o.default for k, o in WARC.options.items()} == DEFAULTS
