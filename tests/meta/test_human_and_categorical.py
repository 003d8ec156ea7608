"""Human label input (graded tables, rankings, one-line errors) and categorical meta-evaluation
(per-class and macro accuracy, confusion table, review curve values by hand, the plot)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from nrp.errors import InputError, NrpError
from nrp.meta.categorical import NO_LABEL, categorical_evaluate, normalise_label
from nrp.meta.human import read_human
from nrp.meta.readers import read_table


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# -- human labels ----------------------------------------------------------------------------------
def test_graded_csv_keeps_ids_as_text(tmp_path):
    path = write(
        tmp_path / "h.csv", "answer_id,qid,relevance,fluency,note\n007,1,2,0.5,ok\n8,1,0,,x\n"
    )
    human = read_human(path)
    assert human["answer_id"].tolist() == ["007", "8"]
    assert human.attrs["dimensions"] == ["relevance", "fluency"]  # 'note' is text: not a label
    assert human["relevance"].tolist() == [2.0, 0.0]
    assert math.isnan(human["fluency"].iloc[1])


def test_graded_jsonl_and_tsv(tmp_path):
    jsonl = write(tmp_path / "h.jsonl", '{"answer_id": 1, "overall": 4}\n\n{"answer_id": 2}\n')
    human = read_human(jsonl)
    assert human["answer_id"].tolist() == ["1", "2"]
    assert human["overall"].iloc[0] == 4.0 and math.isnan(human["overall"].iloc[1])
    tsv = write(tmp_path / "h.tsv", "id\tscore\na\t1\n")
    assert read_human(tsv, id_column="id")["score"].tolist() == [1.0]


def test_rankings_become_grades(tmp_path):
    path = write(
        tmp_path / "r.jsonl",
        '{"qid": "q1", "ranking": ["a3", "a1", "a2"]}\n{"qid": "q2", "ranking": ["b1", "b2"]}\n',
    )
    human = read_human(path)
    assert human.attrs["kind"] == "ranking"
    grades = human.set_index("answer_id")
    # n items -> n-1 (best) .. 0
    assert grades["ranking"].to_dict() == {"a3": 2.0, "a1": 1.0, "a2": 0.0, "b1": 1.0, "b2": 0.0}
    assert grades.loc["b2", "qid"] == "q2"


def test_a_tie_in_a_ranking_is_a_nested_list(tmp_path):
    """[a, [b, c], d]: each item's label is the number of items ranked strictly below it:
    a 3, b and c 1, d 0 (no tie: n-1, ..., 0 as before)."""
    path = write(tmp_path / "t.jsonl", '{"qid": "q1", "ranking": ["a", ["b", "c"], "d"]}\n')
    grades = read_human(path).set_index("answer_id")["ranking"]
    assert grades.to_dict() == {"a": 3.0, "b": 1.0, "c": 1.0, "d": 0.0}
    bad = write(tmp_path / "e.jsonl", '{"qid": "q1", "ranking": ["a", []]}\n')
    with pytest.raises(InputError, match=r"e\.jsonl:1: ranking entry 2 is an empty tie"):
        read_human(bad)
    twice = write(tmp_path / "w.jsonl", '{"qid": "q1", "ranking": ["a", ["b", "a"]]}\n')
    with pytest.raises(InputError, match=r"w\.jsonl:1: item 'a' is ranked twice"):
        read_human(twice)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.csv", "answer_id,relevance\na,1\nb,2\nc,high\n",
         "bad.csv:4: relevance 'high' is not"),
        ("dup.csv", "answer_id,relevance\na,1\na,2\n", "dup.csv:3: answer_id 'a' is given twice"),
        ("noid.csv", "id,relevance\na,1\n",
         "noid.csv:1: missing column(s) 'answer_id' (found: id, relevance)"),
        ("bad.jsonl", '{"answer_id": "a", "x": 1}\n{"answer_id": \n',
         "bad.jsonl:2: not valid JSON"),
        ("same.jsonl", '{"qid": "q1", "ranking": ["a", "a"]}\n',
         "same.jsonl:1: item 'a' is ranked twice in this ranking"),
        ("dupq.csv", "qid,answer_id,relevance\nq1,a,1\nq2,a,2\nq1,a,0\n",
         "dupq.csv:4: answer_id 'a' is given twice for qid 'q1'"),
        ("empty.jsonl", '{"qid": "q1", "ranking": []}\n', "empty.jsonl:1: ranking must be"),
        ("empty.csv", "", "empty.csv: empty file"),
    ],
)  # fmt: skip
def test_bad_human_files_give_one_line(tmp_path, name, text, message):
    path = write(tmp_path / name, text)
    with pytest.raises(InputError) as error:
        read_human(path)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_ids_need_be_unique_within_a_query_only(tmp_path):
    """A docno judged under two topics, answers numbered per question: (qid, id) names an
    item, in a table with a qid column and in ranking files."""
    table = read_human(write(tmp_path / "h.csv", "qid,answer_id,relevance\nq1,a,1\nq2,a,2\n"))
    assert table[["qid", "answer_id", "relevance"]].values.tolist() == [
        ["q1", "a", 1.0],
        ["q2", "a", 2.0],
    ]
    text = '{"qid": "q1", "ranking": ["a", "b"]}\n{"qid": "q2", "ranking": ["a"]}\n'
    ranked = read_human(write(tmp_path / "r.jsonl", text))
    assert ranked[["qid", "answer_id", "ranking"]].values.tolist() == [
        ["q1", "a", 1.0],
        ["q1", "b", 0.0],
        ["q2", "a", 0.0],
    ]


def test_read_table_results_folder(tmp_path):
    pd.DataFrame({"answer_id": ["1"], "bleu": [3.0]}).to_parquet(tmp_path / "results.parquet")
    assert read_table(tmp_path)["bleu"].tolist() == [3.0]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"no evaluations\.parquet or .* in this folder"):
        read_table(tmp_path / "empty")
    with pytest.raises(InputError, match="file not found"):
        read_table(tmp_path / "absent.csv")


# -- categorical -----------------------------------------------------------------------------------
def judged() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "human": ["TRUE", "TRUE", "TRUE", "FALSE", "FALSE", "NOT GIVEN"],
            "judge": ["true", "TRUE", "FALSE", "false", "TRUE", None],
            "confidence": [0.9, 0.8, 0.3, 0.6, 0.4, np.nan],
        }
    )


def test_per_class_and_macro_accuracy_by_hand():
    result = categorical_evaluate(judged(), "judge", "human", "confidence")
    per_class = result.per_class.set_index("class")
    # TRUE: 3 items, 2 right; FALSE: 2 items, 1 right; NOT GIVEN: 1 item, no label (wrong)
    assert per_class["accuracy"].to_dict() == pytest.approx(
        {"FALSE": 0.5, "NOT GIVEN": 0.0, "TRUE": 2 / 3}
    )
    # precision: TRUE said 3 times (2 right), FALSE twice (1 right), NOT GIVEN never
    assert per_class.loc["TRUE", "precision"] == pytest.approx(2 / 3)
    assert per_class.loc["FALSE", "precision"] == pytest.approx(0.5)
    assert math.isnan(per_class.loc["NOT GIVEN", "precision"])
    s = result.summary
    assert s["accuracy"] == pytest.approx(3 / 6)
    assert s["macro_accuracy"] == pytest.approx((2 / 3 + 0.5 + 0) / 3)  # 0.388889
    assert s["n_no_label"] == 1
    confusion = result.confusion
    assert list(confusion.columns) == ["FALSE", "NOT GIVEN", "TRUE", NO_LABEL]
    assert confusion.loc["TRUE"].tolist() == [1, 0, 2, 0]
    assert confusion.loc["FALSE"].tolist() == [1, 0, 1, 0]
    assert confusion.loc["NOT GIVEN"].tolist() == [0, 0, 0, 1]


def test_review_curve_by_hand():
    result = categorical_evaluate(judged(), "judge", "human", "confidence", [0, 0.35, 0.5, 1])
    review = result.review.set_index("threshold")
    # wrong labels: items 3 (confidence 0.3), 5 (0.4), 6 (none: always sent)
    assert (review["n_wrong"] == 3).all()
    assert review.loc[0.0, ["n_review", "n_wrong_caught", "n_kept"]].tolist() == [1, 1, 5]
    assert review.loc[0.0, "accuracy_kept"] == pytest.approx(3 / 5)
    assert review.loc[0.35, ["n_review", "n_wrong_caught"]].tolist() == [2, 2]
    assert review.loc[0.35, "share_wrong_caught"] == pytest.approx(2 / 3)
    assert review.loc[0.35, "accuracy_kept"] == pytest.approx(3 / 4)
    assert review.loc[0.5, "share_review"] == pytest.approx(0.5)
    assert review.loc[0.5, "share_wrong_caught"] == 1.0
    assert review.loc[0.5, "accuracy_kept"] == 1.0
    assert review.loc[1.0, "n_review"] == 6 and math.isnan(review.loc[1.0, "accuracy_kept"])
    assert "without a confidence" in result.warnings[0]


def test_review_plot_png_and_svg(tmp_path):
    result = categorical_evaluate(judged(), "judge", "human", "confidence")
    png = result.plot(tmp_path / "review.png")
    svg = result.plot(tmp_path / "review.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:500]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["review.png", "review.svg"]
    with pytest.raises(NrpError):
        categorical_evaluate(judged(), "judge", "human").plot(tmp_path / "x.png")


def test_normalise_label():
    assert normalise_label(" not_given ") == "NOT GIVEN"
    assert normalise_label("Not-Given") == "NOT GIVEN"
    assert normalise_label("") is None and normalise_label(float("nan")) is None
