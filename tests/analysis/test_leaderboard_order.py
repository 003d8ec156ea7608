"""The leaderboard's runs best first by the weighted NRP over all topics, values as trec_eval
prints them, on a hand-made results frame."""

from __future__ import annotations

import pandas as pd

from nrp.analysis.leaderboard import leaderboard, write_leaderboard


def frame(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    """(llm, qid, nrp) rows, one dimension and its weighted row each."""
    records = []
    for n, (llm, qid, nrp) in enumerate(rows):
        for dimension, ranker in (("relevance", "bm25"), ("weighted", "")):
            records.append(
                {"answer_id": f"{llm}/{qid}/{n}", "llm": llm, "prompt": "p", "qid": qid,
                 "sample": n, "dimension": dimension, "ranker": ranker, "nrp": nrp}
            )  # fmt: skip
    return pd.DataFrame(records)


def test_runs_are_ranked_best_first_and_values_rounded(tmp_path):
    # weak first in the file (0.1, 0.3 -> 0.2), strong second (0.6, 0.8 -> 0.7), tied third (0.2)
    results = frame([("weak", "q1", 0.1), ("weak", "q2", 0.3), ("strong", "q1", 0.6),
                     ("strong", "q2", 0.8), ("tied", "q1", 0.2), ("tied", "q2", 0.2)])  # fmt: skip
    table = leaderboard(results)
    assert list(dict.fromkeys(table["run_id"])) == ["strong", "weak", "tied"]  # ties: as read
    path = write_leaderboard(table, tmp_path / "board.txt")
    lines = path.read_text().splitlines()
    assert lines[:3] == [
        "strong q1 nrp_relevance 0.6000",
        "strong q1 nrp_weighted 0.6000",
        "strong q2 nrp_relevance 0.8000",
    ]
    assert "strong all nrp_weighted 0.7000" in lines  # 0.7 of two floats, rounded as printed
    assert lines[-1] == "tied all nrp_weighted 0.2000"
