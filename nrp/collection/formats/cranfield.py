"""Cranfield (Cleverdon, 1960s) in its SMART distribution: ``cran.all.1400`` (documents),
``cran.qry`` (queries) and ``cranqrel`` (graded judgments).

SMART records start with ``.I id`` and hold sections ``.T`` title, ``.A`` author, ``.B``
bibliographic note and ``.W`` text, each marker on a line of its own.

Two quirks of the real files are handled explicitly:

- ``cran.qry`` numbers its 225 queries ``.I 001`` .. ``.I 365`` with gaps, but ``cranqrel`` numbers
  them 1..225 by position (its query 3 is the third query, ``.I 004``, on heat conduction in
  composite slabs, and the judged documents are about exactly that). ``query_ids: position``
  (default) numbers queries the way the judgments do; ``query_ids: file`` keeps the ``.I`` number.
- A few documents carry a section marker inside their text (doc 240 has ``.A``/``.B`` lines in
  its abstract, docs 576 and 578 a second ``.W``). A marker that repeats a section or follows
  ``.W`` cannot start a real section, so its line is dropped and the text goes on; each is counted
  and reported. Two documents (471, 995) have no title and no text at all: they are skipped and
  counted by default (a judged document without text is usable, see docs/manifests.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.reading import iter_lines
from nrp.collection.records import Document, Judgment, Origin, Record, Topic
from nrp.errors import ConfigError, InputError, quote

_MARKER = re.compile(r"^\.([A-Z])(?:\s+(.*?))?\s*$")
_SECTIONS = ("T", "A", "B", "W")
QUERY_ID_CHOICES = ("position", "file")


@dataclass
class SmartRecord:
    """One ``.I`` record: its id as written, the line of its ``.I``, and its sections' lines."""

    ident: str
    line: int
    sections: dict[str, list[str]] = field(default_factory=dict)

    def section(self, name: str) -> str:
        """A section's text with whitespace normalised ("" when absent or empty)."""
        return " ".join(" ".join(self.sections.get(name, [])).split())


def _is_number(text: str) -> bool:
    """ASCII digits only (``str.isdigit`` also takes "²" and other digits int() refuses)."""
    return text.isascii() and text.isdigit()


def _number(ident: str) -> str:
    """``001`` and ``1`` are the same record number; non-numeric ids stay as written."""
    return (ident.lstrip("0") or "0") if _is_number(ident) else ident


def iter_smart(path: Path, report: ReadReport) -> Iterator[SmartRecord]:
    """The ``.I`` records of a SMART file, with stray section markers folded into the text."""
    record: SmartRecord | None = None
    current: str | None = None
    seen: dict[str, int] = {}
    for number, line in iter_lines(path):
        match = _MARKER.match(line)
        if match and match.group(1) == "I":
            if record is not None:
                yield record
            ident = (match.group(2) or "").strip()
            if not ident:
                raise InputError(path, number, "record without an id: '.I' must be followed by one")
            if _number(ident) in seen:
                first = seen[_number(ident)]
                raise InputError(
                    path, number, f"record id {quote(ident)} given twice (first at line {first})"
                )
            seen[_number(ident)] = number
            record, current = SmartRecord(ident, number), None
            continue
        if match and record is None:
            raise InputError(
                path, number, f"section '.{match.group(1)}' before the first '.I' record"
            )
        if match:
            marker = match.group(1)
            if marker not in _SECTIONS:
                raise InputError(
                    path,
                    number,
                    f"unknown section marker '.{marker}' (expected .I, .T, .A, .B, .W)",
                )
            if marker in record.sections or "W" in record.sections:
                # cannot start a section: a stray marker inside the text, which goes on
                report.count(
                    "cranfield stray section markers inside a record's text (marker ignored)"
                )
                report.warn(
                    f"{path}:{number}: stray '.{marker}' inside record {record.ident} "
                    f"(its text continues in '.{current}')"
                )
                if match.group(2):
                    record.sections[current].append(match.group(2))
                continue
            current = marker
            record.sections[current] = [match.group(2)] if match.group(2) else []
            continue
        if record is None:
            if line.strip():
                raise InputError(path, number, "text before the first '.I' record")
            continue
        if current is None:
            if line.strip():
                raise InputError(
                    path, number, f"text in record {record.ident} before any section marker"
                )
            continue
        record.sections[current].append(line)
    if record is None:
        raise InputError(path, None, "no '.I' records")
    yield record


def read_documents(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """Documents: docno = the ``.I`` number, title = ``.T``, text = ``.W`` (authors and the
    bibliographic note are not part of what a ranker sees)."""
    keep_empty = bool(options.get("keep_empty", False))
    for record in iter_smart(path, report):
        report.count("cranfield document records read")
        docno, text = _number(record.ident), record.section("W")
        if not text and not keep_empty:
            report.counted_warning(
                "cranfield documents without text (skipped)",
                1,
                f"{path}:{record.line}: document {docno} has no text; skipped",
            )
            continue
        yield Document(
            docno, text, title=record.section("T") or None, origin=Origin(str(path), record.line)
        )


def read_queries(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """Topics from ``.W``; qid by position (as cranqrel numbers them) unless ``query_ids: file``."""
    mode = options.get("query_ids", "position")
    if mode not in QUERY_ID_CHOICES:
        raise ConfigError(
            f"{path}: option 'query_ids' of cranfield-queries must be 'position' or 'file', "
            f"got {quote(mode)}"
        )
    renumbered = 0
    for position, record in enumerate(iter_smart(path, report), start=1):
        query = record.section("W")
        if not query:
            raise InputError(path, record.line, f"query {record.ident} has no '.W' text")
        qid = str(position) if mode == "position" else _number(record.ident)
        if qid != _number(record.ident):
            renumbered += 1
        yield Topic(qid, query, origin=Origin(str(path), record.line))
    if renumbered:
        report.count("cranfield queries numbered by position, not by their .I number", renumbered)


def read_qrels(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """``qid docno code`` lines; the raw code is the grade (1 best .. 4, and -1; see manifest)."""
    dimension = str(options.get("dimension") or "relevance")
    found = False
    for number, line in iter_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3:
            raise InputError(
                path,
                number,
                f"expected 3 fields 'qid docno code', found {len(fields)}: {quote(line.strip())}",
            )
        qid, docno, code = fields
        for name, value in (("qid", qid), ("docno", docno)):
            if not _is_number(value):
                raise InputError(path, number, f"{name} {quote(value)} is not a number")
        try:
            int(code)
        except ValueError:
            raise InputError(
                path, number, f"relevance code {quote(code)} is not an integer"
            ) from None
        found = True
        yield Judgment(_number(qid), _number(docno), dimension, code, Origin(str(path), number))
    if not found:
        raise InputError(path, None, "no judgments")


FORMATS = [
    Format(
        name="cranfield-docs",
        description="Cranfield cran.all.1400 (SMART .I/.T/.A/.B/.W): docno, title, text",
        provides=("documents",),
        read=read_documents,
        options={
            "keep_empty": Option(
                bool,
                "also yield documents without .W text (471 and 995) with empty text; by default "
                "they are skipped and counted, and stay judged documents without text",
                False,
            ),
        },
    ),
    Format(
        name="cranfield-queries",
        description="Cranfield cran.qry (SMART .I/.W): one topic per query",
        provides=("topics",),
        read=read_queries,
        options={
            "query_ids": Option(
                str,
                "position: number queries 1..225 in file order, as cranqrel does (default); "
                "file: use the .I number (001..365, gaps; leading zeros dropped)",
                "position",
            ),
        },
    ),
    Format(
        name="cranfield-qrels",
        description="Cranfield cranqrel: 'qid docno code' lines, code 1 (complete answer) .. 4, -1",
        provides=("judgments",),
        read=read_qrels,
        options={
            "dimension": Option(str, "the quality dimension the codes grade", "relevance"),
        },
    ),
]

register(*FORMATS)
