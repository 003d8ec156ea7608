"""A hand-built judged collection (two queries, one dimension) and hand-written answers for the
tests of the flags of degenerate answers (tests/test_flags.py, tests/test_flags_cli.py).

Systems (llm, prompt ``plain``), one answer per query:

- ``echo``: the question itself (both answers flagged: question_words, little_content);
- ``real``: real answers of three sentences (no flag);
- ``copy``: q1 a near copy of the judged document c1 (judged_copy), q2 the real answer (half of
  its answers flagged).
"""

from __future__ import annotations

from pathlib import Path

QUESTION = "Can vitamin C prevent colds in children?"
QUESTION_2 = "How much water should adults drink each day?"
DOCUMENT = (
    "Vitamin C does not prevent colds in most children, but taking it every day may make a "
    "cold slightly shorter."
)  # 20 words: 16 five-grams
ECHO = QUESTION
# two terms the question lacks: want, know ("so", "you", "to" are stopwords)
RESTATED = "So you want to know: can vitamin C prevent colds in children?"
# the document with its last word changed: 15 of its 16 five-grams are the document's
COPY = DOCUMENT.replace("shorter", "milder")
REAL = (
    "No, not for most people. Taking vitamin C every day does not stop children from catching "
    "colds, although it may make them slightly shorter. Washing hands and getting enough sleep "
    "protect children better."
)
REAL_2 = (
    "Most adults need about 1.5 to 2 litres of fluids daily. Needs rise in hot weather, during "
    "exercise, and when ill. Thirst and pale urine are reliable signs that intake is sufficient."
)

MANIFEST = """\
name: flag-tiny
description: hand-built collection for the tests of flagged answers
citation: nrp tests
data_root: .
repeated_judgments: {policy: error}
dimensions:
  relevance:
    description: relevant or not
    grades: {0: "not relevant", 1: "partly", 2: "relevant"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance]}
"""
TOPICS = {"q1": QUESTION, "q2": QUESTION_2}
DOCUMENTS = {
    "c1": DOCUMENT,
    "c2": "Colds are caused by viruses that spread through coughs, sneezes and unwashed hands.",
    "c3": "Oranges, kiwis and peppers are rich in vitamin C.",
    "w1": "Most healthy adults need about two litres of fluid a day, more in hot weather.",
    "w2": "Drink when you are thirsty and check that your urine is pale yellow.",
    "w3": "Water has no calories and is the cheapest drink there is.",
}
QRELS = [("q1", "c1", 2), ("q1", "c2", 1), ("q1", "c3", 0),
         ("q2", "w1", 2), ("q2", "w2", 1), ("q2", "w3", 0)]  # fmt: skip
TEXTS = {
    "echo": {"q1": ECHO, "q2": QUESTION_2},
    "real": {"q1": REAL, "q2": REAL_2},
    "copy": {"q1": COPY, "q2": REAL_2},
}
ANSWERS = [
    {"answer_id": f"{llm}/plain/{qid}/0", "llm": llm, "prompt": "plain", "qid": qid,
     "sample": 0, "text": text}
    for llm, texts in TEXTS.items()
    for qid, text in texts.items()
]  # fmt: skip


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
    (folder / "qrels.tsv").write_text(
        "qid\tdocno\trelevance\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in QRELS)
    )
    return folder / "manifest.yaml"
