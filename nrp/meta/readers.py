"""The tables of a meta-evaluation, read and checked: scores and human labels alike.

``read_table`` reads CSV, TSV, JSON Lines or Parquet, or an output folder (its
``evaluations.parquet`` / ``.csv``, what ``nrp evaluate`` writes, else ``results.parquet`` /
``.csv``), through ``nrp.tables.read_table_file``. Delimited files are read as text so ids keep
their spelling (qid ``007`` stays ``007``); a column is then numeric when every non-empty value
is a number (empty = missing), otherwise text. The frame keeps its file lines
(``attrs["lines"]``), so every check here (``check_numeric``, ``check_unique_items``) refuses a
value in one ``InputError`` line naming the file and the line. ``tie_group_grades`` turns a
ranking given as tie groups into labels, for every reader of rankings (``nrp.meta.human``,
``nrp.meta.labelstudio``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from nrp.errors import InputError
from nrp.tables import find_table, read_table_file

RESULT_FILES = ("evaluations.parquet", "evaluations.csv", "results.parquet", "results.csv")


def read_table(path: str | Path, text_columns: Sequence[str] = ()) -> pd.DataFrame:
    """A table from CSV/TSV/JSONL/Parquet (or a results folder). ``text_columns`` are kept as
    text even when every value looks like a number (ids)."""
    table = read_table_file(find_table(path, RESULT_FILES))
    frame = table.frame
    if frame.empty:
        raise InputError(table.path, None, "no rows")
    frame.attrs["path"] = str(table.path)
    frame.attrs["lines"] = table.lines
    for column in frame.columns:
        if column in text_columns:
            frame[column] = _as_text(frame[column])
        else:
            frame[column] = _maybe_numeric(frame[column])
    return frame


def _as_text(column: pd.Series) -> pd.Series:
    def text(value: object) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    return column.map(text).astype(object)


def _maybe_numeric(column: pd.Series) -> pd.Series:
    """Numbers when every non-empty value is one (empty / None = NaN), else the column as is."""
    if pd.api.types.is_bool_dtype(column):
        return column
    if pd.api.types.is_numeric_dtype(column):
        return column.astype(float)
    as_text = column.map(_blank_or_text)
    if (as_text == "").all():
        return column
    if column.map(lambda v: isinstance(v, bool)).any():
        return column
    values = pd.to_numeric(as_text.where(as_text != ""), errors="coerce")
    if (values.isna() & (as_text != "")).any():
        return column
    return values.astype(float)


def _blank_or_text(value: object) -> str:
    """'' for a missing value (None, NaN: an absent JSON key), else the stripped text."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return str(value).strip()


def line_of(frame: pd.DataFrame, position: int) -> int | None:
    """The file line of the frame's row at ``position`` (None for Parquet)."""
    lines = frame.attrs.get("lines")
    return None if lines is None else int(lines[position])


def check_numeric(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    """Each column numeric; else an InputError at the first value that is not a number."""
    for column in columns:
        if pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(
            frame[column]
        ):
            continue
        text = frame[column].map(_blank_or_text)
        values = pd.to_numeric(text.where(text != ""), errors="coerce")
        bad = np.flatnonzero((values.isna() & (text != "")).to_numpy())
        if len(bad) == 0:
            frame[column] = values.astype(float)
            continue
        raise InputError(
            frame.attrs.get("path"),
            line_of(frame, int(bad[0])),
            f"{column} {text.iloc[bad[0]]!r} is not a number",
        )


def item_keys(frame: pd.DataFrame, id_column: str) -> list[str]:
    """The columns that name an item: its id within its query (``qid``, id) when the table has
    a query column, so ids need be unique within a query only (a judged document's docno
    under two topics, answers numbered per question), else the id alone."""
    return ["qid", id_column] if "qid" in frame.columns else [id_column]


def check_unique_items(frame: pd.DataFrame, id_column: str, path: str | Path | None) -> None:
    """Refuse a table that names an item twice (which row would count?), at the second row."""
    keys = item_keys(frame, id_column)
    duplicated = np.flatnonzero(frame.duplicated(subset=keys).to_numpy())
    if len(duplicated):
        position = int(duplicated[0])
        where = f" for qid {frame['qid'].iloc[position]!r}" if len(keys) == 2 else ""
        raise InputError(
            path,
            line_of(frame, position),
            f"{id_column} {frame[id_column].iloc[position]!r} is given twice{where}",
        )


def partly_numeric(column: pd.Series) -> bool:
    """Whether some value of the column is a number (a label column, perhaps with a typo)."""
    if pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_numeric_dtype(column):
        return True
    text = column.map(_blank_or_text)
    return bool(pd.to_numeric(text.where(text != ""), errors="coerce").notna().any())


def tie_group_grades(groups: Sequence[Sequence[str]]) -> list[tuple[str, float]]:
    """Each item of a ranking given as tie groups, best first, with its label: the number of
    items ranked strictly below it (n-1, ..., 0 without ties; ``[a, [b, c], d]``: 3, 1, 1, 0)."""
    below = sum(len(group) for group in groups)
    out: list[tuple[str, float]] = []
    for group in groups:
        below -= len(group)
        out.extend((item, float(below)) for item in group)
    return out
