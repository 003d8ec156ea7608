"""Hostile input, second round (issue 29), the readers' items: links out of a named folder,
YAML alias bombs and non-string fields, NaN samples and JSON keys given twice, unknown
dimensions and ranker parameters out of their declared range, runs matching no judged document,
and the leftovers of a killed ingest. Each case ends in one line ``nrp: error: ...`` and exit 2
with nothing written, or in the right result; every test here failed on the code before."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_hostile_input import DEMO, nrp, one_line_error, write_tiny

ANSWER = {"llm": "m", "prompt": "p", "qid": "d1", "text": "Vitamin C does not prevent colds."}
#: what the CLI adds to the error of an answer row that cannot be read
SKIP_HINT = " (--skip-invalid leaves such rows out, and lists them)"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo collection, ingested once for the module (its indexes folder)."""
    indexes = tmp_path_factory.mktemp("demo") / "ix"
    assert nrp("ingest", DEMO / "manifest.yaml", "--indexes", indexes)[0] == 0
    return indexes


def score(indexes: Path, answers: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    ranker = () if "--ranker" in extra else ("--ranker", "tfidf")
    return nrp("score", "demo", answers, *ranker, "--out", out, "--indexes", indexes, *extra)


# --- 6. NaN samples, JSON keys given twice ------------------------------------------------------


def test_a_nan_sample_in_jsonl_is_a_one_line_error(demo, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n" + json.dumps({**ANSWER, "sample": float("nan")}))
    out = tmp_path / "out"
    line = one_line_error(*score(demo, answers, out)[::2])
    assert line == (
        f"nrp: error: {answers}:2: sample is NaN; give a non-negative integer or null" + SKIP_HINT
    )
    assert not out.exists()


def test_a_nan_sample_in_parquet_is_a_one_line_error_but_a_null_is_derived(demo, tmp_path):
    answers = tmp_path / "answers.parquet"
    rows = {key: [value, value] for key, value in ANSWER.items()}
    nan = pa.array([float("nan"), None], type=pa.float64())  # NaN as written, not a null
    pq.write_table(pa.table({**rows, "sample": nan}), answers)
    line = one_line_error(*score(demo, answers, tmp_path / "out")[::2])
    assert line.endswith(
        f"{answers}: row 1: sample is NaN; give a non-negative integer or null" + SKIP_HINT
    )
    pq.write_table(pa.table({**rows, "sample": pa.array([None, None], pa.float64())}), answers)
    code, _, err = score(demo, answers, tmp_path / "out")
    assert code == 0, err
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert sorted(results["answer_id"].unique()) == ["m/p/d1/0", "m/p/d1/1"]


def test_a_key_given_twice_in_an_answers_line_is_a_one_line_error(demo, tmp_path):
    answers = tmp_path / "answers.jsonl"
    body = json.dumps(ANSWER)[1:]
    answers.write_text(json.dumps(ANSWER) + '\n{"qid": "d2", ' + body + "\n")
    out = tmp_path / "out"
    line = one_line_error(*score(demo, answers, out)[::2])
    assert line == (
        f"nrp: error: {answers}:2: invalid JSON: key 'qid' given twice in one object" + SKIP_HINT
    )
    assert not out.exists()


def test_a_key_given_twice_in_a_collection_jsonl_is_a_one_line_error(tmp_path):
    manifest = write_tiny(
        tmp_path / "data",
        MANIFEST_JSONL,
        topics_jsonl='{"qid": "q1", "query": "a"}\n{"qid": "q2", "query": "b", "qid": "q3"}\n',
    )
    line = one_line_error(*nrp("ingest", manifest, "--indexes", tmp_path / "ix")[::2])
    assert line.endswith("topics.jsonl:2: invalid JSON: key 'qid' given twice in one object")
    assert not (tmp_path / "ix" / "tiny" / "collection.sqlite").exists()


MANIFEST_JSONL = """\
name: tiny
dimensions:
  relevance:
    grades: {0: not relevant, 1: relevant, 2: highly relevant}
sources:
  - {format: table, path: topics.jsonl, holds: topics}
  - {format: table, path: docs.csv, holds: documents}
  - {format: trec-qrels, path: rel.qrels, dimension: relevance}
"""


# --- 10. the leftovers of a killed ingest ------------------------------------------------------


def dead_pid() -> int:
    """The PID of a process that has ended (a child, waited for)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_a_killed_ingests_leftovers_are_removed_at_the_next_start_even_if_it_fails(tmp_path):
    manifest = write_tiny(tmp_path / "data")
    store = tmp_path / "ix" / "tiny"
    store.mkdir(parents=True)
    dead, live = dead_pid(), os.getppid()
    ends = ("", "-journal")
    names = [f".collection.sqlite.building-{pid}{end}" for pid in (dead, live) for end in ends]
    for name in names:
        (store / name).write_bytes(b"SQLite format 3\0")
    (tmp_path / "data" / "rel.qrels").unlink()  # this ingest fails: a source is missing
    line = one_line_error(*nrp("ingest", manifest, "--indexes", tmp_path / "ix", "--force")[::2])
    assert "rel.qrels: file not found" in line
    # the dead ingest's store and journal are gone; a running ingest's are its own, left alone
    assert sorted(p.name for p in store.iterdir()) == sorted(names[2:])


# --- 7. unknown dimensions, runs matching nothing, parameter ranges ----------------------------


def test_a_ranker_for_a_dimension_the_collection_lacks_is_a_one_line_error(demo, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n")
    out = tmp_path / "out"
    code, _, err = score(demo, answers, out, "--ranker", "relevance=tfidf", "--ranker",
                         "clarity=tfidf")  # fmt: skip
    assert one_line_error(code, err) == (
        "nrp: error: collection 'demo' has no dimension 'clarity' (it has: relevance, readability)"
    )
    assert not out.exists()


def test_a_run_matching_no_judged_document_is_a_one_line_error(demo, tmp_path):
    good, other = tmp_path / "good.run", tmp_path / "other.run"
    good.write_text("d1 Q0 d1-02 1 2.0 mine\nd1 Q0 d1-01 2 1.0 mine\n")
    other.write_text("d1 Q0 doc-7 1 2.0 theirs\nq9 Q0 d1-01 2 1.0 theirs\n")
    out = tmp_path / "runs.json"
    code, _, err = nrp("validate", "demo", "--runs", good, "--runs", other, "--indexes", demo,
                       "--out", out)  # fmt: skip
    assert one_line_error(code, err) == (
        f"nrp: error: {other}: matches no judged document of collection 'demo' (none of its 2 "
        "rows' qid and docno is judged): a run of another collection?"
    )
    assert not out.exists()
    code, _, err = nrp("validate", "demo", "--runs", good, "--indexes", demo, "--out", out)
    assert code == 0, err
    assert [s["name"] for s in json.loads(out.read_text())["systems"]] == ["good"]


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("bm25:k1=-1",
         "ranker 'bm25': parameter k1='-1' is out of range (k1 must be from 0 to 1000)"),
        ("bm25:b=1.5", "ranker 'bm25': parameter b='1.5' is out of range (b must be from 0 to 1)"),
        ("dense:batch=0",
         "ranker 'dense': parameter batch='0' is out of range (batch must be >= 1)"),
        ("dense:max_length=-5",
         "ranker 'dense': parameter max_length='-5' is out of range (max_length must be >= 0)"),
        ("fuse:rankers=bm25+tfidf,k=-60",
         "ranker 'fuse': parameter k='-60' is out of range (k must be >= 0)"),
    ],
)  # fmt: skip
def test_a_ranker_parameter_outside_its_declared_range_is_refused_at_parse(spec, problem):
    from nrp.errors import ConfigError
    from nrp.rankers.registry import parse_spec

    with pytest.raises(ConfigError) as raised:
        parse_spec(spec)
    assert str(raised.value) == problem


def test_score_refuses_a_ranker_parameter_out_of_range_in_one_line(demo, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps(ANSWER) + "\n")
    code, _, err = score(demo, answers, tmp_path / "out", "--ranker", "bm25:k1=-1")
    line = one_line_error(code, err)
    assert line.endswith("parameter k1='-1' is out of range (k1 must be from 0 to 1000)")
    code, _, err = nrp("rankers")
    assert "    k1=1.2 (float; from 0 to 1000): k1, term frequency saturation" in err + _


# --- 4. YAML alias bombs, fields that must be strings, long values in errors --------------------


def alias_bomb(depth: int = 7, width: int = 9) -> str:
    """A list of nested aliases, one level a line: ``width ** depth`` values in a few hundred
    bytes."""
    lines = ['  - &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, depth):
        lines.append(f"  - &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_a_manifest_alias_bomb_is_refused_at_its_line(tmp_path):
    manifest = write_tiny(tmp_path / "data")
    manifest.write_text(manifest.read_text() + "citation:\n" + alias_bomb())
    code, _, err = nrp("ingest", manifest, "--indexes", tmp_path / "ix")
    line = one_line_error(code, err)
    # line 14 is `- &a4 [...]`: 66,430 values (9 ** 5 strings in their lists), the first value
    # over the bound; the error comes before a value is expanded
    assert line == (
        f"nrp: error: {manifest}:14: malformed YAML: aliases expand this value to 66,430 values, "
        "over the limit of 10,000 beyond those written (an alias bomb?)"
    )
    assert not (tmp_path / "ix").exists()


def test_an_experiment_alias_bomb_in_name_is_a_short_one_line_error(tmp_path):
    experiment = tmp_path / "exp.yaml"
    experiment.write_text("collection: demo\nrankers: {fixed: tfidf}\nllms: [{name: x}]\nname:\n"
                          + alias_bomb())  # fmt: skip
    line = one_line_error(*nrp("run", experiment)[::2])
    assert line.startswith(f"nrp: error: {experiment}:9: not YAML: aliases expand this value")
    assert not (tmp_path / "runs").exists()


def test_aliases_within_the_bound_are_read_and_a_recursive_one_is_refused(tmp_path):
    shared = MANIFEST_TWO_DIMENSIONS
    manifest = write_tiny(tmp_path / "data", shared)
    assert nrp("ingest", manifest, "--indexes", tmp_path / "ix")[0] == 0
    from nrp import Collection

    collection = Collection.load("tiny", tmp_path / "ix")
    assert list(collection.dimensions) == ["relevance", "clarity"]
    assert collection.dimensions["clarity"].grades["2"].meaning == "highly relevant"
    manifest.write_text(shared.replace("citation: x", "citation: &loop [*loop]"))
    line = one_line_error(*nrp("ingest", manifest, "--indexes", tmp_path / "ix2")[::2])
    assert line == (
        f"nrp: error: {manifest}:11: malformed YAML: an alias refers to a value that holds it"
    )


MANIFEST_TWO_DIMENSIONS = """\
name: tiny
dimensions:
  relevance:
    grades: &scale {0: not relevant, 1: relevant, 2: highly relevant}
  clarity: {grades: *scale}
sources:
  - {format: table, path: topics.tsv, holds: topics}
  - {format: table, path: docs.csv, holds: documents}
  - {format: trec-qrels, path: rel.qrels, dimension: relevance}
  - {format: trec-qrels, path: rel.qrels, dimension: clarity}
citation: x
"""


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("name", "[tiny, other]", "name must be a string, found list"),
        ("description", "{a: 1}", "description must be a string, found dict"),
        ("repeated_judgments", "{policy: [max], reason: r}",
         "repeated_judgments: policy must be a string, found list"),
    ],
)  # fmt: skip
def test_a_manifest_string_field_given_another_type_is_refused(tmp_path, key, value, problem):
    text = MANIFEST_TWO_DIMENSIONS.replace("name: tiny\n", "") + f"{key}: {value}\n"
    manifest = write_tiny(tmp_path / "data", text)
    line = one_line_error(*nrp("ingest", manifest, "--indexes", tmp_path / "ix")[::2])
    assert line == f"nrp: error: {manifest}: {problem}"


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("name: [a, b]", "name must be a string, found list"),
        ("out: 5", "out must be a string, found int"),
        ("ties: [mid]", "ties must be a string, found list"),
        ("collection: {name: [demo]}", "collection.name must be a string, found list"),
    ],
)  # fmt: skip
def test_an_experiment_string_field_given_another_type_is_refused(tmp_path, entry, problem):
    experiment = tmp_path / "exp.yaml"
    base = {"name": "e", "collection": "demo", "ties": "mid"}
    key = entry.split(":")[0]
    lines = [f"{k}: {v}" for k, v in base.items() if k != key]
    experiment.write_text(
        "\n".join([*lines, entry, "rankers: {fixed: tfidf}", "llms: [{name: x}]"])
    )
    line = one_line_error(*nrp("run", experiment)[::2])
    assert line == f"nrp: error: {experiment}: {problem}"


def test_an_error_line_quotes_a_long_value_in_part(tmp_path, monkeypatch):
    experiment = tmp_path / "exp.yaml"
    name = "n" * 100_000
    experiment.write_text(f"name: {name}\ncollection: demo\nrankers: {{fixed: tfidf}}\n"
                          "llms: [{name: x}]\n")  # fmt: skip
    monkeypatch.chdir(tmp_path)  # the output folder runs/NAME: a name too long to create
    line = one_line_error(*nrp("run", experiment)[::2])
    assert line.startswith("nrp: error: runs/nnnn") and "(100,005 characters)" in line
    assert len(line) < 1100


# --- 1. links inside a named folder -----------------------------------------------------------

SECRET = "SECRET-0xC0FFEE,do not show"
PAGE = "<html><head><title>{0}</title></head><body><p>{0}: " + "words of a page " * 8 + "</p>"


def outside_files(tmp_path: Path) -> Path:
    """Files outside every folder a test names: a secret line, answers, a page."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text(SECRET + "\nline two\n")
    (outside / "answers.jsonl").write_text(json.dumps({**ANSWER, "text": SECRET}) + "\n")
    (outside / "llm").mkdir()
    (outside / "llm" / "p.jsonl").write_text(json.dumps(ANSWER) + "\n")
    (outside / "page.html").write_text(PAGE.format(SECRET))
    return outside


@pytest.mark.parametrize(
    ("link", "target"),
    [("zz.csv", "passwd"), ("zz.jsonl", "answers.jsonl")],
)
def test_an_answer_file_linking_out_of_the_named_folder_is_refused(demo, tmp_path, link, target):
    outside = outside_files(tmp_path)
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "a.jsonl").write_text(json.dumps(ANSWER) + "\n")
    (answers / link).symlink_to(outside / target)
    out = tmp_path / "out"
    code, _, err = score(demo, answers, out)
    assert one_line_error(code, err) == (
        f"nrp: error: {answers / link}: a symbolic link that leads outside the folder {answers}: "
        "refused (a file found in a folder must lie inside it; copy the file in instead)"
    )
    assert SECRET not in err and not out.exists()


def test_an_llm_folder_linking_out_is_refused_but_a_link_inside_is_read(demo, tmp_path):
    outside = outside_files(tmp_path)
    answers = tmp_path / "answers"
    (answers / "mine").mkdir(parents=True)
    (answers / "mine" / "p.jsonl").write_text(json.dumps({**ANSWER, "llm": "mine"}) + "\n")
    (answers / "mine" / "q.jsonl").symlink_to(answers / "mine" / "p.jsonl")  # inside: read
    code, _, err = score(demo, answers, tmp_path / "out")
    assert code == 0, err
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert sorted(results["answer_id"].unique()) == ["mine/p/d1/0", "mine/p/d1/1"]
    (answers / "theirs").symlink_to(outside / "llm")
    line = one_line_error(*score(demo, answers, tmp_path / "out2")[::2])
    assert line.startswith(f"nrp: error: {answers / 'theirs' / 'p.jsonl'}: a symbolic link that")


HTML_MANIFEST = MANIFEST_JSONL.replace(
    "{format: table, path: docs.csv, holds: documents}", "{format: html-folder, path: pages}"
).replace("topics.jsonl", "topics.tsv")


def test_an_html_folder_page_linking_out_is_refused_by_ingest(tmp_path):
    outside = outside_files(tmp_path)
    manifest = write_tiny(tmp_path / "data", HTML_MANIFEST)
    pages = tmp_path / "data" / "pages"
    pages.mkdir()
    (pages / "d1.html").write_text(PAGE.format("Vitamin C"))
    (pages / "d2.html").symlink_to(outside / "page.html")
    code, _, err = nrp("ingest", manifest, "--indexes", tmp_path / "ix")
    assert one_line_error(code, err) == (
        f"nrp: error: {pages / 'd2.html'}: a symbolic link that leads outside the folder {pages}: "
        "refused (a file found in a folder must lie inside it; copy the file in instead)"
    )
    assert SECRET not in err and not (tmp_path / "ix").exists()
    (pages / "d2.html").unlink()
    (pages / "d2.html").write_text(PAGE.format("Colds"))
    assert nrp("ingest", manifest, "--indexes", tmp_path / "ix")[0] == 0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """``nrp serve`` on loopback, its data root holding the synth collection (ingested)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "service"))
    from service_helpers import ADMIN_TOKEN, Server, write_config, write_synth

    from nrp import ingest

    root = tmp_path_factory.mktemp("links").resolve()
    ingest(write_synth(root / "data"), indexes_dir=root / "indexes")
    running = Server(write_config(root), root / "server.log").start()
    yield root, running.client(ADMIN_TOKEN)
    running.stop()


@pytest.mark.slow
def test_the_service_refuses_answer_files_and_pages_linking_out_of_the_data_root(server):
    root, admin = server
    outside = outside_files(root)
    answers = root / "data" / "answers"
    answers.mkdir()
    record = {"llm": "m", "prompt": "p", "qid": "t0", "text": "an answer"}
    (answers / "a.jsonl").write_text(json.dumps(record) + "\n")
    for link, target in [("zz.csv", "passwd"), ("zz.jsonl", "answers.jsonl")]:
        (answers / link).symlink_to(outside / target)
        job = {"collection": "synth", "answers_path": "answers", "rankers": "bm25"}
        response = admin.post("/v1/jobs", json=job)
        assert response.status_code == 422, response.text
        assert "a symbolic link that leads outside the folder" in response.json()["detail"]
        assert SECRET not in response.text
        (answers / link).unlink()
    pages = root / "data" / "pages"
    pages.mkdir()
    (pages / "t0d0.html").write_text(PAGE.format("Vitamin C"))
    (pages / "t0d1.html").symlink_to(outside / "page.html")
    manifest = (root / "data" / "manifest.yaml").read_text()
    (root / "data" / "html.yaml").write_text(
        manifest.replace(
            "{format: table, path: documents.tsv, holds: documents}",
            "{format: html-folder, path: pages}",
        )
    )
    response = admin.post("/v1/collections", json={"manifest": "html.yaml", "name": "html"})
    assert response.status_code == 422, response.text
    assert "a symbolic link that leads outside the folder" in response.json()["detail"]
    assert SECRET not in response.text
    assert not (root / "indexes" / "html").exists()
