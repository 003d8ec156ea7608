"""The report's figures, each saved as PNG (for slides and quick looks) and SVG (for papers).

Choices, and why:

- **matplotlib's object API** (``matplotlib.figure.Figure``), never ``pyplot``: no global
  figure state and no GUI backend, so building a report works headless, in threads and in the
  service; saving picks the Agg (PNG) and SVG backends by file type.
- **Reproducible files**: jitter comes from a seeded generator, the SVG carries no date and its
  element ids are salted with a fixed string, so the same inputs give the same files.
- **Many points**: the strip plot's point clouds are rasterised inside the SVG when a figure
  has more than ``RASTERIZE_ABOVE`` points (a vector circle per answer makes a SVG of tens of
  megabytes for 10,000 answers); axes and text stay vector.
- **Intervals everywhere**: every mean drawn carries its interval as an error bar (the same
  interval as in the table beside it), so a difference is never read off bare bars.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.reports.tables import NrpMeasure, measure_rows
from nrp.tables import distinct

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RASTERIZE_ABOVE = 3000
PNG_DPI = 110
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")


def _mpl() -> ModuleType:
    """matplotlib, imported when a figure is drawn (not when ``nrp.api`` is imported)."""
    mpl = lazy_libs.module("matplotlib")

    return mpl


def colors() -> list:
    """The colour cycle: matplotlib's tab10 (distinguishable, colour-blind tolerable)."""
    return list(_mpl().colormaps["tab10"].colors)


def palette(n: int) -> list:
    """``n`` distinct colours: tab10, tab20 up to 20, then evenly spaced viridis."""
    mpl = _mpl()
    if n <= 10:
        return colors()[:n]
    if n <= 20:
        return list(mpl.colormaps["tab20"].colors)[:n]
    return [mpl.colormaps["viridis"](i / (n - 1)) for i in range(n)]


STYLE = {
    "svg.hashsalt": "nrp-report",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


@dataclass(frozen=True)
class FigureFiles:
    """A saved figure: its file stem and the PNG and SVG paths."""

    stem: str
    png: Path
    svg: Path


def save(figure: Figure, folder: Path, stem: str) -> FigureFiles:
    """``folder/stem.png`` and ``folder/stem.svg``."""
    folder.mkdir(parents=True, exist_ok=True)
    png, svg = folder / f"{stem}.png", folder / f"{stem}.svg"
    with _mpl().rc_context(STYLE):
        figure.savefig(png, dpi=PNG_DPI, bbox_inches="tight", metadata={"Software": None})
        figure.savefig(svg, bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return FigureFiles(stem, png, svg)


def _figure(width: float, height: float) -> Figure:
    Figure = lazy_libs.module("matplotlib.figure").Figure

    with _mpl().rc_context(STYLE):
        return Figure(figsize=(width, height), layout="constrained")


def _grid(figure: Figure, n: int, max_columns: int) -> list:
    columns = min(max_columns, n)
    rows = math.ceil(n / columns)
    with _mpl().rc_context(STYLE):
        axes = figure.subplots(rows, columns, squeeze=False).ravel().tolist()
    for extra in axes[n:]:
        extra.set_visible(False)
    return axes[:n]


def _errors(means: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Error bar lengths below and above each mean (0 where there is no interval)."""
    below = np.where(np.isnan(low), 0.0, means - low)
    above = np.where(np.isnan(high), 0.0, high - means)
    return np.vstack([np.clip(below, 0, None), np.clip(above, 0, None)])


# -- validation ----------------------------------------------------------------------------------
def validation_figure(table: pd.DataFrame, folder: Path, stem: str = "validation") -> FigureFiles:
    """Per dimension a panel of grouped bars: each ranker's mean of every measure (bars coloured
    by measure) with its confidence interval; rankers ordered best first on the primary
    measure, the chosen one marked in its tick label."""
    dimensions = list(dict.fromkeys(table["dimension"]))
    measures = list(dict.fromkeys(table["measure"]))
    n_rankers = table.groupby("dimension")["ranker"].nunique().max()
    columns = min(3, len(dimensions))
    rows = math.ceil(len(dimensions) / columns)
    width = columns * max(3.6, 0.25 * n_rankers * len(measures) + 1.5)
    figure = _figure(min(width, 18), 3.4 * rows + 0.4)
    axes = _grid(figure, len(dimensions), 3)
    bar, cycle = 0.8 / len(measures), colors()
    for ax, dimension in zip(axes, dimensions, strict=True):
        mine = table[table["dimension"] == dimension]
        rankers = list(dict.fromkeys(mine["ranker"]))
        x = np.arange(len(rankers))
        for k, measure in enumerate(measures):
            part = mine[mine["measure"] == measure].set_index("ranker").reindex(rankers)
            means = part["mean"].to_numpy(dtype=float)
            errors = _errors(means, part["ci_low"].to_numpy(float), part["ci_high"].to_numpy(float))
            ax.bar(
                x + (k - (len(measures) - 1) / 2) * bar,
                means,
                bar,
                yerr=errors,
                capsize=2,
                color=cycle[k % len(cycle)],
                label=measure,
                error_kw={"elinewidth": 0.8},
            )
        chosen = set(mine.loc[mine["chosen"].astype(bool), "ranker"])
        labels = [f"{r}\n(chosen)" if r in chosen else r for r in rankers]
        ax.set_xticks(x, labels, rotation=30 if len(rankers) > 4 else 0, ha="center")
        for tick, ranker in zip(ax.get_xticklabels(), rankers, strict=True):
            if ranker in chosen:
                tick.set_fontweight("bold")
        ax.set_ylim(0, 1.05)
        ax.set_title(dimension)
        ax.set_ylabel("mean over queries (95% CI)")
        ax.grid(axis="x", visible=False)
    axes[0].legend(loc="upper right", fontsize=8, frameon=False)
    return save(figure, folder, stem)


# -- NRP per LLM -----------------------------------------------------------------------------------
def nrp_strip_figure(
    answers: pd.DataFrame,
    means: pd.DataFrame,
    measures: Sequence[NrpMeasure],
    folder: Path,
    stem: str = "nrp_by_llm",
    seed: int = 0,
) -> FigureFiles:
    """One panel per measure: each answer a point (x: its LLM, offset by prompt and jittered;
    y: its NRP), and over each LLM x prompt cloud its mean over queries with the bootstrap CI
    (black diamond and bar), as the source study's Figure 1 groups LLMs by prompt."""
    rng = np.random.default_rng(seed)
    llms = distinct(answers["llm"])
    prompts = distinct(answers["prompt"])
    slots = max(1, len(prompts))
    width = min(18.0, max(6.0, 1.0 + 0.55 * len(llms) * slots + 0.6 * len(llms)))
    figure = _figure(width, 3.3 * len(measures) + 0.5)
    axes = _grid(figure, len(measures), 1)
    total = sum(len(measure_rows(answers, m)) for m in measures)
    rasterized = total > RASTERIZE_ABOVE
    size = 14 if total <= 500 else 6 if total <= 5000 else 2
    step = 0.8 / slots
    colors = palette(len(prompts))
    for ax, measure in zip(axes, measures, strict=True):
        points = measure_rows(answers, measure)
        cells = measure_rows(means, measure)
        for j, prompt in enumerate(prompts):
            offset = (j - (slots - 1) / 2) * step
            color = colors[j]
            mine = points[points["prompt"] == prompt]
            x = mine["llm"].map({llm: i for i, llm in enumerate(llms)}).to_numpy(float) + offset
            x = x + rng.uniform(-0.35 * step, 0.35 * step, size=len(x))
            ax.scatter(
                x,
                mine["nrp"].to_numpy(float),
                s=size,
                alpha=0.45,
                color=color,
                linewidths=0,
                label=prompt,
                rasterized=rasterized,
            )
            cell = cells[cells["prompt"] == prompt].set_index("llm").reindex(llms)
            present = cell["mean_nrp"].notna().to_numpy()
            xs = np.arange(len(llms))[present] + offset
            m = cell["mean_nrp"].to_numpy(float)[present]
            errors = _errors(
                m, cell["ci_low"].to_numpy(float)[present], cell["ci_high"].to_numpy(float)[present]
            )
            ax.errorbar(
                xs, m, yerr=errors, fmt="D", color="black", markersize=4, capsize=3, linewidth=1
            )
        if len(llms) > 5:
            ax.set_xticks(np.arange(len(llms)), llms, rotation=30, ha="right")
        else:
            ax.set_xticks(np.arange(len(llms)), llms)
        ax.set_xlim(-0.6, len(llms) - 0.4)
        ax.set_ylim(-0.04, 1.04)
        ax.set_ylabel("NRP")
        ax.set_title(measure.label)
        ax.grid(axis="x", visible=False)
    handles, labels = axes[0].get_legend_handles_labels()
    if len(prompts) > 1 or prompts != [""]:
        axes[0].legend(
            handles,
            labels,
            title="prompt",
            loc="lower left",
            fontsize=8,
            frameon=True,
            markerscale=1.5,
        )
    return save(figure, folder, stem)


# -- size vs NRP ---------------------------------------------------------------------------------
def size_figure(table: pd.DataFrame, folder: Path, stem: str = "nrp_by_size") -> FigureFiles:
    """One panel per measure: each LLM's mean NRP pooled over its prompts (with its CI) against
    its number of parameters on a log axis, as in the source study's Figure 2. Each LLM has its
    own colour and marker, named in the legend (labels beside the points collide when models
    of one family have nearly the same size)."""
    measures = list(dict.fromkeys(table["measure"]))
    llms = list(dict.fromkeys(table.sort_values("params_b", kind="stable")["llm"]))
    colors = palette(len(llms))
    columns = min(3, len(measures))
    legend_width = 0.9 + 0.065 * max(len(llm) for llm in llms)
    figure = _figure(
        min(20.0, 4.4 * columns + legend_width),
        max(3.6 * math.ceil(len(measures) / 3), 0.6 + 0.2 * len(llms)),
    )
    axes = _grid(figure, len(measures), 3)
    x_all = table["params_b"].to_numpy(float)
    for ax, measure in zip(axes, measures, strict=True):
        mine = table[table["measure"] == measure].set_index("llm")
        for k, llm in enumerate(llms):
            if llm not in mine.index:
                continue
            row = mine.loc[llm]
            y = np.array([float(row["mean_nrp"])])
            errors = _errors(y, np.array([float(row["ci_low"])]), np.array([float(row["ci_high"])]))
            ax.errorbar(
                [float(row["params_b"])], y, yerr=errors, fmt=MARKERS[k % len(MARKERS)],
                color=colors[k], capsize=3, markersize=6, label=llm,
            )  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlim(x_all.min() / 2, x_all.max() * 2)
        ax.set_ylim(-0.04, 1.04)
        ax.set_xlabel("parameters (billions, log scale)")
        ax.set_ylabel("mean NRP over all prompts (95% CI)")
        ax.set_title(measure)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(
        handles, labels, title="LLM", loc="outside right upper", fontsize=7, frameon=False
    )
    return save(figure, folder, stem)


# -- rank distributions --------------------------------------------------------------------------
def rank_figure(
    table: pd.DataFrame,
    panels: Sequence[tuple[str, str, str]],
    n_docs: dict[tuple[str, str], float],
    folder: Path,
    stem: str = "rank_distribution",
) -> FigureFiles:
    """One panel per (dimension, ranker, title) of ``panels``: a histogram of r (documents
    ranked above the answer), stacked by LLM. ``table`` is ``rank_distribution_table``;
    ``n_docs``: the largest |D_q| per (dimension, ranker) (the x axis ends there)."""
    llms = list(dict.fromkeys(table["llm"]))
    colors = palette(len(llms))
    columns = min(2, len(panels))
    legend_width = 0.9 + 0.065 * max(len(llm) for llm in llms)
    figure = _figure(
        5.2 * columns + legend_width,
        max(3.2 * math.ceil(len(panels) / columns) + 0.3, 0.6 + 0.2 * len(llms)),
    )
    axes = _grid(figure, len(panels), 2)
    for ax, (dimension, ranker, title) in zip(axes, panels, strict=True):
        mine = table[(table["dimension"] == dimension) & (table["ranker"] == ranker)]
        top = max(float(n_docs.get((dimension, ranker), 0)), float(mine["rank"].max()))
        width = max(1.0, math.ceil((top + 1) / 40))
        bins = np.arange(0, top + width + 1e-9, width)
        values = [mine.loc[mine["llm"] == llm, "rank"].to_numpy(float) for llm in llms]
        weights = [mine.loc[mine["llm"] == llm, "answers"].to_numpy(float) for llm in llms]
        ax.hist(
            values, bins=bins, weights=weights, stacked=True, color=colors, label=llms,
            edgecolor="white", linewidth=0.3,
        )  # fmt: skip
        ax.set_title(title)
        ax.set_xlabel("r: documents ranked above the answer (0 = top)")
        ax.set_ylabel("answers")
        ax.grid(axis="x", visible=False)
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(
        handles, labels, title="LLM", loc="outside right upper", fontsize=7, frameon=False
    )
    return save(figure, folder, stem)


# -- correlations with intervals -------------------------------------------------------------------
def interval_figure(
    labels: Sequence[str],
    values: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
    groups: Sequence[str],
    folder: Path,
    stem: str,
    xlabel: str,
) -> FigureFiles:
    """A dot per row (its coefficient) with its interval as a horizontal bar, rows listed top to
    bottom, coloured by group; a line at 0 (no agreement). Used for agreement with humans and
    for evaluators against NRP."""
    n = len(labels)
    n_groups = len(set(groups))
    figure = _figure(7.5, 0.9 + 0.28 * n + (0.2 * n_groups if n_groups > 1 else 0.0))
    (ax,) = _grid(figure, 1, 1)
    y = np.arange(n)[::-1]
    values_ = np.asarray(values, float)
    errors = _errors(values_, np.asarray(lows, float), np.asarray(highs, float))
    group_names = list(dict.fromkeys(groups))
    colors = palette(len(group_names))
    for k, group in enumerate(group_names):
        mask = np.array([g == group for g in groups])
        ax.errorbar(
            values_[mask],
            y[mask],
            xerr=errors[:, mask],
            fmt="o",
            color=colors[k],
            capsize=3,
            markersize=4,
            label=group,
        )
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_yticks(y, list(labels))
    ax.set_xlim(-1.02, 1.02)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    if len(group_names) > 1:
        figure.legend(loc="outside lower center", fontsize=7, frameon=False, ncols=1)
    return save(figure, folder, stem)
