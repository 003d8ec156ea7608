"""Hostile and careless input (issue 16), through the real ``nrp`` command in-process: each case
ends in one line ``nrp: error: FILE:LINE: ...`` and exit 2, with nothing written, or in the
right result. Every test here failed on the code before the fix (a silent wrong result, a
traceback, or a message holding megabytes of input)."""

from __future__ import annotations

import contextlib
import io
import os
import unicodedata
from pathlib import Path

import pandas as pd
import pytest

from nrp import Collection
from nrp.cli import main
from nrp.collection.reading import MAX_FIELD_CHARS, MAX_LINE_CHARS
from nrp.errors import InputError
from nrp.experiments.schema import load_experiment

DEMO = Path(__file__).resolve().parents[1] / "nrp" / "data" / "demo"

MANIFEST = """\
name: tiny
dimensions:
  relevance:
    grades: {0: not relevant, 1: relevant, 2: highly relevant}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: docs.csv, holds: documents}
  - {format: trec-qrels, path: rel.qrels, dimension: relevance}
"""
TOPICS = "qid\tquery\nq1\tvitamin c colds\nq2\tibuprofen blood pressure\n"
DOCS = 'docno,text\nd1,"Vitamin C does not prevent colds."\nd2,Colds are viruses.\n'
REL = "q1 0 d1 2\nq1 0 d2 1\nq2 0 d2 0\n"
#: what the CLI adds to the error of an answer row that cannot be read
SKIP_HINT = " (--skip-invalid leaves such rows out, and lists them)"


def nrp(*argv: str | Path) -> tuple[int, str, str]:
    """``nrp ARGV`` in this process: exit code, stdout, stderr (a traceback escapes)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in argv])
    return code, out.getvalue(), err.getvalue()


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrp: error: "), err
    return lines[0]


def write_tiny(folder: Path, manifest: str = MANIFEST, **files: str) -> Path:
    """The tiny collection in ``folder`` (``files`` replace its topics, docs or rel file)."""
    folder.mkdir(parents=True, exist_ok=True)
    contents = {"topics.tsv": TOPICS, "docs.csv": DOCS, "rel.qrels": REL}
    contents.update({name.replace("_", "."): text for name, text in files.items()})
    for name, text in contents.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "manifest.yaml").write_text(manifest)
    return folder / "manifest.yaml"


def ingest_fails(tmp_path: Path, manifest: Path) -> str:
    """The one-line error of ``nrp ingest MANIFEST``; no store (nor a part of one) is left."""
    indexes = tmp_path / "ix"
    line = one_line_error(*nrp("ingest", manifest, "--indexes", indexes)[::2])
    store = indexes / "tiny"
    assert not store.exists() or list(store.iterdir()) == []
    return line


# --- 3. delimited files: unclosed quotes, limits, long values -------------------------------------


def test_an_unclosed_quote_is_an_error_at_the_line_it_opens(tmp_path):
    manifest = write_tiny(tmp_path / "data", docs_csv='docno,text\nd1,"open\nd2,B\n')
    line = ingest_fails(tmp_path, manifest)
    assert line == (
        f"nrp: error: {tmp_path}/data/docs.csv:2: a quoted field opens here and is never closed "
        '(missing ")'
    )


def test_the_open_quote_is_found_after_a_multi_line_field_and_a_literal_quote(tmp_path):
    docs = 'docno,text\nd1,"two\nlines"\nd2,"an ""escaped"" quote"\nd3,a "literal" one\nd4,"open\n'
    manifest = write_tiny(tmp_path / "data", docs_csv=docs + "d5,text\n")
    assert "docs.csv:6: a quoted field opens here and is never closed" in ingest_fails(
        tmp_path, manifest
    )


def test_an_unclosed_quote_in_an_answer_table_is_an_error(tmp_path):
    indexes = tmp_path / "ix"
    assert nrp("ingest", DEMO / "manifest.yaml", "--indexes", indexes)[0] == 0
    answers = tmp_path / "answers.csv"
    answers.write_text('llm,prompt,qid,text\nm,p,d1,"Vitamin C\nm,p,d2,Ibuprofen\n')
    out = tmp_path / "out"
    code, _, err = nrp("score", "demo", answers, "--ranker", "tfidf", "--out", out,
                       "--indexes", indexes)  # fmt: skip
    assert f"{answers}:2: a quoted field opens here" in one_line_error(code, err)
    assert not out.exists()


def test_a_field_over_the_limit_is_an_error_naming_its_line(tmp_path):
    huge = "x" * (MAX_FIELD_CHARS + 1)
    manifest = write_tiny(tmp_path / "data", docs_csv=f"docno,text\nd1,short\nd2,{huge}\n")
    line = ingest_fails(tmp_path, manifest)
    assert "docs.csv:3: a field of the record starting here is over the limit of " in line
    assert len(line) < 400


def test_a_line_over_the_limit_is_an_error_naming_it(tmp_path):
    huge = "q1 0 d1 " + "2" * (MAX_LINE_CHARS + 1)
    manifest = write_tiny(tmp_path / "data", rel_qrels=f"q1 0 d2 1\n{huge}\n")
    line = ingest_fails(tmp_path, manifest)
    assert f"rel.qrels:2: line of {MAX_LINE_CHARS + 9:,} characters, over the limit of" in line


def test_an_error_quotes_at_most_200_characters_of_a_5_mb_label(tmp_path):
    label = "7" + "x" * 5_000_000
    manifest = write_tiny(tmp_path / "data", rel_qrels=f"q1 0 d1 2\nq1 0 d2 {label}\n")
    line = ingest_fails(tmp_path, manifest)
    assert f"rel.qrels:2: label {label[:200]!r}... (5,000,001 characters) is outside" in line
    assert len(line) < 500


def test_a_huge_header_is_quoted_in_part(tmp_path):
    header = "docno," + "y" * 100_000 + ",docno"
    manifest = write_tiny(tmp_path / "data", docs_csv=f"{header}\nd1,a,b\n")
    line = ingest_fails(tmp_path, manifest)
    assert "docs.csv:1: header names a column twice: ['docno', 'yyy" in line
    assert len(line) < 500


# --- 4. integers out of range, --out -------------------------------------------------------------


@pytest.fixture
def demo(tmp_path) -> Path:
    indexes = tmp_path / "ix"
    assert nrp("ingest", DEMO / "manifest.yaml", "--indexes", indexes)[0] == 0
    return indexes


def score(indexes: Path, answers: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return nrp("score", "demo", answers, "--ranker", "tfidf", "--out", out, "--indexes", indexes,
               *extra)  # fmt: skip


@pytest.mark.parametrize(
    ("suffix", "row", "shown"),
    [
        (".jsonl", '{"llm": "m", "prompt": "p", "qid": "d1", "sample": 1180591620717411303424, '
         '"text": "Vitamin C."}', "1180591620717411303424"),
        (".csv", "llm,prompt,qid,sample,text\nm,p,d1,1180591620717411303424,Vitamin C.",
         "'1180591620717411303424'"),
        (".csv", "llm,prompt,qid,sample,text\nm,p,d1," + "9" * 5000 + ",Vitamin C.",
         "'" + "9" * 200 + "'... (5,000 characters)"),
    ],
)  # fmt: skip
def test_a_sample_out_of_range_is_a_one_line_error(demo, tmp_path, suffix, row, shown):
    answers = tmp_path / f"answers{suffix}"
    answers.write_text(row + "\n")
    out = tmp_path / "out"
    line = one_line_error(*score(demo, answers, out)[::2])
    where = 1 if suffix == ".jsonl" else 2
    assert line == (
        f"nrp: error: {answers}:{where}: sample {shown} is out of range (0 to 2,147,483,647)"
        + SKIP_HINT
    )
    assert not out.exists()


def test_a_json_number_too_long_to_convert_is_a_one_line_error(demo, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"llm": "m", "prompt": "p", "qid": "d1", "sample": ' + "9" * 5000 + "}\n")
    line = one_line_error(*score(demo, answers, tmp_path / "out")[::2])
    assert f"{answers}:1: invalid JSON: Exceeds the limit (4300 digits)" in line


def test_the_sample_range_ends_at_2_to_the_31_minus_1(demo, tmp_path):
    answers = tmp_path / "answers.jsonl"
    row = '{"llm": "m", "prompt": "p", "qid": "d1", "sample": %d, "text": "Vitamin C."}\n'
    answers.write_text(row % 2147483648)
    line = one_line_error(*score(demo, answers, tmp_path / "refused")[::2])
    assert line.endswith(":1: sample 2147483648 is out of range (0 to 2,147,483,647)" + SKIP_HINT)
    answers.write_text(row % 2147483647)
    code, _, err = score(demo, answers, tmp_path / "out")
    assert code == 0, err
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert results["answer_id"].unique().tolist() == ["m/p/d1/2147483647"]


def test_a_gain_out_of_range_is_a_one_line_error(tmp_path):
    manifest = write_tiny(
        tmp_path / "data",
        MANIFEST.replace("2: highly relevant", "2: {grade: 1180591620717411303424}"),
    )
    line = ingest_fails(tmp_path, manifest)
    assert line.endswith(
        "manifest.yaml: dimensions.relevance.grades.2: gain 1180591620717411303424 is out of "
        "range (0 to 2,147,483,647)"
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("random:seed=1180591620717411303424", "parameter seed='1180591620717411303424' is out "
         "of range (-2,147,483,648 to 2,147,483,647)"),
        ("bm25:k1=nan", "parameter k1='nan' must be a finite number"),
    ],
)  # fmt: skip
def test_a_ranker_parameter_out_of_range_is_a_one_line_error(demo, tmp_path, spec, problem):
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"llm": "m", "prompt": "p", "qid": "d1", "text": "Vitamin C."}\n')
    code, _, err = nrp("score", "demo", answers, "--ranker", spec, "--out", tmp_path / "out",
                       "--indexes", demo)  # fmt: skip
    assert one_line_error(code, err).endswith(problem)


def test_score_out_naming_an_existing_file_is_a_one_line_error_before_any_work(demo, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"llm": "m", "prompt": "p", "qid": "d1", "text": "Vitamin C."}\n')
    taken = tmp_path / "results.txt"
    taken.write_text("keep me\n")
    code, out, err = score(demo, answers, taken)
    assert one_line_error(code, err) == f"nrp: error: --out {taken}: exists and is not a folder"
    assert out == "" and taken.read_text() == "keep me\n"
    code, _, err = score(demo, answers, taken / "sub")
    assert one_line_error(code, err) == (
        f"nrp: error: --out {taken / 'sub'}: {taken} is a file, not a folder"
    )


def test_every_out_option_refuses_the_wrong_kind_of_path(demo, tmp_path):
    taken = tmp_path / "taken.txt"
    taken.write_text("x\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    commands = [
        ("summary", tmp_path / "results", "--out", taken),
        ("agreement", "demo", "--rankers", "tfidf", "--indexes", demo, "--out", taken),
        ("evaluate", "demo", DEMO / "answers.jsonl", "--evaluators", "length", "--out", taken,
         "--indexes", demo),
        ("report", tmp_path / "results", "--out", taken),
        ("validate", "demo", "--rankers", "tfidf", "--indexes", demo, "--out", folder),
        ("meta", tmp_path / "scores.csv", tmp_path / "human.csv", "--out", taken),
        ("train", "demo", "--dimension", "relevance", "--indexes", demo, "--out", taken),
        ("generate", "demo", "--llm", "echo", "--prompts", "none", "--indexes", demo,
         "--out", folder),
    ]  # fmt: skip
    for argv in commands:
        line = one_line_error(*nrp(*argv)[::2])
        assert line.startswith(f"nrp: error: --out {argv[argv.index('--out') + 1]}: "), line


# --- 5. duplicate keys ---------------------------------------------------------------------------


def test_a_dimension_declared_twice_in_yaml_is_an_error_at_its_line(tmp_path):
    manifest = write_tiny(
        tmp_path / "data",
        MANIFEST.replace(
            "sources:", "  relevance:\n    grades: {0: no, 1: yes, 2: very, 3: best}\nsources:"
        ),
    )
    assert ingest_fails(tmp_path, manifest) == (
        f"nrp: error: {manifest}:5: malformed YAML: key 'relevance' given twice (first at line 3)"
    )


def test_a_key_given_twice_is_refused_but_a_merged_key_may_be_overridden(tmp_path):
    topics = "  - {format: table, path: topics.tsv, holds: topics}"
    merged = "  - {<<: {format: table, holds: documents}, path: topics.tsv, holds: topics}"
    twice = "  - {format: table, path: topics.tsv, holds: documents, holds: topics}"
    manifest = write_tiny(tmp_path / "data", MANIFEST.replace(topics, twice))
    assert f"{manifest}:6: malformed YAML: key 'holds' given twice" in ingest_fails(
        tmp_path, manifest
    )
    manifest.write_text(MANIFEST.replace(topics, merged))
    code, _, err = nrp("ingest", manifest, "--indexes", tmp_path / "ix")
    assert code == 0, err
    assert Collection.load("tiny", tmp_path / "ix").topics["qid"].tolist() == ["q1", "q2"]


def test_a_table_declared_twice_in_toml_is_an_error_at_its_line(tmp_path):
    write_tiny(tmp_path / "data")
    manifest = tmp_path / "data" / "manifest.toml"
    manifest.write_text(
        'name = "tiny"\n'
        "[dimensions.relevance.grades]\n"
        '0 = "no"\n'
        "[dimensions.relevance.grades]\n"
        '1 = "yes"\n'
    )
    line = ingest_fails(tmp_path, manifest)
    assert line.startswith(f"nrp: error: {manifest}:4: malformed TOML: Cannot declare")


def test_a_key_given_twice_in_an_experiment_file_is_an_error_at_its_line(tmp_path):
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text("name: x\ncollection: demo\nname: y\n")
    with pytest.raises(InputError, match=r"experiment.yaml:3: not YAML: .*key 'name' given twice"):
        load_experiment(experiment)


# --- manifest sources stay under the data root ---------------------------------------------------


def test_a_source_outside_the_data_root_is_refused_unless_the_manifest_allows_it(tmp_path):
    (tmp_path / "outside.tsv").write_text(TOPICS)
    text = MANIFEST.replace("path: topics.tsv", "path: ../outside.tsv")
    manifest = write_tiny(tmp_path / "data", text)
    line = ingest_fails(tmp_path, manifest)
    assert line == (
        f"nrp: error: {manifest}: sources[0] reads '{tmp_path}/data/../outside.tsv', outside the "
        f"data root {tmp_path}/data; say `allow_outside_root: true` in the manifest to allow it"
    )
    manifest.write_text("allow_outside_root: true\n" + text)
    code, _, err = nrp("ingest", manifest, "--indexes", tmp_path / "ix")
    assert code == 0, err


def test_a_link_leading_out_of_the_data_root_is_refused(tmp_path):
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "topics.tsv").write_text(TOPICS)
    manifest = write_tiny(tmp_path / "data")
    os.remove(tmp_path / "data" / "topics.tsv")
    (tmp_path / "data" / "topics.tsv").symlink_to(tmp_path / "secret" / "topics.tsv")
    assert "sources[0] reads" in ingest_fails(tmp_path, manifest)


def test_a_narratives_file_outside_the_data_root_is_refused(tmp_path):
    manifest = write_tiny(
        tmp_path / "data",
        MANIFEST.replace(
            "{format: table, path: topics.tsv, holds: topics}",
            "{format: trec-topics-xml, path: topics.xml, narratives: ../../etc/passwd}",
        ),
    )
    line = ingest_fails(tmp_path, manifest)
    assert f"sources[0] reads '{tmp_path}/data/../../etc/passwd', outside the data root" in line


# --- identifiers are read in Unicode NFC ---------------------------------------------------------


NFC_QID = unicodedata.normalize("NFC", "caf\u00e9")
NFD_QID = unicodedata.normalize("NFD", NFC_QID)


def test_nfd_and_nfc_ids_meet_in_ingest_and_in_answers(tmp_path):
    assert NFC_QID != NFD_QID
    manifest = write_tiny(
        tmp_path / "data",
        topics_tsv=f"qid\tquery\n{NFC_QID}\tcoffee and sleep\n",
        docs_csv="docno,text\nd1,Coffee late keeps you awake.\nd2,Tea has less caffeine.\n",
        rel_qrels=f"{NFD_QID} 0 d1 2\n{NFD_QID} 0 d2 1\n",
    )
    indexes = tmp_path / "ix"
    code, _, err = nrp("ingest", manifest, "--indexes", indexes)
    assert code == 0, err
    collection = Collection.load("tiny", indexes)
    assert collection.qrels("relevance")["qid"].tolist() == [NFC_QID, NFC_QID]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        f'{{"llm": "m", "prompt": "p", "qid": "{NFD_QID}", "text": "Coffee keeps you awake."}}\n',
        encoding="utf-8",
    )
    code, _, err = nrp("score", "tiny", answers, "--ranker", "tfidf", "--out", tmp_path / "out",
                       "--indexes", indexes)  # fmt: skip
    assert code == 0, err
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert set(results["qid"]) == {NFC_QID}
    assert set(results["answer_id"]) == {f"m/p/{NFC_QID}/0"}


# --- crashes the fuzzer (tests/test_fuzz_readers.py) found -----------------------------------


@pytest.mark.parametrize(
    ("ident", "problem"),
    [("\u00b2", "qid '²' is not a number"), ("9" * 5000, None)],
)
def test_cranfield_ids_that_int_cannot_read(tmp_path, ident, problem):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "cran.qry").write_text(".I 001\n.W\nwhat is lift\n")
    (folder / "cranqrel").write_text(f"{ident} 1 2\n")
    (folder / "cran.all.1400").write_text(".I 1\n.T\nlift\n.W\nlift of wings\n")
    manifest = folder / "manifest.yaml"
    manifest.write_text(
        "name: tiny\ndimensions:\n  relevance:\n    grades: {2: {grade: 1}}\nsources:\n"
        "  - {format: cranfield-docs, path: cran.all.1400}\n"
        "  - {format: cranfield-queries, path: cran.qry}\n"
        "  - {format: cranfield-qrels, path: cranqrel, dimension: relevance}\n"
    )
    line = ingest_fails(tmp_path, manifest)
    expected = problem or f"judgment for unknown qid '{'9' * 200}'... (5,000 characters)"
    assert f"cranqrel:1: {expected}" in line


def test_a_manifest_holding_a_5000_digit_number_is_a_one_line_error(tmp_path):
    manifest = write_tiny(tmp_path / "data", "9" * 5000 + "\n")
    assert "manifest.yaml: cannot read a value: Exceeds the limit" in ingest_fails(
        tmp_path, manifest
    )


def test_unknown_manifest_keys_of_several_types_are_listed(tmp_path):
    manifest = write_tiny(tmp_path / "data", MANIFEST + "1: one\nextra: two\n")
    assert ingest_fails(tmp_path, manifest).endswith("unknown key(s) ['1', 'extra']")


def test_a_bin_bound_that_is_not_a_number_is_a_one_line_error(tmp_path):
    manifest = write_tiny(
        tmp_path / "data",
        MANIFEST.replace(
            "grades: {0: not relevant, 1: relevant, 2: highly relevant}",
            "bins: [{below: abc, grade: 0}, {grade: 1}]",
        ),
    )
    assert ingest_fails(tmp_path, manifest).endswith(
        "dimensions.relevance.bins[0]: `below` must be a finite number, got 'abc'"
    )


def test_a_reader_option_refused_while_reading_names_the_manifest(tmp_path):
    manifest = write_tiny(tmp_path / "data", MANIFEST.replace("holds: topics", "holds: topix"))
    line = ingest_fails(tmp_path, manifest)
    assert line.startswith(f"nrp: error: {manifest}: sources[0] (table: ")
    assert line.endswith("option 'holds' must be one of topics, documents, references, "
                         "judgments, got 'topix'")  # fmt: skip


# --- a table without a column its reader needs ----------------------------------------------------


@pytest.mark.parametrize(
    "command, name, text, missing, found",
    [
        # an answer file (nrp score)
        ("score", "answers.csv", "llm,prompt,qid\nm,p,1\n", "'text'", "llm, prompt, qid"),
        # a results table (nrp summary)
        ("summary", "results.csv", "answer_id,qid,dimension,nrp\na,1,relevance,0.5\n",
         "'llm', 'prompt'", "answer_id, qid, dimension, nrp"),
        # a human label file (nrp meta)
        ("meta", "human.csv", "id,relevance\na,1\n", "'answer_id'", "id, relevance"),
        # a run file (nrp validate --runs)
        ("validate", "run.csv", "qid,doc,score\n1,d,1\n", "'docno'", "qid, doc, score"),
    ],
)  # fmt: skip
def test_a_table_without_a_needed_column_is_one_line_naming_file_and_columns(
    demo, tmp_path, command, name, text, missing, found
):
    path = tmp_path / name
    path.write_text(text)
    scores = tmp_path / "scores.csv"
    scores.write_text("answer_id,score\na,1\n")
    argv = {
        "score": (
            "score",
            "demo",
            path,
            "--ranker",
            "tfidf",
            "--out",
            tmp_path / "o",
            "--indexes",
            demo,
        ),
        "summary": ("summary", path),
        "meta": ("meta", scores, path),
        "validate": ("validate", "demo", "--runs", path, "--indexes", demo),
    }[command]
    line = one_line_error(*nrp(*argv)[::2])
    assert f"{path}" in line and f"missing column(s) {missing} (found: {found})" in line


def test_a_collection_table_without_a_needed_column_is_one_line(tmp_path):
    manifest = write_tiny(tmp_path / "c", topics_tsv="qid\ttitle\nq1\tvitamin c\n")
    line = ingest_fails(tmp_path, manifest)
    assert line.endswith("topics.tsv:1: missing column(s) 'query' (found: qid, title)")
