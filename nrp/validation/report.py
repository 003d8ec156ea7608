"""Text tables of a validation result: one per dimension, best ranker first, with the label mode,
the averaged queries, the test and correction, and the choice stated under the table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from nrp.measures import display_name
from nrp.tables import text_table
from nrp.validation.selection import rank_systems
from nrp.validation.validity import LOST_PLACE, REPORTED_ONLY

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.validation.selection import Choice
    from nrp.validation.validity import FlooredAnswers, GroupValidity, Validity


class ResultView(Protocol):
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

    def weighting(self) -> tuple[dict[str, float], dict[str, str], str | None]: ...


TEST_NAMES = {"randomization": "paired randomization test", "t": "paired t-test"}
CI_NAMES = {"t": "t-interval", "bootstrap": "percentile bootstrap"}
CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni", "none": "no correction"}


def _p(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def dimension_table(result: ResultView, dimension: str) -> str:
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
    if dim.choice is None and not (dim.evaluated_queries and dim.validity):
        lines.append("  no evaluated queries: nothing chosen")
        return "\n".join(lines)

    order = [s.name for s in result.systems]
    means = {s: {m: dim.summary[s][m].mean for m in result.measures} for s in order}
    ranked = rank_systems(means, result.measures, order)
    if dim.choice is None:  # every ranker failed validity: the table, then why
        lines.extend(_measure_rows(result, dim, ranked, None))
        lines.append("  no ranker passed validity: nothing chosen")
        lines.extend(validity_lines(dim, ranked))
        return "\n".join(lines)
    best = dim.choice.best
    lines.extend(_measure_rows(result, dim, ranked, best))
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
    if choice.fallback_wins is not None:  # only ever chosen among rankers measured
        chosen = dim.validity[best]
        lines.append(
            f"  no ranker passed validity ({chosen.rule.get('min_wins')}): chosen under the "
            f"fallback, every kind but first_sentence >= {choice.fallback_wins} wins ({best}: "
            f"{chosen.reason})"
        )
    rule = "the fallback" if choice.fallback_wins is not None else "validity"
    for name, reason in choice.passed_over:
        lines.append(f"  passed over: {name} (fails {rule}: {reason})")
    lines.extend(_against_random(result, dimension, choice, alpha))
    lines.append(
        f"  * significantly worse than the best (corrected p < {alpha}); "
        "= not significantly different"
    )
    lines.extend(validity_lines(dim, ranked))
    return "\n".join(lines)


def _against_random(result: ResultView, dimension: str, choice: Choice, alpha: float) -> list:
    """The chosen ranker's test against the random control, and whether the dimension enters
    the weighted NRP by default (``nrp.validation.selection.WEIGHTING_RULE``)."""
    weights = result.weighting()[0]
    enters = (
        "enters the weighted NRP"
        if weights.get(dimension)
        else "no ranker validated: left out of the weighted NRP by default "
        "(nrp score --all-dimensions puts it back)"
    )
    if choice.control is None:
        return [f"  vs random: not tested (no random ranker validated); {enters}"]
    if choice.control_p is None:
        return [f"  vs random: {choice.best} is the random ranker; {enters}"]
    verdict = (
        f"significantly better (p corr. {_p(choice.control_p)} < {alpha})"
        if choice.better_than_control
        else f"NOT significantly better (p corr. {_p(choice.control_p)}"
        + (f" >= {alpha})" if choice.control_p >= alpha else f", mean below {choice.control})")
    )
    return [
        f"  vs random: {choice.best} {choice.control_difference:+.4f} {result.primary}, "
        f"{verdict}; {enters}"
    ]


def _ci(interval: tuple[float, float] | None) -> str:
    return "[-]" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def validity_lines(dim: Any, ranked: list[str]) -> list[str]:
    """The validity table of one dimension: per ranker, the share of pairs judged documents win
    over all degenerate texts and over the held-out family, the worst kind, the highest mean
    NRP of a kind, the graded-relevant judged documents it floors (all, and the short ones),
    and the verdict."""
    measured = [name for name in ranked if name in dim.validity]
    if not measured:
        return []
    first = dim.validity[measured[0]]
    held = first.held_out_family
    header = ["ranker", "wins [95% CI]", f"wins {held} (held out)", "worst kind", "max NRP"]
    short = next((v.answers.short_words for v in dim.validity.values() if v.answers), None)
    floored = "answers floored" + (f" (<= {short} words)" if short is not None else "")
    rows = [[*header, "first_sentence (reported)", floored, ""]]
    for name in measured:
        v = dim.validity[name]
        if v.overall is None:
            rows.append([name, "-", "-", "-", "-", "-", _floored(v.answers), "no texts"])
            continue
        worst = _worst_kind(v)
        highest = max(_gating_kinds(v), key=lambda g: (g.nrp, g.group))
        family = v.families.get(held)
        truncated = v.kinds.get("first_sentence")
        rows.append(
            [
                name,
                f"{v.overall.wins:.3f} {_ci(v.overall.wins_ci)}",
                "-" if family is None else f"{family.wins:.3f}",
                f"{worst.group} {worst.wins:.3f}",
                f"{highest.group} {highest.nrp:.3f}",
                "-" if truncated is None else f"{truncated.wins:.3f} wins, NRP {truncated.nrp:.3f}",
                _floored(v.answers),
                _verdict(v),
            ]
        )
    rule = first.rule
    lines = [
        f"  validity: relevant judged documents above degenerate texts (pairs, ties half) and "
        f"the texts' NRP; pass: every kind but first_sentence >= {rule.get('min_wins')} wins "
        f"and <= {rule.get('max_nrp')} NRP{_fallback_rule(rule)}; answers floored: relevant "
        "judged documents the ranker puts below every text it lets through (a guard's flag), "
        "reported only"
    ]
    lines.extend(text_table(rows[0], rows[1:], indent="    ").splitlines())
    lines.extend(_worst_by_grade(dim))
    lines.extend(real_answer_lines(dim, measured))
    return lines


def real_answer_lines(dim: Any, measured: list[str]) -> list[str]:
    """What each ranker does to the real answers given (``Validity.real``: floored, flagged,
    mean NRP, a guard's ranker alone and the answers that lost their place there) and, in one
    line, the judged answers a calibrated gate floors under cross-fitted calibration
    (``Validity.cross_fitted``); nothing where neither was measured."""
    lines = []
    real = {name: dim.validity[name].real for name in measured if dim.validity[name].real}
    if real:
        first = next(iter(real.values()))
        bound = dim.validity[next(iter(real))].rule.get("max_floored")
        lines.append(
            f"  real answers ({', '.join(first.sources)}: {first.read} read, {first.answers} to "
            "a question with D_q) ranked among D_q: floored, flagged, mean NRP, and under a "
            "guard's ranker alone the same answers' mean NRP and how many lost their place "
            f"there (NRP more than {LOST_PLACE} below); a ranker that floors more than "
            f"{bound:.1%} of them fails"
        )
        header = ["ranker", "floored", "flagged", "mean NRP", "ranker alone", "lost their place"]
        rows = [
            [
                name,
                f"{r.floored} ({r.floored_share:.1%})",
                str(r.flagged),
                f"{r.nrp:.3f}",
                "-" if r.base is None else f"{r.base} {r.base_nrp:.3f}",
                "-" if r.lost is None else str(r.lost),
            ]
            for name, r in real.items()
        ]
        lines.extend(text_table(header, rows, indent="    ").splitlines())
    fitted = [
        f"{name} {v.cross_fitted.floored}/{v.cross_fitted.answers} "
        f"({v.cross_fitted.floored_share:.1%})"
        for name in measured
        if (v := dim.validity[name]).cross_fitted is not None
    ]
    if fitted:
        folds = next(dim.validity[n].cross_fitted.folds for n in measured
                     if dim.validity[n].cross_fitted is not None)  # fmt: skip
        lines.append(
            f"  judged answers floored under cross-fitted calibration (thresholds calibrated on "
            f"the questions of {folds - 1} of {folds} parts, judged on the other): "
            + ", ".join(fitted)
        )
    return lines


def _gating_kinds(validity: Validity) -> list[GroupValidity]:
    """The kinds of a ranker's validity that the rule reads (every kind where only reported
    ones were measured)."""
    kinds = validity.kinds
    return [g for k, g in kinds.items() if k not in REPORTED_ONLY] or list(kinds.values())


def _worst_kind(validity: Validity) -> GroupValidity:
    """The kind of the rule whose texts judged documents beat least often (ties: by name)."""
    return min(_gating_kinds(validity), key=lambda g: (g.wins, g.group))


def _worst_by_grade(dim: Any) -> list[str]:
    """One line: the chosen ranker's worst kind, the pairs won by the judged documents of each
    grade (``Validity.by_grade``); none without a choice, or where the dimension has one
    relevant grade or a validation file written before the breakdown."""
    chosen = dim.choice.best if dim.choice is not None else None
    validity = dim.validity.get(chosen) if chosen is not None else None
    if validity is None or not validity.by_grade:
        return []
    worst = _worst_kind(validity)
    grades = validity.by_grade.get(worst.group, {})
    if len(grades) < 2:
        return []
    parts = [f"grade {g} {v['wins']:.3f} ({int(v['pairs'])} pairs)" for g, v in grades.items()]
    return [
        f"    {chosen}'s worst kind by the judged document's grade (pairs pooled over queries): "
        f"{worst.group}: " + ", ".join(parts)
    ]


def _verdict(validity: Validity) -> str:
    """``pass``; ``fallback`` where the ranker fails the rule but passes its fallback (a lower
    share of wins; chosen from only when no ranker of the dimension passes); ``FAIL``."""
    if validity.passed:
        return "pass"
    return "FAIL" if validity.fallback_reason else "fallback"


def _fallback_rule(rule: dict[str, float]) -> str:
    """The validity table's words for the fallback, where the rule has one."""
    below = rule.get("fallback_wins", rule.get("min_wins"))
    if below == rule.get("min_wins"):
        return ""
    return f" (fallback, chosen from where none passes: >= {below} wins)"


def _floored(answers: FlooredAnswers | None) -> str:
    """``FLOORED/RELEVANT (SHORT_FLOORED/SHORT)``, or - where it was not counted (a validation
    file written before it was)."""
    if answers is None:
        return "-"
    return f"{answers.floored}/{answers.relevant} ({answers.short_floored}/{answers.short})"


def format_result(result: ResultView) -> str:
    parts = [dimension_table(result, d) for d in result.dimensions]
    if result.warnings:
        parts.append("warnings:\n" + "\n".join(f"  {w}" for w in result.warnings))
    return "\n\n".join(parts)


def _measure_rows(result: ResultView, dim: Any, ranked: list[str], best: str | None) -> list[str]:
    """The table of measures, best ranker first, with each ranker's test against the chosen one
    (none when nothing was chosen)."""
    settings = result.settings
    alpha = settings["alpha"]
    ci_name = f"{round(settings['confidence'] * 100)}% CI"
    header = ["ranker", f"{display_name(result.primary)} [{ci_name}]"]
    header += [display_name(m) for m in result.measures[1:]] + ["queries", "vs best (p corr.)"]
    rows, lines = [header], []
    for name in ranked:
        primary = dim.summary[name][result.primary]
        ci = (
            f"[{primary.ci_low:.4f}, {primary.ci_high:.4f}]"
            if primary.ci_low is not None and primary.ci_high is not None
            else "[-]"
        )
        if name == best:
            mark = "best"
        elif best is None:
            mark = "-"
        else:
            p = dim.p_against(best, name)
            mark = f"{_p(p)} " + ("*" if p is not None and p < alpha else "=")
        rows.append(
            [name, f"{primary.mean:.4f} {ci}"]
            + [f"{dim.summary[name][m].mean:.4f}" for m in result.measures[1:]]
            + [str(primary.n), mark]
        )
    lines.extend(text_table(header, rows[1:]).splitlines())
    return lines
