"""scripts/benchkit.py: the log-log slope on hand numbers (no timings), the table collections it
writes and the environment of its children."""

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


def test_a_table_collection_writes_a_shared_document_once_and_judges_it_for_each_query(tmp_path):
    import pandas as pd

    import nrp

    topics = [("q1", "What helps a cold?"), ("q2", "What helps the flu?")]
    documents = [
        ("q1", "shared", "Rest and fluids help."),
        ("q1", "d1", "Zinc may shorten a cold."),
        ("q2", "shared", "Rest and fluids help."),
    ]
    manifest = benchkit.write_table_collection(tmp_path / "c", "c", "test", topics, documents)
    written = pd.read_csv(tmp_path / "c" / "documents.tsv", sep="\t")
    assert written.to_dict("list") == {
        "docno": ["shared", "d1"], "text": ["Rest and fluids help.", "Zinc may shorten a cold."],
    }  # fmt: skip
    nrp.ingest(manifest, indexes_dir=tmp_path / "idx")
    qrels = nrp.Collection.load("c", tmp_path / "idx").qrels("relevance")
    assert sorted(zip(qrels["qid"], qrels["docno"], qrels["label"], strict=True)) == [
        ("q1", "d1", 1), ("q1", "shared", 1), ("q2", "shared", 1),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="docno 'shared' is given two texts"):
        benchkit.write_table_collection(
            tmp_path / "bad", "bad", "test", topics, [*documents, ("q2", "shared", "Other.")]
        )


def test_a_child_runs_with_the_environment_it_is_given(tmp_path):
    import os

    script = tmp_path / "child.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(SCRIPT.parent)!r})\n"
        "from benchkit import child_main, emit\n"
        "child_main({'env': lambda payload: emit({'probe': os.environ.get('NRP_BENCH_PROBE')})})\n"
    )
    given = {**os.environ, "NRP_BENCH_PROBE": "given"}
    assert benchkit.run_child(script, "env", {}, env=given) == {"probe": "given"}
    assert benchkit.run_child(script, "env", {}) == {"probe": os.environ.get("NRP_BENCH_PROBE")}
