"""Label Studio exports of ranking projects made elsewhere, read as human rankings.

A Label Studio export is a JSON list of tasks. A ranking task of a project nrp did not create
(``nrp review`` exports carry ``data.nrp_item`` instead: import those with ``nrp review
--import-label-studio``) shows one query and its candidates and holds one annotation per
annotator::

    {"id": 7,
     "data": {"query": "can vitamin c prevent colds",
              "items": [{"id": "c1", "docno": "d1-3", "text": "..."}, ...]},
     "annotations": [{"completed_by": {"email": "alice@lab.org"}, "was_cancelled": false,
                      "result": [{"type": "ranker", "from_name": "rank", "to_name": "items",
                                  "value": {"ranker": {"rank": ["c2", "c1", "c3"]}}}]}]}

- **The query**: ``data.qid`` when the task has one; else ``data.query``, the query's text,
  looked up in a ``QueryMap`` (query text -> qid, from a file or a collection's topics; texts
  compared with case and runs of white space ignored) when one is given, else the text itself
  stands for the qid.
- **The items**: ``data.items``, each named by its ``docno`` (else its ``id``); the ranker
  result names them by their Label Studio ``id`` (or by ``docno``).
- **The ranking** (``ranker_groups``, the one reading of a ``ranker`` result, also for nrp's
  own exports): ``value.ranker`` holding a single key equal to the result's ``from_name`` is
  one strict order, best first; otherwise each key is a ``Bucket``, in the order the result
  lists them, best first, its items tied. The ``_`` key (Label Studio's list of items placed in
  no bucket) and items placed nowhere are not ranked and get no label.
- **Labels**: as for any ranking file (``nrp.meta.readers.tie_group_grades``): an item's label
  is the number of items ranked strictly below it, in a dimension ``ranking``.

Cancelled annotations are skipped. One annotator (``completed_by``: an email, a name or a user
id) ranks a query once. Every problem is one ``InputError`` naming the file and the task (its
1-based position in the list, and its id).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from nrp import jsontext
from nrp.errors import InputError, quote
from nrp.jsontext import unique_keys
from nrp.meta.readers import check_unique_items, line_of, read_table, tie_group_grades
from nrp.tables import require_columns

#: the Ranker tag's name in nrp's own labeling configuration and Label Studio's examples
RANKER = "rank"
#: Label Studio's key for the items a bucketed ranker left in the list (not ranked)
UNPLACED = "_"
ANNOTATOR = "annotator"


def ranker_groups(result: Any, where: str, path: str | Path) -> list[list[str]]:
    """The tie groups, best first, of the one ``ranker`` result in an annotation's ``result``
    list (see the module docstring): item ids as text, as the annotator named them."""
    if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
        raise InputError(path, None, f"{where}: result must be a list of objects")
    found = [r for r in result if r.get("type") == "ranker"]
    if len(found) != 1:
        raise InputError(path, None, f"{where}: one ranker result expected, found {len(found)}")
    value = found[0].get("value")
    ranker = value.get("ranker") if isinstance(value, dict) else None
    if not isinstance(ranker, dict) or not ranker:
        raise InputError(path, None, f"{where}: value.ranker must be an object")
    for key, ids in ranker.items():
        if not isinstance(ids, list) or any(i is None or isinstance(i, list | dict) for i in ids):
            raise InputError(path, None, f"{where}: value.ranker.{key} must be a list of ids")
    name = found[0].get("from_name", RANKER)
    if name in ranker and len(ranker) == 1:
        return [[str(c)] for c in ranker[name]]
    return [[str(c) for c in ids] for key, ids in ranker.items() if key != UNPLACED and ids]


def normalise_query(text: object) -> str:
    """A query text as the query map compares it: case and runs of white space ignored."""
    return " ".join(str(text).split()).casefold()


@dataclass(frozen=True)
class QueryMap:
    """Query text -> qid (``normalise_query`` texts); ``source`` names it in messages."""

    qids: Mapping[str, tuple[str, ...]]
    source: str

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, source: str) -> QueryMap:
        """From a table with ``qid`` and ``query`` columns (a collection's topics)."""
        qids: dict[str, tuple[str, ...]] = {}
        for qid, text in zip(frame["qid"], frame["query"], strict=True):
            key = normalise_query(text)
            if str(qid) not in qids.get(key, ()):
                qids[key] = (*qids.get(key, ()), str(qid))
        return cls(qids, source)

    @classmethod
    def read(cls, path: str | Path) -> QueryMap:
        """From a CSV/TSV/JSONL/Parquet file with ``qid`` and ``query`` columns."""
        frame = read_table(path, text_columns=["qid", "query"])
        line = 1 if frame.attrs["lines"] is not None else None
        require_columns(frame, ("qid", "query"), path, line=line, hint="a query map")
        for column in ("qid", "query"):
            blank = (frame[column].str.strip() == "").to_numpy().nonzero()[0]
            if len(blank):
                raise InputError(path, line_of(frame, int(blank[0])), f"empty {column}")
        return cls.from_frame(frame, str(path))

    def qid(self, text: str, where: str, path: str | Path) -> str:
        found = self.qids.get(normalise_query(text), ())
        if len(found) != 1:
            problem = "is not in" if not found else f"names several queries {list(found)} in"
            raise InputError(path, None, f"{where}: query {quote(text)} {problem} {self.source}")
        return found[0]


def as_query_map(value: QueryMap | str | Path | None) -> QueryMap | None:
    """A ``QueryMap``, or one read from a file path."""
    return value if value is None or isinstance(value, QueryMap) else QueryMap.read(value)


def is_label_studio_export(path: Path) -> bool:
    """A .json file that is a JSON list (JSON Lines files start with an object)."""
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    with path.open("rb") as handle:
        start = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return start.startswith(b"[")


def read_label_studio_rankings(
    path: str | Path, id_column: str = "answer_id", query_map: QueryMap | str | Path | None = None
) -> pd.DataFrame:
    """The rankings of a Label Studio export as labels: one row per annotator and ranked item
    (``annotator``, ``qid``, ``id_column``, ``ranking``). ``attrs["by_text"]``: whether some
    qid is a query text (no qid in the task, no query map)."""
    path = Path(path)
    query_map = as_query_map(query_map)
    records: list[dict[str, Any]] = []
    ranked: dict[tuple[str, str], str] = {}  # (annotator, qid) -> the task that ranked it
    by_text = False
    for index, task in enumerate(_tasks(path), start=1):
        where = _task_where(index, task)
        data = _task_data(task, where, path)
        names = _item_names(data, where, path)
        annotations = _annotations(task, where, path)
        if not annotations:
            continue  # not annotated: its query need not be known
        qid, from_text = _task_qid(data, where, path, query_map)
        for annotator, groups in annotations:
            if (annotator, qid) in ranked:
                raise InputError(
                    path, None, f"{where}: {annotator} ranked query {quote(qid)} already in "
                    f"{ranked[annotator, qid]}",
                )  # fmt: skip
            ranked[annotator, qid] = where
            by_text |= from_text
            for item, grade in _grades(groups, names, where, path):
                records.append(
                    {ANNOTATOR: annotator, "qid": qid, id_column: item, "ranking": grade}
                )
    if not records:
        raise InputError(path, None, "no ranking annotation in this Label Studio export")
    frame = pd.DataFrame.from_records(records)
    frame.attrs.update(path=str(path), by_text=by_text)
    return frame


#: the prefix of a score column read from the items of a Label Studio export (``items.score``)
ITEM_SCORES = "items."


def read_label_studio_scores(
    path: str | Path,
    fields: list[str] | None = None,
    id_column: str = "answer_id",
    query_map: QueryMap | str | Path | None = None,
) -> pd.DataFrame:
    """The scores a Label Studio export of a ranking project carries in its items (the study's
    export holds each candidate's monoT5 score in ``data.items[].score``): one row per item
    (``qid``, ``id_column``: the item's name as the rankings name it, ``items.FIELD`` per
    field). ``fields``: ``items.FIELD`` names (or bare ``FIELD``); None: every field that is a
    number in every item. An item that lacks a named field, or holds no number in it, is an
    ``InputError`` naming the task."""
    path = Path(path)
    query_map = as_query_map(query_map)
    wanted = None if fields is None else [f.removeprefix(ITEM_SCORES) for f in fields]
    rows: list[dict[str, Any]] = []
    for index, task in enumerate(_tasks(path), start=1):
        where = _task_where(index, task)
        data = _task_data(task, where, path)
        _item_names(data, where, path)  # the items' names are checked as for the rankings
        if not _annotations(task, where, path):
            continue  # not annotated, as the rankings skip it: its query need not be known
        qid, _ = _task_qid(data, where, path, query_map)
        for number, item in enumerate(data["items"], start=1):
            row: dict[str, Any] = {"qid": qid, id_column: _item_name(item)}
            for field in wanted if wanted is not None else _numeric_fields(item):
                value = item.get(field)
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise InputError(
                        path, None, f"{where}: data.items entry {number} has no number in "
                        f"{quote(field)} (found {quote(value)})",
                    )  # fmt: skip
                row[ITEM_SCORES + field] = float(value)
            rows.append(row)
    frame = pd.DataFrame.from_records(rows)
    if wanted is None:  # the fields every item holds a number in
        frame = frame.dropna(axis=1, how="any")
    if not any(str(c).startswith(ITEM_SCORES) for c in frame.columns):
        raise InputError(path, None, "no numeric field in the items of this Label Studio export")
    # a query in two tasks (one per annotator) lists its items twice: once with the same scores,
    # an error with others (which score would count?)
    frame = frame.drop_duplicates(ignore_index=True)
    check_unique_items(frame, id_column, path)
    frame.attrs.update(path=str(path))
    return frame


def _numeric_fields(item: dict[str, Any]) -> list[str]:
    return [
        key for key, value in item.items()
        if key not in ("id", "docno") and isinstance(value, int | float)
        and not isinstance(value, bool)
    ]  # fmt: skip


def _tasks(path: Path) -> list[Any]:
    """The export's tasks, read as every input file is (a key given twice in one object, NaN or
    Infinity, nesting past ``nrp.jsontext.MAX_DEPTH``: refused, as the other readers refuse
    them, where ``json`` would keep the last key and read NaN)."""
    try:
        tasks = jsontext.loads(
            path.read_text(encoding="utf-8"), object_pairs_hook=unique_keys,
            parse_constant=_no_constant,
        )  # fmt: skip
    except (OSError, UnicodeDecodeError, ValueError) as err:
        line = getattr(err, "lineno", None)
        raise InputError(path, line, f"not a JSON file ({err})") from None
    if not isinstance(tasks, list):
        raise InputError(path, None, "a Label Studio export is a JSON list of tasks")
    return tasks


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _task_where(index: int, task: Any) -> str:
    """How errors name a task: its 1-based position in the export, and its id."""
    named = isinstance(task, dict) and task.get("id") is not None
    return f"task {index}" + (f" (id {task['id']})" if named else "")


def _item_name(item: dict[str, Any]) -> str:
    """An item's name: its ``docno``, else its ``id`` (as text)."""
    docno = item.get("docno")
    return str(docno if docno is not None else item.get("id"))


def _task_data(task: Any, where: str, path: Path) -> dict[str, Any]:
    if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
        raise InputError(path, None, f"{where}: no data object")
    data = task["data"]
    if "nrp_item" in data:
        raise InputError(
            path, None, f"{where}: an export of an nrp review project (data.nrp_item): import "
            "it with nrp review --import-label-studio and read the project's human files",
        )  # fmt: skip
    items = data.get("items")
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise InputError(
            path, None, f"{where}: no data.items (a ranking task lists its candidates there)"
        )
    return data


def _task_qid(
    data: dict[str, Any], where: str, path: Path, query_map: QueryMap | None
) -> tuple[str, bool]:
    """The task's qid, and whether it is the query's text (no qid, no map)."""
    for key in ("qid", "query"):
        value = data.get(key)
        if value is not None and not isinstance(value, list | dict) and str(value).strip():
            if key == "qid":
                return str(value), False
            if query_map is not None:
                return query_map.qid(str(value), where, path), False
            return normalise_query(value), True
    raise InputError(path, None, f"{where}: no data.query (the query's text) and no data.qid")


def _item_names(data: dict[str, Any], where: str, path: Path) -> dict[str, str]:
    """What a ranker result may call each item (its ``id``, its ``docno``) -> its name."""
    names: dict[str, str] = {}
    given: set[str] = set()
    for number, item in enumerate(data["items"], start=1):
        docno, label = item.get("docno"), item.get("id")
        name = docno if docno is not None else label
        if name is None or isinstance(name, list | dict) or not str(name).strip():
            raise InputError(path, None, f"{where}: data.items entry {number} has no docno or id")
        if str(name) in given:
            raise InputError(path, None, f"{where}: item {quote(str(name))} is listed twice")
        given.add(str(name))
        names.setdefault(str(name), str(name))
        if label is not None:
            if isinstance(label, list | dict) or not str(label).strip():
                raise InputError(path, None, f"{where}: data.items entry {number} has an id "
                                 f"that is no name: {quote(str(label))}")  # fmt: skip
            if names.get(str(label), str(name)) != str(name):
                raise InputError(
                    path, None, f"{where}: id {quote(str(label))} names two items "
                    f"({quote(names[str(label)])} and {quote(str(name))})",
                )  # fmt: skip
            names[str(label)] = str(name)  # the ranker's id comes first
    return names


def _annotations(task: dict[str, Any], where: str, path: Path) -> list[tuple[str, list]]:
    """(annotator, tie groups as named) per annotation that was not cancelled."""
    out: list[tuple[str, list]] = []
    annotations = task.get("annotations") or []
    if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
        raise InputError(path, None, f"{where}: annotations must be a list of objects")
    for annotation in annotations:
        if annotation.get("was_cancelled"):
            continue
        annotator = _annotator(annotation.get("completed_by"))
        if any(annotator == seen for seen, _ in out):
            raise InputError(path, None, f"{where}: two annotations by {annotator}")
        out.append((annotator, ranker_groups(annotation.get("result"), where, path)))
    return out


def _annotator(completed_by: Any) -> str:
    if isinstance(completed_by, dict):
        completed_by = completed_by.get("email") or completed_by.get("id")
    return "anonymous" if completed_by is None else str(completed_by)


def _grades(
    groups: list[list[str]], names: dict[str, str], where: str, path: Path
) -> list[tuple[str, float]]:
    if not groups:
        raise InputError(path, None, f"{where}: the ranker result ranks no item")
    resolved: list[list[str]] = []
    seen: set[str] = set()
    for group in groups:
        resolved.append([])
        for label in group:
            if label not in names:
                raise InputError(
                    path, None, f"{where}: the ranker names {quote(label)}, not an item of "
                    "data.items",
                )  # fmt: skip
            if names[label] in seen:
                raise InputError(path, None, f"{where}: item {quote(names[label])} ranked twice")
            seen.add(names[label])
            resolved[-1].append(names[label])
    return tie_group_grades(resolved)
