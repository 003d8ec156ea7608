"""Which ranker a dimension uses: the selection rule, in one place, stated as it is applied.

The rule is also written into every validation result (``SELECTION_RULE``), so a reader of the
JSON or the tables knows how the choice was made without reading code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SELECTION_RULE = (
    "The best ranker of a dimension is the one with the highest mean of the primary measure "
    "(nDCG@10 by default) over the evaluated queries. Ties (means equal to 12 decimals) are "
    "broken by the means of the other measures in the order given (MAP, then bpref by default), "
    "then by the order in which the rankers were listed (the first wins). The choice is flagged "
    "as not significant when the runner-up is not significantly worse than the best: its "
    "corrected p-value (all pairs of the dimension in one family) is >= alpha. When validity "
    "was measured, only the rankers that pass it are chosen from (and the runner-up is the "
    "next of those); a ranker with a higher mean that failed is named as passed over, with the "
    "reason. When none passes, nothing is chosen."
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

    def to_dict(self) -> dict:
        return {
            "best": self.best,
            "runner_up": self.runner_up,
            "runner_up_p_corrected": self.runner_up_p,
            "runner_up_not_significantly_worse": self.runner_up_not_significantly_worse,
            "tie_broken_by": self.tie_broken_by,
            "passed_over": [list(pair) for pair in self.passed_over],
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
) -> Choice | None:
    """Apply ``SELECTION_RULE``. ``means``: system -> measure -> mean; ``measures``: primary
    first; ``corrected_p``: {frozenset({a, b}): corrected p-value on the primary measure};
    ``failed``: system -> why it failed validity (never chosen)."""
    failed = failed or {}
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
