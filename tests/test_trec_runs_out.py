"""TREC runs out: ``nrp validate --save-runs DIR`` (each ranker's ranking of D_q) and ``nrp score
--trec DIR`` (D_q with each answer injected), read back with PyTerrier and checked against what
validation and NRP computed; bad folders are one-line errors with nothing written."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from importlib import resources

import ir_measures
import pandas as pd
import pyterrier as pt
import pytest

from nrp import Collection, ingest
from nrp.api import make_ranker, score_answers, validate
from nrp.errors import InputError, NrpError
from nrp.validation.runs import read_run

DEMO = resources.files("nrp") / "data" / "demo"
RANKERS = ["tfidf", "bm25:stats=collection", "random"]


def nrp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nrp", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    ix = tmp_path_factory.mktemp("ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    return ix


def index_of(folder) -> pd.DataFrame:
    return pd.read_csv(folder / "runs.tsv", sep="\t", dtype=str, keep_default_na=False)


def assert_trec_order(run: pd.DataFrame) -> None:
    """Ranks 1..n per query, in score order, ties by docno descending (trec_eval's order)."""
    for _, group in run.groupby("qid", sort=False):
        assert group["rank"].tolist() == list(range(1, len(group) + 1))
        rows = list(zip(group["score"], group["docno"], strict=True))
        for (score, docno), (next_score, next_docno) in itertools.pairwise(rows):
            assert score > next_score or (score == next_score and docno > next_docno)


def scores_of(frame: pd.DataFrame) -> dict[tuple[str, str], float]:
    return dict(zip(zip(frame["qid"], frame["docno"], strict=True), frame["score"], strict=True))


def test_save_runs_read_back_as_validation_ranked_and_scored(demo, tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "validation.json"
    proc = nrp("validate", "demo", "--rankers", ",".join(RANKERS), "--indexes", str(demo),
               "--save-runs", str(runs), "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    index = index_of(runs)
    assert index["file"].tolist() == ["tfidf.run", "bm25_stats=collection.run", "random.run"]
    assert index["tag"].tolist() == index["spec"].tolist() == RANKERS
    assert index["rows"].tolist() == ["120"] * 3 and index["queries"].tolist() == ["8"] * 3
    assert sorted(p.name for p in runs.iterdir()) == sorted([*index["file"], "runs.tsv"])
    collection = Collection.load("demo", demo)
    candidates = collection.candidates()
    result = json.loads(out.read_text())
    for spec, file in zip(RANKERS, index["file"], strict=True):
        run = pt.io.read_results(str(runs / file))
        assert set(run["name"]) == {spec}
        assert_trec_order(run)
        assert read_run(runs / file).warnings == []  # ranks agree with scores
        ranker = make_ranker(spec)
        ranker.bind_collection(collection)
        assert scores_of(run) == scores_of(ranker.transform(candidates))  # exactly, every D_q
        for dimension in ("relevance", "readability"):
            # validation's qrels scope: the judgments of D_q (d8-16, d8-17 have no text)
            qrels = collection.qrels(dimension).merge(candidates[["qid", "docno"]])
            qrels = qrels.rename(columns={"qid": "query_id", "docno": "doc_id",
                                          "label": "relevance"})  # fmt: skip
            frame = run.rename(columns={"qid": "query_id", "docno": "doc_id"})
            found = {
                m.query_id: m.value
                for m in ir_measures.pytrec_eval.iter_calc([ir_measures.nDCG @ 10], qrels, frame)
            }
            expected = result["dimensions"][dimension]["per_query"][spec]["nDCG@10"]
            assert expected and {q: found[q] for q in expected} == expected


def test_save_runs_replaces_its_own_folder_and_refuses_any_other(demo, tmp_path):
    collection = Collection.load("demo", demo)
    runs = tmp_path / "runs"
    validate(collection, "tfidf,random", save_runs=runs, cache=False, validity=False)
    assert sorted(p.name for p in runs.iterdir()) == ["random.run", "runs.tsv", "tfidf.run"]
    validate(collection, "bm25", save_runs=runs, cache=False, random_control=False)
    assert sorted(p.name for p in runs.iterdir()) == ["bm25.run", "runs.tsv"]  # replaced

    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("mine")
    with pytest.raises(InputError) as caught:
        validate(collection, "tfidf", save_runs=in_the_way, cache=False)
    assert str(caught.value) == f"{in_the_way}: a file is in the way: runs are written to a folder"
    assert in_the_way.read_text() == "mine"

    other, out = tmp_path / "other", tmp_path / "never.json"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    proc = nrp("validate", "demo", "--rankers", "tfidf", "--indexes", str(demo),
               "--save-runs", str(other), "--out", str(out))  # fmt: skip
    assert (proc.returncode, proc.stderr) == (
        2,
        f"nrp: error: {other}: folder is not empty and holds files no runs.tsv of nrp lists; "
        "give a new or empty folder (a run folder nrp wrote is replaced) (given as --save-runs)\n",
    )
    assert not out.exists()
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def test_score_trec_writes_each_injected_ranking(demo, tmp_path):
    out, trec = tmp_path / "results", tmp_path / "trec"
    proc = nrp("score", "demo", str(DEMO / "answers.jsonl"), "--ranker", "relevance=tfidf",
               "--ranker", "readability=bm25:stats=collection", "--out", str(out),
               "--trec", str(trec), "--indexes", str(demo))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = pd.read_parquet(out / "results.parquet")
    answers = pd.read_json(DEMO / "answers.jsonl", lines=True)
    index = index_of(trec)
    runs = answers.groupby(["llm", "prompt", "sample"]).size()
    assert len(index) == 2 * len(runs) == 16  # (2 LLMs x 2 prompts x 2 samples) per dimension
    assert set(index["file"]) == {
        f"{dimension}/{llm}__{prompt}__{sample}.run"
        for dimension in ("relevance", "readability")
        for llm, prompt, sample in runs.index
    }
    collection = Collection.load("demo", demo)
    candidates = collection.candidates()
    tfidf, bm25 = make_ranker("tfidf"), make_ranker("bm25:stats=collection")
    tfidf.bind_collection(collection)
    bm25.bind_collection(collection)
    base = scores_of(bm25.transform(candidates))
    for row in index.itertuples():
        run = pt.io.read_results(str(trec / row.file))
        assert set(run["name"]) == {f"{row.llm}/{row.prompt}/{row.sample}"}
        assert_trec_order(run)
        mine = answers[(answers["llm"] == row.llm) & (answers["prompt"] == row.prompt)
                       & (answers["sample"] == int(row.sample))]  # fmt: skip
        for answer in mine.itertuples():
            ranking = run[run["qid"] == answer.qid]
            d_q = candidates[candidates["qid"] == answer.qid]
            assert sorted(ranking["docno"]) == sorted([*d_q["docno"], answer.answer_id])
            got = scores_of(ranking)
            score = got.pop((answer.qid, answer.answer_id))
            nrp_row = results[(results["answer_id"] == answer.answer_id)
                              & (results["dimension"] == row.dimension)].iloc[0]  # fmt: skip
            assert score == nrp_row["score"]
            above = sum(s > score for s in got.values())
            ties = sum(s == score for s in got.values())
            assert (ties, above + ties / 2) == (nrp_row["ties"], nrp_row["rank"])  # mid rule
            if row.dimension == "readability":  # frozen statistics: D_q as scored alone
                assert got == {k: base[k] for k in got}
            else:  # statistics with the answer counted: as a fresh re-ranking of D_q + answer
                both = pd.concat(
                    [
                        d_q,
                        pd.DataFrame(
                            {
                                "qid": [answer.qid],
                                "query": [d_q["query"].iloc[0]],
                                "docno": [answer.answer_id],
                                "text": [answer.text],
                            }
                        ),
                    ]
                )
                assert scores_of(ranking) == scores_of(tfidf.transform(both))  # fmt: skip


def test_score_trec_refuses_what_a_run_cannot_hold_before_any_work(demo, tmp_path):
    collection = Collection.load("demo", demo)
    spaced = pd.DataFrame(
        {"answer_id": ["a b"], "llm": ["m"], "prompt": ["p"], "qid": ["d1"], "text": ["C."]}
    )
    trec = tmp_path / "trec"
    with pytest.raises(NrpError) as caught:
        score_answers(collection, spaced, "tfidf", trec=trec, cache=False)
    assert str(caught.value) == (
        "answer id 'a b' cannot be written to a TREC run (empty or whitespace)"
    )
    assert not trec.exists()

    rows = [
        {"answer_id": "x", "llm": "m", "prompt": "p", "qid": "d1", "sample": 0, "text": "C."},
        {"answer_id": "y", "llm": "m", "prompt": "p", "qid": "d1", "sample": 0, "text": "No."},
    ]
    answers, out = tmp_path / "answers.jsonl", tmp_path / "results"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = nrp("score", "demo", str(answers), "--ranker", "tfidf", "--out", str(out),
               "--trec", str(trec), "--indexes", str(demo))  # fmt: skip
    assert (proc.returncode, proc.stderr) == (
        2,
        "nrp: error: answers x, y are both llm 'm', prompt 'p', sample 0 for query 'd1': a TREC "
        "run holds one answer per query\n",
    )
    assert not out.exists() and not trec.exists()


@pytest.mark.parametrize("spec", ["tfidf", "random", "bm25:stats=collection"])
def test_injected_rankings_of_the_fast_and_the_reference_mode_are_the_same_files(
    demo, tmp_path, spec
):
    """The rankings kept in each injection mode (here: lexical statistics recomputed, pointwise,
    frozen statistics) are those a full re-ranking of D_q plus the answer gives, file for file."""
    collection = Collection.load("demo", demo)
    answers = pd.read_json(DEMO / "answers.jsonl", lines=True).head(16)
    files = {}
    for mode, full in (("fast", False), ("full", True)):
        found = score_answers(collection, answers, spec, trec=tmp_path / mode, full_rerank=full)
        assert found.attrs["injection"][spec].split(": ")[1].startswith(mode)
        files[mode] = {p.relative_to(tmp_path / mode): p.read_text() for p in
                       (tmp_path / mode).rglob("*.run")}  # fmt: skip
    assert len(files["fast"]) == 2 * 8  # 2 dimensions x (2 LLMs x 2 prompts x 2 samples)
    assert files["fast"] == files["full"]
