"""Reading answer sets: the real CLEF eHealth 2021 answers (wide layout, 13 LLMs), and every
error path in every format (JSONL, CSV, TSV, Parquet, wide CSV) on small hand-made files."""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nrp import Collection, ingest
from nrp.answers import COLUMNS, AnswerSet, InvalidAnswer, is_empty, read_answers
from nrp.errors import InputError

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"

# --- real data: CLEF eHealth 2021, answers/<llm>/<prompt>.csv ----------------------------------

LLMS = [
    "chatgpt",
    "distilgpt2",
    "google_flan-t5-base",
    "google_flan-t5-large",
    "google_flan-t5-small",
    "google_flan-t5-xl",
    "gpt2",
    "gpt2-large",
    "gpt2-medium",
    "gpt2-xl",
    "meta-llama_Llama-2-13b-chat-hf",
    "meta-llama_Llama-2-7b-chat-hf",
    "tiiuae_falcon-7b-instruct",
]
# empty cells (the LLM produced nothing) per file, counted in the CSVs; every other file has none
CLEF_EMPTY = {
    ("distilgpt2", "q"): 1,
    ("distilgpt2", "question"): 3,
    ("google_flan-t5-base", "multimedqa"): 15,
    ("google_flan-t5-base", "q"): 37,
    ("google_flan-t5-base", "question"): 28,
    ("google_flan-t5-large", "q"): 10,
    ("google_flan-t5-large", "question"): 6,
    ("google_flan-t5-small", "multimedqa"): 4,
    ("google_flan-t5-small", "q"): 4,
    ("google_flan-t5-xl", "multimedqa"): 1,
    ("google_flan-t5-xl", "q"): 12,
    ("google_flan-t5-xl", "question"): 4,
    ("gpt2-medium", "multimedqa"): 2,
}


@pytest.fixture(scope="module")
def clef(tmp_path_factory):
    """Loads the CLEF collection and reads the whole answers folder against its topics with
    skip_invalid, once per module (about two seconds); skipped when ../shared is absent."""
    cache: dict[str, Any] = {}

    def load(shared_data) -> tuple[Collection, AnswerSet]:
        folder = shared_data("clef-ehealth-2021", "answers")  # skips with a reason if absent
        if not cache:
            indexes = tmp_path_factory.mktemp("indexes")
            ingest(MANIFESTS / "clef-ehealth-2021.yaml", indexes_dir=indexes)
            cache["collection"] = Collection.load("clef-ehealth-2021", indexes)
            cache["answers"] = read_answers(
                folder, collection=cache["collection"], skip_invalid=True
            )
        return cache["collection"], cache["answers"]

    return load


@pytest.fixture
def clef_collection(clef, shared_data) -> Collection:
    return clef(shared_data)[0]


@pytest.fixture
def clef_answers(clef, shared_data) -> AnswerSet:
    return clef(shared_data)[1]


def test_clef_llms_prompts_and_counts(clef_answers):
    answers = clef_answers.answers
    assert list(answers.columns) == COLUMNS
    assert sorted(answers["llm"].unique()) == LLMS
    prompts = answers.groupby("llm")["prompt"].unique().map(sorted).to_dict()
    assert prompts.pop("chatgpt") == ["multimedqa", "no_prompt", "q", "question"]
    assert set(map(tuple, prompts.values())) == {("multimedqa", "q", "question")}
    assert len(clef_answers.files) == 40
    # 40 files x 50 topics x 10 samples = 20,000 cells, of which 127 are empty: every one an
    # answer, the empty ones too (scored last)
    assert sum(CLEF_EMPTY.values()) == 127
    assert len(answers) == 20_000
    assert clef_answers.empty == 127
    assert answers["answer_id"].is_unique
    assert answers["sample"].between(0, 9).all()

    table = clef_answers.describe()
    assert len(table) == 40
    assert (table["qids"] == 50).all()
    assert (table["answers"] == 500).all() and (table["skipped"] == 0).all()
    empty = {(r.llm, r.prompt): r.empty for r in table.itertuples() if r.empty}
    assert empty == CLEF_EMPTY


def test_clef_empty_cells_are_empty_answers(clef_answers, shared_data):
    """An LLM that returned nothing left an empty cell: an answer that says nothing, read (as
    the empty text) with or without skip_invalid, never skipped: the study scores it last."""
    assert clef_answers.skipped == []
    answers = clef_answers.answers.set_index("answer_id")
    assert answers.loc["distilgpt2/q/68/3", "text"] == ""  # q.csv:173, column answer4
    assert clef_answers.empty_line() == (
        "127 empty answer(s) (no text, or whitespace only): scored last (NRP 0) and flagged empty"
    )
    strict = read_answers(shared_data("clef-ehealth-2021", "answers"))
    assert strict.empty == 127 and len(strict) == 20_000


def test_clef_first_answers_and_literal_na_texts(clef_answers):
    answers = clef_answers.answers.set_index("answer_id")
    first = clef_answers.answers.iloc[0]
    assert (first.answer_id, first.llm, first.prompt, first.qid, first["sample"]) == (
        "chatgpt/multimedqa/1/0",
        "chatgpt",
        "multimedqa",
        "1",
        0,
    )
    assert first.text.startswith("The most common chronic diseases include")
    assert "\n\nChronic diseases have significant effects" in first.text  # multi-line cell
    assert list(clef_answers.answers["answer_id"][:11]) == [
        *(f"chatgpt/multimedqa/1/{s}" for s in range(10)),
        "chatgpt/multimedqa/8/0",
    ]
    # "N/A" and "None" are what the LLM wrote: text, never read as missing values
    literal = clef_answers.answers[clef_answers.answers["text"].isin(["N/A", "None"])]
    assert dict(zip(literal["answer_id"], literal["text"], strict=True)) == {
        "distilgpt2/multimedqa/121/1": "N/A",
        "google_flan-t5-small/multimedqa/1/7": "None",
        "google_flan-t5-small/multimedqa/54/6": "None",
        "google_flan-t5-small/question/83/2": "None",
    }
    assert answers.loc["google_flan-t5-base/q/35/1", "text"] == "no"


def test_clef_every_qid_is_a_topic(clef_answers, clef_collection):
    topics = set(clef_collection.topics["qid"])
    assert len(topics) == 50
    assert set(clef_answers.answers["qid"]) == topics
    assert not [row for row in clef_answers.skipped if row.kind == "unknown_qid"]


def test_clef_one_llm_folder_and_one_wide_file(shared_data):
    chatgpt = read_answers(shared_data("clef-ehealth-2021", "answers", "chatgpt"))
    assert len(chatgpt) == 2_000 and not chatgpt.skipped
    assert list(chatgpt.describe()["prompt"]) == ["multimedqa", "no_prompt", "q", "question"]
    one = read_answers(shared_data("clef-ehealth-2021", "answers", "chatgpt", "no_prompt.csv"))
    assert len(one) == 500
    assert set(one.answers["llm"]) == {"chatgpt"} and set(one.answers["prompt"]) == {"no_prompt"}


# --- hand-made files: writers and locations ------------------------------------------------------

LONG_FORMATS = ["jsonl", "csv", "tsv", "parquet"]


def write_long(folder: Path, fmt: str, rows: list[dict[str, Any]], name: str = "a") -> Path:
    """Rows as a long-layout file; a key absent from a row is an empty cell (CSV, TSV), an absent
    key (JSONL) or a null (Parquet)."""
    path = folder / f"{name}.{fmt}"
    columns = list(dict.fromkeys(key for row in rows for key in row))
    if fmt == "jsonl":
        path.write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
    elif fmt == "parquet":
        pq.write_table(
            pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows]), path
        )
    else:
        with path.open("w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out, delimiter="\t" if fmt == "tsv" else ",")
            writer.writerow(columns)
            for row in rows:
                writer.writerow(["" if row.get(c) is None else row[c] for c in columns])
    return path


def at(path: Path, fmt: str, index: int) -> str:
    """The location prefix of data row ``index`` (0-based) as errors print it: the line (after
    the header in CSV/TSV), or the 1-based row in Parquet."""
    if fmt == "parquet":
        return f"{path}: row {index + 1}"
    return f"{path}:{index + 1 if fmt == 'jsonl' else index + 2}"


def ref(path: Path, fmt: str, index: int) -> str:
    """How a message refers to another answer's location ("first at ...")."""
    if fmt == "parquet":
        return f"{path} row {index + 1}"
    return at(path, fmt, index)


def where(fmt: str, index: int) -> int:
    return index + 1 if fmt in ("jsonl", "parquet") else index + 2


def error_of(path: Path, **options) -> str:
    with pytest.raises(InputError) as caught:
        read_answers(path, **options)
    return str(caught.value)


def answer(qid: str = "1", text: str = "an answer", **more: Any) -> dict[str, Any]:
    return {"llm": "m", "prompt": "p", "qid": qid, "text": text, **more}


# --- long layout -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", LONG_FORMATS)
def test_long_ids_and_samples_are_derived_in_input_order(tmp_path, fmt):
    rows = [
        answer("2", "first\nsecond line"),
        answer("1", "b"),
        answer("2", "c"),
        {"llm": "m", "prompt": "p2", "qid": "2", "text": "d"},
    ]
    frame = read_answers(write_long(tmp_path, fmt, rows)).answers
    assert list(frame.columns) == COLUMNS
    assert frame.to_dict("records") == [
        {"answer_id": "m/p/2/0", "llm": "m", "prompt": "p", "qid": "2", "sample": 0,
         "text": "first\nsecond line"},
        {"answer_id": "m/p/1/0", "llm": "m", "prompt": "p", "qid": "1", "sample": 0, "text": "b"},
        {"answer_id": "m/p/2/1", "llm": "m", "prompt": "p", "qid": "2", "sample": 1, "text": "c"},
        {"answer_id": "m/p2/2/0", "llm": "m", "prompt": "p2", "qid": "2", "sample": 0,
         "text": "d"},
    ]  # fmt: skip
    assert str(frame["sample"].dtype) == "int64"


@pytest.mark.parametrize("fmt", LONG_FORMATS)
def test_long_explicit_ids_and_samples_are_kept(tmp_path, fmt):
    rows = [
        answer("1", "a", answer_id="x1", sample=3),
        answer("1", "b", sample=7),
        answer("1", "c"),  # no sample: its position in (m, p, 1), counting every row: 2
    ]
    frame = read_answers(write_long(tmp_path, fmt, rows)).answers
    assert list(frame["answer_id"]) == ["x1", "m/p/1/7", "m/p/1/2"]
    assert list(frame["sample"]) == [3, 7, 2]


def test_jsonl_numeric_qid_and_literal_none_text(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(
        '{"llm": "m", "prompt": "p", "qid": 1, "text": "None"}\n\n'
        '{"llm": "m", "prompt": "p", "qid": "1", "text": "N/A", "sample": "4"}\n'
    )
    frame = read_answers(path, collection={"1"}).answers
    assert list(frame["qid"]) == ["1", "1"]
    assert list(frame["text"]) == ["None", "N/A"]
    assert list(frame["sample"]) == [0, 4]


def test_a_plainly_valid_parquet_file_is_read_by_columns_as_its_rows_would_be(tmp_path):
    """Columns of large strings, ids with spaces around them and in NFD, ids derived or given:
    read column by column (``_parquet_columns``), the answers are those a row by row read gives
    the same rows (the CSV file of them is always read row by row); a null sample sends the file
    row by row."""
    from nrp.answers import _parquet_columns

    nfd = unicodedata.normalize("NFD", "café")
    derived = [answer(f" {nfd} ", f"text {i}", llm=" m") for i in range(3)]
    given = [{**row, "answer_id": f" a{i} "} for i, row in enumerate(derived)]
    for rows, ids in ((derived, ["m/p/café/0", "m/p/café/1", "m/p/café/2"]),
                      (given, ["a0", "a1", "a2"])):  # fmt: skip
        table = pa.Table.from_pylist(rows)
        table = table.cast(pa.schema([(name, pa.large_string()) for name in table.column_names]))
        path = tmp_path / "a.parquet"
        pq.write_table(table, path)
        assert _parquet_columns(path, None) is not None
        by_columns = read_answers(path).answers
        by_rows = read_answers(write_long(tmp_path, "csv", rows)).answers
        pd.testing.assert_frame_equal(by_columns, by_rows)
        assert by_columns["answer_id"].tolist() == ids
    null_sample = write_long(tmp_path, "parquet", [*derived, answer(sample=None)], name="n")
    assert _parquet_columns(null_sample, None) is None


@pytest.mark.parametrize("blank", ["\n", "  \t\n", "\r\n"])
def test_a_blank_jsonl_line_is_read_record_by_record_with_its_line_numbers(tmp_path, blank):
    """pyarrow's columnar read skips a blank line, so the file has more lines than rows and is
    read record by record: the line numbers of the records after it stay right."""
    from nrp.answers import _jsonl_columns

    record = '{"llm": "m", "prompt": "p", "qid": "%s", "text": "t"}\n'
    path = tmp_path / "a.jsonl"
    path.write_text(record % "1" + blank + record % "99", encoding="utf-8", newline="")
    assert _jsonl_columns(path, None) is None
    assert (
        error_of(path, collection={"1"})
        == f"{path}:3: unknown qid '99': not a topic of the collection"
    )
    path.write_text(record % "1" + record % "1", encoding="utf-8")
    assert _jsonl_columns(path, None) is not None  # no blank line: columnar


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"  \n\t",
        b"a",
        b"a\n",
        b"ab\ncdefg\nh",
        b"abcdefgh\r\n\r\nxy",
        b"\n\n\nabcdefghij",
        b"ab\ncdefghijklmn\nxy\nz",
    ],
)
def test_line_facts_read_a_block_at_a_time_equal_those_of_the_whole_file(
    tmp_path, monkeypatch, data
):
    """The JSON Lines file's lines, longest line and content are read in blocks (the file is
    never held whole): with blocks of 3 bytes and a limit of 4 bytes, so lines span blocks and
    the longest is measured, they equal what the whole bytes give."""
    from nrp import answers

    monkeypatch.setattr(answers, "_BLOCK", 3)
    monkeypatch.setattr(answers, "MAX_LINE_CHARS", 4)
    path = tmp_path / "a.jsonl"
    path.write_bytes(data)
    pieces = data.split(b"\n")
    lines = data.count(b"\n") + (not data.endswith(b"\n"))
    longest = max(map(len, pieces)) if len(data) > 4 else 0
    assert answers._line_facts(path) == answers._LineFacts(lines, longest, bool(data.strip()))
    assert answers._line_facts(tmp_path / "missing.jsonl") is None


@pytest.mark.parametrize("fmt", LONG_FORMATS)
def test_long_unknown_qid(tmp_path, fmt):
    path = write_long(tmp_path, fmt, [answer("1"), answer("99"), answer("2")])
    assert error_of(path, collection={"1", "2"}) == (
        f"{at(path, fmt, 1)}: unknown qid '99': not a topic of the collection"
    )
    read = read_answers(path, collection={"1", "2"}, skip_invalid=True)
    assert list(read.answers["qid"]) == ["1", "2"]
    assert [(r.line, r.kind) for r in read.skipped] == [(where(fmt, 1), "unknown_qid")]
    assert read_answers(path).answers["qid"].tolist() == ["1", "99", "2"]  # no collection


@pytest.mark.parametrize("fmt", LONG_FORMATS)
@pytest.mark.parametrize("empty", ["", "  \n\t "])
def test_long_empty_text(tmp_path, fmt, empty):
    """An empty or whitespace text is an answer that says nothing: read as written (with or
    without skip_invalid), counted, never skipped."""
    path = write_long(tmp_path, fmt, [answer("1"), answer("1", empty)])
    for read in (read_answers(path), read_answers(path, skip_invalid=True)):
        assert list(read.answers["answer_id"]) == ["m/p/1/0", "m/p/1/1"]
        assert read.answers["text"].tolist() == ["an answer", empty]
        assert read.skipped == [] and read.empty == 1
        assert read.describe()["empty"].tolist() == [1]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_long_null_text_is_empty(tmp_path, fmt):
    path = write_long(tmp_path, fmt, [answer("1"), answer("1", None)])
    read = read_answers(path)
    assert read.answers["text"].tolist() == ["an answer", ""] and read.empty == 1


def test_is_empty():
    assert [is_empty(t) for t in (None, float("nan"), "", " \n\t\u3000\u00a0", ".", "N/A")] == [
        True, True, True, True, False, False
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", LONG_FORMATS)
@pytest.mark.parametrize("column", ["llm", "prompt", "qid", "text"])
def test_long_missing_column_is_an_error_even_when_skipping(tmp_path, fmt, column):
    rows = [{k: v for k, v in answer().items() if k != column}] * 2
    path = write_long(tmp_path, fmt, rows)
    message = error_of(path, skip_invalid=True)
    if fmt == "jsonl":
        assert message.startswith(f"{path}:1: missing key(s) '{column}'; every answer needs")
    else:
        assert message.startswith(f"{path}: missing column(s) '{column}' (found: ")


@pytest.mark.parametrize("fmt", LONG_FORMATS)
def test_long_empty_llm_cell_is_an_invalid_row(tmp_path, fmt):
    path = write_long(tmp_path, fmt, [answer(), {**answer(), "llm": " "}])
    assert error_of(path) == f"{at(path, fmt, 1)}: llm is missing or empty"
    read = read_answers(path, skip_invalid=True)
    assert [(r.line, r.kind, r.llm) for r in read.skipped] == [
        (where(fmt, 1), "missing_value", None)
    ]
    assert read.describe().to_dict("records") == [
        {"llm": "m", "prompt": "p", "answers": 1, "qids": 1, "empty": 0, "skipped": 0},
        {"llm": "?", "prompt": "?", "answers": 0, "qids": 0, "empty": 0, "skipped": 1},
    ]


@pytest.mark.parametrize("fmt", LONG_FORMATS)
def test_long_duplicate_answer_id_names_both_lines(tmp_path, fmt):
    rows = [answer("1", answer_id="a"), answer("2", answer_id="b"), answer("3", answer_id="a")]
    path = write_long(tmp_path, fmt, rows)
    assert error_of(path) == (
        f"{at(path, fmt, 2)}: duplicate answer_id 'a' (first at {ref(path, fmt, 0)})"
    )
    read = read_answers(path, skip_invalid=True)
    assert list(read.answers["qid"]) == ["1", "2"]
    assert [(r.line, r.kind) for r in read.skipped] == [(where(fmt, 2), "duplicate_answer_id")]


def test_duplicate_across_files_names_both_files(tmp_path):
    folder = tmp_path / "answers"
    folder.mkdir()
    first = write_long(folder, "csv", [answer("1", answer_id="x")], name="a")
    second = write_long(folder, "jsonl", [answer("2"), answer("1", answer_id="x")], name="b")
    assert error_of(folder) == f"{second}:2: duplicate answer_id 'x' (first at {first}:2)"


def test_derived_samples_continue_across_files(tmp_path):
    """A folder of shards of one llm x prompt numbers its answers as one file would."""
    folder = tmp_path / "answers"
    folder.mkdir()
    write_long(folder, "csv", [answer("1")], name="a")
    write_long(folder, "parquet", [answer("1"), answer("2")], name="b")
    frame = read_answers(folder).answers
    assert list(frame["answer_id"]) == ["m/p/1/0", "m/p/1/1", "m/p/2/0"]


@pytest.mark.parametrize("fmt", LONG_FORMATS)
@pytest.mark.parametrize("bad", ["two", "1.5", "-1"])
def test_long_non_integer_sample(tmp_path, fmt, bad):
    path = write_long(tmp_path, fmt, [answer(sample="0"), answer(sample=bad)])
    assert error_of(path) == (
        f"{at(path, fmt, 1)}: sample must be a non-negative integer, found {bad!r}"
    )
    read = read_answers(path, skip_invalid=True)
    assert [(r.line, r.kind) for r in read.skipped] == [(where(fmt, 1), "invalid_sample")]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tsv"])
def test_text_formats_non_utf8_names_the_line_even_when_skipping(tmp_path, fmt):
    path = write_long(tmp_path, fmt, [answer("1"), answer("2", "caf\u00e9"), answer("3")])
    path.write_bytes(path.read_bytes().replace("é".encode(), b"\xe9"))
    line = where(fmt, 1)
    expected = f"{path}:{line}: not valid UTF-8: byte 0xe9 cannot be decoded"
    assert error_of(path) == expected
    assert error_of(path, skip_invalid=True) == expected


def test_parquet_non_utf8_names_the_row(tmp_path):
    path = tmp_path / "a.parquet"
    table = pa.table(
        {
            "llm": ["m", "m"],
            "prompt": ["p", "p"],
            "qid": ["1", "2"],
            "text": pa.array([b"fine", b"caf\xe9"], type=pa.binary()),
        }
    )
    pq.write_table(table, path)
    expected = f"{path}: row 2: column 'text' is not valid UTF-8: byte 0xe9 cannot be decoded"
    assert error_of(path, skip_invalid=True) == expected


@pytest.mark.parametrize("fmt", [*LONG_FORMATS, "wide"])
@pytest.mark.parametrize("content", [b"", b" \n\n"])
def test_empty_file(tmp_path, fmt, content):
    path = tmp_path / ("m" if fmt == "wide" else "") / f"a.{'csv' if fmt == 'wide' else fmt}"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    if fmt == "parquet" and content:
        assert error_of(path, skip_invalid=True).startswith(f"{path}: not a readable Parquet file:")
    else:
        assert error_of(path, skip_invalid=True) == f"{path}: file is empty"


@pytest.mark.parametrize("fmt", ["csv", "tsv", "parquet"])
def test_header_without_rows(tmp_path, fmt):
    path = tmp_path / f"a.{fmt}"
    if fmt == "parquet":
        schema = pa.schema([(c, pa.string()) for c in ("llm", "prompt", "qid", "text")])
        pq.write_table(schema.empty_table(), path)
    else:
        path.write_text("llm,prompt,qid,text\n".replace(",", "\t" if fmt == "tsv" else ","))
    assert error_of(path) == f"{path}: file has no answers (a header, no rows)"


def test_parquet_that_is_not_parquet(tmp_path):
    path = tmp_path / "a.parquet"
    path.write_text("llm,prompt,qid,text\nm,p,1,x\n")
    assert error_of(path).startswith(f"{path}: not a readable Parquet file:")


def test_malformed_json_line(tmp_path):
    path = tmp_path / "a.jsonl"
    good = json.dumps(answer("1"))
    path.write_text(f'{good}\n{{"llm": "m", oops\n[1, 2]\n{json.dumps(answer("2"))}\n')
    assert error_of(path) == f"{path}:2: invalid JSON: Expecting property name enclosed in " + (
        "double quotes at column 14"
    )
    read = read_answers(path, skip_invalid=True)
    assert list(read.answers["qid"]) == ["1", "2"]
    assert [(r.line, r.kind) for r in read.skipped] == [
        (2, "malformed_json"),
        (3, "malformed_json"),
    ]
    assert str(read.skipped[1]) == f"{path}:3: expected a JSON object, found list"


@pytest.mark.parametrize("fmt", LONG_FORMATS)
def test_skip_invalid_reports_exactly_the_skipped_rows(tmp_path, fmt):
    rows = [
        answer("1", "ok"),  # kept: m/p/1/0
        answer("99", "unknown topic"),
        answer("1", " "),  # empty: an answer that says nothing, m/p/1/1
        answer("1", "dup", answer_id="m/p/1/0"),
        answer("2", "bad sample", sample="x"),
        answer("1", "ok too"),  # kept: m/p/1/3 (rows 0, 2, 3, 5 are (m, p, 1))
    ]
    path = write_long(tmp_path, fmt, rows)
    read = read_answers(path, collection={"1", "2"}, skip_invalid=True)
    assert list(read.answers["answer_id"]) == ["m/p/1/0", "m/p/1/1", "m/p/1/3"]
    assert [(r.line, r.kind) for r in read.skipped] == [
        (where(fmt, 1), "unknown_qid"),
        (where(fmt, 3), "duplicate_answer_id"),
        (where(fmt, 4), "invalid_sample"),
    ]
    assert [str(r) for r in read.skipped] == [
        f"{at(path, fmt, 1)}: unknown qid '99': not a topic of the collection",
        f"{at(path, fmt, 3)}: duplicate answer_id 'm/p/1/0' (first at {ref(path, fmt, 0)})",
        f"{at(path, fmt, 4)}: sample must be a non-negative integer, found 'x'",
    ]
    assert read.describe().to_dict("records") == [
        {"llm": "m", "prompt": "p", "answers": 3, "qids": 1, "empty": 1, "skipped": 3}
    ]
    assert list(read.skipped_frame()["kind"]) == [r.kind for r in read.skipped]


def test_all_rows_skipped_is_an_error(tmp_path):
    path = write_long(tmp_path, "csv", [answer("1", sample="x"), answer("2", sample="-1")])
    assert error_of(path, skip_invalid=True) == (
        f"{path}: no valid answers: all 2 skipped "
        f"(first: {path}:2: sample must be a non-negative integer, found 'x')"
    )


# --- wide layout ---------------------------------------------------------------------------------

WIDE_HEADER = "qid,query,answer1,answer2\n"


def write_wide(root: Path, llm: str, prompt: str, body: str | bytes) -> Path:
    path = root / llm / f"{prompt}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = body if isinstance(body, bytes) else body.encode()
    path.write_bytes(WIDE_HEADER.encode() + data)
    return path


def test_wide_file_llm_folder_and_answers_folder(tmp_path):
    root = tmp_path / "answers"
    q = write_wide(root, "llm-b", "q", '1,query one,"b1\nmore",b2\n2,query two,c1,c2\n')
    write_wide(root, "llm-a", "no_prompt", "2,query two,a1,a2\n")
    frame = read_answers(q).answers
    assert frame.to_dict("records") == [
        {"answer_id": "llm-b/q/1/0", "llm": "llm-b", "prompt": "q", "qid": "1", "sample": 0,
         "text": "b1\nmore"},
        {"answer_id": "llm-b/q/1/1", "llm": "llm-b", "prompt": "q", "qid": "1", "sample": 1,
         "text": "b2"},
        {"answer_id": "llm-b/q/2/0", "llm": "llm-b", "prompt": "q", "qid": "2", "sample": 0,
         "text": "c1"},
        {"answer_id": "llm-b/q/2/1", "llm": "llm-b", "prompt": "q", "qid": "2", "sample": 1,
         "text": "c2"},
    ]  # fmt: skip
    assert len(read_answers(root / "llm-b")) == 4
    everything = read_answers(root)
    assert [Path(f).parent.name for f in everything.files] == ["llm-a", "llm-b"]
    assert everything.describe().to_dict("records") == [
        {"llm": "llm-a", "prompt": "no_prompt", "answers": 2, "qids": 1, "empty": 0, "skipped": 0},
        {"llm": "llm-b", "prompt": "q", "answers": 4, "qids": 2, "empty": 0, "skipped": 0},
    ]


def test_wide_sample_comes_from_the_column_number(tmp_path):
    path = tmp_path / "m" / "p.csv"
    path.parent.mkdir()
    path.write_text("answer3,qid,answer10\nthree,1,ten\n")
    frame = read_answers(path).answers
    assert list(zip(frame["answer_id"], frame["sample"], strict=True)) == [
        ("m/p/1/2", 2),
        ("m/p/1/9", 9),
    ]


def test_wide_empty_cell(tmp_path):
    path = write_wide(tmp_path, "m", "p", '1,q,"a\n1",a2\n2,q,,b2\n')
    read = read_answers(path)
    assert list(read.answers["answer_id"]) == ["m/p/1/0", "m/p/1/1", "m/p/2/0", "m/p/2/1"]
    assert read.answers["text"].tolist() == ["a\n1", "a2", "", "b2"]
    assert read.skipped == [] and read.empty == 1


def test_wide_unknown_qid_skips_each_answer_of_the_row(tmp_path):
    path = write_wide(tmp_path, "m", "p", "1,q,a1,a2\n7,q,b1,b2\n")
    assert error_of(path, collection={"1"}) == (
        f"{path}:3: unknown qid '7': not a topic of the collection (answer m/p/7/0)"
    )
    read = read_answers(path, collection={"1"}, skip_invalid=True)
    assert len(read) == 2
    assert [
        (r.line, r.reason.endswith(f"(answer m/p/7/{s})")) for s, r in enumerate(read.skipped)
    ] == [
        (3, True),
        (3, True),
    ]


def test_wide_repeated_qid_is_a_duplicate_naming_both_lines(tmp_path):
    path = write_wide(tmp_path, "m", "p", "1,q,a1,a2\n2,q,b1,b2\n1,q,c1,c2\n")
    assert error_of(path) == (
        f"{path}:4: duplicate answer_id 'm/p/1/0' (first at {path}:2) (answer m/p/1/0)"
    )
    read = read_answers(path, skip_invalid=True)
    assert [(r.line, r.kind) for r in read.skipped] == [(4, "duplicate_answer_id")] * 2


def test_wide_missing_qid_column_and_empty_qid(tmp_path):
    path = tmp_path / "m" / "p.csv"
    path.parent.mkdir()
    path.write_text("query,answer1\nq,a\n")
    assert error_of(path, skip_invalid=True) == (
        f"{path}: missing column(s) 'qid' (found: query, answer1); "
        "the wide layout is qid, answer1..N"
    )
    empty_qid = write_wide(tmp_path, "m", "e", " ,q,a1,a2\n")
    assert error_of(empty_qid) == f"{empty_qid}:2: answer1: qid is missing or empty"


def test_wide_non_utf8_names_the_line(tmp_path):
    path = write_wide(tmp_path, "m", "p", b'1,q,a1,"a2\nstill a2"\n2,q,caf\xe9,b2\n')
    expected = f"{path}:4: not valid UTF-8: byte 0xe9 cannot be decoded"
    assert error_of(path, skip_invalid=True) == expected
    assert error_of(tmp_path, skip_invalid=True) == expected  # through the folder too


# --- paths -------------------------------------------------------------------------------------


def test_paths_that_hold_no_answers(tmp_path):
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 'x'))}: file or folder not found",
                        error_of(tmp_path / "x"))  # fmt: skip
    assert error_of(Path("/dev/null")) == "/dev/null: not a regular file or folder"
    (tmp_path / "notes.txt").write_text("hello\n")
    assert error_of(tmp_path / "notes.txt").startswith(
        f"{tmp_path / 'notes.txt'}: cannot read answers from a '.txt' file"
    )
    assert error_of(tmp_path) == (
        f"{tmp_path}: no answer files (.jsonl, .ndjson, .csv, .tsv, .parquet) in folder"
    )
    write_wide(tmp_path, "m", "p", "1,q,a1,a2\n")
    write_long(tmp_path, "csv", [answer()])
    assert error_of(tmp_path).startswith(
        f"{tmp_path}: holds both answer files and folders of answer files"
    )


def test_describe_counts_per_llm_and_prompt(tmp_path):
    rows = [answer("1"), answer("2"), {**answer("1"), "prompt": "p2"}, answer("3", ""),
            answer("4", sample="x")]  # fmt: skip
    read = read_answers(write_long(tmp_path, "jsonl", rows), skip_invalid=True)
    assert read.describe().to_dict("records") == [
        {"llm": "m", "prompt": "p", "answers": 3, "qids": 3, "empty": 1, "skipped": 1},
        {"llm": "m", "prompt": "p2", "answers": 1, "qids": 1, "empty": 0, "skipped": 0},
    ]
    assert Counter(r.kind for r in read.skipped) == {"invalid_sample": 1}


def test_a_row_that_cannot_be_read_is_an_invalid_answer_and_a_bad_file_is_not(tmp_path):
    """``InvalidAnswer``: what skip_invalid would leave out (the CLI names --skip-invalid for
    it); a file without a required column stays a plain InputError."""
    path = write_long(tmp_path, "csv", [answer("1"), answer("1", sample="x")])
    with pytest.raises(InvalidAnswer, match="sample must be a non-negative integer"):
        read_answers(path)
    bad = tmp_path / "bad.csv"
    bad.write_text("llm,prompt,qid\nm,p,1\n")
    with pytest.raises(InputError) as caught:
        read_answers(bad)
    assert not isinstance(caught.value, InvalidAnswer)
