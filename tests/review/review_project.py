"""A small hand-made review project: two queries to rank, three answers to grade, two judge
labels to verify, two reviewers who each review every item; the reviews of the worked example
the tests compute by hand."""

from __future__ import annotations

from nrp.review.project import TFN_LABELS, ReviewItem, ReviewProject

SCALES = {
    "relevance": {
        "description": "does the answer answer",
        "grades": [
            {"label": "0", "meaning": "no"},
            {"label": "1", "meaning": "partly"},
            {"label": "2", "meaning": "fully"},
        ],
    }
}


def rank_item(qid: str, sources: dict[str, str]) -> ReviewItem:
    return ReviewItem(
        id=f"rank:{qid}",
        kind="rank",
        qid=qid,
        shown={
            "question": f"question {qid}",
            "candidates": [{"cid": c, "text": f"text of {s}"} for c, s in sources.items()],
        },
        hidden={
            "sources": {
                c: {"kind": "document" if s.startswith("d") else "answer", "id": s}
                for c, s in sources.items()
            }
        },
    )


def grade_item(answer_id: str) -> ReviewItem:
    return ReviewItem(
        id=f"grade:{answer_id}",
        kind="grade",
        qid="q1",
        shown={
            "question": "question q1",
            "answer": f"answer {answer_id}",
            "dimensions": ["relevance"],
        },
        hidden={"answer_id": answer_id},
    )


def verify_item(answer_id: str, label: str, confidence: float) -> ReviewItem:
    return ReviewItem(
        id=f"verify:{answer_id}",
        kind="verify",
        qid="q1",
        shown={
            "question": "question q1",
            "reference": "the reference",
            "answer": f"answer {answer_id}",
            "judge_label": label,
            "confidence": confidence,
            "choices": list(TFN_LABELS),
        },
        hidden={"answer_id": answer_id},
    )


def study_project(reviewers=("alice", "bob"), per_item=2) -> ReviewProject:
    items = (
        rank_item("q1", {"c1": "a1", "c2": "a2", "c3": "d9", "c4": "a3"}),
        rank_item("q2", {"c1": "b1", "c2": "b2", "c3": "b3"}),
        grade_item("a1"),
        grade_item("a2"),
        grade_item("a3"),
        verify_item("a1", "TRUE", 0.3),
        verify_item("a2", "TRUE", 0.4),
    )
    return ReviewProject("study", tuple(reviewers), per_item, items, SCALES)


#: (item, reviewer, value) of the worked example the tests compute by hand
STUDY_REVIEWS = [
    ("rank:q1", "alice", {"ranking": [["c2"], ["c1", "c4"], ["c3"]]}),
    ("rank:q2", "alice", {"ranking": [["c3"], ["c1"], ["c2"]]}),
    ("rank:q1", "bob", {"ranking": [["c2"], ["c1"], ["c4"], ["c3"]]}),
    ("rank:q2", "bob", {"ranking": [["c1"], ["c3"], ["c2"]]}),
    ("grade:a1", "alice", {"labels": {"relevance": "2"}}),
    ("grade:a2", "alice", {"labels": {"relevance": "1"}}),
    ("grade:a3", "alice", {"labels": {"relevance": "0"}}),
    ("grade:a1", "bob", {"labels": {"relevance": "2"}}),
    ("grade:a2", "bob", {"labels": {"relevance": "2"}}),
    ("grade:a3", "bob", {"labels": {"relevance": "0"}}),
    ("verify:a1", "alice", {"label": "TRUE"}),
    ("verify:a2", "alice", {"label": "FALSE"}),
    ("verify:a1", "bob", {"label": "TRUE"}),
    ("verify:a2", "bob", {"label": "NOT GIVEN"}),
]
