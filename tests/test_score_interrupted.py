"""An interrupted ``nrp score`` leaves no partial files: SIGTERM removes what it wrote aside and
exits 143 with one line; what a run killed outright (SIGKILL) left is removed by the next run,
which says so. A real child process on the demo collection, killed while it writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

import nrp
from nrp import ingest

pytestmark = pytest.mark.slow  # a child process scoring 120,000 answers: several seconds

DEMO = resources.files("nrp") / "data" / "demo"


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("interrupted")
    ingest(DEMO / "manifest.yaml", indexes_dir=root / "ix")
    rows = [json.loads(line) for line in (DEMO / "answers.jsonl").read_text().splitlines()]
    many = root / "many.jsonl"
    with many.open("w", encoding="utf-8") as out:
        for copy in range(120_000 // len(rows) + 1):
            for row in rows:
                copied = {k: v for k, v in row.items() if k != "answer_id"}  # ids derived
                out.write(json.dumps({**copied, "prompt": f"{row['prompt']}-{copy}"}) + "\n")
    few = root / "few.jsonl"
    few.write_text("".join(json.dumps(row) + "\n" for row in rows[:5]), encoding="utf-8")
    return root, many, few


def command(root: Path, answers: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "nrp", "score", "demo", str(answers), "--ranker", "bm25",
            "--out", str(out), "--indexes", str(root / "ix")]  # fmt: skip


def environment() -> dict[str, str]:
    here = str(Path(nrp.__file__).parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get(
        "PYTHONPATH")]))}  # fmt: skip


def started_writing(root: Path, answers: Path, out: Path) -> subprocess.Popen:
    """The command, once its results file is being written aside."""
    child = subprocess.Popen(
        command(root, answers, out), env=environment(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (out / ".results.csv.partial").exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "no partial results file in 120 s"
        time.sleep(0.05)
    return child


def test_sigterm_leaves_no_partial_file_and_says_so(setup):
    root, many, _ = setup
    out = root / "out-term"
    child = started_writing(root, many, out)
    child.send_signal(signal.SIGTERM)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 143, stderr[-2000:]
    assert stderr.splitlines()[-1] == "nrp: terminated (SIGTERM); nothing half-written was left"
    assert "Traceback" not in stderr
    assert not out.exists()  # the folder this run made, removed again with nothing in it


def test_what_a_killed_run_left_is_removed_by_the_next_run(setup):
    root, many, few = setup
    out = root / "out-kill"
    child = started_writing(root, many, out)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    left = sorted(p.name for p in out.iterdir())
    assert ".results.csv.partial" in left  # SIGKILL: nothing could remove it
    again = subprocess.run(
        command(root, few, out), env=environment(), capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr[-2000:]
    partial = out / ".results.csv.partial"
    assert f"removed {partial}: left by a run of nrp score that was killed" in again.stderr
    assert not [p for p in out.iterdir() if p.name.endswith(".partial")]
    assert (out / "results.csv").exists() and (out / "flags.csv").exists()
