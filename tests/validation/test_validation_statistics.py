"""Confidence intervals, paired tests and corrections: hand numbers and scipy, computed
independently here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from nrp.measures import measure_bounds
from nrp.statistics import (
    bonferroni,
    bootstrap_interval,
    confidence_interval,
    correct,
    holm,
    paired_randomization_test,
    paired_t_test,
    t_interval,
)

VALUES = [0.2, 0.5, 0.9, 0.4, 0.7, 0.3, 1.0, 0.0]


def test_t_interval_by_hand_and_against_scipy():
    # [1, 2, 3]: mean 2, s = 1, n = 3, t(0.975, 2) = 4.302653
    # -> 2 +- 4.302653/sqrt(3) = 2 +- 2.484138
    low, high = t_interval([1.0, 2.0, 3.0])
    assert low == pytest.approx(2 - 4.302653 / math.sqrt(3), abs=1e-6)
    assert high == pytest.approx(2 + 4.302653 / math.sqrt(3), abs=1e-6)
    expected = stats.t.interval(0.95, len(VALUES) - 1, loc=np.mean(VALUES), scale=stats.sem(VALUES))
    assert t_interval(VALUES) == pytest.approx(expected, abs=1e-12)


def test_an_interval_of_a_bounded_measure_stays_within_its_bounds():
    # [0.9, 1.0, 1.0, 1.0]: mean 0.975, s = 0.05, n = 4, t(0.975, 3) = 3.182446
    # -> 0.975 +- 3.182446 * 0.05 / 2 = 0.975 +- 0.079561: 0.895439 to 1.054561, cut at 1
    values = [0.9, 1.0, 1.0, 1.0]
    low, high = t_interval(values)
    assert high == pytest.approx(0.975 + 3.182446 * 0.025, abs=1e-6) and high > 1
    clipped = confidence_interval(values, "t", bounds=(0.0, 1.0))
    assert clipped == pytest.approx((low, 1.0), abs=1e-12)
    assert confidence_interval([0.0, 0.1, 0.0, 0.0], bounds=(0.0, 1.0))[0] == 0.0
    assert confidence_interval(values) == (low, high)  # no bounds given: as computed
    assert measure_bounds("nDCG@10") == measure_bounds("AP(rel=2)") == (0.0, 1.0)
    assert measure_bounds("NumRet") is None and measure_bounds("NumRel") is None


def test_intervals_need_two_values():
    assert t_interval([0.5]) is None
    assert bootstrap_interval([0.5]) is None
    assert t_interval([0.4, 0.4]) == (0.4, 0.4)


def test_bootstrap_interval_is_reproducible_and_close_to_scipy():
    rng = np.random.default_rng(7)
    sample = rng.beta(2, 3, size=60)
    ours = bootstrap_interval(sample, seed=3)
    assert ours == bootstrap_interval(sample, seed=3)
    theirs = stats.bootstrap(
        (sample,), np.mean, method="percentile", n_resamples=10_000, random_state=11
    ).confidence_interval
    assert ours[0] == pytest.approx(theirs.low, abs=0.01)
    assert ours[1] == pytest.approx(theirs.high, abs=0.01)
    assert bootstrap_interval([0.3] * 5) == pytest.approx((0.3, 0.3))


def test_paired_t_test_by_hand_and_against_scipy():
    # differences [1, 2, 3]: mean 2, s 1, t = 2 / (1/sqrt(3)) = 3.464102, df 2.
    # For df 2, P(T > t) = (1 - t/sqrt(t^2 + 2)) / 2 = (1 - 3.464102/3.741657) / 2 = 0.037090,
    # two-sided p = 0.074180
    t = 2 * math.sqrt(3)
    assert paired_t_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]) == pytest.approx(
        1 - t / math.sqrt(t * t + 2), abs=1e-12
    )
    a = VALUES
    b = [0.1, 0.6, 0.5, 0.4, 0.2, 0.3, 0.8, 0.1]
    assert paired_t_test(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue, abs=1e-12)


def test_identical_systems_have_p_one():
    assert paired_t_test(VALUES, VALUES) == 1.0
    assert paired_randomization_test(VALUES, VALUES) == 1.0
    assert paired_randomization_test([0.5] * 30, [0.5] * 30) == 1.0


def test_exact_randomization_test_by_hand():
    # differences [1, 2, 3], mean 2; the 8 sign vectors give sums 6, 0, 2, -4, 4, -2, 0, -6;
    # |sum| >= 6 twice -> p = 2/8 = 0.25
    assert paired_randomization_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]) == 0.25


def test_exact_randomization_test_against_scipy():
    rng = np.random.default_rng(1)
    a, b = rng.random(10), rng.random(10)  # 2^10 = 1024 <= 10,000 sign vectors: exact

    def mean_difference(x, y, axis=-1):
        return np.mean(x - y, axis=axis)

    expected = stats.permutation_test(
        (a, b), mean_difference, permutation_type="samples", n_resamples=np.inf, vectorized=True
    ).pvalue
    assert paired_randomization_test(a, b) == pytest.approx(expected, abs=1e-12)


def test_sampled_randomization_test_is_seeded_and_close_to_exact():
    rng = np.random.default_rng(2)
    a = rng.random(18)
    b = a - 0.1 + rng.normal(0, 0.25, 18)  # 2^18 > 10,000: sampled

    def mean_difference(x, y, axis=-1):
        return np.mean(x - y, axis=axis)

    exact = stats.permutation_test(
        (a, b), mean_difference, permutation_type="samples", n_resamples=np.inf, vectorized=True
    ).pvalue
    sampled = paired_randomization_test(a, b, seed=5)
    assert sampled == paired_randomization_test(a, b, seed=5)
    assert sampled == pytest.approx(exact, abs=0.015)  # Monte Carlo error ~ sqrt(p(1-p)/10^4)
    assert paired_randomization_test([1.0] * 20, [0.0] * 20) == 1 / 10_001  # never 0


def test_holm_by_hand():
    # sorted: 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04 -> running max 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # capped at 1, monotone
    assert holm([0.5, 0.2, 0.6]) == pytest.approx([1.0, 0.6, 1.0])


def test_holm_and_bonferroni_equal_statsmodels_multipletests():
    """The hand-written corrections give statsmodels' numbers exactly (ties, values capped at 1,
    the randomization test's smallest p 1/10,001, one test, none)."""
    from statsmodels.stats.multitest import multipletests

    families = [
        [0.01, 0.04, 0.03],
        [0.5, 0.2, 0.6],
        [0.02, 0.02, 0.02, 0.5],
        [1 / 10_001, 1.0, 0.0, 0.3, 1 / 10_001],
        [0.7],
        [0.016, 0.523, 0.562, 0.938, 1.0],
    ]
    rng = np.random.default_rng(7)
    families += [list(rng.random(n).round(3)) for n in range(2, 12)]
    for p in families:
        assert holm(p) == multipletests(p, method="holm")[1].tolist()
        assert bonferroni(p) == multipletests(p, method="bonferroni")[1].tolist()
    assert holm([]) == [] and bonferroni([]) == []


def test_bonferroni_and_none():
    assert bonferroni([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.12, 0.09])
    assert bonferroni([0.5, 0.2]) == [1.0, 0.4]
    assert correct([0.01, 0.04], "none") == [0.01, 0.04]
