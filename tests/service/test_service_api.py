"""``nrp serve`` end to end: a real server in a subprocess on loopback, a real HTTP client.

One server for the module (hand-built collection ``synth``, 30 topics plus one without
documents, 91 answers). Checked: tokens (401 without or with a bad one, 403 with the read scope
on an admin route, a hashed token accepted), the body limit (413), request validation (422 with
one clear line; 404 for an unknown collection or job), paths outside the data roots refused,
jobs (202, progress, results paged as JSON equal to ``score_answers`` on the same input, CSV
equal byte for byte to what ``nrp score`` writes), idempotency keys, cancellation,
``POST /v1/score`` equal to ``score_answers``, the leaderboard equal to ``summarize``, the
metrics text, and a clean SIGTERM shutdown that takes the worker with it.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
from service_helpers import (
    ADMIN_TOKEN,
    N_TOPICS,
    READ_TOKEN,
    Server,
    all_rows,
    answer_records,
    pid_alive,
    wait_for_job,
    write_config,
    write_synth,
)

from nrp import Collection, ingest
from nrp.analysis.summary import summarize
from nrp.answers import read_answers
from nrp.cli import main as cli_main
from nrp.collection.manifest import COMBINED
from nrp.positioning.scoring import RESULT_COLUMNS, score_answers
from nrp.service.store import json_value
from nrp.tables import records

pytestmark = pytest.mark.slow  # one server start for the module: several seconds


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("service")
    manifest = write_synth(root / "data")
    ingest(manifest, indexes_dir=root / "indexes")
    server = Server(write_config(root), root / "server.log").start()
    yield {"root": root, "server": server}
    server.stop()


@pytest.fixture(scope="module")
def read(env):
    with env["server"].client(READ_TOKEN) as client:
        yield client


@pytest.fixture(scope="module")
def admin(env):
    with env["server"].client(ADMIN_TOKEN) as client:
        yield client


def collection(env) -> Collection:
    return Collection.load("synth", env["root"] / "indexes")


def expected_rows(frame: pd.DataFrame) -> list[dict]:
    """Rows of a results frame as the service sends them (NaN / NA as null)."""
    return [
        dict(zip(frame.columns, [json_value(v) for v in row], strict=True))
        for row in frame.itertuples(index=False, name=None)
    ]


# -- operations and security ------------------------------------------------------------------
def test_health_and_readiness_need_no_token(env):
    with env["server"].client(None) as anonymous:
        assert anonymous.get("/healthz").json() == {"status": "ok"}
        ready = anonymous.get("/readyz").json()
        assert ready["status"] == "ready" and ready["worker"] == "ready"
        assert anonymous.get("/openapi.json").json()["info"]["title"] == "nrp service"
        # CORS is off by default: no browser origin is allowed
        cors = anonymous.get("/healthz", headers={"Origin": "https://example.org"})
        assert "access-control-allow-origin" not in cors.headers


def test_missing_or_unknown_token_is_401_and_read_scope_on_admin_route_is_403(env, read):
    with env["server"].client(None) as anonymous:
        missing = anonymous.get("/v1/collections")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"
        assert anonymous.get("/metrics").status_code == 401
    with env["server"].client("not-a-real-token-at-all") as stranger:
        assert stranger.get("/v1/collections").status_code == 401
    body = {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "bm25"}
    forbidden = read.post("/v1/jobs", json=body)
    assert forbidden.status_code == 403
    assert "scope (read)" in forbidden.json()["detail"]
    assert read.post("/v1/collections", json={"manifest": "manifest.yaml"}).status_code == 403
    # the read token is stored hashed (sha256:...) and works for reading
    assert read.get("/v1/collections").status_code == 200


def test_oversized_body_is_413(admin):
    text = "x" * 250_000  # the test server allows 200,000 bytes
    answers = [{"llm": "m", "prompt": "p", "qid": "t0", "text": text}]
    response = admin.post("/v1/jobs", json={"collection": "synth", "answers": answers})
    assert response.status_code == 413
    assert response.json() == {"detail": "request body larger than 200000 bytes"}


def test_oversized_streamed_body_without_length_is_413(admin):
    def chunks():
        for _ in range(30):
            yield b"x" * 10_000

    response = admin.post(
        "/v1/jobs", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413


def test_a_report_file_as_answers_path_is_scored(env, admin, read):
    """TREC RAG report files (docs/rag.md) as answers_path: read as nrp score reads them (run_id
    as the llm, answer_id run_id/topic_id), the rows those of score_answers."""
    reports = [
        {
            "metadata": {"run_id": "rag", "topic_id": f"t{topic}"},
            "references": [f"t{topic}d0"],
            "answer": [{"text": "what helps", "citations": [0]}, {"text": "rest and water"}],
        }
        for topic in range(2)
    ]
    path = env["root"] / "data" / "rag-reports.jsonl"
    path.write_text("".join(json.dumps(report) + "\n" for report in reports))
    try:
        body = {"collection": "synth", "answers_path": path.name, "rankers": "bm25"}
        submitted = admin.post("/v1/jobs", json=body)
        assert submitted.status_code == 202
        done = wait_for_job(read, submitted.json()["id"])
        assert done["status"] == "done", done
        answers = read_answers(path, collection(env)).answers
    finally:
        path.unlink()
    assert answers["answer_id"].tolist() == ["rag/t0", "rag/t1"]
    assert answers["text"].tolist() == ["what helps rest and water"] * 2
    expected = score_answers(collection(env), answers, "bm25", cache=False)
    assert all_rows(read, done["id"]) == expected_rows(expected)


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ("{not json", 422, None),
        ({"collection": "synth"}, 422, "give exactly one of answers and answers_path"),
        ({"collection": "synth", "answers_path": "answers.jsonl"}, 422, "give rankers"),
        (
            {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "bm26"},
            422,
            "unknown ranker 'bm26'",
        ),
        (
            {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "bm25:k9=1"},
            422,
            "ranker 'bm25' has no parameter 'k9'",
        ),
        (
            {"collection": "synth", "answers_path": "answers.jsonl", "rankers": {"taste": "bm25"}},
            422,
            "rankers: unknown dimension(s) taste",
        ),
        (
            {
                "collection": "synth",
                "rankers": "bm25",
                "answers": [{"llm": "m", "prompt": "p", "qid": "nope", "text": "t"}],
            },
            422,
            "answers[0]: unknown qid 'nope': not a topic of the collection",
        ),
        (
            {
                "collection": "synth",
                "rankers": "bm25",
                "answers": [
                    {"answer_id": "t1d0", "llm": "m", "prompt": "p", "qid": "t1", "text": "a"}
                ],
            },
            422,
            "answer id 't1d0' is also a document of query t1",
        ),
        (
            {
                "collection": "synth",
                "answers_path": "answers.jsonl",
                "rankers": "bm25",
                "weights": {"relevance": 1},
            },
            422,
            "weights must name exactly the scored dimensions",
        ),
        ({"collection": "nope", "answers_path": "a.jsonl", "rankers": "bm25"}, 404, None),
        ({"collection": "synth", "answers_path": "a.jsonl", "surprise": 1}, 422, None),
    ],
)
def test_malformed_job_requests_get_a_clear_4xx(admin, body, status, detail):
    if isinstance(body, str):
        response = admin.post(
            "/v1/jobs", content=body, headers={"Content-Type": "application/json"}
        )
    else:
        response = admin.post("/v1/jobs", json=body)
    assert response.status_code == status, response.text
    if detail is not None:
        assert detail in response.json()["detail"]


@pytest.mark.parametrize(
    "path",
    ["../../etc/passwd", "/etc/passwd", "~/secrets.yaml", "..\\..\\etc\\passwd", "missing.yaml"],
)
def test_a_path_outside_the_data_roots_is_refused(admin, path):
    response = admin.post("/v1/collections", json={"manifest": path})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail.startswith("manifest: ")
    assert (
        ("outside the data roots" in detail)
        or ("relative to a data root" in detail)
        or ("not found in the data roots" in detail)
    )
    job = {"collection": "synth", "answers_path": path, "rankers": "bm25"}
    assert admin.post("/v1/jobs", json=job).status_code == 422


def test_a_symlink_leading_out_of_the_roots_and_a_model_path_outside_are_refused(env, admin):
    link = env["root"] / "data" / "escape"
    link.symlink_to("/etc")
    response = admin.post(
        "/v1/jobs",
        json={"collection": "synth", "answers_path": "escape/passwd", "rankers": "bm25"},
    )
    assert response.status_code == 422
    assert "a link leads out" in response.json()["detail"]
    job = {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "dense:model=/etc"}
    response = admin.post("/v1/jobs", json=job)
    assert response.status_code == 422
    assert "parameter model: '/etc' is outside the data roots" in response.json()["detail"]


def test_a_manifest_inside_the_roots_whose_sources_lie_outside_is_refused(env, admin):
    outside = env["root"] / "elsewhere"
    write_synth(outside)
    (env["root"] / "data" / "sneaky.yaml").write_text(
        (outside / "manifest.yaml").read_text().replace("data_root: .", f"data_root: {outside}")
    )
    response = admin.post("/v1/collections", json={"manifest": "sneaky.yaml", "name": "sneaky"})
    assert response.status_code == 422
    assert "reads a file outside the data roots" in response.json()["detail"]


def test_a_narratives_file_outside_the_data_roots_is_refused(env, admin):
    """A file a source option names (trec-topics-xml's ``narratives``) is held to the data
    roots too, though the manifest's own data_root (the parent of the data root) allows it."""
    root, data = env["root"], env["root"] / "data"
    rows = [line.split("\t") for line in (data / "topics.tsv").read_text().splitlines()[1:]]

    def topics_xml(narrative: str) -> str:
        topics = "".join(
            f"<topic><id>{qid}</id><query>{query}</query>{narrative}</topic>\n"
            for qid, query in rows
        )
        return f"<topics>\n{topics}</topics>\n"

    (data / "leaky-topics.xml").write_text(topics_xml(""))
    (root / "secret").mkdir()
    (root / "secret" / "narr.xml").write_text(topics_xml("<narrative>SECRET</narrative>"))
    manifest = (data / "manifest.yaml").read_text().replace("data_root: .", "data_root: ..")
    manifest = manifest.replace("path: documents.tsv", "path: data/documents.tsv")
    manifest = manifest.replace("path: qrels.tsv", "path: data/qrels.tsv").replace(
        "{format: table, path: topics.tsv, holds: topics}",
        "{format: trec-topics-xml, path: data/leaky-topics.xml, narratives: ../secret/narr.xml}",
    )
    (data / "leaky.yaml").write_text(manifest)
    response = admin.post("/v1/collections", json={"manifest": "leaky.yaml", "name": "leaky"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail == "manifest leaky.yaml: sources[0] reads a file outside the data roots"
    assert "leaky" not in [c["name"] for c in admin.get("/v1/collections").json()["collections"]]


# -- collections ---------------------------------------------------------------------------------
def test_collections_list_and_info(read):
    listed = read.get("/v1/collections").json()["collections"]
    synth = next(c for c in listed if c["name"] == "synth")
    assert synth["dimensions"] == ["relevance", "readability"]
    info = read.get("/v1/collections/synth").json()
    assert info["topics"] == N_TOPICS + 1
    assert info["documents_with_text"] == 4 * N_TOPICS
    assert read.get("/v1/collections/nope").status_code == 404


# -- jobs ----------------------------------------------------------------------------------------
def test_job_results_equal_score_answers_and_csv_equals_nrp_score(env, admin, read, tmp_path):
    body = {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "bm25"}
    submitted = admin.post("/v1/jobs", json=body)
    assert submitted.status_code == 202
    job = submitted.json()
    assert submitted.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["progress"]["units_total"] == N_TOPICS  # one unit per query with documents
    assert job["progress"]["answers"] == 3 * N_TOPICS + 1
    assert job["params"]["rankers"] == {"relevance": "bm25", "readability": "bm25"}
    done = wait_for_job(read, job["id"])
    assert done["status"] == "done", done
    assert done["progress"] == {
        "units_done": N_TOPICS,
        "units_total": N_TOPICS,
        "answers": 3 * N_TOPICS + 1,
        "fraction": 1.0,
    }
    assert done["info"]["skipped"] == [
        {
            "answer_id": "good/plain/empty/0",
            "qid": "empty",
            "reason": "no judged documents with text (empty D_q)",
        }
    ]
    # finalisation computed nothing: every position came from the units' results
    assert done["info"]["counts"]["answers_scored"] == 0
    assert done["info"]["counts"]["answers_from_results_cache"] == 3 * N_TOPICS

    answers = read_answers(env["root"] / "data" / "answers.jsonl", collection(env)).answers
    expected = score_answers(collection(env), answers, "bm25", cache=False)
    rows = all_rows(read, job["id"], limit=37)  # pages that do not divide the total
    assert len(rows) == 3 * 3 * N_TOPICS  # 90 answers x (2 dimensions + weighted)
    assert rows == expected_rows(expected)
    assert list(rows[0]) == list(RESULT_COLUMNS)

    out = tmp_path / "cli"
    indexes = tmp_path / "indexes"
    (indexes / "synth").mkdir(parents=True)
    shutil.copy(collection(env).path / "collection.sqlite", indexes / "synth")
    answers_file = str(env["root"] / "data" / "answers.jsonl")
    argv = ["score", "synth", answers_file, "--ranker", "bm25", "--out", str(out)]
    code = cli_main([*argv, "--indexes", str(indexes)])
    assert code == 0
    csv = read.get(f"/v1/jobs/{job['id']}/results", params={"format": "csv"})
    assert csv.status_code == 200
    assert csv.headers["content-type"].startswith("text/csv")
    assert csv.text == (out / "results.csv").read_text()

    # the results page's limits and a table the job does not have
    page = read.get(f"/v1/jobs/{job['id']}/results", params={"offset": 88, "limit": 5}).json()
    assert (page["total"], page["offset"], len(page["rows"]), page["next_offset"]) == (
        90 * 3,
        88,
        5,
        93,
    )
    missing = read.get(f"/v1/jobs/{job['id']}/results", params={"table": "evaluations"})
    assert missing.status_code == 404


def test_inline_answers_with_two_rankers_and_weights(env, admin, read):
    records = answer_records()[:9]  # topics t0..t2
    body = {
        "collection": "synth",
        "answers": records,
        "rankers": {"relevance": "bm25", "readability": "tfidf"},
        "weights": {"relevance": 3, "readability": 1},
        "ties": "pessimistic",
    }
    job = admin.post("/v1/jobs", json=body).json()
    assert job["progress"]["units_total"] == 6  # 3 queries x 2 rankers
    done = wait_for_job(read, job["id"])
    assert done["status"] == "done", done
    frame = pd.DataFrame(records)
    frame["answer_id"] = [f"{r['llm']}/{r['prompt']}/{r['qid']}/{r['sample']}" for r in records]
    expected = score_answers(
        collection(env),
        frame,
        {"relevance": "bm25", "readability": "tfidf"},
        ties="pessimistic",
        weights={"relevance": 3, "readability": 1},
        cache=False,
    )
    assert all_rows(read, job["id"]) == expected_rows(expected)
    weighted = [r for r in all_rows(read, job["id"]) if r["dimension"] == COMBINED]
    assert len(weighted) == 9


def test_idempotency_key_returns_the_same_job_and_refuses_another_body(admin, read):
    body = {"collection": "synth", "answers": answer_records()[:3], "rankers": "tfidf"}
    key = {"Idempotency-Key": "retry-42"}
    first = admin.post("/v1/jobs", json=body, headers=key)
    second = admin.post("/v1/jobs", json=body, headers=key)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert second.headers["idempotent-replayed"] == "true"
    other = admin.post("/v1/jobs", json={**body, "ties": "optimistic"}, headers=key)
    assert other.status_code == 409
    ids = [j["id"] for j in read.get("/v1/jobs", params={"limit": 1000}).json()["jobs"]]
    assert ids.count(first.json()["id"]) == 1
    wait_for_job(read, first.json()["id"])


def test_unknown_job_is_404_and_cancel_of_a_finished_job_is_409(admin, read):
    assert read.get("/v1/jobs/nope").status_code == 404
    assert admin.delete("/v1/jobs/nope").status_code == 404
    body = {"collection": "synth", "answers": answer_records()[:3], "rankers": "bm25"}
    job = admin.post("/v1/jobs", json=body).json()
    done = wait_for_job(read, job["id"])
    assert done["status"] == "done"
    response = admin.delete(f"/v1/jobs/{job['id']}")
    assert response.status_code == 409
    assert read.delete(f"/v1/jobs/{job['id']}").status_code == 403


def test_cancel_a_running_job(admin, read):
    # full re-ranking of many answers: long enough to be cancelled in flight
    records = [
        {**r, "sample": r["sample"] + 10 * n} for n in range(6) for r in answer_records()[:-1]
    ]
    body = {"collection": "synth", "answers": records, "rankers": "dph", "full_rerank": True}
    job = admin.post("/v1/jobs", json=body).json()
    cancelled = admin.delete(f"/v1/jobs/{job['id']}")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    after = wait_for_job(read, job["id"])
    assert after["status"] == "cancelled"
    assert read.get(f"/v1/jobs/{job['id']}/results").status_code == 409
    assert after["progress"]["units_done"] < after["progress"]["units_total"]


# -- synchronous scores --------------------------------------------------------------------------
def test_score_equals_score_answers_for_the_same_answers(env, read):
    answers = [
        {"answer_id": "a", "qid": "t3", "text": "asthma asthma treatment", "llm": "m"},
        {"answer_id": "b", "qid": "t4", "text": "doctor", "prompt": "p", "sample": 2},
        {"answer_id": "c", "qid": "empty", "text": "nothing to rank against"},
        {"answer_id": "d", "qid": "t3", "text": "  \n"},  # says nothing: last, NRP 0
    ]
    for ranker, ties in (("bm25", "mid"), ("tfidf", "strict"), ("dph", "optimistic")):
        response = read.post(
            "/v1/score",
            json={"collection": "synth", "rankers": ranker, "answers": answers, "ties": ties},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["skipped"] == [
            {"answer_id": "c", "qid": "empty", "reason": "no judged documents with text"}
        ]
        frame = pd.DataFrame(answers).fillna({"llm": "", "prompt": "", "sample": 0})
        expected = score_answers(collection(env), frame, ranker, ties=ties, cache=False)
        assert body["results"] == expected_rows(expected)
        empty = [row for row in body["results"] if row["answer_id"] == "d"]
        # two dimensions, then the weighted row: no score, NRP 0
        assert [(row["score"], row["nrp"]) for row in empty] == [(None, 0.0)] * 3
        assert empty[0]["rank"] == empty[0]["n_docs"]  # every document above it


def test_score_validation(read):
    too_many = [{"qid": "t1", "text": f"answer {i}"} for i in range(9)]
    response = read.post("/v1/score", json={"collection": "synth", "rankers": "bm25",
                                            "answers": too_many})  # fmt: skip
    assert response.status_code == 422
    assert "at most 8 answers" in response.json()["detail"]
    response = read.post(
        "/v1/score",
        json={"collection": "synth", "rankers": "bm25", "answers": [{"qid": "zz", "text": "a"}]},
    )
    assert response.status_code == 422
    assert response.json()["detail"] == "answers[0]: qid 'zz' is not a topic of 'synth'"
    response = read.post("/v1/score", json={"collection": "synth", "rankers": "bm25",
                                            "answers": []})  # fmt: skip
    assert response.status_code == 422


# -- leaderboard and ingest ----------------------------------------------------------------------
def test_ingest_then_leaderboard_equals_summarize(env, admin, read):
    created = admin.post("/v1/collections", json={"manifest": "manifest.yaml", "name": "board"})
    assert created.status_code == 201, created.text
    assert created.json()["rebuilt"] is True
    again = admin.post("/v1/collections", json={"manifest": "manifest.yaml", "name": "board"})
    assert again.status_code == 200 and again.json()["rebuilt"] is False
    empty = read.get("/v1/leaderboard", params={"collection": "board"}).json()
    assert empty["rows"] == [] and empty["jobs"] == []

    body = {"collection": "board", "answers_path": "answers.jsonl", "rankers": "tfidf"}
    job = admin.post("/v1/jobs", json=body).json()
    assert wait_for_job(read, job["id"])["status"] == "done"
    board = read.get("/v1/leaderboard", params={"collection": "board"}).json()
    assert board["jobs"] == [job["id"]]
    assert board["answers"] == 3 * N_TOPICS

    board_collection = Collection.load("board", env["root"] / "indexes")
    answers = read_answers(env["root"] / "data" / "answers.jsonl", board_collection).answers
    results = score_answers(board_collection, answers, "tfidf", cache=False)
    means = summarize(results).means
    assert board["rows"] == records(means)  # NaN (no interval) as null, floats exact
    weighted = read.get(
        "/v1/leaderboard", params={"collection": "board", "dimension": COMBINED}
    ).json()["rows"]
    assert {(r["llm"], r["prompt"]) for r in weighted} == {
        ("good", "plain"),
        ("good", "(all)"),
        ("weak", "plain"),
        ("weak", "(all)"),
    }
    assert read.get("/v1/leaderboard", params={"collection": "nope"}).status_code == 404


# -- metrics and shutdown ------------------------------------------------------------------------
def test_metrics_in_prometheus_text_format(read):
    read.get("/v1/collections")
    response = read.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    assert "# TYPE nrp_http_requests_total counter" in text
    assert 'nrp_http_requests_total{method="GET",route="/v1/collections",status="200"}' in text
    assert "# TYPE nrp_http_request_duration_seconds histogram" in text
    assert 'nrp_http_request_duration_seconds_bucket{route="/v1/collections",le="+Inf"}' in text
    assert 'nrp_jobs{status="done"}' in text
    assert "nrp_worker_up 1" in text
    assert 'nrp_worker_batches_total{kind="job"}' in text
    for line in text.splitlines():
        assert line.startswith("#") or len(line.rsplit(" ", 1)) == 2


def test_sigterm_stops_server_and_worker_cleanly(tmp_path):
    """Its own server. uvicorn re-raises the signal after its graceful shutdown, so the exit
    status is -SIGTERM; the logs show that the lifespan shutdown ran and stopped the worker."""
    write_synth(tmp_path / "data")
    ingest(tmp_path / "data" / "manifest.yaml", indexes_dir=tmp_path / "indexes")
    server = Server(write_config(tmp_path), tmp_path / "server.log").start()
    worker = server.worker_pid()
    assert server.stop() in (0, -signal.SIGTERM)
    assert not pid_alive(worker)
    log = [json.loads(line) for line in (tmp_path / "server.log").read_text().splitlines()
           if line.startswith("{")]  # fmt: skip
    messages = [(entry["process"], entry["msg"]) for entry in log]
    assert ("worker", "worker stopped") in messages
    assert ("server", "service stopped") in messages
    assert all({"ts", "level", "logger", "msg"} <= set(entry) for entry in log)


def test_request_logs_are_json_lines_with_request_ids(env, read):
    response = read.get("/v1/collections", headers={"X-Request-ID": "trace-me-123"})
    assert response.headers["x-request-id"] == "trace-me-123"
    deadline = time.monotonic() + 10
    while True:  # the line is written once the response has gone out: poll for it
        lines = (env["root"] / "server.log").read_text().splitlines()
        entries = [json.loads(x) for x in lines if x.startswith("{") and x.endswith("}")]
        mine = [e for e in entries if e.get("request_id") == "trace-me-123"]
        if mine or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(mine) == 1
    assert mine[0]["route"] == "/v1/collections" and mine[0]["status"] == 200
    assert isinstance(mine[0]["duration_ms"], float)


def test_answers_file_paths_inside_roots_are_read(env, admin, read):
    sub = Path(env["root"] / "data" / "sub")
    sub.mkdir(exist_ok=True)
    shutil.copy(env["root"] / "data" / "answers.jsonl", sub / "more.jsonl")
    body = {"collection": "synth", "answers_path": "sub/more.jsonl", "rankers": "tfidf"}
    job = admin.post("/v1/jobs", json=body).json()
    assert job["params"]["answers_path"] == "sub/more.jsonl"
    assert wait_for_job(read, job["id"])["status"] == "done"


def test_json_nested_too_deep_is_refused_and_the_worker_lives_on(env, admin, read):
    """Issue 60, item 1: an answers file one of whose lines nests 20,000 brackets deep killed
    the server (pyarrow's JSON reader overflowed the stack) and gave no answer; a body nested
    deeper than the bound got a 500. Both are a 422 with the one line ``nrp score`` gives, and
    the next job is scored."""
    path = env["root"] / "data" / "deep.jsonl"
    deep = "[" * 20_000 + "]" * 20_000
    row = json.dumps({**answer_records()[0], "extra": "X"}).replace('"X"', deep)
    path.write_text(json.dumps(answer_records()[1]) + "\n" + row + "\n")
    try:
        body = {"collection": "synth", "answers_path": path.name, "rankers": "bm25"}
        refused = admin.post("/v1/jobs", json=body)
    finally:
        path.unlink()
    assert refused.status_code == 422, refused.text
    detail = "deep.jsonl:2: invalid JSON: nested more than 100 levels deep at column 228"
    assert refused.json()["detail"] == detail  # the path as the client named it
    body = '{"collection": "synth", "answers": ' + "[" * 150 + "]" * 150 + "}"
    refused = admin.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})
    assert refused.status_code == 422
    assert "nested more than 100 levels deep" in refused.text
    with env["server"].client(None) as anonymous:
        assert anonymous.get("/readyz").json()["worker"] == "ready"
    body = {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "bm25"}
    assert wait_for_job(read, admin.post("/v1/jobs", json=body).json()["id"])["status"] == "done"
