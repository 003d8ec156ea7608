"""``nrp serve`` against hostile and careless requests (issue 16): a real server in a subprocess
on loopback, a real HTTP client.

Two servers. ``plain`` has the settings every existing deployment has (data roots, tokens) and
runs in a working folder of its own that holds ``leak/config.json``: a model name without a
slash must not reach it, a 500 must say nothing but an error id, a 4xx names no absolute server
path, every integer has a range, and a request without a token is a 401 before its body is
parsed. ``limited`` uses the new settings: ``read_rankers``, ``model_roots``, named ``models``
and a pool of three entries.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import httpx
import pytest
from service_helpers import (
    ADMIN_TOKEN,
    READ_TOKEN,
    Server,
    wait_for_job,
    write_config,
    write_synth,
)

from nrp import ingest
from nrp.collection.store import STORE_FILE
from nrp.models.folders import minilm_path

pytestmark = pytest.mark.slow  # two server starts: several seconds each

SECRET = "SECRET-7f3a-do-not-echo"
BIG = 2**70


def _broken_model(folder: Path) -> None:
    """A model folder whose config.json the loader chokes on, quoting its content."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": SECRET}))


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("hostile").resolve()
    ingest(write_synth(root / "data"), indexes_dir=root / "indexes")
    _broken_model(root / "data" / "models" / "broken")
    (root / "data" / "models" / "empty").mkdir()
    (root / "data" / "bad.jsonl").write_text('{"llm": "m", "prompt": "p", "qid": "t0"}\n')
    _broken_model(root / "cwd" / "leak")  # beside the server, outside every data root
    server = Server(write_config(root), root / "server.log", cwd=root / "cwd").start()
    yield {"root": root, "server": server}
    server.stop()


@pytest.fixture(scope="module")
def read(plain):
    with plain["server"].client(READ_TOKEN) as client:
        yield client


@pytest.fixture(scope="module")
def admin(plain):
    with plain["server"].client(ADMIN_TOKEN) as client:
        yield client


def score_body(rankers: str, **answer: object) -> dict:
    return {
        "collection": "synth",
        "rankers": rankers,
        "answers": [{"qid": "t0", "text": "fever rest and fever treatment", **answer}],
    }


# -- tokens before bodies --------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/score", "/v1/collections"])
def test_malformed_json_without_a_token_is_401_before_the_body_is_parsed(plain, path):
    with plain["server"].client(None) as anonymous:
        for headers in ({}, {"Authorization": "Bearer not-a-known-token-at-all"}):
            response = anonymous.post(
                path, content=b"{not json", headers={"Content-Type": "application/json", **headers}
            )
            assert response.status_code == 401, response.text
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert response.json()["detail"] in ("missing bearer token", "invalid token")


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/collections"])
def test_a_scope_the_route_refuses_is_403_before_the_body_is_parsed(read, path):
    """Issue 60, item 7: a read token sent malformed JSON to an admin route got a 422 about its
    body (a valid body got 403): it learnt that the route parses bodies before it refuses.
    Authorization comes first, whatever the body."""
    for body in (b"{not json", b'{"collection": "x", "deep": ' + b"[" * 500 + b"]" * 500 + b"}",
                 b'{"manifest": "m.yaml", "collection": "synth"}'):  # fmt: skip
        response = read.post(path, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 403, response.text
        assert response.json()["detail"] == "this token's scope (read) does not allow this request"


# -- models and the data roots ---------------------------------------------------------------
def test_a_model_name_without_a_slash_never_loads_a_folder_beside_the_server(plain, read):
    for spec in (
        "dense:model=leak",
        "dense:model=org/hub-model",
        "fuse:rankers=bm25+dense:model=leak",
    ):
        response = read.post("/v1/score", json=score_body(spec))
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]
        assert "is not a model this server offers" in detail
        assert SECRET not in detail and str(plain["root"]) not in detail
    assert SECRET not in (plain["root"] / "server.log").read_text()  # never even read


def test_a_model_the_loader_refuses_is_refused_as_unknown_and_the_log_has_the_detail(plain, read):
    # (issue 29: a folder the loader chokes on was a 500, a missing name a 422: an oracle)
    response = read.post("/v1/score", json=score_body("dense:model=models/broken"))
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "ranker 'dense' parameter model: 'models/broken' is not a model this server offers "
        "(it offers: minilm, mpnet; or a folder relative to one of its data roots)"
    )
    log = [json.loads(line) for line in (plain["root"] / "server.log").read_text().splitlines()]
    logged = [r for r in log if r.get("msg") == "model refused" and SECRET in r["error"]]
    assert len(logged) == 1


def test_a_guard_model_file_is_refused_as_a_model_the_server_does_not_offer(plain, read):
    """Issue 60, item 4: ``guard:model=NAME`` told a read token which files exist (a file beside
    the server "outside the data roots", a missing one "file not found"), quoted pieces of a
    data-root file ("could not convert string to float: 'SECRET'"), and scored with a NaN
    threshold. Now every one is the refusal a model folder gets, and a fitted model in a data
    root scores."""
    from nrp.rankers.guard_model import GuardModel

    data, cwd = plain["root"] / "data", plain["root"] / "cwd"
    (cwd / "beside.json").write_text("{}")
    (data / "secret-guard.json").write_text(json.dumps({"features": [SECRET]}) + "\nextra")
    nan = {"features": ["log_novel"], "weights": [1.0], "intercept": 0.0, "threshold": "NaN"}
    (data / "nan-guard.json").write_text(json.dumps(nan).replace('"NaN"', "NaN"))
    GuardModel(("log_novel",), (1.0,), 0.0, 0.5).to_json(data / "fitted-guard.json")
    offers = "(it offers: minilm, mpnet; or a folder relative to one of its data roots)"
    for name in ("beside.json", "missing.json", "secret-guard.json", "nan-guard.json"):
        response = read.post("/v1/score", json=score_body(f"guard:ranker=bm25,model={name}"))
        assert response.status_code == 422, response.text
        assert response.json()["detail"] == (
            f"ranker 'guard' parameter model: {name!r} is not a model this server offers {offers}"
        )
    response = read.post("/v1/score", json=score_body("guard:ranker=bm25,model=fitted-guard.json"))
    assert response.status_code == 200, response.text


def test_an_unexpected_error_in_a_route_is_a_json_500_with_an_error_id(plain, read):
    broken = plain["root"] / "indexes" / "zz-broken"
    broken.mkdir()
    (broken / STORE_FILE).write_bytes(b"not a database " + SECRET.encode())
    try:
        response = read.get("/v1/collections")
    finally:
        shutil.rmtree(broken)
    assert response.status_code == 500
    body = response.json()
    assert body["detail"].startswith(f"internal error (error id {body['error_id']})")
    assert SECRET not in response.text
    assert body["error_id"] in (plain["root"] / "server.log").read_text()


def test_4xx_messages_carry_no_absolute_server_path(plain, admin, read):
    root = str(plain["root"])
    missing = read.get("/v1/collections/nope")
    assert (missing.status_code, missing.json()) == (404, {"detail": "unknown collection 'nope'"})
    empty = read.post("/v1/score", json=score_body("dense:model=models/empty"))
    assert empty.status_code == 422
    assert "'models/empty' is not a model this server offers" in empty.json()["detail"]
    job = {"collection": "synth", "answers_path": "bad.jsonl", "rankers": "bm25"}
    bad = admin.post("/v1/jobs", json=job)
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("bad.jsonl:1: ")
    manifest = admin.post("/v1/collections", json={"manifest": "models/broken/config.json"})
    assert manifest.status_code == 422
    for response in (missing, empty, bad, manifest):
        assert root not in response.text
        assert not re.search(r"(?<![\w.])/(tmp|home|work|root|usr|var)/", response.text)


# -- integers --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def done_job(admin):
    body = {"collection": "synth", "answers_path": "answers.jsonl", "rankers": "bm25"}
    job = admin.post("/v1/jobs", json=body).json()
    assert wait_for_job(admin, job["id"])["status"] == "done"
    return job["id"]


def _inline(**answer: object) -> dict:
    record = {"llm": "m", "prompt": "p", "qid": "t0", "text": "fever rest", **answer}
    return {"collection": "synth", "answers": [record], "rankers": "bm25"}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/v1/jobs", _inline(sample=BIG), "sample"),
        ("post", "/v1/jobs", _inline(sample=-1), "sample"),
        ("post", "/v1/jobs", _inline(llm=BIG), "llm"),
        ("post", "/v1/jobs", _inline(qid=-BIG), "qid"),
        ("post", "/v1/score", score_body("bm25", sample=BIG), "sample"),
        ("post", "/v1/score", score_body("bm25", qid=BIG), "qid"),
        ("get", "/v1/jobs?offset=100000000000000000000000", None, "offset"),
        ("get", "/v1/jobs/{job}/results?offset=100000000000000000000000", None, "offset"),
        ("get", "/v1/jobs/{job}/results?limit=100000000000000000000000", None, "limit"),
    ],
)
def test_every_integer_has_a_declared_range(admin, done_job, method, path, body, field):
    url = path.format(job=done_job)
    response = admin.post(url, json=body) if method == "post" else admin.get(url)
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    assert isinstance(errors, list) and errors
    assert all(field in error["loc"] for error in errors)
    assert {e["type"] for e in errors} <= {
        "greater_than_equal",
        "less_than_equal",
        "string_type",
    }


# -- the new settings: read_rankers, model roots, named models, a small pool ------------------
@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("limited").resolve()
    ingest(write_synth(root / "data"), indexes_dir=root / "indexes")
    (root / "data" / "models" / "in-data-root").mkdir(parents=True)
    _broken_model(root / "models" / "broken")
    config = write_config(
        root,
        read_rankers=["bm25*", "dense*"],
        model_roots=[str(root / "models")],
        models={"mini": "minilm"},
        pool_max_entries=3,
    )
    server = Server(config, root / "server.log").start()
    yield {"root": root, "server": server}
    server.stop()


def test_read_tokens_may_use_only_the_rankers_the_settings_allow(limited):
    body = score_body("tfidf")
    with limited["server"].client(READ_TOKEN) as read:
        refused = read.post("/v1/score", json=body)
        assert refused.status_code == 403
        assert refused.json()["detail"] == (
            "ranker 'tfidf': a read token may use only rankers matching bm25*, dense* "
            "(setting read_rankers); ask for an admin token or another ranker"
        )
        assert read.post("/v1/score", json=score_body("bm25:k1=0.7")).status_code == 200
    with limited["server"].client(ADMIN_TOKEN) as admin:
        allowed = admin.post("/v1/score", json=body)
        assert allowed.status_code == 200
        assert allowed.json()["rankers"] == {"relevance": "tfidf", "readability": "tfidf"}


def test_models_come_from_the_model_roots_or_the_settings_names(limited):
    with limited["server"].client(READ_TOKEN) as read:
        outside = read.post("/v1/score", json=score_body("dense:model=models/in-data-root"))
        assert outside.status_code == 422
        assert (
            "is not a model this server offers (it offers: minilm, mpnet, mini;"
            in (outside.json()["detail"])
        )
        broken = read.post("/v1/score", json=score_body("dense:model=broken"))
        assert broken.status_code == 422  # the loader refuses it: as if it were not there
        assert broken.json()["detail"].startswith(
            "ranker 'dense' parameter model: 'broken' is not a model this server offers"
        )
        if minilm_path() is not None:
            named = read.post("/v1/score", json=score_body("dense:model=mini,passages=3"))
            assert named.status_code == 200, named.text
            assert named.json()["rankers"]["relevance"] == "dense:passages=3"


def _pool_metrics(client: httpx.Client) -> dict[str, float]:
    text = client.get("/metrics").text
    return {
        m.group(1): float(m.group(2))
        for m in re.finditer(r"^nrp_worker_pool_(\w+) (\S+)$", text, re.MULTILINE)
    }


def test_distinct_specs_from_a_read_token_keep_the_worker_pool_bounded(limited):
    with limited["server"].client(READ_TOKEN) as read:
        before = _pool_metrics(read).get("evictions", 0.0)
        for n in range(8):
            response = read.post("/v1/score", json=score_body(f"bm25:k1={2 + n / 10:.1f}"))
            assert response.status_code == 200, response.text
        deadline = time.monotonic() + 60
        pool = _pool_metrics(read)
        while pool.get("evictions", 0.0) < before + 8 - 3 and time.monotonic() < deadline:
            time.sleep(0.2)  # the worker reports after each batch
            pool = _pool_metrics(read)
    assert pool["entries"] <= 3
    assert pool["evictions"] >= before + 5
    assert pool["bytes"] > 0
