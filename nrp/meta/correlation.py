"""Correlation of automatic scores with human judgments: per query, pooled, per system.

``meta_evaluate(frame, scores, humans, query_column, system_column)`` takes one row per judged
item (an answer, a dialogue response, a summary) with score columns and human-label columns and
reports, for every (score column x human dimension):

- **Per query**: Kendall's tau-b and Spearman's rho between the score and the human label over
  the items of each query, then the mean over queries with a 95% Student t-interval
  (``nrp.validation.statistics.t_interval``: the query is the unit, as in validation and
  agreement; the source study reports mean tau = 0.64, 95% CI [0.50, 0.78] over 20 queries
  against a medical expert in this form). A query is skipped, and counted, when it has fewer
  than two items with both values or its human labels are all equal (no order to agree with).
  A score that is constant over a used query counts as 0 (it orders nothing), not as missing,
  which would reward a metric for giving up: the rule of ``nrp.nrp.agreement.correlations``.
- **Pooled**: one tau-b and rho over every item with both values (skipped queries included),
  with a percentile bootstrap interval that resamples *queries* (seeded): items of one query
  share a question and are not independent, so the query is the resampling unit. Without a
  query column each item is its own query. (Tau-b rather than tau-a or tau-c: human labels are
  coarse and tie often, and tau-b corrects for ties on both sides.)
- **System level**: with a system column (e.g. ``llm``), each system's mean score and mean
  human label over its items, and tau-b and rho across systems (with the number of systems),
  with the same query-resampling bootstrap (a resample recomputes every system's means over the
  drawn queries, the "bootstrap over inputs" of Deutsch et al., TACL 2021).

Why the correlations are computed here rather than with scipy per call: scipy's ``kendalltau``
costs milliseconds per call, and a bootstrap calls it thousands of times per (score, dimension).
Per query and per system the vectors are short and an O(n^2) numpy tau-b is faster; pooled
bootstrap resamples are multisets of queries, whose tau-b and rho follow exactly from
per-query-pair sums computed once (``_PooledBootstrap``), so 2,000 resamples cost about as much
as a few plain correlations. ``tests/meta`` checks both against scipy on duplicated data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from scipy import stats as scipy_stats

from nrp.errors import ConfigError, NrpError
from nrp.nrp.report_tables import (
    csv_export,
    format_interval,
    format_number,
    json_export,
    records,
    text_table,
)
from nrp.validation import statistics

FEW_ITEMS = "fewer than 2 items"
CONSTANT_HUMAN = "constant human labels"
ALL = "all"
DEFAULT_BOOTSTRAP = 2000
DEFAULT_SEED = 0
# Above this many items a plain tau-b uses scipy's O(n log n) algorithm instead of the O(n^2)
# sign matrix (which is faster for short vectors only).
_DIRECT_TAU_MAX = 1500
# Resamples per block in the vectorised bootstrap (bounds memory: block x items floats).
_BLOCK = 128
# Above this many resampling units the per-pair precomputation (units x units matrices) would
# not fit comfortably; resamples are then scored one by one on the duplicated items.
_MAX_UNITS = 4000


# -- plain coefficients ----------------------------------------------------------------------------
def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_x)(n0 - ties_y)), with n0
    the number of pairs. NaN with fewer than two values or when either side is constant."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    n = len(a)
    if n < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    if n > _DIRECT_TAU_MAX:
        return float(scipy_stats.kendalltau(a, b, variant="b").statistic)
    dx = np.sign(a[:, None] - a[None, :])
    dy = np.sign(b[:, None] - b[None, :])
    s = float((dx * dy).sum()) / 2
    n0 = n * (n - 1) / 2
    ties_x = (float((dx == 0).sum()) - n) / 2
    ties_y = (float((dy == 0).sum()) - n) / 2
    return s / float(np.sqrt((n0 - ties_x) * (n0 - ties_y)))


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson's r of the mid-ranks. NaN with fewer than two values or when
    either side is constant."""
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    ra = scipy_stats.rankdata(a)
    rb = scipy_stats.rankdata(b)
    ra -= ra.mean()
    rb -= rb.mean()
    return float((ra * rb).sum() / np.sqrt((ra * ra).sum() * (rb * rb).sum()))


def correlations(scores: Sequence[float], human: Sequence[float]) -> tuple[float, float]:
    """(tau-b, rho) of scores and human labels with ``nrp.nrp.agreement.correlations``' rules:
    NaN when the human labels are constant (or fewer than two items), 0 when the scores are
    constant (the metric orders nothing)."""
    x = np.asarray(scores, dtype=float)
    y = np.asarray(human, dtype=float)
    if len(x) < 2 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    if np.ptp(x) == 0:
        return 0.0, 0.0
    return kendall_tau_b(x, y), spearman_rho(x, y)


# -- bootstrap over queries ------------------------------------------------------------------------
def resample_counts(n_units: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples x n_units) how often each unit (query) is drawn in each resample: n_units
    draws with replacement per resample, from a generator seeded with ``seed``."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_units, size=(n_resamples, n_units))
    counts = np.zeros((n_resamples, n_units), dtype=float)
    np.add.at(counts, (np.arange(n_resamples)[:, None], draws), 1.0)
    return counts


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
        return correlations(x, y)


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if len(finite) < max(2, len(values) // 2):  # mostly undefined: no interval
        return float("nan"), float("nan")
    alpha = (1 - confidence) / 2
    low, high = np.quantile(finite, [alpha, 1 - alpha])
    return float(low), float(high)


# -- result ----------------------------------------------------------------------------------------
@dataclass
class MetaResult:
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

    def row(self, score: str, dimension: str, subset: str = ALL) -> pd.Series:
        s = self.summary
        rows = s[(s["score"] == score) & (s["dimension"] == dimension) & (s["subset"] == subset)]
        if len(rows) != 1:
            raise KeyError((score, dimension, subset))
        return rows.iloc[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "summary": records(self.summary),
            "systems": records(self.systems),
            "per_query": records(self.per_query),
            "warnings": list(self.warnings),
        }

    def to_json(self, path: str | Path | None = None) -> str:
        return json_export(self.to_dict(), path)

    def to_csv(self, folder: str | Path) -> dict[str, Path]:
        """``meta_{summary,systems,per_query}.csv`` in ``folder``."""
        names = ("summary", "systems", "per_query")
        return csv_export({n: getattr(self, n) for n in names}, folder, "meta")

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
def meta_evaluate(
    frame: pd.DataFrame,
    score_columns: Sequence[str],
    human_columns: Sequence[str],
    query_column: str | None = "qid",
    system_column: str | None = None,
    by: str | None = None,
    n_bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> MetaResult:
    """Correlations of every score column with every human column (see the module docstring).

    ``frame``: one row per item. ``query_column``: the items' query (None: no per-query
    correlations; pooled intervals then resample items). ``system_column``: system-level
    correlations over its values. ``by``: also report each value of this column on its own
    (subset ``all`` is every item). ``n_bootstrap`` resamples (0: no intervals), ``seed``."""
    score_columns, human_columns = list(score_columns), list(human_columns)
    if not score_columns or not human_columns:
        raise ConfigError("meta-evaluation needs at least one score column and one human column")
    if not 0 < confidence < 1:
        raise ConfigError("confidence must lie strictly between 0 and 1")
    if n_bootstrap < 0:
        raise ConfigError(f"bootstrap resamples must be >= 0, got {n_bootstrap}")
    needed = [*score_columns, *human_columns]
    needed += [c for c in (query_column, system_column, by) if c]
    missing = [c for c in dict.fromkeys(needed) if c not in frame.columns]
    if missing:
        raise NrpError(f"columns not found: {missing} (have: {', '.join(map(str, frame.columns))})")
    overlap = sorted(set(score_columns) & set(human_columns))
    if overlap:
        raise ConfigError(f"columns {overlap} are named both as scores and as human labels")
    data = frame.reset_index(drop=True)
    numeric = {}
    for column in dict.fromkeys([*score_columns, *human_columns]):
        values = pd.to_numeric(data[column], errors="coerce")
        bad = values.isna() & data[column].notna()
        if bad.any():
            raise NrpError(
                f"column {column!r} holds values that are not numbers, e.g. "
                f"{data.loc[bad, column].iloc[0]!r}"
            )
        numeric[column] = values.to_numpy(dtype=float)
    queries = (
        data[query_column].astype(str).to_numpy()
        if query_column
        else np.array([str(i) for i in range(len(data))])
    )
    systems = data[system_column].astype(str).to_numpy() if system_column else None
    subsets: list[tuple[str, np.ndarray]] = [(ALL, np.ones(len(data), dtype=bool))]
    if by:
        labels = data[by].astype(str).to_numpy()
        subsets += [(str(v), labels == v) for v in dict.fromkeys(labels)]

    summary_rows, query_parts, system_parts = [], [], []
    warnings: list[str] = []
    for subset, in_subset in subsets:
        for dimension in human_columns:
            for score in score_columns:
                x, y = numeric[score], numeric[dimension]
                usable = in_subset & np.isfinite(x) & np.isfinite(y)
                n_missing = int((in_subset & ~usable).sum())
                row: dict[str, Any] = {
                    "subset": subset,
                    "score": score,
                    "dimension": dimension,
                    "n_items": int(usable.sum()),
                    "n_missing": n_missing,
                }
                per_query = (
                    _per_query(x[usable], y[usable], queries[usable]) if query_column else None
                )
                row.update(_per_query_summary(per_query, confidence))
                if per_query is not None:
                    query_parts.append(
                        per_query.assign(subset=subset, score=score, dimension=dimension)
                    )
                units, n_units = _units(queries[usable])
                boot = None
                if n_bootstrap and n_units >= 2:
                    counts = resample_counts(n_units, n_bootstrap, seed)
                    boot = counts
                row.update(_pooled(x[usable], y[usable], units, n_units, boot, confidence))
                if systems is not None:
                    sys_row, sys_table = _system_level(
                        x[usable], y[usable], systems[usable], units, n_units, boot, confidence
                    )
                    row.update(sys_row)
                    system_parts.append(
                        sys_table.assign(subset=subset, score=score, dimension=dimension)
                    )
                else:
                    row.update(_no_systems())
                summary_rows.append(row)
                if n_missing and subset == ALL:
                    warnings.append(
                        f"{score} x {dimension}: {n_missing} item(s) without both values left out"
                    )
    per_query_columns = [
        "subset",
        "score",
        "dimension",
        "qid",
        "n_items",
        "kendall_tau",
        "spearman_rho",
        "skipped",
        "constant_score",
    ]
    system_columns = [
        "subset",
        "score",
        "dimension",
        "system",
        "n_items",
        "mean_score",
        "mean_human",
    ]
    settings = {
        "query_column": query_column,
        "system_column": system_column,
        "by": by,
        "bootstrap": n_bootstrap,
        "seed": seed,
        "confidence": confidence,
        "kendall": "tau-b",
        "per_query_ci": "Student t-interval over used queries",
        "pooled_ci": "percentile bootstrap, resampling queries"
        if query_column
        else "percentile bootstrap, resampling items (no query column)",
        "skipped": f"queries with {FEW_ITEMS} or {CONSTANT_HUMAN}",
        "constant_score": "a used query where the score is constant counts as 0",
    }
    return MetaResult(
        settings=settings,
        summary=pd.DataFrame(summary_rows),
        per_query=(
            pd.concat(query_parts, ignore_index=True)[per_query_columns]
            if query_parts
            else pd.DataFrame(columns=per_query_columns)
        ),
        systems=(
            pd.concat(system_parts, ignore_index=True)[system_columns]
            if system_parts
            else pd.DataFrame(columns=system_columns)
        ),
        warnings=warnings,
    )


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
            tau, rho = correlations(qx, qy)
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
        values = used[column].to_numpy(dtype=float)
        interval = statistics.t_interval(values, confidence) if len(values) else None
        row[f"{short}_mean"] = float(values.mean()) if len(values) else np.nan
        row[f"{short}_ci_low"] = np.nan if interval is None else interval[0]
        row[f"{short}_ci_high"] = np.nan if interval is None else interval[1]
    return row


def _pooled(
    x: np.ndarray,
    y: np.ndarray,
    units: np.ndarray,
    n_units: int,
    counts: np.ndarray | None,
    confidence: float,
) -> dict[str, Any]:
    tau, rho = correlations(x, y)
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
        row["tau_pooled_ci_low"], row["tau_pooled_ci_high"] = _interval(
            boot.tau(counts), confidence
        )
        row["rho_pooled_ci_low"], row["rho_pooled_ci_high"] = _interval(
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
    row["tau_system"], row["rho_system"] = correlations(table["mean_score"], table["mean_human"])
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
            taus[b], rhos[b] = correlations(mx, my)
        row["tau_system_ci_low"], row["tau_system_ci_high"] = _interval(taus, confidence)
        row["rho_system_ci_low"], row["rho_system_ci_high"] = _interval(rhos, confidence)
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
