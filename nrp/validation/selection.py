"""Which ranker a dimension uses: the selection rule, in one place, stated as it is applied.

The rule is also written into every validation result (``SELECTION_RULE``), so a reader of the
JSON or the tables knows how the choice was made without reading code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

SELECTION_RULE = (
    "The best ranker of a dimension is the one with the highest mean of the primary measure "
    "(nDCG@10 by default) over the evaluated queries. Ties (means equal to 12 decimals) are "
    "broken by the means of the other measures in the order given (MAP, then bpref by default), "
    "then by the order in which the rankers were listed (the first wins). The choice is flagged "
    "as not significant when the runner-up is not significantly worse than the best: its "
    "corrected p-value (all pairs of the dimension in one family) is >= alpha. When validity "
    "was measured, only the rankers that pass it are chosen from (and the runner-up is the "
    "next of those); a ranker with a higher mean that failed is named as passed over, with the "
    "reason. When none passes, the rankers that pass the fallback (the same rule with a lower "
    "share of wins) are chosen from, and the choice records the fallback; when none passes "
    "that either, nothing is chosen. The chosen ranker is then tested against "
    "the random ranker (a control validated with every ranker set; it is added when the set "
    "lacks it): its corrected p-value from the same family of tests."
)

WEIGHTING_RULE = (
    "The weighted NRP averages, with equal weights, the dimensions whose chosen ranker is "
    "significantly better than the random ranker on the primary measure (mean above random's "
    "and corrected p < alpha, in the same family of tests as the choice). A dimension whose "
    "chosen ranker is not is left out of the weighted NRP (weight 0) and reported as 'no "
    "ranker validated'; its own NRP is still given. A dimension whose choice was not tested "
    "against random (no random ranker was validated) enters. When no dimension enters, every "
    "dimension with a chosen ranker enters with equal weight and a warning says the weighted "
    "NRP is not validated. Explicit weights (nrp score --weight) or --all-dimensions replace "
    "this rule."
)

_DECIMALS = 12  # equal to 12 decimals = equal: float noise must not decide a choice


@dataclass(frozen=True)
class Choice:
    """The chosen ranker of one dimension and how sure the choice is."""

    best: str
    runner_up: str | None
    runner_up_p: float | None  # corrected p-value of best vs runner-up on the primary measure
    runner_up_not_significantly_worse: bool
    tie_broken_by: str | None  # None, a measure name, or "order" when the means were equal
    #: rankers with a higher mean than ``best`` that failed validity: (name, reason)
    passed_over: tuple[tuple[str, str], ...] = ()
    #: the best ranker against the random control: its name (None: no control validated), the
    #: mean difference on the primary measure, the corrected p-value (None when ``best`` is the
    #: control), and whether ``best`` is significantly better
    control: str | None = None
    control_difference: float | None = None
    control_p: float | None = None
    better_than_control: bool | None = None
    #: the share of wins of the fallback the choice was made under, where no ranker passed
    #: validity (None: chosen among rankers that passed)
    fallback_wins: float | None = None

    def to_dict(self) -> dict:
        return {
            "best": self.best,
            "runner_up": self.runner_up,
            "runner_up_p_corrected": self.runner_up_p,
            "runner_up_not_significantly_worse": self.runner_up_not_significantly_worse,
            "tie_broken_by": self.tie_broken_by,
            "passed_over": [list(pair) for pair in self.passed_over],
            "against_random": {
                "random": self.control,
                "mean_difference": self.control_difference,
                "p_corrected": self.control_p,
                "significantly_better": self.better_than_control,
            },
            "fallback_wins": self.fallback_wins,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Choice:
        return cls(
            data["best"],
            data["runner_up"],
            data["runner_up_p_corrected"],
            data["runner_up_not_significantly_worse"],
            data["tie_broken_by"],
            tuple((str(a), str(b)) for a, b in data.get("passed_over", [])),
            *_against_random(data.get("against_random") or {}),
            fallback_wins=data.get("fallback_wins"),
        )


def _against_random(data: Mapping) -> tuple:
    return (
        data.get("random"),
        data.get("mean_difference"),
        data.get("p_corrected"),
        data.get("significantly_better"),
    )


def rank_systems(
    means: Mapping[str, Mapping[str, float]], measures: Sequence[str], order: Sequence[str]
) -> list[str]:
    """Systems best first: by the measures' means in the given order (rounded to 12 decimals),
    then by their position in ``order``."""
    position = {name: i for i, name in enumerate(order)}

    def key(name: str) -> tuple:
        return (*(-round(means[name][m], _DECIMALS) for m in measures), position[name])

    return sorted(order, key=key)


def choose(
    means: Mapping[str, Mapping[str, float]],
    measures: Sequence[str],
    order: Sequence[str],
    corrected_p: Mapping[frozenset[str], float],
    alpha: float = 0.05,
    failed: Mapping[str, str] | None = None,
    control: str | None = None,
    fallback: tuple[float, Mapping[str, str]] | None = None,
) -> Choice | None:
    """Apply ``SELECTION_RULE``. ``means``: system -> measure -> mean; ``measures``: primary
    first; ``corrected_p``: {frozenset({a, b}): corrected p-value on the primary measure};
    ``failed``: system -> why it failed validity (never chosen); ``control``: the random
    ranker the choice is tested against (None: not tested); ``fallback``: the fallback's share
    of wins and the systems that fail it (-> why), chosen from when every system failed."""
    failed = failed or {}
    under = None
    if fallback is not None and order and all(name in failed for name in order):
        under, failed = fallback
    choice = _choose(means, measures, order, corrected_p, alpha, failed)
    if choice is not None and under is not None:
        choice = replace(choice, fallback_wins=under)
    if choice is None or control is None:
        return choice
    difference = means[choice.best][measures[0]] - means[control][measures[0]]
    p = None if choice.best == control else corrected_p[frozenset((choice.best, control))]
    better = p is not None and p < alpha and difference > 0
    return replace(
        choice,
        control=control,
        control_difference=difference,
        control_p=p,
        better_than_control=better,
    )


def _choose(
    means: Mapping[str, Mapping[str, float]],
    measures: Sequence[str],
    order: Sequence[str],
    corrected_p: Mapping[frozenset[str], float],
    alpha: float,
    failed: Mapping[str, str],
) -> Choice | None:
    everyone = rank_systems(means, measures, order) if order else []
    ranked = [name for name in everyone if name not in failed]
    if not ranked:
        return None
    best = ranked[0]
    passed_over = tuple(
        (name, failed[name]) for name in everyone[: everyone.index(best)] if name in failed
    )
    if len(ranked) == 1:
        return Choice(best, None, None, False, None, passed_over)
    runner_up = ranked[1]
    tie_broken_by = None
    for measure in measures:
        if round(means[best][measure], _DECIMALS) != round(means[runner_up][measure], _DECIMALS):
            if measure != measures[0]:
                tie_broken_by = measure
            break
    else:
        tie_broken_by = "order"
    p = corrected_p[frozenset((best, runner_up))]
    return Choice(best, runner_up, p, p >= alpha, tie_broken_by, passed_over)


def default_weights(
    choices: Mapping[str, Choice | None],
) -> tuple[dict[str, float], dict[str, str], str | None]:
    """``WEIGHTING_RULE``: the weight of each dimension with a chosen ranker in the weighted NRP
    (1 or 0, before normalising), why a dimension is left out, and a warning when no dimension
    is validated (then every chosen dimension enters)."""
    chosen = {d: c for d, c in choices.items() if c is not None}
    left_out = {
        d: (
            f"no ranker validated: {c.best} is not significantly better than {c.control} "
            f"(mean difference {c.control_difference:+.4f}, p corr. {_p(c.control_p)})"
        )
        for d, c in chosen.items()
        if c.better_than_control is False
    }
    if chosen and len(left_out) == len(chosen):
        warning = (
            "no dimension's chosen ranker is significantly better than random: the weighted "
            "NRP averages every dimension and is not validated"
        )
        return dict.fromkeys(chosen, 1.0), {}, warning
    return {d: 0.0 if d in left_out else 1.0 for d in chosen}, left_out, None


def _p(p: float | None) -> str:
    if p is None:
        return "- (random itself was chosen)"
    return "<0.001" if p < 0.001 else f"{p:.3f}"
