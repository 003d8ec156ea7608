"""Citations of answers from RAG systems, judged by the collection's own judgments.

An answer read from a TREC RAG report (``nrp.answers``) keeps the doc ids it cites, in citation
order, each once (the column ``citations``). ``cite_answers(collection, answers)`` judges them
per answer and per dimension with the judgments of the answer's query in that dimension:

- ``n_cited``: documents cited; ``n_judged``: those with a graded label for the query in the
  dimension; ``n_unjudged = n_cited - n_judged`` (not judged for this query, not in the
  collection, or judged "could not judge"): counted, never counted as wrong;
- ``n_relevant``: judged cited documents with label >= 1; ``share_relevant = n_relevant /
  n_judged``; ``mean_grade``: the mean label of the judged cited documents (both NaN when no
  cited document is judged).

``nrp score`` writes the result as ``citations.csv`` beside its results (``CITATIONS_FILE``) when
any answer cites a document; ``read_citations`` reads it back, checked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from nrp.answers import CITATIONS
from nrp.collection.collection import Collection
from nrp.errors import InputError
from nrp.tables import TableFile, read_table_file, require_columns, text_column

CITATIONS_FILE = "citations.csv"
CITATION_COLUMNS = (
    "answer_id",
    "llm",
    "prompt",
    "qid",
    "sample",
    "dimension",
    "n_cited",
    "n_judged",
    "n_unjudged",
    "n_relevant",
    "share_relevant",
    "mean_grade",
)
COUNT_COLUMNS = ("n_cited", "n_judged", "n_unjudged", "n_relevant")
#: the label from which a cited document counts as relevant (graded labels, every dimension)
RELEVANT_FROM = 1


def has_citations(answers: pd.DataFrame) -> bool:
    """Whether any answer cites a document (the frame has ``citations`` and one is non-empty)."""
    return CITATIONS in answers.columns and any(len(c) > 0 for c in answers[CITATIONS])


def cite_answers(collection: Collection | str, answers: pd.DataFrame) -> pd.DataFrame:
    """``CITATION_COLUMNS`` per answer x dimension, answers in input order, dimensions in the
    collection's order (see the module docstring). Answers without the ``citations`` column
    cite nothing (n_cited 0)."""
    if not isinstance(collection, Collection):
        collection = Collection.load(str(collection))
    cited = answers[CITATIONS] if CITATIONS in answers.columns else [()] * len(answers)
    keys = [str(qid) for qid in answers["qid"]]
    rows = []
    for dimension in collection.dimensions:
        qrels = collection.qrels(dimension, "graded")
        grade = dict(
            zip(zip(qrels["qid"].astype(str), qrels["docno"].astype(str), strict=True),
                qrels["label"].astype(float), strict=True)
        )  # fmt: skip
        for answer, qid, docs in zip(answers.itertuples(index=False), keys, cited, strict=True):
            labels = [grade[(qid, doc)] for doc in docs if (qid, doc) in grade]
            rows.append((*_ids(answer), dimension, *_measures(len(docs), labels)))
    frame = pd.DataFrame(rows, columns=list(CITATION_COLUMNS))
    return frame.astype({column: "int64" for column in COUNT_COLUMNS})


def _ids(answer: object) -> tuple[str, str, str, str, int]:
    return (
        str(answer.answer_id),
        str(getattr(answer, "llm", "")),
        str(getattr(answer, "prompt", "")),
        str(answer.qid),
        int(getattr(answer, "sample", 0)),
    )


def _measures(n_cited: int, labels: list[float]) -> tuple[int, int, int, int, float, float]:
    n_judged = len(labels)
    n_relevant = sum(label >= RELEVANT_FROM for label in labels)
    share = n_relevant / n_judged if n_judged else np.nan
    mean = float(np.mean(labels)) if n_judged else np.nan
    return n_cited, n_judged, n_cited - n_judged, n_relevant, share, mean


def citations_path(results: str | Path) -> Path:
    """``citations.csv`` in a results folder or beside a results file."""
    path = Path(results)
    return (path if path.is_dir() else path.parent) / CITATIONS_FILE


def read_citations(path: str | Path) -> pd.DataFrame:
    """A citations file as ``nrp score`` writes it: ids as text, counts as integers, the shares
    and grades as floats (empty: NaN); an ``InputError`` naming the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "file not found (nrp score writes it beside the results)")
    table = read_table_file(path)
    frame = table.frame.copy()
    require_columns(frame, CITATION_COLUMNS, path, line=1, hint="a citations table")
    for column in ("answer_id", "llm", "prompt", "qid", "dimension"):
        frame[column] = text_column(frame[column])
    for column in CITATION_COLUMNS[4:]:
        if column != "dimension":
            frame[column] = _numbers(table, column)
    return frame


def _numbers(table: TableFile, column: str) -> pd.Series:
    """One column as numbers: counts and ``sample`` as integers, the rest as floats (an empty
    cell: NaN); an ``InputError`` at the first cell that is not such a number."""
    cells = table.frame[column]
    values = pd.to_numeric(cells.replace("", np.nan), errors="coerce")
    integer = column in (*COUNT_COLUMNS, "sample")
    bad = values.isna() & (cells.astype(str).str.strip() != "")
    if integer:
        bad = bad | values.isna() | (values != values.round())
    if bad.any():
        value = cells[bad].iloc[0]
        kind = "an integer" if integer else "a number"
        raise InputError(table.path, table.first_line(bad), f"{column} {value!r} is not {kind}")
    return values.astype("int64" if integer else float)
