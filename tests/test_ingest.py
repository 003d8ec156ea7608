"""Ingest as a whole: cross-record checks, label maps, repeated judgments, D_q, idempotent and
atomic builds. Small hand-made collections with hand-checked expectations."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nrp import Collection, ingest
from nrp.errors import ConfigError, InputError

MANIFEST = """\
name: tiny
description: four documents, two topics
data_root: .
{repeated}
dimensions:
  relevance:
    grades: {{0: not relevant, 1: somewhat relevant, 2: highly relevant}}
  credibility:
    grades:
      0: not credible
      1: somewhat credible
      2: highly credible
      3: {{exclude: true, meaning: assessor could not judge}}
sources:
  - {{format: table, path: topics.tsv, holds: topics}}
  - {{format: table, path: docs.tsv, holds: documents}}
  - {{format: trec-qrels, path: rel.qrels, dimension: relevance}}
  - {{format: trec-qrels, path: cred.qrels, dimension: credibility}}
"""

TOPICS = "qid\tquery\nq1\tvitamin c colds\nq2\tibuprofen blood pressure\n"
DOCS = (
    "docno\ttext\n"
    "d1\tVitamin C does not prevent colds in most people.\n"
    "d2\tColds are caused by viruses.\n"
    "d3\tIbuprofen can raise blood pressure.\n"
    "d4\tA page nobody judged.\n"
)
REL = "q1 0 d1 2\nq1 0 d2 1\nq1 0 d9 0\nq2 0 d3 2\n"
CRED = "q1 0 d1 2\nq1 0 d2 3\nq2 0 d3 1\n"


def write_collection(folder: Path, rel: str = REL, cred: str = CRED, repeated: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "topics.tsv").write_text(TOPICS)
    (folder / "docs.tsv").write_text(DOCS)
    (folder / "rel.qrels").write_text(rel)
    (folder / "cred.qrels").write_text(cred)
    manifest = folder / "manifest.yaml"
    manifest.write_text(MANIFEST.format(repeated=repeated))
    return manifest


@pytest.fixture
def tiny(tmp_path):
    manifest = write_collection(tmp_path / "data")
    result = ingest(manifest, indexes_dir=tmp_path / "indexes")
    return Collection.load("tiny", tmp_path / "indexes"), result


def test_tables_have_pyterrier_columns_and_exact_rows(tiny):
    collection, result = tiny
    assert result.rebuilt and result.name == "tiny"
    assert collection.topics[["qid", "query"]].values.tolist() == [
        ["q1", "vitamin c colds"],
        ["q2", "ibuprofen blood pressure"],
    ]
    assert collection.docs["docno"].tolist() == ["d1", "d2", "d3", "d4"]
    assert collection.qrels("relevance").values.tolist() == [
        ["q1", "d1", 2],
        ["q1", "d2", 1],
        ["q1", "d9", 0],
        ["q2", "d3", 2],
    ]


def test_could_not_judge_is_excluded_by_default_and_kept_raw(tiny):
    collection, _ = tiny
    assert collection.qrels("credibility").values.tolist() == [["q1", "d1", 2], ["q2", "d3", 1]]
    raw = collection.qrels("credibility", labels="raw")
    assert raw.values.tolist() == [["q1", "d1", 2.0], ["q1", "d2", 3.0], ["q2", "d3", 1.0]]


def test_candidate_set_is_judged_documents_with_text(tiny):
    collection, _ = tiny
    # d9 is judged but has no text; d4 has text but nobody judged it.
    assert collection.judged_docs_for("q1")["docno"].tolist() == ["d1", "d2"]
    assert collection.candidates()[["qid", "docno"]].values.tolist() == [
        ["q1", "d1"],
        ["q1", "d2"],
        ["q2", "d3"],
    ]
    assert set(collection.candidates().columns) == {"qid", "query", "docno", "text"}


def test_unchanged_inputs_do_nothing_changed_inputs_rebuild(tmp_path):
    manifest = write_collection(tmp_path / "data")
    first = ingest(manifest, indexes_dir=tmp_path / "ix")
    store = tmp_path / "ix" / "tiny" / "collection.sqlite"
    mtime = store.stat().st_mtime_ns
    again = ingest(manifest, indexes_dir=tmp_path / "ix")
    assert first.rebuilt and not again.rebuilt
    assert store.stat().st_mtime_ns == mtime
    (tmp_path / "data" / "rel.qrels").write_text(REL.replace("q1 0 d2 1", "q1 0 d2 0"))
    changed = ingest(manifest, indexes_dir=tmp_path / "ix")
    assert changed.rebuilt and changed.fingerprint != first.fingerprint
    assert Collection.load("tiny", tmp_path / "ix").qrels("relevance")["label"].tolist() == [
        2,
        0,
        0,
        2,
    ]


def test_bad_input_on_rebuild_keeps_the_previous_collection(tmp_path):
    manifest = write_collection(tmp_path / "data")
    ingest(manifest, indexes_dir=tmp_path / "ix")
    (tmp_path / "data" / "rel.qrels").write_text(REL + "q2 0 d4\n")
    with pytest.raises(InputError, match=r"rel.qrels:5: "):
        ingest(manifest, indexes_dir=tmp_path / "ix")
    collection = Collection.load("tiny", tmp_path / "ix")
    assert len(collection.qrels("relevance")) == 4
    assert sorted(os.listdir(tmp_path / "ix" / "tiny")) == ["collection.sqlite"]


def test_bad_input_on_first_ingest_writes_nothing(tmp_path):
    manifest = write_collection(tmp_path / "data", rel=REL + "q1 0 d3 7\n")
    with pytest.raises(InputError) as err:
        ingest(manifest, indexes_dir=tmp_path / "ix")
    assert str(err.value).endswith(
        "rel.qrels:5: label '7' is outside the label scale of 'relevance' (declared: 0, 1, 2)"
    )
    assert not (tmp_path / "ix" / "tiny" / "collection.sqlite").exists()


def test_judgment_for_unknown_qid(tmp_path):
    manifest = write_collection(tmp_path / "data", cred=CRED + "q7 0 d1 2\n")
    with pytest.raises(InputError, match=r"cred.qrels:4: judgment for unknown qid 'q7'"):
        ingest(manifest, indexes_dir=tmp_path / "ix")


def test_conflicting_repeat_is_an_error_naming_both_places(tmp_path):
    manifest = write_collection(tmp_path / "data", rel=REL + "q1 0 d1 0\n")
    with pytest.raises(InputError) as err:
        ingest(manifest, indexes_dir=tmp_path / "ix")
    message = str(err.value)
    assert "rel.qrels:5: (q1, d1) judged twice in 'relevance' with different labels" in message
    assert "rel.qrels:1" in message
    assert "repeated_judgments.policy" in message


@pytest.mark.parametrize(
    ("policy", "gain", "raw"),
    [("max", 2, "2"), ("min", 0, "0"), ("first", 2, "2"), ("last", 1, "1"), ("mean", 1, "2|0|1")],
)
def test_declared_policy_resolves_repeats(tmp_path, policy, gain, raw):
    # d1 judged 2, then 0, then 1: max 2, min 0, first 2, last 1, mean 1.0 -> 1.
    repeated = f"repeated_judgments: {{policy: {policy}, reason: test}}"
    manifest = write_collection(
        tmp_path / "data", rel=REL + "q1 0 d1 0\nq1 0 d1 1\n", repeated=repeated
    )
    result = ingest(manifest, indexes_dir=tmp_path / "ix")
    collection = Collection.load("tiny", tmp_path / "ix")
    judgments = collection.judgments("relevance").set_index("docno")
    assert judgments.loc["d1", "grade"] == gain
    assert judgments.loc["d1", "raw_label"] == raw
    assert judgments.loc["d1", "lines"] == 3
    assert result.counts[f"conflicting repeated judgments resolved by policy '{policy}'"] == 1


def test_mean_policy_rounds_half_up(tmp_path):
    repeated = "repeated_judgments: {policy: mean, reason: test}"
    manifest = write_collection(tmp_path / "data", rel=REL + "q1 0 d2 2\n", repeated=repeated)
    ingest(manifest, indexes_dir=tmp_path / "ix")
    judgments = Collection.load("tiny", tmp_path / "ix").judgments("relevance").set_index("docno")
    assert judgments.loc["d2", "grade"] == 2  # mean of 1 and 2 is 1.5 -> 2
    assert judgments.loc["d2", "raw_value"] == 1.5
    # a mean that is no whole number keeps the raw labels of its dimension floats
    raw = Collection.load("tiny", tmp_path / "ix").qrels("relevance", labels="raw")
    assert raw["label"].dtype.kind == "f" and raw.set_index("docno").loc["d2", "label"] == 1.5


def test_identical_repeats_are_merged_and_counted(tmp_path):
    manifest = write_collection(tmp_path / "data", rel=REL + "q1 0 d1 2\n")
    result = ingest(manifest, indexes_dir=tmp_path / "ix")
    assert result.counts["repeated judgments with the same label merged"] == 1
    assert len(Collection.load("tiny", tmp_path / "ix").qrels("relevance")) == 4


def test_policy_without_reason_is_a_config_error(tmp_path):
    manifest = write_collection(tmp_path / "data", repeated="repeated_judgments: {policy: max}")
    with pytest.raises(
        ConfigError, match=r"manifest.yaml: repeated_judgments.policy 'max' needs a `reason`"
    ):
        ingest(manifest, indexes_dir=tmp_path / "ix")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda m: m.replace(
                "format: trec-qrels, path: rel.qrels", "format: nope, path: rel.qrels"
            ),
            r"manifest.yaml: sources\[2\]: unknown input format 'nope'",
        ),
        (
            lambda m: m.replace("dimension: relevance}", "dimension: relevance, colour: red}"),
            r"sources\[2\] \(trec-qrels\): unknown option\(s\) \['colour'\]",
        ),
        (
            lambda m: m.replace(", dimension: relevance}", "}"),
            r"sources\[2\] \(trec-qrels\): option 'dimension' is required",
        ),
        (
            lambda m: m.replace("path: rel.qrels", "path: missing.qrels"),
            r"missing.qrels: file not found",
        ),
        (
            lambda m: m.replace("dimension: credibility}", "dimension: novelty}"),
            r"cred.qrels:1: judgment in dimension 'novelty' that the manifest does not declare",
        ),
        (lambda m: m + "  - [oops\n", r"manifest.yaml:\d+: malformed YAML"),
        (lambda m: m.replace("name: tiny", "nmae: tiny"), r"unknown key\(s\) \['nmae'\]"),
    ],
)
def test_manifest_mistakes_name_the_manifest(tmp_path, edit, message):
    manifest = write_collection(tmp_path / "data")
    manifest.write_text(edit(manifest.read_text()))
    with pytest.raises((ConfigError, InputError), match=message):
        ingest(manifest, indexes_dir=tmp_path / "ix")
    assert not (tmp_path / "ix" / "tiny").exists()


def test_toml_manifest_gives_the_same_collection(tmp_path):
    write_collection(tmp_path / "data")
    toml = tmp_path / "data" / "manifest.toml"
    toml.write_text(
        textwrap.dedent("""\
        name = "tiny"
        data_root = "."
        [dimensions.relevance.grades]
        0 = "not relevant"
        1 = "somewhat relevant"
        2 = "highly relevant"
        [dimensions.credibility.grades]
        0 = "not credible"
        1 = "somewhat credible"
        2 = "highly credible"
        3 = { exclude = true, meaning = "assessor could not judge" }
        [[sources]]
        format = "table"
        path = "topics.tsv"
        holds = "topics"
        [[sources]]
        format = "table"
        path = "docs.tsv"
        holds = "documents"
        [[sources]]
        format = "trec-qrels"
        path = "rel.qrels"
        dimension = "relevance"
        [[sources]]
        format = "trec-qrels"
        path = "cred.qrels"
        dimension = "credibility"
    """)
    )
    ingest(toml, name="tiny-toml", indexes_dir=tmp_path / "ix")
    collection = Collection.load("tiny-toml", tmp_path / "ix")
    assert collection.qrels("credibility").values.tolist() == [["q1", "d1", 2], ["q2", "d3", 1]]


def test_cli_bad_input_one_line_nonzero_nothing_written(tmp_path):
    manifest = write_collection(tmp_path / "data", rel="q1 0 d1 2\nq1 0 d2\n")
    proc = subprocess.run(
        [sys.executable, "-m", "nrp", "ingest", str(manifest), "--indexes", str(tmp_path / "ix")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nrp: error: ") and "rel.qrels:2: " in lines[0]
    assert not (tmp_path / "ix" / "tiny").exists()


def test_cli_ingest_collections_info(tmp_path):
    manifest = write_collection(tmp_path / "data")

    def run(*args: str) -> str:
        command = [sys.executable, "-m", "nrp", *args, "--indexes", str(tmp_path / "ix")]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout

    assert "built collection tiny" in run("ingest", str(manifest))
    assert "up to date" in run("ingest", str(manifest))
    assert run("collections").startswith("tiny\t")
    info = run("info", "tiny")
    assert re.search(r"judged docnos without text +1\n", info)
    assert re.search(r"documents without judgments +1\n", info)
    assert re.search(r"\n  3 +excl\. +1  assessor could not judge\n", info)
    assert "min 1, p25 1.25, median 1.5, mean 1.5, p75 1.75, max 2; total 3" in info


@pytest.mark.slow
def test_killed_ingest_leaves_old_or_new_collection_never_a_part(tmp_path):
    """SIGKILL an ingest at several moments: the store is always absent or complete, and the
    next ingest cleans up what the killed one left."""
    data = tmp_path / "big"
    data.mkdir()
    n = 20000
    (data / "topics.tsv").write_text(
        "qid\tquery\n" + "".join(f"q{i}\tquery {i}\n" for i in range(50))
    )
    (data / "docs.tsv").write_text(
        "docno\ttext\n"
        + "".join(f"d{i}\tdocument number {i} " + "word " * 40 + "\n" for i in range(n))
    )
    (data / "rel.qrels").write_text("".join(f"q{i % 50} 0 d{i} {i % 3}\n" for i in range(n)))
    (data / "cred.qrels").write_text("".join(f"q{i % 50} 0 d{i} {i % 4}\n" for i in range(n)))
    manifest = data / "manifest.yaml"
    manifest.write_text(MANIFEST.format(repeated=""))
    indexes = tmp_path / "ix"
    store = indexes / "tiny" / "collection.sqlite"
    for delay in (0.3, 0.8, 1.2, 1.6, 2.2):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nrp",
                "ingest",
                str(manifest),
                "--force",
                "--indexes",
                str(indexes),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if store.exists():
            with sqlite3.connect(store) as db:
                assert db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0] == 2 * n
    result = ingest(manifest, indexes_dir=indexes)
    assert [p.name for p in (indexes / "tiny").iterdir()] == ["collection.sqlite"]
    assert len(Collection.load("tiny", indexes).qrels("relevance")) == n
    assert result.name == "tiny"
