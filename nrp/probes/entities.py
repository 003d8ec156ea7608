"""Named entities of judged documents for ``swap_entities``: per query, found once per build.

``swap_entities`` replaces each named entity of an answer by another of its label. The pool it
draws from is the entities of the answer's own query's judged documents (D_q): entities a
reader of that topic would meet, and a cost proportional to the probed queries, not to the
collection (spaCy's NER over all 1,108 MEDIQA documents took 110 s of a 119 s probe of 30
answers). Each document's entities are found once per collection build and model: they are
kept in ``entities.json`` beside the collection (keyed by the collection's fingerprint and the
spaCy model's name and version; another build or model starts it afresh), so a second probe of
the same queries runs no NER on documents at all. Only the pipes NER reads run (``ner``, and
``tok2vec`` only when NER listens to it): the entities are those of the full pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from nrp.collection.collection import Collection
from nrp.forking import CAN_FORK, fork_call
from nrp.probes.nlp import spacy_pipeline
from nrp.tables import write_text

#: the file beside the collection that keeps each judged document's entities
ENTITIES_FILE = "entities.json"
#: spaCy entity labels ``swap_entities`` swaps (numbers are ``swap_numbers``'s)
ENTITY_LABELS = ("PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "DATE", "PRODUCT", "EVENT", "LAW")

Entities = dict[str, list[str]]  # label -> distinct entities, sorted
#: the least texts whose entities are found in two processes (``_each_text_entities``)
SPLIT_TEXTS = 32


def find_entities(texts: Sequence[str]) -> Entities:
    """label -> the distinct named entities of ``texts`` (sorted), for ``ENTITY_LABELS``."""
    found: dict[str, set[str]] = {}
    for entities in _each_text_entities(texts):
        for label, values in entities.items():
            found.setdefault(label, set()).update(values)
    return {label: sorted(values) for label, values in sorted(found.items())}


def _each_text_entities(texts: Sequence[str]) -> Iterable[Entities]:
    """Each text's entities (``ENTITY_LABELS``), in order. From ``SPLIT_TEXTS`` texts on, a
    forked child finds those of the second half while this process does the first (the model
    loaded before, shared by both: NER is most of a cold ``nrp probe``)."""
    nlp, texts = spacy_pipeline(), list(texts)
    if not CAN_FORK or len(texts) < SPLIT_TEXTS:
        return _entities_of(nlp, texts)
    from threadpoolctl import threadpool_limits

    half = len(texts) // 2
    # a BLAS thread each: two processes with two threads each ran no faster than one
    with threadpool_limits(limits=1, user_api="blas"):
        second = fork_call(partial(_entities_of, nlp, texts[half:]), "finding named entities")
        try:
            first = _entities_of(nlp, texts[:half])
        except BaseException:
            second.cancel()
            raise
        return first + second.result()


def _entities_of(nlp: Any, texts: list[str]) -> list[Entities]:
    with nlp.select_pipes(enable=_ner_pipes(nlp)):
        out = []
        for doc in nlp.pipe(texts, batch_size=64):
            found: dict[str, set[str]] = {}
            for entity in doc.ents:
                if entity.label_ in ENTITY_LABELS:
                    found.setdefault(entity.label_, set()).add(entity.text)
            out.append({label: sorted(values) for label, values in sorted(found.items())})
        return out


def _ner_pipes(nlp: Any) -> list[str]:
    """The pipes NER reads: itself, and the shared tok2vec only when NER listens to it (the
    English pipelines' NER has a tok2vec of its own: running the shared one too cost a third
    of the time, for the same entities)."""
    ner = nlp.get_pipe("ner")
    listens = any(node.name == "tok2vec-listener" for node in ner.model.walk())
    return ["tok2vec", "ner"] if listens and "tok2vec" in nlp.pipe_names else ["ner"]


def query_entities(
    collection: Collection, judged: Mapping[str, Sequence[tuple[str, str]]], qids: Iterable[str]
) -> dict[str, Entities]:
    """qid -> the entities of its judged documents, for each of ``qids``. ``judged``: qid ->
    its documents as (docno, text). Documents whose entities the cache lacks are run through
    NER and the cache written back."""
    qids = list(dict.fromkeys(qids))
    cache = _EntityCache(collection)
    missing = {
        docno: text for q in qids for docno, text in judged.get(q, ()) if docno not in cache.docs
    }
    if missing:
        found = _each_text_entities(list(missing.values()))
        cache.docs.update(zip(missing, found, strict=True))
        cache.save()
    pools = {}
    for qid in qids:
        merged: dict[str, set[str]] = {}
        for docno, _ in judged.get(qid, ()):
            for label, values in cache.docs[docno].items():
                merged.setdefault(label, set()).update(values)
        pools[qid] = {label: sorted(values) for label, values in sorted(merged.items())}
    return pools


class _EntityCache:
    """``ENTITIES_FILE`` of a collection: docno -> entities, valid for one build and model."""

    def __init__(self, collection: Collection):
        self.path = collection.path / ENTITIES_FILE
        self.key = {"fingerprint": collection.meta.get("fingerprint"), "model": _model_id()}
        self.docs: dict[str, Entities] = {}
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # absent or unreadable: found again
        if isinstance(stored, dict) and stored.get("key") == self.key:
            self.docs = dict(stored.get("docs") or {})

    def save(self) -> None:
        write_text(self.path, json.dumps({"key": self.key, "docs": self.docs}, sort_keys=True))


def _model_id() -> str:
    meta = spacy_pipeline().meta
    return f"{meta.get('lang')}_{meta.get('name')}-{meta.get('version')}"
