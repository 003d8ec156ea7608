"""Whitespace-separated judgment files: TREC qrels (``qid iteration docno grade``, one dimension
per file) and the wide layout (``qid docno g1 g2 ...``, one column per dimension) in which some
collections ship several dimensions side by side."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import chain
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.reading import iter_lines
from nrp.collection.records import Judgment, Origin
from nrp.errors import ConfigError, InputError, clip
from nrp.tables import require_columns

# First fields that mark a line of a wide file as its header, not a judgment.
HEADER_FIRST_FIELDS = {"qid", "query_id", "queryid", "topic", "topic_id", "topicid"}


def _fields(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, whitespace-separated fields) of every non-blank line."""
    for number, line in iter_lines(path):
        fields = line.split()
        if fields:
            yield number, fields


def read_qrels(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Judgment]:
    """One judgment per ``qid iteration docno grade`` line; the iteration column is unused."""
    dimension = options["dimension"]
    found = False
    for number, fields in _fields(path):
        if len(fields) != 4:
            raise InputError(
                path, number, f"expected 4 fields (qid iteration docno grade), found {len(fields)}"
            )
        qid, _iteration, docno, grade = fields
        found = True
        yield Judgment(qid, docno, dimension, grade, Origin(str(path), number))
    if not found:
        raise InputError(path, None, "no judgments in the file")


def _wide_columns(
    path: Path, header: tuple[int, list[str]] | None, dimensions: list | Mapping
) -> list[tuple[int, str]]:
    """(field index, dimension) of each grade column, from the header when there is one."""
    if isinstance(dimensions, Mapping):
        if header is None:
            raise InputError(
                path, 1, "'dimensions' maps header columns, but the file has no header line"
            )
        line, names = header
        grades = [str(column) for column in dimensions]
        require_columns(names[2:], grades, path, line=line, hint="grade columns follow qid, docno")
        return [(names.index(str(column)), str(name)) for column, name in dimensions.items()]
    if header is not None and len(header[1]) - 2 != len(dimensions):
        line, names = header
        raise InputError(
            path,
            line,
            f"header has {len(names) - 2} grade column(s) ({clip(' '.join(names[2:]))}) but "
            f"'dimensions' names {len(dimensions)}",
        )
    return [(index + 2, str(name)) for index, name in enumerate(dimensions)]


def _is_header(fields: list[str], dimensions: list | Mapping, option: bool | None) -> bool:
    if option is not None:
        return option
    grade_names = [str(name) for name in dimensions]  # a mapping's keys: header column names
    return fields[0].lower() in HEADER_FIRST_FIELDS or fields[2:] == grade_names


def read_wide(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Judgment]:
    """One judgment per grade column of each ``qid docno g1 g2 ...`` line."""
    dimensions = options["dimensions"]
    if not dimensions:
        raise ConfigError("qrels-wide: option 'dimensions' must name at least one dimension")
    lines = _fields(path)
    first = next(lines, None)
    if first is None:
        raise InputError(path, None, "no judgments in the file")
    header = first if _is_header(first[1], dimensions, options["header"]) else None
    columns = _wide_columns(path, header, dimensions)
    used = {index for index, _ in columns}
    ignored = [] if header is None else [n for i, n in enumerate(header[1][2:], 2) if i not in used]
    if ignored:
        report.counted_warning(
            "grade columns ignored",
            len(ignored),
            f"{path}: column(s) {', '.join(ignored)} not in 'dimensions'; ignored",
        )
    width = len(header[1]) if header is not None else len(columns) + 2
    names = header[1] if header is not None else ["qid", "docno", *(d for _, d in columns)]
    found = False
    for number, fields in lines if header is not None else chain([first], lines):
        if len(fields) != width:
            raise InputError(
                path,
                number,
                f"expected {width} fields ({clip(' '.join(names))}), found {len(fields)}",
            )
        found = True
        origin = Origin(str(path), number)
        for index, dimension in columns:
            yield Judgment(fields[0], fields[1], dimension, fields[index], origin)
    if not found:
        raise InputError(path, None, "no judgments in the file (only a header line)")


FORMATS = (
    Format(
        name="trec-qrels",
        description="TREC qrels: whitespace-separated 'qid iteration docno grade' lines, one "
        "dimension per file",
        provides=("judgments",),
        read=read_qrels,
        options={
            "dimension": Option(str, "the quality dimension the grades are in", required=True)
        },
    ),
    Format(
        name="qrels-wide",
        description="whitespace-separated 'qid docno g1 g2 ...' lines, one grade column per "
        "dimension, with an optional header line ('qid docno rel cred read')",
        provides=("judgments",),
        read=read_wide,
        options={
            "dimensions": Option(
                (list, dict),
                "dimension names in grade-column order, or a mapping header column -> dimension",
                required=True,
            ),
            "header": Option(
                bool,
                "whether the first line is a header (default: yes when it starts with 'qid' or "
                "its grade columns are the names in 'dimensions')",
            ),
        },
    ),
)

register(*FORMATS)
