"""What a trained ranker learns from: the graded (query, document text) pairs of one dimension,
the query-disjoint folds, and the training queries left out because their question is one the
models will be evaluated on.

- ``gather(collection, dimension, also, held_out)`` -> ``TrainingData``: one row per judged
  (query, document) pair with text (graded labels only: a label the manifest's scale excludes,
  such as "could not judge", has no gain and never trains), the folds of the collection's
  queries, and the overlaps found.
- ``TrainingData.training_keys(fold)``: the queries a fold's model (or the all-queries model,
  ``fold=None``) trains on.

Queries are keyed by their qid in the trained (evaluation) collection and by ``NAME/qid`` in the
collections of ``also``, so qids that repeat across collections stay apart. ``also_query``
fields add each training query's other topic texts as queries of their own (same documents,
same grades), keyed ``KEY#FIELD`` and cross-fitted with their topic: a model that holds a query
out, or leaves it out, never trains on its other texts. Two queries are the
same question (``same_question``) when their normalised texts are equal
(``nrp.rankers.trained.normalise_query``: case-folded, punctuation and spacing ignored) or nearly
equal: the Jaccard similarity of their word sets is at least ``NEAR_DUPLICATE`` (an edited date,
a placeholder such as ``[NAME]`` for a name, a subject line added). Near duplicates are a leak as
much as equal texts, and leaving out a training query that only looked alike costs little.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from nrp.collection.collection import Collection
from nrp.collection.folds import assign_folds
from nrp.collection.labels import LabelScale
from nrp.errors import ConfigError
from nrp.rankers.trained import normalise_query, query_hash

#: columns of ``TrainingData.examples``
EXAMPLE_COLUMNS = ("key", "source", "qid", "query", "question", "docno", "text", "gain", "weight")
#: the topic field read as the query unless training names another
DEFAULT_FIELD = "query"
#: joins a query's key and the topic field of one of its other texts (``also_query``)
VARIANT_MARK = "#"
#: word-set Jaccard similarity from which two normalised question texts are the same question
NEAR_DUPLICATE = 0.7


@dataclass
class TrainingData:
    """``examples``: one row per judged pair (``EXAMPLE_COLUMNS``: ``query`` is the text of the
    trained topic field, ``question`` the topic's query; ``weight`` = 1 / the span of its
    collection's gains, so one grade step weighs the same in every scale). ``qid_fold``: the
    fold of each query of the trained collection with pairs. ``untrained_qids``: its other
    topics (no judgment with text in the dimension: no model saw them). ``excluded``: training
    queries left out for their question text (key -> why). ``same_text``: for each fold, its
    training queries left out of that fold's model because a held-out query asks the same.
    ``variants``: the key of each other text of a query (``also_query``) -> its query's key;
    ``also_query``: those fields."""

    collection: Collection
    dimension: str
    examples: pd.DataFrame
    qid_fold: dict[str, int]
    untrained_qids: list[str]
    query_hashes: dict[str, str]
    sources: list[dict[str, Any]]
    excluded: dict[str, str] = field(default_factory=dict)
    same_text: dict[int, list[str]] = field(default_factory=dict)
    variants: dict[str, str] = field(default_factory=dict)
    also_query: tuple[str, ...] = ()

    @property
    def folds(self) -> int:
        return max(self.qid_fold.values()) + 1

    def fold_keys(self, fold: int) -> list[str]:
        """The queries fold ``fold`` holds out (qids of the trained collection)."""
        return sorted(q for q, f in self.qid_fold.items() if f == fold)

    def training_keys(self, fold: int | None) -> list[str]:
        """The queries a model trains on: every query with pairs, less the excluded ones, less
        (for a fold's model) the fold's own queries and those asking a held-out question; a
        query's other texts (``variants``) go where the query goes."""
        dropped = set(self.excluded)
        if fold is not None:
            dropped |= set(self.fold_keys(fold)) | set(self.same_text.get(fold, []))
        keys = set(self.examples["key"]) - dropped
        return sorted(k for k in keys if self.variants.get(k) not in dropped)

    def _owners(self) -> pd.Series:
        """The query key of each example (a query's other texts: their query's)."""
        return self.examples["key"].map(lambda key: self.variants.get(key, key))

    def fingerprint(self) -> str:
        """Of the data: every collection's fingerprint and role, the dimension, its scales."""
        payload = json.dumps({"dimension": self.dimension, "sources": self.sources}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]

    def overlap_record(self) -> dict[str, Any]:
        """What ``training.json`` records of the questions shared between collections."""
        return {
            "rule": "normalised query texts equal (case, punctuation and spacing ignored) or "
            f"their word sets at Jaccard similarity >= {NEAR_DUPLICATE}",
            "excluded": dict(sorted(self.excluded.items())),
            "same_text_across_folds": {str(f): keys for f, keys in sorted(self.same_text.items())},
            "counts": {
                "excluded_queries": len(self.excluded),
                "excluded_pairs": int(self._owners().isin(set(self.excluded)).sum()),
                "same_text_across_folds": sum(len(keys) for keys in self.same_text.values()),
            },
        }


def gather(
    collection: Collection,
    dimension: str,
    also: Sequence[Collection] = (),
    held_out: Sequence[Collection] = (),
    folds: int = 5,
    seed: int = 0,
    field: str = DEFAULT_FIELD,
    also_query: Sequence[str] = (),
) -> TrainingData:
    """The training data of ``dimension``: ``collection``'s judged pairs (cross-fitted over
    ``folds`` query-disjoint folds) plus those of ``also``, each query read from the topic
    ``field``, and again from each field of ``also_query`` where a collection has it (the trained
    one must); questions asked in ``collection`` or ``held_out`` are left out of ``also``, those
    asked in ``held_out`` out of everything."""
    _check_distinct(collection, also, held_out)
    _check_also_query(collection, field, also_query)
    main = _pairs(collection, dimension, "", field)
    _check_trainable(collection, dimension, main, folds)
    others = [_pairs(c, dimension, f"{c.name}/", field) for c in also]
    variants = [
        _variant_pairs(c, pairs, name)
        for c, pairs in zip([collection, *also], [main, *others], strict=True)
        for name in also_query
        if name in c.query_fields
    ]
    examples = pd.concat([main, *others, *variants], ignore_index=True)
    qid_fold = assign_folds(main["qid"].unique(), folds, seed)
    topics = collection.topics.astype({"qid": str})
    sources = [_source(collection, dimension, "trained (cross-fitted folds)")]
    sources += [_source(c, dimension, "also (added to training)") for c in also]
    sources += [_source(c, dimension, "held out (evaluated with fold=all)") for c in held_out]
    data = TrainingData(
        collection=collection,
        dimension=dimension,
        examples=examples,
        qid_fold=qid_fold,
        untrained_qids=sorted(set(topics["qid"]) - set(qid_fold)),
        query_hashes={q: query_hash(t) for q, t in _topic_texts(collection)},
        sources=sources,
        variants={k: k.rpartition(VARIANT_MARK)[0] for v in variants for k in v["key"]},
        also_query=tuple(also_query),
    )
    _find_overlaps(data, held_out, (field, *also_query))
    if data.examples.loc[~data._owners().isin(set(data.excluded)), "gain"].nunique() < 2:
        raise ConfigError(f"training {dimension!r}: after the overlaps, one grade is left")
    return data


def _check_distinct(
    collection: Collection, also: Sequence[Collection], held_out: Sequence[Collection]
) -> None:
    names = [collection.name, *(c.name for c in also), *(c.name for c in held_out)]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(
            f"training: collection(s) {', '.join(repeated)} named twice (the trained collection, "
            "also and held_out must all differ)"
        )


def _pairs(collection: Collection, dimension: str, prefix: str, field: str) -> pd.DataFrame:
    """The graded judgments of ``dimension`` whose document has text, with query and text."""
    qrels = collection.qrels(dimension, labels="graded").astype({"qid": str, "docno": str})
    candidates = collection.candidates().astype({"qid": str, "docno": str})
    frame = qrels.merge(candidates, on=["qid", "docno"], how="inner")
    frame = frame.drop_duplicates(["qid", "docno"], keep="last").reset_index(drop=True)
    question = frame["query"].fillna("").astype(str)
    query = question if field == DEFAULT_FIELD else frame["qid"].map(collection.topic_texts(field))
    return pd.DataFrame(
        {
            "key": prefix + frame["qid"],
            "source": collection.name,
            "qid": frame["qid"],
            "query": query.fillna("").astype(str),
            "question": question,
            "docno": frame["docno"],
            "text": frame["text"].fillna("").astype(str),
            "gain": frame["label"].astype(int),
            "weight": 1.0 / _gain_span(collection.dimensions[dimension]),
        },
        columns=list(EXAMPLE_COLUMNS),
    )


def _check_also_query(collection: Collection, field: str, also_query: Sequence[str]) -> None:
    for name in also_query:
        if name == field or also_query.count(name) > 1:
            raise ConfigError(
                f"training: also_query field {name!r} is the trained query field or named twice"
            )
        collection.topic_texts(name)  # an unknown field is one error naming the known ones


def _variant_pairs(collection: Collection, pairs: pd.DataFrame, name: str) -> pd.DataFrame:
    """``pairs`` again with the topic field ``name`` as the query, keyed ``KEY#name``; topics
    whose ``name`` text is their query text already (or missing) add nothing."""
    texts = pairs["qid"].map(collection.topic_texts(name)).fillna("").astype(str)
    kept = texts.map(normalise_query) != pairs["query"].map(normalise_query)
    kept &= texts.str.strip() != ""
    frame = pairs.assign(query=texts, key=pairs["key"] + VARIANT_MARK + name)[kept]
    return frame.reset_index(drop=True)


def _gain_span(scale: LabelScale) -> float:
    """Highest minus lowest gain the scale declares (at least 1)."""
    gains = [g.gain for g in scale.grades.values() if g.gain is not None]
    gains += [b.gain for b in scale.bins]
    return float(max(1, max(gains, default=1) - min(gains, default=0)))


def _check_trainable(
    collection: Collection, dimension: str, pairs: pd.DataFrame, folds: int
) -> None:
    gains = sorted(pairs["gain"].unique())
    if len(gains) < 2:
        what = f"grade {gains[0]} only" if gains else "no graded judgment with text"
        raise ConfigError(
            f"dimension {dimension!r} of collection {collection.name!r} has {what} among its "
            f"{len(pairs)} judged documents with text: nothing to learn an order from"
        )
    queries = pairs["qid"].nunique()
    if queries < folds:
        raise ConfigError(
            f"dimension {dimension!r} of collection {collection.name!r} has {queries} judged "
            f"queries, fewer than {folds} folds (use --folds {max(2, queries)} or fewer)"
        )


def _source(collection: Collection, dimension: str, role: str) -> dict[str, Any]:
    scale = collection.dimensions.get(dimension)
    return {
        "name": collection.name,
        "fingerprint": str(collection.meta.get("fingerprint", "")),
        "role": role,
        "label_scale": scale.to_json() if scale is not None else None,
    }


def same_question(mine: set[str], theirs: set[str]) -> bool:
    """Whether two sets of normalised question texts share a question: one text equal, or two
    texts whose word sets have a Jaccard similarity of at least ``NEAR_DUPLICATE``."""
    if mine & theirs:
        return True
    for text in mine:
        words = set(text.split())
        for other in theirs:
            others = set(other.split())
            if len(words & others) >= NEAR_DUPLICATE * len(words | others) > 0:
                return True
    return False


def _find_overlaps(
    data: TrainingData, held_out: Sequence[Collection], fields: Sequence[str]
) -> None:
    """Fill ``excluded`` and ``same_text`` (see ``TrainingData``). A query's texts are its
    topic query, its trained field and its other texts (``variants``); two queries ask the same
    when ``same_question``. A left-out query's other texts are left out with it."""
    queries = data.examples.drop_duplicates("key").set_index("key")
    texts_of: dict[str, set[str]] = {}
    for key, row in queries.iterrows():
        owner = data.variants.get(key, key)
        texts = {normalise_query(row["query"]), normalise_query(row["question"])} - {""}
        texts_of[owner] = texts_of.get(owner, set()) | texts
    main = _question_texts(data.collection, fields)
    held = [
        (f"{other.name}/{qid}", texts)
        for other in held_out
        for qid, texts in _question_texts(other, fields)
    ]
    for key, texts in texts_of.items():
        repeated = next((name for name, other in held if same_question(texts, other)), None)
        shared = next((qid for qid, other in main if same_question(texts, other)), None)
        if repeated is not None:
            data.excluded[key] = f"same question as held-out query {repeated}"
        elif key not in data.qid_fold and shared is not None:
            data.excluded[key] = f"same question as {data.collection.name}/{shared}"
    data.same_text = _same_text_across_folds(data, texts_of, main)


def _same_text_across_folds(
    data: TrainingData, texts_of: dict[str, set[str]], main: list[tuple[str, set[str]]]
) -> dict[int, list[str]]:
    """For each fold, the trained collection's queries of other folds that ask one of its
    questions (left out of that fold's model)."""
    found: dict[int, set[str]] = {}
    for key, fold in data.qid_fold.items():
        texts = texts_of.get(key, set())
        for twin, other_texts in main:
            other = data.qid_fold.get(twin)
            if other is None or other == fold or twin in data.excluded:
                continue
            if same_question(texts, other_texts):
                found.setdefault(fold, set()).add(twin)
    return {fold: sorted(keys) for fold, keys in sorted(found.items())}


def _question_texts(collection: Collection, fields: Sequence[str]) -> list[tuple[str, set[str]]]:
    """(qid, normalised texts: the topic's query, and each of ``fields`` the collection has)."""
    extras = [collection.topic_texts(f) for f in fields if f in collection.query_fields]
    return [
        (qid, {normalise_query(t) for t in [query, *(e.get(qid, "") for e in extras)]} - {""})
        for qid, query in _topic_texts(collection)
    ]


def _topic_texts(collection: Collection) -> list[tuple[str, str]]:
    topics = collection.topics
    return list(zip(topics["qid"].astype(str), topics["query"].fillna("").astype(str), strict=True))
