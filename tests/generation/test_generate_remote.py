"""Generation through an OpenAI-compatible endpoint: nrp's own server (``nrp.llm.server``) on
127.0.0.1 serving the tiny random Llama. Each answer is one request with its own seed, so the
remote answers equal the same model's local chat-mode answers, sample by sample."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("httpx")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from tiny_llm import build_tiny_llama, start_server, stop_server

from nrp.generation import generate_answers
from nrp.llm.backends import GenerationOptions

TOPICS = pd.DataFrame({"qid": ["q1", "q2"], "query": ["what is diabetes", "is the fox quick"]})
OPTIONS = GenerationOptions(
    max_new_tokens=6, temperature=0.75, top_k=50, top_p=0.95, repetition_penalty=1.2, seed=5
)


@pytest.mark.slow
def test_remote_answers_equal_local_chat_answers(tmp_path):
    tiny = str(build_tiny_llama(tmp_path / "tiny"))
    process, base_url = start_server(tiny, tmp_path / "server.log", "--name", "tiny")
    try:
        remote = generate_answers(
            TOPICS, f"openai:model=tiny,base_url={base_url},name=x,concurrency=1",
            ["short-qa:chat"], 2, OPTIONS, tmp_path / "remote.jsonl",
        )  # fmt: skip
    finally:
        stop_server(process)
    local = generate_answers(
        TOPICS, f"local:model={tiny},name=x,device=cpu,batch=1", ["short-qa:chat"], 2, OPTIONS
    )
    assert remote.attrs["counts"]["generated"] == 4
    assert remote["answer_id"].tolist() == local["answer_id"].tolist()
    assert remote["text"].tolist() == local["text"].tolist()
    assert remote["seed"].tolist() == local["seed"].tolist()
    row = remote.iloc[0]
    assert row["checksum"] == "openai:tiny" and row["model"] == "tiny"
    params = json.loads(row["params"])
    assert (params["backend"], params["mode"]) == ("openai", "chat")
