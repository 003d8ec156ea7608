"""The review library: store, assignment, export to nrp meta's files, Label Studio, agreement.

Every number is computed by hand in the test's docstring from the worked example of
``review_project.STUDY_REVIEWS`` (two reviewers, alice and bob, each reviewing every item).
"""

from __future__ import annotations

import json
import sqlite3
import xml.dom.minidom
from importlib import resources

import pandas as pd
import pytest
from review_project import STUDY_REVIEWS, study_project

from nrp import api
from nrp.cli import main
from nrp.errors import ConfigError, InputError
from nrp.meta.annotators import krippendorff_alpha, pairwise_kendall_tau
from nrp.meta.readers import read_table
from nrp.meta.report import meta_from_files
from nrp.review.create import verify_items
from nrp.review.desk import NotAssigned, ReviewDesk
from nrp.review.labelstudio import import_reviews, read_label_studio, to_label_studio
from nrp.review.project import ReviewProject
from nrp.review.store import ReviewStore, StaleVersion


# -- store ---------------------------------------------------------------------------------
def test_saves_are_versioned_idempotent_and_optimistically_locked(tmp_path):
    store = ReviewStore(tmp_path / "r.sqlite")
    first = store.save("i1", "alice", {"label": "TRUE"}, 0, "s1")
    assert first.version == 1
    # the same save id again (a retry after a lost answer): the first result, nothing new
    again = store.save("i1", "alice", {"label": "TRUE"}, 0, "s1")
    assert again.version == 1
    assert store.get("i1", "alice").value == {"label": "TRUE"}
    # a save based on version 0 after version 1 exists: refused with the current value
    with pytest.raises(StaleVersion) as stale:
        store.save("i1", "alice", {"label": "FALSE"}, 0, "s2")
    assert (stale.value.current.value, stale.value.current.version) == ({"label": "TRUE"}, 1)
    assert store.save("i1", "alice", {"label": "FALSE"}, 1, "s3").version == 2
    # another reviewer's review of the same item has its own version
    assert store.save("i1", "bob", {"label": "TRUE"}, 0, "s4").version == 1
    assert [(r.reviewer, r.version) for r in store.reviews()] == [("alice", 2), ("bob", 1)]
    assert store.save_ids() == {"s1", "s3", "s4"}
    with sqlite3.connect(tmp_path / "r.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_each_item_goes_to_n_reviewers_in_turn():
    """7 items, 3 reviewers, 2 reviews per item: item i goes to reviewers i and i+1 (mod 3),
    so alice gets items 0, 2, 3, 5, 6; bob 0, 1, 3, 4, 6; carol 1, 2, 4, 5."""
    project = study_project(("alice", "bob", "carol"), 2)
    ids = [item.id for item in project.items]
    assert [ids.index(i.id) for i in project.assigned("alice")] == [0, 2, 3, 5, 6]
    assert [ids.index(i.id) for i in project.assigned("bob")] == [0, 1, 3, 4, 6]
    assert [ids.index(i.id) for i in project.assigned("carol")] == [1, 2, 4, 5]
    assert project.reviewers_of("rank:q2") == ("bob", "carol")


def test_values_are_checked_against_their_item(tmp_path):
    desk = ReviewDesk(study_project(("alice", "bob"), 1), ReviewStore(tmp_path / "r.sqlite"))
    with pytest.raises(InputError, match="ranking must hold each of c1, c2, c3, c4 once"):
        desk.save("alice", "rank:q1", {"ranking": [["c1"], ["c2", "c3"]]}, 0, "x")
    with pytest.raises(InputError, match=r"relevance label '3' is not one of \['0', '1', '2'\]"):
        desk.save("bob", "grade:a2", {"labels": {"relevance": "3"}}, 0, "x")
    with pytest.raises(InputError, match="label 'MAYBE' is not one of"):
        desk.save("bob", "verify:a1", {"label": "MAYBE"}, 0, "x")
    with pytest.raises(NotAssigned):  # rank:q2 is bob's alone with one review per item
        desk.save("alice", "rank:q2", {"ranking": [["c1"], ["c2"], ["c3"]]}, 0, "x")
    assert desk.store.reviews() == []


def test_progress_counts_a_grade_done_when_every_dimension_has_a_label(study):
    study.store.save("grade:a1", "alice", {"labels": {}}, 1, "clear")
    rows = {row["reviewer"]: row for row in study.progress()}
    assert rows["alice"]["done"] == 6 and rows["alice"]["assigned"] == 7
    assert rows["alice"]["grade"] == {"assigned": 3, "done": 2}
    assert rows["bob"]["done"] == 7


# -- export ----------------------------------------------------------------------------------
def test_export_writes_the_human_files_of_nrp_meta(study, tmp_path):
    written = study.export_human(tmp_path / "out")
    names = sorted(p.name for p in written)
    assert names == [
        "agreement.json", "grades.alice.csv", "grades.bob.csv", "grades.csv",
        "rankings.alice.jsonl", "rankings.bob.jsonl", "verify.alice.csv", "verify.bob.csv",
        "verify.csv",
    ]  # fmt: skip
    out = tmp_path / "out"
    assert (out / "rankings.alice.jsonl").read_text() == (
        '{"qid": "q1", "ranking": ["a2", ["a1", "a3"], "d9"]}\n'
        '{"qid": "q2", "ranking": ["b3", "b1", "b2"]}\n'
    )
    assert (out / "rankings.bob.jsonl").read_text() == (
        '{"qid": "q1", "ranking": ["a2", "a1", "a3", "d9"]}\n'
        '{"qid": "q2", "ranking": ["b1", "b3", "b2"]}\n'
    )
    assert (
        out / "grades.alice.csv"
    ).read_text() == "answer_id,qid,relevance\na1,q1,2\na2,q1,1\na3,q1,0\n"
    # the mean over reviewers: a2 is 1 (alice) and 2 (bob)
    assert (
        out / "grades.csv"
    ).read_text() == "answer_id,qid,relevance\na1,q1,2.0\na2,q1,1.5\na3,q1,0.0\n"
    # a1: both TRUE; a2: FALSE against NOT GIVEN, a tie: no majority
    assert (out / "verify.csv").read_text() == "answer_id,qid,label\na1,q1,TRUE\na2,q1,\n"


def test_agreement_of_the_worked_example(study):
    """Grades (relevance): units [2, 2], [1, 2], [0, 0]. Coincidences o22 = 2, o12 = o21 = 1,
    o00 = 2; n0 = 2, n1 = 1, n2 = 3, n = 6. Ordinal distances: d01 = (n0 + n1 - (n0 + n1)/2)^2
    = 1.5^2 = 2.25, d12 = (1 + 3 - 2)^2 = 4, d02 = (6 - 2.5)^2 = 12.25. Observed sum o d = 2 x 4
    = 8; expected sum n_c n_k d = 2 (2x1x2.25 + 1x3x4 + 2x3x12.25) = 180; alpha = 1 - 5 x 8 / 180
    = 7/9. Nominal: observed 2, expected 2 (2 + 3 + 6) = 22, alpha = 1 - 5 x 2 / 22 = 6/11.

    Verdicts: [TRUE, TRUE], [FALSE, NOT GIVEN]: o_TT = 2, o_FN = o_NF = 1; n_T = 2, n_F = n_N =
    1, n = 4; observed 2, expected 2 (2 + 2 + 1) = 10; alpha = 1 - 3 x 2 / 10 = 0.4.

    Rankings, as items ranked below: q1 alice c2 3, c1 1, c4 1, c3 0; bob c2 3, c1 2, c4 1, c3 0:
    5 concordant pairs, 1 tied in alice's only: tau-b = 5 / sqrt(5 x 6). q2 alice c3 2, c1 1,
    c2 0; bob c1 2, c3 1, c2 0: 2 concordant, 1 discordant: 1/3. Mean (5/sqrt(30) + 1/3) / 2."""
    agreement = study.export_human(study.store.path.parent / "out")
    data = json.loads((study.store.path.parent / "out" / "agreement.json").read_text())
    assert agreement  # the files were written
    assert data["grades"]["relevance"]["ordinal"] == pytest.approx(7 / 9, abs=1e-6)
    assert data["grades"]["relevance"]["nominal"] == pytest.approx(6 / 11, abs=1e-6)
    assert data["grades"]["relevance"]["units"] == 3
    assert data["verify"] == {"nominal": 0.4, "units": 2}
    expected_tau = (5 / 30**0.5 + 1 / 3) / 2
    assert data["rankings"]["alice~bob"] == pytest.approx(expected_tau, abs=1e-6)


def test_krippendorff_alpha_worked_examples():
    """Nominal: [T, T], [T, F], [F, F], [T, T, F]. The three-coder unit weighs its 6 ordered
    pairs by 1/(3-1): o_TT = 2 + 1 = 3, o_TF = o_FT = 1 + 1 = 2, o_FF = 2; n_T = 5, n_F = 4,
    n = 9; alpha = 1 - (n - 1) (o_TF + o_FT) / (2 n_T n_F) = 1 - 8 x 4 / 40 = 0.2.

    Ordinal and interval: [0, 0], [0, 1], [1, 2], [2, 2], [0, 2], [0, 0]: o00 = 4, o01 = o12 =
    o02 = 1 (and symmetric), o22 = 2; n0 = 6, n1 = 2, n2 = 4, n = 12. Ordinal d01 = (8 - 4)^2 =
    16, d12 = (6 - 3)^2 = 9, d02 = (12 - 5)^2 = 49: observed 2 (16 + 9 + 49) = 148, expected
    2 (6x2x16 + 2x4x9 + 6x4x49) = 2880, alpha = 1 - 11 x 148 / 2880 = 313/720. Interval
    d = 1, 1, 4: observed 12, expected 2 (12 + 8 + 96) = 232, alpha = 1 - 132/232 = 25/58.
    Nominal: observed 6, expected 2 (12 + 8 + 24) = 88, alpha = 1 - 66/88 = 0.25."""
    assert krippendorff_alpha([["T", "T"], ["T", "F"], ["F", "F"], ["T", "T", "F"]], "nominal") == (
        pytest.approx(0.2)
    )
    units = [[0, 0], [0, 1], [1, 2], [2, 2], [0, 2], [0, 0]]
    assert krippendorff_alpha(units, "ordinal") == pytest.approx(313 / 720)
    assert krippendorff_alpha(units, "interval") == pytest.approx(25 / 58)
    assert krippendorff_alpha(units, "nominal") == pytest.approx(0.25)
    # a missing label leaves a unit with one value: not pairable
    assert krippendorff_alpha([*units, [1, None]], "ordinal") == pytest.approx(313 / 720)
    tau = pairwise_kendall_tau(
        {"a": {"q": {"x": 2, "y": 1, "z": 0}}, "b": {"q": {"x": 2, "y": 0, "z": 1}}}
    )
    assert tau == {("a", "b"): pytest.approx(1 / 3)}


def test_nrp_meta_reads_the_exported_rankings(study, tmp_path):
    """Scores a1 .9, a2 .5, a3 .1 (q1) and b1 .3, b2 .2, b3 .1 (q2); d9 is not scored.

    bob q1: a2 > a1 > a3 (labels 3, 2, 1): pairs (a1, a2) discordant, (a1, a3) and (a2, a3)
    concordant: tau = 1/3. q2: b1 > b3 > b2: (b2, b3) discordant, the others concordant: 1/3.
    alice q1: a2 (3) > a1 = a3 (1): (a1, a2) discordant, (a2, a3) concordant, (a1, a3) tied in
    the ranking: tau-b = 0 / sqrt(3 x 2) = 0. q2: b3 > b1 > b2: (b1, b2) concordant, (b1, b3)
    and (b2, b3) discordant: -1/3. Means 1/3 and -1/6."""
    out = tmp_path / "out"
    study.export_human(out)
    scores = tmp_path / "scores.csv"
    scores.write_text(
        "answer_id,qid,s\na1,q1,0.9\na2,q1,0.5\na3,q1,0.1\nb1,q2,0.3\nb2,q2,0.2\nb3,q2,0.1\n"
    )
    bob = meta_from_files(scores, out / "rankings.bob.jsonl", n_bootstrap=0)
    assert bob.counts["joined"] == 6 and bob.counts["human_without_scores"] == 1
    assert bob.result.row("s", "ranking")["tau_mean"] == pytest.approx(1 / 3)
    alice = meta_from_files(scores, out / "rankings.alice.jsonl", n_bootstrap=0)
    per_query = alice.result.per_query.set_index("qid")["kendall_tau"]
    assert per_query.to_dict() == {"q1": pytest.approx(0.0), "q2": pytest.approx(-1 / 3)}
    assert alice.result.row("s", "ranking")["tau_mean"] == pytest.approx(-1 / 6)


def test_corrected_labels_give_the_judge_accuracy_and_review_curve(tmp_path):
    """The judge: a1 TRUE (0.3), a2 TRUE (0.4), a3 FALSE (0.9), a4 NOT GIVEN (0.8); under 0.5,
    a1 and a2 go to review, where the reviewer confirms a1 and corrects a2 to FALSE.

    Against the reviewed labels alone: 1 of 2 right, accuracy 0.5. Against the corrected
    labels (a3 and a4 keep the judge's): a2 is the only wrong label, accuracy 0.75; at t = 0.5
    the review takes 2 of 4 items (0.5) and catches the 1 wrong label (share 1.0), and the 2
    kept are right (accuracy kept 1.0)."""
    evaluations = tmp_path / "evaluations.csv"
    evaluations.write_text(
        "answer_id,qid,judge.label,judge.confidence\n"
        "a1,q1,TRUE,0.3\na2,q1,TRUE,0.4\na3,q1,FALSE,0.9\na4,q2,NOT GIVEN,0.8\n"
    )
    items = pd.DataFrame(
        {
            "answer_id": ["a1", "a2", "a3", "a4"],
            "qid": ["q1", "q1", "q1", "q2"],
            "question": ["q one"] * 3 + ["q two"],
            "references": [("ref one",)] * 3 + [()],
            "text": ["t1", "t2", "t3", "t4"],
        }
    )
    flagged = verify_items(items, read_table(evaluations), 0.5)
    assert [i.id for i in flagged] == ["verify:a1", "verify:a2"]
    assert flagged[0].shown["reference"] == "ref one" and flagged[0].shown["confidence"] == 0.3
    # a rubric judge: its score (4.0 read as the label "4") and any column as the confidence
    rubric = read_table(evaluations).assign(
        **{"judge.correctness": [4.0, 2.0, 5.0, 1.0], "judge.agreement": [1.0, 0.5, 1.0, 0.4]}
    )
    scored = verify_items(
        items, rubric, 0.6, "judge.correctness", "judge.agreement", ["1", "2", "3", "4", "5"]
    )
    assert [(i.id, i.shown["judge_label"]) for i in scored] == [
        ("verify:a2", "2"),
        ("verify:a4", "1"),
    ]
    assert scored[0].shown["choices"] == ["1", "2", "3", "4", "5"]
    project = ReviewProject(
        "judge", ("alice",), 1, tuple(flagged), origin={"evaluations": str(evaluations)}
    )
    desk = ReviewDesk(project, ReviewStore(tmp_path / "judge.sqlite"))
    desk.save("alice", "verify:a1", {"label": "TRUE"}, 0, "1")
    desk.save("alice", "verify:a2", {"label": "FALSE"}, 0, "2")
    out = tmp_path / "out"
    desk.export_human(out)
    assert (out / "corrected.csv").read_text() == (
        "answer_id,qid,label,source\na1,q1,TRUE,human\na2,q1,FALSE,human\n"
        "a3,q1,FALSE,judge\na4,q2,NOT GIVEN,judge\n"
    )
    options = dict(
        categorical=True, label_column="judge.label", human_columns=["label"],
        confidence_column="judge.confidence", thresholds=[0.5],
    )  # fmt: skip
    reviewed = meta_from_files(evaluations, out / "verify.csv", **options)
    assert reviewed.result.summary["accuracy"] == pytest.approx(0.5)
    corrected = meta_from_files(evaluations, out / "corrected.csv", **options)
    assert corrected.result.summary["accuracy"] == pytest.approx(0.75)
    curve = corrected.result.review.iloc[0]
    assert (curve["n_review"], curve["n_wrong"], curve["n_wrong_caught"]) == (2, 1, 1)
    assert curve["share_review"] == 0.5 and curve["share_wrong_caught"] == 1.0
    assert curve["accuracy_kept"] == 1.0
    # the same from the command line, with the files the report reads (nrp report --meta)
    command = ["meta", str(evaluations), str(out / "corrected.csv"), "--categorical",
               "--label-column", "judge.label", "--human", "label", "--confidence-column",
               "judge.confidence", "--thresholds", "0.5",
               "--out", str(tmp_path / "meta")]  # fmt: skip
    assert main(command) == 0
    written = json.loads((tmp_path / "meta" / "categorical.json").read_text())
    assert written["summary"]["accuracy"] == 0.75
    assert (tmp_path / "meta" / "review.png").is_file()


# -- Label Studio ----------------------------------------------------------------------------
def test_label_studio_round_trip_is_identity(study, tmp_path):
    path, *configs = study.export_label_studio(tmp_path / "ls.json")
    assert [c.name for c in configs] == ["ls.rank.xml", "ls.grade.xml", "ls.verify.xml"]
    for config in configs:  # well-formed XML, naming the task data the export holds
        assert xml.dom.minidom.parse(str(config)).documentElement.tagName == "View"
    assert '<Ranker name="rank" toName="items"/>' in configs[0].read_text()
    assert '<Choice value="1" hint="partly"/>' in configs[1].read_text()
    tasks = json.loads(path.read_text())
    assert [t["data"]["nrp_item"] for t in tasks] == [i.id for i in study.project.items]
    tied = tasks[0]["annotations"][0]  # alice's q1 ranking has a tie: buckets in order
    assert tied["completed_by"] == {"email": "alice"}
    assert tied["result"][0]["value"]["ranker"] == {
        "tier-1": ["c2"], "tier-2": ["c1", "c4"], "tier-3": ["c3"]
    }  # fmt: skip
    strict = tasks[0]["annotations"][1]["result"][0]
    assert strict["type"] == "ranker" and strict["value"]["ranker"] == {
        "rank": ["c2", "c1", "c4", "c3"]
    }
    fresh = ReviewDesk(study.project, ReviewStore(tmp_path / "fresh.sqlite"))
    assert fresh.import_label_studio(path) == len(STUDY_REVIEWS)
    assert fresh.import_label_studio(path) == 0  # the same file again stores nothing
    back = [(r.item_id, r.reviewer, r.value) for r in fresh.store.reviews()]
    assert back == [(r.item_id, r.reviewer, r.value) for r in study.store.reviews()]


def test_a_hand_written_label_studio_export_imports_to_the_same_human_files(tmp_path):
    """Label Studio's export shape: a list of tasks with ``data`` and ``annotations`` whose
    ``result`` items have ``from_name``, ``to_name``, ``type`` and ``value``; a List + Ranker
    config gives ``value.ranker`` {ranker name: ids}, with Buckets {bucket: ids}; a Choices
    tag gives ``value.choices``."""
    handwritten = [
        {
            "id": 101,
            "data": {"nrp_item": "rank:q1", "question": "question q1", "items": []},
            "annotations": [
                {
                    "id": 1, "completed_by": {"id": 7, "email": "bob@example.org"},
                    "was_cancelled": False, "lead_time": 12.5,
                    "result": [{"id": "Xy1", "from_name": "rank", "to_name": "items",
                                "type": "ranker",
                                "value": {"ranker": {"rank": ["c2", "c1", "c4", "c3"]}}}],
                },
                {
                    "id": 2, "completed_by": {"id": 8, "email": "alice@example.org"},
                    "result": [{"id": "Xy2", "from_name": "rank", "to_name": "items",
                                "type": "ranker",
                                "value": {"ranker": {"best": ["c2"], "middle": ["c1", "c4"],
                                                     "worst": ["c3"]}}}],
                },
            ],
        },
        {
            "id": 102,
            "data": {"nrp_item": "grade:a2", "question": "question q1", "answer": "answer a2"},
            "annotations": [
                {"id": 3, "completed_by": {"id": 8, "email": "alice@example.org"},
                 "result": [{"id": "Z1", "from_name": "relevance", "to_name": "answer",
                             "type": "choices", "value": {"choices": ["1"]}}]},
                {"id": 4, "completed_by": {"id": 7, "email": "bob@example.org"},
                 "was_cancelled": True, "result": []},
            ],
        },
    ]  # fmt: skip
    source = tmp_path / "export.json"
    source.write_text(json.dumps(handwritten))
    imported = ReviewDesk(study_project(), ReviewStore(tmp_path / "imported.sqlite"))
    assert imported.import_label_studio(source) == 3
    app = ReviewDesk(study_project(), ReviewStore(tmp_path / "app.sqlite"))
    app.save("bob", "rank:q1", {"ranking": [["c2"], ["c1"], ["c4"], ["c3"]]}, 0, "1")
    app.save("alice", "rank:q1", {"ranking": [["c2"], ["c1", "c4"], ["c3"]]}, 0, "2")
    app.save("alice", "grade:a2", {"labels": {"relevance": "1"}}, 0, "3")
    ours = {p.name: p.read_bytes() for p in app.export_human(tmp_path / "app")}
    theirs = {p.name: p.read_bytes() for p in imported.export_human(tmp_path / "imported")}
    assert ours == theirs
    assert ours["rankings.alice.jsonl"] == b'{"qid": "q1", "ranking": ["a2", ["a1", "a3"], "d9"]}\n'


def test_a_bad_label_studio_file_is_one_line(tmp_path):
    project = study_project()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": 5, "data": {"nrp_item": "rank:q9"}, "annotations": []}]))
    with pytest.raises(
        InputError, match=r"bad.json: task 5: data.nrp_item 'rank:q9' is not an item"
    ):
        read_label_studio(project, bad)
    bad.write_text(json.dumps([{"id": 6, "data": {"nrp_item": "grade:a1"}, "annotations": [
        {"completed_by": {"email": "eve@x.org"}, "result": []}]}]))  # fmt: skip
    with pytest.raises(InputError, match=r"task 6: completed_by .* is not a reviewer"):
        read_label_studio(project, bad)
    # a project nrp did not create (no nrp_item, candidates in data.items): nrp meta reads it
    bad.write_text(json.dumps([{"id": 7, "data": {"query": "q", "items": [{"id": "c1"}]}}]))
    with pytest.raises(InputError, match=r"task 7: no data.nrp_item: an export of a project nrp"):
        read_label_studio(project, bad)
    store = ReviewStore(tmp_path / "s.sqlite")
    assert import_reviews(store, []) == 0
    assert to_label_studio(project, [])[0]["annotations"] == []


# -- projects from nrp outputs -------------------------------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    indexes = tmp_path_factory.mktemp("indexes")
    api.ingest(resources.files("nrp") / "data" / "demo" / "manifest.yaml", indexes_dir=indexes)
    answers = api.read_answers(resources.files("nrp") / "data" / "demo" / "answers.jsonl")
    return api.Collection.load("demo", indexes), answers.answers


def test_a_project_from_the_demo_collection(demo, tmp_path):
    collection, answers = demo
    evaluations = tmp_path / "evaluations.csv"
    labels = pd.DataFrame(
        {
            "answer_id": answers["answer_id"],
            "qid": answers["qid"],
            "judge.label": ["TRUE", "FALSE", "NOT GIVEN", None] * 16,
            "judge.confidence": [0.2, 0.9, 0.6, 0.95] * 16,
        }
    )
    labels.to_csv(evaluations, index=False)
    project = api.create_review_project(
        "demo", ["rank", "grade", "verify"], collection, ["alice", "bob"], answers,
        reviews_per_item=1, documents=True, evaluations=evaluations, k=5, seed=3, threshold=0.5,
    )  # fmt: skip
    kinds = pd.Series([i.kind for i in project.items]).value_counts().to_dict()
    # 8 queries; 64 answers; flagged: confidence 0.2 (16) and no label (16)
    assert kinds == {"grade": 64, "verify": 32, "rank": 8}
    rank = project.items[0]
    assert rank.id == "rank:d1" and len(rank.shown["candidates"]) == 5
    # what the browser gets: the texts under c1..c5, not which answer or document they are
    public = rank.public()
    assert set(public) == {"id", "kind", "qid", "question", "candidates"}
    assert not any(s["id"] in json.dumps(public) for s in rank.hidden["sources"].values())
    assert {s["kind"] for s in rank.hidden["sources"].values()} == {"answer", "document"}
    # 8 answers and 15 judged documents with text for d1: the draw is the seed's, always
    again = api.create_review_project("demo", ["rank"], collection, ["a"], answers=answers,
                                      documents=True, k=5, seed=3)  # fmt: skip
    assert again.items[0].to_json() == rank.to_json()
    settings = api.ReviewSettings(documents=True, k=5, seed=3)
    same = api.create_review_project("demo", ["rank"], collection, ["a"], answers, settings)
    assert same.to_json() == again.to_json()
    with pytest.raises(TypeError, match=r"argument.*'top_k'.*ReviewSettings has"):
        api.create_review_project("demo", ["rank"], collection, ["a"], answers, top_k=5)
    other = api.create_review_project("demo", ["rank"], collection, ["a"], answers=answers,
                                      documents=True, k=5, seed=4)  # fmt: skip
    assert other.items[0].hidden != rank.hidden
    meanings = {g["label"]: g["meaning"] for g in project.scales["readability"]["grades"]}
    assert meanings["2"] == "easy to read: short sentences and everyday words"
    verify = next(i for i in project.items if i.kind == "verify")
    assert verify.shown["judge_label"] == "TRUE" and verify.shown["confidence"] == 0.2
    assert verify.shown["reference"].startswith("Taking vitamin C regularly does not prevent")
    with pytest.raises(ConfigError, match="review kinds must be among rank, grade, verify"):
        api.create_review_project("demo", ["rank", "judge"], collection, ["a"], answers=answers)
    with pytest.raises(ConfigError, match="verify review needs the judge's evaluations"):
        api.create_review_project("demo", ["verify"], collection, ["a"], answers=answers)
    path = project.write(tmp_path / "demo.json")
    assert ReviewProject.load(path).to_json() == project.to_json()


def test_cli_errors_are_one_line(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "nrp-review-project/1", "name": "x",\n "items": [}')
    for args, message in [
        ([str(tmp_path / "none.json"), "--progress"], "none.json: no such review project file"),
        ([str(broken), "--progress"], "broken.json:2: not valid JSON"),
        ([str(tmp_path / "p.json"), "--create", "rank", "--collection", "x", "--indexes",
          str(tmp_path)], "unknown collection 'x'"),
        ([str(tmp_path / "p.json"), "--create", "rank"], "--create needs --collection"),
        ([str(broken), "--create", "rank", "--collection", "x"], "broken.json: exists; remove it"),
    ]:  # fmt: skip
        assert main(["review", *args]) == 2
        stderr = capsys.readouterr().err
        assert message in stderr and len(stderr.strip().splitlines()) == 1


def test_nrp_annotators_gives_the_agreement_of_the_exported_files(study, tmp_path, capsys):
    """The per-reviewer files give the numbers of ``agreement.json`` (worked out in
    ``test_agreement_of_the_worked_example``): grades alpha 7/9 (ordinal), verdicts 0.4
    (nominal), rankings tau (5/sqrt(30) + 1/3) / 2 (d9, a judged document, is ranked by both)."""
    out = tmp_path / "out"
    study.export_human(out)
    grades = api.annotator_agreement([out / "grades.alice.csv", out / "grades.bob.csv"])
    row = grades.to_frame().iloc[0]
    assert (row["dimension"], row["units"], row["level"]) == ("relevance", 3, "ordinal")
    assert row["alpha"] == pytest.approx(7 / 9)
    interval = api.annotator_agreement(
        [out / "grades.alice.csv", out / "grades.bob.csv"], level="interval"
    )
    # interval distances 1, 1, 4 for 0-1, 1-2, 0-2: observed 2 x 1 = 2, expected
    # 2 (2x1x1 + 1x3x1 + 2x3x4) = 58: alpha = 1 - 5 x 2 / 58 = 24/29
    assert interval.to_frame()["alpha"].iloc[0] == pytest.approx(24 / 29)
    verdicts = api.annotator_agreement(
        [out / "verify.alice.csv", out / "verify.bob.csv"], categorical=True
    )
    assert verdicts.to_frame()["alpha"].iloc[0] == pytest.approx(0.4)
    files = [str(out / "rankings.alice.jsonl"), str(out / "rankings.bob.jsonl")]
    assert main(["annotators", *files, "--out", str(tmp_path / "a.csv")]) == 0
    printed = capsys.readouterr().out
    assert "ranking" in printed and "0.623" in printed
    table = pd.read_csv(tmp_path / "a.csv")
    assert table["tau_pairwise_mean"].iloc[0] == pytest.approx((5 / 30**0.5 + 1 / 3) / 2)
    assert main(["annotators", files[0]]) == 2
    assert "two human files or more" in capsys.readouterr().err
