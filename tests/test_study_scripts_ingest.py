"""The study scripts load a collection from ``--indexes`` and ingest it from ``manifests/`` when it
is missing there (on a fresh clone every collection is missing): a real ingest of MEDIQA 2019 into
an empty folder, for each script that does it."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "studies"


@pytest.mark.parametrize("script", ["validity_study.py", "weighting_study.py", "tune_guard.py"])
def test_a_collection_missing_from_the_indexes_is_ingested_from_its_manifest(
    script, tmp_path, shared_data
):
    shared_data("mediqa-2019")
    load = runpy.run_path(str(SCRIPTS / script), run_name="study")["load_or_ingest"]
    collection = load("mediqa-2019", tmp_path)
    assert collection.name == "mediqa-2019" and len(collection.topics) == 150
    assert (tmp_path / "mediqa-2019").is_dir()
    assert load("mediqa-2019", tmp_path).name == "mediqa-2019"  # found the second time
