"""The chat backend interface every LLM user in nrp calls (the judge, answer generation).

``ChatBackend.complete(prompts, ...) -> list[list[Completion]]``: for each prompt (a string, taken
as one user message, or a list of ``{"role", "content"}`` chat messages) ``n`` completions;
``ChatBackend.choice_logprobs(prompts, choices, prefix)``: the log-probability of each fixed
reply (forced choice; local models only). Two
implementations: ``nrp.llm.local.LocalBackend`` (a transformers model in this process) and
``nrp.llm.openai_compat.OpenAIBackend`` (any OpenAI-compatible ``/v1/chat/completions``
server, nrp's own ``nrp.llm.server`` included). ``nrp.llm.factory.make_backend(kind, ...)``
builds either (this module knows neither, so both can import it).

Design choices, and why:

- **Seeds per sample, not per call.** Sample ``j`` of every prompt is generated with seed
  ``sample_seed(seed, j) = seed + j``, on its own random stream. A prompt's completions then
  depend on (prompt, seed, j) only, not on which other prompts share its batch, how the batch
  was sorted, or whether it went over HTTP: the per-item evaluation cache is only sound when an
  item's result does not depend on its neighbours. The OpenAI backend sends one request per
  sample with ``seed + j`` (``n=1``) for the same reason, so local and remote runs of one model
  agree sample by sample.
- **Greedy when temperature is 0** (the default): ``top_k``/``top_p``/``seed`` are then unused
  and the ``n`` samples are equal (the local backend computes them once).
- **Log-probabilities are the model's own distribution** (log-softmax of the raw logits, at
  temperature 1, before repetition penalty or sampling filters), as OpenAI's ``logprobs``:
  they say what the model believes, whatever decoding picked the token. ``TokenLogprob.top``
  holds the ``top_logprobs`` most likely alternatives at each position (the G-Eval weighting in
  ``nrp.llm.parsing`` sums the probabilities of the score tokens there).
- **Token strings** are pieces of the decoded text: concatenated, they give ``text`` (up to
  rare bytes of a split multi-byte character), so a character offset found by a parser maps
  to a token position (``Completion.token_at``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from nrp.errors import ConfigError, NrpError
from nrp.settings import settings_with

#: a prompt: a string (one user message) or chat messages ``[{"role": ..., "content": ...}]``
Prompt = str | Sequence[Mapping[str, str]]
Messages = list[dict[str, str]]

ROLES = ("system", "user", "assistant")
#: the most alternatives per position OpenAI's API returns; the local backend allows the same
MAX_TOP_LOGPROBS = 20


def sample_seed(seed: int, sample: int) -> int:
    """The seed of sample ``sample`` (0-based) of a call made with ``seed``."""
    return int(seed) + int(sample)


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, its log-probability, and the most likely alternatives at
    its position as (token text, log-probability), most likely first (empty unless
    ``top_logprobs`` was asked for)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    """One generated completion.

    ``finish_reason``: "stop" (the model ended its turn) or "length" (``max_new_tokens``
    reached), or what a remote server said. ``tokens``: the generated tokens' texts (without the
    end-of-turn token). ``logprobs``: one ``TokenLogprob`` per token when asked for and
    available (a remote server may not return them), else None. ``seed``: the seed this sample
    was generated with. ``token_ids``: the generated token ids (local models only; empty for a
    remote one)."""

    text: str
    finish_reason: str
    tokens: tuple[str, ...] = ()
    logprobs: tuple[TokenLogprob, ...] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seed: int | None = None
    token_ids: tuple[int, ...] = ()

    @property
    def token_logprobs(self) -> tuple[float, ...] | None:
        """The log-probability of each generated token (None when not available)."""
        if self.logprobs is None:
            return None
        return tuple(t.logprob for t in self.logprobs)

    @property
    def token_text(self) -> str:
        """The tokens' texts joined (equal to ``text`` but for rare split characters)."""
        if self.logprobs is not None:
            return "".join(t.token for t in self.logprobs)
        return "".join(self.tokens)

    def token_at(self, offset: int) -> int | None:
        """Index of the token covering character ``offset`` of ``token_text`` (None when the
        offset is outside it or there are no tokens)."""
        pieces = [t.token for t in self.logprobs] if self.logprobs is not None else self.tokens
        position = 0
        for index, piece in enumerate(pieces):
            if position <= offset < position + len(piece):
                return index
            position += len(piece)
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (what the judge keeps as raw output)."""
        return {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class GenerationOptions:
    """Decoding options of one ``complete`` call (checked by ``check``)."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int = 0
    n: int = 1
    logprobs: bool = False
    top_logprobs: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0

    def normalised(self) -> GenerationOptions:
        """The options with their declared types (a YAML or JSON number may be either), and
        ``logprobs`` on when ``top_logprobs`` asks for alternatives."""
        return GenerationOptions(
            max_new_tokens=int(self.max_new_tokens),
            temperature=float(self.temperature),
            top_k=int(self.top_k),
            top_p=float(self.top_p),
            repetition_penalty=float(self.repetition_penalty),
            seed=int(self.seed),
            n=int(self.n),
            logprobs=bool(self.logprobs) or int(self.top_logprobs) > 0,
            top_logprobs=int(self.top_logprobs),
        )

    def check(self) -> GenerationOptions:
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0 (0: off), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.repetition_penalty <= 0:
            raise ConfigError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.n < 1:
            raise ConfigError(f"n (samples per prompt) must be at least 1, got {self.n}")
        if not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise ConfigError(
                f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}, got {self.top_logprobs}"
            )
        return self


def to_messages(prompt: Prompt) -> Messages:
    """A prompt as chat messages (a string is one user message); roles and contents checked."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages: Messages = []
    for index, message in enumerate(prompt):
        if not isinstance(message, Mapping):
            raise ConfigError(f"chat message {index} is not a mapping with role and content")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ConfigError(f"chat message {index} has role {role!r} (use one of {ROLES})")
        if not isinstance(content, str):
            raise ConfigError(f"chat message {index} has no text content")
        messages.append({"role": str(role), "content": content})
    if not messages:
        raise ConfigError("a prompt needs at least one chat message")
    return messages


class ChatBackend:
    """Base class: ``complete`` checks its arguments and calls ``_complete``."""

    kind: ClassVar[str] = "backend"

    @property
    def model_name(self) -> str:
        """The model as the user named it (for messages and specs)."""
        raise NotImplementedError

    def checksum(self) -> str:
        """What identifies the model's weights in cache keys (a file checksum for local models,
        the model name for remote ones)."""
        raise NotImplementedError

    def complete(
        self, prompts: Sequence[Prompt], options: GenerationOptions | None = None, **overrides: Any
    ) -> list[list[Completion]]:
        """For each prompt, ``n`` completions (sample ``j`` seeded with ``seed + j``); the outer
        list follows ``prompts``. ``options`` and ``overrides`` (its fields: ``max_new_tokens``,
        ``temperature``, ``top_k``, ``top_p``, ``repetition_penalty``, ``seed``, ``n``,
        ``logprobs``, ``top_logprobs``) are the decoding; ``top_logprobs > 0`` implies
        ``logprobs``."""
        if isinstance(prompts, str | Mapping):
            raise ConfigError("complete() takes a list of prompts (wrap a single prompt in [...])")
        options = settings_with(GenerationOptions, options, overrides).normalised().check()
        messages = [to_messages(p) for p in prompts]
        if not messages:
            return []
        return self._complete(messages, options)

    def _complete(
        self, messages: list[Messages], options: GenerationOptions
    ) -> list[list[Completion]]:
        raise NotImplementedError

    def choice_logprobs(
        self, prompts: Sequence[Prompt], choices: Sequence[str], prefix: str = ""
    ) -> list[dict[str, float]]:
        """For each prompt, the log-probability of each choice as the assistant's reply after
        ``prefix`` (``"Label: "`` + ``"TRUE"``): the sum of the choice's tokens'
        log-probabilities given the prompt, the prefix and the choice's earlier tokens. Forced
        choice: the model's preference among fixed answers even when it would not write any of
        them. Only backends that can score given text implement it (local models; an
        OpenAI-compatible chat API returns log-probabilities of generated tokens only)."""
        raise NrpError(
            f"the {self.kind} backend cannot score fixed answers (forced choice needs a local "
            "model: backend=local)"
        )

    def close(self) -> None:
        """Release connections (models stay loaded in the per-process cache)."""

    def __enter__(self) -> ChatBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
