"""``nrp serve`` and the CLI against hostile input, second round (issue 29, items 2 and 8).

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
from review_project import study_project  # noqa: E402

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
    tokens.write_text(
        f"admin {ADMIN_TOKEN}\nread {READ_TOKEN}\nreview/alice {REVIEWER_TOKEN}\n"
    )
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


