"""The executor layer without Ray: per-query partitions, the local executor running the same
partition protocol a Ray actor runs, shipped collections and specs, and scoring and evaluation
through an executor giving exactly what the plain in-process path gives on real MEDIQA 2019 data
(positions, score-cache rows, evaluation-cache rows), resumably.

The Ray executor is tested on a real two-node cluster in test_ray_executor.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
from executor_data import (
    cache_rows,
    fresh_copy,
    ingest_mediqa,
    interrupted_bm25_run,
    mediqa_answers,
)

from nrp.collection.shipping import CollectionRef
from nrp.components import component_spec
from nrp.errors import ConfigError, NrpError
from nrp.evaluators.base import all_evaluators, make_evaluator
from nrp.evaluators.cache import EVALUATION_CACHE_FILE
from nrp.evaluators.run import evaluate_answers
from nrp.executors import (
    LocalExecutor,
    active_executor,
    balanced_size,
    make_executor,
    partition_by_query,
    using_executor,
)
from nrp.positioning.job import PositionJob
from nrp.positioning.partitions import ScoringPartition, ranker_task
from nrp.positioning.results_cache import RESULTS_FILE
from nrp.positioning.scoring import score_answers
from nrp.rankers.base import REQUIRED_COLUMNS
from nrp.rankers.cache import SCORE_CACHE_FILE
from nrp.rankers.random_order import RandomOrder
from nrp.rankers.registry import all_rankers, make_ranker
from nrp.validation.partitions import DocumentScoringTask


# -- partitions and options --------------------------------------------------------------------
def test_partitions_hold_whole_queries():
    # a: rows 0, 1; b: row 2; c: rows 3, 4, 5; d: row 6. Size 3: a+b fill one partition, c is
    # one, d one.
    assert partition_by_query(list("aabcccd"), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    # a query larger than the size is not split; rows of a query are gathered wherever they are
    assert partition_by_query(list("abbbba"), 2) == [[0, 5], [1, 2, 3, 4]]
    assert partition_by_query(list("aab"), 100) == [[0, 1, 2]]
    assert partition_by_query([], 5) == []
    with pytest.raises(ConfigError, match="at least 1"):
        partition_by_query(["a"], 0)
    # at most the limit, and about four partitions per worker when that is smaller
    assert balanced_size(240, 16, 2) == 16
    assert balanced_size(240, 256, 2) == 30  # ceil(240 / (2 workers x 4))
    assert balanced_size(3, 256, 4) == 1 and balanced_size(0, 256, 1) == 1


def test_executor_options():
    assert make_executor("local") is None  # the plain in-process path
    with pytest.raises(ConfigError, match="--ray-address needs --executor ray"):
        make_executor("local", "127.0.0.1:6379")
    with pytest.raises(ConfigError, match="unknown executor 'spark'"):
        make_executor("spark")
    executor = LocalExecutor()
    assert active_executor() is None
    with using_executor(executor):
        assert active_executor() is executor
    assert active_executor() is None


def test_no_cluster_at_the_address_is_one_clear_error(tmp_path):
    executor = make_executor("ray", "127.0.0.2:1")  # nothing listens on port 1
    with pytest.raises(NrpError, match=r"no Ray cluster at 127\.0\.0\.2:1"):
        executor.parallelism()
    executor.close()


def test_specs_rebuild_the_component():
    ranker = make_ranker("bm25:k1=1.5")
    spec = component_spec(ranker, all_rankers(), make_ranker)
    assert spec is not None and "k1=1.5" in spec
    assert make_ranker(spec).fingerprint() == ranker.fingerprint()

    class Subclass(RandomOrder):  # no registry spec rebuilds it: the object is shipped
        pass

    assert component_spec(Subclass({"seed": 0}), all_rankers(), make_ranker) is None
    rouge = make_evaluator("rouge:use_stemmer=false,label=x")
    spec = component_spec(rouge, all_evaluators(), make_evaluator)
    assert spec is not None
    rebuilt = make_evaluator(spec)
    assert rebuilt.fingerprint() == rouge.fingerprint()
    assert rebuilt.output_columns() == ["x.rouge.1", "x.rouge.2", "x.rouge.L"]


# -- on MEDIQA 2019 ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mediqa(tmp_path_factory):
    return ingest_mediqa(tmp_path_factory.mktemp("indexes"))


@pytest.fixture(scope="module")
def answers(mediqa):
    # 30 topics x (2 documents of the next topic, a short text, a copy of an own document)
    return mediqa_answers(mediqa, n_queries=30)


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "spec",
    [
        "tfidf",  # lexical, statistics with the answer: no score cache read
        "bm25",
        "bm25:stats=collection",  # frozen statistics: D_q from the score cache
        "random",  # pointwise: D_q from the score cache
    ],
)
def test_local_executor_equals_the_plain_path(mediqa, answers, tmp_path, spec):
    plain_c = fresh_copy(mediqa, tmp_path / "plain")
    exec_c = fresh_copy(mediqa, tmp_path / "exec")
    plain = score_answers(plain_c, answers, spec)
    executor = LocalExecutor()
    found = score_answers(exec_c, answers, spec, executor=executor, chunk_size=16)
    pd.testing.assert_frame_equal(found, plain)
    assert found.attrs["counts"]["answers_scored"] == len(answers) == 120
    for key in ("documents_scored", "documents_rescored"):
        assert found.attrs["counts"][key] == plain.attrs["counts"][key]
    # 30 queries of 4 answers in partitions of up to 16 answers: 4 queries each, 8 partitions
    assert executor.stats.partitions == 8 and executor.stats.items == 120
    # the driver stored what the worker computed: the same cache rows as the plain run
    for path, table in ((RESULTS_FILE, "answer_positions"), (SCORE_CACHE_FILE, "scores")):
        assert cache_rows(exec_c.path / path, table) == cache_rows(plain_c.path / path, table)
    assert cache_rows(exec_c.path / RESULTS_FILE, "answer_positions") == 120
    # a second run sends nothing
    again = score_answers(exec_c, answers, spec, executor=executor, chunk_size=16)
    assert again.attrs["counts"]["answers_from_results_cache"] == 120
    assert len(executor.history) == 1
    pd.testing.assert_frame_equal(again, plain)


@pytest.mark.shared_data
def test_interrupted_run_resumes_with_the_missing_partitions(mediqa, answers, tmp_path):
    collection = fresh_copy(mediqa, tmp_path / "c")
    executor = LocalExecutor()
    interrupted_bm25_run(collection, answers, executor, stored=2)
    assert cache_rows(collection.path / RESULTS_FILE, "answer_positions") == 32  # 2 x 16
    resumed = score_answers(collection, answers, "bm25", executor=executor, chunk_size=16)
    assert resumed.attrs["counts"]["answers_from_results_cache"] == 32
    assert executor.stats.partitions == 6 and executor.stats.items == 88
    plain = score_answers(fresh_copy(mediqa, tmp_path / "p"), answers, "bm25")
    pd.testing.assert_frame_equal(resumed, plain)
    assert cache_rows(collection.path / RESULTS_FILE, "answer_positions") == 120


def _task_and_partition(collection, answers, spec, executor):
    ranker = make_ranker(spec)
    ranker.bind_collection(collection)
    task = ranker_task(executor, PositionJob.of(collection, ranker))
    part = ScoringPartition(answers[["answer_id", "qid", "text"]].reset_index(drop=True))
    return task, part


@pytest.mark.shared_data
def test_a_shipped_collection_copy_serves_a_worker_without_the_path(mediqa, answers, tmp_path):
    absent = tmp_path / "not-on-this-node"
    data = (mediqa.path / "collection.sqlite").read_bytes()
    ref = CollectionRef(mediqa.name, str(absent), str(mediqa.meta["fingerprint"]), data)
    assert not ref.readable_here()
    copy, folder = ref.open()
    assert folder is not None and folder != mediqa.path
    assert copy.meta["fingerprint"] == mediqa.meta["fingerprint"] and len(copy.topics) == 150
    executor = LocalExecutor()
    task, part = _task_and_partition(mediqa, answers, "bm25", executor)
    assert task.ranker.startswith("bm25")  # shipped as a spec string
    shipped = dataclasses.replace(task, collection=ref)
    [result] = executor.run_partitions(shipped, [part])
    [expected] = LocalExecutor().run_partitions(task, [part])
    pd.testing.assert_frame_equal(result.positions, expected.positions)
    assert len(result.positions) == 120
    executor.close()  # the worker's copy goes with its state


@pytest.mark.shared_data
def test_a_worker_with_another_ranker_refuses(mediqa, answers):
    executor = LocalExecutor()
    task, part = _task_and_partition(mediqa, answers, "bm25", executor)
    wrong = dataclasses.replace(task, ranker_fingerprint="0" * 20)
    with pytest.raises(NrpError, match=r"fingerprint .* the driver's 0000"):
        executor.run_partitions(wrong, [part])
    missing = dataclasses.replace(
        task, collection=CollectionRef("x", str(Path("/nonexistent")), "f", None)
    )
    with pytest.raises(NrpError, match="not readable on this worker and no copy was shipped"):
        LocalExecutor().run_partitions(missing, [part])
    # validation's task builds its ranker the same way and refuses the same way
    documents = DocumentScoringTask(task.collection, "bm25", "bm25", "0" * 20)
    candidates = mediqa.candidates().head(5)[list(REQUIRED_COLUMNS)]
    with pytest.raises(NrpError, match=r"bm25: the ranker built on this worker .* refusing"):
        LocalExecutor().run_partitions(documents, [candidates])
    right = dataclasses.replace(documents, ranker_fingerprint=task.ranker_fingerprint)
    [scores] = LocalExecutor().run_partitions(right, [candidates])
    assert scores.shape == (5,) and (scores > 0).any()


@pytest.mark.slow
@pytest.mark.shared_data
def test_evaluation_on_the_local_executor_equals_the_plain_path(mediqa, answers, tmp_path):
    specs = "bleu,rouge,nrp:rankers=tfidf"
    answers = answers.head(40)  # 10 topics (ROUGE reads long pseudo-references slowly)
    plain_c = fresh_copy(mediqa, tmp_path / "plain")
    exec_c = fresh_copy(mediqa, tmp_path / "exec")
    plain = evaluate_answers(plain_c, answers, specs, pseudo_k=1)
    executor = LocalExecutor()
    found = evaluate_answers(exec_c, answers, specs, pseudo_k=1, executor=executor)
    pd.testing.assert_frame_equal(found, plain)
    # MEDIQA has no reference answers: pseudo-references (top-graded judged documents)
    assert (found["reference_kind"] == "pseudo-reference").all()
    assert found[["bleu", "rouge.L", "nrp.relevance"]].notna().all().all()
    # bleu and rouge ran as evaluation tasks; NRP on the driver, its tfidf positions as a task
    assert [s.task for s in executor.history] == ["bleu", "rouge", "tfidf"]
    # 40 answers with 40 distinct contents, cached per evaluator (bleu and rouge)
    assert cache_rows(exec_c.path / EVALUATION_CACHE_FILE, "evaluations") == 80
    assert cache_rows(plain_c.path / EVALUATION_CACHE_FILE, "evaluations") == 80
    again = evaluate_answers(exec_c, answers, specs, pseudo_k=1, executor=executor)
    assert again.attrs["evaluators"]["bleu"]["computed"] == 0
    assert len(executor.history) == 3
