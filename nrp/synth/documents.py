"""The documents a test set is made from, and the passages they are cut into.

``read_documents(path, columns)`` reads either a table (``.csv``, ``.tsv``, ``.jsonl``: one
document per row, through ingest's strict line-aware reader ``iter_records``) or a folder of
``.txt``/``.md`` files (UTF-8) and saved web pages (``.html``/``.htm``: main-content text, any
encoding, as the ``html-folder`` format reads them). ``sentence_chunks(text, max_chars,
min_chars)`` cuts a document into passages of whole sentences.

Design choices, and why:

- **A bad document is counted, not fatal.** A knowledge base dumped from a CMS has empty pages
  and files in legacy encodings; one of them must not stop a run over thousands. An empty text,
  a file that is not UTF-8 and a page that cannot be parsed are skipped and counted
  (``DocumentReport``), and the counts go into the run's report; so is a second identical copy
  of a row (ingest merges those too). What makes the whole input
  unusable (no such path, a table that is not UTF-8, a table without the named columns) is a
  one-line error naming the file and line, as in ingest.
- **Passages follow the text's own boundaries**: paragraphs (line breaks), then sentences, packed
  greedily up to ``max_chars``, so a question is written about a readable, self-contained span.
  A sentence end is ``.``, ``!``, ``?`` or ``…`` followed by a space or directly by an upper-case
  letter: scraped news text (the Vietnamese chatbot articles) often lost the space between
  sentences ("...bão Trà Mi).Theo báo cáo..."). A sentence longer than ``max_chars`` is cut at the
  last space before the limit. A remainder shorter than ``min_chars`` joins the passage before
  it, and a document shorter than ``min_chars`` yields none (counted).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from nrp.collection.reading import folder_files, iter_records
from nrp.errors import InputError, quote
from nrp.tables import require_columns

TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".json")
TEXT_SUFFIXES = (".txt", ".md")
HTML_SUFFIXES = (".html", ".htm")
SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*")


@dataclass(frozen=True)
class SourceDocument:
    """One document read from the input: its id, text, title, and where it came from."""

    docno: str
    text: str
    title: str | None = None
    origin: str = ""


@dataclass(frozen=True)
class Passage:
    """A span of a document that questions are written about: ``docno`` is the passage's id in
    the output collection (``DOCNO#pN``, N from 1), ``source`` its document's id."""

    docno: str
    source: str
    index: int
    text: str
    title: str | None = None


@dataclass
class DocumentReport:
    """What reading the input gave: documents read, and documents skipped by reason."""

    read: int = 0
    skipped: Counter = field(default_factory=Counter)

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1


@dataclass(frozen=True)
class TableColumns:
    """The columns of a table input: document id, text, and (optional) title."""

    docno: str = "docno"
    text: str = "text"
    title: str = ""


def read_documents(
    path: str | Path, columns: TableColumns | None = None
) -> tuple[list[SourceDocument], DocumentReport]:
    """Documents of a table file or a folder (module docstring), in input order."""
    path = Path(path)
    report = DocumentReport()
    if not path.exists():
        raise InputError(path, None, "file or folder not found")
    if path.is_dir():
        documents = list(_folder(path, report))
    elif path.suffix.lower() in TABLE_SUFFIXES:
        documents = list(_table(path, columns or TableColumns(), report))
    else:
        raise InputError(
            path,
            None,
            f"not a table ({', '.join(TABLE_SUFFIXES)}) or a folder of "
            f"{', '.join(TEXT_SUFFIXES + HTML_SUFFIXES)} files",
        )
    report.read = len(documents)
    return documents, report


def _table(path: Path, columns: TableColumns, report: DocumentReport) -> Iterator[SourceDocument]:
    seen: dict[str, tuple[int, str]] = {}
    for line, row in iter_records(path):
        needed = [c for c in (columns.docno, columns.text, columns.title) if c]
        require_columns(row, needed, path, line=line)
        docno = str(row[columns.docno] if row[columns.docno] is not None else "").strip()
        if not docno:
            raise InputError(path, line, f"document id (column {quote(columns.docno)}) is empty")
        text = _paragraphs(str(row[columns.text] or ""))
        if docno in seen:
            first, first_text = seen[docno]
            if first_text != text:
                raise InputError(
                    path,
                    line,
                    f"document id {quote(docno)} appears twice with different texts: first at "
                    f"line {first}",
                )
            report.skip("identical duplicate document")  # as ingest merges them
            continue
        seen[docno] = (line, text)
        if not text:
            report.skip("empty document")
            continue
        title = " ".join(str(row[columns.title] or "").split()) if columns.title else ""
        yield SourceDocument(docno, text, title or None, f"{path}:{line}")


def _folder(folder: Path, report: DocumentReport) -> Iterator[SourceDocument]:
    from nrp.collection.text_extraction import ExtractionError, extract_page

    files = folder_files(folder)  # a link out of the folder is an error
    for file in files:
        suffix = file.suffix.lower()
        docno = file.relative_to(folder).with_suffix("").as_posix()
        data = file.read_bytes()
        if suffix in TEXT_SUFFIXES:
            try:
                raw = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                report.skip("not UTF-8")
                continue
            text, title = _paragraphs(raw), None
        elif suffix in HTML_SUFFIXES:
            try:
                page = extract_page(data)
            except ExtractionError:
                report.skip("HTML could not be parsed")
                continue
            text, title = page.text, page.title
        else:
            report.skip(f"not {'/'.join(TEXT_SUFFIXES + HTML_SUFFIXES)}")
            continue
        if not text.strip():
            report.skip("empty document")
            continue
        yield SourceDocument(docno, text, title, str(file))


def _paragraphs(text: str) -> str:
    """Lines with their spaces collapsed, one paragraph per non-empty line."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


# -- passages ---------------------------------------------------------------------------------
def sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph (ends as in the module docstring), stripped."""
    out, start = [], 0
    for match in SENTENCE_END.finditer(paragraph):
        end = match.end()
        following = paragraph[end : end + 1]
        if end == len(paragraph) or following.isspace() or following.isupper():
            piece = paragraph[start:end].strip()
            if piece:
                out.append(piece)
            start = end
    rest = paragraph[start:].strip()
    if rest:
        out.append(rest)
    return out


def _cut(sentence: str, max_chars: int) -> list[str]:
    """A sentence over ``max_chars`` cut at the last space before each limit."""
    pieces = []
    while len(sentence) > max_chars:
        cut = sentence.rfind(" ", 0, max_chars + 1)
        cut = cut if cut > 0 else max_chars
        pieces.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    return [*pieces, sentence] if sentence else pieces


def sentence_chunks(text: str, max_chars: int = 1000, min_chars: int = 200) -> list[str]:
    """``text`` cut into passages of whole sentences (a longer sentence cut), packed up to
    ``max_chars`` characters, a short tail joined to the passage before (module docstring);
    not ``nrp.rankers.passages.split_passages``, the rankers' overlapping word windows."""
    units: list[tuple[str, bool]] = []  # (sentence, starts a paragraph)
    for paragraph in text.split("\n"):
        for position, sentence in enumerate(sentences(paragraph)):
            for j, piece in enumerate(_cut(sentence, max_chars)):
                units.append((piece, position == 0 and j == 0))
    passages: list[str] = []
    current = ""
    for piece, new_paragraph in units:
        joined = f"{current}{chr(10) if new_paragraph else ' '}{piece}" if current else piece
        if current and len(joined) > max_chars:
            passages.append(current)
            current = piece
        else:
            current = joined
    if current:
        if passages and len(current) < min_chars:
            passages[-1] = f"{passages[-1]} {current}"
        else:
            passages.append(current)
    return [p for p in passages if len(p) >= min_chars]


def document_passages(
    documents: list[SourceDocument],
    max_chars: int,
    min_chars: int,
    report: DocumentReport,
) -> list[Passage]:
    """Every document's passages; a document with none is counted as too short."""
    passages = []
    for document in documents:
        texts = sentence_chunks(document.text, max_chars, min_chars)
        if not texts:
            report.skip(f"shorter than {min_chars} characters")
            continue
        for index, text in enumerate(texts, start=1):
            passages.append(
                Passage(f"{document.docno}#p{index}", document.docno, index, text, document.title)
            )
    return passages
