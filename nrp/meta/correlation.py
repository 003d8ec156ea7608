"""Correlation of automatic scores with human judgments: per query, pooled, per system.

``meta_evaluate(frame, scores, humans, query_column=..., system_column=...)`` takes one row per
judged item (an answer, a dialogue response, a summary) with score columns and human-label
columns and reports, for every (score column x human dimension):

- **Per query**: Kendall's tau-b and Spearman's rho between the score and the human label over
  the items of each query, then the mean over queries with a 95% Student t-interval
  (``nrp.statistics.mean_with_interval``: the query is the unit, as in validation and
  agreement; the source study reports mean tau = 0.64, 95% CI [0.50, 0.78] over 20 queries
  against a medical expert in this form). A query is skipped, and counted, when it has fewer
  than two items with both values or its human labels are all equal (no order to agree with).
  A score that is constant over a used query counts as 0 (it orders nothing), not as missing,
  which would reward a metric for giving up: the rule of ``nrp.statistics.correlations``.
- **Pooled**: one tau-b and rho over every item with both values (skipped queries included),
  with a percentile bootstrap interval that resamples *queries* (seeded): items of one query
  share a question and are not independent, so the query is the resampling unit. Without a
  query column each item is its own query. (Tau-b rather than tau-a or tau-c: human labels are
  coarse and tie often, and tau-b corrects for ties on both sides.)
- **System level**: with a system column (e.g. ``llm``), each system's mean score and mean
  human label over its items, and tau-b and rho across systems (with the number of systems),
  with the same query-resampling bootstrap (a resample recomputes every system's means over the
  drawn queries, the "bootstrap over inputs" of Deutsch et al., TACL 2021).

Why the correlations are not scipy's per call: scipy's ``kendalltau`` costs milliseconds per
call, and a bootstrap calls it thousands of times per (score, dimension). Per query and per
system the vectors are short and the O(n^2) numpy tau-b of ``nrp.statistics.numpy_correlations``
is faster; pooled bootstrap resamples are multisets of queries, whose tau-b and rho follow
exactly from per-query-pair sums computed once (``_PooledBootstrap``), so 2,000 resamples cost
about as much as a few plain correlations. ``tests/meta`` checks both against scipy on
duplicated data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from nrp.errors import ConfigError, NrpError
from nrp.settings import settings_with
from nrp.statistics import (
    mean_with_interval,
    numpy_correlations,
    percentile_interval,
    resample_counts,
)
from nrp.tables import (
    FrameView,
    TableExports,
    format_interval,
    format_number,
    one_row,
    require_columns,
    text_table,
)

if TYPE_CHECKING:
    from scipy import sparse

FEW_ITEMS = "fewer than 2 items"
CONSTANT_HUMAN = "constant human labels"
ALL = "all"
DEFAULT_BOOTSTRAP = 2000
DEFAULT_SEED = 0
# Resamples per block in the vectorised bootstrap (bounds memory: block x items floats).
_BLOCK = 128
# Above this many resampling units the per-pair precomputation (units x units matrices) would
# not fit comfortably; resamples are then scored one by one on the duplicated items.
_MAX_UNITS = 4000


class _PooledBootstrap:
    """Tau-b and rho of the items of resampled queries, a query drawn c times contributing c
    copies of each of its items (what concatenating the drawn queries gives).

    Tau-b: with c_i the copies of item i, N = sum c_i and n0 = N(N-1)/2 pairs, (concordant -
    discordant) = 1/2 sum_{i != j} c_i c_j sgn(x_i - x_j) sgn(y_i - y_j) and the pairs tied in x
    = 1/2 sum_{i != j} c_i c_j [x_i = x_j] + sum_i c_i(c_i - 1)/2 (copies of one item tie). As
    c is constant within a query, the sums over item pairs reduce to query-pair matrices (A,
    Ex, Ey) computed once; a resample is then three quadratic forms in the query counts.
    Rho: Pearson's r of the copies' mid-ranks, i.e. a weighted r with weights c_i, the mid-rank
    of a value being (copies below it) + (copies equal to it + 1) / 2."""

    def __init__(self, x: np.ndarray, y: np.ndarray, units: np.ndarray, n_units: int):
        order = np.argsort(units, kind="stable")
        self.x, self.y, self.units = x[order], y[order], units[order]
        self.n_units = n_units
        self.sizes = np.bincount(self.units, minlength=n_units).astype(float)
        self.direct = n_units > _MAX_UNITS
        if not self.direct:
            self._pair_sums()
        self._x_codes, self._x_onehot = self._value_groups(self.x)
        self._y_codes, self._y_onehot = self._value_groups(self.y)

    def _pair_sums(self) -> None:
        n, q = len(self.x), self.n_units
        starts = np.flatnonzero(np.r_[True, self.units[1:] != self.units[:-1]])
        present = self.units[starts]
        self.concordance = np.zeros((q, q))
        self.equal_x = np.zeros((q, q))
        self.equal_y = np.zeros((q, q))
        step = max(1, 2_000_000 // max(n, 1))
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            dx = np.sign(self.x[rows, None] - self.x[None, :])
            dy = np.sign(self.y[rows, None] - self.y[None, :])
            row_units = self.units[rows]
            for matrix, values in (
                (self.concordance, dx * dy),
                (self.equal_x, (dx == 0).astype(float)),
                (self.equal_y, (dy == 0).astype(float)),
            ):
                by_unit = np.add.reduceat(values, starts, axis=1)  # rows x present units
                summed = np.zeros((q, len(present)))
                np.add.at(summed, row_units, by_unit)
                matrix[:, present] += summed
        # an item against itself is not a pair
        np.fill_diagonal(self.equal_x, np.diag(self.equal_x) - self.sizes)
        np.fill_diagonal(self.equal_y, np.diag(self.equal_y) - self.sizes)

    @staticmethod
    def _value_groups(values: np.ndarray) -> tuple[np.ndarray, sparse.csr_matrix]:
        from scipy import sparse  # on first use: every command imports this module (nrp.api)

        _, codes = np.unique(values, return_inverse=True)
        onehot = sparse.csr_matrix(
            (np.ones(len(values)), (np.arange(len(values)), codes)),
            shape=(len(values), int(codes.max()) + 1 if len(codes) else 0),
        )
        return codes, onehot

    def tau(self, counts: np.ndarray) -> np.ndarray:
        if self.direct:
            return np.array([self._direct(c)[0] for c in counts])
        total = counts @ self.sizes
        n0 = total * (total - 1) / 2
        self_ties = (counts * (counts - 1) / 2) @ self.sizes
        s = 0.5 * np.einsum("bq,bq->b", counts @ self.concordance, counts)
        ties_x = 0.5 * np.einsum("bq,bq->b", counts @ self.equal_x, counts) + self_ties
        ties_y = 0.5 * np.einsum("bq,bq->b", counts @ self.equal_y, counts) + self_ties
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = s / np.sqrt((n0 - ties_x) * (n0 - ties_y))
        tau[np.isclose(n0 - ties_y, 0)] = np.nan  # constant human labels
        tau[np.isclose(n0 - ties_x, 0) & ~np.isclose(n0 - ties_y, 0)] = 0.0  # constant scores
        return tau

    def rho(self, counts: np.ndarray) -> np.ndarray:
        if self.direct:
            return np.array([self._direct(c)[1] for c in counts])
        out = np.empty(len(counts))
        for start in range(0, len(counts), _BLOCK):
            block = counts[start : start + _BLOCK]
            weights = block[:, self.units]  # copies of each item
            rx = self._midranks(weights, self._x_codes, self._x_onehot)
            ry = self._midranks(weights, self._y_codes, self._y_onehot)
            total = weights.sum(axis=1, keepdims=True)
            rx -= (weights * rx).sum(axis=1, keepdims=True) / total
            ry -= (weights * ry).sum(axis=1, keepdims=True) / total
            sxy = (weights * rx * ry).sum(axis=1)
            sxx = (weights * rx * rx).sum(axis=1)
            syy = (weights * ry * ry).sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                rho = sxy / np.sqrt(sxx * syy)
            rho[np.isclose(syy, 0)] = np.nan
            rho[np.isclose(sxx, 0) & ~np.isclose(syy, 0)] = 0.0
            out[start : start + len(block)] = rho
        return out

    @staticmethod
    def _midranks(weights: np.ndarray, codes: np.ndarray, onehot: sparse.csr_matrix) -> np.ndarray:
        per_value = np.asarray((onehot.T @ weights.T).T)  # copies per distinct value
        below = np.cumsum(per_value, axis=1) - per_value
        return (below + (per_value + 1) / 2)[:, codes]

    def _direct(self, counts: np.ndarray) -> tuple[float, float]:
        copies = counts[self.units].astype(int)
        x = np.repeat(self.x, copies)
        y = np.repeat(self.y, copies)
        return numpy_correlations(x, y)


# -- result ----------------------------------------------------------------------------------------
@dataclass
class MetaResult(TableExports, FrameView):
    """Correlations of score columns with human dimensions.

    ``summary``: one row per (subset, score, dimension): n_items (with both values), n_missing
    (items left out for a missing value), per-query counts (n_queries, queries_used,
    skipped_few_items, skipped_constant_human, constant_score_queries), tau_mean/rho_mean with
    tau_ci_low/high and rho_ci_low/high (t-interval over queries), tau_pooled/rho_pooled with
    bootstrap *_ci_low/high, n_systems, tau_system/rho_system with bootstrap *_ci_low/high.
    ``per_query``: subset, score, dimension, qid, n_items, kendall_tau, spearman_rho, skipped
    ('' when used), constant_score. ``systems``: subset, score, dimension, system, n_items,
    mean_score, mean_human."""

    settings: dict[str, Any]
    summary: pd.DataFrame
    per_query: pd.DataFrame
    systems: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """The summary: one row per (subset, score, dimension)."""
        return self.summary.copy()

    def row(self, score: str, dimension: str, subset: str = ALL) -> pd.Series:
        return one_row(self.summary, score=score, dimension=dimension, subset=subset)

    # to_dict, to_json and to_csv (meta_{summary,systems,per_query}.csv): ``TableExports``
    JSON_FIELDS: ClassVar[tuple[str, ...]] = (
        "settings", "summary", "systems", "per_query", "warnings",
    )  # fmt: skip
    CSV_TABLES: ClassVar[tuple[str, ...]] = ("summary", "systems", "per_query")
    CSV_PREFIX: ClassVar[str] = "meta"

    def tables(self) -> dict[tuple[str, str], str]:
        """(subset, dimension) -> its text table (every score column)."""
        keys = dict.fromkeys(zip(self.summary["subset"], self.summary["dimension"], strict=True))
        return {key: self._table(*key) for key in keys}

    def format(self) -> str:
        parts = list(self.tables().values())
        if self.warnings:
            parts.append("warnings:\n" + "\n".join(f"  {w}" for w in self.warnings))
        return "\n\n".join(parts)

    def __str__(self) -> str:
        return self.format()

    def _table(self, subset: str, dimension: str) -> str:
        s = self.settings
        rows = self.summary[
            (self.summary["subset"] == subset) & (self.summary["dimension"] == dimension)
        ]
        first = rows.iloc[0]
        ci = f"{round(s['confidence'] * 100)}% CI"
        where = "" if subset == ALL else f" [{s['by']} = {subset}]"
        lines = [
            f"{dimension}{where}: {int(first['n_items'])} items, {int(first['n_queries'])} queries"
        ]
        if s["query_column"]:
            lines.append(
                f"  per query: mean over used queries, {ci} t-interval; pooled: one coefficient "
                f"over all items, {ci} from {s['bootstrap']} bootstrap resamples of queries"
            )
        else:
            lines.append(
                f"  no query column: pooled only, {ci} from {s['bootstrap']} bootstrap resamples "
                "of items"
            )
        header = ["score", "queries", f"tau-b [{ci}]", f"rho [{ci}]", "pooled tau-b", "pooled rho"]
        table = []
        for r in rows.itertuples():
            table.append(
                [
                    str(r.score),
                    f"{int(r.queries_used)}/{int(r.n_queries)}",
                    _cell(r.tau_mean, r.tau_ci_low, r.tau_ci_high),
                    _cell(r.rho_mean, r.rho_ci_low, r.rho_ci_high),
                    _cell(r.tau_pooled, r.tau_pooled_ci_low, r.tau_pooled_ci_high),
                    _cell(r.rho_pooled, r.rho_pooled_ci_low, r.rho_pooled_ci_high),
                ]
            )
        lines.append(text_table(header, table))
        skipped = []
        if first["skipped_few_items"]:
            skipped.append(f"{int(first['skipped_few_items'])} with {FEW_ITEMS}")
        if first["skipped_constant_human"]:
            skipped.append(f"{int(first['skipped_constant_human'])} with {CONSTANT_HUMAN}")
        if skipped:
            lines.append(f"  queries skipped: {', '.join(skipped)}")
        constant = rows[rows["constant_score_queries"] > 0]
        if len(constant):
            lines.append(
                "  constant score in used queries (counted as 0): "
                + ", ".join(
                    f"{r.score} {int(r.constant_score_queries)}" for r in constant.itertuples()
                )
            )
        if s["system_column"] and rows["n_systems"].max() > 0:
            lines.append(
                f"  system level: mean score vs mean {dimension} per {s['system_column']} "
                f"({int(rows['n_systems'].max())} systems), {ci} bootstrap over queries"
            )
            header = ["score", "systems", f"tau-b [{ci}]", f"rho [{ci}]"]
            lines.append(
                text_table(
                    header,
                    [
                        [
                            str(r.score),
                            str(int(r.n_systems)),
                            _cell(r.tau_system, r.tau_system_ci_low, r.tau_system_ci_high),
                            _cell(r.rho_system, r.rho_system_ci_low, r.rho_system_ci_high),
                        ]
                        for r in rows.itertuples()
                    ],
                )
            )
        return "\n".join(lines)


def _cell(value: float, low: float, high: float) -> str:
    return f"{format_number(value, 3)} {format_interval(low, high, 3)}"


# -- computation -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetaSettings:
    """How ``meta_evaluate`` reads the items and draws its intervals.

    ``query_column``: the items' query (None: no per-query correlations; pooled intervals then
    resample items). ``system_column``: system-level correlations over its values. ``by``: also
    report each value of this column on its own (subset ``all`` is every item).
    ``n_bootstrap`` resamples (0: no intervals) drawn with ``seed``; ``confidence`` of every
    interval."""

    query_column: str | None = "qid"
    system_column: str | None = None
    by: str | None = None
    n_bootstrap: int = DEFAULT_BOOTSTRAP
    seed: int = DEFAULT_SEED
    confidence: float = 0.95

    def check(self) -> None:
        if not 0 < self.confidence < 1:
            raise ConfigError("confidence must lie strictly between 0 and 1")
        if self.n_bootstrap < 0:
            raise ConfigError(f"bootstrap resamples must be >= 0, got {self.n_bootstrap}")

    def roles(self) -> list[str]:
        """The query, system and subset columns that are set."""
        return [c for c in (self.query_column, self.system_column, self.by) if c]

    def describe(self) -> dict[str, Any]:
        """The settings as ``MetaResult.settings`` reports them."""
        return {
            "query_column": self.query_column,
            "system_column": self.system_column,
            "by": self.by,
            "bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "confidence": self.confidence,
            "kendall": "tau-b",
            "per_query_ci": "Student t-interval over used queries",
            "pooled_ci": "percentile bootstrap, resampling queries"
            if self.query_column
            else "percentile bootstrap, resampling items (no query column)",
            "skipped": f"queries with {FEW_ITEMS} or {CONSTANT_HUMAN}",
            "constant_score": "a used query where the score is constant counts as 0",
        }


PER_QUERY_COLUMNS = [
    "subset", "score", "dimension", "qid", "n_items", "kendall_tau", "spearman_rho", "skipped",
    "constant_score",
]  # fmt: skip
SYSTEM_COLUMNS = ["subset", "score", "dimension", "system", "n_items", "mean_score", "mean_human"]


@dataclass(frozen=True)
class _Items:
    """The frame's items as arrays: each score and human column as floats (NaN: missing), the
    query of each item (its position without a query column), its system (None: no column)."""

    numeric: dict[str, np.ndarray]
    queries: np.ndarray
    systems: np.ndarray | None


def meta_evaluate(
    frame: pd.DataFrame,
    score_columns: Sequence[str],
    human_columns: Sequence[str],
    settings: MetaSettings | None = None,
    **overrides: Any,
) -> MetaResult:
    """Correlations of every score column with every human column (see the module docstring).

    ``frame``: one row per item. ``settings`` (or its fields as keywords: ``query_column``,
    ``system_column``, ``by``, ``n_bootstrap``, ``seed``, ``confidence``): see
    ``MetaSettings``."""
    options = settings_with(MetaSettings, settings, overrides)
    score_columns, human_columns = list(score_columns), list(human_columns)
    if not score_columns or not human_columns:
        raise ConfigError("meta-evaluation needs at least one score column and one human column")
    options.check()
    _check_columns(frame, score_columns, human_columns, options)
    data = frame.reset_index(drop=True)
    items = _Items(
        numeric=_numeric(data, [*score_columns, *human_columns]),
        queries=(
            data[options.query_column].astype(str).to_numpy()
            if options.query_column
            else np.array([str(i) for i in range(len(data))])
        ),
        systems=(
            data[options.system_column].astype(str).to_numpy() if options.system_column else None
        ),
    )
    summary_rows, query_parts, system_parts = [], [], []
    warnings: list[str] = []
    for subset, in_subset in _subsets(data, options.by):
        for dimension in human_columns:
            for score in score_columns:
                labels = {"subset": subset, "score": score, "dimension": dimension}
                row, per_query, systems = _correlate(items, score, dimension, in_subset, options)
                summary_rows.append({**labels, **row})
                if per_query is not None:
                    query_parts.append(per_query.assign(**labels))
                if systems is not None:
                    system_parts.append(systems.assign(**labels))
                if row["n_missing"] and subset == ALL:
                    warnings.append(
                        f"{score} x {dimension}: {row['n_missing']} item(s) without both values "
                        "left out"
                    )
    return MetaResult(
        settings=options.describe(),
        summary=pd.DataFrame(summary_rows),
        per_query=_stacked(query_parts, PER_QUERY_COLUMNS),
        systems=_stacked(system_parts, SYSTEM_COLUMNS),
        warnings=warnings,
    )


def _check_columns(
    frame: pd.DataFrame, scores: list[str], humans: list[str], options: MetaSettings
) -> None:
    """Every named column present, none both a score and a human column."""
    needed = [*scores, *humans, *options.roles()]
    require_columns(frame, needed, frame.attrs.get("path") or "the correlated table")
    overlap = sorted(set(scores) & set(humans))
    if overlap:
        raise ConfigError(f"columns {overlap} are named both as scores and as human labels")


def _numeric(data: pd.DataFrame, columns: list[str]) -> dict[str, np.ndarray]:
    """Each column as floats (missing: NaN); an error at the first value that is not a number."""
    numeric = {}
    for column in dict.fromkeys(columns):
        values = pd.to_numeric(data[column], errors="coerce")
        bad = values.isna() & data[column].notna()
        if bad.any():
            raise NrpError(
                f"column {column!r} holds values that are not numbers, e.g. "
                f"{data.loc[bad, column].iloc[0]!r}"
            )
        numeric[column] = values.to_numpy(dtype=float)
    return numeric


def _subsets(data: pd.DataFrame, by: str | None) -> list[tuple[str, np.ndarray]]:
    """(name, mask): ``all`` items, then each value of ``by`` in first-appearance order."""
    subsets: list[tuple[str, np.ndarray]] = [(ALL, np.ones(len(data), dtype=bool))]
    if by:
        labels = data[by].astype(str).to_numpy()
        subsets += [(str(v), labels == v) for v in dict.fromkeys(labels)]
    return subsets


def _correlate(
    items: _Items, score: str, dimension: str, in_subset: np.ndarray, options: MetaSettings
) -> tuple[dict[str, Any], pd.DataFrame | None, pd.DataFrame | None]:
    """One (subset, score, dimension): its summary row (from n_items on), its per-query table
    (None without a query column) and its per-system table (None without a system column)."""
    x, y = items.numeric[score], items.numeric[dimension]
    usable = in_subset & np.isfinite(x) & np.isfinite(y)
    row: dict[str, Any] = {
        "n_items": int(usable.sum()),
        "n_missing": int((in_subset & ~usable).sum()),
    }
    x, y, queries = x[usable], y[usable], items.queries[usable]
    per_query = _per_query(x, y, queries) if options.query_column else None
    row.update(_per_query_summary(per_query, options.confidence))
    units, n_units = _units(queries)
    counts = None
    if options.n_bootstrap and n_units >= 2:
        counts = resample_counts(n_units, options.n_bootstrap, options.seed)
    row.update(_pooled(x, y, units, n_units, counts, options.confidence))
    if items.systems is None:
        row.update(_no_systems())
        return row, per_query, None
    system_row, systems = _system_level(
        x, y, items.systems[usable], units, n_units, counts, options.confidence
    )
    row.update(system_row)
    return row, per_query, systems


def _stacked(parts: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns]


def _units(queries: np.ndarray) -> tuple[np.ndarray, int]:
    """Query codes 0..Q-1 of the items (the bootstrap's resampling units)."""
    if len(queries) == 0:
        return np.zeros(0, dtype=int), 0
    _, codes = np.unique(queries, return_inverse=True)
    return codes.astype(int), int(codes.max()) + 1


def _per_query(x: np.ndarray, y: np.ndarray, queries: np.ndarray) -> pd.DataFrame:
    rows = []
    order = pd.Index(queries)
    for qid, positions in pd.Series(np.arange(len(queries))).groupby(order, sort=False):
        idx = positions.to_numpy()
        qx, qy = x[idx], y[idx]
        skipped = FEW_ITEMS if len(idx) < 2 else CONSTANT_HUMAN if np.ptp(qy) == 0 else ""
        tau = rho = float("nan")
        constant = False
        if not skipped:
            tau, rho = numpy_correlations(qx, qy)
            constant = bool(np.ptp(qx) == 0)
        rows.append(
            {
                "qid": str(qid),
                "n_items": len(idx),
                "kendall_tau": tau,
                "spearman_rho": rho,
                "skipped": skipped,
                "constant_score": constant,
            }
        )
    columns = ["qid", "n_items", "kendall_tau", "spearman_rho", "skipped", "constant_score"]
    return pd.DataFrame(rows, columns=columns)


def _per_query_summary(per_query: pd.DataFrame | None, confidence: float) -> dict[str, Any]:
    if per_query is None:
        return {
            "n_queries": 0,
            "queries_used": 0,
            "skipped_few_items": 0,
            "skipped_constant_human": 0,
            "constant_score_queries": 0,
            "tau_mean": np.nan,
            "tau_ci_low": np.nan,
            "tau_ci_high": np.nan,
            "rho_mean": np.nan,
            "rho_ci_low": np.nan,
            "rho_ci_high": np.nan,
        }
    used = per_query[per_query["skipped"] == ""]
    row: dict[str, Any] = {
        "n_queries": len(per_query),
        "queries_used": len(used),
        "skipped_few_items": int((per_query["skipped"] == FEW_ITEMS).sum()),
        "skipped_constant_human": int((per_query["skipped"] == CONSTANT_HUMAN).sum()),
        "constant_score_queries": int(used["constant_score"].sum()),
    }
    for short, column in (("tau", "kendall_tau"), ("rho", "spearman_rho")):
        mean, low, high = mean_with_interval(used[column].to_numpy(dtype=float), confidence)
        row.update({f"{short}_mean": mean, f"{short}_ci_low": low, f"{short}_ci_high": high})
    return row


def _pooled(
    x: np.ndarray,
    y: np.ndarray,
    units: np.ndarray,
    n_units: int,
    counts: np.ndarray | None,
    confidence: float,
) -> dict[str, Any]:
    tau, rho = numpy_correlations(x, y)
    row = {
        "tau_pooled": tau,
        "tau_pooled_ci_low": np.nan,
        "tau_pooled_ci_high": np.nan,
        "rho_pooled": rho,
        "rho_pooled_ci_low": np.nan,
        "rho_pooled_ci_high": np.nan,
    }
    if counts is not None and np.isfinite(tau):
        boot = _PooledBootstrap(x, y, units, n_units)
        row["tau_pooled_ci_low"], row["tau_pooled_ci_high"] = percentile_interval(
            boot.tau(counts), confidence
        )
        row["rho_pooled_ci_low"], row["rho_pooled_ci_high"] = percentile_interval(
            boot.rho(counts), confidence
        )
    return row


def _no_systems() -> dict[str, Any]:
    return {
        "n_systems": 0,
        "tau_system": np.nan,
        "tau_system_ci_low": np.nan,
        "tau_system_ci_high": np.nan,
        "rho_system": np.nan,
        "rho_system_ci_low": np.nan,
        "rho_system_ci_high": np.nan,
    }


def _system_level(
    x: np.ndarray,
    y: np.ndarray,
    systems: np.ndarray,
    units: np.ndarray,
    n_units: int,
    counts: np.ndarray | None,
    confidence: float,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Mean score and mean human label per system; tau-b and rho across systems, with the
    bootstrap over queries (a resample's system means are over the drawn queries' items)."""
    names, codes = np.unique(systems, return_inverse=True)
    n_systems = len(names)
    table = pd.DataFrame(
        {
            "system": names,
            "n_items": np.bincount(codes, minlength=n_systems),
            "mean_score": np.bincount(codes, weights=x, minlength=n_systems)
            / np.maximum(np.bincount(codes, minlength=n_systems), 1),
            "mean_human": np.bincount(codes, weights=y, minlength=n_systems)
            / np.maximum(np.bincount(codes, minlength=n_systems), 1),
        }
    )
    row = _no_systems()
    row["n_systems"] = n_systems
    if n_systems < 2:
        return row, table
    row["tau_system"], row["rho_system"] = numpy_correlations(
        table["mean_score"], table["mean_human"]
    )
    if counts is not None and np.isfinite(row["tau_system"]):
        # per (query, system): sums and counts of the items, so a resample's means are sums
        cells = units * n_systems + codes
        size = n_units * n_systems
        n = np.bincount(cells, minlength=size).reshape(n_units, n_systems).astype(float)
        sx = np.bincount(cells, weights=x, minlength=size).reshape(n_units, n_systems)
        sy = np.bincount(cells, weights=y, minlength=size).reshape(n_units, n_systems)
        drawn_n, drawn_x, drawn_y = counts @ n, counts @ sx, counts @ sy
        taus, rhos = np.empty(len(counts)), np.empty(len(counts))
        for b in range(len(counts)):
            present = drawn_n[b] > 0
            mx = drawn_x[b, present] / drawn_n[b, present]
            my = drawn_y[b, present] / drawn_n[b, present]
            taus[b], rhos[b] = numpy_correlations(mx, my)
        row["tau_system_ci_low"], row["tau_system_ci_high"] = percentile_interval(taus, confidence)
        row["rho_system_ci_low"], row["rho_system_ci_high"] = percentile_interval(rhos, confidence)
    return row, table


# -- adversarial pairs -----------------------------------------------------------------------------
def paired_preference(
    frame: pd.DataFrame,
    columns: Sequence[str],
    pair_column: str,
    side_column: str,
    better: str,
    worse: str,
) -> pd.DataFrame:
    """For items paired by ``pair_column`` (one with ``side_column == better``, one with
    ``worse``: e.g. a response and its negated copy), the share of pairs each column scores
    the better side higher, equal, lower; ``accuracy`` = higher + equal / 2. Pairs with a
    missing value in a column are left out of that column's counts."""
    sides = frame[frame[side_column].astype(str).isin([better, worse])]
    rows = []
    for column in columns:
        wide = sides.pivot_table(
            index=pair_column, columns=side_column, values=column, aggfunc="first", dropna=False
        )
        if better not in wide.columns or worse not in wide.columns:
            pairs = pd.DataFrame({better: [], worse: []})
        else:
            pairs = wide[[better, worse]].astype(float).dropna()
        n = len(pairs)
        higher = int((pairs[better] > pairs[worse]).sum())
        equal = int((pairs[better] == pairs[worse]).sum())
        rows.append(
            {
                "column": column,
                "n_pairs": n,
                "better_higher": higher / n if n else np.nan,
                "equal": equal / n if n else np.nan,
                "better_lower": (n - higher - equal) / n if n else np.nan,
                "accuracy": (higher + equal / 2) / n if n else np.nan,
            }
        )
    return pd.DataFrame(rows)
