"""scripts/benchkit.py's log-log slope, on hand numbers (no timings)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchkit.py"


def load_benchkit():
    spec = importlib.util.spec_from_file_location("benchkit", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


benchkit = load_benchkit()


def test_linear_time_has_slope_one():
    assert benchkit.loglog_slope([(1, 1.0), (10, 10.0), (100, 100.0)]) == pytest.approx(1.0)


def test_flat_and_quadratic_times():
    assert benchkit.loglog_slope([(1, 5.0), (10, 5.0), (100, 5.0)]) == pytest.approx(0.0)
    assert benchkit.loglog_slope([(1, 1.0), (10, 100.0)]) == pytest.approx(2.0)


def test_least_squares_over_points_off_a_line():
    # log10 x = 0, 1, 2; log10 t = 0, 1, 3: slope ((-1)(-4/3) + 0 + (1)(5/3)) / 2 = 1.5
    assert benchkit.loglog_slope([(1, 1.0), (10, 10.0), (100, 1000.0)]) == pytest.approx(1.5)


def test_floor_is_subtracted_before_the_logs():
    # a start-up cost of 1 s on linear work: exactly 1 with the floor subtracted; as measured,
    # with x evenly spaced in log10 the slope is (log10 101 - log10 2) / 2 = (2.00432 - 0.30103) / 2
    points = [(1, 2.0), (10, 11.0), (100, 101.0)]
    assert benchkit.loglog_slope(points, floor=1.0) == pytest.approx(1.0)
    assert benchkit.loglog_slope(points) == pytest.approx(0.85165, abs=1e-5)


def test_no_slope_from_too_few_points_or_times_at_the_floor():
    assert math.isnan(benchkit.loglog_slope([(10, 1.0)]))
    assert math.isnan(benchkit.loglog_slope([(1, 1.0), (10, 2.0)], floor=1.0))
    assert math.isnan(benchkit.loglog_slope([(10, 1.0), (10, 2.0)]))
