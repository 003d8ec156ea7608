"""NRP aggregation: query-level means, bootstrap intervals, saturation shares and paired tests,
on hand-made per-answer frames with hand-computed values."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from nrp import statistics
from nrp.analysis.summary import (
    ALL_PROMPTS,
    LLMS_POOLED,
    LLMS_WITHIN_PROMPT,
    PROMPTS_WITHIN_LLM,
    read_results,
    summarize,
)
from nrp.errors import InputError, NrpError


def results(rows: list[tuple], dimension: str = "relevance", ranker: str = "bm25") -> pd.DataFrame:
    """(llm, prompt, qid, sample, nrp) rows -> the per-answer frame score_answers writes."""
    frame = pd.DataFrame(rows, columns=["llm", "prompt", "qid", "sample", "nrp"])
    n_docs = 4
    return frame.assign(
        answer_id=[f"{r.llm}/{r.prompt}/{r.qid}/{r.sample}" for r in frame.itertuples()],
        dimension=dimension,
        ranker=ranker,
        score=0.0,
        rank=1,
        n_docs=n_docs,
        ties=0,
    )[
        [
            "answer_id", "llm", "prompt", "qid", "sample", "dimension", "ranker", "score",
            "rank", "n_docs", "ties", "nrp",
        ]
    ]  # fmt: skip


# A/p1: q1 has three samples (1, 0.5, 0 -> 0.5), q2 one (1.0): query-level mean 0.75, while the
# mean over the four answers would be 0.625. A/p2: q1 0.25, q2 0.75 -> 0.5.
# A pooled over prompts: q1 (0.5 + 0.25)/2 = 0.375, q2 (1 + 0.75)/2 = 0.875 -> 0.625.
HAND = [
    ("A", "p1", "q1", 0, 1.0),
    ("A", "p1", "q1", 1, 0.5),
    ("A", "p1", "q1", 2, 0.0),
    ("A", "p1", "q2", 0, 1.0),
    ("A", "p2", "q1", 0, 0.25),
    ("A", "p2", "q2", 0, 0.75),
]


def test_samples_are_averaged_within_a_query_first():
    summary = summarize(results(HAND))
    assert summary.mean("relevance", "A", "p1") == pytest.approx(0.75)
    assert summary.mean("relevance", "A", "p1") != pytest.approx(np.mean([1.0, 0.5, 0.0, 1.0]))
    assert summary.mean("relevance", "A", "p2") == pytest.approx(0.5)
    assert summary.mean("relevance", "A") == pytest.approx(0.625)  # pooled over prompts
    q = summary.query_means.set_index(["llm", "prompt", "qid"])
    assert q.loc[("A", "p1", "q1"), "nrp"] == pytest.approx(0.5)
    assert q.loc[("A", "p1", "q1"), "n_answers"] == 3
    assert q.loc[("A", ALL_PROMPTS, "q1"), "nrp"] == pytest.approx(0.375)
    assert q.loc[("A", ALL_PROMPTS, "q2"), "nrp"] == pytest.approx(0.875)


def test_a_query_with_three_samples_weighs_like_a_query_with_one():
    # q1 answered three times with 0.2, q2 once with 1.0: (0.2 + 1.0) / 2, not (0.6 + 1.0) / 4
    rows = [("A", "p", "q1", s, 0.2) for s in range(3)] + [("A", "p", "q2", 0, 1.0)]
    summary = summarize(results(rows))
    assert summary.mean("relevance", "A", "p") == pytest.approx(0.6)
    # and the same when q1's three answers are replaced by their mean answered once
    once = summarize(results([("A", "p", "q1", 0, 0.2), ("A", "p", "q2", 0, 1.0)]))
    assert once.mean("relevance", "A", "p") == pytest.approx(0.6)


def test_counts_and_saturation_shares_are_over_answers():
    summary = summarize(results(HAND))
    p1 = summary.row("relevance", "A", "p1")
    assert (p1.n_queries, p1.n_answers) == (2, 4)
    assert p1.share_nrp_1 == pytest.approx(2 / 4)  # two answers above every document
    assert p1.share_nrp_0 == pytest.approx(1 / 4)
    pooled = summary.row("relevance", "A", ALL_PROMPTS)
    assert (pooled.n_queries, pooled.n_answers) == (2, 6)
    assert pooled.share_nrp_1 == pytest.approx(2 / 6)
    assert pooled.share_nrp_0 == pytest.approx(1 / 6)


def test_combined_dimension_is_summarised_and_listed_last():
    frame = pd.concat(
        [results(HAND, "weighted", ""), results(HAND, "relevance"), results(HAND, "readability")]
    )
    summary = summarize(frame)
    assert summary.measures() == [("relevance", "bm25"), ("readability", "bm25"), ("weighted", "")]
    assert summary.mean("weighted", "A") == pytest.approx(0.625)
    assert "weighted:" in summary.format()


def test_one_prompt_and_one_dimension_print_no_repeated_numbers():
    """One prompt: an LLM's (all) row would repeat its prompt's row; one dimension: the weighted
    block would repeat the dimension's. A: q1 1.0, q2 0.5 -> 0.75; B: 0.5, 0.0 -> 0.25; the
    bootstrap over two queries draws means 0.5, 0.75, 1.0 (A), so its 95% interval is [0.5, 1];
    A - B is +0.5 on both queries: 2 of the 4 sign vectors reach |0.5|, p = 0.5."""
    rows = [("A", "p", "q1", 0, 1.0), ("A", "p", "q2", 0, 0.5)]
    rows += [("B", "p", "q1", 0, 0.5), ("B", "p", "q2", 0, 0.0)]
    summary = summarize(pd.concat([results(rows, "relevance"), results(rows, "weighted", "")]))
    assert summary.format().splitlines() == [
        "relevance (ranker bm25): 2 queries, 4 answers; mean NRP over queries (a query's samples "
        "averaged first)",
        "  95% CI: percentile bootstrap over queries (10000 resamples, seed 0); NRP=1 / NRP=0: "
        "share of answers above / below every document",
        "  llm  prompt  NRP [95% CI]             NRP=1  NRP=0  queries  answers",
        "  A    p       0.7500 [0.5000, 1.0000]  50.0%  0.0%   2        2",
        "  B    p       0.2500 [0.0000, 0.5000]  0.0%   50.0%  2        2",
        "  paired comparisons on query-level means: paired randomization test, Holm within each "
        "family, alpha 0.05",
        "  family                 a - b  mean diff.  queries  p      p corr.",
        "  llms within prompt: p  A - B  +0.5000     2        0.500  0.500",
        "  * significant after correction (p corr. < 0.05)",
        "",
        "weighted: the same numbers as relevance (ranker bm25)",
    ]
    # the (all) rows stay in the means table: only the text leaves them out
    assert summary.mean("weighted", "A") == summary.mean("relevance", "A", "p") == 0.75


def test_the_share_a_guard_floored_is_counted_from_its_scores_and_shown_for_it_only():
    """A guard's flagged answers score below -FLAG_OFFSET / 2 (``GuardRanker.floors``): A's
    answers at -9,000 (floored) and 0.4, 0.7; B's none. The share is of answers, per prompt
    and pooled; bm25 floors nothing, and a table without scores cannot tell (NaN)."""
    rows = [("A", "p", "q1", 0, 0.0), ("A", "p", "q2", 0, 0.5), ("A", "p", "q3", 0, 1.0)]
    rows += [("B", "p", "q1", 0, 0.5), ("B", "p", "q2", 0, 0.5), ("B", "p", "q3", 0, 0.5)]
    guarded = results(rows, ranker="guard:content=0.06").assign(
        score=[-9000.0, 0.4, 0.7, 0.3, 0.2, 0.5]
    )
    summary = summarize(guarded)
    shares = summary.means.set_index(["llm", "prompt"])["share_floored"]
    assert shares[("A", "p")] == pytest.approx(1 / 3) and shares[("B", "p")] == 0.0
    text = summary.format().splitlines()
    assert "NRP=0  floored  queries" in text[3]
    assert text[4].split()[-3:] == ["33.3%", "3", "3"]
    assert text[5].split()[-3:] == ["0.0%", "3", "3"]
    plain = summarize(results(rows))  # bm25: no floored column, and none floored
    assert (plain.means["share_floored"] == 0.0).all()
    assert "floored" not in plain.format()
    unscored = summarize(guarded.drop(columns="score"))
    assert unscored.means["share_floored"].isna().all()
    assert "floored" not in unscored.format()


def spread(llm: str, values: list[float], prompt: str = "p") -> list[tuple]:
    return [(llm, prompt, f"q{i}", 0, v) for i, v in enumerate(values)]


RNG_VALUES = [round(v, 3) for v in np.random.default_rng(7).uniform(0, 1, 20)]


def test_bootstrap_interval_is_reproducible_contains_the_mean_and_resamples_queries():
    # q0 gets two extra samples: the bootstrap must resample the 20 query-level means
    rows = [*spread("A", RNG_VALUES), ("A", "p", "q0", 1, 0.0), ("A", "p", "q0", 2, 1.0)]
    first = summarize(results(rows), n_boot=2000, seed=3).row("relevance", "A", "p")
    again = summarize(results(rows), n_boot=2000, seed=3).row("relevance", "A", "p")
    other = summarize(results(rows), n_boot=2000, seed=4).row("relevance", "A", "p")
    assert (first.ci_low, first.ci_high) == (again.ci_low, again.ci_high)
    assert (first.ci_low, first.ci_high) != (other.ci_low, other.ci_high)
    assert first.ci_low < first.mean_nrp < first.ci_high
    query_means = list(RNG_VALUES)
    query_means[0] = (RNG_VALUES[0] + 0.0 + 1.0) / 3
    assert first.mean_nrp == pytest.approx(np.mean(query_means))
    expected = statistics.bootstrap_interval(query_means, 0.95, 2000, 3)
    assert (first.ci_low, first.ci_high) == pytest.approx(expected)


def test_no_interval_from_one_query():
    summary = summarize(results([("A", "p", "q1", 0, 0.4)]))
    row = summary.row("relevance", "A", "p")
    assert np.isnan(row.ci_low) and np.isnan(row.ci_high)
    assert json.loads(summary.to_json())["means"][0]["ci_low"] is None


BETTER = [0.9, 0.8, 0.95, 0.7, 0.85, 0.99, 0.6, 0.75]
WORSE = [v - 0.1 * (i + 1) / 4 for i, v in enumerate(BETTER)]


def test_llm_better_on_every_query_is_significant_with_the_exact_test():
    summary = summarize(results(spread("A", BETTER) + spread("B", WORSE)))
    (test,) = summary.comparisons.itertuples()
    assert (test.family, test.group, test.a, test.b) == (LLMS_WITHIN_PROMPT, "p", "A", "B")
    assert test.n_queries == 8
    assert test.mean_difference == pytest.approx(np.mean(np.subtract(BETTER, WORSE)))
    # exact randomization over the 2^8 sign vectors: only all-plus and all-minus are as extreme
    assert test.p == pytest.approx(2 / 256)
    assert test.p_corrected == pytest.approx(2 / 256)  # one pair: Holm changes nothing


def test_identical_llms_have_p_one_and_holm_corrects_within_the_family():
    rows = spread("A", BETTER) + spread("B", WORSE) + spread("C", WORSE)
    tests = summarize(results(rows)).comparisons.set_index(["a", "b"])
    assert tests.loc[("B", "C"), "p"] == 1.0
    assert tests.loc[("B", "C"), "mean_difference"] == 0.0
    # Holm over three pairs: 2/256 * 3 and 2/256 * 2 (raised to 6/256 by the running max), 1
    assert tests.loc[("A", "B"), "p_corrected"] == pytest.approx(6 / 256)
    assert tests.loc[("A", "C"), "p_corrected"] == pytest.approx(6 / 256)
    assert tests.loc[("B", "C"), "p_corrected"] == 1.0


def test_paired_t_test_on_request():
    frame = results(spread("A", BETTER) + spread("B", WORSE))
    (test,) = summarize(frame, test="t").comparisons.itertuples()
    assert test.p == pytest.approx(statistics.paired_t_test(BETTER, WORSE))


def test_families_within_prompt_pooled_and_within_llm():
    rows = (
        spread("A", BETTER, "p1")
        + spread("A", WORSE, "p2")
        + spread("B", WORSE, "p1")
        + spread("B", WORSE, "p2")
    )
    summary = summarize(results(rows))
    tests = summary.comparisons
    keys = list(zip(tests["family"], tests["group"], tests["a"], tests["b"], strict=True))
    assert keys == [
        (LLMS_WITHIN_PROMPT, "p1", "A", "B"),
        (LLMS_WITHIN_PROMPT, "p2", "A", "B"),
        (LLMS_POOLED, ALL_PROMPTS, "A", "B"),
        (PROMPTS_WITHIN_LLM, "A", "p1", "p2"),
        (PROMPTS_WITHIN_LLM, "B", "p1", "p2"),
    ]
    p = tests.set_index(["family", "group"])["p"]
    assert p[(LLMS_WITHIN_PROMPT, "p2")] == 1.0  # A/p2 and B/p2 are the same numbers
    assert p[(PROMPTS_WITHIN_LLM, "A")] == pytest.approx(2 / 256)
    # pooled: A's query means (BETTER + WORSE)/2 against B's WORSE
    pooled = tests[tests["family"] == LLMS_POOLED].iloc[0]
    expected = np.mean((np.add(BETTER, WORSE) / 2) - np.asarray(WORSE))
    assert pooled.mean_difference == pytest.approx(expected)
    text = summary.format()
    assert "llms pooled over prompts" in text and "A - B" in text and "p1 - p2" in text


def test_llms_are_paired_over_the_queries_both_answered():
    rows = spread("A", BETTER) + spread("B", WORSE[:5])
    summary = summarize(results(rows))
    (test,) = summary.comparisons.itertuples()
    assert test.n_queries == 5
    assert test.mean_a == pytest.approx(np.mean(BETTER[:5]))
    assert summary.mean("relevance", "A", "p") == pytest.approx(np.mean(BETTER))  # all 8
    assert any("5 queries both answered" in w for w in summary.warnings)


def test_bad_results_are_reported():
    frame = results(HAND)
    with pytest.raises(NrpError, match="repeat"):
        summarize(pd.concat([frame, frame.iloc[:1]]))
    with pytest.raises(NrpError, match=r"\[0, 1\]"):
        summarize(frame.assign(nrp=1.5))
    with pytest.raises(NrpError, match=r"results: missing column\(s\) 'llm' \(found: "):
        summarize(frame.drop(columns="llm"))
    partial = frame.copy()
    partial.loc[0, "nrp"] = np.nan
    summary = summarize(partial)
    assert any("without an NRP" in w for w in summary.warnings)
    assert summary.row("relevance", "A", "p1").n_answers == 3


def test_results_read_from_folder_parquet_or_csv(tmp_path):
    frame = results([(r[0], r[1], "007" if r[2] == "q1" else r[2], r[3], r[4]) for r in HAND])
    frame.to_parquet(tmp_path / "results.parquet", index=False)
    frame.to_csv(tmp_path / "results.csv", index=False)
    for path in (tmp_path, tmp_path / "results.parquet", tmp_path / "results.csv"):
        read = read_results(path)
        assert sorted(read["qid"].unique()) == ["007", "q2"]  # qid stays text
        summary = summarize(path)
        assert summary.mean("relevance", "A", "p1") == pytest.approx(0.75)
    (tmp_path / "results.parquet").unlink()
    assert read_results(tmp_path)["nrp"].tolist() == frame["nrp"].tolist()  # CSV fallback
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"no results\.parquet or results\.csv"):
        read_results(empty)
    (tmp_path / "bad.csv").write_text("llm,prompt,qid,dimension,nrp\nA,p,q1,relevance,high\n")
    with pytest.raises(InputError, match=r"bad.csv:2: nrp 'high' is not a number"):
        read_results(tmp_path / "bad.csv")


def test_json_and_csv_export(tmp_path):
    summary = summarize(results(spread("A", BETTER) + spread("B", WORSE)))
    data = json.loads(summary.to_json(tmp_path / "summary.json"))
    assert json.loads((tmp_path / "summary.json").read_text()) == data
    assert data["settings"]["ci"] == "percentile bootstrap over queries"
    means = {(m["llm"], m["prompt"]): m["mean_nrp"] for m in data["means"]}
    assert means[("A", "p")] == pytest.approx(np.mean(BETTER))
    assert data["comparisons"][0]["p"] == pytest.approx(2 / 256)
    paths = summary.to_csv(tmp_path)
    assert pd.read_csv(paths["means"])["mean_nrp"].tolist() == summary.means["mean_nrp"].tolist()
    assert len(pd.read_csv(paths["comparisons"])) == 1
    assert len(pd.read_csv(paths["query_means"])) == len(summary.query_means)
