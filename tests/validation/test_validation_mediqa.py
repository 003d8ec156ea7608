"""Validation on the real MEDIQA 2019 test set (../shared/data; skipped with a reason when absent,
or while the lexical rankers are not there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nrp import Collection, ingest
from nrp.rankers.registry import all_rankers
from nrp.validation import validate

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Ingests MEDIQA 2019 once per module, after ``shared_data`` has checked it is there."""
    indexes = tmp_path_factory.mktemp("indexes")

    def build(shared_data) -> Collection:
        shared_data("mediqa-2019")  # skips with a reason when ../shared/data is absent
        if not (indexes / "mediqa-2019" / "collection.sqlite").exists():
            ingest(MANIFESTS / "mediqa-2019.yaml", indexes_dir=indexes)
        return Collection.load("mediqa-2019", indexes)

    return build


@pytest.fixture
def mediqa(built, shared_data) -> Collection:
    return built(shared_data)


def lexical_or_skip() -> list[str]:
    rankers = all_rankers()
    wanted = ["bm25", "tfidf", "dph"]
    missing = [name for name in wanted if name not in rankers]
    if missing:
        pytest.skip(f"lexical rankers {missing} not registered (nrp/rankers/lexical.py)")
    for name in wanted:
        ok, reason = rankers[name].available()
        if not ok:
            pytest.skip(f"ranker {name} not available here: {reason}")
    return wanted


@pytest.mark.shared_data
def test_random_baseline_on_mediqa(mediqa):
    result = validate(mediqa, ["random"], cache=False)
    rel = result.dimensions["relevance"]
    # every one of the 150 questions has an answer graded 2 or better (gain >= 1)
    assert len(rel.judged_queries) == 150 and len(rel.evaluated_queries) == 150
    assert rel.judgments == 1_107 and rel.out_of_scope_judgments == 0
    # the hash order is fixed: this number may only change with the hash or the data
    assert rel.summary["random"]["nDCG@10"].mean == pytest.approx(0.8444, abs=5e-5)


@pytest.mark.slow
@pytest.mark.shared_data
def test_bm25_beats_random_on_mediqa(mediqa):
    lexical_or_skip()
    # stats=collection without collection=NAME: statistics over the validated collection's docs
    corpus = "stats=collection"
    specs = [f"bm25:{corpus}", "bm25", "random"]
    result = validate(mediqa, specs, cache=False, validity=False)
    rel = result.dimensions["relevance"]
    assert len(rel.evaluated_queries) == 150
    name = {spec: system.name for spec, system in zip(specs, result.systems, strict=True)}
    means = {spec: rel.summary[name[spec]]["nDCG@10"].mean for spec in specs}
    # BM25 with collection statistics beats the random order, significantly
    assert means[f"bm25:{corpus}"] > means["random"]
    assert rel.p_against(name[f"bm25:{corpus}"], name["random"]) < 0.05
    # Not asserted, reported: with statistics over D_q alone (stats=query, |D_q| 2-11), most
    # matching query terms occur in more than half of D_q, where Terrier's BM25 idf
    # log2((N - df + 0.5)/(df + 0.5)) is negative, and bm25 then ranks below random.
    print("\n" + result.tables()["relevance"])  # the table goes into the report (pytest -s)


@pytest.mark.shared_data
def test_validation_on_an_executor_equals_the_local_run(mediqa, tmp_path):
    """Through ``LocalExecutor`` (the worker code a Ray actor runs; tests/executors runs it on a
    real Ray cluster): documents the score cache lacks are scored in per-query partitions and
    stored as they arrive; the result equals the plain run's, and a second run computes
    nothing."""
    import shutil

    from nrp.executors import LocalExecutor
    from nrp.rankers.cache import SCORE_CACHE_FILE

    lexical_or_skip()
    specs = ["tfidf", "bm25:stats=collection"]  # (without the random control: two tasks)
    plain = validate(mediqa, specs, cache=False, random_control=False)
    shutil.copytree(mediqa.path, tmp_path / "mediqa-2019")
    copy = Collection.load("mediqa-2019", tmp_path)
    (copy.path / SCORE_CACHE_FILE).unlink(missing_ok=True)
    executor = LocalExecutor()
    found = validate(copy, specs, executor=executor, random_control=False)
    assert found.to_dict() == plain.to_dict()
    # 1,107 documents of 150 queries per ranker: balanced_size(1107, 2048, 1) = 277 per
    # partition at most, whole queries packed: 5 partitions
    assert [(s.task, s.items, s.partitions) for s in executor.history] == [
        ("tfidf", 1107, 5), ("bm25:stats=collection", 1107, 5)
    ]  # fmt: skip
    assert [s.computed for s in found.systems] == [1107, 1107]
    again = validate(copy, specs, executor=LocalExecutor(), random_control=False)
    assert [s.computed for s in again.systems] == [0, 0]
    assert again.dimensions["relevance"].summary == found.dimensions["relevance"].summary
