"""Aggregate per-answer NRP values into means per LLM and prompt, with intervals and paired tests.

Input: the per-answer frame of ``nrp.positioning.scoring.score_answers`` (one row per answer,
dimension and ranker; ``dimension`` may be ``combined``), or the ``results.parquet`` /
``results.csv`` the scoring CLI writes (``read_results``, through the table reader
``nrp.tables.read_table_file``). Given a folder or file, the ``flags.csv`` beside it (written by
``nrp score``, ``nrp.analysis.flags``) adds the share of flagged answers per LLM x prompt.

Statistical choices (and why):

- **The query is the unit.** A query's samples are averaged first (its query-level mean), and
  the mean over queries is reported. Queries are what the collection samples from the
  population of questions; samples of one query are repeated measurements of the same
  question, so a query answered three times must weigh as much as a query answered once.
- **Pooled over prompts** (a row per LLM with prompt ``(all)``): a query's per-prompt means are
  averaged (each prompt weighs the same however many samples it has), then the mean over
  queries is taken.
- **Interval**: 95% percentile bootstrap over queries (``n_boot`` resamples of the query-level
  means, fixed seed, so a summary is reproducible), from ``nrp.statistics``. NRP
  values are bounded and often pile up at 1 for strong LLMs (skewed, see the saturation
  shares), which is where a percentile bootstrap is preferable to a t-interval. No interval
  with fewer than two queries.
- **Saturation**: the share of *answers* with NRP = 1 (ranked above every judged document: the
  ceiling the source study reports for strong LLMs, where NRP stops telling LLMs apart) and
  with NRP = 0 (ranked below every document). These are counts of answers, not of queries.
- **Paired comparisons** on query-level means, over the queries both sides have: LLMs against
  each other within each prompt, LLMs pooled over prompts (when there is more than one prompt),
  and prompts against each other within each LLM. The test is validation's (paired
  randomization test by default, exact for few queries; paired t-test on request) and Holm's
  correction is applied within each family: one family per (dimension, ranker, comparison,
  prompt or LLM), as validation treats every pair of rankers of a dimension as one family.
- **The ranked table** (what ``nrp summary`` prints first): the LLM x prompt rows (or the LLMs
  pooled over prompts) of the weighted NRP (else the first dimension), best mean first, with
  significance groups: one family of the same paired tests over every pair of rows, shown as a
  compact letter display (``statistics.compact_letter_display``): rows sharing a letter do not
  differ significantly.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from nrp import jsontext, statistics
from nrp.analysis.flags import FLAG_NAMES, FLAGS_FILE, flag_shares, flags_beside
from nrp.collection.manifest import COMBINED
from nrp.errors import ConfigError, InputError, NrpError
from nrp.positioning.record import SCORING_FILE, scoring_record
from nrp.tables import (
    FrameView,
    TableExports,
    TableFile,
    find_table,
    format_interval,
    format_number,
    format_p,
    read_table_file,
    require_columns,
    text_column,
    text_table,
    vocabulary_frame,
)
from nrp.validation.report import CORRECTION_NAMES, TEST_NAMES

if TYPE_CHECKING:
    from nrp.rankers.base import Ranker

REQUIRED_COLUMNS = ("llm", "prompt", "qid", "dimension", "nrp")
TEXT_COLUMNS = ("answer_id", "llm", "prompt", "qid", "dimension", "ranker")
NUMERIC_COLUMNS = ("score", "rank", "n_docs", "ties", "nrp")
RESULT_FILES = ("results.parquet", "results.csv")
#: The prompt column of rows pooled over every prompt of an LLM.
ALL_PROMPTS = "(all)"
#: NRP within this distance of 1 (or 0) counts as saturated: the values are r/|D_q| fractions,
#: so anything closer is rounding, not a document.
SATURATION_TOLERANCE = 1e-9

LLMS_WITHIN_PROMPT = "llms within prompt"
LLMS_POOLED = "llms pooled over prompts"
PROMPTS_WITHIN_LLM = "prompts within llm"
#: what the ranked table has one row per: an LLM x prompt, or an LLM pooled over its prompts
BY_CHOICES = ("prompt", "llm")
#: the ranked table's shares of answers: (text column, ranking column)
SHARE_COLUMNS = (
    ("floored", "share_floored"), ("flagged", "share_flagged"), ("empty", "share_empty"),
)  # fmt: skip
#: how the ranked table's header names a correction
CORRECTED = {"holm": "Holm-corrected", "bonferroni": "Bonferroni-corrected", "none": "uncorrected"}


# -- reading ---------------------------------------------------------------------------------------
def read_results(path: str | Path) -> pd.DataFrame:
    """The per-answer results written by the scoring CLI: an output folder (its
    ``results.parquet``, else ``results.csv``) or a ``.parquet``, ``.csv`` or ``.tsv`` file.

    Text columns (qid, llm, prompt, ...) are read as text, so qid ``007`` stays ``007``."""
    path = find_table(path, RESULT_FILES)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".csv", ".tsv"):
        raise InputError(path, None, "results must be .parquet, .csv or .tsv")
    table = read_table_file(path)
    frame = table.frame
    if suffix == ".parquet":
        for column in TEXT_COLUMNS:
            if column in frame.columns:
                frame[column] = text_column(frame[column])
    else:
        _numbers(table)
    require_columns(frame, REQUIRED_COLUMNS, path, hint="a results table")
    return frame


def _numbers(table: TableFile) -> None:
    """A delimited file's numeric columns as floats (an empty cell: NaN), ``sample`` as int when
    every sample is a number; an error at the first cell that is not a number."""
    frame = table.frame
    for column in NUMERIC_COLUMNS:
        if column not in frame.columns:
            continue
        text = frame[column].str.strip()
        values = pd.to_numeric(text.where(text != ""), errors="coerce")
        bad = values.isna() & (text != "")
        if bad.any():
            line = table.first_line(bad)
            raise InputError(table.path, line, f"{column} {text[bad].iloc[0]!r} is not a number")
        frame[column] = values.astype(float)
    if "sample" in frame.columns:
        as_numbers = pd.to_numeric(frame["sample"], errors="coerce")
        if not as_numbers.isna().any():
            frame["sample"] = as_numbers.astype(int)


# -- result ----------------------------------------------------------------------------------------
@dataclass
class Summary(TableExports, FrameView):
    """Means, intervals, saturation shares and paired tests of NRP per LLM and prompt.

    ``means``: one row per (dimension, ranker, llm, prompt), prompt ``(all)`` for an LLM pooled
    over its prompts; columns mean_nrp, ci_low, ci_high, share_nrp_1, share_nrp_0,
    share_floored (the share of answers the ranker put on its floor: a guard's flags; NaN without
    scores), n_queries, n_answers. ``query_means``: the query-level means the means and tests are
    taken over.
    ``comparisons``: one row per paired test (family, group, a, b, n_queries, mean_a, mean_b,
    mean_difference = mean over common queries of a - b, p, p_corrected). ``flags``: when the
    results folder has ``flags.csv`` (``nrp score`` writes it), one row per (llm, prompt) with
    n_answers, n_flagged, share_flagged (any flag) and share_<flag> per flag
    (``nrp.analysis.flags.flag_shares``); None otherwise.
    """

    settings: dict[str, Any]
    means: pd.DataFrame
    query_means: pd.DataFrame
    comparisons: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    flags: pd.DataFrame | None = None
    #: how the weighted NRP was made (``nrp.positioning.scoring.scoring_record``: weights and
    #: the dimensions left out, with why), from the frame's attrs or ``scoring.json``
    weighting: dict[str, Any] | None = None
    #: the ranked table, one row per LLM x prompt (``ranked()``): computed once by ``summarize``
    ranking: pd.DataFrame | None = None

    # -- look-ups -------------------------------------------------------------------------------
    def measures(self) -> list[tuple[str, str]]:
        """(dimension, ranker) pairs in report order (``combined`` last)."""
        pairs = self.means[["dimension", "ranker"]].drop_duplicates()
        return [tuple(p) for p in pairs.itertuples(index=False)]

    def row(
        self, dimension: str, llm: str, prompt: str = ALL_PROMPTS, ranker: str | None = None
    ) -> pd.Series:
        """The means row of one LLM (and prompt) in one dimension (the only ranker of the
        dimension unless ``ranker`` is given)."""
        frame = self.means
        match = (frame["dimension"] == dimension) & (frame["llm"] == llm)
        match &= frame["prompt"] == prompt
        if ranker is not None:
            match &= frame["ranker"] == ranker
        rows = frame[match]
        if len(rows) != 1:
            raise KeyError(f"{len(rows)} rows for {(dimension, ranker, llm, prompt)}")
        return rows.iloc[0]

    def mean(
        self, dimension: str, llm: str, prompt: str = ALL_PROMPTS, ranker: str | None = None
    ) -> float:
        return float(self.row(dimension, llm, prompt, ranker)["mean_nrp"])

    def ranked_measure(self) -> tuple[str, str]:
        """The (dimension, ranker) the ranked table ranks by: the weighted NRP (``COMBINED``)
        when the summary has it, else the first measure."""
        measures = self.measures()
        return next((m for m in measures if m[0] == COMBINED), measures[0])

    def ranked(self, by: str = "prompt") -> pd.DataFrame:
        """The ranked table: one row per LLM x prompt (``by="prompt"``, the stored ``ranking``)
        or per LLM pooled over its prompts (``by="llm"``), best mean first, with significance
        groups; see ``ranking_table``."""
        if by not in BY_CHOICES:
            raise ConfigError(f"rank by 'prompt' or 'llm', not {by!r}")
        if by == "prompt" and self.ranking is not None:
            return self.ranking
        return ranking_table(self, by)

    # -- export ---------------------------------------------------------------------------------
    def to_frame(self, perquery: bool = False, pooled: bool = False) -> pd.DataFrame:
        """The means in the result frames' vocabulary (``nrp.tables.FRAME_VOCABULARY``): one
        row per (dimension, ranker, llm, prompt) with ``name`` (``llm/prompt``), ``measure``
        (``nrp``), ``mean``, ``ci_low``, ``ci_high``, ``queries``, ``answers`` and the shares
        of NRP 1 and 0. The rows of an LLM pooled over its prompts (prompt ``(all)``) are kept
        apart: ``pooled=True`` gives those alone. ``perquery``: one row per (dimension, ranker,
        name, qid) with the query's mean NRP as ``value`` (``pt.Experiment(perquery=True)``).
        ``means`` and ``query_means`` keep the columns of the CSV files."""
        frame = self.query_means if perquery else self.means
        frame = frame[(frame["prompt"] == ALL_PROMPTS) == pooled]
        if perquery:
            frame = frame.rename(columns={"nrp": "value"})
        return vocabulary_frame(frame, measure="nrp")

    # ``to_dict``, ``to_json`` (NaN written as null) and ``to_csv``: ``summary_ranking.csv``,
    # ``summary_means.csv``, ``summary_comparisons.csv``, ``summary_query_means.csv`` (and
    # ``summary_flags.csv`` when there are flags), from ``TableExports``
    JSON_FIELDS: ClassVar[tuple[str, ...]] = (
        "settings", "ranking", "means", "comparisons", "query_means", "flags", "weighting",
        "warnings",
    )  # fmt: skip
    CSV_TABLES: ClassVar[tuple[str, ...]] = (
        "ranking", "means", "comparisons", "query_means", "flags",
    )  # fmt: skip
    CSV_PREFIX: ClassVar[str] = "summary"

    # -- text -----------------------------------------------------------------------------------
    def tables(self) -> dict[tuple[str, str], str]:
        """(dimension, ranker) -> its text table with the comparisons below it; a table with
        the same numbers as one before it (the weighted NRP of one dimension, two dimensions
        scored by one ranker on the same judged documents) says so in one line instead."""
        tables: dict[tuple[str, str], str] = {}
        seen: dict[str, str] = {}
        for key in self.measures():
            head, _, numbers = self._table(*key).partition("\n")
            name = _block_name(*key)
            if numbers in seen:
                tables[key] = f"{name}: the same numbers as {seen[numbers]}"
            else:
                tables[key] = f"{head}\n{numbers}"
                seen[numbers] = name
        return tables

    def format(self, details: bool = False, by: str = "prompt") -> str:
        """The ranked table (``ranked(by)``) after the weighting, then the warnings, each once;
        ``details``: the per-dimension tables with their paired tests and the flags table
        after the ranked table, and every warning as it was raised."""
        parts = [self.weighting_text()] if self.weighting_text() else []
        parts.append(self.ranking_text(by))
        if details:
            parts += list(self.tables().values())
            if self.flags is not None:
                parts.append(self.flags_table())
        warnings = self.warnings if details else collapsed_warnings(self.warnings)
        if warnings:
            parts.append("warnings:\n" + "\n".join(f"  {w}" for w in warnings))
        if not details:
            parts.append("per-dimension tables and paired tests: nrp summary --details; "
                         "all tables: --out DIR")  # fmt: skip
        return "\n\n".join(parts)

    def ranking_text(self, by: str = "prompt") -> str:
        """The ranked table as text, with two lines saying what is ranked and how the groups
        are made."""
        s = self.settings
        ranking = self.ranked(by)
        dimension, ranker = ranking.attrs.get("measure") or self.ranked_measure()
        answers = self.query_means[
            (self.query_means["dimension"] == dimension)
            & (self.query_means["ranker"] == ranker)
            & (self.query_means["prompt"] != ALL_PROMPTS)
        ]
        what = (
            "weighted NRP" if dimension == COMBINED else f"NRP of {_block_name(dimension, ranker)}"
        )
        ci = f"{round(s['confidence'] * 100)}% CI"
        n = len(ranking)
        pairs = ranking.attrs.get("pairs", n * (n - 1) // 2)
        drawn = ranking.attrs.get("resamples") if s["test"] == "randomization" else None
        resamples = f" ({drawn:,} sign vectors)" if drawn else ""
        corrected = CORRECTED.get(s["correction"], s["correction"])
        lines = [
            f"ranked by {what}: {answers['qid'].nunique()} queries, "
            f"{int(answers['n_answers'].sum())} answers; mean over queries with {ci} "
            f"(percentile bootstrap over queries, {s['n_boot']} resamples, seed {s['seed']})",
            "group: systems sharing a letter are not significantly different "
            f"({TEST_NAMES.get(s['test'], s['test'])} over queries{resamples}, {corrected} over "
            f"{'all ' if pairs != 1 else ''}{pairs} pair{'s' if pairs != 1 else ''}, "
            f"alpha {s['alpha']})",
        ]
        # a share no row has (no ranker floors, no flags.csv, no empty flag) is left out
        shares = [(name, c) for name, c in SHARE_COLUMNS if ranking[c].notna().any()]
        prompt = by == "prompt"
        rows = [
            [
                str(r["rank"]),
                str(r["llm"]),
                *([str(r["prompt"])] if prompt else []),
                f"{format_number(r['mean_nrp'])} {format_interval(r['ci_low'], r['ci_high'])}",
                str(r["group"]),
                *(_percent(r[column]) for _, column in shares),
                str(r["n_queries"]),
                str(r["n_answers"]),
            ]
            for r in ranking.to_dict("records")
        ]
        header = ["rank", "llm", *(["prompt"] if prompt else []), f"NRP [{ci}]", "group",
                  *(name for name, _ in shares), "queries", "answers"]  # fmt: skip
        lines.append(text_table(header, rows))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def weighting_text(self) -> str:
        """Which dimensions the weighted NRP averages, and those left out with why ('' when
        the scoring record is not at hand)."""
        if not self.weighting or not self.weighting.get("weights"):
            return ""
        weights = self.weighting["weights"]
        used = ", ".join(f"{d} {w:.3f}" for d, w in weights.items() if w)
        lines = [f"weighted NRP ({COMBINED}): the mean of {used}"]
        for dimension, why in (self.weighting.get("left_out") or {}).items():
            lines.append(f"  {dimension}: left out of the weighted NRP ({why})")
        return "\n".join(lines)

    def flags_table(self) -> str:
        """The share of flagged answers per LLM x prompt, as text ('' without flags)."""
        if self.flags is None:
            return ""
        lines = [
            f"flagged answers ({FLAGS_FILE}): share of answers with any flag, and with each flag"
        ]
        rows = [
            [str(r["llm"]), str(r["prompt"]), str(r["n_answers"]),
             f"{100 * r['share_flagged']:.1f}%",
             *(f"{100 * r[f'share_{name}']:.1f}%" for name in FLAG_NAMES)]
            for r in self.flags.to_dict("records")
        ]  # fmt: skip
        header = ["llm", "prompt", "answers", "flagged", *FLAG_NAMES]
        lines.append(text_table(header, rows))
        return "\n".join(lines)

    def _table(self, dimension: str, ranker: str) -> str:
        s = self.settings
        means = self.means[
            (self.means["dimension"] == dimension) & (self.means["ranker"] == ranker)
        ]
        answers = self.query_means[
            (self.query_means["dimension"] == dimension)
            & (self.query_means["ranker"] == ranker)
            & (self.query_means["prompt"] != ALL_PROMPTS)
        ]
        name = _block_name(dimension, ranker)
        ci = f"{round(s['confidence'] * 100)}% CI"
        lines = [
            f"{name}: {answers['qid'].nunique()} queries, {int(answers['n_answers'].sum())} "
            "answers; mean NRP over queries (a query's samples averaged first)",
            f"  {ci}: percentile bootstrap over queries ({s['n_boot']} resamples, seed "
            f"{s['seed']}); NRP=1 / NRP=0: share of answers above / below every document",
        ]
        # a ranker that can floor a text (a guard) shows the share it floored
        floors = flooring_ranker(ranker) is not None and not means["share_floored"].isna().any()
        if floors:
            lines.append(
                "  floored: share of answers the ranker put below every text it lets through "
                "(a guard's flag: taken for no answer)"
            )
        # an LLM's (all) row repeats its only prompt's numbers: shown only over several prompts
        prompts = means.loc[means["prompt"] != ALL_PROMPTS, "llm"].value_counts()
        rows = [
            [
                str(r.llm),
                str(r.prompt),
                f"{format_number(r.mean_nrp)} {format_interval(r.ci_low, r.ci_high)}",
                f"{100 * r.share_nrp_1:.1f}%",
                f"{100 * r.share_nrp_0:.1f}%",
                *([f"{100 * r.share_floored:.1f}%"] if floors else []),
                str(r.n_queries),
                str(r.n_answers),
            ]
            for r in means.itertuples()
            if r.prompt != ALL_PROMPTS or prompts[r.llm] > 1
        ]
        header = ["llm", "prompt", f"NRP [{ci}]", "NRP=1", "NRP=0",
                  *(["floored"] if floors else []), "queries", "answers"]  # fmt: skip
        lines.append(text_table(header, rows))
        tests = self.comparisons[
            (self.comparisons["dimension"] == dimension) & (self.comparisons["ranker"] == ranker)
        ]
        if tests.empty:
            lines.append("  no paired comparisons (one LLM and one prompt)")
            return "\n".join(lines)
        alpha = s["alpha"]
        lines.append(
            f"  paired comparisons on query-level means: {TEST_NAMES.get(s['test'], s['test'])}"
            f", {CORRECTION_NAMES.get(s['correction'], s['correction'])} within each family, "
            f"alpha {alpha}"
        )
        rows = []
        for t in tests.itertuples():
            significant = not np.isnan(t.p_corrected) and t.p_corrected < alpha
            rows.append(
                [
                    f"{t.family}: {t.group}" if t.family != LLMS_POOLED else t.family,
                    f"{t.a} - {t.b}",
                    f"{t.mean_difference:+.4f}" if not np.isnan(t.mean_difference) else "-",
                    str(t.n_queries),
                    format_p(t.p),
                    format_p(t.p_corrected) + (" *" if significant else ""),
                ]
            )
        lines.append(text_table(["family", "a - b", "mean diff.", "queries", "p", "p corr."], rows))
        lines.append(f"  * significant after correction (p corr. < {alpha})")
        return "\n".join(lines)


def _block_name(dimension: str, ranker: str) -> str:
    return dimension + (f" (ranker {ranker})" if ranker else "")


def _percent(share: float) -> str:
    return "-" if share is None or np.isnan(share) else f"{100 * share:.1f}%"


_FEWER_QUERIES = re.compile(
    r"(?P<where>.+?): .+ are compared over the \d+ queries both answered \(\d+ and \d+ answered\)"
)


def collapsed_warnings(warnings: list[str]) -> list[str]:
    """The warnings each once, in order of first appearance, ``(xN)`` after one raised N
    times; the pairs of one (dimension, family, group) compared over fewer queries than a side
    answered in one line that counts them."""
    counts: dict[tuple[bool, str], int] = {}
    for warning in warnings:
        match = _FEWER_QUERIES.fullmatch(warning)
        key = (True, match["where"]) if match else (False, warning)
        counts[key] = counts.get(key, 0) + 1
    lines = []
    for (fewer, text), count in counts.items():
        if fewer:
            pairs = f"{count} pair{'s' if count != 1 else ''}"
            lines.append(f"{text}: {pairs} compared over fewer queries (those both answered)")
        else:
            lines.append(text + (f" (x{count})" if count > 1 else ""))
    return _across_dimensions(lines)


def _across_dimensions(lines: list[str]) -> list[str]:
    """Lines ``DIMENSION: TEXT`` that say the same TEXT of several dimensions (one word each)
    as one line ``DIM1, DIM2: TEXT``, where the first of them was."""
    prefixes: dict[str, list[str]] = {}
    for line in lines:
        head, sep, text = line.partition(": ")
        if sep and head and not re.search(r"[\s,]", head):
            prefixes.setdefault(text, []).append(head)
    out = []
    for line in lines:
        head, sep, text = line.partition(": ")
        heads = prefixes.get(text, []) if sep else []
        if head not in heads:
            out.append(line)
        elif head == heads[0]:
            out.append(f"{', '.join(heads)}: {text}")
    return out


# -- aggregation -----------------------------------------------------------------------------------
def summarize(
    results_df: pd.DataFrame | str | Path,
    confidence: float = 0.95,
    n_boot: int = statistics.DEFAULT_RESAMPLES,
    seed: int = statistics.DEFAULT_SEED,
    *,
    test: statistics.TestMethod = "randomization",
    correction: statistics.Correction = "holm",
    n_resamples: int = statistics.DEFAULT_RESAMPLES,
    alpha: float = 0.05,
) -> Summary:
    """Mean NRP per LLM x prompt and per LLM, per dimension (and combined), with bootstrap
    intervals over queries, saturation shares and Holm-corrected paired tests.

    ``results_df``: the per-answer frame of ``score_answers`` or a path ``read_results``
    accepts (a path's ``flags.csv``, when there, gives ``Summary.flags``). ``n_boot``/``seed``:
    the bootstrap; ``test``/``n_resamples``: the paired test
    (randomization with ``n_resamples`` sign vectors, exact when 2^queries is fewer)."""
    if not 0 < confidence < 1 or not 0 < alpha < 1:
        raise ConfigError("confidence and alpha must lie strictly between 0 and 1")
    if n_boot < 1 or n_resamples < 1:
        raise ConfigError("n_boot and n_resamples must be at least 1")
    if test not in ("randomization", "t"):
        raise ConfigError(f"paired test must be 'randomization' or 't', not {test!r}")
    if correction not in ("holm", "bonferroni", "none"):
        raise ConfigError(f"correction must be 'holm', 'bonferroni' or 'none', not {correction!r}")
    frame = results_df if isinstance(results_df, pd.DataFrame) else read_results(results_df)
    flags = None if isinstance(results_df, pd.DataFrame) else flags_beside(results_df)
    warnings: list[str] = []
    answers = checked_results(frame, warnings)
    settings = {
        "unit": "query: a query's samples are averaged first, then the mean over queries",
        "pooled_over_prompts": "a query's per-prompt means averaged, then over queries",
        "confidence": confidence,
        "ci": "percentile bootstrap over queries",
        "n_boot": n_boot,
        "seed": seed,
        "test": test,
        "n_resamples": n_resamples,
        "correction": correction,
        "family": "one per (dimension, ranker, comparison, prompt or llm)",
        "alpha": alpha,
        "saturation": "share of answers with NRP = 1 (or 0), within 1e-9",
    }
    query_means = per_query_means(answers)
    means = _means(answers, query_means, confidence, n_boot, seed)
    comparisons = _comparisons(query_means, test, n_resamples, seed, correction, warnings)
    shares = None if flags is None else flag_shares(flags)
    weighting = (
        scoring_record(results_df)
        if isinstance(results_df, pd.DataFrame)
        else scoring_beside(results_df)
    )
    summary = Summary(settings, means, query_means, comparisons, warnings, shares, weighting)
    summary.ranking = summary.ranked("prompt")
    return summary


def scoring_beside(results: str | Path) -> dict[str, Any] | None:
    """The scoring record (``SCORING_FILE``) in a results folder or beside a results file; None
    when there is none."""
    path = Path(results)
    path = (path if path.is_dir() else path.parent) / SCORING_FILE
    if not path.is_file():
        return None
    try:
        record = jsontext.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        line = getattr(error, "lineno", None)
        raise InputError(path, line, "not a JSON scoring record") from None
    if not isinstance(record, dict) or not isinstance(record.get("weights") or {}, dict):
        raise InputError(path, 1, "not a scoring record (an object with weights)")
    return record


def checked_results(frame: pd.DataFrame, warnings: list[str]) -> pd.DataFrame:
    """Checked copy with text keys, the measure key (dimension, ranker), and NRP as float."""
    require_columns(frame, REQUIRED_COLUMNS, frame.attrs.get("path") or "results")
    answers = frame.copy()
    if "ranker" not in answers.columns:
        answers["ranker"] = ""
    for column in ("llm", "prompt", "qid", "dimension", "ranker"):
        answers[column] = text_column(answers[column])
    answers["nrp"] = pd.to_numeric(answers["nrp"], errors="coerce").astype(float)
    without = answers["nrp"].isna()
    if without.any():
        counts = answers[without].groupby("dimension").size()
        warnings.append(
            "answers without an NRP left out: "
            + ", ".join(f"{n} in {d}" for d, n in counts.items())
        )
        answers = answers[~without]
    out_of_range = (answers["nrp"] < -SATURATION_TOLERANCE) | (
        answers["nrp"] > 1 + SATURATION_TOLERANCE
    )
    if out_of_range.any():
        raise NrpError(f"NRP must lie in [0, 1]; found {answers.loc[out_of_range, 'nrp'].iloc[0]}")
    if "sample" in answers.columns:
        keys = ["dimension", "ranker", "llm", "prompt", "qid", "sample"]
        repeated = answers.duplicated(keys, keep=False)
        if repeated.any():
            first = answers.loc[repeated, keys].iloc[0].tolist()
            raise NrpError(
                f"{int(repeated.sum())} result rows repeat (dimension, ranker, llm, prompt, qid, "
                f"sample), e.g. {first}: an answer would be counted twice"
            )
    if answers.empty:
        raise NrpError("no answer with an NRP to summarize")
    # each value's place in order of first appearance (factorize's codes), the combined row last
    codes, dimensions = pd.factorize(answers["dimension"])
    order = [d for d in dimensions if d != COMBINED] + [d for d in dimensions if d == COMBINED]
    place = np.array([order.index(d) for d in dimensions], dtype=np.int64)
    answers["_dimension_order"] = place[codes]
    for column in ("ranker", "llm", "prompt"):
        answers[f"_{column}_order"] = pd.factorize(answers[column])[0].astype(np.int64)
    return answers.reset_index(drop=True)


def floored_answers(answers: pd.DataFrame) -> np.ndarray:
    """Per row of a results frame, 1.0 where its ranker put the answer on its floor
    (``Ranker.floors``: a guard's flag, its verdict that the text is no answer), else 0.0; NaN
    for every row when the frame has no ``score`` column, 0.0 for a ranker nrp does not know (a
    combined dimension's, another tool's)."""
    if "score" not in answers.columns:
        return np.full(len(answers), np.nan)
    scores = pd.to_numeric(answers["score"], errors="coerce").to_numpy(dtype=float)
    floored = np.zeros(len(answers))
    rankers = answers["ranker"].to_numpy()
    for spec in pd.unique(rankers):
        ranker = flooring_ranker(str(spec))
        if ranker is not None:
            rows = rankers == spec
            floored[rows] = ranker.floors(scores[rows])
    return floored


def flooring_ranker(spec: str) -> Ranker | None:
    """The ranker ``spec`` names when it can put a text on its floor (its class overrides
    ``Ranker.floors``: a guard), else None (a ranker that only orders texts, or a name nrp does
    not know). Built without checking its backend: ``floors`` reads scores, not a model."""
    from nrp.rankers.base import Ranker
    from nrp.rankers.registry import RankerSpec

    try:
        ranker = RankerSpec.parse(spec).build(check_available=False)
    except (ConfigError, InputError, ValueError):
        return None
    return ranker if type(ranker).floors is not Ranker.floors else None


def per_query_means(answers: pd.DataFrame) -> pd.DataFrame:
    """One row per (dimension, ranker, llm, prompt, qid): the mean NRP of the query's samples;
    then one per (dimension, ranker, llm, qid) with prompt ``(all)``: the mean of the query's
    per-prompt means."""
    keys = ["dimension", "ranker", "llm", "prompt", "qid"]
    order = ["_dimension_order", "_ranker_order", "_llm_order", "_prompt_order"]
    per_prompt = (
        answers.groupby([*keys, *order], sort=False)["nrp"]
        .agg(nrp="mean", n_answers="size")
        .reset_index()
    )
    pooled = (
        per_prompt.groupby(
            [
                "dimension",
                "ranker",
                "llm",
                "qid",
                "_dimension_order",
                "_ranker_order",
                "_llm_order",
            ],
            sort=False,
        )
        .agg(nrp=("nrp", "mean"), n_answers=("n_answers", "sum"))
        .reset_index()
        .assign(prompt=ALL_PROMPTS, _prompt_order=np.inf)
    )
    both = pd.concat([per_prompt, pooled], ignore_index=True)
    both = both.sort_values([*order], kind="stable").reset_index(drop=True)
    return both[[*keys, "nrp", "n_answers"]]


def _means(
    answers: pd.DataFrame,
    query_means: pd.DataFrame,
    confidence: float,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    rows = []
    cell = ["dimension", "ranker", "llm", "prompt"]
    floored_rows = floored_answers(answers)
    for key, group in query_means.groupby(cell, sort=False):
        dimension, ranker, llm, prompt = key
        values = group["nrp"].to_numpy(dtype=float)
        mean, low, high = statistics.mean_with_interval(
            values, confidence, "bootstrap", n_boot, seed
        )
        mine = (
            (answers["dimension"] == dimension)
            & (answers["ranker"] == ranker)
            & (answers["llm"] == llm)
        )
        if prompt != ALL_PROMPTS:
            mine &= answers["prompt"] == prompt
        nrp = answers.loc[mine, "nrp"].to_numpy(dtype=float)
        floored = floored_rows[mine.to_numpy()]
        rows.append(
            {
                "dimension": dimension,
                "ranker": ranker,
                "llm": llm,
                "prompt": prompt,
                "mean_nrp": mean,
                "ci_low": low,
                "ci_high": high,
                "share_nrp_1": float(np.mean(nrp >= 1 - SATURATION_TOLERANCE)),
                "share_nrp_0": float(np.mean(nrp <= SATURATION_TOLERANCE)),
                # NaN without scores to tell (a results table with no score column)
                "share_floored": (
                    float(np.mean(floored)) if not np.isnan(floored).any() else float("nan")
                ),
                "n_queries": len(values),
                "n_answers": len(nrp),
            }
        )
    return pd.DataFrame(rows)


def _comparisons(
    query_means: pd.DataFrame,
    test: statistics.TestMethod,
    n_resamples: int,
    seed: int,
    correction: statistics.Correction,
    warnings: list[str],
) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for (dimension, ranker), measure in query_means.groupby(["dimension", "ranker"], sort=False):
        per_prompt = measure[measure["prompt"] != ALL_PROMPTS]
        pooled = measure[measure["prompt"] == ALL_PROMPTS]
        prompts = list(dict.fromkeys(per_prompt["prompt"]))
        llms = list(dict.fromkeys(per_prompt["llm"]))
        families: list[tuple[str, str, dict[str, pd.Series]]] = []
        for prompt in prompts:
            mine = per_prompt[per_prompt["prompt"] == prompt]
            families.append((LLMS_WITHIN_PROMPT, prompt, _by(mine, "llm")))
        if len(prompts) > 1:
            families.append((LLMS_POOLED, ALL_PROMPTS, _by(pooled, "llm")))
            prompt_sets = {
                llm: frozenset(per_prompt.loc[per_prompt["llm"] == llm, "prompt"]) for llm in llms
            }
            if len(llms) > 1 and len(set(prompt_sets.values())) > 1:
                warnings.append(
                    f"{dimension}: LLMs were run with different prompts, so LLMs pooled over "
                    "prompts are compared over different prompt mixes"
                )
        for llm in llms:
            mine = per_prompt[per_prompt["llm"] == llm]
            families.append((PROMPTS_WITHIN_LLM, llm, _by(mine, "prompt")))
        for family, group, series in families:
            tested, _ = _family(series, test, n_resamples, seed, correction)
            for a, b, first, second, p, p_corrected in tested:
                if len(first) < len(series[a]) or len(first) < len(series[b]):
                    warnings.append(
                        f"{dimension}, {family} {group}: {a} and {b} are compared over the "
                        f"{len(first)} queries both answered "
                        f"({len(series[a])} and {len(series[b])} answered)"
                    )
                rows.append(
                    {
                        "dimension": dimension,
                        "ranker": ranker,
                        "family": family,
                        "group": group,
                        "a": a,
                        "b": b,
                        "n_queries": len(first),
                        "mean_a": float(first.mean()) if len(first) else np.nan,
                        "mean_b": float(second.mean()) if len(first) else np.nan,
                        "mean_difference": float((first - second).mean()) if len(first) else np.nan,
                        "p": p,
                        "p_corrected": p_corrected,
                    }
                )
    columns = [
        "dimension", "ranker", "family", "group", "a", "b", "n_queries", "mean_a", "mean_b",
        "mean_difference", "p", "p_corrected",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _family(
    series: dict[Any, pd.Series],
    test: statistics.TestMethod,
    n_resamples: int,
    seed: int,
    correction: statistics.Correction,
    alpha: float | None = None,
) -> tuple[list[tuple[Any, Any, np.ndarray, np.ndarray, float, float]], int]:
    """One family of paired tests: every pair of ``series`` (in their order) as (a, b, a's and
    b's query-level means over the queries both have, p, p corrected within the family; NaN
    for a pair without a common query), and the sign vectors drawn. ``alpha``: enough sign
    vectors for the family's size (``statistics.family_resamples``), else ``n_resamples``."""
    pairs = [(a, b, *_paired(series, a, b)) for a, b in itertools.combinations(series, 2)]
    tested = [pair for pair in pairs if len(pair[2])]
    if alpha is not None:
        n_resamples = statistics.family_resamples(len(tested), alpha, n_resamples)
    p_values = statistics.paired_tests([(f, s) for _, _, f, s in tested], test, n_resamples, seed)
    corrected = statistics.correct(p_values, correction)
    found = {(a, b): pc for (a, b, _, _), *pc in zip(tested, p_values, corrected, strict=True)}
    nan = (np.nan, np.nan)
    return [(a, b, f, s, *found.get((a, b), nan)) for a, b, f, s in pairs], n_resamples


def _paired(series: dict[Any, pd.Series], a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """The query-level means of ``a`` and ``b`` over the queries both have, in ``a``'s order."""
    common = series[a].index.intersection(series[b].index, sort=False)
    first = series[a].loc[common].to_numpy(dtype=float)
    return first, series[b].loc[common].to_numpy(dtype=float)


# -- ranking --------------------------------------------------------------------------------------
RANKING_COLUMNS = (
    "rank", "llm", "prompt", "mean_nrp", "ci_low", "ci_high", "group", "share_floored",
    "share_flagged", "share_empty", "n_queries", "n_answers",
)  # fmt: skip


def ranking_table(summary: Summary, by: str = "prompt") -> pd.DataFrame:
    """The systems of ``summary.ranked_measure()`` ranked by mean NRP, best first (ties: in
    input order): one per LLM x prompt (``by="prompt"``) or per LLM pooled over its prompts
    (``by="llm"``, prompt ``(all)``). Columns ``RANKING_COLUMNS``: rank 1..n; the mean and its
    interval; ``group``, the compact letter display of one family of paired tests over every
    pair of rows (the summary's test, correction and alpha, on query-level means over the
    queries both have): rows sharing a letter do not differ significantly; the share of answers
    floored (by the ranker, or for the weighted NRP the most any flooring dimension's ranker
    floored; NaN when no ranker floors), flagged and empty (``flags``; NaN without); counts.
    ``attrs``: ``measure``, ``pairs`` (the pairs tested) and ``resamples`` (the randomization
    test's sign vectors, ``statistics.family_resamples``)."""
    dimension, ranker = summary.ranked_measure()
    means = summary.means
    rows = means[(means["dimension"] == dimension) & (means["ranker"] == ranker)]
    rows = rows[(rows["prompt"] == ALL_PROMPTS) == (by == "llm")].reset_index(drop=True)
    order = np.argsort(-rows["mean_nrp"].to_numpy(dtype=float), kind="stable")
    table = rows.iloc[order].reset_index(drop=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    keys = list(zip(table["llm"], table["prompt"], strict=True))
    floored = _floored_shares(summary, dimension, ranker)
    table["share_floored"] = [floored.get(key, np.nan) for key in keys]
    add_flag_shares(table, summary.flags, by)
    queries = summary.query_means
    mine = queries[(queries["dimension"] == dimension) & (queries["ranker"] == ranker)]
    series = {
        key: group.set_index("qid")["nrp"]
        for key, group in mine.groupby(["llm", "prompt"], sort=False)
    }
    groups, pairs, resamples = _groups(keys, series, summary.settings)
    table["group"] = [groups[key] for key in keys]
    table = table[list(RANKING_COLUMNS)]
    table.attrs.update(measure=(dimension, ranker), pairs=pairs, resamples=resamples)
    return table


def _groups(
    keys: list[tuple[str, str]], series: dict[Any, pd.Series], settings: dict[str, Any]
) -> tuple[dict[Any, str], int, int]:
    """The compact letter display of ``keys`` (best first) from one family of paired tests
    over every pair with a common query, the number of pairs tested, and the randomization
    test's sign vectors (``statistics.family_resamples``: enough for the family's size)."""
    tested, resamples = _family(
        {key: series[key] for key in keys}, settings["test"], settings["n_resamples"],
        settings["seed"], settings["correction"], alpha=settings["alpha"],
    )  # fmt: skip
    different = [(a, b) for a, b, _, _, _, p in tested if p < settings["alpha"]]
    try:
        groups = statistics.compact_letter_display(keys, different)
    except ValueError:  # more groups than letters: the pairwise tests say it (--details)
        groups = dict.fromkeys(keys, "-")
    return groups, sum(1 for pair in tested if len(pair[2])), resamples


def _floored_shares(summary: Summary, dimension: str, ranker: str) -> dict[Any, float]:
    """(llm, prompt) -> the share of answers floored in the measure: its ranker's, or for the
    weighted NRP the most of any dimension whose ranker floors; none where no ranker floors."""
    means = summary.means
    if dimension == COMBINED:
        rows = means[means["dimension"] != COMBINED]
    else:
        rows = means[(means["dimension"] == dimension) & (means["ranker"] == ranker)]
    floors = {spec: flooring_ranker(spec) is not None for spec in rows["ranker"].unique()}
    rows = rows[rows["ranker"].map(floors).astype(bool) & rows["share_floored"].notna()]
    return rows.groupby(["llm", "prompt"], sort=False)["share_floored"].max().to_dict()


def add_flag_shares(table: pd.DataFrame, flags: pd.DataFrame | None, by: str) -> None:
    """``table``'s (a ranked table's) share_flagged and share_empty columns from ``flags``
    (``flag_shares``' table; NaN without, or where it lacks a row or an ``empty`` column):
    per LLM x prompt, or per LLM (``by="llm"``) its prompts weighted by their answers."""
    flagged = _flag_shares(flags, by)
    keys = list(zip(table["llm"], table["prompt"], strict=True))
    for column in ("share_flagged", "share_empty"):
        table[column] = [flagged.get(column, {}).get(key, np.nan) for key in keys]


def _flag_shares(flags: pd.DataFrame | None, by: str) -> dict[str, dict[Any, float]]:
    """column -> (llm, prompt) -> share, for share_flagged and share_empty (when the flags
    have it); per LLM (prompt ``(all)``) the LLM's prompts weighted by their answers."""
    if flags is None:
        return {}
    columns = [c for c in ("share_flagged", "share_empty") if c in flags.columns]
    frame = flags.assign(llm=flags["llm"].astype(str), prompt=flags["prompt"].astype(str))
    if by == "llm":
        weighted = frame[columns].mul(frame["n_answers"], axis=0)
        sums = weighted.assign(llm=frame["llm"], n=frame["n_answers"]).groupby("llm", sort=False)
        totals = sums.sum()
        frame = totals[columns].div(totals["n"], axis=0).reset_index().assign(prompt=ALL_PROMPTS)
    index = list(zip(frame["llm"], frame["prompt"], strict=True))
    return {c: dict(zip(index, frame[c].astype(float), strict=True)) for c in columns}


def _by(frame: pd.DataFrame, column: str) -> dict[str, pd.Series]:
    """column value -> its query-level means indexed by qid, in first-appearance order."""
    return {
        str(name): group.set_index("qid")["nrp"]
        for name, group in frame.groupby(column, sort=False)
    }
