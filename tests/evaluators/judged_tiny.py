"""A hand-built judged collection with references for the evaluator tests (ingested into a tmp
indexes folder), so every reference source can be checked by hand:

- q1 has two reference answers (real references);
- q2 has none, and two documents with its top relevance grade 2 (w1, w2: pseudo-references);
- q3 has none, and its best relevance grade is 0 (nothing good was judged: no references);
- q4 has no judged documents at all (empty D_q: NRP cannot rank its answers).
"""

from __future__ import annotations

from pathlib import Path

from nrp import Collection, ingest

MANIFEST = """\
name: judged-tiny
description: hand-built collection for the evaluator tests
citation: nrp tests
data_root: .
repeated_judgments: {policy: error}
dimensions:
  relevance:
    description: relevant or not
    grades: {0: "not relevant", 1: "partly", 2: "relevant"}
  readability:
    description: readable or not
    grades: {0: "hard", 1: "easy"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance, readability]}
  - {format: table, path: references.tsv, holds: references}
"""
TOPICS = {
    "q1": "does vitamin c prevent colds",
    "q2": "how much water should adults drink",
    "q3": "is coffee bad for the heart",
    "q4": "a topic without judged documents",
}
DOCUMENTS = {
    "c1": "vitamin c does not prevent colds in most people",
    "c2": "vitamin c cures every cold overnight",
    "c3": "colds are caused by viruses",
    "w1": "adults should drink about two litres of water a day",
    "w2": "drink water when you are thirsty",
    "w3": "water is wet",
    "h1": "coffee is a drink",
    "h2": "the heart pumps blood",
}
# (qid, docno, relevance, readability)
QRELS = [
    ("q1", "c1", 2, 1),
    ("q1", "c2", 0, 1),
    ("q1", "c3", 1, 0),
    ("q2", "w2", 2, 0),
    ("q2", "w1", 2, 1),
    ("q2", "w3", 0, 1),
    ("q3", "h1", 0, 1),
    ("q3", "h2", 0, 0),
]
REFERENCES = [
    ("q1", "vitamin c does not prevent colds"),
    ("q1", "no, taking vitamin c will not stop colds"),
]


def write_judged_tiny(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.yaml").write_text(MANIFEST)
    (folder / "topics.tsv").write_text(
        "qid\tquery\n" + "".join(f"{q}\t{t}\n" for q, t in TOPICS.items())
    )
    (folder / "documents.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t}\n" for d, t in DOCUMENTS.items())
    )
    (folder / "qrels.tsv").write_text(
        "qid\tdocno\trelevance\treadability\n"
        + "".join(f"{q}\t{d}\t{rel}\t{read}\n" for q, d, rel, read in QRELS)
    )
    (folder / "references.tsv").write_text(
        "qid\ttext\n" + "".join(f"{q}\t{t}\n" for q, t in REFERENCES)
    )
    return folder / "manifest.yaml"


def judged_tiny(tmp: Path) -> Collection:
    """The collection, ingested under ``tmp/indexes``."""
    indexes = tmp / "indexes"
    ingest(write_judged_tiny(tmp / "source"), indexes_dir=indexes)
    return Collection.load("judged-tiny", indexes)
