"""Where ``nrp report`` finds the ranker validation, on a real run of the demo collection:
``nrp validate`` writes the collection's validation.json, ``nrp score`` (no --ranker) reads it
and records its path in scoring.json, and the report of the results folder finds it there; a
recorded file that is gone is a note, and the collection's own file is the last resort."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import pytest

from nrp import Collection, ingest
from nrp.cli import main
from nrp.validation.result import VALIDATION_FILE

DEMO = resources.files("nrp") / "data" / "demo"
pytestmark = pytest.mark.slow  # one validation, one scoring, three report builds


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("scored")
    ix = root / "ix"
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    assert main(["validate", "demo", "--rankers", "tfidf,random", "--no-validity",
                 "--indexes", str(ix)]) == 0  # fmt: skip
    results = root / "results"
    assert main(["score", "demo", str(DEMO / "answers.jsonl"), "--out", str(results),
                 "--indexes", str(ix)]) == 0  # fmt: skip
    return ix, results


def page(out: Path) -> str:
    return (out / "index.html").read_text(encoding="utf-8")


def test_score_records_the_validation_and_the_report_finds_it(scored, tmp_path, capsys):
    ix, results = scored
    used = (Collection.load("demo", ix).path / VALIDATION_FILE).resolve()
    record = json.loads((results / "scoring.json").read_text(encoding="utf-8"))
    assert record["validation"] == str(used) and record["collection"] == "demo"
    assert main(["report", str(results), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    manifest = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert manifest["inputs"]["validation"] == str(used)
    assert manifest["sections"][0] == "validation"
    assert "Ranker validation" not in manifest["absent"]
    assert f"<dt>Validation</dt><dd>{used} (recorded in scoring.json)</dd>" in page(
        tmp_path / "report"
    )


def test_a_recorded_validation_that_is_gone_is_a_note(scored, tmp_path, monkeypatch, capsys):
    ix, results = scored
    folder = tmp_path / "results"
    shutil.copytree(results, folder)
    record = json.loads((folder / "scoring.json").read_text(encoding="utf-8"))
    gone = tmp_path / "moved" / "validation.json"
    record["validation"] = str(gone)
    (folder / "scoring.json").write_text(json.dumps(record), encoding="utf-8")
    monkeypatch.setenv("NRP_INDEXES", str(tmp_path / "no-indexes"))
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    manifest = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert "validation" not in manifest["inputs"]
    assert manifest["absent"]["Ranker validation"] == (
        f"scoring.json records validation {gone}, which no longer exists; "
        "no validation.json (nrp validate ... --out, or --validation)"
    )
    # the collection's own validation.json, in the default indexes folder, is the last resort
    monkeypatch.setenv("NRP_INDEXES", str(ix))
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    manifest = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    used = (ix / "demo" / VALIDATION_FILE).resolve()
    assert manifest["inputs"]["validation"] == str(used)
    text = page(tmp_path / "report")
    assert f"{used} (collection demo&#x27;s, in the indexes folder)" in text
    assert f"scoring.json records validation {gone}, which no longer exists" in text
