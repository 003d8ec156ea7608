"""Reading the human judgments of a meta-evaluation (its tables of scores and labels are read
by ``nrp.meta.readers``).

Human judgments (``read_human``) come in three shapes:

- **Graded labels per item**: a table with an item-id column (default ``answer_id``) and one or
  more label columns (numbers; or text labels such as TRUE / FALSE / NOT GIVEN for categorical
  meta-evaluation). Unless named, the label columns are the numeric ones; a column mixing
  numbers and text is an error at its first non-number (a typo in a label, not a text column).
  An id given twice is an error (which label would count?).
- **Rankings per query**: JSON Lines, one query per line, ``{"qid": ..., "ranking": [ids, best
  first]}``. A ranking of n items becomes graded labels n-1 (best), n-2, ..., 0 (worst) in a
  dimension named ``ranking``, with the line's qid as the query. Only the order within a query
  means anything: the per-query correlations are the meaningful ones (pooled and system-level
  numbers compare positions across queries of different lengths). A tie is a nested list, a
  group of items judged equal (``[a, [b, c], d]``): every item's label is the number of items
  ranked strictly below it (a 3, b and c 1, d 0), which is n-1, ..., 0 when there is no tie.
  An id twice in a ranking or in two rankings is an error.
- **Label Studio exports** of ranking projects (a .json file holding a JSON list of tasks;
  ``nrp.meta.labelstudio``): read as rankings keyed by (qid, item), the query texts mapped to
  qids by a ``QueryMap``; several annotators of one item give it the mean of their labels
  (``read_human_coders`` keeps them apart, for ``nrp annotators``).

Every problem is one ``InputError`` line naming the file, the line (the header is line 1 of a
delimited file; JSON Lines count from 1) and the problem; files are read by
``nrp.tables.read_table_file``, the reader of the NRP summary too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nrp import jsontext
from nrp.errors import InputError
from nrp.meta.labelstudio import ANNOTATOR, is_label_studio_export, read_label_studio_rankings
from nrp.meta.readers import (
    check_numeric,
    check_unique_items,
    line_of,
    partly_numeric,
    read_table,
    tie_group_grades,
)
from nrp.tables import JSONL_SUFFIXES, read_jsonl, require_columns

if TYPE_CHECKING:
    from nrp.meta.labelstudio import QueryMap

RANKING_DIMENSION = "ranking"


def read_human(
    path: str | Path,
    id_column: str = "answer_id",
    dimensions: Sequence[str] | None = None,
    categorical: bool = False,
    query_map: QueryMap | str | Path | None = None,
) -> pd.DataFrame:
    """Human judgments as one row per item: ``id_column``, the label columns, and ``qid`` when
    the input has a query column or is a ranking file. ``attrs["dimensions"]`` lists the label
    columns; ``attrs["kind"]`` is ``graded`` or ``ranking``. A Label Studio export (a .json
    list of tasks) is read by ``read_label_studio_human``, its query texts mapped to qids by
    ``query_map`` (a ``nrp.meta.labelstudio.QueryMap`` or a file of qid and query).

    ``dimensions``: the label columns to use (default: every numeric column other than the id
    and qid; with ``categorical``, every other column). Categorical labels are kept as text."""
    path = Path(path)
    if is_label_studio_export(path):
        return read_label_studio_human(path, id_column, query_map)
    if path.suffix.lower() in JSONL_SUFFIXES and path.is_file() and _is_ranking_file(path):
        return _read_rankings(path, id_column)
    frame = read_table(path, text_columns=[id_column, "qid"])
    line = 1 if frame.attrs["lines"] is not None else None
    require_columns(frame, [id_column], path, line=line, hint="the item id column")
    empty = np.flatnonzero((frame[id_column] == "").to_numpy())
    if len(empty):
        raise InputError(path, line_of(frame, int(empty[0])), f"empty {id_column}")
    check_unique_items(frame, id_column, path)
    others = [c for c in frame.columns if c not in (id_column, "qid")]
    if dimensions:
        require_columns(frame, dimensions, path, line=line, hint="the label columns named")
        chosen = list(dimensions)
    elif categorical:
        chosen = others
    else:
        # numeric columns are labels; a column mixing numbers and text is a broken label column
        # (reported at its first non-number), a column of text only is not a label
        chosen = [c for c in others if partly_numeric(frame[c])]
    if not chosen:
        raise InputError(path, None, "no label columns (numeric columns besides the id and qid)")
    if categorical:
        for column in chosen:
            frame[column] = frame[column].map(
                lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)
            )
    else:
        check_numeric(frame, chosen)
    keep = [id_column, *(["qid"] if "qid" in frame.columns else []), *chosen]
    out = frame[keep].copy()
    out.attrs.update(path=str(path), dimensions=chosen, kind="graded")
    return out


def _is_ranking_file(path: Path) -> bool:
    """A JSON Lines file whose first object has a ``ranking`` key."""
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    first = jsontext.loads(line)
                    return isinstance(first, dict) and "ranking" in first
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False  # read_table reports it with its line
    return False


def _read_rankings(path: Path, id_column: str) -> pd.DataFrame:
    rows, lines = read_jsonl(path)
    records: list[dict] = []
    seen: dict[str, int] = {}  # within one ranking: ids need be unique within a query only
    queries: set[str] = set()
    for row, number in zip(rows, lines, strict=True):
        qid = row.get("qid")
        if qid is None or str(qid).strip() == "":
            raise InputError(path, number, "no qid")
        qid = str(qid)
        if qid in queries:
            raise InputError(path, number, f"qid {qid!r} is ranked twice")
        queries.add(qid)
        ranking = row.get("ranking")
        if not isinstance(ranking, list) or not ranking:
            raise InputError(path, number, "ranking must be a non-empty list of item ids")
        groups = [entry if isinstance(entry, list) else [entry] for entry in ranking]
        seen = {}
        for position, group in enumerate(groups):
            if not group:
                raise InputError(path, number, f"ranking entry {position + 1} is an empty tie")
            for item in group:
                if item is None or isinstance(item, list | dict) or str(item).strip() == "":
                    raise InputError(
                        path, number, f"ranking entry {position + 1} is not an item id"
                    )
                item = str(item)
                if item in seen:
                    raise InputError(path, number, f"item {item!r} is ranked twice in this ranking")
                seen[item] = number
        for item, grade in tie_group_grades([[str(i) for i in group] for group in groups]):
            records.append({id_column: item, "qid": qid, RANKING_DIMENSION: grade})
    return ranking_frame(pd.DataFrame.from_records(records), path)


def ranking_frame(frame: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """Rows of (id, qid, ``ranking`` label) marked as the rankings read from ``path``."""
    frame.attrs.update(path=str(path), dimensions=[RANKING_DIMENSION], kind="ranking")
    return frame


def read_label_studio_human(
    path: str | Path, id_column: str = "answer_id", query_map: QueryMap | str | Path | None = None
) -> pd.DataFrame:
    """A Label Studio export of a ranking project (``nrp.meta.labelstudio``) as rankings, each
    item's label the mean over the annotators who ranked it (one annotator: their label).
    ``attrs["by_text"]``: some qid is a query's text."""
    long = read_label_studio_rankings(path, id_column, query_map)
    mean = long.groupby(["qid", id_column], sort=False)[RANKING_DIMENSION].mean().reset_index()
    frame = ranking_frame(mean[[id_column, "qid", RANKING_DIMENSION]], path)
    frame.attrs["by_text"] = long.attrs["by_text"]
    return frame


def read_human_coders(
    path: str | Path,
    id_column: str = "answer_id",
    categorical: bool = False,
    query_map: QueryMap | str | Path | None = None,
) -> dict[str, pd.DataFrame]:
    """The human labels of ``path`` per coder: a Label Studio export gives one ranking frame
    per annotator (named by ``completed_by``; the file's stem when it has one annotator), any
    other human file one frame named by its stem."""
    path = Path(path)
    if not is_label_studio_export(path):
        return {path.stem: read_human(path, id_column, categorical=categorical)}
    long = read_label_studio_rankings(path, id_column, query_map)
    coders = {}
    for annotator, rows in long.groupby(ANNOTATOR, sort=False):
        frame = rows.drop(columns=[ANNOTATOR]).reset_index(drop=True)
        coders[str(annotator)] = ranking_frame(frame, path)
    return {path.stem: next(iter(coders.values()))} if len(coders) == 1 else coders
