"""Progress of the CLI's long steps: the library's lines as they are on a file or a pipe, and on
a terminal (a real pseudo-terminal here) a bar per counted step with its rate and time left;
nothing with --quiet."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from nrp import ingest
from nrp.progress import ProgressLines, counted

DEMO = resources.files("nrp") / "data" / "demo"
ROOT = Path(__file__).resolve().parents[1]
VALIDATE_LINES = [
    "ranking 120 documents with tfidf",
    "rankers: 1/3 validated",
    "ranking 120 documents with bm25",
    "rankers: 2/3 validated",
    "ranking 120 documents with random",  # the random baseline is always added
    "rankers: 3/3 validated",
]


def test_counted_lines():
    assert counted("bm25: 40/64 positioned") == ("bm25", 40, 64)
    assert counted("monot5:batch=8: 3/10 documents scored (ray)") == ("monot5:batch=8", 3, 10)
    assert counted("tiny: epoch 2/3: loss 0.6931 (12 steps)") == ("tiny", 2, 3)
    assert counted("rankers: 3/3 validated") == ("rankers", 3, 3)
    assert counted("ranking 120 documents with bm25") is None
    assert counted("bm25: 64 answers, 0 from the results cache") is None
    assert counted("x: 0/0 positioned") is None  # nothing to count


def test_lines_on_a_file_are_the_lines_and_nothing_else():
    stream = io.StringIO()
    progress = ProgressLines(stream)
    assert progress.bars is False  # a StringIO is no terminal
    for line in VALIDATE_LINES:
        progress(line)
    progress.close()
    assert stream.getvalue() == "".join(f"{line}\n" for line in VALIDATE_LINES)


def test_bars_count_each_step_and_close_at_the_total():
    stream = io.StringIO()
    progress = ProgressLines(stream, bars=True)
    progress("bm25: 64 answers, 0 from the results cache")
    progress("bm25: 16/64 positioned")
    progress("bleu: 1/2 evaluated")
    assert sorted(progress._open) == ["bleu", "bm25"]
    assert (progress._open["bm25"].n, progress._open["bm25"].total) == (16, 64)
    progress("bm25: 64/64 positioned")
    assert sorted(progress._open) == ["bleu"]
    progress.close()
    assert progress._open == {}
    text = stream.getvalue()
    for line in ("bm25: 64 answers, 0 from the results cache", "bm25: 16/64 positioned",
                 "bleu: 1/2 evaluated", "bm25: 64/64 positioned"):  # fmt: skip
        assert f"{line}\n" in text
    assert re.search(r"bm25:  25%\|.*\| 16/64 \[\d\d:\d\d<\d\d:\d\d", text)
    assert re.search(r"bleu:  50%\|.*\| 1/2 \[\d\d:\d\d<\d\d:\d\d", text)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory):
    ix = tmp_path_factory.mktemp("ix")
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    return ix


def validate_command(indexes: Path, out: Path, *options: str) -> list[str]:
    return [
        sys.executable, "-m", "nrp", *options, "validate", "demo", "--rankers", "tfidf,bm25",
        "--no-validity", "--no-cache", "--indexes", str(indexes), "--out", str(out),
    ]  # fmt: skip


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


def test_validate_piped_prints_the_lines_and_quiet_prints_none(indexes, tmp_path):
    for options, expected in (((), VALIDATE_LINES), (("--quiet",), [])):
        command = validate_command(indexes, tmp_path / "v.json", *options)
        proc = subprocess.run(command, capture_output=True, text=True, env=environment())
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.splitlines() == expected
        assert proc.stdout.endswith(f"wrote {tmp_path / 'v.json'}\n")


@pytest.mark.skipif(os.name != "posix", reason="pseudo-terminals are POSIX")
def test_validate_on_a_terminal_shows_the_time_left(indexes, tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    primary, secondary = pty.openpty()
    # a terminal 100 columns wide (a fresh pseudo-terminal has 0, where tqdm draws nothing)
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    command = validate_command(indexes, tmp_path / "v.json")
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=secondary, env=environment())  # fmt: skip
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait() == 0
    text = b"".join(chunks).decode()
    # every line as on a pipe, and between them the bar over the rankers with its time left
    lines = [line.split("\r")[-1] for line in text.split("\r\n")]
    assert [line for line in lines if line] == VALIDATE_LINES
    assert re.search(r"rankers:  33%\|.*\| 1/3 \[\d\d:\d\d<\d\d:\d\d, ", text)
    assert re.search(r"rankers:  67%\|.*\| 2/3 \[\d\d:\d\d<\d\d:\d\d, ", text)


def test_a_tick_every_few_seconds_and_at_the_end_only_inside_a_reported_step(monkeypatch):
    from nrp import progress as progress_module
    from nrp.progress import Ticker, reporting

    lines: list[str] = []
    Ticker("alone", 10, "done").add(10)  # no reported step around it: nothing, no error
    with reporting(lines.append):
        ticker = Ticker("texts", 10, "texts embedded")
        for _ in range(5):
            ticker.add(2)  # within TICK_SECONDS of the start: only the last line
        Ticker("short", 3, "done", min_total=4).add(3)  # under min_total: nothing
        monkeypatch.setattr(progress_module, "TICK_SECONDS", 0.0)
        every = Ticker("every", 3, "done")
        for _ in range(3):
            every.add(1)
    assert lines == ["texts: 10/10 texts embedded", "every: 1/3 done", "every: 2/3 done",
                     "every: 3/3 done"]  # fmt: skip
    assert counted(lines[0]) == ("texts", 10, 10)  # a counted line: a bar on a terminal


def test_score_says_how_far_the_embedding_is_in_a_pipe(indexes, tmp_path):
    """The answers' embedding before the first batch is positioned (the stream of a dense
    ranker) is no longer silent: ``dense stream: DONE/TOTAL texts embedded`` lines, in a pipe
    of a real child process, ending at the total: 520 answers, the 4 questions and, without a
    score cache, the 60 documents of their D_q."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(
        f'{{"llm": "m", "prompt": "p", "qid": "d{1 + i % 4}", "text": "Answer {i}: rest."}}\n'
        for i in range(520)
    ))  # fmt: skip
    command = [sys.executable, "-m", "nrp", "score", "demo", str(answers), "--ranker", "dense",
               "--no-cache", "--indexes", str(indexes), "--out", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, env=environment())
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    stream = [line for line in lines if line.startswith("dense stream: ")]
    assert stream and stream[-1] == "dense stream: 584/584 texts embedded"
    assert lines.index(stream[-1]) < lines.index("dense: 256/520 positioned")


def test_validate_says_how_far_a_neural_rankers_documents_are(tmp_path, shared_data):
    """Validation embeds D_q of every query with a neural ranker before its first count: the
    model's batches say how far they are (MEDIQA 2019: 1,107 judged documents, 1,020 distinct
    texts, each embedded once; none cached)."""
    from nrp import Collection, validate

    shared_data("mediqa-2019")  # skips with a reason when ../shared is absent
    ingest(ROOT / "manifests" / "mediqa-2019.yaml", indexes_dir=tmp_path)
    collection = Collection.load("mediqa-2019", tmp_path)
    lines: list[str] = []
    validate(collection, ["dense"], progress=lines.append, cache=False, validity=False,
             random_control=False, save=False)  # fmt: skip
    ticks = [line for line in lines if line.startswith("dense documents: ")]
    assert ticks and ticks[-1] == "dense documents: 1020/1020 texts embedded"
    assert lines.index(ticks[-1]) < lines.index("rankers: 1/1 validated")
