"""Scoring an answer set a block at a time (what ``nrp score`` does with a JSON Lines file of
more than ``BLOCK_ANSWERS`` answers): the blocks read from the file are the answers
``read_answers`` reads; results.parquet, results.csv, flags.csv and scoring.json written from
blocks are byte for byte those of the whole set scored at once; an error in a later block leaves
nothing written; the Parquet writer keeps pandas' row groups of 1,048,576 rows.

On the hand-built collection of tests/flag_collection.py, scored with TF-IDF, and its answers
under three LLM names (18 answers: per name the echo system's two answers and one of the copy
system's are flagged, so 9 in all)."""

from __future__ import annotations

import io
import itertools
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from flag_collection import ANSWERS, write_collection

from nrp import ingest
from nrp.analysis.flags import FlagsFile, flag_answers, flags_aside
from nrp.analysis.score_files import score, write_score_files
from nrp.answers import BLOCK_ANSWERS, read_answer_blocks, read_answers
from nrp.cli import main
from nrp.collection.collection import Collection
from nrp.errors import InputError, NrpError
from nrp.positioning.choice import RankerChoice
from nrp.positioning.positioner import STREAM_ANSWERS
from nrp.positioning.result_files import ROW_GROUP, ResultFiles
from nrp.positioning.scoring import RESULT_COLUMNS, ScoreSettings, ScoringRun

FILES = ("results.parquet", "results.csv", "flags.csv", "scoring.json")
RANKER = "relevance=tfidf"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    root = tmp_path_factory.mktemp("flag-collection")
    ingest(write_collection(root / "data"), indexes_dir=root / "ix")
    return root / "ix"


@pytest.fixture(scope="module")
def collection(indexes):
    return Collection.load("flag-tiny", indexes)


def answers(copies: int) -> list[dict]:
    """The collection's six answers under ``copies`` LLM names (sample left out: derived)."""
    return [
        {"llm": f"{a['llm']}{k}", "prompt": a["prompt"], "qid": a["qid"], "text": a["text"]}
        for k in range(copies)
        for a in ANSWERS
    ]


def write_jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_blocks_are_the_answers_read_answers_reads(collection, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", answers(3))
    blocks = read_answer_blocks(path, collection, rows=4)
    assert blocks.whole is None and len(blocks) == 18  # streamed: more lines than a block
    frames = list(blocks)
    assert [len(f) for f in frames] == [4, 4, 4, 4, 2]
    assert [f.index[0] for f in frames] == [0] * 5
    whole = read_answers(path, collection).answers
    pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True), whole)
    assert frames[0]["answer_id"].tolist()[:2] == ["echo0/plain/q1/0", "echo0/plain/q2/0"]
    # a file of no more lines than a block is read whole, as one block
    once = read_answer_blocks(path, collection, rows=18)
    assert once.whole is not None and len(list(once)) == 1


def test_a_parquet_file_is_read_in_blocks_too(collection, tmp_path):
    path = tmp_path / "a.parquet"
    pd.DataFrame(answers(3)).to_parquet(path, index=False)
    blocks = read_answer_blocks(path, collection, rows=5)
    assert blocks.whole is None
    frames = list(blocks)
    assert [len(f) for f in frames] == [5, 5, 5, 3]
    whole = read_answers(path, collection).answers
    pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True), whole)


def test_a_file_not_plainly_valid_is_read_whole_and_its_errors_are_those_of_read_answers(
    collection, tmp_path
):
    records = answers(2)
    records[7]["answer_id"] = records[3]["answer_id"] = "same"  # ids given twice
    path = write_jsonl(tmp_path / "dup.jsonl", records)
    with pytest.raises(InputError) as caught:
        read_answer_blocks(path, collection, rows=4)
    assert str(caught.value).endswith(f"{path}:8: duplicate answer_id 'same' (first at {path}:4)")
    records = answers(2)
    records[5]["sample"] = 3  # a key only some records have: not plainly valid, read record-wise
    path = write_jsonl(tmp_path / "mixed.jsonl", records)
    blocks = read_answer_blocks(path, collection, rows=4)
    assert blocks.whole is not None
    assert blocks.whole.answers["answer_id"].tolist()[5] == "copy0/plain/q2/3"


def test_a_file_changed_between_its_check_and_its_blocks_is_an_input_error(collection, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", answers(3))
    blocks = read_answer_blocks(path, collection, rows=4)
    write_jsonl(tmp_path / "a.jsonl", answers(1))  # 6 answers now, not 18
    with pytest.raises(InputError) as caught:
        list(blocks)
    assert str(caught.value) == (
        f"{path}: changed while it was being scored (18 answers when checked, now not)"
    )


def score_cli(indexes, path, out) -> None:
    code = main(["score", "flag-tiny", path, "--ranker", RANKER, "--out", str(out),
                 "--indexes", str(indexes), "--no-cache"])  # fmt: skip
    assert code == 0


def test_files_written_from_blocks_are_those_of_the_whole_set(indexes, collection, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", answers(3))
    score_cli(indexes, path, tmp_path / "whole")
    blocks = read_answer_blocks(path, collection, rows=4)
    assert blocks.whole is None
    lines: list[str] = []
    run = ScoringRun(collection, {"relevance": "tfidf"}, cache=False)
    scored = write_score_files(run, blocks, len(blocks), tmp_path / "blocks", progress=lines.append)
    for name in FILES:
        assert (tmp_path / "blocks" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    assert (scored.scored, scored.flagged, scored.answers) == (18, 9, 18)
    assert scored.attrs["counts"]["answers"] == 18
    assert [line for line in lines if line.startswith("answers ")] == [
        "answers 1-4 of 18", "answers 5-8 of 18", "answers 9-12 of 18", "answers 13-16 of 18",
        "answers 17-18 of 18",
    ]  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "blocks").iterdir()) == sorted(FILES)


def test_an_error_in_a_later_block_leaves_nothing_written(collection, tmp_path):
    good = pd.DataFrame(answers(1)).assign(answer_id=[f"a{i}" for i in range(6)])
    bad = good.assign(answer_id=[f"b{i}" for i in range(6)], qid="q9")
    run = ScoringRun(collection, {"relevance": "tfidf"}, cache=False)
    with pytest.raises(NrpError, match="not topics of collection 'flag-tiny': q9"):
        write_score_files(run, [good, bad], 12, tmp_path / "new")
    assert not (tmp_path / "new").exists()  # the folder this run made is gone again
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "results.csv").write_text("earlier\n")
    run = ScoringRun(collection, {"relevance": "tfidf"}, cache=False)
    with pytest.raises(NrpError):
        write_score_files(run, [good, bad], 12, kept)
    assert [p.name for p in kept.iterdir()] == ["results.csv"]
    assert (kept / "results.csv").read_text() == "earlier\n"


def test_flags_of_a_later_block_have_no_header_in_the_forked_worker_and_here(collection):
    frame = pd.DataFrame(answers(900)).assign(answer_id=[f"x{i}" for i in range(5400)])
    here = FlagsFile.of(flag_answers(collection, frame), header=False)
    aside = flags_aside(collection, frame, header=False)()  # 5,400 answers: a forked worker
    assert aside == here
    assert here.data.count(b"\n") == 5400 and not here.data.startswith(b"answer_id,")
    assert (here.flagged, here.answers) == (900 * 3, 5400)
    assert flags_aside(collection, frame)().data.startswith(b"answer_id,")


def test_blocks_hold_whole_batches_of_the_positioner():
    # a block is whole stream windows of whole batches, so the frozen-statistics strategies
    # make the same score calls (counted in the results' attrs) as on the whole set
    assert BLOCK_ANSWERS % STREAM_ANSWERS == 0 and STREAM_ANSWERS % ScoreSettings.chunk_size == 0


def results_like(rows: int) -> pd.DataFrame:
    """A frame with the results' columns and dtypes (values made up, deterministic)."""
    rng = np.random.default_rng(0)
    n = np.arange(rows)
    strings = {
        "answer_id": [f"m/p/{i // 2}/0" for i in n],
        "llm": ["m"] * rows,
        "prompt": ["p"] * rows,
        "qid": [str(i % 150) for i in n],
        "dimension": np.where(n % 2, "weighted", "relevance"),
        "ranker": np.where(n % 2, "", "bm25"),
    }
    columns = {name: pd.array(values, dtype="str") for name, values in strings.items()}
    columns.update(
        sample=np.zeros(rows, np.int64),
        score=rng.normal(size=rows),
        rank=(n % 7).astype(float),
        n_docs=(n % 11 + 1).astype(np.int64),
        ties=pd.arrays.IntegerArray(n % 3, n % 5 == 0),
        nrp=rng.random(rows),
    )
    return pd.DataFrame(columns, columns=list(RESULT_COLUMNS))


def test_parquet_from_blocks_keeps_the_row_groups_and_bytes_of_to_parquet(tmp_path):
    frame = results_like(ROW_GROUP + 70_001)
    attrs = {"collection": "c", "counts": {"answers": len(frame) // 2}, "warnings": ["w"]}
    whole = frame.copy()
    whole.attrs.update(attrs)
    expected = io.BytesIO()
    whole.to_parquet(expected, index=False)
    parquet, csv = tmp_path / "r.parquet", tmp_path / "r.csv"
    cuts = [0, 300_001, 300_001, 600_001, 900_000, 1_200_000, len(frame)]  # an empty block too
    with ResultFiles(parquet, csv) as files:
        for start, end in itertools.pairwise(cuts):
            files.add(frame.iloc[start:end])
        files.finish(attrs)
    assert parquet.read_bytes() == expected.getvalue()
    assert pq.ParquetFile(parquet).metadata.num_row_groups == 2
    assert pd.read_parquet(parquet).attrs == attrs


def test_csv_from_blocks_is_the_whole_frames_csv(tmp_path):
    frame = results_like(10_001)
    with ResultFiles(tmp_path / "r.parquet", tmp_path / "r.csv") as files:
        for start in range(0, len(frame), 3_333):
            files.add(frame.iloc[start : start + 3_333])
        files.finish({})
    assert (tmp_path / "r.csv").read_bytes() == frame.to_csv(index=False).encode()


def test_the_library_verb_writes_what_the_command_writes(indexes, collection, tmp_path):
    """``nrp.score(..., out=DIR)`` is ``nrp score --out DIR``: the same files, byte for byte,
    from a file path, a frame or blocks; without ``out`` the results frame, the same rows."""
    path = write_jsonl(tmp_path / "a.jsonl", answers(3))
    score_cli(indexes, path, tmp_path / "cli")
    from_path = score(collection, path, {"relevance": "tfidf"}, out=tmp_path / "path", cache=False)
    frame = read_answers(path, collection).answers
    score(collection, frame, RankerChoice.from_options([RANKER]), out=tmp_path / "f", cache=False)
    blocks = read_answer_blocks(path, collection, rows=4)
    score(
        collection, blocks, {"relevance": "tfidf"}, ScoreSettings(cache=False), out=tmp_path / "b"
    )
    for name in FILES:
        cli = (tmp_path / "cli" / name).read_bytes()
        for folder in ("path", "f", "b"):
            assert (tmp_path / folder / name).read_bytes() == cli, (folder, name)
    assert (from_path.scored, from_path.flagged, from_path.answers) == (18, 9, 18)
    assert not from_path.citations and not (tmp_path / "path" / "citations.csv").exists()
    results = score(collection, path, {"relevance": "tfidf"}, cache=False)
    written = pd.read_parquet(tmp_path / "cli" / "results.parquet")
    pd.testing.assert_frame_equal(results.reset_index(drop=True), written)
