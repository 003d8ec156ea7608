"""scripts/studies/tune_guard.py: the measures it chooses the guard's scoring parameters by,
worked out by hand (pairs won by the relevant judged documents, ties half; per-question tau-b)."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "studies" / "tune_guard.py"
tune_guard = SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="tune_guard"))


def rows() -> pd.DataFrame:
    # q1: three judged documents (grades 2, 1, 0) and two texts; q2: one relevant document
    return pd.DataFrame(
        {"qid": ["q1", "q1", "q1", "q1", "q1", "q2", "q2"],
         "docno": ["d1", "d2", "d3", "t1", "t2", "e1", "t3"],
         "kind": ["judged", "judged", "judged", "echo", "spliced", "judged", "echo"]}
    )  # fmt: skip


SCORES = np.array([0.9, 0.5, 0.7, 0.5, 1.0, 0.3, 0.1])
GRADES = pd.Series([2, 1, 0, np.nan, np.nan, 1, np.nan], dtype=float)


def test_pairs_won_by_the_relevant_documents_ties_half_mean_over_questions():
    relevant = (rows()["kind"] == "judged") & (GRADES >= 1)
    wins = tune_guard.kind_wins(rows(), SCORES, relevant)
    # q1's relevant documents score 0.9 and 0.5: the echo (0.5) loses to 0.9 and ties 0.5 ->
    # (1 + 0.5) / 2; the spliced text (1.0) beats both -> 0; q2's echo (0.1) loses to 0.3 -> 1;
    # echo over the two questions: (0.75 + 1) / 2
    assert wins.to_dict() == {"echo": 0.875, "spliced": 0.0}


def test_tau_b_per_question_with_two_grades_or_more():
    # q1: scores 0.9, 0.5, 0.7 against grades 2, 1, 0: pairs (2,1) concordant, (2,0)
    # concordant, (1,0) discordant -> (2 - 1) / 3; q2 has one grade and is left out
    assert tune_guard.mean_tau(rows(), SCORES, GRADES) == pytest.approx(1 / 3)


def test_choose_content_at_the_peak_then_the_broadest_quoted_that_costs_nothing():
    table = pd.DataFrame(
        {"quoted": [0.0, 0.0, 0.0, 0.3, 0.3, 0.5, 0.5],
         "content": [0.0, 0.04, 0.08, 0.04, 0.08, 0.04, 0.08],
         "tau_b": [0.50, 0.62, 0.61, 0.618, 0.70, 0.60, 0.61],
         "fitting_wins": [0.99, 0.99, 0.99, 0.986, 0.99, 0.99, 0.99]}
    )  # fmt: skip
    best, base = tune_guard.choose(table)
    # content 0.04 has the highest tau-b at quoted 0 (0.62); at 0.04, quoted 0.3 keeps tau-b
    # (0.618 >= 0.62 - 0.005) and fitting wins (0.986 >= 0.99 - 0.005) -> 0.3, the smallest
    # share above 0 that keeps both (0.08's 0.70 at 0.3 is another content: not compared)
    assert (base["quoted"], base["content"]) == (0.0, 0.04)
    assert (best["quoted"], best["content"]) == (0.3, 0.04)
    # fitting wins beyond the tolerance at 0.3 (0.98 < 0.985), and 0.5's tau-b 0.60 is 0.02
    # below: none keeps both, so the base itself
    table.loc[3, "fitting_wins"] = 0.98
    best, _ = tune_guard.choose(table)
    assert (best["quoted"], best["content"]) == (0.0, 0.04)


def test_choose_content_alone_when_one_quoted_is_measured():
    table = pd.DataFrame(
        {"quoted": [0.3, 0.3, 0.3], "content": [0.0, 0.02, 0.04],
         "tau_b": [0.55, 0.58, 0.57], "fitting_wins": [0.99, 0.99, 0.99]}
    )  # fmt: skip
    best, base = tune_guard.choose(table)
    assert (best["quoted"], best["content"]) == (0.3, 0.02)
    assert best.equals(base)


def test_it_takes_every_option_the_fitting_rows_read_and_refuses_bad_ones(capsys):
    # fitting_rows (nrp.training.guard_data) reads these; tune_guard once lacked the written
    # replies' two and ended in an AttributeError before measuring anything
    args = vars(tune_guard.arguments([]))
    assert {k: args[k] for k in ("per_kind", "seed", "boilerplate_questions", "written_tokens",
                                 "written_llm", "near_best")} == {
        "per_kind": 2, "seed": 0, "boilerplate_questions": 5, "written_tokens": 96,
        "written_llm": "local", "near_best": 0}  # fmt: skip
    assert tune_guard.main(["--written-tokens", "0"]) == 2
    assert capsys.readouterr().err == (
        "tune_guard: guard training: written_tokens must be at least 1, got 0\n"
    )
    assert tune_guard.main(["--near-best", "-1"]) == 2
    assert capsys.readouterr().err == (
        "tune_guard: guard training: near_best must be at least 0, got -1\n"
    )


def test_the_fitting_wins_leave_out_the_held_out_kinds_incomplete_answers_and_the_llms_answers():
    per_kind = pd.Series({"echo": 1.0, "evasive": 0.9, "first_sentence": 0.3,
                          "llm_answer:short-qa": 0.4, "written:stall": 0.95})  # fmt: skip
    rows = pd.DataFrame(
        {"kind": ["echo", "evasive", "first_sentence", "llm_answer:short-qa", "written:stall"],
         "family": ["mirror", "evasion", "damaged", "llm_answer", "written"]}
    )  # fmt: skip
    fitting = tune_guard.fitting_kinds(per_kind, rows, {"evasive", "padded"})
    # echo and the written non-answer: (1.0 + 0.95) / 2
    assert fitting.to_dict() == {"echo": 1.0, "written:stall": 0.95}
    assert fitting.mean() == pytest.approx(0.975)
