"""``html-folder``: a folder of saved web pages, one document per .html/.htm file.

Pages are raw web data, so their bytes may be in any encoding: it is detected (the one kind of
input where non-UTF-8 is not an error). Text is the page's main content, as for ``warc``; pages
whose text is shorter than ``min_length`` are dropped and counted, as the source study did.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.reading import folder_files
from nrp.collection.records import Document, Origin
from nrp.collection.text_extraction import ExtractionError, extract_page
from nrp.errors import ConfigError, InputError, quote

HTML_SUFFIXES = (".html", ".htm")
DOCNO_FROM = ("name", "path")


def html_files(folder: Path) -> list[Path]:
    """Every .html/.htm file below ``folder``, in a stable (sorted) order; a link out of the
    folder is an error (``folder_files``)."""
    return folder_files(folder, _is_page)


def _is_page(path: Path) -> bool:
    return path.suffix.lower() in HTML_SUFFIXES


def _docno(file: Path, folder: Path, docno_from: str) -> str:
    if docno_from == "name":
        return file.stem
    return file.relative_to(folder).with_suffix("").as_posix()


def check_min_length(value: Any, fmt: str) -> int:
    """``min_length`` as a non-negative int (the builder checks only the type)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            f"{fmt}: option 'min_length' must be a non-negative integer, got {quote(value)}"
        )
    return value


def read(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Document]:
    folder = Path(path)
    if not folder.exists():
        raise InputError(folder, None, "folder not found")
    if not folder.is_dir():
        raise InputError(folder, None, "is a file, expected a folder of .html/.htm files")
    min_length = check_min_length(options.get("min_length", 50), "html-folder")
    docno_from = options.get("docno_from", "name")
    if docno_from not in DOCNO_FROM:
        raise ConfigError(
            f"html-folder: option 'docno_from' must be one of {', '.join(DOCNO_FROM)}, "
            f"got {quote(docno_from)}"
        )
    files = html_files(folder)
    if not files:
        raise InputError(folder, None, "folder holds no .html or .htm files (searched recursively)")
    others = sum(1 for p in folder.rglob("*") if p.is_file() and not _is_page(p))  # not read
    if others:
        report.count("files skipped: not .html/.htm", others)

    seen: dict[str, Path] = {}
    for file in files:
        docno = _docno(file, folder, docno_from)
        if docno in seen:
            raise InputError(
                file,
                None,
                f"docno {quote(docno)} also comes from {seen[docno]}; set docno_from: path",
            )
        seen[docno] = file
        data = file.read_bytes()
        try:
            page = extract_page(data)
        except ExtractionError:
            report.count("documents dropped: HTML could not be parsed")
            continue
        if len(page.text) < min_length:
            report.count(f"documents dropped: text shorter than {min_length} characters")
            continue
        if page.encoding not in ("utf-8", "str"):
            report.count(f"pages decoded as {page.encoding}")
        yield Document(docno, page.text, None, page.title, Origin(str(file), None))


FORMAT = Format(
    name="html-folder",
    description=(
        "Folder of web pages (.html/.htm, searched recursively), one document per file: "
        "main-content text (resiliparse), <title> as title, encoding detected per page."
    ),
    provides=("documents",),
    read=read,
    options={
        "min_length": Option(
            int,
            "drop (and count) pages whose extracted text has fewer characters than this",
            default=50,
        ),
        "docno_from": Option(
            str,
            "'name': docno is the file name without suffix; 'path': the path below the folder "
            "without suffix (use when names repeat in subfolders)",
            default="name",
        ),
    },
    path_is_folder=True,
)

register(FORMAT)
