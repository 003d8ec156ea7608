"""ir_datasets collections: the ``irds`` manifest source and ``nrp ingest irds:ID``, on datasets
registered from files the tests write (tests/formats/irds_datasets.py); nothing downloads."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import irds_datasets
import pandas as pd
import pytest

import nrp
from nrp import Collection, ingest
from nrp.errors import ConfigError, InputError

ROOT = Path(nrp.__file__).resolve().parents[1]  # the nrp this test imported
HELPER = Path(irds_datasets.__file__)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """(prefix, folder) of the datasets registered in this process."""
    prefix = f"nrp-test-{uuid.uuid4().hex[:8]}"
    folder = irds_datasets.write_files(tmp_path_factory.mktemp("irds"))
    irds_datasets.register(prefix, folder)
    return prefix, folder


def nrp(datasets, *args: str) -> subprocess.CompletedProcess:
    """``nrp ARGS`` in a new process that first registers the same datasets."""
    prefix, folder = datasets
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HELPER.parent)])}
    return subprocess.run(
        [sys.executable, str(HELPER), prefix, str(folder), *args],
        capture_output=True,
        text=True,
        env=env,
    )


def qrels(collection: Collection, dimension: str) -> list[tuple]:
    return list(collection.qrels(dimension).itertuples(index=False, name=None))


def test_cli_ingests_a_dataset_by_id_with_its_qrels_defs(datasets, tmp_path):
    prefix, _ = datasets
    ix = tmp_path / "ix"
    proc = nrp(datasets, "ingest", f"irds:{prefix}/tiny", "--indexes", str(ix))
    assert proc.returncode == 0, proc.stderr
    name = f"{prefix}-tiny"  # the id, / as -
    assert proc.stdout == f"built collection {name} at {ix / name}\n"
    collection = Collection.load(name, ix)
    assert collection.meta["manifest_path"] == f"irds:{prefix}/tiny"
    topics = collection.topics
    assert topics["qid"].tolist() == ["q1", "q2"]
    assert topics["query"].tolist() == ["vitamin c colds", "ibuprofen blood pressure"]
    assert topics["narrative"].iloc[0] == "Say whether it prevents colds."
    assert pd.isna(topics["narrative"].iloc[1])  # an empty narrative is none
    assert collection.topic_texts("description") == {
        "q1": "Does vitamin C prevent colds?",
        "q2": "Does ibuprofen raise blood pressure?",
    }
    docs = collection.docs.set_index("docno")["text"].to_dict()
    assert docs == {
        "d1": "Vitamin C does not prevent colds in most people.",
        "d2": "Colds are caused by viruses.",
        "d3": "Ibuprofen can raise blood pressure.",
        "d4": "A page nobody judged.",
    }  # d5 has no text
    assert collection.meta["counts"]["ir_datasets documents without text skipped"] == 1
    assert list(collection.dimensions) == ["relevance"]
    scale = collection.dimensions["relevance"]
    assert {g.label: (g.gain, g.meaning) for g in scale.grades.values()} == {
        "0": (0, "not relevant"),
        "1": (1, "relevant"),
        "2": (2, "highly relevant"),
    }
    assert qrels(collection, "relevance") == [
        ("q1", "d1", 2), ("q1", "d2", 1), ("q1", "d5", 0), ("q2", "d3", 2), ("q2", "d1", 0),
    ]  # fmt: skip
    candidates = collection.candidates()
    assert list(zip(candidates["qid"], candidates["docno"], strict=True)) == [
        ("q1", "d1"), ("q1", "d2"), ("q2", "d1"), ("q2", "d3"),
    ]  # fmt: skip

    again = nrp(datasets, "ingest", f"irds:{prefix}/tiny", "--indexes", str(ix))
    assert again.returncode == 0, again.stderr
    assert "is up to date" in again.stdout
    named = nrp(datasets, "ingest", f"irds:{prefix}/tiny", "--name", "mine", "--indexes", str(ix))
    assert named.returncode == 0, named.stderr
    assert qrels(Collection.load("mine", ix), "relevance") == qrels(collection, "relevance")


def test_cli_maps_qrels_fields_to_dimensions(datasets, tmp_path):
    prefix, _ = datasets
    ix = tmp_path / "ix"
    proc = nrp(
        datasets, "ingest", f"irds:{prefix}/graded", "--dimension", "topical",
        "--dimension", "trustworthiness=credibility", "--indexes", str(ix),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    collection = Collection.load(f"{prefix}-graded", ix)
    assert list(collection.dimensions) == ["topical", "credibility"]
    assert qrels(collection, "topical") == [("q1", "d1", 2), ("q1", "d2", 1), ("q2", "d3", 2)]
    assert qrels(collection, "credibility") == [("q1", "d1", 1), ("q1", "d2", 0), ("q2", "d3", 1)]
    # qrels_defs describe the relevance grades; another field's scale is the labels it uses
    assert collection.dimensions["topical"].grades["2"].meaning == "highly relevant"
    credibility = collection.dimensions["credibility"].grades
    assert {label: grade.gain for label, grade in credibility.items()} == {"0": 0, "1": 1}


MANIFEST = """\
name: combined
dimensions:
  relevance:
    grades: {{0: not relevant, 1: relevant, 2: highly relevant}}
  credibility:
    grades:
      -1: {{grade: 0, meaning: junk}}
      0: not credible
      1: credible
sources:
  - {{format: irds, dataset: {prefix}/tiny, holds: [topics, documents], documents: {documents}}}
  - {{format: irds, dataset: {prefix}/tiny, holds: [judgments], dimension: relevance}}
  - {{format: irds, dataset: {prefix}/credibility, holds: [judgments], dimension: credibility}}
"""


@pytest.mark.parametrize("documents", ["all", "judged"])
def test_manifest_sources_combine_datasets_and_qrels(datasets, tmp_path, documents):
    prefix, _ = datasets
    manifest = tmp_path / "combined.yaml"
    manifest.write_text(MANIFEST.format(prefix=prefix, documents=documents))
    result = ingest(manifest, indexes_dir=tmp_path / "ix")
    collection = Collection(result.path)
    assert qrels(collection, "relevance") == [
        ("q1", "d1", 2), ("q1", "d2", 1), ("q1", "d5", 0), ("q2", "d3", 2), ("q2", "d1", 0),
    ]  # fmt: skip
    assert qrels(collection, "credibility") == [("q1", "d1", 1), ("q2", "d3", 0), ("q2", "d2", 0)]
    judgments = collection.judgments("credibility")
    assert judgments["raw_label"].tolist() == ["1", "0", "-1"]
    # judged: the documents the dataset's own qrels judge (d1, d2, d3; d5 has no text)
    expected = ["d1", "d2", "d3", "d4"] if documents == "all" else ["d1", "d2", "d3"]
    assert collection.docs["docno"].tolist() == expected


def test_library_ingests_an_id_and_notices_changed_qrels(tmp_path):
    prefix = f"nrp-test-{uuid.uuid4().hex[:8]}"
    folder = irds_datasets.write_files(tmp_path / "data")
    irds_datasets.register(prefix, folder)
    first = ingest(f"irds:{prefix}/tiny", indexes_dir=tmp_path / "ix")
    assert (first.name, first.rebuilt) == (f"{prefix}-tiny", True)
    assert ingest(f"irds:{prefix}/tiny", indexes_dir=tmp_path / "ix").rebuilt is False
    with open(folder / "qrels", "a", encoding="utf-8") as handle:
        handle.write("q2 0 d2 1\n")
    changed = ingest(f"irds:{prefix}/tiny", indexes_dir=tmp_path / "ix")
    assert changed.rebuilt is True and changed.fingerprint != first.fingerprint
    assert qrels(Collection(changed.path), "relevance")[-1] == ("q2", "d2", 1)
    with pytest.raises(ConfigError, match=r"irds:.*/tiny: --data-root does not apply"):
        ingest(f"irds:{prefix}/tiny", indexes_dir=tmp_path / "ix", data_root=tmp_path)


def test_a_label_outside_the_declared_scale_names_the_qrel(datasets, tmp_path):
    prefix, _ = datasets
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "dimensions: {relevance: {grades: {0: no, 1: yes}}}\n"
        f"sources: [{{format: irds, dataset: {prefix}/tiny, dimension: relevance}}]\n"
    )
    with pytest.raises(InputError) as caught:
        ingest(manifest, indexes_dir=tmp_path / "ix")
    assert str(caught.value) == (
        f"irds:{prefix}/tiny qrels:1: label '2' is outside the label scale of 'relevance' "
        "(declared: 0, 1)"
    )
    assert not (tmp_path / "ix").exists()


@pytest.mark.parametrize(
    ("source", "options", "problem"),
    [
        # close ids, the closest first (here the other test ids are close too)
        ("tinny", [], "unknown ir_datasets id '{prefix}/tinny'; did you mean {prefix}/tiny"),
        ("no-qrels", [], "the dataset has no qrels (it provides: queries, docs)"),
        (
            "tiny",
            ["--dimension", "trust=credibility"],
            "no qrels field trust (the fields: query_id, doc_id, relevance, iteration)",
        ),
    ],
)
def test_cli_errors_are_one_line_and_write_nothing(datasets, tmp_path, source, options, problem):
    prefix, _ = datasets
    ix = tmp_path / "ix"
    proc = nrp(datasets, "ingest", f"irds:{prefix}/{source}", *options, "--indexes", str(ix))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    where = f"irds:{prefix}/{source}" + (" qrels" if options else "")
    assert proc.stderr.startswith(f"nrp: error: {where}: {problem.format(prefix=prefix)}")
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n")
    assert not ix.exists()


def test_cli_says_a_download_is_needed_and_writes_nothing(datasets, tmp_path):
    prefix, _ = datasets
    ix = tmp_path / "ix"
    proc = nrp(datasets, "ingest", f"irds:{prefix}/remote", "--indexes", str(ix))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    # ir_datasets logs its own failed attempt first; nrp's error is the last line, and one line
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(
        f"nrp: error: irds:{prefix}/remote: ir_datasets could not download the docs "
        "(ConnectionError: "
    )
    assert last.endswith(
        "a real dataset needs the network once, then ir_datasets reads it from its cache "
        "($IR_DATASETS_HOME, default ~/.ir_datasets)"
    )
    assert not ix.exists()


def test_cli_options_that_do_not_apply(datasets, tmp_path):
    prefix, _ = datasets
    manifest = tmp_path / "m.yaml"
    manifest.write_text("dimensions: {relevance: {grades: {0: no}}}\nsources: []\n")
    proc = nrp(datasets, "ingest", str(manifest), "--dimension", "relevance")
    assert proc.returncode == 2
    assert proc.stderr == (
        f"nrp: error: {manifest}: --dimension applies to irds:ID; a manifest declares its own\n"
    )
    proc = nrp(datasets, "ingest", f"irds:{prefix}/tiny", "--data-root", str(tmp_path))
    assert proc.returncode == 2
    assert proc.stderr == (
        f"nrp: error: irds:{prefix}/tiny: --data-root applies to a manifest file, not irds:ID\n"
    )


def test_a_source_of_ids_takes_no_path(datasets, tmp_path):
    prefix, _ = datasets
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "dimensions: {relevance: {grades: {0: no}}}\n"
        f"sources: [{{format: irds, path: x, dataset: {prefix}/tiny, dimension: relevance}}]\n"
    )
    with pytest.raises(Exception, match=r"sources\[0\] \(irds\): reads no file, so it takes no"):
        ingest(manifest, indexes_dir=tmp_path / "ix")
