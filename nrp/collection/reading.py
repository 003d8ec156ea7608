"""Strict, line-aware reading shared by every format: UTF-8 only, empty files refused, and every
problem reported as an ``InputError`` that names the file and the line."""

from __future__ import annotations

import csv
import io
import json
import xml.parsers.expat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nrp import jsontext
from nrp.errors import InputError, clip, quote
from nrp.jsontext import DuplicateKey, unique_keys

#: the most characters one CSV/TSV field may hold. Real documents (CLEF pages) exceed csv's 128 KiB
#: default; a larger field is refused as an error naming its line (most often a quote left open
#: that swallowed the rest of the file), never read into memory as one value.
MAX_FIELD_CHARS = 16 * 1024 * 1024
#: the most characters one line of a line-based file (qrels, JSON Lines, SMART, SGML topics) may
#: hold; a longer line is an error naming it.
MAX_LINE_CHARS = 16 * 1024 * 1024

csv.field_size_limit(MAX_FIELD_CHARS)


def folder_files(
    folder: Path,
    keep: Callable[[Path], bool] = lambda path: True,
    *,
    recursive: bool = True,
    within: Path | None = None,
) -> list[Path]:
    """The regular files in ``folder`` (below it: ``recursive``) that ``keep`` accepts, sorted:
    the one folder walk of every reader (answers, html-folder, warc, fingerprints, synth).

    The one rule for links: a file found in a folder must lie inside the folder named
    (``within``, default ``folder``) once symbolic links are resolved; one that leads out is
    an InputError naming it (not the file it leads to), before any file is read. A folder named
    inside a data root therefore never reads outside it (the service), and ``nrp ingest`` or
    ``nrp score`` of a folder reads only that folder, whatever links it holds."""
    base = Path(within or folder)
    inside = base.resolve()
    found = folder.rglob("*") if recursive else folder.iterdir()
    files = sorted(path for path in found if path.is_file() and keep(path))
    for file in files:
        if not file.resolve().is_relative_to(inside):
            raise InputError(
                file,
                None,
                f"a symbolic link that leads outside the folder {base}: refused (a file found "
                "in a folder must lie inside it; copy the file in instead)",
            )
    return files


def read_text(path: Path) -> str:
    """The whole file as text; refuses a missing or empty file and non-UTF-8 bytes (with line)."""
    path = Path(path)
    if "\0" in str(path):
        raise InputError(quote(str(path)), None, "a file name cannot hold a NUL character")
    try:
        if not path.exists():
            raise InputError(path, None, "file not found")
        if path.is_dir():
            raise InputError(path, None, "is a folder, expected a file")
        data = path.read_bytes()
    except OSError as err:  # no permission, a name too long, a device that cannot be read
        raise InputError(path, None, f"cannot read the file: {err.strerror or err}") from None
    if not data.strip():
        raise InputError(path, None, "file is empty")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError(
            path, line, f"not valid UTF-8: byte 0x{data[err.start]:02x} cannot be decoded"
        ) from None


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its line end) for every line of a UTF-8 text file."""
    # split on "\n" only: str.splitlines() also breaks on U+2028, form feeds and the like, which
    # real files carry inside fields, and line numbers would drift from what editors show.
    text = read_text(path)
    if text.endswith("\n"):
        text = text[:-1]
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_LINE_CHARS:
            raise InputError(
                path,
                number,
                f"line of {len(line):,} characters, over the limit of {MAX_LINE_CHARS:,}",
            )
        yield number, line.removesuffix("\r")


def delimiter_for(path: Path, delimiter: str | None = None) -> str:
    if delimiter:
        return "\t" if delimiter in ("tab", "\\t") else delimiter
    suffix = Path(path).suffix.lower()
    if suffix in (".tsv", ".tab", ".txt"):
        return "\t"
    if suffix == ".csv":
        return ","
    raise InputError(path, None, f"cannot tell the delimiter of a {suffix!r} file; set 'delimiter'")


def iter_table(
    path: Path, delimiter: str | None = None, fieldnames: list[str] | None = None
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number where the record starts, row as dict) for a CSV/TSV file with a header row
    (or with ``fieldnames`` given for a file without one). Quoted fields may span lines; a row
    with the wrong number of fields, a quote still open at the end of the file and a field over
    ``MAX_FIELD_CHARS`` are errors naming their line."""
    path = Path(path)
    text = read_text(path)
    separator = delimiter_for(path, delimiter)
    lines = _Lines(text)
    reader = csv.reader(lines, delimiter=separator)
    header = fieldnames
    start = 1
    try:
        for row in reader:
            line, start = start, reader.line_num + 1
            if lines.ended:  # the reader ran out of lines inside a record: a quote never closed
                opened = _open_quote_line(text, line, separator)
                raise InputError(
                    path, opened, 'a quoted field opens here and is never closed (missing ")'
                )
            if not row or all(not cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip() for cell in row]
                if len(set(header)) != len(header):
                    raise InputError(path, line, f"header names a column twice: {quote(header)}")
                continue
            if len(row) != len(header):
                raise InputError(
                    path,
                    line,
                    f"expected {len(header)} fields ({clip(', '.join(header))}), found {len(row)}",
                )
            yield line, dict(zip(header, row, strict=True))
    except csv.Error as err:
        if "field limit" in str(err):
            raise InputError(
                path,
                start,
                f"a field of the record starting here is over the limit of {MAX_FIELD_CHARS:,} "
                "characters (a quote never closed?)",
            ) from None
        raise InputError(path, reader.line_num, f"malformed CSV: {err}") from None
    if header is None:
        raise InputError(path, None, "file has no header row")


class _Lines:
    """The lines of a text as csv reads them, noting when it asks for one past the last: the
    reader only does that inside a record, when a quoted field is still open."""

    def __init__(self, text: str):
        self._lines = io.StringIO(text, newline="")
        self.ended = False

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._lines.readline()
        if not line:
            self.ended = True
            raise StopIteration
        return line


def _open_quote_line(text: str, start: int, delimiter: str) -> int:
    """The line on which the quote still open at the end of ``text`` opened, scanning from the
    record that starts on line ``start`` (csv's rules: a quote opens only at a field's start)."""
    opened, in_quote, field_start = start, False, True
    lines = io.StringIO(text, newline="").readlines()
    for number, line in enumerate(lines[start - 1 :], start=start):
        position = 0
        while position < len(line):
            char = line[position]
            if in_quote:
                if char == '"' and line[position + 1 : position + 2] == '"':
                    position += 1  # an escaped quote
                elif char == '"':
                    in_quote = False
            elif char == '"' and field_start:
                in_quote, opened = True, number
            field_start = not in_quote and char in (delimiter, "\n", "\r")
            position += 1
    return opened


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a JSON Lines file."""
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            value = loads_strict(line)
        except ValueError as err:
            raise InputError(path, number, json_problem(err)) from None
        if not isinstance(value, dict):
            raise InputError(path, number, f"expected a JSON object, found {type(value).__name__}")
        yield number, value


def loads_strict(text: str) -> object:
    """``json.loads`` of one JSON text, refusing an object that gives a key twice (as manifests
    refuse a YAML key given twice) and one nested deeper than ``nrp.jsontext.MAX_DEPTH``: the one
    JSON parser of every input file reader."""
    return jsontext.loads(text, object_pairs_hook=unique_keys)


def json_problem(err: ValueError) -> str:
    """What is wrong with a line ``json.loads`` refused: a syntax error with its column, or a
    number too long to convert (Python's 4,300-digit limit raises a plain ValueError)."""
    if isinstance(err, json.JSONDecodeError):
        return f"invalid JSON: {err.msg} at column {err.colno}"
    if isinstance(err, DuplicateKey):
        return f"invalid JSON: {err}"
    return f"invalid JSON: {clip(str(err).split(';')[0])}"  # a number too long, say how long


def iter_records(
    path: Path, delimiter: str | None = None, fieldnames: list[str] | None = None
) -> Iterator[tuple[int, dict]]:
    """Rows of a CSV, TSV or JSONL file, chosen by suffix (``.jsonl``/``.json`` is JSON Lines)."""
    if Path(path).suffix.lower() in (".jsonl", ".json", ".ndjson"):
        return iter_jsonl(path)
    return iter_table(path, delimiter, fieldnames)


@dataclass
class XmlNode:
    """An XML element with the line it starts on (ElementTree keeps no line numbers)."""

    tag: str
    attrib: dict[str, str]
    line: int
    children: list[XmlNode] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    # character data and child elements in document order, for itertext()
    content: list[str | XmlNode] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The element's own character data (not its children's), stripped."""
        return "".join(self.text_parts).strip()

    def find(self, tag: str) -> XmlNode | None:
        return next((child for child in self.children if child.tag == tag), None)

    def findall(self, tag: str) -> list[XmlNode]:
        return [child for child in self.children if child.tag == tag]

    def iter(self, tag: str) -> Iterator[XmlNode]:
        if self.tag == tag:
            yield self
        for child in self.children:
            yield from child.iter(tag)

    def itertext(self) -> str:
        """All character data below this element, children included, whitespace-normalised."""
        parts: list[str] = []

        def walk(node: XmlNode) -> None:
            for item in node.content:
                if isinstance(item, str):
                    parts.append(item)
                else:
                    walk(item)

        walk(self)
        return " ".join("".join(parts).split())


def parse_xml(path: Path, text: str | None = None) -> XmlNode:
    """Parse a UTF-8 XML file into ``XmlNode``s; a syntax error names its line. ``text``, when
    given, stands in for the file's content (a reader that repaired it, keeping its lines)."""
    if text is None:
        text = read_text(path)
    parser = xml.parsers.expat.ParserCreate("utf-8")
    root: list[XmlNode] = []
    stack: list[XmlNode] = []

    def start(tag: str, attrib: dict[str, str]) -> None:
        node = XmlNode(tag, attrib, parser.CurrentLineNumber)
        if stack:
            stack[-1].children.append(node)
            stack[-1].content.append(node)
        else:
            root.append(node)
        stack.append(node)

    def end(tag: str) -> None:
        stack.pop()

    def chars(data: str) -> None:
        if stack:
            stack[-1].text_parts.append(data)
            stack[-1].content.append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(text.encode("utf-8"), True)
    except xml.parsers.expat.ExpatError as err:
        problem = xml.parsers.expat.ErrorString(err.code)
        raise InputError(path, err.lineno, f"malformed XML: {problem}") from None
    return root[0]


def require(value: str | None, path: Path, line: int | None, what: str) -> str:
    """``value`` stripped, or an InputError saying that ``what`` is missing."""
    if value is None or not str(value).strip():
        raise InputError(path, line, f"{what} is missing or empty")
    return str(value).strip()
