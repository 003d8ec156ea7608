"""``nrp meta`` as a library call: read a score table and human labels, join them, meta-evaluate.

``meta_from_files(scores, human, ...)`` reads both inputs (``nrp.meta.human``), joins them on
an item id (inner join: items on one side only are counted, not guessed), chooses the columns
(every numeric score column unless named; every human label column unless named) and runs the
correlation report (``nrp.meta.correlation``) or, with ``categorical``, the label report
(``nrp.meta.categorical``). ``write_meta`` writes its JSON, CSV tables and (categorical, with
confidences) the review plot, each file written aside and renamed, so an interrupted or failed
run leaves no half-written file.

Column roles: the query is ``query_column`` of the score table, else of the human file (a
ranking file always has one); the system is ``system_column`` (``auto``: ``llm`` when the
joined table has at least two values of it). A human column whose name is also a score column
is renamed ``human.<name>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nrp.errors import ConfigError, InputError, NrpError
from nrp.meta.categorical import CategoricalResult, categorical_evaluate
from nrp.meta.correlation import DEFAULT_BOOTSTRAP, DEFAULT_SEED, MetaResult, meta_evaluate
from nrp.meta.human import read_human
from nrp.meta.labelstudio import is_label_studio_export, read_label_studio_scores
from nrp.meta.readers import check_numeric, check_unique_items, item_keys, line_of, read_table
from nrp.settings import settings_with
from nrp.tables import FrameView, numeric_columns

if TYPE_CHECKING:
    from nrp.meta.labelstudio import QueryMap

IDENTITY_COLUMNS = ("answer_id", "qid", "llm", "prompt", "sample", "reference_kind")
AUTO = "auto"


@dataclass
class MetaRun(FrameView):
    """What ``meta_from_files`` did: the result, the joined table and the join's counts;
    ``to_frame()``: the result's table."""

    result: MetaResult | CategoricalResult
    joined: pd.DataFrame
    counts: dict[str, int]
    score_columns: list[str]
    human_columns: list[str]
    notes: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        return self.result.to_frame()

    def format(self) -> str:
        c = self.counts
        head = (
            f"{c['joined']} items joined ({c['score_rows']} score rows, {c['human_rows']} human "
            f"rows; {c['scores_without_human']} scored items without human labels, "
            f"{c['human_without_scores']} labelled items without scores)"
        )
        notes = "".join(f"\nnote: {n}" for n in self.notes)
        return f"{head}{notes}\n\n{self.result.format()}"


@dataclass(frozen=True)
class MetaFileSettings:
    """What ``meta_from_files`` reads and reports.

    ``score_columns`` (default: every numeric column that is no id or role column) and
    ``human_columns`` (default: every label column); ``join``: the item id both tables share;
    ``query_column``, ``system_column`` (``auto``: ``llm`` when it has two values or more; None:
    no system level), ``by``: see ``nrp.meta.correlation.MetaSettings``. ``categorical``: the
    judge's ``label_column`` against one human column (``nrp.meta.categorical``), reviewed by
    ``confidence_column`` at ``thresholds``. ``n_bootstrap`` resamples drawn with ``seed``.
    ``query_map``: query text -> qid for a Label Studio export that names its queries by their
    text (a ``nrp.meta.labelstudio.QueryMap`` or a file with qid and query columns)."""

    score_columns: Sequence[str] | None = None
    human_columns: Sequence[str] | None = None
    join: str = "answer_id"
    query_column: str | None = "qid"
    system_column: str | None = AUTO
    by: str | None = None
    categorical: bool = False
    label_column: str | None = None
    confidence_column: str | None = None
    thresholds: Sequence[float] | None = None
    n_bootstrap: int = DEFAULT_BOOTSTRAP
    seed: int = DEFAULT_SEED
    query_map: QueryMap | str | Path | None = None

    def roles(self) -> tuple[str | None, str | None, str | None]:
        return self.query_column, self.system_column, self.by


@dataclass
class _Joined:
    """The score table, the human labels and their inner join on the item id."""

    scores: pd.DataFrame
    labels: pd.DataFrame
    dimensions: list[str]
    table: pd.DataFrame
    notes: list[str]
    keys: list[str]

    def counts(self, join: str) -> dict[str, int]:
        scored = pd.MultiIndex.from_frame(self.scores[self.keys])
        labelled = pd.MultiIndex.from_frame(self.labels[self.keys])
        return {
            "score_rows": len(self.scores),
            "human_rows": len(self.labels),
            "joined": len(self.table),
            "scores_without_human": int((~scored.isin(labelled)).sum()),
            "human_without_scores": int((~labelled.isin(scored)).sum()),
        }


def meta_from_files(
    scores: str | Path,
    human: str | Path,
    settings: MetaFileSettings | None = None,
    **overrides: Any,
) -> MetaRun:
    """Read, join and meta-evaluate (see the module docstring). ``settings`` (or its fields as
    keywords, e.g. ``score_columns=[...]``, ``categorical=True``): see ``MetaFileSettings``."""
    options = settings_with(MetaFileSettings, settings, overrides)
    score_table = _read_scores(scores, options)
    chosen = (
        []
        if options.categorical
        else _score_columns(
            score_table, scores, options.score_columns, options.join, options.roles()
        )
    )
    joined = _join(score_table, scores, human, options)
    counts = joined.counts(options.join)
    if options.categorical:
        judged = _categorical(joined, scores, options)
        labels = [str(options.label_column)]
        return MetaRun(judged, joined.table, counts, labels, joined.dimensions, joined.notes)
    query_column, system_column = options.query_column, options.system_column
    if query_column and query_column not in joined.table.columns:
        joined.notes.append(f"no {query_column!r} column: per-query correlations not computed")
        query_column = None
    if system_column == AUTO:
        table = joined.table
        system_column = "llm" if "llm" in table.columns and table["llm"].nunique() > 1 else None
    elif system_column and system_column not in joined.table.columns:
        raise ConfigError(f"no system column {system_column!r} in the joined table")
    result = meta_evaluate(
        joined.table,
        chosen,
        joined.dimensions,
        query_column=query_column,
        system_column=system_column,
        by=options.by,
        n_bootstrap=options.n_bootstrap,
        seed=options.seed,
    )
    return MetaRun(result, joined.table, counts, chosen, joined.dimensions, joined.notes)


def _read_scores(scores: str | Path, options: MetaFileSettings) -> pd.DataFrame:
    """The score table, ids and role columns as text; each item id once."""
    join = options.join
    text = [join, *(c for c in options.roles() if c and c != AUTO)]
    text += [c for c in IDENTITY_COLUMNS if c not in ("sample",)]
    if options.categorical and options.label_column:
        text.append(options.label_column)
    if is_label_studio_export(Path(scores)):  # scores carried by a ranking project's items
        fields = list(options.score_columns) if options.score_columns else None
        return read_label_studio_scores(scores, fields, join, options.query_map)
    score_table = read_table(scores, text_columns=text)
    if join not in score_table.columns:
        raise InputError(
            score_table.attrs.get("path"),
            1 if score_table.attrs.get("lines") is not None else None,
            f"no item id column {join!r} (columns: {', '.join(map(str, score_table.columns))})",
        )
    score_table = nrp_columns(score_table, join)
    check_unique_items(score_table, join, score_table.attrs.get("path"))
    return score_table


#: the columns of an ``nrp score`` result table (one row per answer and dimension)
SCORE_RESULT_COLUMNS = frozenset({"dimension", "ranker", "rank", "n_docs", "nrp"})


def nrp_columns(table: pd.DataFrame, join: str) -> pd.DataFrame:
    """An ``nrp score`` result (one row per answer and dimension, the NRP in ``nrp``) as one row
    per answer with a column ``nrp.<dimension>`` per dimension (``nrp.weighted`` included):
    the names the ``nrp`` evaluator gives the same figures in ``nrp evaluate`` output. Any other
    table is returned as it is."""
    if not set(table.columns) >= SCORE_RESULT_COLUMNS or join not in table.columns:
        return table
    keys = [c for c in IDENTITY_COLUMNS if c in table.columns and c != "sample"]
    keys = list(dict.fromkeys([join, *keys, *(["sample"] if "sample" in table.columns else [])]))
    rows = table[[*keys, "dimension", "nrp"]].copy()
    twice = np.flatnonzero(rows.duplicated(subset=[*keys, "dimension"]).to_numpy())
    if len(twice):
        position = int(twice[0])
        raise InputError(
            table.attrs.get("path"),
            line_of(table, position),
            f"{join} {rows[join].iloc[position]!r} is given twice in dimension "
            f"{rows['dimension'].iloc[position]!r}",
        )
    order = list(dict.fromkeys(rows["dimension"].astype(str)))
    wide = rows.pivot(index=keys, columns="dimension", values="nrp")
    wide = wide[order].rename(columns=lambda d: f"nrp.{d}").reset_index()
    wide.columns.name = None
    wide.attrs.update(path=table.attrs.get("path"), lines=None)
    return wide


def _join(
    score_table: pd.DataFrame, scores: str | Path, human: str | Path, options: MetaFileSettings
) -> _Joined:
    """The human labels read and joined to the score table (inner join on the item id)."""
    join = options.join
    labels = read_human(human, join, options.human_columns, options.categorical, options.query_map)
    dimensions = list(labels.attrs["dimensions"])
    notes: list[str] = []
    if labels.attrs.get("by_text") and "qid" in score_table.columns:
        raise ConfigError(
            f"{human} names its queries by their text and {scores} by qid: map the texts to "
            "qids (--query-map FILE of qid and query, or --collection NAME)"
        )
    if labels.attrs.get("kind") == "ranking":
        notes.append(
            "human rankings read as grades n-1 (best) .. 0 per query (dimension 'ranking')"
        )
    clashes = [d for d in dimensions if d in score_table.columns and d != join]
    if clashes:
        labels = labels.rename(columns={d: f"human.{d}" for d in clashes})
        dimensions = [f"human.{d}" if d in clashes else d for d in dimensions]
        notes.append(f"human columns {clashes} renamed human.<name> (the score table has them)")
    # a query column on one side only: ids join, and the human file's queries count
    keys = item_keys(score_table, join) if "qid" in labels.columns else [join]
    for table, path in ((score_table, scores), (labels, human)) if keys == [join] else ():
        if table[join].duplicated().any():
            twice = table[join][table[join].duplicated()].iloc[0]
            raise InputError(
                path,
                None,
                f"{join} {twice!r} names items of several queries; the other file has no qid "
                "column to tell them apart (give both a qid column)",
            )
    joined = score_table.merge(labels, on=keys, how="inner")
    if joined.empty:
        raise NrpError(
            f"no item ids in common between {scores} and {human} (joined on {join!r}; e.g. "
            f"{score_table[join].iloc[0]!r} vs {labels[join].iloc[0]!r})"
        )
    return _Joined(score_table, labels, dimensions, joined, notes, keys)


def _categorical(
    joined: _Joined, scores: str | Path, options: MetaFileSettings
) -> CategoricalResult:
    """The judge's label column against the one human column."""
    label_column, confidence_column = options.label_column, options.confidence_column
    if not label_column:
        raise ConfigError("--categorical needs --label-column (the judge's label column)")
    if len(joined.dimensions) != 1:
        raise ConfigError(
            f"categorical meta-evaluation compares one human column; got {joined.dimensions} "
            "(choose one with --human)"
        )
    if label_column not in joined.table.columns:
        raise ConfigError(f"no label column {label_column!r} in {scores}")
    if confidence_column and confidence_column not in joined.table.columns:
        raise ConfigError(f"no confidence column {confidence_column!r} in {scores}")
    return categorical_evaluate(
        joined.table, label_column, joined.dimensions[0], confidence_column, options.thresholds
    )


def _score_columns(
    table: pd.DataFrame,
    path: str | Path,
    named: Sequence[str] | None,
    join: str,
    roles: Sequence[str | None],
) -> list[str]:
    """The named score columns (checked numeric), else every numeric column that is not an id,
    query, system or subset column."""
    if named:
        chosen = list(named)
        unknown = [c for c in chosen if c not in table.columns]
        if unknown:
            raise ConfigError(
                f"no score column(s) {unknown} in {path} "
                f"(columns: {', '.join(map(str, table.columns))})"
            )
        check_numeric(table, chosen)
        return chosen
    taken = {join, *IDENTITY_COLUMNS, *(c for c in roles if c and c != AUTO)}
    chosen = numeric_columns(table, list(taken))
    if not chosen:
        raise ConfigError(f"no numeric score columns in {path}; name them with --scores")
    return chosen


def write_meta(run: MetaRun, out: str | Path) -> list[Path]:
    """JSON and CSV tables of ``run`` (and the review plot) in ``out``; the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if isinstance(run.result, CategoricalResult):
        run.result.to_json(out / "categorical.json")
        written.append(out / "categorical.json")
        written += list(run.result.to_csv(out).values())
        if len(run.result.review):
            for suffix in ("png", "svg"):
                written.append(run.result.plot(out / f"review.{suffix}"))
    else:
        run.result.to_json(out / "meta.json")
        written.append(out / "meta.json")
        written += list(run.result.to_csv(out).values())
    return written
