"""A tiny random chat LM built on the fly for the LLM tests (no model hub here or in CI).

``build_tiny_llama(folder)`` trains a byte-level BPE tokenizer (a few hundred tokens, digits
and the judge's label words among them) on ``CORPUS``, gives it ChatML special tokens and a
ChatML chat template (as SmolLM2 has), and saves a random 2-layer Llama with it, so the folder
is a complete checkpoint that ``AutoModelForCausalLM`` / ``AutoTokenizer`` load offline. Its
output is meaningless but deterministic; tests compare nrp's numbers with numbers computed
directly from the same model. ``start_server`` runs ``python -m nrp.llm.server`` on loopback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "Score: 1 2 3 4 5. Rating: 4 out of 5. [RESULT] 3",
    "Label: TRUE Confidence: 0.9. Label: FALSE Confidence: 0.25. Label: NOT GIVEN",
    "GIVEN or NOT GIVEN? TRUE or FALSE? Step: the answer agrees with the expected answer.",
    "Question: what is diabetes? Answer: a disease of blood sugar. Expected answer: yes.",
    "You evaluate answers to questions. Reply with the score only, a single digit.",
    "Feedback: the response is relevant and correct, readable and clear.",
    "the quick brown fox jumps over the lazy dog while the cat sleeps in the sun",
    "4 GIVEN TRUE Confidence 0.8 [RESULT] 3 3 NOT GIVEN FALSE Confidence 0.8 [RESULT] 5",
    "Label: TRUE Label: FALSE Decision: GIVEN Decision: NOT GIVEN",
]


def build_tiny_llama(folder: str | Path, seed: int = 0, vocab_size: int = 400) -> Path:
    """Tokenizer and random LlamaForCausalLM (hidden size 32, 2 layers) saved in ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(CORPUS * 5, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHATML_TEMPLATE,
    )
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


#: what the scripted model says, greedily, to any chat prompt
SCRIPTED_REPLY = "4 GIVEN TRUE Confidence 0.8 [RESULT] 3"
#: next-token logits of the scripted model: after the token (text) on the left, these tokens
#: get these logits and every other token -30 (probability ~1e-13); "\n" is the last token of
#: every chat prompt (the template ends with "<|im_start|>assistant\n"); a token not listed is
#: followed by <|im_end|>. Hand-computable: after "\n" the score tokens 4, 3, 5 have logits
#: 2, 1, 0 (G-Eval: (4e^2 + 3e + 5) / (e^2 + e + 1)); after " GIVEN", " TRUE" and " FALSE" have
#: 1.5 and 0.5 (p(TRUE) = 1 / (1 + e^-1)); after the score, " GIVEN" and " NOT" have 2 and 0.
#: ":" is not in the reply: it is the end of the forced-choice prefixes "Label: " and
#: "Decision: ", after which " TRUE" 1, " FALSE" 0, " GIVEN" 1 and " NOT" 0 (then " GIVEN").
SCRIPT: dict[str, dict[str, float]] = {
    "\n": {"4": 2.0, "3": 1.0, "5": 0.0},
    "4": {" GIVEN": 2.0, " NOT": 0.0},
    "3": {" GIVEN": 2.0, " NOT": 0.0},
    "5": {" GIVEN": 2.0, " NOT": 0.0},
    " NOT": {" GIVEN": 0.0},
    " GIVEN": {" TRUE": 1.5, " FALSE": 0.5},
    " TRUE": {" Confidence": 0.0},
    " FALSE": {" Confidence": 0.0},
    " Confidence": {" 0": 0.0},
    ":": {" TRUE": 1.0, " FALSE": 0.0, " GIVEN": 1.0, " NOT": 0.0},
    " 0": {".": 0.0},
    ".": {"8": 0.0},
    "8": {" [": 0.0},
    " [": {"RESULT": 0.0},
    "RESULT": {"]": 0.0},
    "]": {" 3": 0.0},
}
OFF_SCRIPT_LOGIT = -30.0


def build_scripted_llama(folder: str | Path, script: dict[str, dict[str, float]] = SCRIPT) -> Path:
    """A real LlamaForCausalLM whose weights encode a bigram table: the next-token logits
    depend on the current token only, as ``script`` says (see ``SCRIPT``).

    How: attention and MLP outputs are zero (o_proj, down_proj), so the last hidden state is
    the current token's embedding; each scripted token embeds as its own unit vector (all
    other tokens share one), the final RMSNorm scales a unit vector by s = (1/H + eps)^-1/2,
    and the LM head's column for that vector holds the script's logits / s."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder = Path(folder)
    build_tiny_llama(folder, vocab_size=600)
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def token_id(text: str) -> int:
        if text in SPECIAL_TOKENS:
            return tokenizer.convert_tokens_to_ids(text)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            raise RuntimeError(f"scripted token {text!r} is {len(ids)} tokens: {ids}")
        return ids[0]

    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    last = tokenizer(prompt, add_special_tokens=False)["input_ids"][-1]
    if last != token_id("\n"):
        raise RuntimeError("the chat prompt does not end with the newline token")
    end = token_id("<|im_end|>")
    states = list(script)
    hidden = 8 * ((len(states) + 1 + 7) // 8)  # a slot per scripted token, one shared; even heads
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        eos_token_id=end,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    scale = (1.0 / hidden + config.rms_norm_eps) ** -0.5
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        embedding = model.model.embed_tokens.weight
        embedding.zero_()
        embedding[:, hidden - 1] = 1.0  # the shared slot of unscripted tokens
        head = model.lm_head.weight
        head.fill_(OFF_SCRIPT_LOGIT / scale)
        head[end, hidden - 1] = 0.0  # unscripted tokens end the turn
        for slot, state in enumerate(states):
            row = token_id(state)
            embedding[row].zero_()
            embedding[row, slot] = 1.0
            for target, logit in script[state].items():
                head[token_id(target), slot] = logit / scale
        unlisted = {t for targets in script.values() for t in targets} - set(states)
        for target in unlisted:  # tokens only reached: end the turn after them
            if target != "<|im_end|>":
                embedding[token_id(target)].zero_()
                embedding[token_id(target), hidden - 1] = 1.0
    model.save_pretrained(folder)
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(
    model: str | Path, log: Path, *args: str, timeout: float = 240.0
) -> tuple[subprocess.Popen, str]:
    """``python -m nrp.llm.server --model MODEL --port FREE ARGS`` in a subprocess, waited for
    until ``/health`` answers; returns the process and its base URL (``http://127.0.0.1:P/v1``).
    The caller terminates the process (``stop_server``)."""
    import httpx

    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = [sys.executable, "-m", "nrp.llm.server", "--model", str(model)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu", *args]
    handle = open(log, "w")  # noqa: SIM115 - kept open for the server's lifetime
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            handle.close()
            raise RuntimeError(f"server exited with {process.returncode}: {log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                return process, f"http://127.0.0.1:{port}/v1"
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    stop_server(process)
    raise RuntimeError(f"server did not answer within {timeout} s: {log.read_text()}")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
