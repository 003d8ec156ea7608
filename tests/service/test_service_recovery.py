"""Crash recovery: ``kill -9`` of the server in the middle of a job, then a restart.

The job is made long deterministically, not by luck: one query's answers per batch
(``batch_max_size: 2`` with three answers per query) and ``batch_delay_ms`` after each batch, so
units stay running while the test watches progress. After the kill the worker dies with the
server (it must not keep writing), the restarted worker re-queues the units left running, and
the job completes with every answer's rows exactly once and equal to ``score_answers``;
finalisation computes nothing (every position was stored by a unit, before or after the crash).
Evaluator units (BLEU) go through the same path and land in the ``evaluations`` table.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest
from service_helpers import (
    ADMIN_TOKEN,
    N_TOPICS,
    READ_TOKEN,
    Server,
    all_rows,
    pid_alive,
    wait_for_job,
    write_config,
    write_synth,
)

from nrp import Collection, ingest
from nrp.answers import read_answers
from nrp.evaluators.run import evaluate_answers
from nrp.positioning.results_cache import RESULTS_FILE, ResultsCache
from nrp.positioning.scoring import score_answers
from nrp.service.store import json_value

pytestmark = pytest.mark.slow


def test_kill_9_mid_job_then_restart_completes_without_duplicates_or_losses(tmp_path):
    manifest = write_synth(tmp_path / "data")
    ingest(manifest, indexes_dir=tmp_path / "indexes")
    config = write_config(tmp_path, batch_max_size=2, batch_delay_ms=250)
    server = Server(config, tmp_path / "server.log").start()
    worker = server.worker_pid()
    body = {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "bm25"}
    with server.client(ADMIN_TOKEN) as admin:
        job_id = admin.post(
            "/v1/jobs", json=body, headers={"Idempotency-Key": "crash-test"}
        ).json()["id"]
    with server.client(READ_TOKEN) as read:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = read.get(f"/v1/jobs/{job_id}").json()
            if job["progress"]["units_done"] >= 3:
                break
            time.sleep(0.05)
    assert 3 <= job["progress"]["units_done"] < N_TOPICS, job
    server.kill9()
    deadline = time.monotonic() + 10
    while pid_alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(worker), "the worker outlived the killed server"

    restarted = Server(config, tmp_path / "server2.log").start()
    try:
        with restarted.client(ADMIN_TOKEN) as admin:
            # a client retrying its submission after the crash gets the same job back
            retry = admin.post("/v1/jobs", json=body, headers={"Idempotency-Key": "crash-test"})
            assert retry.json()["id"] == job_id
        with restarted.client(READ_TOKEN) as read:
            done = wait_for_job(read, job_id)
            rows = all_rows(read, job_id, limit=100)
            jobs = read.get("/v1/jobs").json()["jobs"]
    finally:
        restarted.stop()
    assert done["status"] == "done", done
    assert done["requeued"] <= 1
    assert [j["id"] for j in jobs] == [job_id]
    assert done["info"]["counts"]["answers_scored"] == 0  # nothing recomputed at the end
    frame = pd.DataFrame(rows)
    assert len(frame) == 3 * 3 * N_TOPICS
    assert not frame.duplicated(["answer_id", "dimension"]).any()

    collection = Collection.load("synth", tmp_path / "indexes")
    answers = read_answers(tmp_path / "data" / "answers.jsonl", collection).answers
    expected = score_answers(collection, answers, "bm25", cache=False)
    assert rows == [
        dict(zip(expected.columns, [json_value(v) for v in row], strict=True))
        for row in expected.itertuples(index=False, name=None)
    ]
    # one stored position per ranked answer, whatever ran twice
    assert ResultsCache(collection.path / RESULTS_FILE).count() == 3 * N_TOPICS


def test_evaluator_units_fill_the_evaluations_table(tmp_path):
    manifest = write_synth(tmp_path / "data")
    ingest(manifest, indexes_dir=tmp_path / "indexes")
    server = Server(write_config(tmp_path), tmp_path / "server.log").start()
    try:
        body = {
            "collection": "synth",
            "answers_path": "answers.jsonl",
            "rankers": "tfidf",
            "evaluators": "bleu,rouge",
            "references": "pseudo",
        }
        with server.client(ADMIN_TOKEN) as admin:
            job = admin.post("/v1/jobs", json=body).json()
        # units: 30 tfidf + 31 per evaluator (evaluators also take the topic without documents)
        assert job["progress"]["units_total"] == N_TOPICS + 2 * (N_TOPICS + 1)
        with server.client(READ_TOKEN) as read:
            done = wait_for_job(read, job["id"])
            assert done["status"] == "done", done
            rows = all_rows(read, job["id"], table="evaluations", limit=40)
            assert set(done["results"]) == {"nrp", "evaluations"}
    finally:
        server.stop()
    collection = Collection.load("synth", tmp_path / "indexes")
    answers = read_answers(tmp_path / "data" / "answers.jsonl", collection).answers
    expected = evaluate_answers(collection, answers, "bleu,rouge", references="pseudo", cache=False)
    assert rows == [
        dict(zip(expected.columns, [json_value(v) for v in row], strict=True))
        for row in expected.itertuples(index=False, name=None)
    ]
    assert done["info"]["evaluators"]["bleu"]["computed"] == 0  # all served by the units' cache
