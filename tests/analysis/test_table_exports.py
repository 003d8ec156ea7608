"""``to_dict``, ``to_json`` and ``to_csv`` once (``nrp.tables.TableExports``) for the results that
hold tables: the summary of the hand-made frame of ``test_summary`` (A/p1 0.75, A/p2 0.5, A
pooled 0.625) and a categorical check with a hand-made confusion matrix."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_summary import HAND, results

from nrp.analysis.summary import summarize
from nrp.meta.categorical import CategoricalResult


def test_summary_exports_its_tables_in_json_and_csv(tmp_path):
    summary = summarize(results(HAND))
    data = summary.to_dict()
    assert list(data) == [
        "settings", "ranking", "means", "comparisons", "query_means", "flags", "weighting",
        "warnings",
    ]  # fmt: skip
    means = {(r["llm"], r["prompt"]): r["mean_nrp"] for r in data["means"]}
    assert means == pytest.approx({("A", "p1"): 0.75, ("A", "p2"): 0.5, ("A", "(all)"): 0.625})
    assert data["flags"] is None  # no flags.csv beside the results
    assert json.loads(summary.to_json(tmp_path / "summary.json")) == json.loads(
        json.dumps(data, default=str)
    )
    assert (tmp_path / "summary.json").read_text(encoding="utf-8") == summary.to_json()
    paths = summary.to_csv(tmp_path)
    assert sorted(paths) == ["comparisons", "means", "query_means", "ranking"]  # no flags table
    saved = pd.read_csv(paths["means"])
    assert saved["mean_nrp"].tolist() == pytest.approx([0.75, 0.5, 0.625])
    assert paths["means"].name == "summary_means.csv"


def test_categorical_exports_its_confusion_with_a_human_column(tmp_path):
    confusion = pd.DataFrame([[2, 1], [0, 3]], index=["TRUE", "FALSE"], columns=["TRUE", "FALSE"])
    per_class = pd.DataFrame({"class": ["TRUE", "FALSE"], "items": [3, 3], "correct": [2, 3]})
    empty_review = pd.DataFrame(columns=["item", "human", "label"])
    result = CategoricalResult({"label_column": "judge"}, {"n_items": 6}, per_class, confusion,
                               empty_review)  # fmt: skip
    data = result.to_dict()
    assert data["confusion"] == [
        {"human": "TRUE", "TRUE": 2, "FALSE": 1},
        {"human": "FALSE", "TRUE": 0, "FALSE": 3},
    ]
    assert data["summary"] == {"n_items": 6} and data["review"] == []
    paths = result.to_csv(tmp_path)
    assert sorted(paths) == ["confusion", "per_class"]  # an empty review is not written
    assert paths["confusion"].read_text() == "human,TRUE,FALSE\nTRUE,2,1\nFALSE,0,3\n"


def test_text_labels_and_their_order_of_first_appearance():
    """``text_column`` fills missing labels with '' and ``distinct`` gives the labels as
    ``dict.fromkeys`` does, for pandas' text columns (filled in place) and others alike."""
    from nrp.tables import distinct, text_column

    for dtype in ("str", object):
        column = pd.Series(["b", None, "a", "b", "", "c", "a"], dtype=dtype)
        filled = text_column(column)
        assert filled.tolist() == ["b", "", "a", "b", "", "c", "a"]
        assert str(filled.dtype) == "str"
        assert distinct(filled) == list(dict.fromkeys(filled)) == ["b", "", "a", "c"]
    assert distinct(pd.Series([3, 1, 3, 2])) == [3, 1, 2]
