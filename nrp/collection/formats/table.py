"""One kind of record (topics, documents, judgments or references) in a CSV, TSV or JSON Lines
table: the catch-all for collections that ship their data as spreadsheets or dataframes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.reading import iter_records, read_text
from nrp.collection.records import Document, Judgment, Origin, Record, Reference, Topic
from nrp.errors import ConfigError, InputError, quote
from nrp.tables import require_columns

# Our field names, each with the file column it is read from unless `columns` says otherwise.
DEFAULT_COLUMNS: dict[str, dict[str, str]] = {
    "topics": {"qid": "qid", "query": "query", "narrative": "narrative"},
    "documents": {"docno": "docno", "text": "text", "url": "url", "title": "title"},
    "references": {"qid": "qid", "text": "text", "ref_id": "ref_id"},
    "judgments": {"qid": "qid", "docno": "docno", "grade": "grade"},
}
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "topics": ("qid", "query"),
    "documents": ("docno", "text"),
    "references": ("qid", "text"),
    "judgments": ("qid", "docno", "grade"),
}
# Fields whose value must be unique in one file (the id of what the row declares).
UNIQUE_FIELD = {"topics": "qid", "documents": "docno"}


class _Layout:
    """What the options ask for, checked once: the field -> column map, the required columns,
    and for judgments each grade column with its dimension."""

    def __init__(self, options: Mapping[str, Any]):
        self.holds = options["holds"]
        if self.holds not in DEFAULT_COLUMNS:
            raise ConfigError(
                f"table: option 'holds' must be one of {', '.join(DEFAULT_COLUMNS)}, "
                f"got {quote(self.holds)}"
            )
        given = dict(options["columns"] or {})
        unknown = sorted(set(given) - set(DEFAULT_COLUMNS[self.holds]))
        if unknown:
            raise ConfigError(
                f"table: option 'columns' names {', '.join(unknown)}, which {self.holds} do not "
                f"have (known: {', '.join(DEFAULT_COLUMNS[self.holds])})"
            )
        self.columns = {**DEFAULT_COLUMNS[self.holds], **given}
        self.required = {self.columns[name] for name in REQUIRED_FIELDS[self.holds]}
        self.required |= {self.columns[name] for name in given}  # asked for by name: must exist
        self.long_form = bool(options["dimension"])
        self.grade_columns = self._grade_columns(options)
        self.topic_fields = self._topic_fields(options["fields"])
        self.required |= set(self.topic_fields.values())

    def _topic_fields(self, fields: Any) -> dict[str, str]:
        """Topic field -> column: the other texts of a topic (a paraphrase, a short form)."""
        if not fields:
            return {}
        if self.holds != "topics":
            raise ConfigError(f"table: 'fields' only apply to topics, not {self.holds}")
        if isinstance(fields, Mapping):
            return {str(name): str(column) for name, column in fields.items()}
        return {str(name): str(name) for name in fields}

    def _grade_columns(self, options: Mapping[str, Any]) -> dict[str, str]:
        """Grade column -> dimension: one column (long form) or several (wide form)."""
        dimension, dimensions = options["dimension"], options["dimensions"]
        if self.holds != "judgments":
            if dimension or dimensions:
                raise ConfigError(
                    f"table: 'dimension(s)' only apply to judgments, not {self.holds}"
                )
            return {}
        if bool(dimension) == bool(dimensions):
            raise ConfigError(
                "table: judgments need exactly one of 'dimension' (one grade column) or "
                "'dimensions' (one column per dimension)"
            )
        if dimension:
            return {self.columns["grade"]: str(dimension)}
        self.required.discard(self.columns["grade"])
        if "grade" in (options["columns"] or {}):
            raise ConfigError("table: 'columns.grade' does not apply with 'dimensions'")
        grade_columns = (
            {str(column): str(name) for column, name in dimensions.items()}
            if isinstance(dimensions, Mapping)
            else {str(name): str(name) for name in dimensions}
        )
        self.required |= set(grade_columns)
        return grade_columns


def _value(row: Mapping[str, Any], column: str, path: Path, line: int) -> str | None:
    """The cell as stripped text, None when absent or empty (JSON numbers become text)."""
    value = row.get(column)
    if value is None:
        return None
    if isinstance(value, dict | list):
        raise InputError(path, line, f"column {quote(column)}: expected text, found a JSON value")
    if isinstance(value, bool):
        value = str(value).lower()
    return str(value).strip() or None


def _header_line(path: Path) -> int:
    """Line of a CSV/TSV file's header row: its first non-blank line (read again, on error only)."""
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        if line.strip():
            return number
    return 1


def _check_columns(
    path: Path, row: Mapping[str, Any], line: int, layout: _Layout, options: Mapping[str, Any]
) -> None:
    """A missing required column is an error naming the header line (per row for JSONL)."""
    missing = sorted(column for column in layout.required if column not in row)
    if not missing:
        return
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        require_columns(row, missing, path, line=line)
    if options["fieldnames"]:
        raise ConfigError(
            f"table: option 'fieldnames' lacks column(s) {', '.join(missing)} for {path}"
        )
    require_columns(row, missing, path, line=_header_line(path))


def read(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """Records of the one kind ``holds`` names, one (or, for wide judgments, several) per row."""
    layout = _Layout(options)
    path = Path(path)
    is_jsonl = path.suffix.lower() in (".jsonl", ".json", ".ndjson")
    first_line: dict[str, int] = {}
    rows = 0
    for line, row in iter_records(path, options["delimiter"], options["fieldnames"]):
        if rows == 0 or is_jsonl:
            _check_columns(path, row, line, layout, options)
        rows += 1
        values = {
            field: _value(row, column, path, line) for field, column in layout.columns.items()
        }
        for field in REQUIRED_FIELDS[layout.holds]:
            if field != "grade" and values[field] is None:
                raise InputError(
                    path, line, f"{field} (column {quote(layout.columns[field])}) is empty"
                )
        unique = UNIQUE_FIELD.get(layout.holds)
        if unique is not None:
            key = values[unique]
            if key in first_line:
                raise InputError(
                    path,
                    line,
                    f"{unique} {quote(key)} appears twice: first at {path}:{first_line[key]}",
                )
            first_line[key] = line
        yield from _records(path, line, row, values, layout, report)
    if rows == 0:
        raise InputError(path, None, f"no {layout.holds} in the file (only a header row)")


def _records(
    path: Path,
    line: int,
    row: Mapping[str, Any],
    values: dict[str, str | None],
    layout: _Layout,
    report: ReadReport,
) -> Iterator[Record]:
    origin = Origin(str(path), line)
    if layout.holds == "topics":
        fields = {
            name: text
            for name, column in layout.topic_fields.items()
            if (text := _value(row, column, path, line)) is not None
        }
        yield Topic(values["qid"], values["query"], values["narrative"], origin, fields or None)
    elif layout.holds == "documents":
        yield Document(values["docno"], values["text"], values["url"], values["title"], origin)
    elif layout.holds == "references":
        yield Reference(values["qid"], values["text"], values["ref_id"], origin)
    else:
        for column, dimension in layout.grade_columns.items():
            grade = _value(row, column, path, line)
            if grade is None and layout.long_form:
                raise InputError(path, line, f"grade (column {quote(column)}) is empty")
            if grade is None:
                report.count(f"empty {dimension} grades skipped")
                continue
            yield Judgment(values["qid"], values["docno"], dimension, grade, origin)


FORMAT = Format(
    name="table",
    description="CSV, TSV or JSON Lines (by suffix) holding one kind of record, one per row",
    provides=("topics", "documents", "judgments", "references"),
    read=read,
    options={
        "holds": Option(
            str, "what the rows are: topics | documents | judgments | references", required=True
        ),
        "columns": Option(
            dict,
            "our field -> the file's column; defaults: topics qid, query, narrative; documents "
            "docno, text, url, title; references qid, text, ref_id; judgments qid, docno, grade",
        ),
        "dimension": Option(str, "judgments, long form: the dimension of the one grade column"),
        "dimensions": Option(
            (list, dict),
            "judgments, wide form: grade columns named like their dimension (a list), or a "
            "mapping column -> dimension; an empty cell is skipped and counted",
        ),
        "delimiter": Option(
            str, "field separator, overriding the suffix (.csv ',', .tsv/.txt tab)"
        ),
        "fieldnames": Option(list, "column names of a CSV/TSV file that has no header row"),
        "fields": Option(
            (list, dict),
            "topics: other query texts kept as topic fields (a ranker reads one with "
            "query=NAME): columns named like their field (a list), or a mapping field -> column",
        ),
    },
)

register(FORMAT)
