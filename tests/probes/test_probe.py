"""``nrp probe`` on the demo collection: the summary is the pairs' figures, a verbatim copy of
the best judged document gets the NRP computed by hand, and the command writes its tables and
figure, or one error line and nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import numpy as np
import pandas as pd
import pytest

import nrp
from nrp.probes.perturbations import perturb
from nrp.probes.probe import contexts

DEMO = resources.files("nrp") / "data" / "demo"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    indexes = tmp_path_factory.mktemp("probe-indexes")
    nrp.ingest(DEMO / "manifest.yaml", indexes_dir=indexes)
    return nrp.Collection.load("demo", indexes)


@pytest.fixture(scope="module")
def answers():
    return pd.read_json(DEMO / "answers.jsonl", lines=True, dtype={"qid": str})


@pytest.fixture(scope="module")
def probed(demo, answers):
    return nrp.probe(
        demo, answers, "bleu,nrp:rankers=tfidf", "negate,copy_best,echo_question",
        n_bootstrap=200, cache=False,
    )  # fmt: skip


def test_pairs_and_summary_agree_by_hand(probed, demo, answers):
    found = contexts(demo, answers, 0)
    applies = sum(
        perturb("negate", t, found[a]) is not None
        for a, t in zip(answers["answer_id"], answers["text"], strict=True)
    )
    row = probed.row("nrp.relevance", "negate")
    assert row["n_pairs"] == applies and row["n_not_applicable"] == len(answers) - applies
    pairs = probed.pairs
    for (score, name), group in pairs.groupby(["score", "perturbation"]):
        diff = group["perturbed"].to_numpy() - group["original"].to_numpy()
        summary = probed.row(score, name)
        assert summary["share_original_higher"] == pytest.approx(np.mean(diff < -1e-12))
        assert summary["share_ties"] == pytest.approx(np.mean(np.abs(diff) <= 1e-12))
        assert summary["mean_change"] == pytest.approx(diff.mean())
        assert summary["ci_low"] <= summary["share_original_higher"] <= summary["ci_high"]
    assert set(pairs["score"]) == {"bleu", "nrp.relevance", "nrp.readability", "nrp.weighted"}


def test_a_copy_of_the_best_document_gets_its_nrp(probed, demo, answers):
    """The copy_best twin of every answer is the query's best-graded judged document; its pair
    holds the NRP the library gives that text as an answer, and the copy ties the document."""
    copies = probed.pairs[
        (probed.pairs["perturbation"] == "copy_best") & (probed.pairs["score"] == "nrp.relevance")
    ]
    assert len(copies) == 64
    texts = probed.texts[probed.texts["answer_id"].str.endswith("~copy_best")]
    as_answers = texts.assign(answer_id=texts["answer_id"].str.replace("~copy_best", ""), llm="x")
    scored = nrp.score_answers(demo, as_answers, "tfidf", cache=False)
    relevance = scored[scored["dimension"] == "relevance"].set_index("answer_id")["nrp"]
    np.testing.assert_allclose(copies["perturbed"], copies["answer_id"].map(relevance))
    ties = scored[scored["dimension"] == "relevance"]["ties"]
    assert (ties >= 1).all()  # each copy ties at least the document it copies


def test_the_command_writes_tables_and_figure(demo, tmp_path):
    out = tmp_path / "probe"
    base = [sys.executable, "-m", "nrp", "probe", "demo", str(DEMO / "answers.jsonl"),
            "--evaluators", "bleu", "--indexes", str(demo.path.parent),
            "--bootstrap", "50"]  # fmt: skip
    proc = subprocess.run([*base, "--perturbations", "first_sentence,shuffle", "--out", str(out)],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "probe.json").read_text())
    assert [r["perturbation"] for r in data["summary"]] == ["first_sentence", "shuffle"]
    assert (out / "probe.png").stat().st_size > 0 and (out / "probe_pairs.csv").is_file()
    assert "first_sentence" in proc.stdout
    bad = subprocess.run([*base, "--perturbations", "nope", "--out", str(tmp_path / "bad")],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "unknown perturbation 'nope'" in bad.stderr and not (tmp_path / "bad").exists()


def test_entities_for_swapping_come_from_the_query_s_judged_documents(demo, answers):
    pytest.importorskip("spacy")
    from nrp.probes.entities import find_entities

    first = answers.head(1)
    found = contexts(demo, first, 0, with_entities=True)
    entities = next(iter(found.values())).entities
    # spaCy's small English model over the judged documents of the answer's query (its labels,
    # as it tags them): the same as finding them in those texts directly
    d_q = demo.judged_docs_for(str(first["qid"].iloc[0]))
    assert entities == find_entities(d_q["text"].astype(str).tolist())
    assert {label: len(values) for label, values in entities.items()} == {
        "DATE": 17, "GPE": 1, "NORP": 1, "ORG": 2, "PERSON": 1,
    }  # fmt: skip
    assert contexts(demo, first, 0)[first["answer_id"].iloc[0]].entities == {}


def test_a_judges_labels_are_also_read_as_a_true_score():
    from nrp.probes.probe import with_label_scores

    table = pd.DataFrame(
        {
            "answer_id": ["a", "b", "c", "d"],
            "tfn.judge.label": ["TRUE", "FALSE", None, "NOT GIVEN"],
            "tfn.judge.confidence": [0.9, 0.8, None, 0.4],
            "bleu": [1.0, 2.0, 3.0, 4.0],
        }
    )
    out = with_label_scores(table)
    assert out["tfn.judge.true"].tolist()[:2] == [1.0, 0.0]
    assert np.isnan(out["tfn.judge.true"][2]) and out["tfn.judge.true"][3] == 0.0
    assert "tfn.judge.true" not in table  # the input is not changed
    assert with_label_scores(table[["answer_id", "bleu"]]).columns.tolist() == ["answer_id", "bleu"]


SHARED_POOLS = {
    "manifest.yaml": "name: pools\ndata_root: .\ndimensions:\n  relevance:\n"
    "    grades: {0: wrong, 1: partial, 2: good}\nsources:\n"
    "  - {format: table, path: topics.tsv, holds: topics}\n"
    "  - {format: table, path: docs.tsv, holds: documents}\n"
    "  - {format: trec-qrels, path: rel.qrels, dimension: relevance}\n",
    "topics.tsv": "qid\tquery\nq1\tDoes ibuprofen raise blood pressure?\n"
    "q2\tIs ibuprofen bad for the kidneys?\nq3\tIs melatonin safe for children?\n",
    "docs.tsv": "docno\ttext\nd1\tIbuprofen makes the kidneys keep salt, so pressure rises.\n"
    "d2\tNSAIDs such as ibuprofen reduce blood flow to the kidneys.\n"
    "d3\tShort courses of melatonin appear safe for most children.\n",
    # d2 is q2's best and judged for q1 too: pools share documents
    "rel.qrels": "q1 0 d1 2\nq1 0 d2 1\nq2 0 d2 2\nq3 0 d3 2\n",
}


def test_another_query_s_best_document_is_not_one_judged_for_the_answer_s_own(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name, text in SHARED_POOLS.items():
        (data / name).write_text(text)
    nrp.ingest(data / "manifest.yaml", indexes_dir=tmp_path / "ix")
    pools = nrp.Collection.load("pools", tmp_path / "ix")
    answers = pd.DataFrame({"answer_id": ["a1", "a3"], "qid": ["q1", "q3"], "text": ["x", "y"]})
    d1, d2, d3 = (line.split("\t")[1] for line in SHARED_POOLS["docs.tsv"].splitlines()[1:])
    drawn = {"a1": set(), "a3": set()}
    for seed in range(8):
        found = contexts(pools, answers, seed)
        assert list(found["a1"].others) == [d2, d3] and list(found["a3"].others) == [d1, d2]
        for answer_id, context in found.items():
            drawn[answer_id].add(perturb("off_topic", "x", context))
    assert drawn == {"a1": {d3}, "a3": {d1, d2}}  # q2's best (d2) is judged for q1: never q1's
