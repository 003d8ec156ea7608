"""A hand-built judged collection (two queries, two dimensions) and TREC RAG report files written
by hand, for the tests of report answers, the citation measure, the TREC leaderboard and the
AutoJudge judge (tests/test_rag_reports.py).

D_q1 = c1..c4 (c4 has no query term), D_q2 = w1..w4 and x1 (w4 and x1 have no query term); x1 is
judged for q2 only. With TF-IDF an answer made of every query term, twice, in fewer words than
any document scores above all of D_q (r = 0, NRP 1); an answer with no query term scores 0,
tied with the documents without one (mid ties: r = above + ties / 2).

- ``runA`` (TREC RAG 2024: ``answer``, citations as indices into ``references``):
  q1 every query term (r 0 of 4: NRP 1), cites c1, c3, zz (zz is in no collection);
  q2 no query term (3 above, 2 tied of 5: r 4, NRP 0.2), cites w4.
- ``runB`` (TREC RAG 2025: ``responses``, citations as doc ids, ``narrative_id``):
  q1 no query term (3 above, 1 tied of 4: r 3.5, NRP 0.125), cites c3, x1, c4;
  q2 every query term (NRP 1), cites w1, w2.
"""

from __future__ import annotations

import json
from pathlib import Path

MANIFEST = """\
name: rag-tiny
description: hand-built collection for the tests of TREC RAG reports
citation: nrp tests
data_root: .
dimensions:
  relevance:
    description: relevant or not
    grades: {0: "not relevant", 1: "partly", 2: "relevant"}
  credibility:
    description: trustworthy or not
    grades: {0: "not credible", 1: "credible"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: relevance.tsv, holds: judgments, dimensions: [relevance]}
  - {format: table, path: credibility.tsv, holds: judgments, dimensions: [credibility]}
"""
TOPICS = {
    "q1": "Can vitamin C prevent colds in children?",
    "q2": "How much water should adults drink each day?",
}
DOCUMENTS = {
    "c1": "Vitamin C does not prevent colds in most children, but taking it every day may make "
    "a cold slightly shorter, according to several large reviews of clinical trials.",
    "c2": "Colds are caused by viruses that spread through coughs, sneezes and unwashed hands.",
    "c3": "Oranges, kiwis and peppers are rich in vitamin C, and so are strawberries.",
    "c4": "The weather in spring is mild and pleasant.",
    "w1": "Most healthy adults need about two litres of fluid a day, more in hot weather or "
    "during long walks in the mountains.",
    "w2": "Drink when you are thirsty and check that your urine is pale yellow, which shows "
    "that your body gets enough fluid.",
    "w3": "Water has no calories, costs almost nothing from the tap and is the cheapest drink "
    "there is in most countries.",
    "w4": "Bicycles need regular maintenance of their chains.",
    "x1": "Cats sleep for many hours.",
}
RELEVANCE = [("q1", "c1", 2), ("q1", "c2", 1), ("q1", "c3", 0), ("q1", "c4", 0),
             ("q2", "w1", 2), ("q2", "w2", 1), ("q2", "w3", 0), ("q2", "w4", 0),
             ("q2", "x1", 0)]  # fmt: skip
# c2 and c4 (q1) and x1 (q2) are not judged for credibility
CREDIBILITY = [("q1", "c1", 1), ("q1", "c3", 1),
               ("q2", "w1", 1), ("q2", "w2", 1), ("q2", "w3", 0), ("q2", "w4", 0)]  # fmt: skip

EVERY_TERM_Q1 = "Vitamin C may prevent colds in children."
EVERY_TERM_Q2 = "Adults drink water every day."
RUN_A = [  # TREC RAG 2024
    {
        "metadata": {"team_id": "t1", "run_id": "runA", "narrative_id": "q1", "type": "auto"},
        "references": ["c1", "c3", "zz"],
        "answer": [
            {"text": EVERY_TERM_Q1, "citations": [0, 1]},
            {"text": EVERY_TERM_Q1, "citations": [1, 2]},
        ],
    },
    {
        "metadata": {"team_id": "t1", "run_id": "runA", "narrative_id": "q2", "type": "auto"},
        "references": ["w4", "w1"],  # w1 retrieved, not cited
        "answer": [{"text": "Bicycles need chains.", "citations": [0]}],
    },
]
RUN_B = [  # TREC RAG 2025 / RAGTIME: responses, doc ids
    {
        "metadata": {"team_id": "t2", "run_id": "runB", "topic_id": "q1"},
        "responses": [
            {"text": "Oranges are tasty.", "citations": ["c3", "x1"]},
            {"text": "Spring is mild.", "citations": ["c4", "c3"]},
            {"text": "That is all.", "citations": []},
        ],
    },
    {
        "metadata": {"team_id": "t2", "run_id": "runB", "topic_id": "q2"},
        "responses": [
            {"text": EVERY_TERM_Q2, "citations": ["w1"]},
            {"text": EVERY_TERM_Q2, "citations": ["w2", "w1"]},
        ],
    },
]


def write_collection(folder: Path) -> Path:
    """The collection's files in ``folder``; returns its manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.yaml").write_text(MANIFEST)
    (folder / "topics.tsv").write_text(
        "qid\tquery\n" + "".join(f"{q}\t{t}\n" for q, t in TOPICS.items())
    )
    (folder / "documents.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t}\n" for d, t in DOCUMENTS.items())
    )
    for name, rows in (("relevance", RELEVANCE), ("credibility", CREDIBILITY)):
        (folder / f"{name}.tsv").write_text(
            f"qid\tdocno\t{name}\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows)
        )
    return folder / "manifest.yaml"


def write_reports(path: Path, reports: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(report) + "\n" for report in reports))
    return path


def nltk_stand_in(folder: Path) -> str | None:
    """``import autojudge_base`` loads NLTK's stopwords and punkt data and downloads them when
    missing, which an offline machine cannot. Where they are missing, a stand-in (a few English
    stopwords, an empty punkt folder) is written to ``folder`` and its path returned (None where
    the real data are there): only the import needs it, nothing nrp calls reads them."""
    import nltk

    def found(name: str) -> bool:
        try:
            nltk.data.find(name)
        except LookupError:
            return False
        return True

    if found("corpora/stopwords") and found("tokenizers/punkt"):
        return None
    (folder / "corpora" / "stopwords").mkdir(parents=True, exist_ok=True)
    (folder / "corpora" / "stopwords" / "english").write_text("a\nan\nthe\nof\nand\n")
    (folder / "tokenizers" / "punkt").mkdir(parents=True, exist_ok=True)
    return str(folder)
