"""The Ray executor on a real two-node Ray cluster started by the test on this machine (a head and
a worker node, one CPU each, loopback addresses, see ray_cluster.py), on real MEDIQA 2019 data:

- NRP with tfidf and bm25 through Ray equals the plain in-process run (every column, bit for
  bit), with the work spread over both nodes and every position stored once by the driver;
- an interrupted Ray run resumes with the missing partitions only;
- a worker that cannot read the driver's path gets the collection through the object store;
- validation (tfidf, bm25: every document scored on the actors, measures on the driver) equals
  the local run;
- evaluation (BLEU, ROUGE, and NRP whose positioning goes through Ray too) equals the local run;
- ``nrp score --executor ray --ray-address`` writes what ``--executor local`` writes;
- generation (a tiny Llama built here) through Ray equals the plain run text for text, also
  when node 2 is killed in the middle (its batches are generated again on the head, each
  answer stored once), and ``nrp run --executor ray`` writes what the local run writes;
- node 2 killed with SIGKILL in the middle of a run (its raylet and its actor): its partitions
  are sent again to the head's actor, and the results are complete, without duplicates, and
  equal to the local run.

One cluster serves the module (starting it takes ~20 s here); the generation node-kill test
starts node 2 again, the scoring node-kill test runs last."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
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
from ray_cluster import LocalRayCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from tiny_llm import build_tiny_llama

from nrp.cli import main
from nrp.evaluators.run import evaluate_answers
from nrp.executors import LocalExecutor, RayExecutor
from nrp.generation import generate_answers
from nrp.generation.generate import store_path
from nrp.llm.backends import GenerationOptions
from nrp.positioning.job import PositionJob
from nrp.positioning.partitions import ScoringPartition, ranker_task
from nrp.positioning.results_cache import RESULTS_FILE
from nrp.positioning.scoring import score_answers
from nrp.rankers.cache import SCORE_CACHE_FILE
from nrp.rankers.registry import make_ranker
from nrp.validation import validate

pytestmark = [pytest.mark.slow, pytest.mark.shared_data]

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

N_QUERIES = 60  # 60 topics x 4 answers = 240 answers, 15 partitions of 16 (4 topics each)


@pytest.fixture(scope="module")
def mediqa(tmp_path_factory):
    return ingest_mediqa(tmp_path_factory.mktemp("indexes"))


@pytest.fixture(scope="module")
def answers(mediqa):
    return mediqa_answers(mediqa, n_queries=N_QUERIES)


@pytest.fixture(scope="module")
def cluster():
    # a short folder: Ray's socket paths inside it must fit AF_UNIX's 107 bytes
    folder = Path(tempfile.mkdtemp(prefix="nrp-ray-", dir="/tmp"))
    started = LocalRayCluster(folder)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in started.auth_env.items():  # this process is the cluster's driver
            patch.setenv(key, value)
        patch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
        try:
            started.start()
            yield started
        finally:
            started.stop()
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def executor(cluster):
    ray_executor = RayExecutor(cluster.address)
    yield ray_executor
    ray_executor.close()


def nodes_of(stats) -> set[str]:
    return {name.split("/")[0] for name in stats.workers}


@pytest.mark.parametrize("spec", ["tfidf", "bm25"])
def test_ray_scores_equal_the_local_run(mediqa, answers, tmp_path, executor, spec):
    plain = score_answers(fresh_copy(mediqa, tmp_path / "plain"), answers, spec)
    collection = fresh_copy(mediqa, tmp_path / "ray")
    found = score_answers(collection, answers, spec, executor=executor, chunk_size=16)
    pd.testing.assert_frame_equal(found, plain)
    assert found.attrs["counts"]["answers_scored"] == len(answers) == 240
    assert (
        found.attrs["counts"]["documents_rescored"] == plain.attrs["counts"]["documents_rescored"]
    )
    stats = executor.stats
    assert stats.partitions == 15 and stats.items == 240 and stats.resubmitted == 0
    assert len(nodes_of(stats)) == 2  # both nodes computed partitions
    assert cache_rows(collection.path / RESULTS_FILE, "answer_positions") == 240


def test_an_interrupted_ray_run_resumes(mediqa, answers, tmp_path, executor):
    collection = fresh_copy(mediqa, tmp_path / "c")
    interrupted_bm25_run(collection, answers, executor, stored=3)
    assert cache_rows(collection.path / RESULTS_FILE, "answer_positions") == 48  # 3 x 16
    resumed = score_answers(collection, answers, "bm25", executor=executor, chunk_size=16)
    assert resumed.attrs["counts"]["answers_from_results_cache"] == 48
    assert executor.stats.partitions == 12 and executor.stats.items == 192
    plain = score_answers(fresh_copy(mediqa, tmp_path / "p"), answers, "bm25")
    pd.testing.assert_frame_equal(resumed, plain)
    assert cache_rows(collection.path / RESULTS_FILE, "answer_positions") == 240


def test_the_collection_travels_through_the_object_store(mediqa, answers, executor):
    ranker = make_ranker("bm25")
    ranker.bind_collection(mediqa)
    task = ranker_task(executor, PositionJob.of(mediqa, ranker))
    assert task.collection.store is not None  # an ObjectRef of collection.sqlite's bytes
    elsewhere = dataclasses.replace(
        task,
        collection=dataclasses.replace(task.collection, path="/nonexistent/mediqa-2019"),
    )
    parts = [
        ScoringPartition(frame[["answer_id", "qid", "text"]].reset_index(drop=True))
        for _, frame in answers.groupby("qid", sort=False)
    ][:6]
    found = executor.run_partitions(elsewhere, parts)
    expected = LocalExecutor().run_partitions(task, parts)
    for got, want in zip(found, expected, strict=True):
        pd.testing.assert_frame_equal(got.positions, want.positions)
    assert sum(len(r.positions) for r in found) == 24


def test_ray_evaluation_equals_the_local_run(mediqa, answers, tmp_path, executor):
    specs = "bleu,rouge,nrp:rankers=tfidf"
    subset = answers.head(40)
    plain = evaluate_answers(fresh_copy(mediqa, tmp_path / "plain"), subset, specs, pseudo_k=1)
    first = len(executor.history)
    found = evaluate_answers(
        fresh_copy(mediqa, tmp_path / "ray"), subset, specs, pseudo_k=1, executor=executor
    )
    pd.testing.assert_frame_equal(found, plain)
    # bleu and rouge ran on the actors; NRP on the driver with its positioning on the actors
    assert [s.task for s in executor.history[first:]] == ["bleu", "rouge", "tfidf"]
    assert [s.items for s in executor.history[first:]] == [40, 40, 40]


def test_nrp_score_with_the_ray_executor(mediqa, answers, tmp_path, cluster, executor, capsys):
    executor.close()  # the CLI's executor starts its own actors: free the CPUs
    folder = tmp_path / "indexes"
    shutil.copytree(mediqa.path, folder / "mediqa-2019")
    answers_file = tmp_path / "answers.jsonl"
    answers.to_json(answers_file, orient="records", lines=True)
    common = ["score", "mediqa-2019", str(answers_file), "--ranker", "bm25"]
    local = main([*common, "--out", str(tmp_path / "local"), "--indexes", str(folder)])
    for cache in folder.glob("mediqa-2019/*.sqlite*"):
        if cache.name != "collection.sqlite":
            cache.unlink()
    capsys.readouterr()
    code = main(
        [*common, "--out", str(tmp_path / "ray"), "--indexes", str(folder),
         "--executor", "ray", "--ray-address", cluster.address]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert local == 0 and code == 0, err
    # 240 answers, about four partitions per actor: up to 30 answers, 7 topics of 4 answers
    assert "ray: bm25: 9 partition(s) on 2 worker(s)" in err
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "ray" / "results.parquet"),
        pd.read_parquet(tmp_path / "local" / "results.parquet"),
    )


def test_ray_validation_equals_the_local_run(mediqa, tmp_path, executor):
    specs = ["tfidf", "bm25"]  # (no random control: the last task is bm25's)
    plain = validate(mediqa, specs, cache=False, random_control=False)
    collection = fresh_copy(mediqa, tmp_path / "ray")
    found = validate(collection, specs, executor=executor, random_control=False)
    assert found.to_dict() == plain.to_dict()
    stats = executor.stats
    # 1,107 judged documents of 150 queries; balanced_size(1107, 2048, 2 actors) = 139
    assert (stats.task, stats.items) == ("bm25", 1107) and stats.partitions >= 8
    assert len(nodes_of(stats)) == 2
    assert cache_rows(collection.path / SCORE_CACHE_FILE, "scores") == 2 * 1107


GENERATION = GenerationOptions(
    max_new_tokens=6, temperature=0.75, top_k=50, top_p=0.95, repetition_penalty=1.2, seed=5
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(build_tiny_llama(tmp_path_factory.mktemp("tiny-llm")))


def tiny_llm(tiny: str) -> str:
    return f"local:model={tiny},name=tiny,device=cpu,batch=4"


def test_ray_generation_equals_the_local_run(mediqa, tiny, tmp_path, executor):
    topics = mediqa.topics.head(8)  # 8 topics x 2 prompts x 2 samples = 32 answers, 8 batches
    args = (topics, tiny_llm(tiny), "short-qa,long-qa", 2, GENERATION)
    plain = generate_answers(*args, tmp_path / "plain.jsonl")
    found = generate_answers(*args, tmp_path / "ray.jsonl", executor=executor)
    pd.testing.assert_frame_equal(
        found.drop(columns="created_at"), plain.drop(columns="created_at")
    )
    assert found.attrs["counts"] == plain.attrs["counts"]
    stats = executor.stats
    # balanced_size(8 batches, 64, 2 actors) = 1 batch of 4 answers per partition
    assert (stats.task, stats.partitions, stats.items) == ("generate tiny", 8, 32)
    assert len(nodes_of(stats)) == 2
    assert len(store_path(tmp_path / "ray.jsonl").read_text().splitlines()) == 32


def test_generation_survives_a_killed_worker_node(mediqa, tiny, tmp_path, cluster, executor):
    """Node 2 killed after the first batch arrives: its batches are generated again on the
    head's actor; every answer is in the store once and equals the plain run. Node 2 is started
    again afterwards (the scoring node-kill test needs it)."""
    topics = mediqa.topics.head(8)
    args = (topics, tiny_llm(tiny), "short-qa,long-qa", 2, GENERATION)
    killed: list[int] = []

    def kill_node_two_after_the_first_partition(line: str) -> None:
        if "generated" in line and not killed:
            killed.extend(cluster.kill_worker_node())

    out = tmp_path / "ray.jsonl"
    try:
        found = generate_answers(
            *args, out, executor=executor, progress=kill_node_two_after_the_first_partition
        )
        stats = executor.stats
    finally:
        cluster.start_worker_node()
    assert killed
    assert stats.workers_lost == 1 and stats.resubmitted >= 1
    assert (stats.partitions, stats.items) == (8, 32)  # each partition accepted once
    plain = generate_answers(*args, tmp_path / "plain.jsonl")
    pd.testing.assert_frame_equal(
        found.drop(columns="created_at"), plain.drop(columns="created_at")
    )
    ids = [json.loads(line)["answer_id"] for line in store_path(out).read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 32


def test_nrp_run_with_the_ray_executor(tiny, tmp_path, cluster, executor, capsys):
    """The tiny experiment of tests/experiments through ``nrp run --executor ray``: generation,
    positioning (tfidf) and BLEU on the cluster; the same tables as the local run."""
    executor.close()  # the CLI's executor starts its own actors: free the CPUs
    manifest = Path(__file__).resolve().parents[2] / "nrp" / "data" / "demo" / "manifest.yaml"
    runs = {}
    for kind in ("local", "ray"):
        path = tmp_path / f"{kind}.yaml"
        path.write_text(
            "\n".join(
                [
                    "name: tiny",
                    f"collection: {{manifest: {manifest}, name: demo}}",
                    f"indexes: {tmp_path / kind / 'indexes'}",
                    f"out: {tmp_path / kind / 'run'}",
                    f"llms: [{{name: tiny, backend: local, model: {tiny}, device: cpu}}]",
                    "prompts: [short-qa, long-qa]",
                    "samples: 2",
                    "limit_queries: 3",
                    "generation: {max_new_tokens: 6, seed: 3}",
                    "rankers: {fixed: tfidf}",
                    "evaluators: [bleu]",
                    "report: false",
                ]
            )
            + "\n"
        )
        extra = ["--executor", "ray", "--ray-address", cluster.address] if kind == "ray" else []
        capsys.readouterr()
        assert main(["run", str(path), *extra]) == 0
        runs[kind] = (tmp_path / kind / "run", capsys.readouterr().err)
    (local, _), (ray, err) = runs["local"], runs["ray"]
    for task in ("generate tiny", "tfidf", "bleu"):
        assert f"ray: {task}: " in err
    for table in ("results.parquet", "evaluations.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(ray / table), pd.read_parquet(local / table))
    answers = ["answer_id", "text", "seed"]
    pd.testing.assert_frame_equal(
        pd.read_parquet(ray / "answers.parquet")[answers],
        pd.read_parquet(local / "answers.parquet")[answers],
    )
    counts = json.loads((ray / "run.json").read_text())["counts"]
    assert counts["generate"]["tiny"]["generated"] == 12


def test_a_worker_node_killed_mid_run_loses_nothing(mediqa, answers, tmp_path, cluster, executor):
    """Runs last: node 2 is gone afterwards."""
    collection = fresh_copy(mediqa, tmp_path / "c")
    killed: list[int] = []

    def kill_node_two_after_the_first_partition(line: str) -> None:
        if "positioned" in line and not killed:
            killed.extend(cluster.kill_worker_node())

    found = score_answers(
        collection, answers, "bm25", executor=executor, chunk_size=16,
        progress=kill_node_two_after_the_first_partition,
    )  # fmt: skip
    assert killed
    stats = executor.stats
    assert stats.workers_lost == 1 and stats.resubmitted >= 1
    assert stats.partitions == 15 and stats.items == 240  # each partition accepted once
    plain = score_answers(fresh_copy(mediqa, tmp_path / "p"), answers, "bm25")
    pd.testing.assert_frame_equal(found, plain)
    assert found.groupby("dimension")["answer_id"].apply(lambda s: s.is_unique).all()
    assert cache_rows(collection.path / RESULTS_FILE, "answer_positions") == 240
