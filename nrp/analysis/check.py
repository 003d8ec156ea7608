"""A pass/fail gate on scored answers, for CI and tests: ``nrp check`` and ``assert_nrp``.

A model (an LLM with a prompt) passes when its mean NRP reaches a threshold and, against a
baseline results folder, when it is not significantly worse on the same queries. The gate reads
what ``nrp score`` writes and measures as ``nrp summary`` does (same reader, same query-level
means, same bootstrap interval), so a CI failure names the number a summary shows:

- **The query is the unit.** A query's samples are averaged first, the mean is over queries,
  and the interval is the percentile bootstrap over queries at confidence 1 - alpha.
- **Which NRP.** The weighted NRP when the results have it (``nrp score`` always writes it),
  else each dimension; ``dimension`` picks one.
- **Threshold.** Fails when the mean NRP is below ``min_nrp`` (the point estimate: a gate that
  needs the interval's lower bound above the threshold would fail every small test set).
- **No worse than a baseline.** Paired on the queries both folders scored for the model (the
  query-level means), with validation's paired randomization test (exact for few queries) and
  Holm's correction over the models compared; fails when the adjusted p is below alpha and the
  model's mean is below the baseline's. A model the baseline lacks is not compared.
- **Flagged answers** (``check_flagged``, ``max_flagged``): fails a model whose share of
  flagged answers (any flag of ``nrp.validation.flags``, read from the ``flags.csv`` that
  ``nrp score`` writes beside its results) is above the limit. Answers, not queries, are the
  unit here, as in ``nrp summary``'s flag table: a flag is a property of one text.
- **Floored answers** (``check_floored``, ``max_floored``): fails a model whose share of
  answers its dimension's ranker put on its floor (a guard's verdict that the text is no answer:
  ``Ranker.floors``, read from the results' scores, the ``floored`` column of ``nrp summary``)
  is above the limit, in any dimension a guard positioned. Answers are the unit here too.

``check_gate`` runs what is asked of the three (``nrp check`` and ``assert_nrp`` call it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from nrp import statistics
from nrp.analysis.flags import FLAG_NAMES, flag_shares, flags_path, read_flags
from nrp.analysis.summary import (
    ALL_PROMPTS,
    checked_results,
    floored_answers,
    flooring_ranker,
    per_query_means,
    read_results,
)
from nrp.collection.manifest import COMBINED
from nrp.errors import ConfigError, InputError, NrpError
from nrp.tables import FrameView, format_interval, format_p, vocabulary_frame

__all__ = [
    "CheckResult",
    "assert_nrp",
    "check_flagged",
    "check_floored",
    "check_gate",
    "check_results",
]

Results = pd.DataFrame | str | Path
MODEL = ["dimension", "llm", "prompt"]
#: a mean this close to the threshold is on it, not below (float sums of r/|D_q| fractions)
TOLERANCE = 1e-9


@dataclass
class CheckResult(FrameView):
    """The verdict per model: ``table`` one row per (dimension, llm, prompt) checked on NRP,
    ``flags`` (when flagged answers were checked) one row per (llm, prompt) with its share of
    flagged answers, ``floored`` (when floored answers were checked) one row per (dimension,
    ranker, llm, prompt) with the share its guard floored; ``lines`` one PASS or FAIL line each
    (the table's rows, then the flags', then the floored')."""

    table: pd.DataFrame
    lines: list[str]
    settings: dict[str, Any] = field(default_factory=dict)
    flags: pd.DataFrame | None = None
    floored: pd.DataFrame | None = None

    @property
    def failures(self) -> list[str]:
        verdicts = [
            *self.table["passed"],
            *([] if self.flags is None else self.flags["passed"]),
            *([] if self.floored is None else self.floored["passed"]),
        ]
        return [line for line, ok in zip(self.lines, verdicts, strict=True) if not ok]

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_frame(self) -> pd.DataFrame:
        """``table`` in the result frames' vocabulary (``nrp.tables.FRAME_VOCABULARY``): one
        row per (dimension, llm, prompt) with ``name`` (``llm/prompt``), ``measure`` (``nrp``),
        ``mean``, ``ci_low``, ``ci_high``, ``queries``, the verdict columns, and with a
        baseline its ``baseline_nrp``, ``difference``, ``n_common``, ``p_value`` and
        ``p_corrected`` (Holm)."""
        return vocabulary_frame(self.table, measure="nrp")

    def format(self) -> str:
        return "\n".join(self.lines)

    __str__ = format


def check_results(
    results: Results,
    min_nrp: float | None = None,
    baseline: Results | None = None,
    no_worse: bool = False,
    dimension: str | None = None,
    alpha: float = 0.05,
    n_resamples: int = statistics.DEFAULT_RESAMPLES,
    seed: int = statistics.DEFAULT_SEED,
) -> CheckResult:
    """Check every model of ``results`` (a frame of ``score_answers``, an ``nrp score`` folder
    or its results file) against ``min_nrp`` and, with ``no_worse``, against ``baseline`` (see
    the module docstring). Without ``no_worse`` a baseline is compared and reported only."""
    _check_options(min_nrp, baseline, no_worse, alpha, n_resamples)
    return _check_nrp(
        _read(results, "results"),
        min_nrp,
        baseline,
        no_worse,
        dimension,
        alpha,
        n_resamples,
        seed,
    )


def _check_nrp(
    answers: _Answers,
    min_nrp: float | None,
    baseline: Results | None,
    no_worse: bool,
    dimension: str | None,
    alpha: float,
    n_resamples: int = statistics.DEFAULT_RESAMPLES,
    seed: int = statistics.DEFAULT_SEED,
) -> CheckResult:
    """``check_results`` on answers already read (its options checked)."""
    current = _query_level(answers, dimension)
    table = _means(current, 1 - alpha, n_resamples, seed)
    if baseline is not None:
        before = _query_level(_read(baseline, "baseline"), dimension, chosen=current["dimension"])
        table = _compare(table, current, before, n_resamples, seed)
        table["worse"] = (table["p_holm"] < alpha) & (table["difference"] < 0)
    below = table["mean_nrp"] < min_nrp - TOLERANCE if min_nrp is not None else False
    table["below_min"] = below
    worse = table["worse"] if no_worse else False
    table["passed"] = ~(table["below_min"] | worse)
    lines = [_line(row, min_nrp, alpha, no_worse) for row in table.to_dict("records")]
    settings = {"min_nrp": min_nrp, "no_worse": no_worse, "alpha": alpha, "seed": seed,
                "n_resamples": n_resamples, "baseline": baseline is not None}  # fmt: skip
    return CheckResult(table.reset_index(drop=True), lines, settings)


def assert_nrp(
    results: Results,
    min_nrp: float | None = None,
    baseline: Results | None = None,
    no_worse: bool | None = None,
    dimension: str | None = None,
    alpha: float = 0.05,
    max_flagged: float | None = None,
    max_floored: float | None = None,
) -> CheckResult:
    """``check_gate`` for a test: an AssertionError carrying the FAIL lines when a model
    fails. With a baseline, ``no_worse`` defaults to True (the point of passing one)."""
    no_worse = baseline is not None if no_worse is None else no_worse
    outcome = check_gate(
        results, min_nrp, baseline, no_worse, dimension, alpha, max_flagged, max_floored
    )
    if not outcome.passed:
        raise AssertionError("\n".join(outcome.failures))
    return outcome


def check_gate(
    results: Results,
    min_nrp: float | None = None,
    baseline: Results | None = None,
    no_worse: bool = False,
    dimension: str | None = None,
    alpha: float = 0.05,
    max_flagged: float | None = None,
    max_floored: float | None = None,
) -> CheckResult:
    """What ``nrp check`` runs: ``check_results`` when an NRP check is asked (``min_nrp``, a
    baseline, alone a comparison that reports and does not gate; or nothing at all, which it
    refuses), ``check_flagged`` when ``max_flagged`` is given, ``check_floored`` when
    ``max_floored`` is; one result with the NRP lines first, then the flags', then the
    floored'."""
    for share, option in ((max_flagged, "--max-flagged"), (max_floored, "--max-floored")):
        if share is not None:
            _check_share(share, option)
    gates = max_flagged is not None or max_floored is not None
    nrp, answers = None, None
    if min_nrp is not None or baseline is not None or not gates:
        _check_options(min_nrp, baseline, no_worse, alpha, statistics.DEFAULT_RESAMPLES)
        answers = _read(results, "results")  # read once, for the floored answers too
        nrp = _check_nrp(answers, min_nrp, baseline, no_worse, dimension, alpha)
    flagged = check_flagged(results, max_flagged) if max_flagged is not None else None
    floored = None
    if max_floored is not None:
        read = answers if answers is not None else _read(results, "results")
        floored = _check_floored(read, max_floored, dimension)
    parts = [part for part in (nrp, flagged, floored) if part is not None]
    return CheckResult(
        nrp.table if nrp is not None else _NO_NRP_ROWS.copy(),
        [line for part in parts for line in part.lines],
        {key: value for part in parts for key, value in part.settings.items()},
        flagged.flags if flagged is not None else None,
        floored.floored if floored is not None else None,
    )


def check_flagged(results: Results, max_flagged: float) -> CheckResult:
    """Fail every model (llm, prompt) whose share of flagged answers is above ``max_flagged``:
    the flags are the ``flags.csv`` beside ``results`` (an ``nrp score`` folder or its results
    file; the flags file itself also works). A missing file is an ``InputError`` naming it."""
    _check_share(max_flagged, "--max-flagged")
    if isinstance(results, pd.DataFrame):
        raise ConfigError(
            "checking flagged answers reads the flags.csv of an nrp score folder: give the "
            "folder (or its results file), not a frame"
        )
    if not Path(results).exists():
        raise InputError(results, None, "file not found (the results)")
    table = flag_shares(read_flags(flags_path(results)))
    for name in FLAG_NAMES:
        table[f"n_{name}"] = (table[f"share_{name}"] * table["n_answers"]).round().astype(int)
    table["max_flagged"] = max_flagged
    table["above_max"] = table["share_flagged"] > max_flagged + TOLERANCE
    table["passed"] = ~table["above_max"]
    lines = [_flag_line(row, max_flagged) for row in table.to_dict("records")]
    return CheckResult(
        _NO_NRP_ROWS.copy(), lines, {"max_flagged": max_flagged}, table.reset_index(drop=True)
    )


#: the NRP table of a check that gates only flagged or floored answers: no row
_NO_NRP_ROWS = pd.DataFrame(
    columns=[*MODEL, "mean_nrp", "ci_low", "ci_high", "n_queries", "below_min", "passed"]
)


def check_floored(
    results: Results, max_floored: float, dimension: str | None = None
) -> CheckResult:
    """Fail every model (dimension, llm, prompt) whose share of answers its dimension's ranker
    floored (``Ranker.floors``: a guard's verdict that the text is no answer, read from the
    scores) is above ``max_floored``, in every dimension a guard positioned (``dimension``: that
    one). Results whose rankers floor nothing, or without scores, are a ``ConfigError``: such a
    gate could never fail."""
    _check_share(max_floored, "--max-floored")
    return _check_floored(_read(results, "results"), max_floored, dimension)


def _check_floored(read: _Answers, max_floored: float, dimension: str | None) -> CheckResult:
    """``check_floored`` on answers already read."""
    answers, name = read.frame, read.name
    if dimension is not None:
        if dimension not in set(answers["dimension"]):
            found = list(dict.fromkeys(answers["dimension"]))
            raise ConfigError(f"{name}: unknown dimension {dimension!r}; it has {found}")
        answers = answers[answers["dimension"] == dimension]
    floors = {spec: flooring_ranker(str(spec)) is not None for spec in answers["ranker"].unique()}
    guarded = answers["ranker"].map(floors)
    if "score" not in answers.columns or not guarded.any():
        rankers = ", ".join(r for r in dict.fromkeys(answers["ranker"].astype(str)) if r)
        raise ConfigError(
            f"{name}: --max-floored reads the answers a guard floored from their scores, and "
            f"no dimension here was positioned by one with scores (rankers: {rankers or 'none'}); "
            "--max-flagged gates the flags of flags.csv"
        )
    answers = answers[guarded.to_numpy()].reset_index(drop=True)
    answers["floored"] = floored_answers(answers)
    table = (
        answers.groupby(["dimension", "ranker", "llm", "prompt"], sort=False)["floored"]
        .agg(n_answers="size", n_floored="sum", share_floored="mean")
        .reset_index()
    )
    table["n_floored"] = table["n_floored"].round().astype(int)
    table["max_floored"] = max_floored
    table["above_max"] = table["share_floored"] > max_floored + TOLERANCE
    table["passed"] = ~table["above_max"]
    lines = [_floored_line(row, max_floored) for row in table.to_dict("records")]
    return CheckResult(_NO_NRP_ROWS.copy(), lines, {"max_floored": max_floored}, floored=table)


def _floored_line(row: dict[str, Any], max_floored: float) -> str:
    """``nrp check: PASS|FAIL llm/prompt floored in DIM (RANKER): share ... <= limit (n of m
    answers)``."""
    model = f"{row['llm']}/{row['prompt']}" if row["prompt"] else row["llm"]
    verdict = "PASS" if row["passed"] else "FAIL"
    relation = ">" if row["above_max"] else "<="
    return (f"nrp check: {verdict} {model} floored in {row['dimension']} ({row['ranker']}): "
            f"share of answers taken for no answer {row['share_floored']:.3f} {relation} "
            f"{max_floored:g} ({row['n_floored']} of {row['n_answers']} answers)")  # fmt: skip


def _check_share(share: float, option: str) -> None:
    what = "flagged answers" if option == "--max-flagged" else "answers a guard floored"
    if not 0 <= share <= 1:
        raise ConfigError(f"the maximum share of {what} ({option}) must lie in [0, 1], not {share}")


def _flag_line(row: dict[str, Any], max_flagged: float) -> str:
    """``nrp check: PASS|FAIL llm/prompt flagged: share of flagged answers s > limit ...``."""
    model = f"{row['llm']}/{row['prompt']}" if row["prompt"] else row["llm"]
    verdict = "PASS" if row["passed"] else "FAIL"
    share = row["share_flagged"]
    counts = ", ".join(f"{n} {row[f'n_{n}']}" for n in FLAG_NAMES if row[f"n_{n}"])
    detail = f"{row['n_flagged']} of {row['n_answers']} answers" + (f": {counts}" if counts else "")
    return (f"nrp check: {verdict} {model} flagged: share of flagged answers {share:.3f} "
            f"{'>' if row['above_max'] else '<='} {max_flagged:g} ({detail})")  # fmt: skip


def _check_options(
    min_nrp: float | None, baseline: Results | None, no_worse: bool, alpha: float, n: int
) -> None:
    if min_nrp is not None and not 0 <= min_nrp <= 1:
        raise ConfigError(f"the minimum NRP (--min-nrp) must lie in [0, 1], not {min_nrp}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha (--alpha) must lie strictly between 0 and 1, not {alpha}")
    if n < 1:
        raise ConfigError("n_resamples must be at least 1")
    if no_worse and baseline is None:
        raise ConfigError("no-worse needs a baseline results folder to compare with (--baseline)")
    if min_nrp is None and baseline is None:
        raise ConfigError(
            "nothing to check: give a minimum NRP (--min-nrp), a baseline (--baseline OLD; "
            "with --no-worse it gates) and/or a maximum share of flagged answers "
            "(--max-flagged) or of answers a guard floored (--max-floored)"
        )


def _query_level(
    read: _Answers, dimension: str | None, chosen: pd.Series | None = None
) -> pd.DataFrame:
    """Query-level mean NRP per (dimension, llm, prompt, qid) of the dimensions checked: the
    one named, else the weighted one when present, else all (``chosen``: the results')."""
    answers, name = read.frame, read.name
    found = list(dict.fromkeys(answers["dimension"]))
    if chosen is not None:
        wanted = list(dict.fromkeys(chosen))
    elif dimension is not None:
        if dimension not in found:
            raise ConfigError(f"{name}: unknown dimension {dimension!r}; it has {found}")
        wanted = [dimension]
    else:
        wanted = [COMBINED] if COMBINED in found else found
    answers = answers[answers["dimension"].isin(wanted)]
    rankers = answers.groupby("dimension")["ranker"].nunique()
    if (rankers > 1).any():
        several = rankers[rankers > 1].index[0]
        raise ConfigError(f"{name}: dimension {several!r} is scored by several rankers")
    means = per_query_means(answers)
    return means[means["prompt"] != ALL_PROMPTS][[*MODEL, "qid", "nrp"]].reset_index(drop=True)


@dataclass(frozen=True)
class _Answers:
    """The checked answers of one input (``frame``) and how an error names it (``name``:
    "results /path/to/run", or "results" for a frame)."""

    frame: pd.DataFrame
    name: str


def _read(results: Results, what: str) -> _Answers:
    """The checked answers of ``results``; an error names the file and which input it is."""
    name = what if isinstance(results, pd.DataFrame) else f"{what} {results}"
    try:
        frame = results if isinstance(results, pd.DataFrame) else read_results(results)
        return _Answers(checked_results(frame, []), name)
    except InputError as error:
        raise InputError(error.path, error.line, f"{error.problem} (the {what})") from None
    except NrpError as error:
        raise ConfigError(f"{name}: {error}") from None


def _means(queries: pd.DataFrame, confidence: float, n_resamples: int, seed: int) -> pd.DataFrame:
    rows = []
    for (dimension, llm, prompt), group in queries.groupby(MODEL, sort=False):
        values = group["nrp"].to_numpy(dtype=float)
        mean, low, high = statistics.mean_with_interval(
            values, confidence, "bootstrap", n_resamples, seed
        )
        rows.append({"dimension": dimension, "llm": llm, "prompt": prompt, "mean_nrp": mean,
                     "ci_low": low, "ci_high": high, "n_queries": len(values)})  # fmt: skip
    return pd.DataFrame(rows)


def _compare(
    table: pd.DataFrame, current: pd.DataFrame, before: pd.DataFrame, n_resamples: int, seed: int
) -> pd.DataFrame:
    """The table with the baseline's mean on the common queries, the difference, the number of
    common queries and the paired test's p, raw and Holm-adjusted over the models compared."""
    paired = current.merge(before, on=[*MODEL, "qid"], suffixes=("", "_baseline"))
    if paired.empty:
        raise ConfigError(
            "the baseline shares no query with the results for any model (llm, prompt) and "
            f"dimension {sorted(set(current['dimension']))}: nothing to compare"
        )
    rows = []
    for key, group in paired.groupby(MODEL, sort=False):
        now, then = group["nrp"].to_numpy(float), group["nrp_baseline"].to_numpy(float)
        p = statistics.paired_randomization_test(now, then, n_resamples, seed)
        rows.append((*key, float(then.mean()), float(now.mean() - then.mean()), len(group), p))
    compared = pd.DataFrame(
        rows, columns=[*MODEL, "baseline_nrp", "difference", "n_common", "p"]
    ).assign(p_holm=lambda f: statistics.holm(f["p"].tolist()))
    table = table.merge(compared, on=MODEL, how="left")
    table["n_common"] = table["n_common"].fillna(0).astype(int)
    return table


def _line(row: dict[str, Any], min_nrp: float | None, alpha: float, no_worse: bool) -> str:
    """``nrp check: PASS|FAIL llm/prompt dimension: mean NRP m [low, high] ...``."""
    model = f"{row['llm']}/{row['prompt']}" if row["prompt"] else row["llm"]
    head = f"nrp check: {'PASS' if row['passed'] else 'FAIL'} {model} {row['dimension']}: "
    mean = (f"mean NRP {row['mean_nrp']:.3f} "
            f"{format_interval(row['ci_low'], row['ci_high'], 3)}")  # fmt: skip
    parts = [mean]
    if min_nrp is not None:
        parts[0] += f" {'<' if row['below_min'] else '>='} {min_nrp:g}"
    parts[0] += f" ({row['n_queries']} queries)"
    if "p_holm" in row:
        parts.append(_versus(row, alpha, no_worse))
    return head + "; ".join(parts)


def _versus(row: dict[str, Any], alpha: float, no_worse: bool) -> str:
    if not row["n_common"]:
        return "not in the baseline"
    verdict = "significantly below" if row["worse"] else "vs"
    holm = f"Holm p {format_p(row['p_holm'])} {'<' if row['p_holm'] < alpha else '>='} {alpha:g}"
    text = (f"{verdict} baseline {row['baseline_nrp']:.3f} ({row['difference']:+.3f} on "
            f"{row['n_common']} common queries, {holm})")  # fmt: skip
    return text if no_worse or not row["worse"] else text + " [not gating]"
