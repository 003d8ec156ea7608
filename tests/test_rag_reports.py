"""Answers from RAG systems: TREC RAG 2024- and 2025-style report files (tests/rag_collection.py)
read as answers, scored with TF-IDF, their citations judged by the collection's judgments, the
TREC leaderboard read back by the track's own reader, nrp as an AutoJudge judge through the
track's runner, and bad report files as one-line errors with exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from rag_collection import (
    RUN_A,
    RUN_B,
    TOPICS,
    nltk_stand_in,
    write_collection,
    write_reports,
)

from nrp import api, engine, ingest
from nrp.answers import CITATIONS, REPORT_LAYOUTS, read_answers
from nrp.cli import main
from nrp.errors import ConfigError, InputError
from nrp.evaluators.autojudge import autojudge_module, report_topics

# hand values (see rag_collection.py): (run, topic) -> NRP, the same in every dimension
NRP = {("runA", "q1"): 1.0, ("runA", "q2"): 0.2, ("runB", "q1"): 0.125, ("runB", "q2"): 1.0}
RANKS = {("runA", "q1"): (0.0, 4, 0), ("runA", "q2"): (4.0, 5, 2),
         ("runB", "q1"): (3.5, 4, 1), ("runB", "q2"): (0.0, 5, 0)}  # fmt: skip
# (run, topic, dimension) -> n_cited, n_judged, n_unjudged, n_relevant, share, mean grade
CITED = {
    # runA q1 cites c1 (rel 2, cred 1), c3 (rel 0, cred 1), zz (in no collection)
    ("runA", "q1", "relevance"): (3, 2, 1, 1, 0.5, 1.0),
    ("runA", "q1", "credibility"): (3, 2, 1, 2, 1.0, 1.0),
    # runA q2 cites w4 (rel 0, cred 0)
    ("runA", "q2", "relevance"): (1, 1, 0, 0, 0.0, 0.0),
    ("runA", "q2", "credibility"): (1, 1, 0, 0, 0.0, 0.0),
    # runB q1 cites c3 (rel 0, cred 1), x1 (judged for q2 only), c4 (rel 0, no cred)
    ("runB", "q1", "relevance"): (3, 2, 1, 0, 0.0, 0.0),
    ("runB", "q1", "credibility"): (3, 1, 2, 1, 1.0, 1.0),
    # runB q2 cites w1 (rel 2, cred 1), w2 (rel 1, cred 1)
    ("runB", "q2", "relevance"): (2, 2, 0, 2, 1.0, 1.5),
    ("runB", "q2", "credibility"): (2, 2, 0, 2, 1.0, 1.0),
}
MEASURES = {
    "nrp_relevance": lambda run, topic: NRP[run, topic],
    "nrp_credibility": lambda run, topic: NRP[run, topic],
    "nrp_weighted": lambda run, topic: NRP[run, topic],
    **{
        f"{prefix}_{dim}": (lambda run, topic, d=dim, i=index: CITED[run, topic, d][i])
        for dim in ("relevance", "credibility")
        for prefix, index in (("cited_relevant", 4), ("cited_grade", 5))
    },
}


def expected_leaderboard() -> dict[tuple[str, str, str], float]:
    """(run, measure, topic) -> value, with ``all``: the mean over the two topics."""
    values = {}
    for run in ("runA", "runB"):
        for measure, value_of in MEASURES.items():
            per_topic = [value_of(run, topic) for topic in ("q1", "q2")]
            values.update(
                {(run, measure, t): v for t, v in zip(("q1", "q2"), per_topic, strict=True)}
            )
            values[run, measure, "all"] = sum(per_topic) / 2
    return values


@pytest.fixture(scope="module")
def autojudge(tmp_path_factory):
    """``autojudge_base``, imported with NLTK stand-in data where the real ones are missing
    (``nltk_stand_in``); NLTK's search path is restored after the import."""
    import nltk

    saved = list(nltk.data.path)
    stand_in = nltk_stand_in(tmp_path_factory.mktemp("nltk_data"))
    if stand_in is not None:
        nltk.data.path.insert(0, stand_in)
    try:
        yield autojudge_module()
    finally:
        nltk.data.path[:] = saved


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    root = tmp_path_factory.mktemp("rag-collection")
    ingest(write_collection(root / "data"), indexes_dir=root / "ix")
    return str(root / "ix")


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("reports") / "runs"
    write_reports(folder / "runA.jsonl", RUN_A)
    write_reports(folder / "runB.jsonl", RUN_B)
    return folder


@pytest.fixture(scope="module")
def scored(indexes, reports, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("scored") / "out"
    code = main(["score", "rag-tiny", str(reports), "--ranker", "tfidf", "--out", str(out),
                 "--indexes", indexes])  # fmt: skip
    assert code == 0
    return out


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_reports_read_as_answers(reports):
    answers = read_answers(reports).answers
    assert answers["answer_id"].tolist() == ["runA/q1", "runA/q2", "runB/q1", "runB/q2"]
    assert answers["llm"].tolist() == ["runA", "runA", "runB", "runB"]
    assert set(answers["prompt"]) == {"report"} and answers["sample"].tolist() == [0, 0, 0, 0]
    assert answers["text"].tolist() == [
        "Vitamin C may prevent colds in children. Vitamin C may prevent colds in children.",
        "Bicycles need chains.",
        "Oranges are tasty. Spring is mild. That is all.",
        "Adults drink water every day. Adults drink water every day.",
    ]
    # indices resolved through references; each document once, in citation order
    assert answers[CITATIONS].tolist() == [("c1", "c3", "zz"), ("w4",), ("c3", "x1", "c4"),
                                           ("w1", "w2")]  # fmt: skip


def guideline_2024(report: dict) -> dict:
    """A report of RUN_A or RUN_B as the TREC RAG 2024 guidelines write it: run_id and topic_id
    at the top level beside topic, references, response_length and answer (citations as indices
    into references: a doc id cited is added to references); no metadata."""
    meta = report["metadata"]
    references = list(report.get("references", []))

    def index(citation: int | str) -> int:
        if isinstance(citation, int):
            return citation
        if citation not in references:
            references.append(citation)
        return references.index(citation)

    answer = [{"text": s["text"], "citations": [index(c) for c in s["citations"]]}
              for s in report.get("answer") or report["responses"]]  # fmt: skip
    words = sum(len(s["text"].split()) for s in answer)
    topic = meta.get("narrative_id") or meta["topic_id"]
    return {"run_id": meta["run_id"], "topic_id": topic, "topic": "a question",
            "references": references, "response_length": words, "answer": answer}  # fmt: skip


def test_the_2024_guidelines_layout_is_read_as_the_metadata_one(tmp_path):
    flat = write_reports(tmp_path / "flat" / "runA.jsonl", [guideline_2024(r) for r in RUN_A])
    nested = write_reports(tmp_path / "nested" / "runA.jsonl", RUN_A)
    read = read_answers(flat)
    pd.testing.assert_frame_equal(read.answers, read_answers(nested).answers)
    assert read.report_layouts == {"2024": 2}
    assert read_answers(nested).report_layouts == {"2025": 2}  # metadata: by its shape
    assert read.layout_lines() == [
        "read 2 TREC RAG report(s) in the TREC RAG 2024 (run_id and topic_id at the top level; "
        "citations index references) layout"
    ]


def test_nrp_score_scores_the_2024_layout_and_says_which_layout_it_read(indexes, tmp_path, capsys):
    path = write_reports(tmp_path / "runA.jsonl", [guideline_2024(r) for r in RUN_A])
    both = write_reports(tmp_path / "both" / "runs.jsonl", [guideline_2024(RUN_A[0]), RUN_B[1]])
    code, _, err = run(capsys, "score", "rag-tiny", str(path), "--ranker", "tfidf", "--out",
                       str(tmp_path / "out"), "--indexes", indexes)  # fmt: skip
    assert code == 0 and "in the TREC RAG 2024 (run_id and topic_id at the top level" in err
    results = pd.read_csv(tmp_path / "out" / "results.csv", dtype={"qid": str})
    for row in results.itertuples():
        assert row.nrp == pytest.approx(NRP[row.llm, row.qid])
    cited = pd.read_csv(tmp_path / "out" / engine.CITATIONS_FILE, dtype={"qid": str})
    assert set(zip(cited["qid"], cited["n_cited"], strict=True)) == {("q1", 3), ("q2", 1)}
    code, _, err = run(capsys, "score", "rag-tiny", str(both), "--ranker", "tfidf", "--out",
                       str(tmp_path / "out-both"), "--indexes", indexes)  # fmt: skip
    assert code == 0 and "read 1 TREC RAG report(s) in the TREC RAG 2024" in err
    assert "read 1 TREC RAG report(s) in the TREC RAG 2025 / AutoJudge" in err


def test_report_citation_shapes():
    """2024 indices, 2025 doc ids, RAGTIME {doc: confidence} (highest first, ties in order)."""
    sentences = [{"text": "a", "citations": [1, "d9"]}, {"text": "b", "citations": None},
                 {"text": "c", "citations": {"d2": 10, "d3": 50, "d4": 10}}]  # fmt: skip
    assert engine.report_citations(sentences, ["d0", "d1"]) == ("d1", "d9", "d3", "d2", "d4")


def test_score_ranks_reports_and_judges_citations(scored):
    results = pd.read_csv(scored / "results.csv", dtype={"qid": str})
    for row in results.itertuples():
        assert row.nrp == pytest.approx(NRP[row.llm, row.qid])
        if row.dimension != "weighted":
            assert (row.rank, row.n_docs, row.ties) == RANKS[row.llm, row.qid]
    citations = engine.read_citations(scored / engine.CITATIONS_FILE)
    assert len(citations) == 8  # 4 answers x 2 dimensions
    for row in citations.itertuples():
        counts = (row.n_cited, row.n_judged, row.n_unjudged, row.n_relevant)
        assert counts == CITED[row.llm, row.qid, row.dimension][:4]
        assert row.share_relevant == pytest.approx(CITED[row.llm, row.qid, row.dimension][4])
        assert row.mean_grade == pytest.approx(CITED[row.llm, row.qid, row.dimension][5])


def test_leaderboard_reads_back_with_the_tracks_reader(scored, tmp_path, capsys, autojudge):
    path = tmp_path / "nrp.leaderboard"
    code, out, _ = run(capsys, "leaderboard", str(scored), "--out", str(path))
    assert code == 0 and "2 run(s), 7 measure(s)" in out
    lines = path.read_text().splitlines()
    assert lines[:2] == ["runA q1 nrp_relevance 1.0000", "runA q1 nrp_credibility 1.0000"]
    assert "runB all nrp_weighted 0.5625" in lines and lines[-1].startswith("runB all ")
    loaded = autojudge.Leaderboard.load(path, format="ir_measures")  # the runner's default
    read = {
        (e.run_id, m, e.topic_id): float(v) for e in loaded.entries for m, v in e.values.items()
    }
    expected = expected_leaderboard()
    assert read.keys() == expected.keys() and len(expected) == 2 * 7 * 3
    for key, value in expected.items():
        assert read[key] == pytest.approx(value), key
    assert read["runB", "nrp_weighted", "all"] == pytest.approx(0.5625)  # (0.125 + 1) / 2


def test_autojudge_runner_calls_nrp(indexes, reports, tmp_path, autojudge):
    from autojudge_base.judge_runner import run_judge

    responses = [r for f in sorted(reports.iterdir()) for r in autojudge.load_report(f)]
    topics = [autojudge.Request(request_id=q, title=q) for q in ("q1", "q2")]
    no_llm = autojudge.LlmConfigBase(model="none")  # the runner records it; nrp calls no LLM
    result = run_judge(
        auto_judge=api.NrpJudge(), rag_responses=responses, rag_topics=topics, llm_config=no_llm,
        judge_settings={"collection": "rag-tiny", "indexes": indexes, "ranker": "tfidf"},
        judge_output_path=tmp_path / "nrp", out_dir=tmp_path,
        judge_uses_nuggets=False, judge_uses_qrels=False,
    )  # fmt: skip
    values = {(e.run_id, m, e.topic_id): v for e in result.leaderboard.entries
              for m, v in e.values.items()}  # fmt: skip
    assert values == pytest.approx(expected_leaderboard())
    written = [p for p in tmp_path.iterdir() if p.is_file() and p.suffix != ".yml"]
    assert len(written) == 1  # the runner wrote the leaderboard
    loaded = autojudge.Leaderboard.load(written[0], format="ir_measures")  # its default
    assert {(e.run_id, e.topic_id) for e in loaded.entries} == {
        (run, topic) for run in ("runA", "runB") for topic in ("q1", "q2", "all")
    }
    # the runner's layout is nrp leaderboard's: run, topic, measure, value
    run_id, topic, measure, _ = written[0].read_text().split("\n")[0].split()
    assert run_id in ("runA", "runB") and topic in ("q1", "q2", "all")
    assert measure in MEASURES


def judge(capsys, reports: Path, out: Path, indexes: str) -> tuple[int, str, str]:
    """``nrp judge rag-tiny REPORTS --ranker tfidf --out OUT`` (no topics file)."""
    return run(capsys, "judge", "rag-tiny", str(reports), "--ranker", "tfidf", "--out", str(out),
               "--indexes", indexes)  # fmt: skip


@pytest.mark.parametrize("layout", ["2024", "2025"])
def test_nrp_judge_runs_the_tracks_runner_with_no_topics_file(
    indexes, reports, tmp_path, capsys, autojudge, layout
):
    if layout == "2024":  # both runs' files written as the TREC RAG 2024 guidelines show
        reports = tmp_path / "guidelines"
        for name, run_reports in (("runA", RUN_A), ("runB", RUN_B)):
            write_reports(reports / f"{name}.jsonl", [guideline_2024(r) for r in run_reports])
    out = tmp_path / "judged"
    code, said, err = judge(capsys, reports, out, indexes)
    assert code == 0, err
    assert f"read 4 TREC RAG report(s) in the {REPORT_LAYOUTS[layout]} layout" in err
    board = out / engine.LEADERBOARD_FILE
    assert said == (
        f"judged 4 report(s) (2 run(s), 2 topic(s)); wrote the leaderboard to {board}\n"
    )
    # the runner's own files, moved in at the end: nothing else, nothing aside left
    assert sorted(p.name for p in out.iterdir()) == [
        "nrp.config.yml", "nrp.eval.measures.yml", "nrp.eval.txt"
    ]  # fmt: skip
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    loaded = autojudge.Leaderboard.load(board, format="ir_measures")
    values = {(e.run_id, m, e.topic_id): float(v) for e in loaded.entries
              for m, v in e.values.items()}  # fmt: skip
    assert values == pytest.approx(expected_leaderboard())
    assert values["runB", "nrp_weighted", "all"] == pytest.approx(0.5625)


def test_report_topics_come_from_the_collection(indexes, autojudge):
    collection = api.Collection.load("rag-tiny", indexes)
    [topic] = report_topics(collection, ["q2", "q9"])
    assert isinstance(topic, autojudge.Request)
    assert (topic.request_id, topic.title, topic.collection_ids, topic.background) == (
        "q2", TOPICS["q2"], ["rag-tiny"], None
    )  # fmt: skip


def test_nrp_judge_unknown_topic_is_nrp_scores_line(indexes, tmp_path, capsys, autojudge):
    path = write_reports(tmp_path / "q9.jsonl", [RUN_A[0], {**RUN_B[0], "metadata": {
        "run_id": "runB", "topic_id": "q9"}}])  # fmt: skip
    out = tmp_path / "out"
    code, _, err = judge(capsys, path, out, indexes)
    assert code == 2 and not out.exists()
    assert err == (
        f"nrp: error: {path}:2: unknown qid 'q9': not a topic of the collection{SKIP_HINT}\n"
    )
    code, _, score_err = run(capsys, "score", "rag-tiny", str(path), "--ranker", "tfidf",
                             "--out", str(out), "--indexes", indexes)  # fmt: skip
    assert (code, score_err) == (2, err)
    # --skip-invalid: that report left out and listed; the rest judged
    code, _, err = run(capsys, "judge", "rag-tiny", str(path), "--ranker", "tfidf", "--out",
                       str(out), "--indexes", indexes, "--skip-invalid")  # fmt: skip
    assert code == 0 and f"skipped: {path}:2: unknown qid 'q9'" in err
    board = (out / engine.LEADERBOARD_FILE).read_text().splitlines()
    assert {tuple(line.split()[:2]) for line in board} == {("runA", "q1"), ("runA", "all")}


def test_nrp_judge_bad_reports_are_one_line_and_write_nothing(indexes, tmp_path, capsys, autojudge):
    for name, (records, problem) in BAD.items():
        path = write_reports(tmp_path / f"{name}.jsonl", records)
        code, _, err = judge(capsys, path, tmp_path / "out", indexes)
        assert (code, err) == (2, f"nrp: error: {path}{problem}\n"), name
    # a long-layout answer file beside the reports: the judge judges reports only
    folder = tmp_path / "mixed"
    write_reports(folder / "runA.jsonl", RUN_A)
    long = write_reports(folder / "zz_long.jsonl", [
        {"llm": "m", "prompt": "p", "qid": "q1", "text": "Vitamin C."}])  # fmt: skip
    code, _, err = judge(capsys, folder, tmp_path / "out", indexes)
    assert code == 2 and err == (
        f"nrp: error: {long}: not a TREC RAG report file (the judge judges reports: run_id and "
        "topic_id, in metadata or at the top level, and answer or responses)\n"
    )
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_nrp_judge_without_nltk_data_is_one_line(indexes, reports, monkeypatch, tmp_path, capsys):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    out = tmp_path / "out"
    code, _, err = judge(capsys, reports, out, indexes)
    assert code == 2 and not out.exists()
    assert err == (
        "nrp: error: autojudge_base needs NLTK data to be imported, and these are not installed: "
        "corpora/stopwords, tokenizers/punkt (run nltk.download('stopwords') and "
        "nltk.download('punkt') where the network allows, or point NLTK_DATA at a copy)\n"
    )


def test_without_nltk_data_the_judge_says_why(monkeypatch, tmp_path):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(ConfigError, match="corpora/stopwords, tokenizers/punkt"):
        autojudge_module()


def test_judge_settings_are_checked(indexes):
    with pytest.raises(ConfigError, match="needs the setting collection"):
        api.NrpJudge().judge(rag_responses=[])
    with pytest.raises(ConfigError, match="no setting 'rankers'"):
        api.NrpJudge(collection="rag-tiny", rankers="tfidf")
    # issue 60, item 8: a TypeError deep inside, and "no" taken as true, before
    for bad, message in [
        ({"ranker": 5}, "setting ranker must be a ranker spec, a validation JSON, or a mapping "
         "of dimension to either, not int 5"),
        ({"ranker": {"relevance": 5}}, "setting ranker must be"),
        ({"skip_invalid": "no"}, "setting skip_invalid must be true or false, not str 'no'"),
        ({"weights": {"relevance": "1"}}, "setting weights must be a mapping of dimension to a "
         "number"),
        ({"collection": ["rag-tiny"]}, "setting collection must be the name of an ingested"),
    ]:  # fmt: skip
        with pytest.raises(ConfigError, match=re.escape(message)):
            api.NrpJudge(**{"collection": "rag-tiny", **bad})
        with pytest.raises(ConfigError, match=re.escape(message)):  # given to judge() alike
            api.NrpJudge().judge(rag_responses=[], **bad)
    assert api.NrpJudge(collection="rag-tiny", ranker={"relevance": "tfidf"}, skip_invalid=False)


def test_report_without_citations_writes_no_citations_file(indexes, tmp_path):
    report = {"metadata": {"run_id": "plain", "topic_id": "q1"},
              "answer": [{"text": "Vitamin C.", "citations": []}]}  # fmt: skip
    path = write_reports(tmp_path / "plain.jsonl", [report])
    code = main(["score", "rag-tiny", str(path), "--ranker", "tfidf", "--out",
                 str(tmp_path / "out"), "--indexes", indexes])  # fmt: skip
    assert code == 0 and not (tmp_path / "out" / engine.CITATIONS_FILE).exists()


#: what the CLI adds to the error of a report whose values cannot be read (skippable)
SKIP_HINT = " (--skip-invalid leaves such rows out, and lists them)"
BAD = {
    "missing_metadata": (
        [RUN_B[0], {"responses": [{"text": "x", "citations": []}]}],
        ":2: a TREC RAG report needs run_id and topic_id: in a metadata object (2025 layout) or "
        "at the top level (2024 layout); found neither",
    ),
    "metadata_not_an_object": (
        [{**RUN_B[0], "metadata": ["runB", "q1"]}],
        ":1: a TREC RAG report's metadata must be an object (found: list)",
    ),
    "2024_without_topic": (
        [{"run_id": "r", "references": [], "answer": [{"text": "x", "citations": []}]}],
        ":1: the report has no topic_id or narrative_id" + SKIP_HINT,
    ),
    "index_out_of_range": (
        [{**RUN_A[0], "references": ["c1", "c3"]}],
        ":1: sentence 2: citation index 2 is out of range (references has 2 entries)" + SKIP_HINT,
    ),
    "topic_ids_differ": (
        [{**RUN_B[0], "metadata": {"run_id": "r", "topic_id": "q1", "narrative_id": "q2"}}],
        ":1: metadata.topic_id 'q1' and narrative_id 'q2' differ" + SKIP_HINT,
    ),
    "no_sentences": (
        [{"metadata": {"run_id": "r", "topic_id": "q1"}, "references": []}],
        ":1: a TREC RAG report needs its sentences as answer or responses",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_report_is_one_line_exit_2(indexes, tmp_path, capsys, name):
    records, problem = BAD[name]
    path = write_reports(tmp_path / f"{name}.jsonl", records)
    out = tmp_path / "out"
    code, _, err = run(capsys, "score", "rag-tiny", str(path), "--ranker", "tfidf",
                       "--out", str(out), "--indexes", indexes)  # fmt: skip
    assert code == 2 and err == f"nrp: error: {path}{problem}\n"
    assert not out.exists()  # nothing half-written


def test_report_line_not_json_is_one_line_exit_2(indexes, tmp_path, capsys):
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(RUN_A[0]) + "\n" + '{"metadata": {"run_id": \n')
    code, _, err = run(capsys, "score", "rag-tiny", str(path), "--ranker", "tfidf",
                       "--out", str(tmp_path / "out"), "--indexes", indexes)  # fmt: skip
    assert code == 2 and err.startswith(f"nrp: error: {path}:2: ") and err.count("\n") == 1


def test_skip_invalid_lists_the_bad_report(tmp_path):
    bad = {**RUN_A[1], "references": []}
    path = write_reports(tmp_path / "some_bad.jsonl", [RUN_A[0], bad])
    answer_set = read_answers(path, ["q1", "q2"], skip_invalid=True)
    assert answer_set.answers["answer_id"].tolist() == ["runA/q1"]
    [skipped] = answer_set.skipped
    assert (skipped.line, skipped.kind, skipped.llm) == (2, "invalid_citation", "runA")
    with pytest.raises(InputError, match="references has 0 entries"):
        read_answers(path)


def test_leaderboard_refuses_a_run_id_with_whitespace(scored, tmp_path, capsys):
    results = pd.read_csv(scored / "results.csv", dtype={"qid": str})
    results["llm"] = results["llm"].replace("runB", "run B")
    folder = tmp_path / "spaced"
    folder.mkdir()
    results.to_csv(folder / "results.csv", index=False)
    out = tmp_path / "board"
    code, _, err = run(capsys, "leaderboard", str(folder), "--out", str(out))
    assert code == 2 and not out.exists()
    assert err == (
        "nrp: error: cannot write a TREC leaderboard: run_id 'run B' is empty or holds "
        "whitespace (the file's columns are whitespace separated)\n"
    )
