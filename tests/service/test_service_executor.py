"""The service worker's executor (``executor: local | ray``).

- Settings: ``executor`` and ``ray_address`` from the file, the environment and ``nrp serve``
  options, in that order; a bad executor or a Ray address without ``ray`` is a one-line error
  and exit 2 from ``nrp serve``.
- The unit functions with an executor (``LocalExecutor``: the very code a Ray actor runs, in
  this process) store the same positions and evaluation rows as the plain in-process path.
- End to end: a real two-node Ray cluster on loopback (tests/executors/ray_cluster.py) and a
  real ``nrp serve`` with ``executor: ray`` scoring MEDIQA 2019 answers with bm25 and BLEU: the
  job's rows equal ``score_answers`` / ``evaluate_answers`` run in this process (every column,
  exact floats), and the worker's "executor run" log lines show the partitions computed by Ray
  actors, processes of that cluster, on both of its nodes.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from service_helpers import (
    ADMIN_TOKEN,
    READ_TOKEN,
    Server,
    all_rows,
    wait_for_job,
    write_config,
    write_synth,
)

from nrp import Collection, ingest
from nrp.answers import read_answers
from nrp.cli import main as cli_main
from nrp.errors import ConfigError
from nrp.evaluators.cache import EVALUATION_CACHE_FILE
from nrp.evaluators.run import evaluate_answers
from nrp.executors import LocalExecutor
from nrp.positioning.results_cache import RESULTS_FILE
from nrp.positioning.scoring import score_answers
from nrp.service.compute import run_evaluate_units, run_rank_units
from nrp.service.config import ServiceConfig, load_config
from nrp.service.keys import EVALUATE, RANK, BatchKey
from nrp.service.pool import ModelPool
from nrp.service.store import json_value

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "executors"))
from executor_data import cache_rows, ingest_mediqa, mediqa_answers
from ray_cluster import LocalRayCluster

N_QUERIES = 6  # 6 MEDIQA topics x 4 answers: one partition per topic, 6 per executor run


# -- settings ------------------------------------------------------------------------------------
def test_executor_settings_from_file_environment_and_options(tmp_path):
    config_file = tmp_path / "service.yaml"
    config_file.write_text("auth: false\nexecutor: ray\nray_address: 10.0.0.5:6379\n")
    config = load_config(config_file, environ={})
    assert (config.executor, config.ray_address) == ("ray", "10.0.0.5:6379")
    assert load_config(None, {"auth": False}, environ={}).executor == "local"  # the default
    env = {"NRP_EXECUTOR": "ray", "NRP_RAY_ADDRESS": "10.0.0.6:6379"}
    from_env = load_config(config_file, environ=env)
    assert (from_env.executor, from_env.ray_address) == ("ray", "10.0.0.6:6379")
    # options win; an option left out (None) keeps the file's value
    options = load_config(config_file, {"ray_address": "auto", "executor": None}, environ=env)
    assert (options.executor, options.ray_address) == ("ray", "auto")
    local = load_config(None, {"auth": False, "executor": "LOCAL"}, environ={})
    assert (local.executor, local.ray_address) == ("local", "")
    # the worker process receives them with the rest
    assert ServiceConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="executor must be local or ray, got 'spark'"):
        load_config(None, {"auth": False}, environ={"NRP_EXECUTOR": "spark"})
    with pytest.raises(ConfigError, match=r"ray_address \(auto\) needs executor: ray"):
        load_config(None, {"auth": False, "ray_address": "auto"}, environ={})


@pytest.mark.parametrize(
    ("file_text", "options", "message"),
    [
        ("", ["--executor", "spark"], "executor must be local or ray, got 'spark'"),
        ("executor: dask\n", [], "executor must be local or ray, got 'dask'"),
        ("", ["--ray-address", "127.0.0.1:6379"], "ray_address (127.0.0.1:6379) needs executor"),
        ("ray_address: auto\n", [], "ray_address (auto) needs executor: ray"),
        ("executor: ray\nray_address: auto\n", ["--executor", "local"], "needs executor: ray"),
    ],
)
def test_nrp_serve_with_a_bad_executor_exits_2_with_one_line(
    tmp_path, capsys, monkeypatch, file_text, options, message
):
    for name in ("NRP_EXECUTOR", "NRP_RAY_ADDRESS", "NRP_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "service.yaml"
    path.write_text(f"indexes: {tmp_path}\n" + file_text)
    tokens = ["--no-auth"]
    assert cli_main(["serve", "--config", str(path), *tokens, *options]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nrp: error: ") and message in err, err
    assert len(err.splitlines()) == 1


# -- the unit functions on an executor -----------------------------------------------------------
@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("synth")
    manifest = write_synth(root / "data")
    ingest(manifest, indexes_dir=root / "indexes")
    collection = Collection.load("synth", root / "indexes")
    answers = read_answers(root / "data" / "answers.jsonl", collection).answers
    return {"root": root, "answers": answers[answers["qid"] != "empty"].reset_index(drop=True)}


def _copy(root: Path, name: str) -> Path:
    """A fresh indexes folder holding synth with empty caches."""
    indexes = root / name
    (indexes / "synth").mkdir(parents=True)
    shutil.copy(root / "indexes" / "synth" / "collection.sqlite", indexes / "synth")
    return indexes


def _units(kind: str, spec: str, answers: pd.DataFrame, **options) -> tuple[list, list]:
    """Units as the store hands them out: one per query, split over two jobs."""
    key = BatchKey(kind, "synth", spec, **options).text
    units, frames = [], []
    for n, (qid, frame) in enumerate(answers.groupby("qid", sort=False)):
        units.append({"job_id": f"job{n % 2}", "qid": qid, "batch_key": key})
        frames.append(frame.reset_index(drop=True))
    return units, frames


def _table(path: Path, table: str) -> pd.DataFrame:
    """Every row of a cache table, sorted."""
    with sqlite3.connect(path) as db:
        frame = pd.read_sql(f"SELECT * FROM {table}", db)
    return frame.sort_values(list(frame.columns), ignore_index=True)


def test_units_on_an_executor_store_what_the_in_process_path_stores(synth):
    answers = synth["answers"]
    stored = {}
    for name, executor in (("plain", None), ("local", LocalExecutor())):
        indexes = _copy(synth["root"], name)
        pool = ModelPool(indexes)
        units, frames = _units(RANK, "bm25", answers, frozen_stats=False, full_rerank=False)
        run_rank_units(pool, units, frames, executor=executor, partition_size=8)
        units, frames = _units(EVALUATE, "bleu", answers, references="pseudo")
        run_evaluate_units(pool, units, frames, executor=executor)
        stored[name] = indexes / "synth"
        if executor is not None:
            ranked, evaluated = executor.history
            # 90 answers, 3 per topic: partitions of whole topics, up to 8 answers (6 each)
            assert (ranked.task, ranked.partitions, ranked.items) == ("bm25", 15, 90)
            assert (evaluated.task, evaluated.items) == ("bleu", 90)
    for cache, table, rows in (
        (RESULTS_FILE, "answer_positions", 90),
        (EVALUATION_CACHE_FILE, "evaluations", 90),
    ):
        plain = _table(stored["plain"] / cache, table)
        assert len(plain) == rows
        pd.testing.assert_frame_equal(_table(stored["local"] / cache, table), plain)


# -- end to end on a Ray cluster -----------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    # a short folder: Ray's socket paths inside it must fit AF_UNIX's 107 bytes
    folder = Path(tempfile.mkdtemp(prefix="nrp-ray-", dir="/tmp"))
    started = LocalRayCluster(folder)
    with pytest.MonkeyPatch.context() as patch:
        # the service's worker is the cluster's driver: the server (and the worker it
        # spawns) inherit this environment
        for key, value in started.auth_env.items():
            patch.setenv(key, value)
        for name in ("RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", "NRP_EXECUTOR", "NRP_RAY_ADDRESS"):
            patch.delenv(name, raising=False)
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        try:
            started.start()
            yield started
        finally:
            started.stop()
            shutil.rmtree(folder, ignore_errors=True)


def log_entries(log: Path, message: str) -> list[dict]:
    """The service's JSON log lines with this message."""
    found = []
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:  # lines not written by the service's logger
            continue
        if isinstance(entry, dict) and entry.get("msg") == message:
            found.append(entry)
    return found


@pytest.mark.slow
@pytest.mark.shared_data
def test_a_job_on_a_ray_cluster_equals_the_in_process_run(tmp_path, cluster):
    mediqa = ingest_mediqa(tmp_path / "indexes")
    answers = mediqa_answers(mediqa, n_queries=N_QUERIES)
    assert len(answers) == 4 * N_QUERIES
    (tmp_path / "data").mkdir()
    with open(tmp_path / "data" / "answers.jsonl", "w") as handle:
        for record in answers.to_dict("records"):
            handle.write(json.dumps(record) + "\n")
    config = write_config(
        tmp_path, executor="ray", ray_address=cluster.address, batch_max_size=4 * N_QUERIES
    )
    server = Server(config, tmp_path / "server.log").start()
    body = {
        "collection": "mediqa-2019",
        "answers_path": "answers.jsonl",
        "rankers": "bm25",
        "evaluators": "bleu",
        "references": "auto",
    }
    try:
        with server.client(ADMIN_TOKEN) as admin:
            submitted = admin.post("/v1/jobs", json=body)
            assert submitted.status_code == 202, submitted.text
            job_id = submitted.json()["id"]
        with server.client(READ_TOKEN) as read:
            done = wait_for_job(read, job_id, timeout=300)
            rows = all_rows(read, job_id, limit=500)
            evaluations = all_rows(read, job_id, table="evaluations", limit=500)
        runs = log_entries(tmp_path / "server.log", "executor run")
        cluster_processes = cluster.processes()  # while the actors are alive
    finally:
        code = server.stop()
    assert done["status"] == "done", done
    # uvicorn re-raises SIGTERM after its graceful shutdown (test_service_api); the worker
    # closed its executor and stopped cleanly
    assert code in (0, -signal.SIGTERM)
    assert len(log_entries(tmp_path / "server.log", "worker stopped")) == 1

    # every partition ran on the cluster: 6 topics per task, one partition each
    by_task: dict[str, list[dict]] = {}
    for run in runs:
        assert run["executor"] == "ray" and run["resubmitted"] == 0, run
        by_task.setdefault(run["task"], []).append(run)
    assert sorted(by_task) == ["bleu", "bm25"]
    for task_runs in by_task.values():
        assert sum(r["partitions"] for r in task_runs) == N_QUERIES
        assert sum(r["items"] for r in task_runs) == 4 * N_QUERIES
    workers = {name for run in runs for name in run["workers"]}
    pids = {int(name.split("/")[1]) for name in workers}
    assert pids <= cluster_processes, (workers, sorted(cluster_processes))
    assert len({name.split("/")[0] for name in workers}) == 2  # both nodes computed

    # the results are those of the in-process run; finalisation computed nothing
    assert done["info"]["counts"]["answers_scored"] == 0
    assert done["info"]["counts"]["answers_from_results_cache"] == 4 * N_QUERIES
    assert done["info"]["evaluators"]["bleu"]["computed"] == 0
    collection = Collection.load("mediqa-2019", tmp_path / "indexes")
    assert cache_rows(collection.path / RESULTS_FILE, "answer_positions") == 4 * N_QUERIES
    read_back = read_answers(tmp_path / "data" / "answers.jsonl", collection).answers
    expected = score_answers(collection, read_back, "bm25", cache=False)
    assert rows == _records(expected)
    expected_evaluations = evaluate_answers(
        collection, read_back, "bleu", references="auto", cache=False
    )
    assert evaluations == _records(expected_evaluations)
    assert len(evaluations) == 4 * N_QUERIES


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows of a results frame as the service sends them (NaN / NA as null)."""
    return [
        dict(zip(frame.columns, [json_value(v) for v in row], strict=True))
        for row in frame.itertuples(index=False, name=None)
    ]
