"""The service store on both back-ends: SQLite (WAL) and a real PostgreSQL server started for the
test on loopback (skipped with a reason when PostgreSQL's programs or psycopg are absent).

The same contract on each: a job is stored with its answers and units in one transaction; an
idempotency key returns the stored job; claims batch units with one batch key across jobs up to
the answer limit and never hand one unit to two workers (two threads claiming at once); a
cancelled job's units cannot be finished; running units are re-queued (all, or by expired
lease); results round-trip with their column types (NaN, NA, ints) and pages.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nrp.service.store import CANCELLED, DONE, QUEUED, RUNNING, Store


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (folder / name).is_file():
            return str(folder / name)
    return None


@pytest.fixture(scope="module")
def postgres_url():
    initdb, postgres = _postgres_bin("initdb"), _postgres_bin("postgres")
    if not initdb or not postgres:
        pytest.skip("PostgreSQL programs (initdb, postgres) not installed")
    pytest.importorskip("psycopg", reason="psycopg not installed")
    root = Path(tempfile.mkdtemp(prefix="nrp-pg-"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL")
        shutil.chown(root, "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    data = root / "data"
    subprocess.run(
        [*run_as, initdb, "-D", str(data), "-A", "trust", "-U", "nrp", "--no-sync"],
        check=True,
        capture_output=True,
    )
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [*run_as, postgres, "-D", str(data), "-p", str(port), "-k", str(root)]
    settings = ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
    server = subprocess.Popen(
        [*command, *settings], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"postgresql://nrp@127.0.0.1:{port}/postgres"
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            psycopg.connect(url).close()
            break
        except psycopg.OperationalError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.skip("PostgreSQL did not start")
            time.sleep(0.2)
    yield url
    server.terminate()
    server.wait(20)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        made = Store(f"sqlite:///{tmp_path / 'service.sqlite'}")
        yield made
        made.close()
        return
    url = request.getfixturevalue("postgres_url")
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:  # a clean schema per test
        for table in ("job_results", "job_units", "job_answers", "jobs"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
    made = Store(url)
    yield made
    made.close()


def answers(n: int, qids: tuple[str, ...] = ("q1", "q2")) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "answer_id": [f"a{i}" for i in range(n)],
            "llm": "m",
            "prompt": "p",
            "qid": [qids[i % len(qids)] for i in range(n)],
            "sample": list(range(n)),
            "text": [f"text {i}" for i in range(n)],
        }
    )


def units(key: str, counts: dict[str, int]) -> list[dict]:
    return [
        {"kind": "rank", "spec": "bm25", "batch_key": key, "qid": q, "n_answers": n}
        for q, n in counts.items()
    ]


def make_job(store: Store, job_id: str, key: str = "k1", n: int = 4, idem: str | None = None):
    frame = answers(n)
    counts = frame.groupby("qid").size().to_dict()
    return store.create_job(
        job_id, "c", {"ties": "mid"}, "sha-" + job_id, idem, frame, units(key, counts)
    )


def test_a_job_is_stored_with_its_answers_and_units(store):
    job, created = make_job(store, "j1", n=5)
    assert created
    assert (job["status"], job["n_answers"], job["units_total"], job["requeued"]) == (
        QUEUED,
        5,
        2,
        0,
    )
    assert job["params"] == {"ties": "mid"}
    pd.testing.assert_frame_equal(store.job_answers("j1"), answers(5), check_dtype=False)
    assert store.unit_answers("j1", "q2")["answer_id"].tolist() == ["a1", "a3"]
    assert store.progress("j1") == {
        "units_done": 0,
        "units_total": 2,
        "answer_units_done": 0,
        "answer_units": 5,
    }


def test_an_idempotency_key_returns_the_stored_job(store):
    first, created = make_job(store, "j1", idem="key")
    again, created_again = make_job(store, "j2", idem="key")
    assert created and not created_again
    assert again["id"] == first["id"] == "j1"
    assert store.get_job("j2") is None
    assert store.job_by_key("key")["id"] == "j1"


def test_claims_batch_one_key_across_jobs_within_the_answer_limit(store):
    make_job(store, "j1", key="k1", n=4)  # units q1 (2 answers), q2 (2)
    time.sleep(0.01)
    make_job(store, "j2", key="k2", n=2)
    time.sleep(0.01)
    make_job(store, "j3", key="k1", n=6)  # units q1 (3), q2 (3)
    claimed = store.claim_units("w", max_answers=7, lease_s=60)
    assert [(u["job_id"], u["qid"], u["n_answers"]) for u in claimed] == [
        ("j1", "q1", 2),
        ("j1", "q2", 2),
        ("j3", "q1", 3),
    ]
    assert store.get_job("j1")["status"] == RUNNING
    assert store.get_job("j3")["status"] == RUNNING
    assert store.get_job("j2")["status"] == QUEUED
    # a single unit larger than the limit still goes (one unit at least)
    nxt = store.claim_units("w", max_answers=1, lease_s=60)
    assert [(u["job_id"], u["qid"]) for u in nxt] == [("j2", "q1")]
    assert store.finish_units("w", claimed) == 3
    assert store.finish_units("someone-else", nxt) == 0
    assert store.progress("j1")["units_done"] == 2
    assert store.jobs_to_finalize() == ["j1"]


def test_two_workers_never_claim_the_same_unit(store):
    for n in range(6):
        make_job(store, f"j{n}", key=f"k{n % 2}", n=8)
    claims: dict[str, list[tuple[str, int]]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def claim(worker: str) -> None:
        try:
            other = Store(store.url)
            while True:
                got = other.claim_units(worker, max_answers=3, lease_s=60)
                if not got:
                    break
                claims[worker].extend((u["job_id"], u["unit_no"]) for u in got)
                other.finish_units(worker, got)
                other.cancel_job("j5")  # a client cancelling meanwhile
            other.close()
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=claim, args=(w,)) for w in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    everything = claims["a"] + claims["b"]
    assert len(everything) == len(set(everything))
    assert set(everything) >= {(f"j{n}", u) for n in range(5) for u in (0, 1)}


def test_cancel_stops_units_and_finished_jobs_cannot_be_cancelled(store):
    make_job(store, "j1")
    claimed = store.claim_units("w", 10, 60)
    assert store.cancel_job("j1") == CANCELLED
    assert store.finish_units("w", claimed) == 0  # the job went away under the worker
    assert store.get_job("j1")["status"] == CANCELLED
    assert store.jobs_to_finalize() == []
    assert store.cancel_job("j1") == CANCELLED
    assert store.cancel_job("missing") is None
    make_job(store, "j2")
    store.claim_units("w", 10, 60)
    store.fail_job("j2", "boom")
    job = store.get_job("j2")
    assert (job["status"], job["error"]) == ("failed", "boom")


def test_running_units_are_requeued_all_or_by_expired_lease(store):
    make_job(store, "j1")
    store.claim_units("w", 2, lease_s=3600)  # q1 only (2 answers)
    store.claim_units("w", 2, lease_s=-1)  # q2, lease already expired
    assert store.requeue(expired_only=True) == 1
    assert store.requeue(expired_only=False, worker="nobody") == 0
    assert [u["qid"] for u in store.claim_units("w2", 2, 60)] == ["q2"]
    assert store.requeue(expired_only=False) == 2
    job = store.get_job("j1")
    assert job["requeued"] == 2
    assert store.queued_units() == 2
    assert store.status_counts()[RUNNING] == 1


def test_results_round_trip_with_types_and_pages(store):
    make_job(store, "j1")
    for batch in iter(lambda: store.claim_units("w", 10, 60), []):
        store.finish_units("w", batch)
    frame = pd.DataFrame(
        {
            "answer_id": ["a", "b", "c"],
            "sample": np.array([0, 1, 2], dtype="int64"),
            "score": [1.5, np.nan, -0.1 + 0.2],
            "ties": pd.array([1, None, 3], dtype="Int64"),
            "ranker": ["bm25", "", "bm25"],
        }
    )
    assert store.finish_job("j1", {"nrp": frame}, {"note": "x"})
    assert not store.finish_job("j1", {"nrp": frame}, {})  # done: nothing written twice
    job = store.get_job("j1")
    assert job["status"] == DONE and job["info"]["note"] == "x"
    schema = job["info"]["tables"]["nrp"]
    assert schema["columns"] == list(frame.columns)
    back = store.result_frame("j1", "nrp", schema)
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)
    assert str(back["ties"].dtype) == "Int64" and back["score"].iloc[2] == -0.1 + 0.2
    assert store.result_count("j1", "nrp") == 3
    assert store.result_rows("j1", "nrp", 1, 1) == [["b", 1, None, None, ""]]
    assert store.result_rows("j1", "nrp", 3, 10) == []
    with contextlib.suppress(Exception):
        store.close()
    assert Store(store.url).get_job("j1")["status"] == DONE  # on disk, not in a connection


@pytest.mark.slow
def test_a_job_runs_end_to_end_on_a_postgresql_store(postgres_url, tmp_path):
    import psycopg
    from service_helpers import (
        ADMIN_TOKEN,
        N_TOPICS,
        READ_TOKEN,
        Server,
        all_rows,
        wait_for_job,
        write_config,
        write_synth,
    )

    from nrp import ingest

    with psycopg.connect(postgres_url, autocommit=True) as db:
        for table in ("job_results", "job_units", "job_answers", "jobs"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
    ingest(write_synth(tmp_path / "data"), indexes_dir=tmp_path / "indexes")
    server = Server(write_config(tmp_path, store=postgres_url), tmp_path / "server.log").start()
    try:
        body = {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "tfidf"}
        with server.client(ADMIN_TOKEN) as admin:
            job = admin.post("/v1/jobs", json=body).json()
        with server.client(READ_TOKEN) as read:
            done = wait_for_job(read, job["id"])
            rows = all_rows(read, job["id"], limit=200)
    finally:
        server.stop()
    assert done["status"] == "done", done
    assert len(rows) == 3 * 3 * N_TOPICS
    assert Store(postgres_url).get_job(job["id"])["status"] == DONE
    assert not (tmp_path / "indexes" / "service.sqlite").exists()
