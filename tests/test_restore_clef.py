"""scripts/restore_clef_ehealth_2021.py against a crawl built here exactly like CommonCrawl's (one
gzip member per WARC record, pointers giving each member's offset and length), read from a local
copy and through a loopback HTTP server that honours Range requests."""

from __future__ import annotations

import contextlib
import csv
import gzip
import http.server
import importlib.util
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nrp.collection.formats import ReadReport, get_format
from nrp.collection.manifest import Manifest
from nrp.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "restore_clef_ehealth_2021.py"
SEGMENT = "crawl-data/CC-MAIN-2021-04/segments/1610703499999.6/warc"
WARC_A = f"{SEGMENT}/CC-MAIN-20210116014637-20210116044637-00747.warc.gz"
WARC_B = f"{SEGMENT}/CC-MAIN-20210123063713-20210123093713-00328.warc.gz"
POINTER_HEADER = ",url,timestamp,charset,domain,uri,filename,offset,length,digest"

D1 = "a6195d99-f7d7-43ec-907c-435cb7a62ee7"  # HTML page
D2 = "80fd9af1-c9b6-4d82-b62a-fe16d5b9d76f"  # text under 50 characters
D3 = "4a8c5d85-b2d0-43bc-83f4-c1acfe0b3481"  # latin-1 page, charset only in the pointers file
D4 = "22990a4b-6a9f-4e00-9e72-aef0fbee202b"  # a PDF
D5 = "fd6ddab2-e4d9-4151-9972-256f5be6eb21"  # HTML page in the second WARC file
D6 = "00f5466a-db61-4143-8c66-a47e56cd1461"  # corrupt gzip member
D7 = "5c2d1b1e-0d59-4e0e-9b7a-3f3b1d2c4e5f"  # WARC file not in the crawl

FOOTER = "Copyright 2021 Example Health. All rights reserved."
MS = (
    "Fatigue is one of the most common symptoms of multiple sclerosis and affects about "
    "80 percent of people with the disease."
)
BP = '"Ibuprofen" and other NSAIDs can raise blood pressure, especially with hypertension.'
CAFE = "Le café et la crème brûlée sont délicieux, même pour un naïf qui préfère le thé glacé."


def page(title: str, main: str) -> str:
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
        '<header><nav><ul><li><a href="/">Home</a></li><li><a href="/about">About us</a></li>'
        '<li><a href="/contact">Contact</a></li></ul></nav></header>'
        f"<main><article><h1>{title}</h1><p>{main}</p></article></main>"
        f'<footer><p>{FOOTER}</p><a href="/privacy">Privacy policy</a></footer></body></html>'
    )


def warc_record(warc_type: str, block: bytes, uri: str | None, record_id: str) -> bytes:
    lines = ["WARC/1.0", f"WARC-Type: {warc_type}", "WARC-Date: 2021-01-16T03:41:45Z"]
    lines.append(f"WARC-Record-ID: <urn:uuid:{record_id}>")
    if uri:
        lines.append(f"WARC-Target-URI: {uri}")
    kind = "application/warc-fields" if warc_type in ("warcinfo", "metadata") else None
    kind = kind or f"application/http; msgtype={warc_type}"
    lines += [f"Content-Type: {kind}", f"Content-Length: {len(block)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + block + b"\r\n\r\n"


def response(uri: str, docno: str, body: bytes, content_type: str = "text/html") -> bytes:
    http = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    return warc_record("response", http.encode() + body, uri, docno)


def write_warc(path: Path, records: list[bytes]) -> list[tuple[int, int]]:
    """One gzip member per record, concatenated; (offset, length) of each member."""
    members = [gzip.compress(r, mtime=0) for r in records]
    spans, offset = [], 0
    for member in members:
        spans.append((offset, len(member)))
        offset += len(member)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(members))
    return spans


@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> tuple[Path, Path]:
    """(crawl root, pointers CSV) with seven pointers, in CommonCrawl's layout."""
    base = tmp_path_factory.mktemp("crawl")
    root = base / "commoncrawl"
    info = warc_record("warcinfo", b"software: test\r\n", None, "0000-info")
    a = write_warc(
        root / WARC_A,
        [
            info,
            warc_record("request", b"GET / HTTP/1.1\r\n\r\n", "https://ms.example/", "0001-req"),
            response("https://ms.example/", D1, page("Fatigue in MS", MS).encode()),
            warc_record("metadata", b"fetchTimeMs: 12\r\n", "https://ms.example/", "0001-meta"),
            response("https://short.example/", D2, b"<html><body><p>Too short.</p></body></html>"),
            response("https://cafe.example/", D3, page("Café", CAFE).encode("latin-1")),
            response("https://pdf.example/a.pdf", D4, b"%PDF-1.4 " + bytes(300), "application/pdf"),
        ],
    )
    b = write_warc(
        root / WARC_B,
        [
            info,
            response("https://bp.example/", D5, page("NSAIDs", BP).encode()),
            response("https://broken.example/", D6, page("Broken", MS).encode()),
        ],
    )
    data = bytearray((root / WARC_B).read_bytes())
    start, length = b[2]
    for i in range(start + 20, start + length - 12):  # damage D6's deflate data
        data[i] ^= 0x5A
    (root / WARC_B).write_bytes(bytes(data))
    rows = [
        (D1, "UTF-8", WARC_A, *a[2]),
        (D2, "UTF-8", WARC_A, *a[4]),
        (D3, "ISO-8859-1", WARC_A, *a[5]),
        (D4, "", WARC_A, *a[6]),
        (D5, "UTF-8", WARC_B, *b[1]),
        (D6, "UTF-8", WARC_B, *b[2]),
        (D7, "UTF-8", f"{SEGMENT}/missing.warc.gz", 0, 1000),
    ]
    lines = [POINTER_HEADER] + [
        f"{i},https://x.example/{i},20210116034145,{cs},x.example,{d},{f},{o},{n},DIGEST{i}"
        for i, (d, cs, f, o, n) in enumerate(rows)
    ]
    pointers = base / "assessed_docs.csv"
    pointers.write_text("\n".join(lines) + "\n")
    return root, pointers


class RangeServer(http.server.ThreadingHTTPServer):
    """Serves a crawl folder like data.commoncrawl.org: byte ranges answered with 206. Paths
    under /norange/ ignore Range (answer 200 with the whole file), as a broken proxy would;
    under /flaky/ each request is first answered 503 Slow Down, as CommonCrawl does at times."""

    def __init__(self, root: Path):
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.root = root
        self.requests: list[tuple[str, str | None]] = []
        self.refused: set[tuple[str, str | None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


class RangeHandler(http.server.BaseHTTPRequestHandler):
    server: RangeServer

    def do_GET(self) -> None:
        rng = self.headers.get("Range")
        self.server.requests.append((self.path, rng))
        if self.path.startswith("/flaky/") and (self.path, rng) not in self.server.refused:
            self.server.refused.add((self.path, rng))
            self.send_error(503, "Slow Down")
            return
        honour = not self.path.startswith("/norange/")
        relative = self.path.removeprefix("/norange/").removeprefix("/flaky/").lstrip("/")
        file = self.server.root / relative
        if not file.is_file():
            self.send_error(404)
            return
        data = file.read_bytes()
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", rng or "")
        if honour and match:
            start, end = int(match[1]), int(match[2])
            body = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        else:
            body = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)  # a client stops reading a 200 answer at once

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server(crawl):
    srv = RangeServer(crawl[0])
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def restore(*args: str | Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def script():
    """The script as a module, to run ``main`` in this process (a subprocess costs ~1 s)."""
    spec = importlib.util.spec_from_file_location("restore_clef_ehealth_2021", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


@pytest.fixture
def main(script, capsys):
    """``main(*args)`` -> (exit status, stdout, stderr), in this process."""

    def run(*args: str | Path) -> tuple[int, str, str]:
        status = script.main([str(a) for a in args])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run


def tsv_rows(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as stream:
        return list(csv.reader(stream, delimiter="\t"))


EXPECTED_ROWS = [
    ["docno", "text"],
    [D1, f"Fatigue in MS {MS}"],
    [D3, f"Café {CAFE}"],
    [D5, f"NSAIDs {BP}"],
]


def test_restore_from_local_warc_copy(crawl, tmp_path):
    root, pointers = crawl
    out = tmp_path / "out" / "docs.tsv"
    done = restore("--warc-root", root, "--pointers", pointers, "--output", out, "--workers", 3)
    assert done.returncode == 1, done.stderr  # two pointers failed
    assert tsv_rows(out) == EXPECTED_ROWS
    text = out.read_text(encoding="utf-8")
    assert "Home" not in text and "About us" not in text and FOOTER not in text
    report = done.stdout.splitlines()
    for line in [
        f"pointers: 7 rows in {pointers}",
        "restored: 3",
        "dropped short (text under 50 characters): 1",
        "skipped, not an HTML page: 1",
        "  not HTML (Content-Type): 1",
        "failed: 2",
        f"wrote {out} (3 documents)",
    ]:
        assert line in report
    failed = [line for line in report if line.startswith("  failed: ")]
    assert len(failed) == 2
    assert failed[0].startswith(f"  failed: {D6} ({pointers}:7): not a valid gzip member")
    assert failed[1].startswith(f"  failed: {D7} ({pointers}:8): WARC file not found")
    assert sorted(p.name for p in out.parent.iterdir()) == ["docs.tsv"]  # no temp file left
    # what the manifest's `table` source reads back (texts starting with '"' included)
    table = get_format("table")
    options = {**{k: o.default for k, o in table.options.items()}, "holds": "documents"}
    docs = list(table.read(out, options, ReadReport()))
    assert [[d.docno, d.text] for d in docs] == EXPECTED_ROWS[1:]


def range_requests(pointers: Path, *docnos: str) -> set[tuple[str, str]]:
    """The (path, Range header) CommonCrawl would be asked for, for these docnos' pointers."""
    with pointers.open(newline="") as stream:
        return {
            (
                f"/{row['filename']}",
                f"bytes={row['offset']}-{int(row['offset']) + int(row['length']) - 1}",
            )
            for row in csv.DictReader(stream)
            if row["uri"] in docnos
        }


def probe(pointers: Path, docno: str) -> tuple[str, str]:
    """The one-byte request the script sends first, to fail at once when offline."""
    ((path, rng),) = range_requests(pointers, docno)
    start = rng.removeprefix("bytes=").split("-")[0]
    return path, f"bytes={start}-{start}"


def test_restore_over_http_range_requests_gives_the_same_file(crawl, server, tmp_path):
    _, pointers = crawl
    out = tmp_path / "docs.tsv"
    done = restore(
        "--commoncrawl", "--base-url", server.url, "--pointers", pointers, "--output", out
    )
    assert done.returncode == 1, done.stderr
    assert tsv_rows(out) == EXPECTED_ROWS
    assert f"  failed: {D7} ({pointers}:8): HTTP 404" in done.stdout
    # a probe, then one Range request per pointer, for exactly the bytes of its gzip member
    assert server.requests[0] == probe(pointers, D1)
    assert len(server.requests) == 8
    assert set(server.requests[1:]) == range_requests(pointers, D1, D2, D3, D4, D5, D6, D7)


def test_resume_skips_restored_docnos(crawl, server, tmp_path, main):
    _, pointers = crawl
    out = tmp_path / "docs.tsv"
    common = ("--commoncrawl", "--base-url", server.url, "--pointers", pointers, "--output", out)
    status, report, _ = main(*common, "--limit", 2)
    assert status == 0
    assert tsv_rows(out) == EXPECTED_ROWS[:2]  # D1 restored, D2 dropped as short
    assert "restored: 1\n" in report and "dropped short (text under 50 characters): 1\n" in report
    server.requests.clear()
    status, report, _ = main(*common, "--resume", "--workers", 1)
    assert status == 1  # D6 and D7 fail
    assert "already restored (--resume): 1\n" in report and "restored: 2\n" in report
    assert tsv_rows(out) == EXPECTED_ROWS
    assert server.requests[0] == probe(pointers, D2)
    assert sorted(server.requests[1:]) == sorted(range_requests(pointers, D2, D3, D4, D5, D6, D7))


def test_server_ignoring_range_fails_rows_without_reading_whole_files(
    crawl, server, tmp_path, main
):
    _, pointers = crawl
    out = tmp_path / "docs.tsv"
    base_url = f"{server.url}norange/"
    status, report, _ = main(
        "--commoncrawl", "--base-url", base_url, "--pointers", pointers, "--output", out
    )
    assert status == 1
    assert report.count("not 206 Partial Content (Range not honoured)") == 6
    assert f"failed: {D7} ({pointers}:8): HTTP 404" in report
    assert tsv_rows(out) == [["docno", "text"]]


def test_busy_server_is_retried(crawl, server, tmp_path, main):
    _, pointers = crawl
    out = tmp_path / "docs.tsv"
    base_url = f"{server.url}flaky/"
    status, report, _ = main(
        "--commoncrawl", "--base-url", base_url, "--pointers", pointers, "--output", out,
        "--retries", 1, "--retry-wait", 0,
    )  # fmt: skip
    assert status == 1 and "failed: 2\n" in report
    assert tsv_rows(out) == EXPECTED_ROWS
    assert len(server.requests) == 1 + 14  # the probe, then every pointer twice: 503, answer


def test_unreachable_server_fails_at_once_nothing_written(crawl, tmp_path, main):
    _, pointers = crawl
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = tmp_path / "docs.tsv"
    base_url = f"http://127.0.0.1:{port}/"
    status, _, error = main(
        "--commoncrawl", "--base-url", base_url, "--pointers", pointers, "--output", out
    )
    assert status == 2 and error.startswith(f"error: cannot reach {base_url}: ")
    assert error.count("\n") == 1 and not out.exists()


def test_record_id_other_than_docno_is_counted(crawl, tmp_path, main):
    root, pointers = crawl
    renamed = tmp_path / "pointers.csv"
    renamed.write_text(pointers.read_text().replace(D1, "clef-doc-1"))
    out = tmp_path / "docs.tsv"
    status, report, _ = main("--warc-root", root, "--pointers", renamed, "--output", out)
    assert status == 1
    assert "WARC-Record-ID differs from docno (text kept under the docno): 1\n" in report
    assert tsv_rows(out)[1] == ["clef-doc-1", EXPECTED_ROWS[1][1]]


@pytest.mark.parametrize(
    "edit, where, problem",
    [
        (lambda t: t.replace(",offset,", ",start,"), 1, "missing column(s) 'offset'"),
        (
            lambda t: re.sub(r",(\d+),(\d+),DIGEST2", r",12x,\2,DIGEST2", t),
            4,
            "offset '12x' is not a non-negative integer",
        ),
        (lambda t: t.replace(D5, D1), 6, f"docno '{D1}' appears twice: first at"),
        (lambda t: t.replace(WARC_B, "../../etc/passwd"), 6, "filename '../../etc/passwd' is not"),
    ],
)
def test_bad_pointers_file_one_line_error_nothing_written(
    crawl, tmp_path, main, edit, where, problem
):
    root, pointers = crawl
    bad = tmp_path / "pointers.csv"
    bad.write_text(edit(pointers.read_text()))
    out = tmp_path / "out" / "docs.tsv"
    status, report, error = main("--warc-root", root, "--pointers", bad, "--output", out)
    assert (status, report) == (2, "")
    assert error.startswith(f"error: {bad}:{where}: {problem}")
    assert error.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_bad_pointers_file_from_the_command_line(crawl, tmp_path):
    root, pointers = crawl
    bad = tmp_path / "pointers.csv"
    bad.write_text(pointers.read_text().replace(",offset,", ",start,"))
    out = tmp_path / "out" / "docs.tsv"
    done = restore("--warc-root", root, "--pointers", bad, "--output", out)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"error: {bad}:1: missing column(s) 'offset' (found: , url, timestamp, charset, "
        "domain, uri, filename, start, length, digest)\n"
    )
    assert not (tmp_path / "out").exists()


def test_full_manifest_matches_the_clef_manifest_but_reads_restored_texts(script, tmp_path):
    full = Manifest.load(ROOT / "manifests" / "clef-ehealth-2021-full.yaml")
    passages_manifest = ROOT / "manifests" / "clef-ehealth-2021.yaml"
    if not passages_manifest.exists():
        pytest.skip("manifests/clef-ehealth-2021.yaml not written yet")
    base = Manifest.load(passages_manifest)
    assert full.dimensions == base.dimensions
    assert full.repeated_policy == base.repeated_policy
    same = lambda m: [(s.format, s.path.resolve(), dict(s.options)) for s in m.sources[:-1]]  # noqa: E731
    assert same(full) == same(base)
    documents = full.sources[-1]
    assert (documents.format, documents.options["holds"]) == ("table", "documents")
    assert documents.path.resolve() == script.DEFAULT_OUTPUT.resolve()
    # --data-root moves the CLEF files, as for the passages manifest, and not the restored ones
    moved = tmp_path / "elsewhere"
    full_moved = Manifest.load(ROOT / "manifests" / "clef-ehealth-2021-full.yaml", moved)
    base_moved = Manifest.load(passages_manifest, moved)
    assert same(full_moved) == same(base_moved)
    assert full_moved.sources[0].path == moved / "topics" / "topics.txt"
    assert full_moved.sources[-1].path.resolve() == script.DEFAULT_OUTPUT.resolve()


def test_relative_to_takes_data_root_or_manifest(tmp_path):
    text = (
        "name: x\ndata_root: data\ndimensions: {relevance: {grades: {0: no, 1: yes}}}\n"
        "sources:\n  - {format: trec-qrels, path: q.txt, dimension: relevance, relative_to: %s}\n"
    )
    (tmp_path / "m.yaml").write_text(text % "manifest")
    with pytest.raises(ConfigError, match="outside the data root"):  # still confined
        Manifest.load(tmp_path / "m.yaml")
    (tmp_path / "m.yaml").write_text("allow_outside_root: true\n" + text % "manifest")
    assert Manifest.load(tmp_path / "m.yaml").sources[0].path == tmp_path / "q.txt"
    (tmp_path / "m.yaml").write_text(text % "data_root")
    assert Manifest.load(tmp_path / "m.yaml").sources[0].path == tmp_path / "data" / "q.txt"
    (tmp_path / "m.yaml").write_text(text % "home")
    with pytest.raises(ConfigError, match="relative_to must be data_root or manifest, got 'home'"):
        Manifest.load(tmp_path / "m.yaml")


@pytest.mark.shared_data
def test_real_pointers_file(shared_data, main):
    pointers = shared_data("clef-ehealth-2021", "doc_pointers", "assessed_docs.csv")
    with pointers.open(encoding="utf-8", newline="") as stream:
        rows = list(csv.reader(stream))
    assert rows[0] == POINTER_HEADER.split(",")
    assert len(rows) - 1 == 6764
    assert len({row[5] for row in rows[1:]}) == 6764
    assert main("--check", "--pointers", pointers) == (
        0,
        f"pointers: 6764 rows in {pointers}\n",
        "",
    )
