"""``build_report(results, out)``: the report folder, built aside and swapped in whole.

The folder: ``index.html``, ``figures/*.png|svg``, ``tables/*.csv`` (the page's main tables
also as ``.md`` and ``.tex``, ``nrp.reports.paper``) and ``report.json`` (what was read, what
was written, the seed and the nrp version). The NRP section leads with the ranked table (one
row per LLM x prompt, best first, with significance groups: ``Summary.ranking``); the long
per-(dimension, ranker, llm, prompt) means table sits folded below it. Sections appear when
their input is there (validation, model sizes, agreement, evaluations); the page lists the
missing ones with the file or option that adds them.

Atomic: everything is written into a hidden folder beside OUT, then OUT is swapped for it
(the old report renamed away, the new one renamed in, the old one deleted), so a reader never
sees half a report and a failed build leaves the previous report as it was. OUT is only ever
replaced when it is empty or an earlier nrp report (it has our ``report.json``): pointing
``--out`` at a results folder by mistake is an error, not a deletion.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from nrp import statistics
from nrp.analysis.flags import FLAG_NAMES, flag_shares
from nrp.analysis.summary import (
    ALL_PROMPTS,
    SHARE_COLUMNS,
    Summary,
    add_flag_shares,
    flooring_ranker,
    summarize,
)
from nrp.collection.manifest import COMBINED
from nrp.errors import ConfigError
from nrp.progress import Progress
from nrp.reports import figures, paper, tables
from nrp.reports.html import (
    FigureBlock,
    Page,
    Section,
    TableBlock,
    integer,
    join,
    number,
    p_value,
    render_page,
)
from nrp.reports.inputs import (
    ReportInputs,
    check_results,
    describe_missing,
    evaluation_score_columns,
    load_inputs,
)
from nrp.settings import settings_with
from nrp.tables import distinct
from nrp.version import __version__

if TYPE_CHECKING:
    from nrp.validation.result import ValidationResult

REPORT_KIND = "nrp-report"
MANIFEST = "report.json"


@dataclass(frozen=True)
class ReportSettings:
    """What a report reads beside its results, and how it is drawn. ``validation``,
    ``agreement``, ``evaluations``, ``meta``, ``sizes``: paths that override what the results
    folder holds (see ``nrp.reports.inputs``). ``title``: the page's (default: from the
    collection). ``seed`` seeds the strip plot's jitter and the bootstrap; ``n_boot``: bootstrap
    resamples of the intervals."""

    validation: str | Path | None = None
    agreement: str | Path | None = None
    evaluations: str | Path | None = None
    meta: str | Path | None = None
    sizes: str | Path | None = None
    title: str | None = None
    seed: int = statistics.DEFAULT_SEED
    n_boot: int = statistics.DEFAULT_RESAMPLES


def build_report(
    results: str | Path,
    out: str | Path,
    settings: ReportSettings | None = None,
    *,
    progress: Progress | None = None,
    **overrides: Any,
) -> Path:
    """Build the report of a run into folder ``out``; returns the path of its ``index.html``.

    ``results``: a RESULTS folder (results.parquet or results.csv, and any of validation.json,
    agreement.json, evaluations.parquet, sizes.csv/.yaml, meta/) or a results file.
    ``settings`` and ``overrides`` (its fields: ``validation=PATH``, ``title=...``,
    ``seed=...``): see ``ReportSettings``."""
    settings = settings_with(ReportSettings, settings, overrides)
    inputs = load_inputs(
        results, settings.validation, settings.agreement, settings.evaluations, settings.meta,
        settings.sizes,
    )  # fmt: skip
    check_results(inputs.results)
    out = Path(out)
    _check_target(out, inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        _write(work, inputs, settings, progress)
        _publish(work, out)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return out / "index.html"


# -- the folder ------------------------------------------------------------------------------------
def _is_report(folder: Path) -> bool:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("kind") == (
            REPORT_KIND
        )
    except (OSError, ValueError, AttributeError):
        return False


def _check_target(out: Path, inputs: ReportInputs) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a folder")
    if any(out.iterdir()) and not _is_report(out):
        raise ConfigError(
            f"--out {out} is a folder that is not an nrp report (no {MANIFEST} of one): "
            "refusing to replace it; choose a new or empty folder"
        )
    inside = [p for p in inputs.paths if p.resolve().is_relative_to(out.resolve())]
    if inside:
        raise ConfigError(f"input {inside[0]} lies inside --out {out}, which will be replaced")


def _publish(work: Path, out: Path) -> None:
    """Swap ``work`` in as ``out`` (the old ``out`` removed only once the new one is there)."""
    if not out.exists():
        os.replace(work, out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    os.replace(out, old)
    try:
        os.replace(work, out)
    except OSError:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


# -- content -------------------------------------------------------------------------------------
def _text(column: pd.Series) -> pd.Series:
    return column.astype(object).where(column.notna(), "").astype(str)


def _results_frame(results: pd.DataFrame) -> pd.DataFrame:
    frame = results.copy()
    for column in ("answer_id", "llm", "prompt", "qid", "dimension", "ranker"):
        frame[column] = _text(frame[column]) if column in frame else ""
    frame["nrp"] = pd.to_numeric(frame["nrp"], errors="coerce").astype(float)
    for column in ("rank", "n_docs"):
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    return frame


@dataclass
class _Content:
    """What the sections of one report read and add to: the results (text columns cleaned),
    their attrs, the NRP summary and measures, the flags of the answers (flags.csv, when
    there); ``made``: the tables written to tables/."""

    results: pd.DataFrame
    attrs: dict[str, Any]
    summary: Summary
    measures: list[tables.NrpMeasure]
    figure_dir: Path
    seed: int
    made: dict[str, pd.DataFrame] = field(default_factory=dict)
    flags: pd.DataFrame | None = None
    weights: dict[str, float] | None = None  # the weighted NRP's (attrs or scoring.json)


def _write(
    work: Path, inputs: ReportInputs, settings: ReportSettings, progress: Progress | None
) -> None:
    say = progress or (lambda line: None)
    results = _results_frame(inputs.results)
    say(f"summarizing {results['answer_id'].nunique():,} answers")
    summary = summarize(results, n_boot=settings.n_boot, seed=settings.seed)
    attrs = dict(inputs.results.attrs)
    weights = _weights(attrs, inputs.scoring)
    if inputs.flags is not None:  # the summary of a frame has none: they come with the folder
        add_flag_shares(summary.ranking, flag_shares(inputs.flags), "prompt")
    content = _Content(
        results, attrs, summary, tables.nrp_measures(results, weights), work / "figures",
        settings.seed, flags=inputs.flags, weights=weights,
    )  # fmt: skip
    absent = {_TITLES[k]: why for k, why in describe_missing(inputs).items()}
    notes = list(inputs.notes) + list(summary.warnings) + list(content.attrs.get("warnings", []))
    sections = _sections(inputs, content, absent, say)
    written = tables.write_tables(content.made, work / "tables")
    main_tables = [
        b for s in sections for b in s.blocks if isinstance(b, TableBlock) and not b.collapsed
    ]
    written.update(paper.write_paper_tables(main_tables, work / "tables"))
    collection = content.attrs.get("collection") or (
        inputs.validation.collection if inputs.validation is not None else None
    )
    if not collection and inputs.agreement is not None:
        collection = inputs.agreement.get("collection")
    page = Page(
        title=settings.title or f"NRP report: {collection or 'results'}",
        meta=_header(results, content.attrs, collection, inputs),
        sections=sections,
        absent=absent,
        notes=notes,
        footer=f"Generated by nrp {__version__} (nrp report). Figures: figures/ (PNG, SVG); "
        "tables: tables/ (CSV; the main ones also Markdown and LaTeX); inputs and settings: "
        "report.json.",
    )
    (work / "index.html").write_text(render_page(page), encoding="utf-8")
    manifest = _manifest(page, collection, inputs, settings, content.figure_dir, written)
    (work / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


def _sections(
    inputs: ReportInputs, content: _Content, absent: dict[str, str], say: Progress
) -> list[Section]:
    """The sections the inputs allow, in page order; why one is left out goes to ``absent``."""
    made, figure_dir, results = content.made, content.figure_dir, content.results
    sections: list[Section] = []
    if inputs.validation is not None:
        say("validation")
        source = f"{inputs.sources['validation']} ({inputs.validation_from})"
        section = _validation_section(inputs.validation, made, figure_dir, source)
        if section is None:
            absent[_TITLES["validation"]] = "the validation result has no evaluated ranker"
        else:
            sections.append(section)
    say("NRP per LLM and prompt")
    sections.append(_nrp_section(content))
    if inputs.sizes is not None:
        section = _size_section(
            inputs.sizes, content.summary, content.measures, results, made, figure_dir
        )
        if section is None:
            absent[_TITLES["sizes"]] = (
                f"none of the LLMs has a size in {inputs.sources['sizes']} "
                f"(it names {join(sorted(inputs.sizes))})"
            )
        else:
            sections.append(section)
    if inputs.agreement is not None or inputs.meta is not None or inputs.categorical:
        say("agreement with humans")
        section = _agreement_section(inputs, made, figure_dir)
        if section is not None:
            sections.append(section)
    if inputs.evaluations is not None:
        say("evaluators")
        section = _evaluator_section(inputs.evaluations, content)
        if section is None:
            absent[_TITLES["evaluators"]] = "the evaluations table has no numeric score column"
        else:
            sections.append(section)
    say("rank distributions")
    section = _rank_section(results, content.measures, made, figure_dir)
    if section is not None:
        sections.append(section)
    return sections


def _manifest(
    page: Page,
    collection: str | None,
    inputs: ReportInputs,
    settings: ReportSettings,
    figure_dir: Path,
    written: dict[str, Path],
) -> dict[str, Any]:
    """report.json: what was read, what was written, the settings."""
    return {
        "kind": REPORT_KIND,
        "nrp_version": __version__,
        "created": _now(),
        "title": page.title,
        "collection": collection,
        "inputs": inputs.sources,
        "seed": settings.seed,
        "n_boot": settings.n_boot,
        "sections": [s.id for s in page.sections],
        "absent": page.absent,
        "figures": sorted(p.name for p in figure_dir.glob("*")) if figure_dir.exists() else [],
        "tables": sorted(p.name for p in written.values()),
    }


_TITLES = {
    "validation": "Ranker validation",
    "nrp": "NRP per LLM and prompt",
    "sizes": "Model size and NRP",
    "agreement": "Agreement with human judgments",
    "evaluators": "Other evaluators",
    "ranks": "Distribution of ranks",
}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _header(
    results: pd.DataFrame, attrs: dict[str, Any], collection: str | None, inputs: ReportInputs
) -> list[tuple[str, str]]:
    rankers = attrs.get("rankers") or (inputs.scoring or {}).get("rankers")
    if not isinstance(rankers, dict) or not rankers:
        per_dimension = results[results["dimension"] != COMBINED]
        rankers = {
            d: join(sorted(set(g["ranker"]) - {""}))
            for d, g in per_dimension.groupby("dimension", sort=False)
        }
    meta = [
        ("Collection", collection or "-"),
        ("Rankers", "; ".join(f"{d}: {r}" for d, r in rankers.items()) or "-"),
    ]
    if attrs.get("ties"):
        meta.append(("Ties", str(attrs["ties"])))
    weights = _weights(attrs, inputs.scoring)
    if weights:
        meta.append(
            ("Weights (weighted)", "; ".join(f"{d}: {float(w):.3g}" for d, w in weights.items()))
        )
    if inputs.validation is not None:
        meta.append(("Validation", f"{inputs.sources['validation']} ({inputs.validation_from})"))
    meta += [
        ("Answers", f"{results['answer_id'].nunique():,}"),
        ("LLMs", join(distinct(results["llm"]))),
        ("Prompts", join(distinct(results["prompt"]))),
        ("Queries", f"{results['qid'].nunique():,}"),
        ("Dimensions", join(distinct(results["dimension"]))),
        ("Generated", _now()),
        ("nrp version", __version__),
        ("Inputs", "; ".join(f"{k}: {v}" for k, v in inputs.sources.items())),
    ]
    return meta


def _weights(attrs: dict[str, Any], scoring: dict[str, Any] | None) -> dict[str, float] | None:
    """The weighted NRP's weights per dimension: the results' attrs', else scoring.json's."""
    for source in (attrs, scoring or {}):
        weights = source.get("weights")
        if isinstance(weights, dict) and weights:
            return {str(d): float(w) for d, w in weights.items()}
    return None


def _interval(low: float, high: float) -> str:
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "[-]"
    return f"[{low:.4f}, {high:.4f}]"


def _intervals(lows: pd.Series, highs: pd.Series) -> list[str]:
    return [_interval(low, high) for low, high in zip(lows, highs, strict=True)]


# -- sections ------------------------------------------------------------------------------------
def _validation_section(
    validation: ValidationResult, made: dict[str, pd.DataFrame], figure_dir: Path, source: str
) -> Section | None:
    table = tables.validation_table(validation)
    table = table[table["mean"].notna()]
    if table.empty:
        return None
    made["validation"] = table
    figure = figures.validation_figure(table, figure_dir)
    primary = table.loc[table["primary"], "measure"].iloc[0] if len(table) else "nDCG@10"
    rows = []
    for (dimension, ranker), group in table.groupby(["dimension", "ranker"], sort=False):
        row: dict[str, Any] = {"dimension": dimension, "ranker": ranker}
        for measure in group.itertuples():
            row[f"{measure.measure} [95% CI]"] = (
                f"{measure.mean:.4f} {_interval(measure.ci_low, measure.ci_high)}"
            )
        first = group.iloc[0]
        row["queries"] = int(first["n_queries"])
        row["p vs chosen (corrected)"] = first["p_vs_best"]
        row["chosen"] = bool(first["chosen"])
        rows.append(row)
    display = pd.DataFrame(rows)
    settings = validation.settings
    how = (
        f"How well each candidate ranker orders the judged documents of each query by their "
        f"human grades, per dimension: {primary} (the primary measure, which decides the "
        f"choice) and {join([m for m in dict.fromkeys(table['measure']) if m != primary])}, "
        "means over queries (bars) with their 95% confidence intervals (error bars; "
        f"{settings.get('ci', 't')} interval, clipped to [0, 1]). The chosen ranker (bold, "
        "marked 'chosen') is the one whose ranking NRP uses in that dimension. Overlapping "
        "bars do not settle a "
        f"difference: the table's p is the paired {settings.get('test', 'randomization')} test "
        f"of each ranker against the chosen one on {primary}, "
        f"{settings.get('correction', 'holm')}-corrected within the dimension. Labels: "
        f"{validation.labels}; collection {validation.collection}. Read from {source}."
    )
    blocks: list[Any] = [
        FigureBlock(
            figure.stem,
            f"Bar chart of {primary} and the other measures per ranker and dimension",
            "Mean over queries per ranker and measure, with 95% confidence intervals.",
        ),
        TableBlock(
            display,
            "validation.csv",
            formats={"p vs chosen (corrected)": p_value, "queries": integer},
            highlight="chosen",
        ),
    ]
    blocks += [f"Warning: {w}" for w in validation.warnings]
    return Section("validation", _TITLES["validation"], how, blocks)


def _nrp_section(content: _Content) -> Section:
    summary, measures, attrs = content.summary, content.measures, content.attrs
    content.made["nrp_ranking"] = summary.ranking
    content.made["nrp_means"] = summary.means
    content.made["nrp_comparisons"] = summary.comparisons
    points = content.results[content.results["nrp"].notna()]
    figure = figures.nrp_strip_figure(
        points, summary.means, measures, content.figure_dir, seed=content.seed
    )
    blocks: list[Any] = []
    if attrs.get("note"):
        blocks.append(str(attrs["note"]))
    blocks.append(
        FigureBlock(
            figure.stem,
            "Strip plot of NRP per answer, grouped by LLM and prompt, with means and intervals",
            "NRP of every answer per LLM and prompt; diamonds: mean over queries with its 95% "
            "bootstrap interval. Panel titles name the measure (the weighted NRP with its "
            "weights).",
        )
    )
    blocks.append(_ranking_block(content))
    shown = _nrp_means_display(summary, measures, content.flags)
    flagged = " 'share flagged': the share of answers with a flag of degenerate text (flags.csv)."
    flagged = "" if content.flags is None else flagged
    if "share floored" in shown.columns:
        flagged = (" 'share floored': the share of answers the ranker put below every text it "
                   "lets through (a guard's flags: taken for no answer)." + flagged)  # fmt: skip
    blocks.append(
        TableBlock(
            shown,
            "nrp_means.csv",
            caption=f"Details: mean NRP per measure, LLM x prompt, and per LLM over its prompts "
            f"(prompt '{ALL_PROMPTS}': a query's per-prompt means averaged first).{flagged}",
            formats={"queries": integer, "answers": integer},
            collapsed=True,
        )
    )
    if content.flags is not None:
        blocks.append(_flags_block(content))
    comparisons = pd.concat([tables.measure_rows(summary.comparisons, m) for m in measures])
    if len(comparisons):
        blocks.append(
            TableBlock(
                comparisons.drop(columns=["ranker"]),
                "nrp_comparisons.csv",
                caption="Paired comparisons over common queries (mean_difference = a - b; "
                f"{summary.settings['test']} test, {summary.settings['correction']} correction "
                "within each family)",
                collapsed=True,
                formats={"p": p_value, "p_corrected": p_value, "n_queries": integer},
            )
        )
    return Section("nrp", _TITLES["nrp"], _nrp_how(measures, attrs.get("ties")), blocks)


def _ranking_block(content: _Content) -> TableBlock:
    """The ranked table (``Summary.ranking``): LLM x prompt rows best first, with groups."""
    summary, ranking = content.summary, content.summary.ranking
    dimension, ranker = ranking.attrs.get("measure") or summary.ranked_measure()
    what = tables.measure_label(dimension, ranker, content.weights)
    shares = {
        f"share {name}": ranking[column]
        for name, column in SHARE_COLUMNS
        if ranking[column].notna().any()
    }
    display = pd.DataFrame(
        {
            "rank": ranking["rank"],
            "llm": ranking["llm"],
            "prompt": ranking["prompt"],
            "mean NRP": ranking["mean_nrp"],
            "95% CI": _intervals(ranking["ci_low"], ranking["ci_high"]),
            "group": ranking["group"],
            **shares,
            "queries": ranking["n_queries"],
            "answers": ranking["n_answers"],
        }
    )
    s = summary.settings
    pairs = ranking.attrs.get("pairs", len(ranking) * (len(ranking) - 1) // 2)
    caption = (
        f"LLM x prompt ranked by {what}, best first: mean over queries with its 95% percentile "
        f"bootstrap interval over queries. group: rows sharing a letter are not significantly "
        f"different ({s['test']} test over queries, {s['correction']} correction over {pairs} "
        f"pairs, alpha {s['alpha']}). Shares are of answers: floored (a guard put it below "
        "every text it lets through), flagged (flags.csv), empty."
    )
    return TableBlock(
        display,
        "nrp_ranking.csv",
        caption=caption,
        formats={"rank": integer, "queries": integer, "answers": integer},
    )


def _nrp_how(measures: list[tables.NrpMeasure], ties: Any) -> str:
    how = (
        "Each point is one generated answer, placed by its NRP = 1 - r/|D_q|: r is the number "
        "of judged documents of its query that the ranker put above it"
        + (f" (documents tied with it counted by the '{ties}' rule)" if ties else "")
        + ", |D_q| the number of judged documents. NRP 1: the answer outranked every judged "
        "document; 0: every document was ranked above it. Within an LLM the prompts sit side by "
        "side in their colours; points are spread sideways at random (seeded) only so that they "
        "can be seen. The black diamond is the mean over queries (a query's samples averaged "
        "first) and its bar the 95% percentile bootstrap interval over queries. Compare LLMs by "
        "the diamonds and bars; 'share NRP=1' is saturation: when most answers reach 1, NRP no "
        "longer separates those LLMs."
    )
    if len(measures) == 1 and len(measures[0].covers) > 1:
        how += (
            f" Every dimension ({join(list(measures[0].covers))}) gives every answer the same "
            "NRP, so one panel stands for all of them."
        )
    else:
        for measure in measures:
            if len(measure.covers) > 1:
                how += (
                    f" {join(list(measure.covers))} give every answer the same NRP: one panel "
                    f"({measure.label}) stands for them."
                )
    return how


def _flags_block(content: _Content) -> TableBlock:
    """The share of flagged answers per LLM x prompt, and of each flag (tables/nrp_flags.csv)."""
    shares = flag_shares(content.flags)
    content.made["nrp_flags"] = shares
    display = pd.DataFrame(
        {
            "llm": shares["llm"],
            "prompt": shares["prompt"],
            "answers": shares["n_answers"],
            "share flagged": shares["share_flagged"],
            **{f"share {name}": shares[f"share_{name}"] for name in FLAG_NAMES},
        }
    )
    return TableBlock(
        display,
        "nrp_flags.csv",
        caption="Flagged answers per LLM x prompt (flags.csv, nrp.validation.flags): the share "
        "with any flag, and with each: question_words (at least 80% of its content terms are "
        "the question's), judged_copy (at least 80% of its word 5-grams occur in one judged "
        "document), little_content (fewer than 5 content terms beyond the question's). A "
        "flagged answer can reach a high NRP without answering: read it before trusting it.",
        formats={"answers": integer},
        collapsed=True,
    )


def _flag_shares_by_row(shown: pd.DataFrame, flags: pd.DataFrame) -> list[float]:
    """The share of flagged answers of each (llm, prompt) row; prompt '(all)': of the LLM."""
    model = flags.groupby(["llm", "prompt"], sort=False)["flagged"].mean()
    llm = flags.groupby("llm", sort=False)["flagged"].mean()
    return [
        float(llm.get(name, math.nan))
        if prompt == ALL_PROMPTS
        else float(model.get((name, prompt), math.nan))
        for name, prompt in zip(shown["llm"], shown["prompt"], strict=True)
    ]


def _nrp_means_display(
    summary: Summary, measures: list[tables.NrpMeasure], flags: pd.DataFrame | None = None
) -> pd.DataFrame:
    shown = pd.concat([tables.measure_rows(summary.means, m) for m in measures])
    extra = {} if flags is None else {"share flagged": _flag_shares_by_row(shown, flags)}
    scored = "share_floored" in shown.columns and shown["share_floored"].notna().all()
    if scored and any(flooring_ranker(r) is not None for r in pd.unique(shown["ranker"])):
        # the guard's flags: answers it took for no answer, below every one it let through
        extra = {"share floored": shown["share_floored"], **extra}
    return pd.DataFrame(
        {
            "dimension": [
                _measure_label(measures, d, r)
                for d, r in zip(shown["dimension"], shown["ranker"], strict=True)
            ],
            "llm": shown["llm"],
            "prompt": shown["prompt"],
            "mean NRP": shown["mean_nrp"],
            "95% CI": _intervals(shown["ci_low"], shown["ci_high"]),
            "share NRP=1": shown["share_nrp_1"],
            "share NRP=0": shown["share_nrp_0"],
            **extra,
            "queries": shown["n_queries"],
            "answers": shown["n_answers"],
        }
    )


def _measure_label(measures: list[tables.NrpMeasure], dimension: str, ranker: str) -> str:
    for measure in measures:
        if measure.dimension == dimension and measure.ranker == ranker:
            return measure.label
    return dimension


def _size_section(
    sizes: dict[str, float],
    summary: Summary,
    measures: list[tables.NrpMeasure],
    results: pd.DataFrame,
    made: dict[str, pd.DataFrame],
    figure_dir: Path,
) -> Section | None:
    table = tables.size_table(summary, sizes, measures)
    if table.empty:
        return None
    made["nrp_sizes"] = table
    figure = figures.size_figure(table, figure_dir)
    llms = distinct(results["llm"])
    without = [llm for llm in llms if llm not in sizes]
    how = (
        "Each LLM's mean NRP, pooled over its prompts (a query's per-prompt means averaged, "
        "then the mean over queries), against its number of parameters in billions on a log "
        "scale, with the 95% bootstrap interval over queries as the error bar. A rising "
        "cloud means larger models write answers the ranker puts higher; a flat one near 1 "
        "means NRP is saturated for these models."
    )
    blocks: list[Any] = [
        FigureBlock(
            figure.stem,
            "Scatter plot of mean NRP against model size (log scale)",
            "Mean NRP per LLM (all prompts) against parameters, with 95% intervals.",
        ),
        TableBlock(
            pd.DataFrame(
                {
                    "llm": table["llm"],
                    "parameters (billions)": table["params_b"],
                    "measure": table["measure"],
                    "mean NRP": table["mean_nrp"],
                    "95% CI": _intervals(table["ci_low"], table["ci_high"]),
                    "queries": table["n_queries"],
                }
            ),
            "nrp_sizes.csv",
            formats={"queries": integer, "parameters (billions)": number(3)},
        ),
    ]
    if without:
        blocks.insert(0, f"LLMs without a size (not drawn): {join(without)}.")
    return Section("sizes", _TITLES["sizes"], how, blocks)


def _agreement_section(
    inputs: ReportInputs, made: dict[str, pd.DataFrame], figure_dir: Path
) -> Section | None:
    table = tables.human_agreement_table(inputs.agreement, inputs.meta)
    if table.empty and not inputs.categorical:
        return None
    blocks: list[Any] = []
    if len(table):
        made["human_agreement"] = table
        blocks += _correlation_blocks(table, figure_dir)
    for k, run in enumerate(inputs.categorical):
        blocks += _categorical_blocks(run, k, made, figure_dir)
    how = (
        "How far each evaluator orders items as the human judges did: Kendall tau-b (dot) with "
        "its 95% interval (bar) per evaluator and human dimension; 1 = the same order as the "
        "humans, 0 = unrelated, -1 = reversed (Spearman's rho in the table). Rows from "
        "agreement.json are NRP's own leave-one-out check: each judged document is ranked "
        "among the other documents of its query as if it were an answer, and its NRP is "
        "correlated with its grade per query (mean over queries, t-interval; level 'query'). "
        "Rows from meta-evaluations (nrp meta) come at three levels: 'query' (mean of per-query "
        "tau, t-interval), 'pooled' (over every item, bootstrap interval over queries) and "
        "'system' (systems ranked by mean score against their mean human label). A judge that "
        "gives labels is shown by its accuracy per class instead."
    )
    return Section("agreement", _TITLES["agreement"], how, blocks)


def _correlation_blocks(table: pd.DataFrame, figure_dir: Path) -> list[Any]:
    blocks: list[Any] = []
    drawn = table[table["tau"].notna()]
    if len(drawn):
        labels = []
        for row in drawn.itertuples():
            detail = ", ".join(
                x for x in (row.level, "" if row.subset == "all" else row.subset) if x
            )
            labels.append(f"{row.evaluator} | {row.dimension}" + (f" ({detail})" if detail else ""))
        figure = figures.interval_figure(
            labels,
            drawn["tau"].tolist(),
            drawn["tau_low"].tolist(),
            drawn["tau_high"].tolist(),
            drawn["source"].tolist(),
            figure_dir,
            "human_agreement",
            "Kendall tau-b with the human judgments (95% interval)",
        )
        blocks.append(
            FigureBlock(
                figure.stem,
                "Dot plot of Kendall tau-b with human judgments per evaluator and dimension",
                "Kendall tau-b per evaluator and human dimension, with 95% intervals.",
            )
        )
    display = table.assign(
        **{
            "tau 95% CI": _intervals(table["tau_low"], table["tau_high"]),
            "spearman 95% CI": _intervals(table["spearman_low"], table["spearman_high"]),
        }
    )[["source", "evaluator", "dimension", "level", "subset", "tau", "tau 95% CI", "spearman",
       "spearman 95% CI", "n", "dataset"]]  # fmt: skip
    blocks.append(TableBlock(display, "human_agreement.csv", formats={"n": integer}))
    return blocks


def _categorical_blocks(
    run: Any, k: int, made: dict[str, pd.DataFrame], figure_dir: Path
) -> list[Any]:
    """A categorical meta-evaluation: accuracy line, per-class table, review curve."""
    stem = f"categorical_{k + 1}"
    summary = run.summary
    facts = [
        f"{name} {number()(summary[key])}"
        for key, name in (("accuracy", "accuracy"), ("macro_accuracy", "macro accuracy"))
        if key in summary
    ]
    blocks: list[Any] = [
        f"Labels of {run.name} against the human labels"
        + (f": {', '.join(facts)}" if facts else "")
        + (f" over {integer(summary['n_items'])} items." if "n_items" in summary else ".")
    ]
    made[f"{stem}_per_class"] = run.per_class
    blocks.append(
        TableBlock(
            run.per_class,
            f"{stem}_per_class.csv",
            caption=f"{run.name}: accuracy per human class (precision: share of the judge's "
            "labels of that class that are right)",
        )
    )
    if run.plots:
        figure_dir.mkdir(parents=True, exist_ok=True)
        for suffix, path in run.plots.items():
            shutil.copyfile(path, figure_dir / f"{stem}_review.{suffix}")
        if "svg" not in run.plots:  # the page shows the SVG: fall back to the PNG's name
            shutil.copyfile(run.plots["png"], figure_dir / f"{stem}_review.svg")
        blocks.append(
            FigureBlock(
                f"{stem}_review",
                "Review curve: share of wrong labels caught against share of items reviewed",
                f"{run.name}: sending items whose confidence is below a threshold to review; "
                "x: share of items reviewed, y: share of the wrong labels among them (as drawn "
                "by nrp meta).",
            )
        )
    if run.review is not None and len(run.review):
        made[f"{stem}_review"] = run.review
        blocks.append(
            TableBlock(
                run.review,
                f"{stem}_review.csv",
                caption=f"{run.name}: review curve over confidence thresholds",
                collapsed=True,
            )
        )
    return blocks


def _evaluator_section(evaluations: pd.DataFrame, content: _Content) -> Section | None:
    columns = evaluation_score_columns(evaluations)
    if not columns:
        return None
    results = content.results
    evaluations = evaluations.copy()
    identity = results.drop_duplicates("answer_id").set_index("answer_id")
    for column in ("llm", "prompt", "qid"):
        if column not in evaluations:
            evaluations[column] = evaluations["answer_id"].map(identity[column]).fillna("")
    means = tables.evaluator_means_table(evaluations, columns)
    versus = tables.evaluator_nrp_table(evaluations, results, columns, content.measures)
    content.made["evaluator_means"] = means
    content.made["evaluator_nrp"] = versus
    blocks: list[Any] = []
    unmatched = int((~evaluations["answer_id"].isin(identity.index)).sum())
    if unmatched:
        blocks.append(
            f"{unmatched:,} evaluated answers have no NRP result (left out of the comparison "
            "with NRP)."
        )
    blocks += _evaluator_nrp_blocks(versus, content.figure_dir)
    wide = means.pivot_table(
        index=["llm", "prompt"], columns="evaluator", values="mean", sort=False
    ).reset_index()
    wide.columns.name = None
    blocks.append(
        TableBlock(
            wide,
            "evaluator_means.csv",
            caption="Mean of each evaluator score per LLM x prompt and per LLM (prompt "
            f"'{ALL_PROMPTS}'), over the answers with a score (counts of missing scores in "
            "the CSV).",
        )
    )
    return Section("evaluators", _TITLES["evaluators"], _EVALUATORS_HOW, blocks)


_EVALUATORS_HOW = (
    "Scores of the other evaluators (nrp evaluate) beside NRP. The figure tells how far "
    "each score orders a query's answers as NRP does: Kendall tau-b between the score and "
    "NRP over the answers of one query (0 when the score is constant there; queries where "
    "NRP is constant are left out), averaged over queries with a 95% t-interval. A high "
    "tau: the evaluator and NRP agree on which answers to a question are better; near 0: "
    "they measure different things. The table below gives each score's mean per LLM and "
    "prompt on its own scale (BLEU 0-100, ROUGE/BERTScore 0-1, judges 1-5)."
)


def _evaluator_nrp_blocks(versus: pd.DataFrame, figure_dir: Path) -> list[Any]:
    """Each evaluator score against NRP: the dot plot (when a tau is defined) and the table."""
    blocks: list[Any] = []
    drawn = versus[versus["tau"].notna()]
    if len(drawn):
        labels = [f"{r.evaluator} | {r.measure}" for r in drawn.itertuples()]
        figure = figures.interval_figure(
            labels,
            drawn["tau"].tolist(),
            drawn["tau_low"].tolist(),
            drawn["tau_high"].tolist(),
            drawn["measure"].tolist(),
            figure_dir,
            "evaluators_vs_nrp",
            "Kendall tau-b with NRP over a query's answers (mean over queries, 95% CI)",
        )
        blocks.append(
            FigureBlock(
                figure.stem,
                "Dot plot of each evaluator's Kendall tau-b with NRP",
                "Per evaluator score: Kendall tau-b with NRP over each query's answers, mean "
                "over queries with its 95% t-interval.",
            )
        )
    display = pd.DataFrame(
        {
            "evaluator": versus["evaluator"],
            "NRP measure": versus["measure"],
            "tau": versus["tau"],
            "tau 95% CI": _intervals(versus["tau_low"], versus["tau_high"]),
            "spearman": versus["spearman"],
            "queries": versus["n_queries"],
            "tau pooled": versus["tau_pooled"],
            "spearman pooled": versus["spearman_pooled"],
            "answers": versus["n_answers"],
        }
    )
    blocks.append(
        TableBlock(
            display,
            "evaluator_nrp.csv",
            caption="Evaluator scores against NRP: per-query correlation (mean, t-interval) "
            "and pooled over every answer.",
            formats={"queries": integer, "answers": integer},
        )
    )
    return blocks


def _rank_title(measure: tables.NrpMeasure) -> str:
    return f"{measure.dimension} ({measure.ranker})" if measure.ranker else measure.dimension


def _rank_section(
    results: pd.DataFrame,
    measures: list[tables.NrpMeasure],
    made: dict[str, pd.DataFrame],
    figure_dir: Path,
) -> Section | None:
    if "rank" not in results:
        return None
    table = tables.rank_distribution_table(results)
    if table.empty:
        return None
    made["rank_distribution"] = table
    per_dimension = results[results["dimension"] != COMBINED]
    n_docs = (
        per_dimension.groupby(["dimension", "ranker"])["n_docs"].max().to_dict()
        if "n_docs" in per_dimension
        else {}
    )
    # the measures' panels, the weighted one left out (it has no rank of its own); one panel
    # when every dimension has the same NRP
    panels = [
        (m.dimension, m.ranker, m.label if len(m.covers) > 1 else _rank_title(m))
        for m in measures
        if m.dimension != COMBINED
    ]
    if not panels:
        return None
    figure = figures.rank_figure(table, panels, n_docs, figure_dir)
    sizes = per_dimension.drop_duplicates("qid")["n_docs"] if "n_docs" in per_dimension else None
    size_text = ""
    if sizes is not None and sizes.notna().any():
        low, high = int(sizes.min()), int(sizes.max())
        size_text = (
            f" |D_q| is {low} documents for every query."
            if low == high
            else f" |D_q| ranges from {low} to {high} documents per query."
        )
    how = (
        "The distribution of r, the number of judged documents ranked above an answer, per "
        "dimension (and ranker), stacked by LLM. A pile at 0 is saturation: those answers "
        "outranked every judged document (NRP = 1); r = |D_q| means every document was put "
        "above the answer (NRP = 0). Tied documents count by the tie rule, so r may be a "
        "half." + size_text
    )
    blocks = [
        FigureBlock(
            figure.stem,
            "Histograms of the answers' ranks r per dimension, stacked by LLM",
            "Histogram of r per dimension, stacked by LLM.",
        ),
        TableBlock(
            table,
            "rank_distribution.csv",
            caption="Answers per rank r, dimension, ranker and LLM",
            collapsed=True,
            formats={"answers": integer, "rank": number(1)},
        ),
    ]
    return Section("ranks", _TITLES["ranks"], how, blocks)
