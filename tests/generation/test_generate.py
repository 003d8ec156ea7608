"""Answer generation on a tiny random Llama built here (no hub, no mocks).

Prompt rendering and seeds are checked against hand-written strings and hashes; token counts
against the tokenizer itself; answers of one (qid, prompt, sample) must not depend on what else
was generated with them; a second run must generate nothing.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from tiny_llm import build_tiny_llama

from nrp.answers import read_answers
from nrp.cli import main
from nrp.errors import ConfigError, InputError, NrpError
from nrp.generation import (
    STUDY_OPTIONS,
    derive_seed,
    generate_answers,
    load_prompt,
    load_prompts,
    parse_llm,
    strip_echo,
)
from nrp.generation.generate import store_path
from nrp.llm.backends import GenerationOptions

ROOT = Path(__file__).resolve().parents[2]
TOPICS = pd.DataFrame(
    {"qid": ["q1", "q2", "q3"], "query": ["what is diabetes", "is the fox quick", "why sleep"]}
)
OPTIONS = GenerationOptions(
    max_new_tokens=6, temperature=0.75, top_k=50, top_p=0.95, repetition_penalty=1.2, seed=7
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(build_tiny_llama(tmp_path_factory.mktemp("tiny-gen")))


def llm(tiny: str, name: str = "tiny", batch: int = 4) -> str:
    return f"local:model={tiny},name={name},device=cpu,batch={batch}"


# -- prompts -------------------------------------------------------------------------------------
def test_study_prompts_render_as_the_study_wrote_them():
    query = "can vitamin c prevent colds"
    assert load_prompt("none").render(query) == query
    assert load_prompt("short-qa").render(query) == f"Q: {query} A:"
    assert load_prompt("long-qa").render(query) == f"Question: {query} Answer:"
    assert load_prompt("multimedqa").render(query) == (
        "You are a helpful medical knowledge assistant. Provide useful, complete, and "
        "scientifically grounded answers to common consumer search queries about health. "
        f"Question: {query} Complete Answer:"
    )
    short = load_prompt("short-qa")
    assert (short.label, short.template.name, short.chat) == ("short-qa", "short-qa-v1", False)
    chat = load_prompt("long-qa-v1:chat")
    assert (chat.label, chat.chat) == ("long-qa-v1:chat", True)
    # a query holding braces is inserted verbatim
    assert load_prompt("short-qa").render("{{query}} {x}") == "Q: {{query}} {x} A:"


def test_the_evasive_reply_template_of_docs_validity_renders_in_chat_mode():
    """docs/examples/evasive-reply.txt, the prompt of the outside check in docs/validity.md."""
    path = Path(__file__).resolve().parents[2] / "docs" / "examples" / "evasive-reply.txt"
    evasive = load_prompt(f"{path}:chat")
    assert (evasive.label, evasive.chat) == ("evasive-reply:chat", True)
    text = evasive.render("Is ibuprofen safe in pregnancy?")
    assert text.startswith("You are a cautious assistant that never gives medical information.")
    assert text.endswith("\n\nQuestion: Is ibuprofen safe in pregnancy?")


def test_user_template_file_and_errors(tmp_path):
    template = tmp_path / "kind-v2.txt"
    template.write_text("# mine\n[[prompt]]\nPlease answer kindly: {{query}}\n")
    strategy = load_prompt(str(template))
    assert strategy.label == "kind-v2"
    assert strategy.render("x") == "Please answer kindly: x"
    assert strategy.template.sha256 == hashlib.sha256(template.read_bytes()).hexdigest()
    bad = tmp_path / "bad.txt"
    bad.write_text("[[prompt]]\nfine\nQ: {{question}}\n")
    with pytest.raises(InputError, match=r"bad.txt:3: unknown placeholder"):
        load_prompt(str(bad))
    with pytest.raises(ConfigError, match="unknown prompt strategy 'nope'"):
        load_prompt("nope")
    with pytest.raises(ConfigError, match="named twice: short-qa"):
        load_prompts("short-qa,short-qa")


def test_strip_echo():
    prompt = "Question: what is diabetes? Answer:"
    assert strip_echo(" A disease.", prompt) == "A disease."
    assert strip_echo("Question: what is diabetes? Answer: A disease.", prompt) == "A disease."
    # whitespace differences in the echo still count as the echo
    assert strip_echo("Question:  what is\ndiabetes? Answer:\nA disease.", prompt) == "A disease."
    # a partial echo is the model's own text: kept
    assert strip_echo("Question: why? No.", prompt) == "Question: why? No."
    assert strip_echo("Question: what is diabetes? Answer:", prompt) == ""


def test_seeds_are_per_qid_prompt_and_sample():
    expected = int.from_bytes(hashlib.sha256(b"7\x1fq1\x1fshort-qa\x1f2").digest()[:4], "big")
    assert derive_seed(7, "q1", "short-qa", 2) == expected & 0x7FFFFFFF
    seeds = {derive_seed(0, q, p, s) for q in "ab" for p in ("none", "long-qa") for s in range(5)}
    assert len(seeds) == 20


def test_llm_specs():
    default = parse_llm("local")
    assert (default.backend, default.label, default.params["model"]) == ("local", "smollm2", "")
    assert parse_llm("smollm2:batch=2").params["batch"] == 2
    path = parse_llm("/models/Llama-3.2-1B.gguf")
    assert (path.label, path.params["model"]) == ("Llama-3.2-1B", "/models/Llama-3.2-1B.gguf")
    remote = parse_llm({"backend": "openai", "model": "gpt-4o-mini", "base_url": "http://x/v1"})
    assert (remote.backend, remote.label) == ("openai", "gpt-4o-mini")
    assert STUDY_OPTIONS.max_new_tokens == 512 and STUDY_OPTIONS.temperature == 0.75
    assert (STUDY_OPTIONS.top_k, STUDY_OPTIONS.top_p) == (50, 0.95)
    assert STUDY_OPTIONS.repetition_penalty == 1.2
    with pytest.raises(ConfigError, match="no parameter 'temprature'"):
        parse_llm("local:temprature=1")


# -- generation ----------------------------------------------------------------------------------
def test_generation_metadata_tokens_and_batch_independence(tiny, tmp_path):
    from transformers import AutoTokenizer

    out = tmp_path / "answers.parquet"
    answers = generate_answers(TOPICS, llm(tiny), "short-qa,none:chat", 2, OPTIONS, out)
    assert answers.attrs["counts"]["generated"] == 12
    empty = answers.attrs["empty"]
    assert len(answers) + len(empty) == 12
    full = pd.read_parquet(out)
    assert len(full) == len(answers)
    row = full.set_index("answer_id").loc["tiny/short-qa/q2/1"]
    assert (row["llm"], row["prompt"], row["qid"], row["sample"]) == ("tiny", "short-qa", "q2", 1)
    assert row["seed"] == derive_seed(7, "q2", "short-qa", 1)
    params = json.loads(row["params"])
    assert params["mode"] == "completion" and params["template"] == "short-qa-v1"
    assert (params["max_new_tokens"], params["temperature"], params["top_k"]) == (6, 0.75, 50)
    assert (params["top_p"], params["repetition_penalty"], params["base_seed"]) == (0.95, 1.2, 7)
    assert row["model"] == tiny and len(row["checksum"]) >= 16
    assert row["finish_reason"] in ("stop", "length")
    assert 1 <= row["completion_tokens"] <= 6
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    # completion mode: the template's text as it is; chat mode: through the chat template
    assert row["prompt_tokens"] == len(tokenizer("Q: is the fox quick A:")["input_ids"])
    chat_row = full.set_index("answer_id").loc["tiny/none:chat/q1/0"]
    chat_ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "what is diabetes"}], add_generation_prompt=True
    )
    assert chat_row["prompt_tokens"] == len(chat_ids)
    assert json.loads(chat_row["params"])["mode"] == "chat"
    # read back as an answer set
    assert len(read_answers(out).answers) == len(answers)

    # the same answer alone, in a batch of one: the same text (its seed is its own)
    alone = generate_answers(
        TOPICS.iloc[[1]], llm(tiny, batch=1), "short-qa", 2, OPTIONS, tmp_path / "alone.jsonl"
    )
    texts = dict(zip(full["answer_id"], full["text"], strict=True))
    for answer_id, text in zip(alone["answer_id"], alone["text"], strict=True):
        assert texts[answer_id] == text


def test_resume_skips_what_exists_and_drops_a_torn_line(tiny, tmp_path):
    out = tmp_path / "answers.jsonl"
    first = generate_answers(TOPICS, llm(tiny), ["long-qa"], 2, OPTIONS, out)
    assert first.attrs["counts"]["generated"] == 6
    again = generate_answers(TOPICS, llm(tiny), ["long-qa"], 2, OPTIONS, out)
    assert again.attrs["counts"] == {
        "answers": 6, "generated": 0, "from_store": 6, "empty": first.attrs["counts"]["empty"]
    }  # fmt: skip
    assert again["text"].tolist() == first["text"].tolist()
    # one more sample per query: only the new ones are generated
    more = generate_answers(TOPICS, llm(tiny), ["long-qa"], 3, OPTIONS, out)
    assert (more.attrs["counts"]["generated"], more.attrs["counts"]["from_store"]) == (3, 6)
    # a crash mid-write leaves a torn last line: dropped, that answer generated again
    store = store_path(out)
    data = store.read_bytes()
    store.write_bytes(data[:-20])
    resumed = generate_answers(TOPICS, llm(tiny), ["long-qa"], 3, OPTIONS, out)
    assert resumed.attrs["counts"]["generated"] == 1
    assert len(store.read_bytes().splitlines()) == len(data.splitlines())
    assert all(json.loads(line) for line in store.read_bytes().splitlines())
    # other decoding options are not silently mixed into the same answers
    hotter = GenerationOptions(**{**OPTIONS.__dict__, "temperature": 1.0})
    with pytest.raises(ConfigError, match=r"store.jsonl:1: answer tiny/long-qa/q1/0 was generated"):
        generate_answers(TOPICS, llm(tiny), ["long-qa"], 3, hotter, out)


def test_cli_generate_on_the_demo_collection(tiny, tmp_path, capsys):
    indexes = tmp_path / "indexes"
    manifest = ROOT / "nrp" / "data" / "demo" / "manifest.yaml"
    assert main(["ingest", str(manifest), "--name", "demo", "--indexes", str(indexes)]) == 0
    out = tmp_path / "gen" / "answers.csv"
    argv = ["generate", "demo", "--llm", llm(tiny), "--prompts", "none,multimedqa"]
    argv += ["--samples", "1", "--out", str(out), "--max-new-tokens", "4", "--limit-queries", "2"]
    argv += ["--indexes", str(indexes), "--batch", "3"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "4 answers: 4 generated, 0 already there" in printed
    answers = read_answers(out).answers
    assert set(answers["qid"]) <= {"d1", "d2"}
    assert main(argv) == 0
    assert "4 answers: 0 generated, 4 already there" in capsys.readouterr().out
    assert main([*argv[:-2], "--prompts", "short-qa", "--out", str(tmp_path / "x.txt")]) == 2
    assert "nrp: error: --out" in capsys.readouterr().err


def test_an_executor_generates_what_the_plain_run_generates(tiny, tmp_path):
    """Through an executor (here the in-process ``LocalExecutor``, which runs the very worker
    code a Ray actor runs): partitions of whole batches of the plain run, each stored as it
    arrives; the answers equal the plain run's text for text (with partitions of whole queries
    they did not: the tiny model's flat distributions let padding flip sampled tokens), and an
    interrupted run resumes with the missing batches only."""
    from nrp.executors import LocalExecutor
    from nrp.generation import partitions as executor_generation

    plain = generate_answers(
        TOPICS, llm(tiny), "short-qa,long-qa", 2, OPTIONS, tmp_path / "p.jsonl"
    )
    executor = LocalExecutor()
    out = tmp_path / "e.jsonl"
    found = generate_answers(
        TOPICS, llm(tiny), "short-qa,long-qa", 2, OPTIONS, out, executor=executor
    )
    columns = ["answer_id", "llm", "prompt", "qid", "sample", "text", "seed", "completion_tokens"]
    pd.testing.assert_frame_equal(found[columns], plain[columns])
    assert executor.stats.task == "generate tiny"
    # 12 answers, batches of 4: 3 batches, balanced_size(3, 64, 1) = 1 batch per partition
    assert (executor.stats.partitions, executor.stats.items) == (3, 12)
    assert found.attrs["counts"]["generated"] == 12

    # a run stopped after its first partition keeps it; the re-run sends the two others
    class Stop(Exception):
        pass

    def stop_after_first(line: str) -> None:
        if "generated 4/12" in line:
            raise Stop

    out2 = tmp_path / "stopped.jsonl"
    with pytest.raises(Stop):
        generate_answers(
            TOPICS, llm(tiny), "short-qa,long-qa", 2, OPTIONS, out2, executor=LocalExecutor(),
            progress=stop_after_first,
        )  # fmt: skip
    assert len(store_path(out2).read_text().splitlines()) == 4
    resumed_executor = LocalExecutor()
    resumed = generate_answers(
        TOPICS, llm(tiny), "short-qa,long-qa", 2, OPTIONS, out2, executor=resumed_executor
    )
    assert resumed.attrs["counts"]["generated"] == 8
    assert resumed_executor.stats.partitions == 2
    pd.testing.assert_frame_equal(resumed[columns], plain[columns])
    assert executor_generation.PARTITION_ANSWERS == 256


def test_a_worker_with_another_model_file_refuses_to_generate(tiny, tmp_path):
    """A generation task carries the driver's model checksum; a worker whose model file has
    another (here: the driver's checksum is one the file does not have) refuses instead of
    writing answers that claim the driver's model."""
    from nrp.executors import LocalExecutor
    from nrp.generation.partitions import GenerationTask

    spec = parse_llm(llm(tiny))
    task = GenerationTask(spec, OPTIONS, "sha256:" + "0" * 64, "tiny", ())
    with pytest.raises(NrpError, match=r"LLM tiny: the model on this worker has checksum .* "
                       r"the driver's sha256:0000.* refusing to generate"):  # fmt: skip
        LocalExecutor().run_partitions(task, [[]])
