"""scripts/studies/tune_guard_demotion.py: the criterion it chooses content and the demotion by,
on hand tables."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "tune_guard_demotion.py"
tune = SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="tune_guard_demotion"))


def table(rows: list[tuple[float, float, float, float]]) -> pd.DataFrame:
    """A table of rules of the plain form (the reward alone)."""
    frame = pd.DataFrame(rows, columns=["content", "demote", "tau_b", "worst"])
    return frame.assign(form="plain")


def test_the_highest_worst_kind_among_those_keeping_the_agreement():
    # the default (0.06, 0) has tau-b 0.618: 0.612 is more than 0.005 below, so (0.06, 0.5) is
    # out for all its better worst kind; (0.06, 0.3) is the best of the rest
    chosen = tune.choose(
        table(
            [
                (0.06, 0.0, 0.618, 0.667),
                (0.06, 0.3, 0.6158, 0.694),
                (0.06, 0.5, 0.612, 0.708),
                (0.0, 0.3, 0.534, 0.700),
            ]
        )
    )
    assert (chosen["content"], chosen["demote"]) == (0.06, 0.3)


def test_ties_go_to_the_least_demotion_then_the_content_nearest_the_default():
    # 0.6905 and 0.6910 are within 0.001: equal; the least demotion wins, then content 0.06
    chosen = tune.choose(
        table(
            [
                (0.06, 0.0, 0.618, 0.60),
                (0.03, 0.2, 0.617, 0.6905),
                (0.06, 0.2, 0.617, 0.6905),
                (0.06, 0.3, 0.617, 0.6910),
            ]
        )
    )
    assert (chosen["content"], chosen["demote"]) == (0.06, 0.2)
    # nothing keeps the agreement but the default: the default
    alone = tune.choose(table([(0.06, 0.0, 0.618, 0.5), (0.06, 0.3, 0.60, 0.9)]))
    assert (alone["content"], alone["demote"]) == (0.06, 0.0)


def test_a_scaled_reward_is_chosen_only_where_it_is_better_and_the_plain_one_wins_ties():
    rows = [("plain", 0.06, 0.0, 0.618, 0.667), ("plain", 0.06, 0.3, 0.616, 0.694),
            ("scaled", 0.1, 0.0, 0.6175, 0.700), ("scaled", 0.2, 0.0, 0.610, 0.750)]  # fmt: skip
    forms = pd.DataFrame(rows, columns=["form", "content", "demote", "tau_b", "worst"])
    # scaled 0.2 loses the agreement (0.610 < 0.613); scaled 0.1 keeps it and has the best
    # worst kind of the rest
    chosen = tune.choose(forms)
    assert (chosen["form"], chosen["content"], chosen["demote"]) == ("scaled", 0.1, 0.0)
    # equal worst kinds: the plain form (the default's) first
    forms.loc[0, "worst"] = 0.7
    chosen = tune.choose(forms)
    assert (chosen["form"], chosen["content"], chosen["demote"]) == ("plain", 0.06, 0.0)
