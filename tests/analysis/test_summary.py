"""NRP aggregation: query-level means, bootstrap intervals, saturation shares and paired tests,
on hand-made per-answer frames with hand-computed values."""

from __future__ import annotations

import dataclasses
import itertools
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
    collapsed_warnings,
    read_results,
    summarize,
)
from nrp.cli import main
from nrp.errors import ConfigError, InputError, NrpError
from nrp.tables import format_interval


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
    assert "weighted:" in summary.format(details=True)


def test_one_prompt_and_one_dimension_print_no_repeated_numbers():
    """One prompt: an LLM's (all) row would repeat its prompt's row; one dimension: the weighted
    block would repeat the dimension's. A: q1 1.0, q2 0.5 -> 0.75; B: 0.5, 0.0 -> 0.25; the
    bootstrap over two queries draws means 0.5, 0.75, 1.0 (A), so its 95% interval is [0.5, 1];
    A - B is +0.5 on both queries: 2 of the 4 sign vectors reach |0.5|, p = 0.5."""
    rows = [("A", "p", "q1", 0, 1.0), ("A", "p", "q2", 0, 0.5)]
    rows += [("B", "p", "q1", 0, 0.5), ("B", "p", "q2", 0, 0.0)]
    summary = summarize(pd.concat([results(rows, "relevance"), results(rows, "weighted", "")]))
    assert summary.format(details=True).splitlines() == [
        "ranked by weighted NRP: 2 queries, 4 answers; mean over queries with 95% CI "
        "(percentile bootstrap over queries, 10000 resamples, seed 0)",
        "group: systems sharing a letter are not significantly different (paired randomization "
        "test over queries (10,000 sign vectors), Holm-corrected over 1 pair, alpha 0.05)",
        "  rank  llm  prompt  NRP [95% CI]             group  queries  answers",
        "  1     A    p       0.7500 [0.5000, 1.0000]  a      2        2",
        "  2     B    p       0.2500 [0.0000, 0.5000]  a      2        2",
        "",
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
    text = summary.format(details=True).splitlines()
    # the ranked table shows the share too; the relevance block starts after it
    assert text[2].split()[-3:] == ["floored", "queries", "answers"]
    assert text[3].split()[-3:] == ["33.3%", "3", "3"] and text[4].split()[-3] == "0.0%"
    text = text[6:]
    assert "NRP=0  floored  queries" in text[3]
    assert text[4].split()[-3:] == ["33.3%", "3", "3"]
    assert text[5].split()[-3:] == ["0.0%", "3", "3"]
    plain = summarize(results(rows))  # bm25: no floored column, and none floored
    assert (plain.means["share_floored"] == 0.0).all()
    assert "floored" not in plain.format(details=True)
    unscored = summarize(guarded.drop(columns="score"))
    assert unscored.means["share_floored"].isna().all()
    assert "floored" not in unscored.format(details=True)


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
    text = summary.format(details=True)
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


# -- the ranked table --------------------------------------------------------------------------
def test_compact_letter_display_by_hand():
    """A, B, C, D best first; A-C, A-D and B-D differ. Insert-absorb: {ABCD} -> A-C: {BCD},
    {ABD} -> A-D: {BCD}, {BD}, {AB}, {BD} absorbed -> B-D: {CD}, {BC}, {AB}; by best member
    {AB} a, {BC} b, {CD} c."""
    cld = statistics.compact_letter_display
    different = [("A", "C"), ("A", "D"), ("B", "D")]
    assert cld("ABCD", different) == {"A": "a", "B": "ab", "C": "bc", "D": "c"}
    assert cld("ABCD", [(b, a) for a, b in different]) == cld("ABCD", different)
    assert cld("ABCD", []) == dict.fromkeys("ABCD", "a")
    every = [("A", "B"), ("A", "C"), ("A", "D"), ("B", "C"), ("B", "D"), ("C", "D")]
    assert cld("ABCD", every) == {"A": "a", "B": "b", "C": "c", "D": "d"}
    # 53 groups: past a..z, A..Z
    names = [f"s{i}" for i in range(53)]
    with pytest.raises(ValueError, match="more than 52"):
        cld(names, itertools.combinations(names, 2))
    assert cld(names[:52], itertools.combinations(names[:52], 2))["s51"] == "Z"


def test_batched_randomization_tests_equal_the_single_test_bit_for_bit():
    rng = np.random.default_rng(11)
    pairs = [(rng.uniform(size=n), rng.uniform(size=n)) for n in (0, 5, 13, 14, 30, 30, 50)]
    single = [statistics.paired_randomization_test(a, b, 3000, 4) for a, b in pairs]
    assert statistics.paired_tests(pairs, "randomization", 3000, 4) == single
    assert statistics.paired_tests(pairs[1:3], "t") == [
        statistics.paired_t_test(a, b) for a, b in pairs[1:3]
    ]


# Twelve queries (exact randomization: 2^12 = 4096 sign vectors). C 0.5 on every query; B
# C + 0.1 on q5..q9; A B + 0.1 on q0..q4; D 0.3. Means: A 7/12, B 6.5/12, C 0.5, D 0.3.
# A-B and B-C: +0.1 on five queries, 0 elsewhere: only the 2 of 2^5 sign patterns of those
# five that agree are as extreme, p = 1/16. A-C: +0.1 on ten queries, p = 2/2^10 = 1/512.
# A-D, B-D, C-D: positive on all twelve, p = 2/4096. Holm over the 6 pairs: 6/2048 (x6, x5,
# x4 with the running max), 3/512, then 2/16 = 0.125 for A-B and B-C: those two alone are not
# significant, so A a, B ab, C b, D c.
C_VALUES = [0.5] * 12
B_VALUES = [0.5] * 5 + [0.6] * 5 + [0.5] * 2
A_VALUES = [0.6] * 10 + [0.5] * 2
D_VALUES = [0.3] * 12
RANKED = (
    spread("C", C_VALUES, "p1")
    + spread("A", A_VALUES, "p1")
    + spread("D", D_VALUES, "p1")
    + spread("B", B_VALUES, "p1")
)
# a second prompt where all four answer 0.5: pooled over prompts every difference is halved,
# which changes no p-value of a sign-flip test (means 13/24, 12.5/24, 0.5, 0.4)
SECOND = [row for llm in "CADB" for row in spread(llm, [0.5] * 12, "p2")]


def test_ranking_by_hand_with_exact_groups():
    summary = summarize(results(RANKED))
    ranking = summary.ranking
    assert ranking["llm"].tolist() == ["A", "B", "C", "D"]
    assert ranking["rank"].tolist() == [1, 2, 3, 4]
    assert ranking["mean_nrp"].tolist() == pytest.approx([7 / 12, 6.5 / 12, 0.5, 0.3])
    assert ranking["group"].tolist() == ["a", "ab", "b", "c"]
    assert (ranking["prompt"] == "p1").all() and (ranking["n_queries"] == 12).all()
    assert ranking[["share_floored", "share_flagged", "share_empty"]].isna().all().all()
    assert ranking.attrs["pairs"] == 6
    # the same pairs within the prompt, as the comparisons table tests them
    tests = summary.comparisons.set_index(["a", "b"])
    assert tests.loc[("A", "B"), "p"] == pytest.approx(1 / 16)
    assert tests.loc[("C", "A"), "p"] == pytest.approx(1 / 512)
    assert tests.loc[("A", "D"), "p"] == pytest.approx(2 / 4096)
    # the paired t-test on request: A-B (and B-C) is 0.1 on five queries and 0 on seven, mean
    # 1/24, sd 0.0515, t = 2.80 with 11 degrees of freedom, p 0.0172; Holm doubles it for the
    # two largest p-values (0.034 < 0.05), so with this test every pair differs
    by_t = summarize(results(RANKED), test="t")
    assert by_t.comparisons.set_index(["a", "b"]).loc[("A", "B"), "p"] == pytest.approx(
        0.01718, abs=1e-5
    )
    assert by_t.ranking["group"].tolist() == ["a", "b", "c", "d"]


def test_ranking_by_llm_pools_the_prompts_and_ties_keep_input_order():
    summary = summarize(results(RANKED + SECOND))
    by_llm = summary.ranked("llm")
    assert by_llm["llm"].tolist() == ["A", "B", "C", "D"]
    assert (by_llm["prompt"] == ALL_PROMPTS).all()
    assert by_llm["mean_nrp"].tolist() == pytest.approx([13 / 24, 12.5 / 24, 0.5, 0.4])
    assert by_llm["group"].tolist() == ["a", "ab", "b", "c"]
    assert by_llm["n_answers"].tolist() == [24] * 4
    # by prompt: the five rows at 0.5 in the means table's order (LLMs as they first appear)
    by_prompt = summary.ranking
    assert list(zip(by_prompt["llm"], by_prompt["prompt"], strict=True)) == [
        ("A", "p1"), ("B", "p1"), ("C", "p1"), ("C", "p2"), ("A", "p2"), ("D", "p2"),
        ("B", "p2"), ("D", "p1"),
    ]  # fmt: skip
    assert by_prompt["rank"].tolist() == list(range(1, 9))
    assert summary.ranked("prompt") is summary.ranking
    with pytest.raises(ConfigError, match="rank by 'prompt' or 'llm'"):
        summary.ranked("query")


def test_the_weighted_nrp_is_ranked_and_its_floored_share_is_the_guards():
    """Relevance by a guard flooring A's first answer of p1 (1 of 12), readability by bm25
    (floors nothing): the weighted NRP is ranked, its floored share the guard's."""
    guard = results(RANKED, "relevance", "guard:content=0.06")
    guard["score"] = [-9000.0 if a == "A/p1/q0/0" else 0.5 for a in guard["answer_id"]]
    frame = pd.concat([guard, results(RANKED, "readability"), results(RANKED, "weighted", "")])
    summary = summarize(frame)
    ranking = summary.ranking
    assert ranking["llm"].tolist() == ["A", "B", "C", "D"]
    assert ranking["share_floored"].tolist() == pytest.approx([1 / 12, 0.0, 0.0, 0.0])
    assert summary.format().splitlines()[0].startswith("ranked by weighted NRP: 12")


def test_default_text_leads_with_the_ranked_table_and_details_keeps_the_rest():
    summary = summarize(results(RANKED))
    lines = summary.format().splitlines()
    assert lines[2].split() == ["rank", "llm", "prompt", "NRP", "[95%", "CI]", "group",
                                "queries", "answers"]  # fmt: skip
    assert lines[3].split()[:3] == ["1", "A", "p1"] and lines[3].split()[-3:] == ["a", "12", "12"]
    assert [line.split()[-3] for line in lines[3:7]] == ["a", "ab", "b", "c"]
    assert lines[-1] == (
        "per-dimension tables and paired tests: nrp summary --details; all tables: --out DIR"
    )
    assert len(lines) == 9 and str(summary) == summary.format()
    details = summary.format(details=True)
    assert details.startswith("\n".join(lines[:7]) + "\n\nrelevance (ranker bm25): 12 queries")
    assert "paired comparisons on query-level means" in details and "--details" not in details


def test_warnings_are_printed_once_with_a_count():
    fewer = "relevance, llms within prompt p: {} and {} are compared over the 9 queries both "
    fewer += "answered (12 and 9 answered)"
    warnings = ["x", fewer.format("A", "B"), "y", "x", fewer.format("B", "C"), "x"]
    assert collapsed_warnings(warnings) == [
        "x (x3)",
        "relevance, llms within prompt p: 2 pairs compared over fewer queries (those both "
        "answered)",
        "y",
    ]
    # one text said of several dimensions: one line naming them
    mixes = "LLMs were run with different prompts"
    warnings = [f"relevance: {mixes}", "z", f"style: {mixes}", f"weighted: {mixes}", "z"]
    assert collapsed_warnings(warnings) == [f"relevance, style, weighted: {mixes}", "z (x2)"]


def test_thirteen_llms_by_four_prompts_print_a_short_summary():
    rng = np.random.default_rng(5)
    rows = [
        (f"llm{i:02d}", f"p{j}", f"q{k}", 0, float(v))
        for i in range(13)
        for j in range(4)
        for k, v in enumerate(np.clip(rng.normal(0.5 + 0.02 * i, 0.2, 50), 0, 1))
        if not (i == 12 and k >= 45)  # llm12 answered 45 queries: warnings per pair
    ]
    summary = summarize(results(rows))
    lines = summary.format().splitlines()
    assert len(lines) < 80
    assert len(summary.format(details=True).splitlines()) > 600
    best = summary.ranking.iloc[0]
    assert lines[3].split()[:3] == ["1", best["llm"], best["prompt"]]
    assert best["mean_nrp"] == summary.means.loc[summary.means["prompt"] != ALL_PROMPTS,
                                                 "mean_nrp"].max()  # fmt: skip
    assert len(summary.ranking) == 52 and summary.ranking.attrs["pairs"] == 52 * 51 // 2
    warned = [line for line in lines if "compared over fewer queries" in line]
    # 4 prompts and the pooled family: llm12 against 12 LLMs; 4 prompts of llm12: none
    assert warned == [
        f"  relevance, llms within prompt p{j}: 12 pairs compared over fewer queries (those "
        "both answered)"
        for j in range(4)
    ] + [
        "  relevance, llms pooled over prompts (all): 12 pairs compared over fewer queries "
        "(those both answered)"
    ]


def test_summary_command_ranks_by_llm(tmp_path, capsys):
    results(RANKED + SECOND).to_csv(tmp_path / "results.csv", index=False)
    assert main(["summary", str(tmp_path), "--by", "llm", "--out", str(tmp_path / "s")]) == 0
    lines = capsys.readouterr().out.splitlines()
    # pooled query means: (value on p1 + 0.5) / 2
    pooled = {
        llm: [(v + 0.5) / 2 for v in values]
        for llm, values in zip("ABCD", (A_VALUES, B_VALUES, C_VALUES, D_VALUES), strict=True)
    }
    intervals = {
        llm: format_interval(*statistics.bootstrap_interval(values, 0.95, 10_000, 0))
        for llm, values in pooled.items()
    }
    assert lines == [
        "ranked by NRP of relevance (ranker bm25): 12 queries, 96 answers; mean over queries "
        "with 95% CI (percentile bootstrap over queries, 10000 resamples, seed 0)",
        "group: systems sharing a letter are not significantly different (paired randomization "
        "test over queries (10,000 sign vectors), Holm-corrected over all 6 pairs, alpha 0.05)",
        "  rank  llm  NRP [95% CI]             group  queries  answers",
        f"  1     A    0.5417 {intervals['A']}  a      12       24",
        f"  2     B    0.5208 {intervals['B']}  ab     12       24",
        f"  3     C    0.5000 {intervals['C']}  b      12       24",
        f"  4     D    0.4000 {intervals['D']}  c      12       24",
        "",
        "per-dimension tables and paired tests: nrp summary --details; all tables: --out DIR",
        "",
        f"wrote {tmp_path / 's'}",
    ]
    saved = pd.read_csv(tmp_path / "s" / "summary_ranking.csv", keep_default_na=False)
    assert saved["group"].tolist()[:2] == ["a", "ab"]  # the default ranking: per prompt
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["ranking"][0]["llm"] == "A"


def test_flagged_shares_per_prompt_and_pooled_by_answers():
    """A/p1 6 of 12 flagged, A/p2 none of 12: A pooled 6/24; B/p1 4 of 4, B/p2 1 of 12: B pooled
    5/16. No empty flag in these flags: that column stays NaN and out of the text."""
    flags = pd.DataFrame(
        [("A", "p1", 12, 0.5), ("A", "p2", 12, 0.0), ("B", "p1", 4, 1.0), ("B", "p2", 12, 1 / 12)],
        columns=["llm", "prompt", "n_answers", "share_flagged"],
    )
    rows = spread("A", A_VALUES, "p1") + spread("A", A_VALUES, "p2")
    rows += spread("B", B_VALUES, "p1") + spread("B", B_VALUES, "p2")
    summary = dataclasses.replace(summarize(results(rows)), flags=flags, ranking=None)
    by_llm = summary.ranked("llm").set_index("llm")
    assert by_llm["share_flagged"].to_dict() == pytest.approx({"A": 0.25, "B": 5 / 16})
    assert by_llm["share_empty"].isna().all()
    by_prompt = summary.ranked().set_index(["llm", "prompt"])["share_flagged"]
    assert by_prompt[("B", "p1")] == 1.0 and by_prompt[("A", "p2")] == 0.0
    lines = summary.format(by="llm").splitlines()
    assert lines[2].split() == ["rank", "llm", "NRP", "[95%", "CI]", "group", "flagged",
                                "queries", "answers"]  # fmt: skip
    assert lines[3].split()[-4:] == ["a", "25.0%", "12", "24"]
    assert lines[4].split()[-4:] == ["a", "31.2%", "12", "24"]


def test_a_large_family_draws_enough_sign_vectors_to_tell_systems_apart():
    """With 10,000 sign vectors the least p-value is 1/10,001: over 780 pairs Holm multiplies
    it past 0.05 and every system would share one letter. ``family_resamples`` draws enough
    that the least p-value is a quarter of alpha / pairs."""
    assert statistics.family_resamples(6, 0.05) == 10_000  # the default is enough
    assert statistics.family_resamples(780, 0.05) == 62_400  # 780 / (0.05 * 0.25)
    assert statistics.family_resamples(780, 0.05, 100_000) == 100_000
    # 40 systems over 20 queries, each 0.02 above the next on every query but for a little
    # noise of its own: the best and the worst differ on every query, as do systems far apart
    rng = np.random.default_rng(3)
    rows = [
        (f"L{i:02d}", "p", f"q{q}", 0, float(np.clip(0.9 - 0.02 * i + rng.normal(0, 0.01), 0, 1)))
        for i in range(40)
        for q in range(20)
    ]
    summary = summarize(results(rows))
    ranking = summary.ranked()
    assert ranking.attrs["pairs"] == 780 and ranking.attrs["resamples"] == 62_400
    assert ranking["llm"].tolist() == [f"L{i:02d}" for i in range(40)]
    best, worst = ranking["group"].iloc[0], ranking["group"].iloc[-1]
    assert not set(best) & set(worst)  # far apart: no letter in common
    assert "(62,400 sign vectors), Holm-corrected over all 780 pairs" in summary.format()
