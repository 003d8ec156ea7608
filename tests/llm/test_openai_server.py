"""The OpenAI-compatible client against nrp's own server, over real HTTP on 127.0.0.1.

Two ``python -m nrp.llm.server`` subprocesses serve the scripted tiny model (tiny_llm): a
well-behaved one, and one started with ``--fail-first 2 --delay 1`` for the retry and timeout
paths. Results over HTTP must equal the local backend's, sample by sample.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import httpx
import pandas as pd
from tiny_llm import (
    SCRIPTED_REPLY,
    build_scripted_llama,
    free_port,
    start_server,
    stop_server,
)

from nrp.errors import ConfigError, NrpError
from nrp.evaluators.judge import Judge
from nrp.llm.backends import GenerationOptions
from nrp.llm.local import LocalBackend
from nrp.llm.openai_compat import (
    OpenAIBackend,
    resolve_api_key,
    resolve_base_url,
    retry_after_seconds,
)

pytestmark = pytest.mark.slow  # two server processes start (imports of torch + transformers)

PROMPTS = ["Rate it.", [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]]


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    return str(build_scripted_llama(tmp_path_factory.mktemp("scripted-llama")))


@pytest.fixture(scope="module")
def servers(scripted, tmp_path_factory):
    """(good base URL, faulty base URL), started side by side."""
    logs = tmp_path_factory.mktemp("server-logs")
    with ThreadPoolExecutor(2) as pool:
        good = pool.submit(start_server, scripted, logs / "good.log", "--name", "tiny")
        faulty = pool.submit(
            start_server,
            scripted,
            logs / "faulty.log",
            "--name",
            "tiny",
            "--fail-first",
            "2",
            "--retry-after",
            "0.05",
            "--delay",
            "1.0",
        )
        started = [good.result(), faulty.result()]
    yield started[0][1], started[1][1]
    for process, _ in started:
        stop_server(process)


def texts(results):
    return [[c.text for c in samples] for samples in results]


def test_models_endpoint(servers):
    client = OpenAIBackend(base_url=servers[0])
    assert client.models() == ["tiny"]
    assert client.model_name == "tiny"  # model "": the server's only model
    assert client.checksum() == "openai:tiny"


def test_http_results_equal_the_local_backend(servers, scripted):
    local = LocalBackend(scripted, device="cpu")
    remote = OpenAIBackend("tiny", base_url=servers[0], concurrency=3)
    for options in (
        {"max_new_tokens": 20, "top_logprobs": 5},  # greedy
        {"max_new_tokens": 20, "temperature": 1.0, "seed": 11, "n": 4, "top_logprobs": 3},
    ):
        here = local.complete(PROMPTS, **options)
        there = remote.complete(PROMPTS, **options)
        assert texts(there) == texts(here)
        for samples_here, samples_there in zip(here, there, strict=True):
            for a, b in zip(samples_here, samples_there, strict=True):
                assert (b.seed, b.finish_reason, b.prompt_tokens) == (
                    a.seed,
                    "stop",
                    a.prompt_tokens,
                )
                assert b.completion_tokens == a.completion_tokens
                assert b.tokens == a.tokens
                assert b.token_logprobs == pytest.approx(a.token_logprobs, abs=1e-6)
                assert [t.top for t in b.logprobs] == [
                    tuple((tok, pytest.approx(v, abs=1e-6)) for tok, v in t.top) for t in a.logprobs
                ]
    sampled = texts(remote.complete(["x"], temperature=1.0, n=6, max_new_tokens=20))[0]
    assert len(set(sampled)) > 1 and SCRIPTED_REPLY in sampled


def test_judge_over_http_equals_the_local_judge(servers, scripted):
    items = pd.DataFrame(
        {
            "answer_id": ["a", "b"],
            "qid": ["q1", "q2"],
            "question": ["what is diabetes?", "how to treat a cold?"],
            "text": ["a disease of blood sugar", "rest"],
            "references": [("diabetes is a disease",), ()],
            "reference_kind": ["reference", ""],
            "contexts": [(), ()],
        }
    )
    for spec in (
        {"criteria": "relevance;readability"},
        {"mode": "tfn", "strategy": "sequential", "samples": 3, "temperature": 1.0},
    ):
        local = Judge({**spec, "model": scripted, "device": "cpu"}).evaluate(items)
        remote = Judge({**spec, "backend": "openai", "base_url": servers[0]}).evaluate(items)
        pd.testing.assert_frame_equal(local, remote)
    # G-Eval over HTTP is weighted from the returned top_logprobs: (4e^2 + 3e + 5) / (e^2 + e + 1)
    weighted = (4 * math.e**2 + 3 * math.e + 5) / (math.e**2 + math.e + 1)
    remote = Judge({"backend": "openai", "base_url": servers[0]}).evaluate(items)
    assert remote["judge.relevance"].tolist() == pytest.approx([weighted, weighted])


def test_client_errors_are_one_clear_line(servers):
    with pytest.raises(
        NrpError, match=r"HTTP 404: the model 'gpt-9' does not exist.*GET /v1/models"
    ):
        OpenAIBackend("gpt-9", base_url=servers[0], retries=3).complete(["x"])
    # a request the server refuses (400) is not retried
    bad = httpx.post(f"{servers[0]}/chat/completions", json={"model": "tiny", "messages": []})
    assert bad.status_code == 400
    assert bad.json()["error"]["message"].startswith("invalid request: messages:")
    port = free_port()  # nothing listens there
    with pytest.raises(
        NrpError, match=rf"127\.0\.0\.1:{port}/v1/models: cannot connect .* after 1 attempt$"
    ):
        OpenAIBackend(base_url=f"http://127.0.0.1:{port}", retries=0).model_name  # noqa: B018


def test_retries_and_timeouts_against_a_faulty_server(servers):
    faulty = servers[1]
    # request 1 answers 503 (injected); no retries allowed: the error names the status
    with pytest.raises(NrpError, match=r"HTTP 503: injected failure .* after 1 attempt$"):
        OpenAIBackend("tiny", base_url=faulty, retries=0).complete(["x"], max_new_tokens=20)
    # request 2 answers 503, request 3 succeeds (after the server's 1 s delay)
    client = OpenAIBackend("tiny", base_url=faulty, retries=3, timeout=30)
    (completion,) = client.complete(["x"], max_new_tokens=20)[0]
    assert completion.text == SCRIPTED_REPLY
    stats = httpx.get(faulty.removesuffix("/v1") + "/stats").json()
    assert stats == {"chat_requests": 3, "failed_on_purpose": 2}
    # every answer now takes 1 s: a 0.2 s timeout gives up after its retries
    impatient = OpenAIBackend("tiny", base_url=faulty, retries=1, timeout=0.2, backoff=0.01)
    with pytest.raises(
        NrpError, match=r"no answer within 0\.2 s \(raise timeout=\.\.\.\) after 2 attempts$"
    ):
        impatient.complete(["x"], max_new_tokens=20)


def test_settings_from_the_environment(monkeypatch):
    for name in ("NRP_OPENAI_BASE_URL", "OPENAI_BASE_URL", "NRP_OPENAI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert resolve_base_url() == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000")
    assert resolve_base_url() == "http://localhost:8000/v1"  # /v1 appended
    monkeypatch.setenv("NRP_OPENAI_BASE_URL", "http://h:1/api/v2/")
    assert resolve_base_url() == "http://h:1/api/v2"  # NRP_ first; a /vN root kept
    assert resolve_base_url("http://param:2/v1") == "http://param:2/v1"  # the parameter wins
    with pytest.raises(ConfigError, match="must start with http"):
        resolve_base_url("localhost:8000")
    assert resolve_api_key() is None
    monkeypatch.setenv("OPENAI_API_KEY", "k1")
    assert resolve_api_key() == "k1"
    monkeypatch.setenv("NRP_OPENAI_API_KEY", "k2")
    assert resolve_api_key() == "k2" and resolve_api_key("k3") == "k3"


def test_retry_after_header_forms():
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("0.5") == 0.5
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past


def test_request_body():
    client = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1")
    options = GenerationOptions(max_new_tokens=5, logprobs=True, top_logprobs=3, seed=2).check()
    body = client.request_body([{"role": "user", "content": "x"}], options, seed=4)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 5,
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 4,
        "n": 1,
        "logprobs": True,
        "top_logprobs": 3,
    }
    extended = GenerationOptions(top_k=5, repetition_penalty=1.1).check()
    body = client.request_body([{"role": "user", "content": "x"}], extended, seed=0)
    assert body["top_k"] == 5 and body["repetition_penalty"] == 1.1 and "logprobs" not in body
