"""The report's parts on hand-made inputs: which NRP measures are shown, the size and meta
readers with their one-line errors, evaluator-vs-NRP correlations computed by hand, HTML
escaping, and reproducible figures."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from nrp.collection.manifest import COMBINED
from nrp.errors import InputError
from nrp.reports.figures import nrp_strip_figure
from nrp.reports.html import TableBlock, integer, render_table
from nrp.reports.inputs import read_meta, read_sizes
from nrp.reports.paper import latex_table, markdown_table, write_paper_tables
from nrp.reports.tables import evaluator_nrp_table, nrp_measures


def results_frame(nrp_by_dimension: dict[str, list[float]], rankers: dict[str, str]):
    rows = []
    for dimension, values in nrp_by_dimension.items():
        for i, value in enumerate(values):
            rows.append(
                {"answer_id": f"a{i}", "llm": "m", "prompt": "p", "qid": "q1", "sample": i,
                 "dimension": dimension, "ranker": rankers.get(dimension, ""), "nrp": value}
            )  # fmt: skip
    return pd.DataFrame(rows)


# -- measures --------------------------------------------------------------------------------------
def test_one_ranker_for_every_dimension_is_shown_once():
    same = [1.0, 0.5, 0.25]
    frame = results_frame(
        {"relevance": same, "readability": same, COMBINED: same},
        {"relevance": "tfidf", "readability": "tfidf"},
    )
    (measure,) = nrp_measures(frame)
    assert (measure.dimension, measure.ranker) == ("relevance", "tfidf")
    assert measure.covers == ("relevance", "readability", COMBINED)
    assert measure.label == "NRP of every dimension (tfidf)"


def test_dimensions_with_different_nrp_each_get_a_panel_weighted_last():
    frame = results_frame(
        {COMBINED: [0.75, 0.5], "relevance": [1.0, 0.5], "readability": [0.5, 0.5]},
        {"relevance": "tfidf", "readability": "bm25"},
    )
    measures = nrp_measures(frame, {"relevance": 0.5, "readability": 0.5})
    assert [(m.dimension, m.ranker) for m in measures] == [
        ("relevance", "tfidf"), ("readability", "bm25"), (COMBINED, "")
    ]  # fmt: skip
    assert [m.label for m in measures] == [
        "relevance (tfidf)", "readability (bm25)", "weighted NRP (relevance 0.50, readability 0.50)"
    ]  # fmt: skip
    assert nrp_measures(frame)[2].label == "weighted NRP (weights not recorded)"


def test_a_weighted_nrp_equal_to_one_dimension_is_one_panel_named_by_its_weights(tmp_path):
    # weights 1/0/0: the weighted NRP is relevance's, number for number; style differs
    frame = results_frame(
        {"relevance": [1.0, 0.5, 0.25], "readability": [0.5, 0.5, 0.0],
         "style": [0.0, 0.25, 0.5], COMBINED: [1.0, 0.5, 0.25]},
        {"relevance": "bm25", "readability": "tfidf", "style": "tfidf"},
    )  # fmt: skip
    weights = {"relevance": 1.0, "readability": 0.0, "style": 0.0}
    measures = nrp_measures(frame, weights)
    assert [(m.dimension, m.ranker, m.covers) for m in measures] == [
        ("relevance", "bm25", ("relevance", COMBINED)),
        ("readability", "tfidf", ("readability",)),
        ("style", "tfidf", ("style",)),
    ]
    assert measures[0].label == "relevance (bm25) = weighted NRP (relevance 1.00)"
    # the figure draws one panel per distinct measure, titled by its label
    means = pd.DataFrame(
        [{"dimension": m.dimension, "ranker": m.ranker, "llm": "m", "prompt": "p",
          "mean_nrp": 0.5, "ci_low": 0.25, "ci_high": 0.75} for m in measures]
    )  # fmt: skip
    drawn = nrp_strip_figure(frame, means, measures, tmp_path)
    svg = drawn.svg.read_text(encoding="utf-8")
    assert svg.count("relevance (bm25) = weighted NRP (relevance 1.00)") == 1
    assert "mean of the dimensions" not in svg and svg.count('<g id="axes_') == 3


# -- Markdown and LaTeX ----------------------------------------------------------------------------
def test_main_tables_as_markdown_and_latex_by_hand(tmp_path):
    frame = pd.DataFrame(
        {"rank": [1, 2], "llm": ["gpt_4 | big", "t5&co"], "mean NRP": [0.75, 0.5],
         "95% CI": ["[0.5000, 1.0000]", "[-]"], "answers": [1200, 4]}
    )  # fmt: skip
    block = TableBlock(frame, "nrp_ranking.csv", formats={"rank": integer, "answers": integer})
    assert markdown_table(block).splitlines() == [
        "| rank | llm | mean NRP | 95% CI | answers |",
        "| ---: | --- | ---: | --- | ---: |",
        "| 1 | gpt_4 \\| big | 0.7500 | [0.5000, 1.0000] | 1,200 |",
        "| 2 | t5&co | 0.5000 | [-] | 4 |",
    ]
    assert latex_table(block).splitlines() == [
        "\\begin{tabular}{rlrlr}",
        "\\toprule",
        "rank & llm & mean NRP & 95\\% CI & answers \\\\",
        "\\midrule",
        "1 & gpt\\_4 | big & 0.7500 & [0.5000, 1.0000] & 1,200 \\\\",
        "2 & t5\\&co & 0.5000 & [-] & 4 \\\\",
        "\\bottomrule",
        "\\end{tabular}",
    ]
    written = write_paper_tables([block], tmp_path)
    assert sorted(written) == ["nrp_ranking.md", "nrp_ranking.tex"]
    assert (tmp_path / "nrp_ranking.md").read_text(encoding="utf-8") == markdown_table(block)


# -- evaluators against NRP ------------------------------------------------------------------------
def test_evaluator_against_nrp_by_hand():
    # q1 same order: tau 1; q2 reversed: -1; q3 pairs (1,2) C, (1,3) C, (2,3) D: (2-1)/3;
    # q4 NRP constant: left out; q5 score constant: 0 (counted)
    data = {
        "q1": ([1, 2, 3], [0.2, 0.4, 0.6]),
        "q2": ([1, 2, 3], [0.6, 0.4, 0.2]),
        "q3": ([1, 2, 3], [0.2, 0.6, 0.4]),
        "q4": ([1, 2, 3], [0.5, 0.5, 0.5]),
        "q5": ([5, 5, 5], [0.1, 0.2, 0.3]),
    }
    results, evaluations = [], []
    for qid, (scores, nrps) in data.items():
        for i, (score, nrp) in enumerate(zip(scores, nrps, strict=True)):
            answer = f"{qid}-{i}"
            results.append({"answer_id": answer, "qid": qid, "dimension": "relevance",
                            "ranker": "tfidf", "nrp": nrp})  # fmt: skip
            evaluations.append({"answer_id": answer, "judge.score": float(score)})
    results_df = pd.DataFrame(results)
    (measure,) = nrp_measures(results_df)
    table = evaluator_nrp_table(pd.DataFrame(evaluations), results_df, ["judge.score"], [measure])
    row = table.iloc[0]
    assert row["n_queries"] == 4 and row["n_answers"] == 15
    assert row["tau"] == pytest.approx((1 - 1 + 1 / 3 + 0) / 4)
    # t-interval: mean 1/12, sd 0.833, t(0.975, 3) = 3.182: [-1.24, 1.41], clipped to [-1, 1]
    assert (row["tau_low"], row["tau_high"]) == (-1.0, 1.0)


# -- readers ---------------------------------------------------------------------------------------
def test_sizes_from_csv_and_yaml(tmp_path):
    csv = tmp_path / "sizes.csv"
    csv.write_text("llm,params_b\nllama-70b,70\nphi-mini,3.8\n", encoding="utf-8")
    assert read_sizes(csv) == {"llama-70b": 70.0, "phi-mini": 3.8}
    yaml_file = tmp_path / "sizes.yaml"
    yaml_file.write_text("sizes:\n  llama-70b: 70\n  'gpt <x>': 1.5e3\n", encoding="utf-8")
    assert read_sizes(yaml_file) == {"llama-70b": 70.0, "gpt <x>": 1500.0}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("s.yaml", "a: 7\nb: big\n", "s.yaml:2: b: size 'big' is not a number"),
        ("s.yaml", "a: 7\nb: [1, 2]\n", "s.yaml:2: b: not a number"),
        ("s.yaml", "a: 7\n  b: 1\n", "s.yaml:2: invalid YAML"),
        ("s.csv", "llm,size\na,1\na,2\n", "s.csv:3: llm 'a' is given twice"),
        ("s.csv", "llm,score\na,1\n", "s.csv:1: needs columns llm and one of params_b"),
        ("s.csv", "llm,size\na,-1\n", "s.csv:2: a: size must be a positive number of billions"),
        ("s.txt", "a 1\n", "s.txt: model sizes must be .csv, .tsv, .yaml or .yml"),
    ],
)
def test_a_bad_sizes_file_names_file_and_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as error:
        read_sizes(path)
    assert str(error.value).startswith(str(tmp_path / message.split(":")[0]))
    assert message in str(error.value)


def test_a_generic_meta_table_in_another_spelling(tmp_path):
    path = tmp_path / "judges.csv"
    path.write_text(
        "Score,Human,Tau,Tau_Low,Tau_High,Spearman,N\n"
        "bleu,relevance,0.5,0.2,0.8,0.6,20\n"
        "judge,relevance,0.64,0.50,0.78,,20\n",
        encoding="utf-8",
    )
    meta = read_meta(path)
    frame = meta.correlations
    assert frame["evaluator"].tolist() == ["bleu", "judge"]
    assert frame["dimension"].tolist() == ["relevance", "relevance"]
    assert frame["tau"].tolist() == [0.5, 0.64] and frame["tau_high"].tolist() == [0.8, 0.78]
    assert frame["spearman"].iloc[0] == 0.6 and math.isnan(frame["spearman"].iloc[1])
    assert frame["dataset"].tolist() == ["judges", "judges"] and frame["level"].tolist() == ["", ""]
    assert meta.categorical == [] and meta.ignored == []


def test_a_meta_table_with_a_bad_value_or_without_tau_is_an_error(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("evaluator,dimension,tau\nbleu,relevance,0.5\nrouge,relevance,high\n")
    with pytest.raises(InputError, match=r"bad\.csv:3: tau 'high' is not a number"):
        read_meta(bad)
    folder = tmp_path / "meta"
    folder.mkdir()
    other = folder / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match=r"other\.csv:1: needs columns evaluator, dimension"):
        read_meta(other)  # given as a file: it must be a correlation table
    in_folder = read_meta(folder)  # in a folder: listed as ignored
    assert in_folder.correlations is None and in_folder.ignored == [str(other)]


# -- HTML and figures ------------------------------------------------------------------------------
def test_table_cells_are_escaped():
    frame = pd.DataFrame({"llm": ['<script>alert("x")</script>'], "mean": [0.123456]})
    page = render_table(TableBlock(frame, "t&t.csv"))
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert '<td class="num">0.1235</td>' in page
    assert 'href="tables/t&amp;t.csv"' in page


def test_the_strip_plot_is_the_same_file_for_the_same_seed(tmp_path):
    frame = results_frame({"relevance": [1.0, 0.5, 0.25, 0.75]}, {"relevance": "tfidf"}).assign(
        prompt=["a", "b", "a", "b"]
    )
    means = pd.DataFrame(
        {"dimension": "relevance", "ranker": "tfidf", "llm": "m", "prompt": ["a", "b"],
         "mean_nrp": [0.625, 0.625], "ci_low": [0.25, 0.5], "ci_high": [1.0, 0.75]}
    )  # fmt: skip
    measures = nrp_measures(frame)
    first = nrp_strip_figure(frame, means, measures, tmp_path / "one", seed=7)
    second = nrp_strip_figure(frame, means, measures, tmp_path / "two", seed=7)
    assert first.svg.read_bytes() == second.svg.read_bytes()
    assert first.png.read_bytes() == second.png.read_bytes()
    other = nrp_strip_figure(frame, means, measures, tmp_path / "three", seed=8)
    assert other.svg.read_bytes() != first.svg.read_bytes()  # the jitter moved


def test_the_means_table_shows_the_share_a_guard_floored_and_a_plain_ranker_none():
    """A guard's answers scored below -FLAG_OFFSET / 2 are on its floor: one of four here. The
    report's means table carries 'share floored' for it; for tfidf (which floors nothing) and
    for results without scores it has no such column."""
    from nrp.analysis.summary import summarize
    from nrp.reports.build import _nrp_means_display

    frame = results_frame({"relevance": [0.0, 0.5, 1.0, 0.75]}, {"relevance": "guard"})
    guarded = frame.assign(score=[-9500.0, 0.3, 0.8, 0.6])
    shown = _nrp_means_display(summarize(guarded), nrp_measures(guarded))
    assert shown["prompt"].tolist() == ["p", "(all)"]  # the prompt, and the LLM over its prompts
    assert shown["share floored"].tolist() == [0.25, 0.25]
    assert (
        shown.columns.tolist().index("share floored")
        == shown.columns.tolist().index("share NRP=0") + 1
    )
    plain = frame.assign(ranker="tfidf", score=[-9500.0, 0.3, 0.8, 0.6])
    assert "share floored" not in _nrp_means_display(summarize(plain), nrp_measures(plain))
    assert "share floored" not in _nrp_means_display(summarize(frame), nrp_measures(frame))
