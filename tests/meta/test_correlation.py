"""Correlations of scores with human labels: hand-computed Kendall tau-b (with ties) and Spearman,
the t-interval over queries, skipped and constant queries, system level on a tiny table, the
pooled bootstrap against scipy on the duplicated items, and paired preference."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from nrp.analysis import agreement
from nrp.errors import ConfigError, NrpError
from nrp.meta.correlation import (
    CONSTANT_HUMAN,
    FEW_ITEMS,
    _PooledBootstrap,
    meta_evaluate,
    paired_preference,
)
from nrp.statistics import (
    kendall_tau_b,
    resample_counts,
    spearman_rho,
)
from nrp.statistics import (
    numpy_correlations as correlations,
)

# q1: score x = [1, 2, 2, 3], human y = [1, 1, 2, 2]. The 6 pairs:
#   (1,2) x<, y= : tied in y only      (1,3) x<, y< : concordant
#   (1,4) x<, y< : concordant          (2,3) x=, y< : tied in x only
#   (2,4) x<, y< : concordant          (3,4) x<, y= : tied in y only
# concordant 3, discordant 0, n0 = 6, pairs tied in x n1 = 1, tied in y n2 = 2:
# tau-b = (3 - 0) / sqrt((6 - 1) * (6 - 2)) = 3 / sqrt(20)
Q1_TAU = 3 / math.sqrt(20)
# Spearman: mid-ranks x = [1, 2.5, 2.5, 4], y = [1.5, 1.5, 3.5, 3.5], both mean 2.5;
# deviations dx = [-1.5, 0, 0, 1.5], dy = [-1, -1, 1, 1]: sum dx*dy = 3, sum dx^2 = 4.5,
# sum dy^2 = 4: rho = 3 / sqrt(4.5 * 4) = 3 / sqrt(18)
Q1_RHO = 3 / math.sqrt(18)


def tiny_frame() -> pd.DataFrame:
    rows = [
        # q1: the tied example above
        ("a1", "q1", 1.0, 1.0), ("a2", "q1", 2.0, 1.0), ("a3", "q1", 2.0, 2.0),
        ("a4", "q1", 3.0, 2.0),
        # q2: reversed order: tau = rho = -1 (3 discordant pairs)
        ("b1", "q2", 3.0, 0.0), ("b2", "q2", 1.0, 2.0), ("b3", "q2", 2.0, 1.0),
        # q3: constant human labels: skipped
        ("c1", "q3", 1.0, 1.0), ("c2", "q3", 2.0, 1.0),
        # q4: one item: skipped
        ("d1", "q4", 1.0, 2.0),
        # q5: constant score over different labels: counts 0
        ("e1", "q5", 5.0, 0.0), ("e2", "q5", 5.0, 1.0), ("e3", "q5", 5.0, 2.0),
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["answer_id", "qid", "score", "human"])


def test_tau_b_and_spearman_by_hand():
    assert kendall_tau_b([1, 2, 2, 3], [1, 1, 2, 2]) == pytest.approx(Q1_TAU, abs=1e-12)
    assert spearman_rho([1, 2, 2, 3], [1, 1, 2, 2]) == pytest.approx(Q1_RHO, abs=1e-12)
    assert kendall_tau_b([3, 1, 2], [0, 2, 1]) == pytest.approx(-1.0)
    assert spearman_rho([3, 1, 2], [0, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(kendall_tau_b([1], [2]))
    assert math.isnan(spearman_rho([1, 1], [1, 2]))


def test_coefficients_equal_scipy_and_agreement_rules():
    rng = np.random.default_rng(3)
    for n in (2, 3, 7, 40, 1600):  # 1600: above the direct O(n^2) limit, scipy's algorithm
        for _ in range(5):
            x = rng.integers(0, 4, n).astype(float)
            y = rng.integers(0, 3, n).astype(float)
            ours = correlations(x, y)
            assert np.allclose(ours, agreement.correlations(x, y), equal_nan=True)
            if np.ptp(x) and np.ptp(y):
                assert ours[0] == pytest.approx(scipy_stats.kendalltau(x, y).statistic)
                assert ours[1] == pytest.approx(scipy_stats.spearmanr(x, y).statistic)
    assert correlations([5, 5, 5], [0, 1, 2]) == (0.0, 0.0)  # constant score: orders nothing
    assert all(math.isnan(v) for v in correlations([1, 2, 3], [1, 1, 1]))


def test_per_query_mean_and_t_interval_by_hand():
    result = meta_evaluate(tiny_frame(), ["score"], ["human"], n_bootstrap=0)
    per_query = result.per_query.set_index("qid")
    assert per_query.loc["q1", "kendall_tau"] == pytest.approx(Q1_TAU)
    assert per_query.loc["q1", "spearman_rho"] == pytest.approx(Q1_RHO)
    assert per_query.loc["q2", "kendall_tau"] == pytest.approx(-1.0)
    assert per_query.loc["q3", "skipped"] == CONSTANT_HUMAN
    assert per_query.loc["q4", "skipped"] == FEW_ITEMS
    assert per_query.loc["q5", "kendall_tau"] == 0.0 and per_query.loc["q5", "constant_score"]

    row = result.row("score", "human")
    assert (row.n_items, row.n_queries, row.queries_used) == (13, 5, 3)
    assert (row.skipped_few_items, row.skipped_constant_human, row.constant_score_queries) == (
        1, 1, 1,
    )  # fmt: skip
    # mean over q1, q2, q5 = (0.670820 - 1 + 0) / 3 = -0.109727; s (ddof 1) = 0.840797;
    # t(0.975, df 2) = 4.302653; half width = 4.302653 * 0.840797 / sqrt(3) = 2.088656
    taus = [Q1_TAU, -1.0, 0.0]
    mean = sum(taus) / 3
    sd = math.sqrt(sum((t - mean) ** 2 for t in taus) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)
    assert row.tau_mean == pytest.approx(-0.109727, abs=1e-6)
    assert half == pytest.approx(2.088656, abs=1e-6)
    assert (row.tau_ci_low, row.tau_ci_high) == pytest.approx((mean - half, mean + half))
    rhos = [Q1_RHO, -1.0, 0.0]
    assert row.rho_mean == pytest.approx(sum(rhos) / 3)
    # pooled: one coefficient over the 13 items
    frame = tiny_frame()
    assert row.tau_pooled == pytest.approx(
        scipy_stats.kendalltau(frame["score"], frame["human"]).statistic
    )
    assert math.isnan(row.tau_pooled_ci_low)  # no bootstrap asked


def test_system_level_on_a_tiny_table():
    # system means: A score (0.9 + 0.7) / 2 = 0.8, human (3 + 2) / 2 = 2.5; B 0.65 / 2.5;
    # C 0.15 / 1. Pairs: (A,B) x> y= tied in human; (A,C), (B,C) concordant:
    # tau-b = 2 / sqrt((3 - 0) * (3 - 1)) = 0.816497; Spearman: ranks x = [3, 2, 1],
    # y = [2.5, 2.5, 1]: 1.5 / sqrt(2 * 1.5) = 0.866025
    frame = pd.DataFrame(
        {
            "qid": ["q1", "q1", "q1", "q2", "q2", "q2"],
            "llm": ["A", "B", "C", "A", "B", "C"],
            "score": [0.9, 0.5, 0.1, 0.7, 0.8, 0.2],
            "human": [3, 2, 1, 2, 3, 1],
        }
    )
    result = meta_evaluate(frame, ["score"], ["human"], system_column="llm", n_bootstrap=200)
    row = result.row("score", "human")
    assert row.n_systems == 3
    assert row.tau_system == pytest.approx(2 / math.sqrt(6))
    assert row.rho_system == pytest.approx(1.5 / math.sqrt(3))
    systems = result.systems.set_index("system")
    assert systems.loc["A", "mean_score"] == pytest.approx(0.8)
    assert systems.loc["B", "mean_human"] == pytest.approx(2.5)
    assert systems.loc["C", "n_items"] == 2
    assert -1 <= row.tau_system_ci_low <= row.tau_system_ci_high <= 1
    text = result.format()
    assert "system level" in text and "3 systems" in text


def test_pooled_bootstrap_equals_scipy_on_duplicated_items():
    rng = np.random.default_rng(7)
    n = 120
    units = np.sort(rng.integers(0, 15, n))
    _, units = np.unique(units, return_inverse=True)
    n_units = int(units.max()) + 1
    x = np.round(rng.random(n), 1)  # ties in both
    y = rng.integers(0, 4, n).astype(float)
    counts = resample_counts(n_units, 30, seed=0)
    boot = _PooledBootstrap(x, y, units, n_units)
    taus, rhos = boot.tau(counts), boot.rho(counts)
    for b in range(len(counts)):
        copies = counts[b][units].astype(int)
        xx, yy = np.repeat(x, copies), np.repeat(y, copies)
        assert taus[b] == pytest.approx(scipy_stats.kendalltau(xx, yy).statistic, abs=1e-10)
        assert rhos[b] == pytest.approx(scipy_stats.spearmanr(xx, yy).statistic, abs=1e-10)
    assert counts.sum(axis=1).tolist() == [n_units] * 30  # each resample draws n_units queries


def test_bootstrap_is_seeded_and_subsets_reported():
    frame = tiny_frame().assign(part=lambda f: np.where(f["qid"] <= "q2", "x", "y"))
    a = meta_evaluate(frame, ["score"], ["human"], by="part", n_bootstrap=300, seed=5)
    b = meta_evaluate(frame, ["score"], ["human"], by="part", n_bootstrap=300, seed=5)
    pd.testing.assert_frame_equal(a.summary, b.summary)
    assert list(a.summary["subset"]) == ["all", "x", "y"]
    x = a.row("score", "human", "x")
    assert (x.n_items, x.queries_used) == (7, 2)
    assert a.row("score", "human").tau_pooled_ci_low <= a.row("score", "human").tau_pooled


def test_missing_values_are_left_out_and_counted():
    frame = tiny_frame()
    frame.loc[0, "score"] = np.nan
    result = meta_evaluate(frame, ["score"], ["human"], n_bootstrap=0)
    assert result.row("score", "human").n_missing == 1
    assert result.row("score", "human").n_items == 12
    assert any("1 item(s)" in w for w in result.warnings)


def test_errors():
    frame = tiny_frame()
    with pytest.raises(NrpError, match=r"missing column\(s\) 'nope' \(found: "):
        meta_evaluate(frame, ["nope"], ["human"])
    with pytest.raises(ConfigError):
        meta_evaluate(frame, ["score"], ["score"])
    with pytest.raises(NrpError, match="not numbers"):
        meta_evaluate(frame.assign(score="high"), ["score"], ["human"])


def test_paired_preference():
    frame = pd.DataFrame(
        {
            "pair_id": ["p1", "p1", "p2", "p2", "p3", "p3", "p4"],
            "subset": ["original", "adversarial"] * 3 + ["original"],
            "metric": [0.9, 0.5, 0.4, 0.4, 0.1, 0.3, 0.7],
        }
    )
    table = paired_preference(frame, ["metric"], "pair_id", "subset", "original", "adversarial")
    row = table.iloc[0]
    # 3 complete pairs (p4 has no adversarial side): higher, equal, lower
    assert row.n_pairs == 3
    assert (row.better_higher, row.equal, row.better_lower) == pytest.approx((1 / 3,) * 3)
    assert row.accuracy == pytest.approx((1 + 0.5) / 3)
