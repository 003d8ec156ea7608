#!/usr/bin/env python
"""Rebuild the full texts of the CLEF eHealth 2021 judged web pages from CommonCrawl.

The shared data holds text for only 236 judged pages; the other ~6.7k exist in CommonCrawl
CC-MAIN-2021-04, and doc_pointers/assessed_docs.csv says where: for each docno (column ``uri``)
the WARC file (``filename``) and the byte range (``offset``, ``length``) of its record. Each range
is one gzip member holding one WARC response record, so a page can be fetched alone (HTTP Range
request) or cut out of a local copy of the WARC file. Its main-content text is extracted with
the same function the ``warc`` and ``html-folder`` formats use, and written as a ``docno<TAB>text``
TSV that manifests/clef-ehealth-2021-full.yaml reads.

    # all pages, from CommonCrawl (needs internet; ~6.7k small requests)
    python scripts/restore_clef_ehealth_2021.py --commoncrawl --workers 8
    # from WARC files already on disk (DIR/crawl-data/CC-MAIN-2021-04/...)
    python scripts/restore_clef_ehealth_2021.py --warc-root DIR
    # carry on after an interruption: pages already in the output are not fetched again
    python scripts/restore_clef_ehealth_2021.py --commoncrawl --resume

The output is replaced in one rename, so it is never half-written. Exit status: 0 when every
pointer was restored, dropped as too short or skipped as not HTML; 1 when some failed (the output
holds the rest; rerun with --resume to retry them); 2 for a bad pointers file or bad arguments
(one line naming file and line; nothing written).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import http.client
import io
import os
import sys
import time
import urllib.error
import urllib.request
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a plain script from a checkout
    sys.path.insert(0, str(REPO))

from fastwarc.warc import ArchiveIterator  # noqa: E402

from nrp.collection.formats.warc import RecordProblem, header_value, html_payload  # noqa: E402
from nrp.collection.reading import iter_table  # noqa: E402
from nrp.collection.text_extraction import ExtractionError, extract_page  # noqa: E402
from nrp.errors import InputError, NrpError  # noqa: E402
from nrp.tables import require_columns  # noqa: E402

DEFAULT_POINTERS = REPO.parent / "shared/data/clef-ehealth-2021/doc_pointers/assessed_docs.csv"
DEFAULT_OUTPUT = REPO / "indexes/restored/clef-ehealth-2021-documents.tsv"
DEFAULT_BASE_URL = "https://data.commoncrawl.org/"
REQUIRED_COLUMNS = ("uri", "filename", "offset", "length")
OUTPUT_HEADER = ["docno", "text"]
MAX_FAILURES_SHOWN = 50
USER_AGENT = "nrp-restore-clef-ehealth-2021 (CommonCrawl range requests)"


@dataclass(frozen=True)
class Pointer:
    """One row of the pointers file: where the WARC record of one judged docno lies."""

    line: int
    docno: str
    filename: str
    offset: int
    length: int
    charset: str | None
    url: str | None


class RowFailure(Exception):
    """This pointer could not be restored (fetch, gzip or WARC problem); the reason is one line."""


class NotHtml(Exception):
    """The record is a valid response, but no HTML page (PDF, redirect, error status)."""


@dataclass(frozen=True)
class Outcome:
    pointer: Pointer
    text: str | None = None
    dropped_short: bool = False
    not_html: str | None = None
    failure: str | None = None
    record_id_differs: bool = False


def read_pointers(path: Path) -> list[Pointer]:
    """Every row of the pointers file, checked before anything is fetched or written."""
    pointers: list[Pointer] = []
    first_line: dict[str, int] = {}
    for line, row in iter_table(path, delimiter=","):
        if not pointers and not set(REQUIRED_COLUMNS) <= set(row):  # header line: on error only
            require_columns(row, REQUIRED_COLUMNS, path, line=_header_line(path))
        docno = row["uri"].strip()
        if not docno:
            raise InputError(path, line, "docno (column 'uri') is empty")
        if docno in first_line:
            raise InputError(
                path, line, f"docno {docno!r} appears twice: first at {path}:{first_line[docno]}"
            )
        first_line[docno] = line
        filename = row["filename"].strip()
        parts = PurePosixPath(filename).parts
        if not filename or filename.startswith("/") or ".." in parts or "\\" in filename:
            raise InputError(path, line, f"filename {filename!r} is not a relative WARC path")
        offset = _non_negative_int(row["offset"], "offset", path, line)
        length = _non_negative_int(row["length"], "length", path, line)
        if length == 0:
            raise InputError(path, line, "length is 0")
        charset = (row.get("charset") or "").strip() or None
        url = (row.get("url") or "").strip() or None
        pointers.append(Pointer(line, docno, filename, offset, length, charset, url))
    if not pointers:
        raise InputError(path, None, "no pointer rows (only a header)")
    return pointers


def _header_line(path: Path) -> int:
    """Line of the header row: the first non-blank line (read again, on error only)."""
    with path.open(encoding="utf-8", errors="replace") as stream:
        for number, line in enumerate(stream, start=1):
            if line.strip():
                return number
    return 1


def _non_negative_int(value: str, column: str, path: Path, line: int) -> int:
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        raise InputError(path, line, f"{column} {value!r} is not a non-negative integer")
    return int(text)


def local_fetcher(root: Path) -> Callable[[Pointer], bytes]:
    """Reads the record's bytes from ROOT/filename (a local copy of the crawl)."""

    def fetch(pointer: Pointer) -> bytes:
        file = root / pointer.filename
        try:
            with file.open("rb") as stream:
                stream.seek(pointer.offset)
                data = stream.read(pointer.length)
        except FileNotFoundError:
            raise RowFailure(f"WARC file not found: {file}") from None
        except OSError as err:
            raise RowFailure(f"cannot read {file}: {err.strerror or err}") from None
        if len(data) < pointer.length:
            raise RowFailure(
                f"{file} ends before byte {pointer.offset + pointer.length} "
                f"(got {len(data)} of {pointer.length} bytes)"
            )
        return data

    return fetch


def http_fetcher(
    base_url: str, timeout: float, retries: int, retry_wait: float
) -> Callable[[Pointer], bytes]:
    """Fetches the record's bytes with one HTTP Range request (retried on 429/5xx/network)."""
    base = base_url.rstrip("/") + "/"

    def fetch(pointer: Pointer) -> bytes:
        last_end = pointer.offset + pointer.length - 1
        request = urllib.request.Request(
            base + pointer.filename,
            headers={"Range": f"bytes={pointer.offset}-{last_end}", "User-Agent": USER_AGENT},
        )
        for attempt in range(retries + 1):
            wait = retry_wait * 2**attempt
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:
                    if response.status != 206:  # a 200 would be the whole (1 GB) file: stop
                        raise RowFailure(
                            f"server answered HTTP {response.status}, not 206 Partial Content "
                            "(Range not honoured)"
                        )
                    data = response.read(pointer.length + 1)
            except urllib.error.HTTPError as err:
                if err.code in (429, 500, 502, 503, 504) and attempt < retries:
                    time.sleep(wait)
                    continue
                raise RowFailure(f"HTTP {err.code} {err.reason} for {request.full_url}") from None
            except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
                if attempt < retries:
                    time.sleep(wait)
                    continue
                reason = getattr(err, "reason", None) or err
                raise RowFailure(f"cannot fetch {request.full_url}: {reason}") from None
            if len(data) != pointer.length:
                raise RowFailure(f"got {len(data)} bytes, expected {pointer.length}")
            return data
        raise AssertionError("unreachable")

    return fetch


def unreachable(base_url: str, pointer: Pointer, timeout: float) -> str | None:
    """Why ``base_url`` cannot be reached at all (no network, wrong host), or None. Checked once
    before the run, so that an offline machine fails at once instead of retrying every row."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/" + pointer.filename,
        headers={"Range": f"bytes={pointer.offset}-{pointer.offset}", "User-Agent": USER_AGENT},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # the server answers; each row's own answer is judged later
    except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
        return str(getattr(err, "reason", None) or err)


def restore(pointer: Pointer, data: bytes, min_length: int) -> Outcome:
    """Text of the one gzip-compressed WARC record in ``data``: decompress, parse, extract."""
    try:
        text, differs = _page_text(pointer, data)
    except NotHtml as why:
        return Outcome(pointer, not_html=str(why))
    except RowFailure as why:
        return Outcome(pointer, failure=str(why))
    if len(text) < max(min_length, 1):
        return Outcome(pointer, dropped_short=True, record_id_differs=differs)
    return Outcome(pointer, text=text, record_id_differs=differs)


def _page_text(pointer: Pointer, data: bytes) -> tuple[str, bool]:
    decompressor = zlib.decompressobj(31)
    try:
        raw = decompressor.decompress(data) + decompressor.flush()
    except zlib.error as err:
        raise RowFailure(f"not a valid gzip member: {err}") from None
    if not decompressor.eof:
        raise RowFailure("gzip member is cut short")
    if decompressor.unused_data.strip(b"\0"):
        raise RowFailure("bytes after the gzip member (offset or length wrong?)")
    try:
        record = next(iter(ArchiveIterator(io.BytesIO(raw), parse_http=True)), None)
        if record is None:
            raise RowFailure("no WARC record in the member")
        payload = html_payload(record)
    except (RecordProblem, OSError) as err:
        raise RowFailure(f"bad WARC record: {err}") from None
    if isinstance(payload, str):
        raise NotHtml(payload.split(": ", 1)[-1])
    differs = header_value(record.record_id) != pointer.docno
    try:
        page = extract_page(payload.html, pointer.charset or payload.charset)
    except ExtractionError as err:
        raise RowFailure(str(err)) from None
    return page.text, differs


def read_done(output: Path) -> list[list[str]]:
    """Rows of an earlier output (for --resume); a damaged one is an error, not overwritten."""
    try:
        text = output.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(output, None, "earlier output is not valid UTF-8; move it away") from None
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t"))
    if not rows or rows[0] != OUTPUT_HEADER:
        raise InputError(output, 1, "earlier output does not start with the header docno, text")
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 2:
            raise InputError(output, number, f"expected 2 fields (docno, text), found {len(row)}")
    return rows[1:]


def run_all(
    pointers: list[Pointer], fetch: Callable[[Pointer], bytes], workers: int, min_length: int
) -> Iterator[Outcome]:
    """Outcomes in pointer order; fetching and extraction run in ``workers`` threads."""

    def one(pointer: Pointer) -> Outcome:
        try:
            data = fetch(pointer)
        except RowFailure as why:
            return Outcome(pointer, failure=str(why))
        try:
            return restore(pointer, data, min_length)
        except Exception as err:  # one odd web page must not end a run of thousands
            return Outcome(pointer, failure=f"unexpected {type(err).__name__}: {err}")

    if workers <= 1:
        yield from map(one, pointers)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(one, pointers)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Rebuild the full CLEF eHealth 2021 document texts from CommonCrawl WARC "
        "records (docno<TAB>text TSV).",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--warc-root",
        type=Path,
        metavar="DIR",
        help="read records from DIR/<filename> (local crawl copy)",
    )
    source.add_argument(
        "--commoncrawl",
        action="store_true",
        help="fetch records with HTTP Range requests from --base-url (needs internet)",
    )
    parser.add_argument("--base-url", default=DEFAULT_BASE_URL, help=f"default {DEFAULT_BASE_URL}")
    parser.add_argument(
        "--pointers", type=Path, default=DEFAULT_POINTERS, help="default: %(default)s"
    )
    parser.add_argument(
        "--output", type=Path, default=DEFAULT_OUTPUT, help="TSV to write; default: %(default)s"
    )
    parser.add_argument(
        "--min-length",
        type=int,
        default=50,
        help="drop pages whose text has fewer characters (default 50, as the source study)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep and skip docnos already in the output"
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="restore at most N pointers in this run (after --resume)",
    )
    parser.add_argument(
        "--workers", type=int, default=8, help="threads fetching records (default 8)"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP request")
    parser.add_argument("--retries", type=int, default=3, help="HTTP retries on 429/5xx/network")
    parser.add_argument("--retry-wait", type=float, default=2.0, help="first retry wait, doubled")
    parser.add_argument(
        "--check", action="store_true", help="only check the pointers file and print its row count"
    )
    args = parser.parse_args(argv)
    if not args.check and args.warc_root is None and not args.commoncrawl:
        parser.error("one of --warc-root DIR or --commoncrawl is required")
    if args.warc_root is not None and not args.warc_root.is_dir():
        parser.error(f"--warc-root {args.warc_root} is not a folder")
    if args.base_url != DEFAULT_BASE_URL and not args.commoncrawl:
        parser.error("--base-url applies only with --commoncrawl")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    for name in ("min_length", "retries", "limit"):
        value = getattr(args, name)
        if value is not None and value < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        pointers = read_pointers(args.pointers)
        done_rows = read_done(args.output) if args.resume and args.output.exists() else []
    except NrpError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"pointers: {len(pointers)} rows in {args.pointers}")
    if args.check:
        return 0
    done = {row[0] for row in done_rows}
    todo = [p for p in pointers if p.docno not in done]
    if args.resume:
        print(f"already restored (--resume): {len(pointers) - len(todo)}")
    if args.limit is not None:
        todo = todo[: args.limit]
    if args.commoncrawl and todo:
        why = unreachable(args.base_url, todo[0], args.timeout)
        if why:
            print(f"error: cannot reach {args.base_url}: {why}", file=sys.stderr)
            return 2
    fetch = (
        http_fetcher(args.base_url, args.timeout, args.retries, args.retry_wait)
        if args.commoncrawl
        else local_fetcher(args.warc_root)
    )
    tally = Tally()
    write_restored(todo, fetch, args, done_rows, tally)
    tally.print(args, len(done_rows))
    if tally.interrupted:
        print("interrupted: rerun with --resume to continue", file=sys.stderr)
        return 130
    return 1 if tally.failures else 0


@dataclass
class Tally:
    """What a run did with its pointers: counts by outcome, not-HTML reasons, failures."""

    counts: Counter[str] = field(default_factory=Counter)
    not_html: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    interrupted: bool = False

    def add(self, outcome: Outcome, pointers: Path) -> str | None:
        """Count one outcome; the text to write, if any."""
        self.counts["record id differs from docno"] += outcome.record_id_differs
        if outcome.text is not None:
            self.counts["restored"] += 1
            return outcome.text
        if outcome.dropped_short:
            self.counts["dropped short"] += 1
        elif outcome.not_html is not None:
            self.not_html[outcome.not_html] += 1
        else:
            p = outcome.pointer
            self.failures.append(f"{p.docno} ({pointers}:{p.line}): {outcome.failure}")
        return None

    def print(self, args: argparse.Namespace, kept: int) -> None:
        counts, not_html, failures = self.counts, self.not_html, self.failures
        differs = counts["record id differs from docno"]
        fetched = (
            counts["restored"] + counts["dropped short"] + sum(not_html.values()) + len(failures)
        )
        print(f"fetched this run: {fetched}")
        print(f"restored: {counts['restored']}")
        print(f"dropped short (text under {args.min_length} characters): {counts['dropped short']}")
        print(f"skipped, not an HTML page: {sum(not_html.values())}")
        for reason, n in sorted(not_html.items()):
            print(f"  {reason}: {n}")
        if differs:
            print(f"WARC-Record-ID differs from docno (text kept under the docno): {differs}")
        print(f"failed: {len(failures)}")
        for failure in failures[:MAX_FAILURES_SHOWN]:
            print(f"  failed: {failure}")
        if len(failures) > MAX_FAILURES_SHOWN:
            print(f"  ... and {len(failures) - MAX_FAILURES_SHOWN} more")
        print(f"wrote {args.output} ({kept + counts['restored']} documents)")


def write_restored(
    todo: list[Pointer],
    fetch: Callable[[Pointer], bytes],
    args: argparse.Namespace,
    done_rows: list[list[str]],
    tally: Tally,
) -> None:
    """Fetch and extract ``todo`` into ``args.output`` (after the rows kept by --resume),
    written aside and renamed, so an interrupted run leaves a complete file of what it did."""
    output: Path = args.output
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
    try:
        with partial.open("w", encoding="utf-8", newline="") as stream:
            writer = csv.writer(stream, delimiter="\t", lineterminator="\n")
            writer.writerow(OUTPUT_HEADER)
            writer.writerows(done_rows)
            try:
                for outcome in run_all(todo, fetch, args.workers, args.min_length):
                    text = tally.add(outcome, args.pointers)
                    if text is not None:
                        writer.writerow([outcome.pointer.docno, text])
            except KeyboardInterrupt:
                tally.interrupted = True
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(partial, output)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()


if __name__ == "__main__":
    sys.exit(main())
