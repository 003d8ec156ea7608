"""The report's tables: built from the inputs as frames, written as CSV beside the HTML.

Each function returns a plain frame with raw numbers (the HTML formats them; the CSV keeps full
precision, so a reader can recompute or re-plot). Tables:

- ``validation``: dimension, ranker, measure, mean, ci_low, ci_high (clipped to [0, 1] for the
  measures bounded there), n_queries, chosen, p_vs_best (Holm-corrected p of the paired test
  against the chosen ranker; empty for it);
- ``nrp_ranking``: ``Summary.ranking``, the ranked table (LLM x prompt best first, with groups);
- ``nrp_means`` / ``nrp_comparisons``: ``nrp.analysis.summary.summarize``'s means and paired tests
  as they are (query-level means, bootstrap intervals over queries);
- ``nrp_sizes``: LLM, parameters (billions), mean NRP pooled over prompts with its interval;
- ``rank_distribution``: dimension, ranker, llm, rank, answers: how many answers got each r;
- ``human_agreement``: one row per (source, evaluator, dimension, level): Kendall tau-b and
  Spearman with intervals, from ``agreement.json`` (NRP's leave-one-out agreement) and the
  meta-evaluation tables;
- ``evaluator_means``: mean of each evaluator score per LLM x prompt and per LLM;
- ``evaluator_nrp``: per evaluator score and NRP measure, Kendall tau-b / Spearman between the
  score and NRP over a query's answers, mean over queries with a t-interval (the query is the
  unit, as in the summary and in agreement; the interval clipped to [-1, 1]), and pooled over
  every answer.

``nrp_measures`` decides which NRP measures the figures show: when every dimension's NRP is the
same number for every answer (one ranker chosen for every dimension, the source study's case),
one measure stands for all of them instead of identical panels; a measure whose NRP repeats an
earlier one's (the weighted NRP of weights 1/0/0 is its one dimension's) is folded into it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nrp import statistics
from nrp.analysis.summary import ALL_PROMPTS, Summary
from nrp.collection.manifest import COMBINED
from nrp.measures import display_name, measure_bounds
from nrp.tables import distinct, write_text

if TYPE_CHECKING:
    from nrp.validation.result import ValidationResult

#: NRP values closer than this are the same NRP (they are r/|D_q| fractions)
SAME_NRP = 1e-9


@dataclass(frozen=True)
class NrpMeasure:
    """One NRP measure as the figures show it: the summary's (dimension, ranker) key, a label,
    and the dimensions whose NRP it is (several when they are all the same number)."""

    dimension: str
    ranker: str
    label: str
    covers: tuple[str, ...]


def _text(column: pd.Series) -> pd.Series:
    return column.astype(object).where(column.notna(), "").astype(str)


def nrp_measures(
    results: pd.DataFrame, weights: Mapping[str, float] | None = None
) -> list[NrpMeasure]:
    """The distinct (dimension, ranker) pairs of the results in report order (the weighted
    combination last): one measure for every dimension when every pair gives every answer the
    same NRP, else one per pair, a pair whose NRP repeats an earlier one's folded into it (its
    label names both). ``weights`` (the scoring record's) name the weighted measure."""
    frame = results.assign(
        dimension=_text(results["dimension"]),
        ranker=_text(results["ranker"]) if "ranker" in results else "",
    )
    pairs = list(frame[["dimension", "ranker"]].drop_duplicates().itertuples(False, None))
    pairs = [p for p in pairs if p[0] != COMBINED] + [p for p in pairs if p[0] == COMBINED]
    series = {pair: _nrp_series(frame, pair) for pair in pairs}
    if len(pairs) > 1 and all(_same(series[pairs[0]], series[p]) for p in pairs[1:]):
        first_dimension, first_ranker = pairs[0]
        rankers = sorted({r for _, r in pairs if r})
        dimensions = tuple(d for d, _ in pairs)
        label = f"NRP of every dimension ({', '.join(rankers) or first_ranker})"
        return [NrpMeasure(first_dimension, first_ranker, label, dimensions)]
    kept: list[tuple[tuple[str, str], list[tuple[str, str]]]] = []
    for pair in pairs:
        twin = next((k for k in kept if _same(series[k[0]], series[pair])), None)
        if twin is None:
            kept.append((pair, [pair]))
        else:
            twin[1].append(pair)
    measures = []
    for (dimension, ranker), same in kept:
        label = " = ".join(measure_label(d, r, weights) for d, r in same)
        covers = tuple(d for d, _ in same)
        measures.append(NrpMeasure(dimension, ranker, label, covers))
    return measures


def measure_label(dimension: str, ranker: str, weights: Mapping[str, float] | None) -> str:
    """A measure's name as titles show it; the weighted NRP with the weights it averages."""
    if dimension != COMBINED:
        return f"{dimension} ({ranker})" if ranker else dimension
    if not weights:
        return "weighted NRP (weights not recorded)"
    used = ", ".join(f"{d} {float(w):.2f}" for d, w in weights.items() if float(w))
    return f"weighted NRP ({used or 'no weights'})"


def _nrp_series(frame: pd.DataFrame, pair: tuple[str, str]) -> pd.Series | None:
    """A pair's NRP per answer (None when an answer has several rows: not comparable)."""
    rows = frame[(frame["dimension"] == pair[0]) & (frame["ranker"] == pair[1])]
    if rows["answer_id"].duplicated().any():
        return None
    return rows.set_index("answer_id")["nrp"].astype(float).sort_index()


def _same(first: pd.Series | None, other: pd.Series | None) -> bool:
    """The same answers with the same NRP (within ``SAME_NRP``; missing NRP in the same places)."""
    if first is None or other is None or not first.index.equals(other.index):
        return False
    a, b = first.to_numpy(), other.to_numpy()
    return bool(np.allclose(a, b, atol=SAME_NRP, rtol=0, equal_nan=True))


def measure_rows(frame: pd.DataFrame, measure: NrpMeasure) -> pd.DataFrame:
    """The rows of one measure (``frame`` has dimension and ranker columns)."""
    ranker = _text(frame["ranker"]) if "ranker" in frame else pd.Series("", index=frame.index)
    match = (_text(frame["dimension"]) == measure.dimension) & (ranker == measure.ranker)
    return frame[match]


# -- validation ----------------------------------------------------------------------------------
def validation_table(validation: ValidationResult) -> pd.DataFrame:
    """One row per (dimension, ranker, measure) of a ``ValidationResult``; the rankers of a
    dimension ordered by their mean of the primary measure, best first."""
    rows = []
    for dimension, result in validation.dimensions.items():
        best = result.choice.best if result.choice is not None else None
        systems = list(result.summary)
        systems.sort(key=lambda s: -result.summary[s][validation.primary].mean)
        for system in systems:
            p = None if best is None or system == best else result.p_against(best, system)
            for measure in validation.measures:
                summary = result.summary[system][measure]
                rows.append(
                    {
                        "dimension": dimension,
                        "ranker": system,
                        "measure": display_name(measure),
                        "primary": measure == validation.primary,
                        "mean": summary.mean,
                        "ci_low": _bounded(summary.ci_low, measure),
                        "ci_high": _bounded(summary.ci_high, measure),
                        "n_queries": summary.n,
                        "chosen": system == best,
                        "p_vs_best": math.nan if p is None else p,
                    }
                )
    columns = [
        "dimension", "ranker", "measure", "primary", "mean", "ci_low", "ci_high", "n_queries",
        "chosen", "p_vs_best",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _bounded(value: float | None, measure: str) -> float:
    """An interval end of a validation measure, clipped to the measure's bounds
    (``measure_bounds``: a validation.json written before intervals were clipped at the source
    holds a t-interval past 1; counting measures are not clipped)."""
    if value is None or math.isnan(value):
        return math.nan
    bounds = measure_bounds(measure)
    return float(value) if bounds is None else min(bounds[1], max(bounds[0], float(value)))


# -- NRP -----------------------------------------------------------------------------------------
def size_table(
    summary: Summary, sizes: Mapping[str, float], measures: list[NrpMeasure]
) -> pd.DataFrame:
    """Mean NRP pooled over prompts of each LLM that has a size, per shown measure."""
    rows = []
    for measure in measures:
        pooled = measure_rows(summary.means, measure)
        pooled = pooled[pooled["prompt"] == ALL_PROMPTS]
        for row in pooled.itertuples():
            if row.llm in sizes:
                rows.append(
                    {
                        "llm": row.llm,
                        "params_b": float(sizes[row.llm]),
                        "dimension": measure.dimension,
                        "ranker": measure.ranker,
                        "measure": measure.label,
                        "mean_nrp": row.mean_nrp,
                        "ci_low": row.ci_low,
                        "ci_high": row.ci_high,
                        "n_queries": row.n_queries,
                    }
                )
    columns = [
        "llm", "params_b", "dimension", "ranker", "measure", "mean_nrp", "ci_low", "ci_high",
        "n_queries",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def rank_distribution_table(results: pd.DataFrame) -> pd.DataFrame:
    """How many answers got each rank r, per dimension, ranker and LLM (the weighted rows have
    no rank of their own and are left out)."""
    frame = results[_text(results["dimension"]) != COMBINED]
    frame = frame.assign(
        dimension=_text(frame["dimension"]),
        ranker=_text(frame["ranker"]) if "ranker" in frame else "",
        llm=_text(frame["llm"]),
        rank=pd.to_numeric(frame["rank"], errors="coerce").astype(float),
    )
    frame = frame[frame["rank"].notna()]
    counts = (
        frame.groupby(["dimension", "ranker", "llm", "rank"], sort=False)
        .size()
        .rename("answers")
        .reset_index()
    )
    # the results' order of dimensions, rankers and LLMs; ranks ascending within them
    order = {
        column: counts[column].map({v: i for i, v in enumerate(distinct(frame[column]))})
        for column in ("dimension", "ranker", "llm")
    }
    keys = pd.DataFrame(order).assign(rank=counts["rank"])
    counts = counts.loc[keys.sort_values(list(keys.columns), kind="stable").index]
    return counts.reset_index(drop=True)


# -- agreement with humans -------------------------------------------------------------------------
AGREEMENT_COLUMNS = [
    "source", "evaluator", "dimension", "level", "subset", "tau", "tau_low", "tau_high",
    "spearman", "spearman_low", "spearman_high", "n", "dataset",
]  # fmt: skip
LEAVE_ONE_OUT = "NRP leave-one-out (agreement.json)"


def human_agreement_table(
    agreement: Mapping[str, Any] | None, meta: pd.DataFrame | None
) -> pd.DataFrame:
    """Kendall tau-b / Spearman with the human grades, from NRP's leave-one-out agreement (per
    query mean with its t-interval, level ``query``) and from meta-evaluation tables (source
    ``meta-evaluation DATASET``)."""
    rows: list[dict[str, Any]] = []
    if agreement is not None:
        collection = str(agreement.get("collection", ""))
        for row in agreement["summary"]:
            rows.append(
                {
                    "source": LEAVE_ONE_OUT,
                    "evaluator": f"NRP {row['ranker']}",
                    "dimension": row["dimension"],
                    "level": "query",
                    "subset": "",
                    "tau": row.get("tau_mean"),
                    "tau_low": row.get("tau_ci_low"),
                    "tau_high": row.get("tau_ci_high"),
                    "spearman": row.get("rho_mean"),
                    "spearman_low": row.get("rho_ci_low"),
                    "spearman_high": row.get("rho_ci_high"),
                    "n": row.get("queries_used"),
                    "dataset": collection,
                }
            )
    frame = pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
    if meta is not None and len(meta):
        extra = meta.assign(source="meta-evaluation " + meta["dataset"].astype(str))
        frame = pd.concat([frame, extra[AGREEMENT_COLUMNS]], ignore_index=True)
    numeric = ["tau", "tau_low", "tau_high", "spearman", "spearman_low", "spearman_high", "n"]
    for column in numeric:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    return frame


# -- evaluators ----------------------------------------------------------------------------------
def evaluator_means_table(evaluations: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Mean of each evaluator score over the answers (missing scores left out and counted), per
    LLM x prompt and per LLM (prompt ``(all)``)."""
    frame = evaluations.copy()
    for column in ("llm", "prompt"):
        frame[column] = _text(frame[column]) if column in frame else ""
    rows = []
    for column in columns:
        values = pd.to_numeric(frame[column], errors="coerce").astype(float)
        for keys, part in (
            *frame.groupby(["llm", "prompt"], sort=False),
            *((k, p) for k, p in frame.groupby(["llm"], sort=False)),
        ):
            llm = keys[0]
            prompt = keys[1] if len(keys) > 1 else ALL_PROMPTS
            mine = values.loc[part.index]
            rows.append(
                {
                    "evaluator": column,
                    "llm": llm,
                    "prompt": prompt,
                    "mean": float(mine.mean()) if mine.notna().any() else math.nan,
                    "n_answers": int(mine.notna().sum()),
                    "missing": int(mine.isna().sum()),
                }
            )
    out = pd.DataFrame(rows, columns=["evaluator", "llm", "prompt", "mean", "n_answers", "missing"])
    order = {v: i for i, v in enumerate(distinct(frame["llm"]))}
    out["_llm"] = out["llm"].map(order)
    out["_all"] = out["prompt"] == ALL_PROMPTS
    out = out.sort_values(["evaluator", "_llm", "_all"], kind="stable")
    return out.drop(columns=["_llm", "_all"]).reset_index(drop=True)


def evaluator_nrp_table(
    evaluations: pd.DataFrame,
    results: pd.DataFrame,
    columns: list[str],
    measures: list[NrpMeasure],
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Per evaluator score and NRP measure: Kendall tau-b and Spearman between the score and
    NRP over each query's answers (``nrp.statistics.correlations``: 0 when the score is
    constant, the query left out when NRP is), mean over queries with a t-interval; and the
    pooled coefficients over every answer. Answers are joined on answer_id."""
    rows = []
    for measure in measures:
        nrp = measure_rows(results, measure)[["answer_id", "qid", "nrp"]]
        nrp = nrp.assign(answer_id=_text(nrp["answer_id"]), qid=_text(nrp["qid"]))
        joined = nrp.merge(
            evaluations[["answer_id", *columns]], on="answer_id", how="inner", validate="1:1"
        )
        for column in columns:
            pairs = joined[["qid", "nrp", column]].dropna()
            taus, rhos = [], []
            for _, group in pairs.groupby("qid", sort=False):
                tau, rho = statistics.correlations(group[column], group["nrp"])
                if not math.isnan(tau):
                    taus.append(tau)
                    rhos.append(rho)
            interval = statistics.t_interval(taus, confidence) if len(taus) >= 2 else None
            if interval is not None:  # a t-interval may pass +-1, a coefficient cannot
                interval = (max(-1.0, interval[0]), min(1.0, interval[1]))
            pooled_tau, pooled_rho = statistics.correlations(pairs[column], pairs["nrp"])
            rows.append(
                {
                    "evaluator": column,
                    "dimension": measure.dimension,
                    "ranker": measure.ranker,
                    "measure": measure.label,
                    "tau": float(np.mean(taus)) if taus else math.nan,
                    "tau_low": math.nan if interval is None else interval[0],
                    "tau_high": math.nan if interval is None else interval[1],
                    "spearman": float(np.mean(rhos)) if rhos else math.nan,
                    "n_queries": len(taus),
                    "tau_pooled": pooled_tau,
                    "spearman_pooled": pooled_rho,
                    "n_answers": len(pairs),
                }
            )
    names = [
        "evaluator", "dimension", "ranker", "measure", "tau", "tau_low", "tau_high", "spearman",
        "n_queries", "tau_pooled", "spearman_pooled", "n_answers",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=names)


# -- writing -------------------------------------------------------------------------------------
def write_tables(tables: Mapping[str, pd.DataFrame], folder: str | Path) -> dict[str, Path]:
    """Each table as ``folder/NAME.csv`` (written aside, then renamed); paths by name."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, frame in tables.items():
        path = folder / f"{name}.csv"
        write_text(path, frame.to_csv(index=False))
        paths[name] = path
    return paths
