"""Text tables of a validation result: one per dimension, best ranker first, with the label mode,
the averaged queries, the test and correction, and the choice stated under the table."""

from __future__ import annotations

from typing import Any, Protocol

from nrp.validation.measures import display_name
from nrp.validation.selection import rank_systems


class ValidationResult(Protocol):
    """What the tables read of a ``nrp.validation.result.ValidationResult`` (which calls them:
    this module imports nothing of it)."""

    collection: str
    labels: str
    qrels_scope: str
    measures: list[str]
    settings: dict[str, Any]
    systems: list[Any]
    dimensions: dict[str, Any]
    warnings: list[str]

    @property
    def primary(self) -> str: ...


TEST_NAMES = {"randomization": "paired randomization test", "t": "paired t-test"}
CI_NAMES = {"t": "t-interval", "bootstrap": "percentile bootstrap"}
CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni", "none": "no correction"}


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def dimension_table(result: ValidationResult, dimension: str) -> str:
    dim = result.dimensions[dimension]
    settings = result.settings
    alpha = settings["alpha"]
    n_judged, n_eval = len(dim.judged_queries), len(dim.evaluated_queries)
    excluded = "; ".join(f"{len(q)} {reason}" for reason, q in dim.excluded_queries.items() if q)
    lines = [
        f"{result.collection} / {dimension}: labels {result.labels}, qrels {result.qrels_scope}"
        f" ({dim.judgments} judgments), {n_eval} of {n_judged} judged queries averaged"
        + (f" (excluded: {excluded})" if excluded else ""),
    ]
    if dim.out_of_scope_judgments:
        lines.append(
            f"  {dim.out_of_scope_judgments} judgments of documents without text (not in D_q) "
            "left out"
        )
    pairs = len(dim.tests)
    lines.append(
        f"  {TEST_NAMES.get(settings['test'], settings['test'])} on {result.primary}, "
        f"{CORRECTION_NAMES.get(settings['correction'], settings['correction'])} over {pairs} "
        f"pair(s), alpha {alpha}; CI: {CI_NAMES.get(settings['ci'], settings['ci'])}"
    )
    if dim.choice is None:
        lines.append("  no evaluated queries: nothing chosen")
        return "\n".join(lines)

    order = [s.name for s in result.systems]
    means = {s: {m: dim.summary[s][m].mean for m in result.measures} for s in order}
    ranked = rank_systems(means, result.measures, order)
    best = dim.choice.best
    ci_name = f"{round(settings['confidence'] * 100)}% CI"
    header = ["ranker", f"{display_name(result.primary)} [{ci_name}]"]
    header += [display_name(m) for m in result.measures[1:]] + ["queries", "vs best (p corr.)"]
    rows = [header]
    for name in ranked:
        primary = dim.summary[name][result.primary]
        ci = (
            f"[{primary.ci_low:.4f}, {primary.ci_high:.4f}]"
            if primary.ci_low is not None and primary.ci_high is not None
            else "[-]"
        )
        if name == best:
            mark = "best"
        else:
            p = dim.p_against(best, name)
            mark = f"{_p(p)} " + ("*" if p is not None and p < alpha else "=")
        rows.append(
            [name, f"{primary.mean:.4f} {ci}"]
            + [f"{dim.summary[name][m].mean:.4f}" for m in result.measures[1:]]
            + [str(primary.n), mark]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        lines.append(("  " + "  ".join(cells)).rstrip())
    choice = dim.choice
    if choice.runner_up is None:
        lines.append(f"  chosen: {best} (the only ranker)")
    else:
        verdict = (
            f"runner-up {choice.runner_up} is NOT significantly worse "
            f"(p corr. {_p(choice.runner_up_p)} >= {alpha})"
            if choice.runner_up_not_significantly_worse
            else f"runner-up {choice.runner_up} is significantly worse "
            f"(p corr. {_p(choice.runner_up_p)} < {alpha})"
        )
        tie = (
            f"; tie on {result.primary} broken by {choice.tie_broken_by}"
            if choice.tie_broken_by
            else ""
        )
        lines.append(f"  chosen: {best}; {verdict}{tie}")
    lines.append(
        f"  * significantly worse than the best (corrected p < {alpha}); "
        "= not significantly different"
    )
    return "\n".join(lines)


def format_result(result: ValidationResult) -> str:
    parts = [dimension_table(result, d) for d in result.dimensions]
    if result.warnings:
        parts.append("warnings:\n" + "\n".join(f"  {w}" for w in result.warnings))
    return "\n\n".join(parts)
