"""Webis-ArgQuality-20 (Gienapp et al., ACL 2020): 20 topics, 1,610 judged argument texts with
z-scored relevance and rhetorical, logical, dialectical and combined quality.

Two files of the processed release (``Webis-ArgQuality-20-Full``) are read:

- ``webis-argquality20-topics.csv`` (Topic ID, Category, Long Query, Short Query) -> topics;
- ``webis-argquality20-arguments.csv`` -> one document per row (the premise text) and one
  judgment per quality column, the raw z-score string as the grade (the manifest's ``bins`` turn
  it into a gain).

Document ids are ``"{Discussion ID}-{Argument ID}"``: ``Argument ID`` alone is only the position
of the argument in its discussion (78 distinct values over 1,610 rows), while the pair is unique
per argument (1,606 pairs). Four arguments were judged under two topics each; they are yielded
once per row with identical text, so the builder merges them, and their judgments stay apart by
topic. The same pair names arguments in the release's ``ranking.csv`` and ``raw/`` files.

Rows with ``Is Argument? = False`` (339 of 1,610) are kept by default: they are real items the
retrieval models returned in their top 50, the assessors judged them not to be arguments, and the
release gives them the floor score -4.0 in every dimension. Dropping them would remove a fifth of
the pool's worst documents and make every candidate set easier; ``non_arguments: drop`` does it
for analyses over the 1,271 arguments only (the z-scores are normalised over those).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.reading import iter_table, require
from nrp.collection.records import Document, Judgment, Origin, Record, Topic
from nrp.errors import ConfigError, InputError, quote
from nrp.tables import require_columns

QUERY_COLUMNS = {"long": "Long Query", "short": "Short Query"}
# topic field -> column: both formulations, whichever is the query, and the category
TOPIC_FIELDS = {**QUERY_COLUMNS, "category": "Category"}
DEFAULT_DIMENSIONS = {
    "Relevance": "relevance",
    "Rhetorical Quality": "rhetorical",
    "Logical Quality": "logical",
    "Dialectical Quality": "dialectical",
    "Combined Quality": "combined",
}
NON_ARGUMENT_CHOICES = ("keep", "drop")


def _check_columns(path: Path, line: int, row: Mapping[str, str], needed: list[str]) -> None:
    """Name a missing column once, at the first row, instead of failing on every row."""
    require_columns(row, needed, path, line=line)


def read_topics(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """Topics; the query is the long form (the retrieval models' input) unless ``query: short``;
    both forms and the category are kept as topic fields ``long``, ``short``, ``category``."""
    choice = options.get("query", "long")
    if choice not in QUERY_COLUMNS:
        raise ConfigError(
            f"{path}: option 'query' of argquality-topics must be 'long' or 'short', "
            f"got {quote(choice)}"
        )
    column = QUERY_COLUMNS[choice]
    seen: dict[str, int] = {}
    first = True
    for line, row in iter_table(path, ","):
        if first:
            _check_columns(path, line, row, ["Topic ID", column])
            first = False
        qid = require(row["Topic ID"], path, line, "Topic ID")
        if qid in seen:
            raise InputError(
                path, line, f"Topic ID {quote(qid)} given twice (first at line {seen[qid]})"
            )
        seen[qid] = line
        query = " ".join(require(row[column], path, line, column).split())
        texts = {name: " ".join((row.get(c) or "").split()) for name, c in TOPIC_FIELDS.items()}
        fields = {name: text for name, text in texts.items() if text} or None
        yield Topic(qid, query, origin=Origin(str(path), line), fields=fields)
    if not seen:
        raise InputError(path, None, "no topics after the header")


def _score(raw: str, path: Path, line: int, column: str) -> str:
    """The raw score string, checked to be a finite number (bins need one)."""
    text = raw.strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InputError(path, line, f"column {quote(column)}: {quote(raw)} is not a number")
    return text


def _is_argument(raw: str, path: Path, line: int) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise InputError(
            path, line, f"column 'Is Argument?': expected True or False, got {quote(raw)}"
        )
    return value == "true"


def _dimension_map(path: Path, value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(
            f"{path}: option 'dimensions' of argquality-arguments must map score columns to "
            f"dimension names, got {quote(value)}"
        )
    names = [str(name) for name in value.values()]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: option 'dimensions' names a dimension twice: {names}")
    return {str(column): str(name) for column, name in value.items()}


def read_arguments(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """A document per row and a judgment per chosen score column."""
    chosen = options.get("dimensions")
    dimensions = _dimension_map(path, DEFAULT_DIMENSIONS if chosen is None else chosen)
    non_arguments = options.get("non_arguments", "keep")
    if non_arguments not in NON_ARGUMENT_CHOICES:
        raise ConfigError(
            f"{path}: option 'non_arguments' of argquality-arguments must be 'keep' or 'drop', "
            f"got {quote(non_arguments)}"
        )
    needed = ["Topic ID", "Discussion ID", "Argument ID", "Premise", *dimensions]
    if non_arguments == "drop":
        needed.append("Is Argument?")
    rows = 0
    first = True
    for line, row in iter_table(path, ","):
        if first:
            _check_columns(path, line, row, needed)
            first = False
        rows += 1
        origin = Origin(str(path), line)
        qid = require(row["Topic ID"], path, line, "Topic ID")
        discussion = require(row["Discussion ID"], path, line, "Discussion ID")
        argument = require(row["Argument ID"], path, line, "Argument ID")
        docno = f"{discussion}-{argument}"
        grades = {column: _score(row[column], path, line, column) for column in dimensions}
        if "Is Argument?" in row and not _is_argument(row["Is Argument?"], path, line):
            report.count("argquality rows judged not an argument (Is Argument? = False)")
            if non_arguments == "drop":
                report.count("argquality non-arguments dropped (non_arguments: drop)")
                continue
        text = row["Premise"].strip()
        if text:
            yield Document(docno, text, origin=origin)
        else:
            report.count("argquality arguments without premise text")
        for column, dimension in dimensions.items():
            yield Judgment(qid, docno, dimension, grades[column], origin)
    if rows == 0:
        raise InputError(path, None, "no arguments after the header")


FORMATS = [
    Format(
        name="argquality-topics",
        description="Webis-ArgQuality-20 topics CSV (Topic ID, Category, Long Query, Short Query)",
        provides=("topics",),
        read=read_topics,
        options={
            "query": Option(
                str, "which query text to use: long (the retrieval models' input) or short", "long"
            ),
        },
    ),
    Format(
        name="argquality-arguments",
        description=(
            "Webis-ArgQuality-20 arguments CSV: a document per argument (docno "
            "'DiscussionID-ArgumentID', text = Premise) and a judgment per z-scored quality column"
        ),
        provides=("documents", "judgments"),
        read=read_arguments,
        options={
            "dimensions": Option(
                dict,
                "score column -> dimension name; default: Relevance, Rhetorical/Logical/"
                "Dialectical/Combined Quality -> relevance, rhetorical, logical, dialectical, "
                "combined",
                dict(DEFAULT_DIMENSIONS),
            ),
            "non_arguments": Option(
                str,
                "rows with 'Is Argument?' = False (floor score -4 everywhere): keep (default, "
                "they are real pool items) or drop",
                "keep",
            ),
        },
    ),
]

register(*FORMATS)
