"""Krippendorff's alpha from the ``krippendorff`` package equals the coincidence-matrix formula
(Krippendorff 2011) written out here, on the USR Topical-Chat ratings (3 annotators x 360
responses x 6 dimensions) and on hand-made units with missing labels and text labels."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from nrp.meta.annotators import krippendorff_alpha

USR_DIMENSIONS = [
    "Understandable", "Natural", "Maintains Context", "Engaging", "Uses Knowledge", "Overall",
]  # fmt: skip


def coincidence_alpha(units: list[list], level: str) -> float:
    """alpha = 1 - (n - 1) sum o_ck d_ck / sum n_c n_k d_ck over the pairable units."""
    pairable = [[v for v in u if v is not None] for u in units]
    pairable = [u for u in pairable if len(u) >= 2]
    values = sorted({v for u in pairable for v in u}, key=lambda v: (isinstance(v, str), v))
    if len(values) < 2:
        return math.nan
    index = {v: i for i, v in enumerate(values)}
    o = np.zeros((len(values), len(values)))
    for unit in pairable:
        for a, b in itertools.permutations(unit, 2):
            o[index[a], index[b]] += 1 / (len(unit) - 1)
    n_c = o.sum(axis=1)
    k = len(values)
    if level == "nominal":
        d = 1 - np.eye(k)
    elif level == "interval":
        x = np.array(values, dtype=float)
        d = (x[:, None] - x[None, :]) ** 2
    else:
        d = np.array(
            [[(n_c[min(c, e) : max(c, e) + 1].sum() - (n_c[c] + n_c[e]) / 2) ** 2
              for e in range(k)] for c in range(k)]
        )  # fmt: skip
    return 1 - (n_c.sum() - 1) * (o * d).sum() / (np.outer(n_c, n_c) * d).sum()


def test_alpha_equals_the_coincidence_formula_on_usr_topical_chat(shared_data):
    path = shared_data("meta", "usr-dialog-human-judgments", "usr_topical_chat.json")
    contexts = json.loads(path.read_text())
    for dimension in USR_DIMENSIONS:
        units = [r[dimension] for c in contexts for r in c["responses"]]
        assert len(units) == 360 and all(len(u) == 3 for u in units)
        for level in ("nominal", "ordinal", "interval"):
            expected = coincidence_alpha(units, level)
            # the package sums in another order: equal to the last bits of a double
            assert krippendorff_alpha(units, level) == pytest.approx(expected, abs=1e-12)
    # one value by hand: Understandable is 0/1, so every level is the nominal alpha
    understandable = [r["Understandable"] for c in contexts for r in c["responses"]]
    same = {krippendorff_alpha(understandable, lv) for lv in ("nominal", "ordinal", "interval")}
    assert max(same) - min(same) < 1e-12


def test_alpha_with_missing_and_text_labels():
    units = [["T", "T", None], ["T", "F"], ["F", "F", "F"], [None, "T"], ["F", None, "T"]]
    expected = coincidence_alpha(units, "nominal")
    assert krippendorff_alpha(units, "nominal") == pytest.approx(expected)
    # nothing pairable, or one value only: undefined, not an error
    assert math.isnan(krippendorff_alpha([["T", None], [None, "F"]], "nominal"))
    assert math.isnan(krippendorff_alpha([[1, 1], [1, 1, 1]], "ordinal"))
