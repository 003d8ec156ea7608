"""Every route of ``docs/openapi.json`` fuzzed against a real ``nrp serve`` on loopback
(schemathesis over hypothesis), with an admin, a read and a reviewer token: no answer is a
5xx, and no answer quotes a server path.

Cases per route: ``NRP_FUZZ_CASES`` (default 25 in CI, drawn the same way every run:
``derandomize``), each sent with each of the three tokens; drawn from the schema's valid
requests, its invalid ones, and valid ones naming what the server holds (``KNOWN``). A
longer, random run by hand:

    NRP_FUZZ_CASES=500 pytest -q tests/service/test_schema_fuzz.py

A failing case is printed as the request that failed (method, path, query, body), not shrunk.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from service_helpers import ADMIN_TOKEN, READ_TOKEN, Server, write_config, write_synth

from nrp import ingest
from nrp.review.project import ReviewProject
from nrp.review.store import ReviewStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "review"))
from review_project import grade_item

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = schemathesis.openapi.from_dict(json.loads((ROOT / "docs" / "openapi.json").read_text()))
OPERATIONS = {op.label: op for op in (r.ok() for r in SCHEMA.get_all_operations())}
CASES = int(os.environ.get("NRP_FUZZ_CASES") or 25)
BY_HAND = bool(os.environ.get("NRP_FUZZ_CASES"))
REVIEWER_TOKEN = "fuzz-reviewer-token-0123456789"
TOKENS = {"admin": ADMIN_TOKEN, "read": READ_TOKEN, "reviewer": REVIEWER_TOKEN}
# what the fixture's server holds: known names make some cases reach past the 404s
KNOWN = {"name": "synth", "project": "fuzz", "item_id": "grade:a1", "collection": "synth"}
SERVER_PATH = re.compile(r"(?<![\w.])/(tmp|home|work|root|usr|var|opt|srv|etc)/")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("fuzz").resolve()
    ingest(write_synth(root / "data"), indexes_dir=root / "indexes")
    project = _review_project(root / "data" / "fuzz.json")
    tokens = root / "fuzz-tokens.txt"
    tokens.write_text(f"admin {ADMIN_TOKEN}\nread {READ_TOKEN}\nreview/alice {REVIEWER_TOKEN}\n")
    config = write_config(root, tokens_file=str(tokens), review_projects=[str(project)])
    server = Server(config, root / "server.log").start()
    yield server, root
    server.stop()


def _review_project(path: Path) -> Path:
    items = (grade_item("a1"), grade_item("a2"))
    scales = {"relevance": {"description": "answers", "grades": [
        {"label": "0", "meaning": "no"}, {"label": "1", "meaning": "yes"}]}}  # fmt: skip
    ReviewProject("fuzz", ("alice",), 1, items, scales).write(path)
    ReviewStore(path.with_suffix(".reviews.sqlite"))
    return path


def _cases(label: str) -> st.SearchStrategy:
    operation = OPERATIONS[label]
    names = {p.name for p in operation.iter_parameters() if p.location == "path"}
    known = {k: v for k, v in KNOWN.items() if k in names}
    strategies = [
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    ]
    if known:
        strategies.append(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=known))
    if operation.method.upper() == "POST" and operation.path in ("/v1/score", "/v1/jobs"):
        aimed = st.tuples(operation.as_strategy(GenerationMode.POSITIVE), SPECS, QIDS)
        strategies.append(aimed.map(_aim))
    return st.one_of(strategies)


# a valid body aimed at the collection: real ranker names with odd parameter values, real qids
SPECS = st.builds(
    lambda name, key, value: f"{name}:{key}={value}" if key else name,
    st.sampled_from(["bm25", "tfidf", "dph", "random", "guard"]),
    st.sampled_from(["", "k1", "b", "stats", "seed", "query", "passages", "content"]),
    st.one_of(st.integers(), st.floats(), st.text(max_size=12)),
)
QIDS = st.sampled_from(["t0", "t1", "empty", "nope", 0])


def _aim(drawn: tuple) -> object:
    case, spec, qid = drawn
    if isinstance(case.body, dict):
        case.body["collection"] = "synth"
        case.body["rankers"] = spec
        for answer in case.body.get("answers") or []:
            if isinstance(answer, dict):
                answer["qid"] = qid
    return case


def _problem(response, root: Path) -> str | None:
    if response.status_code >= 500:
        return f"answered {response.status_code}"
    text = response.text
    if str(root) in text or SERVER_PATH.search(text):
        return "quotes a server path"
    return None


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_no_route_answers_5xx_or_a_server_path(server, label):
    running, root = server
    found: list[str] = []

    @settings(
        max_examples=CASES,
        derandomize=not BY_HAND,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: bounded time, every failure
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_cases(label))
    def check(case):
        for scope, token in TOKENS.items():
            headers = {"Authorization": f"Bearer {token}"}
            response = case.call(base_url=running.url, headers=headers, timeout=60)
            problem = _problem(response, root)
            if problem is not None:
                request = response.request
                body = (request.body or b"")[:300]
                found.append(f"{scope}: {request.method} {request.url} {body!r}: {problem}: "
                             f"{response.text[:300]}")  # fmt: skip

    check()
    assert not found, "\n".join(found[:10])


#: bodies no schema draws (issue 60): nesting far past any bound, a body past the size limit,
#: top-level values of the wrong type, NaN and Infinity, a lone surrogate, a key twice, an
#: integer of 5,000 digits, invalid UTF-8; each inside a valid-looking object too
ADVERSARIAL = [
    b"[" * 20_000 + b"]" * 20_000,
    b'{"collection": "synth", "answers": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
    b'{"collection": "synth", "rankers": "bm25", "pad": "' + b"x" * 300_000 + b'"}',
    b"[]", b'"x"', b"1", b"null", b"true",
    b'{"collection": "synth", "rankers": "bm25", "weights": {"relevance": NaN}}',
    b'{"collection": "synth", "rankers": "bm25", "weights": {"relevance": Infinity}}',
    b'{"collection": "synth", "rankers": "bm25\\ud800"}',
    b'{"collection": "synth", "collection": "other"}',
    b'{"collection": "synth", "sample": ' + b"9" * 5_000 + b"}",
    b'{"collection": "\xff\xfe"}',
]  # fmt: skip
BODY_ROUTES = [
    ("POST", "/v1/score"),
    ("POST", "/v1/jobs"),
    ("POST", "/v1/collections"),
    ("PUT", "/v1/review/projects/fuzz/items/grade:a1"),
]


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
def test_adversarial_bodies_get_a_4xx_and_the_server_stays_ready(server, method, path):
    running, root = server
    found = []
    for scope, token in TOKENS.items():
        with running.client(token) as client:
            for body in ADVERSARIAL:
                response = client.request(
                    method, path, content=body, headers={"Content-Type": "application/json"}
                )
                problem = _problem(response, root)
                if problem is not None or not 400 <= response.status_code < 500:
                    found.append(f"{scope} {body[:60]!r}: {response.status_code} "
                                 f"{response.text[:200]}")  # fmt: skip
    with running.client(None) as anonymous:
        assert anonymous.get("/readyz").json()["worker"] == "ready"
    assert not found, "\n".join(found[:10])
