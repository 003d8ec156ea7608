"""Statistics over queries, shared by validation, the NRP summary, agreement and meta-evaluation.

Why one module: every report of nrp takes the query as its unit and reports means with
intervals, paired tests, corrections and rank correlations; written once here, the numbers of
``nrp validate``, ``nrp summary``, ``nrp agreement``, ``nrp meta`` and the reports agree by
construction. It is ground floor: it imports numpy, scipy and ``nrp.errors`` only.

Choices (and why):

- **Confidence interval of a mean over queries**: Student's t-interval by default
  (mean +- t(0.975, n-1) * s / sqrt(n)); it is what IR papers report and is accurate for means of
  bounded per-query scores at the query counts of our collections (50-150). ``ci="bootstrap"``
  gives a percentile bootstrap (10,000 resamples of the queries, fixed seed) for skewed
  distributions. With fewer than two queries there is no interval (None).
  ``mean_with_interval`` is the per-query summary the reports share: the mean over queries and
  its interval, NaN where there is none.
- **Paired test between two rankers**: the paired randomization (sign-flip permutation) test of
  the mean per-query difference is the default. It assumes nothing about the shape of the
  differences, which for nDCG@10 over small candidate sets are discrete and often zero-inflated;
  Smucker, Allan and Carterette (CIKM 2007) recommend it for IR, and Urbano, Lima and Hanjalic
  (SIGIR 2019) find it as reliable as the t-test. The paired t-test (``test="t"``) is available.
  The randomization test is exact (all 2^n sign vectors) when 2^n <= ``n_resamples``, otherwise
  it draws ``n_resamples`` sign vectors from a generator with a fixed seed, so results are
  reproducible; its p-value is then (1 + #{|mean*| >= |mean|}) / (1 + n_resamples), never 0.
  Two-sided in both tests. Identical per-query values give p = 1.
- **Multiple testing**: every pair of rankers in a dimension is one family; Holm's step-down
  correction (default) controls the family-wise error rate like Bonferroni but is uniformly more
  powerful; ``bonferroni`` and ``none`` are available. Both are written here, not taken from
  statsmodels' ``multipletests`` (whose numbers they equal, tests/validation checks it):
  its Holm runs a full ``gc.collect()`` on every call, slow in a process holding pandas or
  torch, and a summary corrects one family per LLM, prompt and dimension.
- **Rank correlation** of a score with graded labels: Kendall's tau-b (it corrects for ties on
  both sides: grades are few and tie often) and Spearman's rho, with one rule for the degenerate
  cases: NaN when the labels are constant or there are fewer than two items (nothing to agree
  with), 0 when the score is constant (it orders nothing; dropping it would reward a score for
  giving up). ``correlations`` computes the coefficients with scipy; ``numpy_correlations`` with
  this module's O(n^2) numpy versions, which are faster for the short vectors a bootstrap scores
  thousands of times (``tests/meta`` checks that the two agree). Each report keeps the one its
  numbers have always been computed with.
- **Bootstrap over queries** of any statistic: ``resample_counts`` draws how often each query
  enters each resample; ``percentile_interval`` is the percentile interval of the resampled
  statistic, none when it is mostly undefined.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Literal

import numpy as np

from nrp.errors import ConfigError

CiMethod = Literal["t", "bootstrap"]
TestMethod = Literal["randomization", "t"]
Correction = Literal["holm", "bonferroni", "none"]

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
# Floating-point slack when comparing permuted means with the observed one: sign flips of the
# same numbers summed in another order can differ in the last bits.
_TOLERANCE = 1e-12
# Above this many items a plain tau-b uses scipy's O(n log n) algorithm instead of the O(n^2)
# sign matrix (which is faster for short vectors only).
_DIRECT_TAU_MAX = 1500


def _values(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or not np.all(np.isfinite(array)):
        raise ValueError("expected a 1-d sequence of finite numbers")
    return array


def _quantiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The central ``confidence`` share of ``values``: its (1 -+ confidence) / 2 quantiles."""
    alpha = (1 - confidence) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return float(low), float(high)


# -- intervals -------------------------------------------------------------------------------------
def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student's t confidence interval of the mean; None with fewer than two values."""
    from scipy import stats  # loaded on first use: keeps the start of nrp.api and the CLI quick

    array = _values(values)
    n = len(array)
    if n < 2:
        return None
    mean = float(array.mean())
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1) * array.std(ddof=1) / math.sqrt(n))
    return mean - half, mean + half


def bootstrap_interval(
    values: Sequence[float],
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean (queries resampled with replacement)."""
    array = _values(values)
    n = len(array)
    if n < 2:
        return None
    rng = np.random.default_rng(seed)
    means = array[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)
    return _quantiles(means, confidence)


def confidence_interval(
    values: Sequence[float],
    method: CiMethod = "t",
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    bounds: tuple[float, float] | None = None,
) -> tuple[float, float] | None:
    """The interval of the mean by ``method``; ``bounds``: the range the measure cannot leave
    (nDCG, AP: 0 to 1), which the interval is clipped to (a t interval of values near a bound
    reaches past it: MAP 0.95 with an upper end of 1.0043)."""
    if method == "t":
        found = t_interval(values, confidence)
    elif method == "bootstrap":
        found = bootstrap_interval(values, confidence, n_resamples, seed)
    else:
        raise ConfigError(f"confidence interval method must be 't' or 'bootstrap', not {method!r}")
    if found is None or bounds is None:
        return found
    low, high = bounds
    return min(max(found[0], low), high), min(max(found[1], low), high)


def mean_with_interval(
    values: Sequence[float],
    confidence: float = 0.95,
    method: CiMethod = "t",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float, float]:
    """(mean, low, high) of per-query values: the mean NaN when there are none, the interval's
    bounds NaN when there is no interval (fewer than two values)."""
    array = np.asarray(values, dtype=float)
    if not len(array):
        return np.nan, np.nan, np.nan
    interval = confidence_interval(array, method, confidence, n_resamples, seed)
    if interval is None:
        return float(array.mean()), np.nan, np.nan
    return float(array.mean()), interval[0], interval[1]


# -- paired tests ----------------------------------------------------------------------------------
def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    first, second = _values(a), _values(b)
    if first.shape != second.shape:
        raise ValueError(f"paired samples differ in length: {len(first)} and {len(second)}")
    return first - second


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test (scipy's ``ttest_rel``). All differences equal:
    p = 1 when they are 0 (the same system), 0 when they are not (a constant shift)."""
    from scipy import stats  # loaded on first use: keeps the start of nrp.api and the CLI quick

    diff = _differences(a, b)
    if len(diff) < 2 or np.ptp(diff) <= _TOLERANCE:
        return 1.0 if len(diff) == 0 or abs(float(diff.mean())) <= _TOLERANCE else 0.0
    return float(stats.ttest_rel(a, b).pvalue)


def paired_randomization_test(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> float:
    """Two-sided p-value of the paired randomization test of the mean difference: under the null
    hypothesis each query's difference is as likely to have either sign."""
    return paired_randomization_tests([_differences(a, b)], n_resamples, seed)[0]


def paired_randomization_tests(
    differences: Sequence[Sequence[float]],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[float]:
    """``paired_randomization_test`` of many pairs at once, given each pair's per-query
    differences (a - b): one p-value per pair, in order. The sign vectors depend only on the
    number of queries, so pairs of one length share one draw (the seeded draw a single test
    makes) and each p-value equals the single test's bit for bit."""
    vectors = [_values(d) for d in differences]
    p_values = [1.0] * len(vectors)  # no query: nothing against the null hypothesis
    lengths = sorted({len(v) for v in vectors} - {0})
    for n in lengths:  # one length at a time: one set of sign vectors in memory
        blocks = _sign_blocks(n, n_resamples, seed)
        for index, diff in enumerate(vectors):
            if len(diff) == n:
                p_values[index] = _randomization_p(diff, blocks, n_resamples)
    return p_values


def _sign_blocks(n: int, n_resamples: int, seed: int) -> list[np.ndarray]:
    """The sign vectors of a test over ``n`` queries: all 2^n once when that is at most
    ``n_resamples`` (exact), else ``n_resamples`` drawn from a generator seeded with ``seed``,
    in blocks of 2,000 rows (memory stays small for many queries)."""
    if 2**n <= n_resamples:
        return [np.array(list(itertools.product((1.0, -1.0), repeat=n)))]
    rng = np.random.default_rng(seed)
    sizes = [min(2_000, n_resamples - start) for start in range(0, n_resamples, 2_000)]
    return [rng.choice((1.0, -1.0), size=(size, n)) for size in sizes]


def _randomization_p(diff: np.ndarray, blocks: list[np.ndarray], n_resamples: int) -> float:
    n = len(diff)
    observed = abs(float(diff.mean()))
    if 2**n <= n_resamples:  # exact: every sign vector once
        extreme = np.abs(blocks[0] @ diff / n) >= observed - _TOLERANCE
        return float(extreme.mean())
    extreme_count = 0
    for signs in blocks:
        extreme_count += int(np.sum(np.abs(signs @ diff / n) >= observed - _TOLERANCE))
    return (1 + extreme_count) / (1 + n_resamples)


def paired_test(
    a: Sequence[float],
    b: Sequence[float],
    method: TestMethod = "randomization",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> float:
    if method == "randomization":
        return paired_randomization_test(a, b, n_resamples, seed)
    if method == "t":
        return paired_t_test(a, b)
    raise ConfigError(f"paired test must be 'randomization' or 't', not {method!r}")


def paired_tests(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    method: TestMethod = "randomization",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[float]:
    """``paired_test`` of each (a, b) pair, in order: the same p-values, with the
    randomization test's sign vectors drawn once per number of queries."""
    if method == "randomization":
        differences = [_differences(a, b) for a, b in pairs]
        return paired_randomization_tests(differences, n_resamples, seed)
    return [paired_test(a, b, method, n_resamples, seed) for a, b in pairs]


#: ``family_resamples``: the least p-value a randomization test can give, 1 / (N + 1), is at most
#: this share of Holm's first threshold, alpha / tests
FAMILY_RESOLUTION = 0.25


def family_resamples(tests: int, alpha: float, least: int = DEFAULT_RESAMPLES) -> int:
    """The sign vectors a randomization test needs in a family of ``tests`` corrected together
    (Holm, Bonferroni): at least ``least``, and enough that its least p-value, 1 / (N + 1), is
    at most ``FAMILY_RESOLUTION`` of alpha / tests, so that two systems far apart can differ
    significantly however many pairs are tested (with 10,000 over 780 pairs, none can: the
    least p-value times 780 is 0.078)."""
    needed = math.ceil(tests / (alpha * FAMILY_RESOLUTION))
    return max(int(least), needed)


# -- multiple testing ------------------------------------------------------------------------------
def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: sorted ascending, the i-th smallest
    (i from 1) is multiplied by m - i + 1, made monotone by a running maximum, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def bonferroni(p_values: Sequence[float]) -> list[float]:
    m = len(p_values)
    return [min(1.0, m * p) for p in p_values]


def correct(p_values: Sequence[float], method: Correction = "holm") -> list[float]:
    """Adjusted p-values for a family of tests."""
    if method == "holm":
        return holm(p_values)
    if method == "bonferroni":
        return bonferroni(p_values)
    if method == "none":
        return [float(p) for p in p_values]
    raise ConfigError(f"correction must be 'holm', 'bonferroni' or 'none', not {method!r}")


#: the letters of a compact letter display, in order (52 groups at most)
CLD_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def compact_letter_display(
    order: Sequence[Hashable], different: Iterable[tuple[Hashable, Hashable]]
) -> dict[Hashable, str]:
    """The compact letter display of systems given which pairs differ significantly: system ->
    its letters; two systems share a letter exactly when their pair is not among those that
    differ. ``order``: the systems, best first;
    ``different``: the (a, b) pairs that differ (either order).

    Piepho's insert-absorb algorithm (2004): one column holds every system; for each pair that
    differs, every column holding both is replaced by two copies, one without a and one without
    b, and then a column that is a subset of another (or a copy of one) is dropped. The columns
    get letters a, b, c, ... (then A to Z) in the order of their best member (ties: the next);
    more than 52 columns is a ValueError."""
    names = list(order)
    position = {name: i for i, name in enumerate(names)}
    if len(position) != len(names):
        raise ValueError("compact_letter_display: a system is named twice in the order")
    columns = [frozenset(names)] if names else []
    for a, b in different:
        if a not in position or b not in position:
            raise ValueError(f"compact_letter_display: pair {(a, b)!r} names an unknown system")
        if a == b:
            continue
        split: list[frozenset] = []
        for column in columns:
            if a in column and b in column:
                split += [column - {a}, column - {b}]
            else:
                split.append(column)
        columns = _absorb(split)
    columns.sort(key=lambda column: sorted(position[name] for name in column))
    if len(columns) > len(CLD_LETTERS):
        raise ValueError(f"compact_letter_display: {len(columns)} groups, more than 52 letters")
    return {
        name: "".join(CLD_LETTERS[i] for i, column in enumerate(columns) if name in column)
        for name in names
    }


def _absorb(columns: list[frozenset]) -> list[frozenset]:
    """The columns without those contained in another (of equal columns, the first kept)."""
    kept: list[frozenset] = []
    for i, column in enumerate(columns):
        inside = any(
            column < other or (column == other and j < i) for j, other in enumerate(columns)
        )
        if not inside:
            kept.append(column)
    return kept


# -- rank correlation ------------------------------------------------------------------------------
def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_x)(n0 - ties_y)), with n0
    the number of pairs. NaN with fewer than two values or when either side is constant."""
    from scipy import stats  # loaded on first use: keeps the start of nrp.api and the CLI quick

    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    n = len(a)
    if n < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    if n > _DIRECT_TAU_MAX:
        return float(stats.kendalltau(a, b, variant="b").statistic)
    dx = np.sign(a[:, None] - a[None, :])
    dy = np.sign(b[:, None] - b[None, :])
    s = float((dx * dy).sum()) / 2
    n0 = n * (n - 1) / 2
    ties_x = (float((dx == 0).sum()) - n) / 2
    ties_y = (float((dy == 0).sum()) - n) / 2
    return s / float(np.sqrt((n0 - ties_x) * (n0 - ties_y)))


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson's r of the mid-ranks. NaN with fewer than two values or when
    either side is constant."""
    from scipy import stats  # loaded on first use: keeps the start of nrp.api and the CLI quick

    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    ra = stats.rankdata(a)
    rb = stats.rankdata(b)
    ra -= ra.mean()
    rb -= rb.mean()
    return float((ra * rb).sum() / np.sqrt((ra * ra).sum() * (rb * rb).sum()))


def _degenerate(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """The rule for what has no order: (NaN, NaN) when the labels ``y`` are constant or there are
    fewer than two items, (0, 0) when the score ``x`` is constant; None otherwise."""
    if len(x) < 2 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    if np.ptp(x) == 0:
        return 0.0, 0.0
    return None


def correlations(scores: Sequence[float], labels: Sequence[float]) -> tuple[float, float]:
    """(Kendall tau-b, Spearman rho) of scores and labels, computed by scipy; NaN where the labels
    are constant (nothing to agree with), 0 where the scores are (they order nothing)."""
    from scipy import stats  # loaded on first use: keeps the start of nrp.api and the CLI quick

    x = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    rule = _degenerate(x, y)
    if rule is not None:
        return rule
    tau = stats.kendalltau(x, y, variant="b").statistic
    rho = stats.spearmanr(x, y).statistic
    return float(tau), float(rho)


def numpy_correlations(scores: Sequence[float], labels: Sequence[float]) -> tuple[float, float]:
    """``correlations`` with this module's numpy ``kendall_tau_b`` and ``spearman_rho`` (faster
    for short vectors; equal to scipy's up to rounding)."""
    x = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    rule = _degenerate(x, y)
    if rule is not None:
        return rule
    return kendall_tau_b(x, y), spearman_rho(x, y)


# -- bootstrap over queries ------------------------------------------------------------------------
def resample_counts(n_units: int, n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples x n_units) how often each unit (query) is drawn in each resample: n_units
    draws with replacement per resample, from a generator seeded with ``seed``."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_units, size=(n_resamples, n_units))
    counts = np.zeros((n_resamples, n_units), dtype=float)
    np.add.at(counts, (np.arange(n_resamples)[:, None], draws), 1.0)
    return counts


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile interval of a statistic's bootstrap values, over its defined (finite) values;
    (NaN, NaN) when fewer than half of them (or fewer than two) are defined."""
    finite = values[np.isfinite(values)]
    if len(finite) < max(2, len(values) // 2):  # mostly undefined: no interval
        return float("nan"), float("nan")
    return _quantiles(finite, confidence)
