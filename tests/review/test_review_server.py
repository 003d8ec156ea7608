"""The review app on a real server on loopback: who may read what, no acknowledged save lost
when the server is killed with ``kill -9``, a stale save refused with the saved value."""

from __future__ import annotations

import sqlite3
import threading

import httpx
import pytest
from review_project import study_project
from review_server import ADMIN_TOKEN, READ_TOKEN, TOKENS, ReviewServer, Server, write_config
from review_server import write_tokens as write_review_tokens

from nrp.review.project import ReviewProject


def test_a_reviewer_token_reaches_its_own_projects_and_items_only(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # study: alice and bob, one review per item (alice has items 0, 2, 4, 6; bob 1, 3, 5)
    study = study_project(("alice", "bob"), 1).write(data / "study.json")
    other = ReviewProject("other", ("carol",), 1, study_project().items[:1]).write(
        data / "other.json"
    )
    tokens = write_review_tokens(tmp_path / "all-tokens.txt", admin=True)
    config = write_config(
        tmp_path, tokens_file=str(tokens), review_projects=[str(study), str(other)]
    )
    server = Server(config, tmp_path / "server.log").start()
    try:
        alice = server.client(TOKENS["alice"])
        carol = server.client(TOKENS["carol"])
        me = alice.get("/v1/review/me").json()
        assert me == {
            "reviewer": "alice",
            "projects": [
                {"name": "study", "kinds": ["rank", "grade", "verify"], "assigned": 4, "done": 0}
            ],
        }
        items = alice.get("/v1/review/projects/study/items").json()["items"]
        assert [i["id"] for i in items] == ["rank:q1", "grade:a1", "grade:a3", "verify:a2"]
        # another project, and another reviewer's item: 404, as if they did not exist
        assert alice.get("/v1/review/projects/other/items").status_code == 404
        assert carol.get("/v1/review/projects/study/progress").status_code == 404
        assert alice.get("/v1/review/projects/study/items/rank:q2").status_code == 404
        body = {"value": {"ranking": [["c1"], ["c2"], ["c3"]]}, "version": 0, "save_id": "x"}
        assert alice.put("/v1/review/projects/study/items/rank:q2", json=body).status_code == 404
        # nothing of the scoring service: collections, jobs, results, leaderboard, metrics,
        # admin routes
        for method, path in [
            ("GET", "/v1/collections"), ("GET", "/v1/collections/demo"), ("GET", "/v1/jobs"),
            ("GET", "/v1/jobs/j1"), ("GET", "/v1/jobs/j1/results"),
            ("GET", "/v1/leaderboard?collection=demo"), ("GET", "/metrics"),
            ("POST", "/v1/collections"), ("POST", "/v1/jobs"), ("DELETE", "/v1/jobs/j1"),
            ("POST", "/v1/score"),
        ]:  # fmt: skip
            answer = alice.request(method, path, json={} if method == "POST" else None)
            assert answer.status_code == 403, (method, path, answer.text)
            assert (
                answer.json()["detail"] == "this token's scope (review) does not allow this request"
            )
        # a read token is no reviewer; an admin reads progress but reviews nothing
        assert server.client(READ_TOKEN).get("/v1/review/me").status_code == 403
        admin = server.client(ADMIN_TOKEN)
        progress = admin.get("/v1/review/projects/study/progress").json()["reviewers"]
        assert [(r["reviewer"], r["assigned"]) for r in progress] == [("alice", 4), ("bob", 3)]
        assert admin.get("/v1/review/projects/study/items").status_code == 403
        # no token: the page (no data in it) but no data
        assert httpx.get(f"{server.url}/v1/review/me").status_code == 401
        page = httpx.get(f"{server.url}/review/")
        assert page.status_code == 200 and "static/app.js" in page.text
        assert httpx.get(f"{server.url}/review/static/app.js").status_code == 200
        assert httpx.get(f"{server.url}/review/static/../config.py").status_code == 404
    finally:
        server.stop()


def test_no_acknowledged_save_is_lost_when_the_server_is_killed(tmp_path):
    """Saves are sent one after another; the server is killed with SIGKILL while they flow;
    after a restart every save that got its 200 is stored (a save in flight at the kill may or
    may not be: it was never acknowledged)."""
    project = study_project(("alice",), 1).write(tmp_path / "study.json")
    server = ReviewServer(project, tmp_path / "review.log").start()
    acknowledged: list[tuple[str, int, str]] = []  # (item, version, save id)
    enough = threading.Event()
    labels = ["TRUE", "FALSE", "NOT GIVEN"]

    def send() -> None:
        version = {"verify:a1": 0, "verify:a2": 0}
        with server.client("alice") as client:
            for n in range(100_000):
                item = "verify:a1" if n % 2 else "verify:a2"
                body = {"value": {"label": labels[n % 3]}, "version": version[item],
                        "save_id": f"save-{n}"}  # fmt: skip
                try:
                    answer = client.put(f"/v1/review/projects/study/items/{item}", json=body)
                except httpx.HTTPError:
                    return  # the server is gone
                assert answer.status_code == 200, answer.text
                version[item] = answer.json()["version"]
                acknowledged.append((item, version[item], body["save_id"]))
                if len(acknowledged) >= 40:
                    enough.set()

    sender = threading.Thread(target=send)
    sender.start()
    assert enough.wait(120), (tmp_path / "review.log").read_text()[-2000:]
    server.kill9()  # while the sender goes on
    sender.join(60)
    assert not sender.is_alive()
    server.start()
    try:
        stored = sqlite3.connect(tmp_path / "study.reviews.sqlite")
        save_ids = {row[0] for row in stored.execute("SELECT save_id FROM saves")}
        stored.close()
        missing = [save for _, _, save in acknowledged if f"alice:{save}" not in save_ids]
        assert missing == []
        with server.client("alice") as client:
            for item in ("verify:a1", "verify:a2"):
                last = max(v for i, v, _ in acknowledged if i == item)
                now = client.get(f"/v1/review/projects/study/items/{item}").json()
                assert now["version"] >= last
        assert len(acknowledged) >= 40
        stale_saves_get_409_with_the_saved_value(server)
    finally:
        server.stop()


def stale_saves_get_409_with_the_saved_value(server: ReviewServer) -> None:
    """Two tabs of one reviewer: the second saves on the version it read, after the first
    saved twice: 409 with the value and version stored. A retried save is answered as the
    first time and stored once; a label off the scale is a 422."""
    with server.client("alice") as tab1, server.client("alice") as tab2:
        path = "/v1/review/projects/study/items/grade:a1"
        first = {"value": {"labels": {"relevance": "2"}}, "version": 0, "save_id": "t1-1"}
        assert tab1.put(path, json=first).json() == {"version": 1, "value": first["value"]}
        second = {"value": {"labels": {"relevance": "1"}}, "version": 1, "save_id": "t1-2"}
        assert tab1.put(path, json=second).json()["version"] == 2
        late = {"value": {"labels": {"relevance": "0"}}, "version": 1, "save_id": "t2-1"}
        answer = tab2.put(path, json=late)
        assert answer.status_code == 409
        assert answer.json()["current"] == {"value": {"labels": {"relevance": "1"}}, "version": 2}
        assert tab1.put(path, json=first).json()["version"] == 1
        assert tab1.get(path).json()["version"] == 2
        bad = {"value": {"labels": {"relevance": "7"}}, "version": 2, "save_id": "t1-3"}
        assert tab1.put(path, json=bad).status_code == 422


def test_nrp_review_alone_prints_a_login_link_per_reviewer(tmp_path):
    project = study_project(("alice", "bob"), 1).write(tmp_path / "study.json")
    server = ReviewServer(project, tmp_path / "review.log", tokens_file=False).start()
    try:
        links = dict(
            line.split(": ", 1)
            for line in (tmp_path / "review.log").read_text().splitlines()
            if "/review/#token=" in line
        )
        assert sorted(links) == ["alice", "bob"]
        assert links["alice"].startswith(f"{server.url}/review/#token=")
        token = links["alice"].split("#token=", 1)[1]
        me = httpx.get(f"{server.url}/v1/review/me", headers={"Authorization": f"Bearer {token}"})
        assert me.json()["reviewer"] == "alice"
        assert token != links["bob"].split("#token=", 1)[1]
    finally:
        server.stop()


def test_review_projects_must_be_files_inside_a_data_root(tmp_path):
    from nrp.errors import ConfigError
    from nrp.service.config import load_config

    data = tmp_path / "data"
    data.mkdir()
    inside = study_project().write(data / "study.json")
    outside = study_project().write(tmp_path / "elsewhere.json")
    base = {"data_roots": [data], "auth": False}
    config = load_config(None, {**base, "review_projects": [inside]}, environ={})
    assert config.review_projects == (inside.resolve(),)
    with pytest.raises(
        ConfigError, match=r"review project .*elsewhere.json is not inside a data root"
    ):
        load_config(None, {**base, "review_projects": [outside]}, environ={})
    with pytest.raises(ConfigError, match=r"review project .*none.json is not a file"):
        load_config(None, {**base, "review_projects": [data / "none.json"]}, environ={})
