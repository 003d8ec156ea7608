"""Tables in and out: reading a results table, plain-text tables, JSON/CSV writing.

Why a module of its own: every report prints aligned columns, p-values and intervals the same
way, and writes JSON that must not contain NaN (``json.dumps(allow_nan=False)``, as the
validation result does), so the conversions live in one place. Reading is here for the same
reason: the NRP summary reads the scoring step's results and meta-evaluation reads score and
label tables, through one reader (``read_table_file``: CSV, TSV, JSON Lines or Parquet by
suffix) that reports every unreadable file the same way, as one ``InputError`` line naming the
file and, where known, the line. What the columns mean (text ids, numbers) is the caller's.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from nrp import jsontext
from nrp.errors import ColumnsError, InputError

DELIMITERS = {".csv": ",", ".tsv": "\t"}
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")


class FrameView:
    """A result a notebook shows as its main table: ``to_frame()`` gives that table as a
    DataFrame (a copy), and Jupyter renders it through ``_repr_html_``; ``str()`` stays the
    text the CLI prints (``format``)."""

    def to_frame(self) -> pd.DataFrame:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(index=False, na_rep="")

    def __str__(self) -> str:
        """The text the CLI prints (``format``), not the fields' dump (``repr``)."""
        return self.format()  # type: ignore[attr-defined]


def one_row(frame: pd.DataFrame, **keys: Any) -> pd.Series:
    """The one row of ``frame`` whose columns equal ``keys`` (KeyError naming the keys when
    none or several match): the ``row(...)`` look-up of every result table."""
    match = np.ones(len(frame), dtype=bool)
    for column, value in keys.items():
        match &= (frame[column] == value).to_numpy()
    if match.sum() != 1:
        raise KeyError(tuple(keys.values()))
    return frame[match].iloc[0]


def require_columns(
    table: pd.DataFrame | Iterable[Any],
    columns: Iterable[str],
    source: str | Path | None = None,
    *,
    line: int | None = None,
    hint: str = "",
) -> None:
    """The one check of a table's columns: a ``ColumnsError`` naming ``source`` (the file, or
    what the table is; default: a frame's ``attrs["path"]``), the header ``line`` where known,
    every one of ``columns`` that ``table`` lacks and the columns it has, then ``hint`` (what
    the table should have been). ``table``: a frame, or a header's names (a row's keys)."""
    found = list(table.columns if isinstance(table, pd.DataFrame) else table)
    missing = [column for column in dict.fromkeys(columns) if column not in found]
    if not missing:
        return
    if source is None and isinstance(table, pd.DataFrame):
        source = table.attrs.get("path")
    raise ColumnsError(source, line, missing, found, hint)


def numeric_columns(frame: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """The columns of ``frame`` that hold numbers (booleans are flags, not scores), in order,
    less ``exclude``: the score columns of an evaluation table."""
    return [
        c
        for c in frame.columns
        if c not in set(exclude)
        and pd.api.types.is_numeric_dtype(frame[c])
        and not pd.api.types.is_bool_dtype(frame[c])
    ]


def format_p(p: float | None) -> str:
    """A p-value as validation prints it: three decimals, ``<0.001`` below that, ``-`` if none."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def format_number(value: float | None, digits: int = 4) -> str:
    """A number with fixed decimals, ``-`` when missing (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def format_interval(low: float | None, high: float | None, digits: int = 4) -> str:
    """``[low, high]``, or ``[-]`` when there is no interval (fewer than two queries)."""
    if low is None or high is None or _missing(low) or _missing(high):
        return "[-]"
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def _missing(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    """Left-aligned columns separated by two spaces; trailing blanks stripped."""
    table = [list(header), *(list(map(str, row)) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = []
    for row in table:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)


def jsonable(value: Any) -> Any:
    """Plain Python values for JSON: numpy scalars unwrapped, NaN and NA as None."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as JSON-ready dictionaries."""
    return [jsonable(row) for row in frame.to_dict("records")]


def write_aside(path: str | Path, write: Callable[[Path], Any]) -> None:
    """``write(partial_path)``, then rename onto ``path``: a reader never sees a half-written
    file, and an interrupted write leaves the previous file as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = partial_path(path)
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def partial_path(path: Path) -> Path:
    """Where ``path`` is written before it is renamed onto itself: ``.NAME.partial`` beside it."""
    return path.with_name(f".{path.name}.partial")


def write_text(path: str | Path, text: str) -> None:
    """Written aside, then renamed: a reader never sees a half-written file."""
    write_aside(path, lambda partial: partial.write_text(text, encoding="utf-8"))


def dumps(data: Any) -> str:
    """JSON text with NaN refused (it is not JSON): call ``jsonable`` first."""
    return json.dumps(jsonable(data), indent=1, allow_nan=False) + "\n"


def json_export(data: Any, path: str | Path | None = None) -> str:
    """``data`` as JSON text (NaN as null), written to ``path`` too when given."""
    text = dumps(data)
    if path is not None:
        write_text(path, text)
    return text


def csv_export(tables: dict[str, pd.DataFrame], folder: str | Path, prefix: str) -> dict[str, Path]:
    """Each table as ``{prefix}_{name}.csv`` in ``folder``; the paths by table name."""
    paths = {}
    for name, frame in tables.items():
        path = Path(folder) / f"{prefix}_{name}.csv"
        write_text(path, frame.to_csv(index=False))
        paths[name] = path
    return paths


#: one vocabulary for the library's result frames (``to_frame`` of validation, the NRP summary
#: and the check; docs/pyterrier.md, "Result frames"): a column a step's own table or file names
#: otherwise -> its name in those frames. ``name`` is the system (a ranker's name, or a model's
#: ``llm/prompt``), as in ``pt.Experiment``.
FRAME_VOCABULARY = {
    "system": "name",
    "mean_nrp": "mean",
    "n_queries": "queries",
    "n_answers": "answers",
    "p": "p_value",
    "p_holm": "p_corrected",
}
#: the columns a result frame leads with, in this order, where it has them
FRAME_LEADING = ("dimension", "ranker", "name", "qid", "measure", "value", "mean", "ci_low",
                 "ci_high", "queries")  # fmt: skip


def vocabulary_frame(frame: pd.DataFrame, measure: str | None = None) -> pd.DataFrame:
    """``frame`` in the result frames' vocabulary (``FRAME_VOCABULARY``; index reset), with a
    ``name`` of ``llm/prompt`` (the llm alone for an empty prompt) where it has those columns
    and no name, and ``measure`` set where given; ``FRAME_LEADING`` columns first."""
    out = frame.rename(columns=FRAME_VOCABULARY).reset_index(drop=True)
    if "name" not in out.columns and {"llm", "prompt"} <= set(out.columns):
        llm, prompt = out["llm"].astype(str), out["prompt"].astype(str)
        out["name"] = llm.where(prompt == "", llm + "/" + prompt)
    if measure is not None:
        out["measure"] = measure
    leading = [c for c in FRAME_LEADING if c in out.columns]
    return out[[*leading, *(c for c in out.columns if c not in leading)]]


class TableExports:
    """``to_dict``, ``to_json`` and ``to_csv`` once for the result classes that hold tables
    (summary, agreement, meta-evaluation, probes). A class names what it exports:
    ``JSON_FIELDS``, its attributes in the JSON object's order (a DataFrame written as its
    records, None as null, anything else as it is); ``CSV_TABLES``, the tables ``to_csv`` writes
    as ``{CSV_PREFIX}_{name}.csv``. ``exported(name)`` gives an attribute as exported; a class
    whose JSON or CSV form of a table differs from the table overrides it (or ``csv_tables``)."""

    JSON_FIELDS: ClassVar[tuple[str, ...]] = ()
    CSV_TABLES: ClassVar[tuple[str, ...]] = ()
    CSV_PREFIX: ClassVar[str] = ""

    def exported(self, name: str) -> Any:
        """The attribute ``name`` as exported (a frame, a dictionary, a list, ...)."""
        value = getattr(self, name)
        return list(value) if isinstance(value, list) else value

    def to_dict(self) -> dict[str, Any]:
        """The ``JSON_FIELDS``, tables as lists of records."""
        out = {}
        for name in self.JSON_FIELDS:
            value = self.exported(name)
            out[name] = records(value) if isinstance(value, pd.DataFrame) else value
        return out

    def to_json(self, path: str | Path | None = None) -> str:
        """``to_dict`` as JSON text (NaN as null); written to ``path`` too when given."""
        return json_export(self.to_dict(), path)

    def csv_tables(self) -> dict[str, pd.DataFrame]:
        """name -> table of the ``CSV_TABLES`` (those that are None left out)."""
        tables = {name: self.exported(name) for name in self.CSV_TABLES}
        return {name: table for name, table in tables.items() if table is not None}

    def to_csv(self, folder: str | Path) -> dict[str, Path]:
        """Each of ``csv_tables`` as ``{CSV_PREFIX}_{name}.csv`` in ``folder``; the paths by
        table."""
        return csv_export(self.csv_tables(), folder, self.CSV_PREFIX)


# -- reading ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TableFile:
    """A table as read from ``path``: ``frame`` holds a delimited file's cells as text (empty
    cells as ''), JSON Lines values as parsed (lists and objects as JSON text), Parquet columns
    as stored; ``lines`` is each row's line in the file (None for Parquet)."""

    frame: pd.DataFrame
    path: Path
    lines: np.ndarray | None

    def first_line(self, rows: pd.Series | np.ndarray) -> int | None:
        """The file line of the first row where ``rows`` (a boolean mask) is true (None for
        Parquet, which has no lines)."""
        first = int(np.flatnonzero(np.asarray(rows))[0])
        return None if self.lines is None else int(self.lines[first])


def distinct(column: pd.Series) -> list[Any]:
    """The distinct values of a column in order of first appearance, as ``dict.fromkeys`` of a
    column without missing values gives them (every missing value counts as one here), without
    walking a text column value by value (a results file of a million answers has two million
    rows)."""
    return column.drop_duplicates().tolist()


def text_column(column: pd.Series) -> pd.Series:
    """Text labels, missing ones as '' (a ranker-less combined row, a run without prompts). A
    column of pandas' text type is filled in place of being turned into Python strings and
    back (the same values: a results file of a million answers has several such columns)."""
    if isinstance(column.dtype, pd.StringDtype):
        return column.fillna("").astype(str)
    return column.astype(object).where(column.notna(), "").astype(str)


def find_table(path: str | Path, folder_files: Sequence[str]) -> Path:
    """``path`` itself, or for a folder the first of ``folder_files`` in it; an InputError when
    there is none or the file does not exist."""
    path = Path(path)
    if path.is_dir():
        found = [path / name for name in folder_files if (path / name).is_file()]
        if not found:
            raise InputError(path, None, f"no {' or '.join(folder_files)} in this folder")
        path = found[0]
    if not path.is_file():
        raise InputError(path, None, "file not found")
    return path


def read_table_file(path: str | Path) -> TableFile:
    """A CSV, TSV, JSON Lines or Parquet file, chosen by its suffix."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            frame = pd.read_parquet(path)
        except Exception as error:  # pyarrow's errors have no common base class
            raise InputError(path, None, f"not a readable Parquet file: {error}") from None
        return TableFile(frame, path, None)
    if suffix in DELIMITERS:
        frame = read_delimited(path, DELIMITERS[suffix])
        return TableFile(frame, path, np.arange(len(frame)) + 2)  # the header is line 1
    if suffix in JSONL_SUFFIXES:
        rows, lines = read_jsonl(path)
        frame = pd.DataFrame.from_records(rows)
        frame = frame.map(lambda v: json.dumps(v) if isinstance(v, list | dict) else v)
        return TableFile(frame, path, np.asarray(lines))
    raise InputError(path, None, "expected a .csv, .tsv, .jsonl or .parquet file")


def _utf8_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        line = path.read_bytes()[: error.start].count(b"\n") + 1
        raise InputError(path, line, "not UTF-8 text") from None


def read_delimited(path: Path, sep: str) -> pd.DataFrame:
    """Every cell as text (an empty cell as ''), so ids keep their spelling (``007``)."""
    text = _utf8_text(path)
    if not text.strip():
        raise InputError(path, None, "empty file")
    try:
        return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False)
    except pd.errors.ParserError as error:
        message = str(error)
        line = None
        if "line " in message:  # pandas: "Expected 3 fields in line 5, saw 4"
            digits = message.split("line ", 1)[1].split(",")[0].split()[0]
            line = int(digits) if digits.isdigit() else None
        raise InputError(path, line, f"not a readable table: {message.strip()}") from None


def read_jsonl(path: Path) -> tuple[list[dict], list[int]]:
    """The JSON objects of a JSON Lines file and their line numbers (blank lines skipped)."""
    rows, lines = [], []
    text = _utf8_text(path)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = jsontext.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(path, number, f"not valid JSON: {error.msg}") from None
        if not isinstance(value, dict):
            raise InputError(path, number, "expected a JSON object on each line")
        rows.append(value)
        lines.append(number)
    if not rows:
        raise InputError(path, None, "empty file")
    return rows, lines
