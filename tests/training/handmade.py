"""A hand-made judged collection whose grade depends on one word, for training tests.

``words``: 20 queries ``q01``..``q20`` ("what helps TOPIC"), 8 documents each: 4 to 7 filler words
and the topic, and in 3 of them the word ``proven``. Relevance: 1 with ``proven``, 0 without;
one document of each query without the word has label ``X`` ("could not judge"), excluded from
graded labels: it must never train. 7 graded pairs per query, 140 in all, 60 of grade 1.
Dimension ``flat`` grades every document 0 (one grade: nothing to learn).

``other``: 6 queries of the same kind; two ask a question of ``words`` in other spelling
(``What HELPS  topic?``), which ``--also`` must leave out.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from nrp import Collection, ingest

RANKER_TESTS = Path(__file__).resolve().parents[1] / "rankers"
KEY_WORD = "proven"
FILLER = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "for",
    "with",
    "on",
    "daily",
    "dose",
    "blood",
    "sugar",
    "heart",
    "pain",
    "sleep",
    "water",
    "food",
    "care",
    "risk",
    "test",
    "night",
    "skin",
    "liver",
    "doctor",
]
TOPICS = [
    "asthma",
    "fever",
    "cough",
    "acne",
    "gout",
    "flu",
    "migraine",
    "anemia",
    "eczema",
    "angina",
    "colic",
    "croup",
    "lupus",
    "mumps",
    "rash",
    "shingles",
    "stroke",
    "ulcer",
    "vertigo",
    "warts",
]
OTHER_TOPICS = ["asthma", "gout", "hiccups", "bruises", "cramps", "snoring"]  # 2 shared

MANIFEST = """\
name: {name}
data_root: .
dimensions:
  relevance:
    grades:
      0: without the word
      1: with the word
      X: {{exclude: true, meaning: could not judge}}
  flat:
    grades: {{0: nothing, 1: unused}}
sources:
  - {{format: table, path: topics.tsv, holds: topics}}
  - {{format: table, path: docs.tsv, holds: documents}}
  - {{format: trec-qrels, path: rel.qrels, dimension: relevance}}
  - {{format: trec-qrels, path: flat.qrels, dimension: flat}}
"""


def vocabulary() -> list[str]:
    """Every word the collections use (the tiny tokenizer's vocabulary)."""
    return [*FILLER, *TOPICS, *OTHER_TOPICS, KEY_WORD, "what", "helps"]


def write_collection(
    folder: Path, indexes: Path, name: str, topics: list[str], seed: int, spelling: str = ""
) -> Collection:
    """Write and ingest one collection of ``topics`` (queries q01.., 8 documents each; topic
    narrative "care for TOPIC"). ``spelling``: topics whose query is written "What HELPS  T?"."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    topic_rows, doc_rows, rel, flat = ["qid\tquery\tnarrative"], ["docno\ttext"], [], []
    for number, topic in enumerate(topics, 1):
        qid = f"q{number:02d}"
        query = f"What HELPS  {topic}?" if topic in spelling.split() else f"what helps {topic}"
        topic_rows.append(f"{qid}\t{query}\tcare for {topic}")
        chosen = rng.sample(range(8), 4)
        with_word, excluded = set(chosen[:3]), chosen[3]  # excluded: label X, no word
        for j in range(8):
            words = [*rng.sample(FILLER, rng.randint(4, 7)), topic]  # length tells nothing
            if j in with_word:
                words.insert(rng.randrange(len(words) + 1), KEY_WORD)
            docno = f"{name}-{qid}-d{j}"
            doc_rows.append(f"{docno}\t{' '.join(words)}")
            label = "X" if j == excluded else ("1" if j in with_word else "0")
            rel.append(f"{qid} 0 {docno} {label}")
            flat.append(f"{qid} 0 {docno} 0")
    files = {
        "manifest.yaml": MANIFEST.format(name=name),
        "topics.tsv": "\n".join(topic_rows) + "\n",
        "docs.tsv": "\n".join(doc_rows) + "\n",
        "rel.qrels": "\n".join(rel) + "\n",
        "flat.qrels": "\n".join(flat) + "\n",
    }
    for file, text in files.items():
        (folder / file).write_text(text)
    ingest(folder / "manifest.yaml", indexes_dir=indexes)
    return Collection.load(name, indexes)


def build_sentence_model(bert: Path, out: Path, pooling: str = "mean") -> Path:
    """The tiny BERT of ``bert`` (a classifier folder: its encoder is read) with ``pooling``
    as a sentence-transformers folder: a base for ``nrp train --ranker dense``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(bert), max_seq_length=64)
    pooled = Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)
    SentenceTransformer(modules=[transformer, pooled], device="cpu").save(str(out))
    return out


def build(root: Path) -> dict[str, Path]:
    """The two collections under ``root/indexes``, a tiny random base model (2 layers) and the
    same encoder as a sentence-transformers model with mean pooling (``dense_base``)."""
    if str(RANKER_TESTS) not in sys.path:
        sys.path.insert(0, str(RANKER_TESTS))
    from tiny_models import build_tiny_bert_classifier

    indexes = root / "indexes"
    write_collection(root / "words", indexes, "words", TOPICS, seed=1)
    write_collection(root / "other", indexes, "other", OTHER_TOPICS, seed=2, spelling="asthma gout")
    base = build_tiny_bert_classifier(root / "base", vocabulary(), seed=0, layers=2)
    dense_base = build_sentence_model(base, root / "dense-base")
    return {"indexes": indexes, "base": base, "dense_base": dense_base}
