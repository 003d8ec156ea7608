"""A hand-made collection and two PyTerrier scorers whose scores can be counted on a finger.

Two topics, seven documents, judged for relevance and readability (0-2). ``overlap`` scores a
row by the number of distinct query words its text contains; ``brevity`` by minus its number of
words. Their scores of D_q, by hand:

    q1 "fever in children"                 overlap  brevity  relevance  readability
      a1 fever in children is common          3       -5         2          1
      a2 children fever                       2       -2         1          2
      a3 fever                                1       -1         1          2
      a4 garden party tonight with music...   0       -7         0          0
    q2 "vitamin c colds"
      b1 vitamin c does not prevent colds     3       -6         2          0
      b2 vitamin c                            2       -2         1          2
      b3 shoes for running                    0       -3         0          1

overlap orders both queries ideally for relevance and brevity for readability (and neither for
the other dimension), so validation chooses overlap for relevance and brevity for readability.
"""

from __future__ import annotations

from pathlib import Path

import pyterrier as pt

from nrp import Collection, ingest

MANIFEST = """\
name: words
description: hand-made collection for the PyTerrier tests
citation: nrp tests
data_root: .
repeated_judgments: {policy: error}
dimensions:
  relevance:
    description: relevant or not
    grades: {0: "no", 1: "partly", 2: "yes"}
  readability:
    description: easy to read or not
    grades: {0: "hard", 1: "fair", 2: "easy"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance, readability]}
"""
TOPICS = {"q1": "fever in children", "q2": "vitamin c colds"}
# docno -> (qid, text, relevance, readability)
DOCS = {
    "a1": ("q1", "fever in children is common", 2, 1),
    "a2": ("q1", "children fever", 1, 2),
    "a3": ("q1", "fever", 1, 2),
    "a4": ("q1", "garden party tonight with music and food", 0, 0),
    "b1": ("q2", "vitamin c does not prevent colds", 2, 0),
    "b2": ("q2", "vitamin c", 1, 2),
    "b3": ("q2", "shoes for running", 0, 1),
}


def build_words(root: Path) -> Collection:
    """The collection above, ingested under ``root / "indexes"``."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "manifest.yaml").write_text(MANIFEST)
    (data / "topics.tsv").write_text(
        "qid\tquery\n" + "".join(f"{q}\t{t}\n" for q, t in TOPICS.items())
    )
    (data / "documents.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{v[1]}\n" for d, v in DOCS.items())
    )
    (data / "qrels.tsv").write_text(
        "qid\tdocno\trelevance\treadability\n"
        + "".join(f"{q}\t{d}\t{rel}\t{read}\n" for d, (q, _, rel, read) in DOCS.items())
    )
    ingest(data / "manifest.yaml", indexes_dir=root / "indexes")
    return Collection.load("words", root / "indexes")


def overlap_score(row) -> float:
    """The number of distinct query words the text contains."""
    return float(len(set(row["query"].split()) & set(row["text"].split())))


def brevity_score(row) -> float:
    """Minus the number of words of the text: shorter ranks higher."""
    return -float(len(row["text"].split()))


class Counting:
    """A row scorer that counts the rows it scored (``rows``)."""

    def __init__(self, score):
        self.score = score
        self.rows = 0

    def __call__(self, row) -> float:
        self.rows += 1
        return self.score(row)


def overlap() -> pt.Transformer:
    return pt.apply.doc_score(overlap_score)


def brevity() -> pt.Transformer:
    return pt.apply.doc_score(brevity_score)
