"""``warc``: web pages from WARC files (.warc or .warc.gz; a file or a folder of them).

Only HTTP response records with an HTML payload become documents; their text is the page's main
content (``nrp.collection.text_extraction``, shared with ``html-folder`` and the CLEF restore
script). A WARC that is cut short or corrupt is an ``InputError`` naming the file and the byte
offset of the record where reading failed: fastwarc by itself would stop quietly at a truncated
gzip member, so every record's length and the gzip stream's end are checked here.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.formats.html_folder import check_min_length
from nrp.collection.reading import folder_files
from nrp.collection.records import Document, Origin
from nrp.collection.text_extraction import ExtractionError, extract_page
from nrp.errors import InputError

WARC_SUFFIXES = (".warc", ".warc.gz")
HTML_CONTENT_TYPES = ("text/html", "application/xhtml+xml")
_GZIP_MAGIC = b"\x1f\x8b"


class RecordProblem(Exception):
    """A WARC record that is cut short or malformed (the caller names file and offset)."""


class HtmlPayload(NamedTuple):
    html: bytes
    charset: str | None  # from the HTTP Content-Type header, a hint for decoding


def is_warc_file(path: Path) -> bool:
    return path.name.lower().endswith(WARC_SUFFIXES)


def warc_files(path: Path) -> list[Path]:
    """The WARC file at ``path``, or every .warc/.warc.gz below the folder ``path`` (sorted)."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, None, "file or folder not found")
    if path.is_file():
        return [path]
    files = folder_files(path, is_warc_file)  # a link out of the folder is an error
    if not files:
        raise InputError(
            path, None, "folder holds no .warc or .warc.gz files (searched recursively)"
        )
    return files


def header_value(value: str | None) -> str | None:
    """A WARC header value without its angle brackets; ``<urn:uuid:X>`` gives X (the form
    CommonCrawl-based collections such as CLEF eHealth use as docno)."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1].strip()
    if value.lower().startswith("urn:uuid:"):
        value = value[len("urn:uuid:") :]
    return value or None


def html_payload(record: WarcRecord) -> HtmlPayload | str:
    """The HTML payload of a response record, or a short reason why the record is no page.

    Raises ``RecordProblem`` when the record is shorter than its Content-Length says (a cut
    WARC). The record must come from an iterator with ``parse_http=True``.
    """
    declared = record.headers.get("Content-Length")
    if declared is None or not declared.strip().isdigit():
        raise RecordProblem("WARC header has no valid Content-Length (record cut short?)")
    expected = record.content_length
    if record.record_type != WarcRecordType.response:
        got = record.reader.consume()
        if got < expected:
            raise RecordProblem(f"record is cut short: {got} of {expected} bytes")
        return "warc records skipped: not a response"
    if not record.is_http or record.http_headers is None:
        record.reader.consume()
        return "warc responses skipped: not HTTP"
    body = record.reader.read()
    if len(body) < expected:
        raise RecordProblem(f"record is cut short: {len(body)} of {expected} payload bytes")
    status = record.http_headers.status_code
    if status is None or not 200 <= status < 300:
        return "warc responses skipped: HTTP status not 2xx"
    content_type = (record.http_content_type or "").strip().lower()
    if content_type and content_type not in HTML_CONTENT_TYPES:
        return "warc responses skipped: not HTML (Content-Type)"
    body = _decode_body(body, record)
    if body is None:
        return "warc responses skipped: HTTP body not decodable (Content-Encoding)"
    if not content_type and not _looks_like_html(body):
        return "warc responses skipped: not HTML (no Content-Type, no <html>)"
    return HtmlPayload(body, record.http_charset)


def _decode_body(body: bytes, record: WarcRecord) -> bytes | None:
    """Undo chunked transfer and gzip/deflate content encoding where a crawler kept them
    (CommonCrawl stores bodies decoded); None when the body cannot be decoded."""
    headers = record.http_headers
    transfer = (headers.get("Transfer-Encoding") or "").strip().lower()
    if transfer == "chunked":
        body = _dechunk(body)
    encoding = (headers.get("Content-Encoding") or "").strip().lower()
    if encoding in ("", "identity", "none"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        return None
    for wbits in (47, zlib.MAX_WBITS, -zlib.MAX_WBITS):  # gzip or zlib; raw deflate
        try:
            return zlib.decompress(body, wbits)
        except zlib.error:
            continue
    return None


def _dechunk(body: bytes) -> bytes:
    parts: list[bytes] = []
    pos = 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            return body if not parts else b"".join(parts)
        size_field = body[pos:end].split(b";", 1)[0].strip()
        try:
            size = int(size_field, 16)
        except ValueError:
            return body if not parts else b"".join(parts)  # not chunked after all: keep as is
        if size == 0:
            return b"".join(parts)
        parts.append(body[end + 2 : end + 2 + size])
        pos = end + 2 + size + 2


def _looks_like_html(body: bytes) -> bool:
    head = body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head


def _gzip_tail_problem(file: Path, start: int) -> str | None:
    """Why the gzip data from ``start`` to the end of ``file`` is not whole members, or None.

    fastwarc ignores a last member that is cut short; this finds it. ``start`` is the offset of
    the last record fastwarc read, so only the end of the file is decompressed a second time.
    """
    with file.open("rb") as stream:
        stream.seek(start)
        decompressor = zlib.decompressobj(31)
        consumed = start  # file offset of the first byte of ``pending``
        member_start: int | None = None  # offset of the member being decompressed, if any
        while chunk := stream.read(1 << 16):
            pending = chunk
            while pending:
                if member_start is None:
                    member_start = consumed
                try:
                    decompressor.decompress(pending, 1 << 20)  # output not needed: bounded
                except zlib.error as err:
                    return f"gzip member at byte offset {member_start} is corrupt: {err}"
                rest = (
                    decompressor.unused_data if decompressor.eof else decompressor.unconsumed_tail
                )
                consumed += len(pending) - len(rest)
                if decompressor.eof:
                    decompressor = zlib.decompressobj(31)
                    member_start = None
                pending = rest
        if member_start is not None:
            try:
                decompressor.flush()  # output held back by the size bound
            except zlib.error as err:
                return f"gzip member at byte offset {member_start} is corrupt: {err}"
            if not decompressor.eof:
                return f"gzip member at byte offset {member_start} is cut short (file truncated?)"
    return None


def iter_html_records(file: Path, report: ReadReport) -> Iterator[tuple[WarcRecord, HtmlPayload]]:
    """(record, payload) for every HTML response in one WARC file; other records are counted.

    Every problem, from fastwarc or from the checks above, becomes an ``InputError`` naming the
    file and the byte offset of the record (for .warc.gz: of its gzip member).
    """
    if file.stat().st_size == 0:
        raise InputError(file, None, "file is empty")
    last: int | None = None
    records = 0
    with file.open("rb") as stream:
        iterator = iter(ArchiveIterator(stream, parse_http=True))
        while True:
            try:
                record = next(iterator)
            except StopIteration:
                break
            except OSError as err:
                where = (
                    "at the first record"
                    if last is None
                    else f"after the record at byte offset {last}"
                )
                raise InputError(file, None, f"corrupt WARC {where}: {err}") from None
            last = record.stream_pos
            records += 1
            try:
                payload = html_payload(record)
            except (RecordProblem, OSError) as err:
                raise InputError(file, None, f"record at byte offset {last}: {err}") from None
            if isinstance(payload, str):
                report.count(payload)
                continue
            yield record, payload
    if records == 0:
        raise InputError(file, None, "no WARC records found (not a WARC file?)")
    if file.name.lower().endswith(".gz"):
        with file.open("rb") as stream:
            stream.seek(last or 0)
            at_member = stream.read(2) == _GZIP_MAGIC
        problem = _gzip_tail_problem(file, last if at_member and last else 0)
        if problem:
            raise InputError(file, None, problem)


def read(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Document]:
    min_length = check_min_length(options.get("min_length", 50), "warc")
    docno_header = str(options.get("docno_header") or "WARC-Record-ID")
    for file in warc_files(Path(path)):
        for record, payload in iter_html_records(file, report):
            docno = header_value(record.headers.get(docno_header))
            if docno is None:
                raise InputError(
                    file,
                    None,
                    f"record at byte offset {record.stream_pos} has no {docno_header} header "
                    "(set the option docno_header)",
                )
            try:
                page = extract_page(payload.html, payload.charset)
            except ExtractionError:
                report.count("documents dropped: HTML could not be parsed")
                continue
            if len(page.text) < min_length:
                report.count(f"documents dropped: text shorter than {min_length} characters")
                continue
            url = header_value(record.headers.get("WARC-Target-URI"))
            yield Document(docno, page.text, url, page.title, Origin(str(file), None))


FORMAT = Format(
    name="warc",
    description=(
        "WARC files (.warc or .warc.gz; a file or a folder of them, searched recursively): "
        "HTML response records become documents with main-content text (resiliparse)."
    ),
    provides=("documents",),
    read=read,
    options={
        "docno_header": Option(
            str,
            "WARC header that holds the docno, e.g. WARC-TREC-ID (ClueWeb) or WARC-Target-URI; "
            "<urn:uuid:X> record ids give X",
            default="WARC-Record-ID",
        ),
        "min_length": Option(
            int,
            "drop (and count) pages whose extracted text has fewer characters than this",
            default=50,
        ),
    },
)

register(FORMAT)
