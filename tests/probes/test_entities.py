"""The entity pools of ``swap_entities`` (``nrp.probes.entities``): each query's pool holds the
named entities of its own judged documents only, NER runs once per document per collection
build (``entities.json`` beside the collection), and a second probe reads them back."""

from __future__ import annotations

import json

import pytest

from nrp import ingest
from nrp.collection.collection import Collection
from nrp.probes.entities import ENTITIES_FILE, find_entities, query_entities

MANIFEST = """\
name: entity-tiny
description: two queries whose documents name different places and companies
citation: nrp tests
data_root: .
dimensions:
  relevance:
    description: relevant or not
    grades: {0: "no", 1: "yes"}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: documents.tsv, holds: documents}
  - {format: table, path: qrels.tsv, holds: judgments, dimensions: [relevance]}
"""
DOCUMENTS = {
    "a1": "Pfizer sells the vaccine in Germany.",
    "a2": "The trial ran in France.",
    "b1": "Bayer opened a plant in Japan.",
}


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    root = tmp_path_factory.mktemp("entity-tiny")
    data = root / "data"
    data.mkdir()
    (data / "manifest.yaml").write_text(MANIFEST)
    (data / "topics.tsv").write_text("qid\tquery\nqa\tvaccine abroad\nqb\tnew plants\n")
    (data / "documents.tsv").write_text(
        "docno\ttext\n" + "".join(f"{d}\t{t}\n" for d, t in DOCUMENTS.items())
    )
    (data / "qrels.tsv").write_text("qid\tdocno\trelevance\nqa\ta1\t1\nqa\ta2\t0\nqb\tb1\t1\n")
    ingest(data / "manifest.yaml", indexes_dir=root / "ix")
    return Collection.load("entity-tiny", root / "ix")


JUDGED = {
    "qa": [("a1", DOCUMENTS["a1"]), ("a2", DOCUMENTS["a2"])],
    "qb": [("b1", DOCUMENTS["b1"])],
}


def test_each_query_draws_on_its_own_documents_and_the_cache_is_kept(collection):
    whole = find_entities(list(DOCUMENTS.values()))
    assert whole["GPE"] == ["France", "Germany", "Japan"]
    pools = query_entities(collection, JUDGED, ["qa"])
    assert list(pools) == ["qa"]
    assert pools["qa"]["GPE"] == ["France", "Germany"]  # Japan is qb's
    stored = json.loads((collection.path / ENTITIES_FILE).read_text())
    assert sorted(stored["docs"]) == ["a1", "a2"]  # qb's document was not run through NER
    assert stored["key"]["fingerprint"] == collection.meta["fingerprint"]
    # what is stored is what is served: a changed entry comes back as written
    stored["docs"]["a2"] = {"GPE": ["Atlantis"]}
    (collection.path / ENTITIES_FILE).write_text(json.dumps(stored))
    again = query_entities(collection, JUDGED, ["qa", "qb"])
    assert again["qa"]["GPE"] == ["Atlantis", "Germany"]
    assert again["qb"]["GPE"] == ["Japan"]
    assert sorted(json.loads((collection.path / ENTITIES_FILE).read_text())["docs"]) == [
        "a1", "a2", "b1"
    ]  # fmt: skip
    # another build (fingerprint) starts afresh
    stored = json.loads((collection.path / ENTITIES_FILE).read_text())
    stored["key"]["fingerprint"] = "another build"
    (collection.path / ENTITIES_FILE).write_text(json.dumps(stored))
    assert query_entities(collection, JUDGED, ["qa"])["qa"]["GPE"] == ["France", "Germany"]


def test_entities_found_in_two_processes_are_those_of_one(monkeypatch):
    """From SPLIT_TEXTS texts on, a forked child finds the second half's entities: the same
    entities per text, in order, as one process finds; and the NER runs only the ner pipe
    (the small English model's NER has a tok2vec of its own), with the same entities as with
    the shared tok2vec running too."""
    from nrp.probes import entities
    from nrp.probes.nlp import spacy_pipeline

    texts = [*DOCUMENTS.values(), "Nothing here.", "Roche is based in Basel, Switzerland."]
    one = list(entities._each_text_entities(texts))
    assert one[2] == {"GPE": ["Japan"], "ORG": ["Bayer"]} and one[3] == {}
    assert one[4] == {"GPE": ["Basel", "Switzerland"], "ORG": ["Roche"]}
    monkeypatch.setattr(entities, "SPLIT_TEXTS", 2)
    assert list(entities._each_text_entities(texts)) == one
    nlp = spacy_pipeline()
    assert entities._ner_pipes(nlp) == ["ner"]
    with nlp.select_pipes(enable=["tok2vec", "ner"]):
        shared = [sorted((e.text, e.label_) for e in doc.ents) for doc in nlp.pipe(texts)]
    with nlp.select_pipes(enable=["ner"]):
        alone = [sorted((e.text, e.label_) for e in doc.ents) for doc in nlp.pipe(texts)]
    assert alone == shared


def test_spacy_is_imported_without_torch_where_no_pipeline_can_need_it():
    """In a fresh process the probe's pipeline loads without importing torch (thinc imports it
    whenever it is installed, and no spaCy plugin that runs components on torch is installed
    here), finds the same entities, and torch is importable afterwards; a process that imported
    torch first keeps thinc's torch support."""
    import subprocess
    import sys

    from nrp.evaluators.heuristics import TORCH_PLUGINS, _torch_plugins

    assert not _torch_plugins(), f"a plugin of {TORCH_PLUGINS} is installed: the rule differs"
    probe = (
        "import sys\n"
        "{first}"
        "from nrp.probes.nlp import spacy_pipeline\n"
        "nlp = spacy_pipeline()\n"
        "import thinc.compat\n"
        "print('torch' in sys.modules, thinc.compat.has_torch)\n"
        "print(sorted((e.text, e.label_) for e in nlp('Roche is based in Basel.').ents))\n"
        "import torch\n"
        "print(float(torch.ones(2).sum()))\n"
    )
    for first, flags in (("", "False False"), ("import torch\n", "True True")):
        out = subprocess.run(
            [sys.executable, "-c", probe.format(first=first)],
            capture_output=True, text=True, check=True,
        ).stdout.splitlines()  # fmt: skip
        assert out == [flags, "[('Basel', 'GPE'), ('Roche', 'ORG')]", "2.0"]
