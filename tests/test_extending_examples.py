"""The examples of docs/extending.md are real plug-ins: imported, they register a ranker, an
evaluator and an input format that work end to end on hand-made input and on the demo collection.

Hand-computed values: on demo topic d1 ("can vitamin c prevent colds", 5 distinct words) the
coverage ranker scores D_q 1.0 (one document), 0.8 (three), 0.6, 0.4, 0.2 and 0.0 (five). An
answer covering 4 of the 5 words has 1 document above and 3 tied: r = 1 + 3/2 = 2.5, NRP = 1 -
2.5/15; one covering none has 10 above and 5 tied: r = 10 + 5/2 = 12.5, NRP = 1 - 12.5/15.
"""

from __future__ import annotations

import importlib.util
import math
import shutil
import sys
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

from nrp import api
from nrp.collection.formats import read_format
from nrp.collection.formats import unregister as unregister_format
from nrp.components import component_spec
from nrp.errors import InputError
from nrp.evaluators.base import unregister as unregister_evaluator
from nrp.positioning.injection import POINTWISE, injection_mode
from nrp.rankers.registry import unregister as unregister_ranker

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
DEMO = resources.files("nrp") / "data" / "demo"


@pytest.fixture(scope="module", autouse=True)
def examples():
    """Import the three examples (each registers its component) and take them out again."""
    modules = {}
    for name in ("my_ranker", "my_evaluator", "my_format"):
        spec = importlib.util.spec_from_file_location(
            f"nrp_docs_examples.{name}", EXAMPLES / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    yield modules
    unregister_ranker("coverage")
    unregister_evaluator("ref_recall")
    unregister_format("question-lines")
    for module in modules.values():
        del sys.modules[module.__name__]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    indexes = tmp_path_factory.mktemp("indexes")
    api.ingest(DEMO / "manifest.yaml", indexes_dir=indexes)
    return api.Collection.load("demo", indexes)


# -- the ranker -------------------------------------------------------------------------------
def test_ranker_example_scores_rows_and_round_trips_its_spec():
    rows = pd.DataFrame(
        {
            "qid": ["q1"] * 3,
            "query": ["Fever in children"] * 3,
            "docno": ["a", "b", "c"],
            "text": ["A fever in young children", "fever IN adults", "nothing here"],
        }
    )
    ranked = api.make_ranker("coverage").transform(rows)
    assert ranked["score"].tolist() == [1.0, 2 / 3, 0.0]  # fever in children; fever in; -
    exact_case = api.make_ranker("coverage:lowercase=false")
    assert exact_case.transform(rows)["score"].tolist() == [2 / 3, 0.0, 0.0]  # "Fever" unmatched
    assert exact_case.spec() == "coverage:lowercase=False"
    assert "coverage" in api.all_rankers()
    shipped = component_spec(exact_case, api.all_rankers(), api.make_ranker)
    assert shipped == "coverage:lowercase=False"
    assert api.make_ranker(shipped).fingerprint() == exact_case.fingerprint()


def test_ranker_example_positions_answers_on_the_demo_collection(demo):
    ranker = api.make_ranker("coverage")
    assert injection_mode(ranker) == POINTWISE  # declared, not looked up by class
    d1 = demo.candidates("d1")
    assert sorted(ranker.transform(d1)["score"].round(6).tolist(), reverse=True) == [
        1.0, 0.8, 0.8, 0.8, 0.6, 0.6, 0.6, 0.6, 0.4, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0,
    ]  # fmt: skip
    answers = pd.DataFrame(
        {
            "answer_id": ["covers-4", "covers-0"],
            "qid": ["d1", "d1"],
            "text": ["Vitamin C does not prevent colds for most people.", "Rest and drink fluids."],
        }
    )
    result = api.score_answers(demo, answers, "coverage", cache=False)
    relevance = result[result["dimension"] == "relevance"].set_index("answer_id")
    assert relevance.loc["covers-4", ["rank", "ties", "n_docs"]].tolist() == [2.5, 3, 15]
    assert relevance.loc["covers-0", ["rank", "ties", "n_docs"]].tolist() == [12.5, 5, 15]
    assert relevance["nrp"].tolist() == pytest.approx([1 - 2.5 / 15, 1 - 12.5 / 15])


# -- the evaluator ----------------------------------------------------------------------------
def test_evaluator_example_on_hand_made_items():
    items = pd.DataFrame(
        {
            "answer_id": ["a", "b", "c"],
            "qid": ["q", "q", "q"],
            "question": ["does vitamin c prevent colds"] * 3,
            # words of 3+ letters: the reference has vitamin, does, not, prevent, colds
            "text": ["Vitamin C prevents no colds", "Colds: vitamin C does not prevent them", "x"],
            "references": [("Vitamin C does not prevent colds",)] * 2 + [()],
            "reference_kind": ["reference", "reference", ""],
            "contexts": [()] * 3,
        }
    )
    evaluator = api.make_evaluator("ref_recall")
    scores = evaluator.evaluate(items)["ref_recall"].tolist()
    assert scores[:2] == [2 / 5, 1.0]
    assert math.isnan(scores[2])  # no reference: missing, not 0
    assert api.make_evaluator("ref_recall:min_length=1").evaluate(items)["ref_recall"][0] == 3 / 6


def test_evaluator_example_on_the_demo_answers(demo):
    answers = pd.read_json(DEMO / "answers.jsonl", lines=True).head(1)
    table = api.evaluate_answers(demo, answers, "ref_recall:label=recall", cache=False)
    # demo-good/short-qa/d1/0 repeats 32 of the 81 distinct 3+ letter words of d1's reference
    assert table["recall.ref_recall"].tolist() == [32 / 81]
    assert table["reference_kind"].tolist() == ["reference"]


# -- the input format -------------------------------------------------------------------------
def test_format_example_reads_topics_and_reports_skipped_lines(tmp_path):
    path = tmp_path / "topics.txt"
    path.write_text("# two questions\nq1: can vitamin c prevent colds\n\nq2 :  what is a fever \n")
    topics, report = read_format("question-lines", path)
    assert [(t.qid, t.query, t.origin.line) for t in topics] == [
        ("q1", "can vitamin c prevent colds", 2),
        ("q2", "what is a fever", 4),
    ]
    assert report.counts == {"lines skipped: blank or comment": 2}  # the comment and line 3
    path.write_text("q1 | a question\n")
    assert [t.qid for t in read_format("question-lines", path, separator="|")[0]] == ["q1"]
    with pytest.raises(InputError, match=r"topics.txt:1: expected 'QID: question'"):
        read_format("question-lines", path)


def test_format_example_feeds_a_manifest(tmp_path):
    demo_topics = pd.read_csv(DEMO / "topics.tsv", sep="\t", dtype=str)
    lines = [f"{row.qid}: {row.query}" for row in demo_topics.itertuples()]
    (tmp_path / "topics.txt").write_text("\n".join(lines) + "\n")
    for name in ("documents.tsv", "qrels.tsv"):
        shutil.copy(DEMO / name, tmp_path / name)
    (tmp_path / "manifest.yaml").write_text(
        "name: demo-lines\ndescription: the demo with its topics as question lines\n"
        "citation: nrp tests\ndata_root: .\nrepeated_judgments: {policy: error}\n"
        "dimensions:\n"
        "  relevance: {description: relevant, grades: {0: no, 1: partly, 2: yes}}\n"
        "  readability: {description: readable, grades: {0: hard, 1: fair, 2: easy}}\n"
        "sources:\n"
        "  - {format: question-lines, path: topics.txt}\n"
        "  - {format: table, path: documents.tsv, holds: documents}\n"
        "  - {format: table, path: qrels.tsv, holds: judgments, "
        "dimensions: [relevance, readability]}\n"
    )
    api.ingest(tmp_path / "manifest.yaml", indexes_dir=tmp_path / "indexes")
    collection = api.Collection.load("demo-lines", tmp_path / "indexes")
    topics = collection.topics
    assert topics["qid"].tolist() == demo_topics["qid"].tolist()
    assert topics["query"].tolist() == demo_topics["query"].tolist()
    assert collection.candidates().groupby("qid").size().tolist() == [15] * 8
