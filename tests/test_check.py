"""``nrp check`` and ``assert_nrp``: the CI gate on an ``nrp score`` folder. Exit codes, the PASS
and FAIL lines with hand-computed query-level means, the paired comparison with a baseline
(a clearly worse model fails --no-worse, an equal one passes), and bad input as exit 2."""

from __future__ import annotations

from importlib import resources

import pandas as pd
import pytest

from nrp import api, engine, ingest, statistics
from nrp.analysis import check as check_module
from nrp.cli import main
from nrp.positioning.scoring import RESULT_COLUMNS

DEMO = resources.files("nrp") / "data" / "demo"
QIDS = [f"q{i}" for i in range(1, 9)]
# query-level weighted NRP per model; gpt2's q1 has two samples (0.8 and 0.6, mean 0.7)
GPT2 = [0.70, 0.90, 0.60, 0.80, 0.75, 0.85, 0.65, 0.75]  # mean 6.0 / 8 = 0.75
LLAMA = [0.50, 0.60, 0.70, 0.60, 0.55, 0.65, 0.60, 0.60]  # mean 4.8 / 8 = 0.60


def answer_rows(llm: str, prompt: str, weighted: list[float], qids=QIDS) -> list[dict]:
    """Result rows as `nrp score` writes them: relevance (weighted + 0.1, capped) and weighted."""
    rows = []
    for qid, value in zip(qids, weighted, strict=True):
        samples = [value + 0.1, value - 0.1] if (llm, qid) == ("gpt2", "q1") else [value]
        for sample, nrp in enumerate(samples):
            answer = f"{llm}-{prompt}-{qid}-{sample}"
            base = {"answer_id": answer, "llm": llm, "prompt": prompt, "qid": qid,
                    "sample": sample, "n_docs": 15}  # fmt: skip
            rows.append({**base, "dimension": "relevance", "ranker": "tfidf", "score": 1.5,
                         "rank": 3.0, "ties": 0, "nrp": min(1.0, nrp + 0.1)})  # fmt: skip
            rows.append({**base, "dimension": "weighted", "ranker": "", "score": None,
                         "rank": None, "ties": None, "nrp": nrp})  # fmt: skip
    return rows


def write_results(folder, *models) -> str:
    folder.mkdir(parents=True)
    rows = [row for model in models for row in answer_rows(*model)]
    pd.DataFrame(rows, columns=list(RESULT_COLUMNS)).to_csv(folder / "results.csv", index=False)
    return str(folder)


@pytest.fixture
def results(tmp_path):
    return write_results(tmp_path / "new", ("gpt2", "plain", GPT2), ("llama", "plain", LLAMA))


def interval(values: list[float]) -> str:
    _, low, high = statistics.mean_with_interval(values, 0.95, "bootstrap")
    return f"[{low:.3f}, {high:.3f}]"


def check(capsys, *args: str) -> tuple[int, list[str], str]:
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_min_nrp_fails_the_model_below_and_passes_the_one_above(results, capsys):
    code, lines, err = check(capsys, results, "--min-nrp", "0.7")
    assert (code, err) == (1, "")
    assert lines == [
        f"nrp check: PASS gpt2/plain weighted: mean NRP 0.750 {interval(GPT2)} >= 0.7 (8 queries)",
        f"nrp check: FAIL llama/plain weighted: mean NRP 0.600 {interval(LLAMA)} < 0.7 (8 queries)",
    ]
    code, lines, _ = check(capsys, results, "--min-nrp", "0.6")  # llama's mean: on it
    assert code == 0
    verdicts = [line.split(":")[1] for line in lines]
    assert verdicts == [" PASS gpt2/plain weighted", " PASS llama/plain weighted"]
    assert lines[1].endswith(">= 0.6 (8 queries)")


def test_dimension_checks_that_dimension(results, capsys):
    # relevance is weighted + 0.1 per answer: gpt2 0.85, llama 0.70
    code, lines, _ = check(capsys, results, "--min-nrp", "0.75", "--dimension", "relevance")
    assert code == 1
    assert lines[0].startswith("nrp check: PASS gpt2/plain relevance: mean NRP 0.850 [")
    assert lines[1].startswith("nrp check: FAIL llama/plain relevance: mean NRP 0.700 [")
    assert lines[1].endswith("< 0.75 (8 queries)")


def test_no_worse_fails_a_clearly_worse_model_and_passes_an_equal_one(results, tmp_path, capsys):
    worse = [v - 0.2 for v in GPT2]
    new = write_results(tmp_path / "worse", ("gpt2", "plain", worse), ("llama", "plain", LLAMA))
    code, lines, _ = check(capsys, new, "--baseline", results, "--no-worse")
    assert code == 1
    # every query 0.2 lower: exact randomization p = 2 / 2^8 = 0.0078; Holm over 2 models: 0.016
    assert lines[0] == (
        f"nrp check: FAIL gpt2/plain weighted: mean NRP 0.550 {interval(worse)} (8 queries); "
        "significantly below baseline 0.750 (-0.200 on 8 common queries, Holm p 0.016 < 0.05)"
    )
    assert lines[1] == (
        f"nrp check: PASS llama/plain weighted: mean NRP 0.600 {interval(LLAMA)} (8 queries); "
        "vs baseline 0.600 (+0.000 on 8 common queries, Holm p 1.000 >= 0.05)"
    )
    code, lines, _ = check(capsys, results, "--baseline", results, "--no-worse")
    assert code == 0 and all(line.startswith("nrp check: PASS") for line in lines)
    # without --no-worse the comparison is reported, not gating
    code, lines, _ = check(capsys, new, "--baseline", results, "--min-nrp", "0.5")
    assert code == 0 and lines[0].endswith("< 0.05) [not gating]")


def test_a_baseline_alone_reports_the_comparison(results, tmp_path, capsys):
    """--baseline without --no-worse or --min-nrp: the same comparison as above, exit 0."""
    worse = [v - 0.2 for v in GPT2]
    new = write_results(tmp_path / "worse", ("gpt2", "plain", worse), ("llama", "plain", LLAMA))
    code, lines, _ = check(capsys, new, "--baseline", results)
    assert code == 0
    assert lines == [
        f"nrp check: PASS gpt2/plain weighted: mean NRP 0.550 {interval(worse)} (8 queries); "
        "significantly below baseline 0.750 (-0.200 on 8 common queries, Holm p 0.016 < 0.05) "
        "[not gating]",
        f"nrp check: PASS llama/plain weighted: mean NRP 0.600 {interval(LLAMA)} (8 queries); "
        "vs baseline 0.600 (+0.000 on 8 common queries, Holm p 1.000 >= 0.05)",
    ]
    outcome = api.check_gate(new, baseline=results)
    assert outcome.passed and outcome.table["worse"].tolist() == [True, False]


def test_no_worse_pairs_on_common_queries_only(results, tmp_path, capsys):
    # the baseline has q1..q4 only, and a model the results lack
    base = write_results(tmp_path / "old", ("gpt2", "plain", GPT2[:4], QIDS[:4]),
                         ("mistral", "plain", LLAMA[:4], QIDS[:4]))  # fmt: skip
    outcome = api.check_results(results, baseline=base, no_worse=True)
    frame = outcome.to_frame()
    assert outcome.passed and frame["n_common"].tolist() == [4, 0]
    assert frame["baseline_nrp"].iloc[0] == pytest.approx(0.75)  # (0.7 + 0.9 + 0.6 + 0.8) / 4
    assert outcome.lines[1].endswith("(8 queries); not in the baseline")


def test_pytest_helper_passes_and_raises_with_the_fail_lines(results, tmp_path):
    outcome = api.assert_nrp(results, min_nrp=0.6)
    assert outcome.passed and outcome.failures == []
    assert outcome.to_frame()["mean"].tolist() == pytest.approx([0.75, 0.60])
    with pytest.raises(AssertionError) as caught:
        api.assert_nrp(results, min_nrp=0.7)
    assert str(caught.value) == (
        f"nrp check: FAIL llama/plain weighted: mean NRP 0.600 {interval(LLAMA)} < 0.7 (8 queries)"
    )
    worse = write_results(tmp_path / "w", ("gpt2", "plain", [v - 0.2 for v in GPT2]))
    with pytest.raises(AssertionError, match=r"significantly below baseline 0\.750"):
        api.assert_nrp(worse, baseline=results)  # a baseline implies no-worse
    frame = pd.read_csv(f"{results}/results.csv", dtype={"qid": str})
    assert not api.check_results(frame, min_nrp=0.7).passed  # a frame works as well


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}", "--min-nrp", "0.7"], "{missing}: file not found (the results)"),
        (["{results}", "--baseline", "{missing}", "--no-worse"], "{missing}: file not found (the"),
        (["{bad}", "--min-nrp", "0.7"], "results {bad}: NRP must lie in [0, 1]; found 1.5"),
        (["{empty}", "--min-nrp", "0.7"], "{empty}: no results.parquet or results.csv in this"),
        (
            ["{results}", "--min-nrp", "0.7", "--dimension", "fluency"],
            "unknown dimension 'fluency'; it has ['relevance', 'weighted']",
        ),
        (["{results}", "--baseline", "{other}", "--no-worse"], "the baseline shares no query"),
        (["{results}", "--no-worse"], "no-worse needs a baseline"),
        (["{results}"], "nothing to check"),
        (["{results}", "--min-nrp", "0.7", "--alpha", "1"], "alpha (--alpha) must lie strictly"),
        (["{results}", "--min-nrp", "7"], "minimum NRP (--min-nrp) must lie in [0, 1], not 7.0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, results, tmp_path, capsys):
    names = {"results": results, "missing": str(tmp_path / "nope"), "empty": str(tmp_path)}
    elsewhere = [f"x{i}" for i in range(8)]  # no query in common
    names["other"] = write_results(tmp_path / "other", ("gpt2", "plain", GPT2, elsewhere))
    names["bad"] = write_results(tmp_path / "bad", ("gpt2", "plain", [GPT2[0], 1.5, *GPT2[2:]]))
    code, lines, err = check(capsys, *[a.format(**names) for a in args])
    assert (code, lines) == (2, [])
    assert err.startswith("nrp: error: ") and err.count("\n") == 1
    assert message.format(**names) in err


def test_a_real_nrp_score_folder(tmp_path, capsys):
    ix = tmp_path / "ix"
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    out = tmp_path / "scored"
    assert main(["score", "demo", str(DEMO / "answers.jsonl"), "--ranker", "tfidf",
                 "--out", str(out), "--indexes", str(ix)]) == 0  # fmt: skip
    capsys.readouterr()
    scored = pd.read_csv(out / "results.csv", dtype={"llm": str, "prompt": str, "qid": str})
    weighted = scored[scored["dimension"] == "weighted"]
    per_query = weighted.groupby(["llm", "prompt", "qid"], sort=False)["nrp"].mean()
    means = per_query.groupby(["llm", "prompt"], sort=False).mean()
    code, lines, _ = check(capsys, str(out), "--min-nrp", "0", "--baseline", str(out),
                           "--no-worse")  # fmt: skip
    assert code == 0 and len(lines) == len(means) > 0
    for line, ((llm, prompt), mean) in zip(lines, means.items(), strict=True):
        model = f"{llm}/{prompt}" if prompt else llm
        assert line.startswith(f"nrp check: PASS {model} weighted: mean NRP {mean:.3f} [")
    code, alone, _ = check(capsys, str(out), "--baseline", str(out))  # itself: p 1, exit 0
    assert code == 0 and [line.split(";")[0] for line in alone] == [
        line.split(";")[0].replace(" >= 0", "") for line in lines
    ]
    assert all(a.endswith("(+0.000 on 8 common queries, Holm p 1.000 >= 0.05)") for a in alone)
    strict = f"{means.max() + 0.01:.2f}"
    code, lines, _ = check(capsys, str(out), "--min-nrp", strict)
    assert code == 1 and all(line.startswith("nrp check: FAIL") for line in lines)


def write_guarded(folder) -> str:
    """Results of a guard (``guard:content=0.06``): its flagged answers score below
    -FLAG_OFFSET / 2 (``GuardRanker.floors``). echo: both answers floored; terse: one of
    two; real: none. The weighted rows have no ranker and are not counted."""
    scores = {"echo": [-9000.0, -8000.0], "terse": [-7000.0, 0.3], "real": [0.4, 0.7]}
    rows = []
    for llm, values in scores.items():
        for qid, score in zip(["q1", "q2"], values, strict=True):
            base = {"answer_id": f"{llm}-{qid}", "llm": llm, "prompt": "p", "qid": qid,
                    "sample": 0, "n_docs": 4}  # fmt: skip
            nrp = 0.0 if score < 0 else 0.75
            rows.append({**base, "dimension": "relevance", "ranker": "guard:content=0.06",
                         "score": score, "rank": 4.0, "ties": 0, "nrp": nrp})  # fmt: skip
            rows.append({**base, "dimension": "weighted", "ranker": "", "score": None,
                         "rank": None, "ties": None, "nrp": nrp})  # fmt: skip
    folder.mkdir(parents=True)
    pd.DataFrame(rows, columns=list(RESULT_COLUMNS)).to_csv(folder / "results.csv", index=False)
    return str(folder)


def test_max_floored_fails_a_model_whose_answers_the_guard_took_for_no_answer(tmp_path, capsys):
    guarded = write_guarded(tmp_path / "guarded")
    code, lines, err = check(capsys, guarded, "--max-floored", "0.5")
    assert (code, err) == (1, "")
    where = "floored in relevance (guard:content=0.06): share of answers taken for no answer"
    assert lines == [
        f"nrp check: FAIL echo/p {where} 1.000 > 0.5 (2 of 2 answers)",
        f"nrp check: PASS terse/p {where} 0.500 <= 0.5 (1 of 2 answers)",
        f"nrp check: PASS real/p {where} 0.000 <= 0.5 (0 of 2 answers)",
    ]
    assert check(capsys, guarded, "--max-floored", "1")[0] == 0
    # beside --min-nrp: the NRP lines first (weighted: echo 0.0, terse 0.375, real 0.75)
    code, lines, _ = check(capsys, guarded, "--min-nrp", "0.3", "--max-floored", "0.4")
    assert code == 1 and len(lines) == 6
    assert [line.split(":")[1] for line in lines] == [
        " FAIL echo/p weighted", " PASS terse/p weighted", " PASS real/p weighted",
        " FAIL echo/p floored in relevance (guard", " FAIL terse/p floored in relevance (guard",
        " PASS real/p floored in relevance (guard",
    ]  # fmt: skip
    with pytest.raises(AssertionError, match=r"FAIL echo/p floored in relevance"):
        api.assert_nrp(guarded, max_floored=0.5)
    outcome = api.check_gate(guarded, max_floored=0.5)
    assert outcome.floored["n_floored"].tolist() == [2, 1, 0]
    assert outcome.table.empty and not outcome.passed


def test_gate_reads_the_results_once_for_nrp_and_floored(tmp_path, monkeypatch):
    """--min-nrp beside --max-floored: one read of the results file, and the lines of the two
    checks run apart, in that order."""
    guarded = write_guarded(tmp_path / "guarded")
    apart = [
        *api.check_results(guarded, min_nrp=0.3).lines,
        *engine.check_floored(guarded, 0.4).lines,
    ]
    reads = []
    real = check_module.read_results
    monkeypatch.setattr(check_module, "read_results", lambda path: reads.append(path) or real(path))
    outcome = api.check_gate(guarded, min_nrp=0.3, max_floored=0.4)
    assert outcome.lines == apart and len(apart) == 6
    assert reads == [guarded]
    api.check_gate(guarded, max_floored=0.4)  # floored alone reads it too
    assert reads == [guarded, guarded]


def test_max_floored_on_rankers_that_floor_nothing_is_refused(results, tmp_path, capsys):
    code, lines, err = check(capsys, results, "--max-floored", "0.5")
    assert (code, lines) == (2, [])
    assert err.startswith("nrp: error: results ") and "(rankers: tfidf)" in err
    assert "--max-flagged gates the flags of flags.csv" in err and len(err.splitlines()) == 1
    guarded = write_guarded(tmp_path / "guarded")
    code, _, err = check(capsys, guarded, "--max-floored", "1.5")
    assert code == 2
    assert "maximum share of answers a guard floored (--max-floored) must lie in [0, 1]" in err
    code, _, err = check(capsys, guarded, "--max-floored", "0.5", "--dimension", "clarity")
    assert code == 2 and "unknown dimension 'clarity'" in err
