"""Results as a notebook shows them: ``to_frame()`` gives each result's main table as a
DataFrame with the figures the text output prints, and ``_repr_html_`` renders that table."""

from __future__ import annotations

import pandas as pd
import pytest
from test_ingest import write_collection

import nrp


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("notebook")
    nrp.ingest(write_collection(root / "data"), indexes_dir=root / "ix")
    return nrp.Collection.load("tiny", root / "ix")


def test_validation_result_as_a_frame(tiny):
    result = nrp.validate(
        tiny, ["tfidf", "random"], dimensions=["relevance"], cache=False, validity=False
    )
    frame = result.to_frame()
    assert list(frame.columns) == [
        "dimension", "name", "measure", "mean", "ci_low", "ci_high", "queries", "chosen",
        "p_value", "p_corrected",
    ]  # fmt: skip
    assert len(frame) == 2 * 3  # two rankers x nDCG@10, AP, Bpref
    ndcg = frame[frame["measure"] == "nDCG@10"].set_index("name")
    summary = result.dimensions["relevance"].summary
    for system in ("tfidf", "random"):
        assert ndcg.loc[system, "mean"] == summary[system]["nDCG@10"].mean
        assert ndcg.loc[system, "queries"] == 2
    assert ndcg["chosen"].sum() == 1
    assert ndcg.loc[result.chosen()["relevance"], "chosen"]
    html = result._repr_html_()
    assert html.startswith("<table") and "nDCG@10" in html and "tfidf" in html


def test_agreement_and_meta_results_as_frames(tiny, tmp_path):
    agreement = nrp.agreement(tiny, ["tfidf"], dimensions=["relevance"], cache=False)
    frame = agreement.to_frame()
    assert frame.equals(agreement.summary) and frame is not agreement.summary
    assert "<table" in agreement._repr_html_()
    scores = tmp_path / "scores.csv"
    scores.write_text("qid,answer_id,metric\nq1,a,3\nq1,b,2\nq1,c,1\n")
    human = tmp_path / "human.csv"
    human.write_text("qid,answer_id,grade\nq1,a,2\nq1,b,0\nq1,c,1\n")
    run = nrp.meta_from_files(scores, human, system_column=None)
    table = run.to_frame()
    row = table[(table["score"] == "metric") & (table["dimension"] == "grade")].iloc[0]
    # pairs (a,b) concordant, (a,c) concordant, (b,c) discordant: tau = (2 - 1) / 3
    assert row["tau_mean"] == pytest.approx(1 / 3)
    assert isinstance(table, pd.DataFrame) and "metric" in run._repr_html_()


def test_progress_bars_show_in_a_terminal_or_a_notebook_kernel(monkeypatch):
    """tqdm.auto draws a widget in Jupyter, whose stderr is no terminal: bars are on there too,
    and off in logs (stderr neither a terminal nor in a kernel)."""
    import io
    import sys

    from nrp.models.device import interactive, progress

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    assert not interactive()
    assert progress(range(3), 3, "x").disable
    monkeypatch.setitem(sys.modules, "ipykernel", sys)  # a kernel is running
    assert interactive()
    bar = progress(range(3), 3, "x")
    assert not bar.disable and list(bar) == [0, 1, 2]
    assert progress(range(3), 3, "x", verbose=False).disable


def test_a_validation_result_chooses_the_rankers_of_score_answers(tiny):
    result = nrp.validate(tiny, ["tfidf", "random"], cache=False, validity=False)
    answers = pd.DataFrame(
        {"answer_id": ["a1"], "qid": ["q1"], "text": ["vitamin c colds"], "llm": ["m"]}
    )
    scored = nrp.score_answers(tiny, answers, result, cache=False)
    per_dimension = scored[scored["dimension"] != "weighted"]
    assert dict(zip(per_dimension["dimension"], per_dimension["ranker"], strict=True)) == (
        result.chosen()
    )
    from_file = nrp.score_answers(tiny, answers, result.chosen(), cache=False)
    assert scored["nrp"].tolist() == from_file["nrp"].tolist()


def test_top_level_names_read_like_the_commands(tmp_path):
    """nrp.ingest, nrp.validate, nrp.score, nrp.evaluate and nrp.run, as the CLI's commands are
    named; nrp meta as a call is nrp.meta_from_files (nrp.meta is the package, not callable)."""
    from nrp.experiments.run import run_experiment

    assert nrp.run is run_experiment
    for name in ("ingest", "validate", "score", "evaluate"):
        assert callable(getattr(nrp, name))
    scores = tmp_path / "scores.csv"
    scores.write_text("qid,answer_id,metric\nq1,a,3\nq1,b,2\nq1,c,1\n")
    human = tmp_path / "human.csv"
    human.write_text("qid,answer_id,grade\nq1,a,2\nq1,b,0\nq1,c,1\n")
    run = nrp.meta_from_files(scores, human, system_column=None)
    assert run.result.row("metric", "grade")["tau_mean"] == pytest.approx(1 / 3)
    assert nrp.meta.read_human.__module__ == "nrp.meta.human"  # the package
    assert not callable(nrp.meta)
