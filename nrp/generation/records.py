"""One batch of answers, made the same way wherever it runs: what ``generate_answers`` runs in
this process and what an executor's workers (``nrp.generation.partitions``) run, so the two
paths cannot drift apart (an answer made on a worker is the answer a local run makes).

``AnswerRow`` is one (query, prompt strategy, sample) to answer, with its seed and rendered
prompt; ``batch_order`` and ``batch_rows`` say how rows are cut into batches;
``generate_records`` turns rows into the answer records the store and the output hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from nrp.errors import NrpError
from nrp.generation.prompts import PromptStrategy
from nrp.llm.backends import ChatBackend, Completion, GenerationOptions

if TYPE_CHECKING:
    from nrp.llm.local import LocalBackend


@dataclass(frozen=True)
class AnswerRow:
    """One answer to generate: query ``qid`` under ``strategy``, sample ``sample``, drawn with
    ``seed``; ``text`` is the rendered prompt."""

    qid: str
    query: str
    strategy: PromptStrategy
    sample: int
    seed: int
    text: str

    def answer_id(self, llm: str) -> str:
        return f"{llm}/{self.strategy.label}/{self.qid}/{self.sample}"


def strip_echo(text: str, prompt: str) -> str:
    """``text`` without a leading copy of ``prompt`` (compared with whitespace collapsed), and
    without the whitespace the model put before its answer."""
    stripped = text.lstrip()
    target = " ".join(prompt.split())
    if target:
        # walk text and prompt together, skipping whitespace runs on both sides
        i = j = 0
        while i < len(stripped) and j < len(target):
            if stripped[i].isspace() and target[j] == " ":
                while i < len(stripped) and stripped[i].isspace():
                    i += 1
                j += 1
            elif stripped[i] == target[j]:
                i += 1
                j += 1
            else:
                break
        if j == len(target):
            stripped = stripped[i:]
    return stripped.strip()


def _local_rows(
    backend: LocalBackend, rows: list[AnswerRow], options: GenerationOptions
) -> list[Completion]:
    """One batch of a local model: completion-mode prompts tokenised as plain text, chat-mode
    ones through the chat template (``LocalBackend.encode``); one seed per row. Uses the
    backend's batched ``_generate`` (per-row seeded sampling) directly, since ``complete``
    takes one seed per call."""
    loaded = backend.load()
    encoded = []
    for row in rows:
        if row.strategy.chat:
            ids = backend.encode([{"role": "user", "content": row.text}])
        else:
            ids = [int(i) for i in loaded.tokenizer(row.text)["input_ids"]]
        if loaded.max_positions and len(ids) + options.max_new_tokens > loaded.max_positions:
            raise NrpError(
                f"prompt of {row.qid} ({row.strategy.label}) has {len(ids)} tokens; with "
                f"max_new_tokens={options.max_new_tokens} it exceeds {backend.model_name}'s "
                f"{loaded.max_positions} positions"
            )
        encoded.append(ids)
    return backend._generate(loaded, encoded, [t.seed for t in rows], options)


def _remote_rows(
    backend: ChatBackend, rows: list[AnswerRow], options: GenerationOptions
) -> list[Completion]:
    """One request per answer, with its own seed (chat messages: the only form a chat
    endpoint takes)."""

    def one(row: AnswerRow) -> Completion:
        return backend.complete([row.text], replace(options, seed=row.seed, n=1))[0][0]

    workers = max(1, int(getattr(backend, "concurrency", 4)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, rows))


def batch_order(rows: Sequence[AnswerRow], is_local: bool) -> list[AnswerRow]:
    """The order rows are batched in: a local model's by prompt length, longest first (stable,
    so equal lengths keep their order); a remote endpoint's as given."""
    return sorted(rows, key=lambda t: -len(t.text)) if is_local else list(rows)


def batch_rows(backend: ChatBackend) -> int:
    """Rows per batch: a local model's ``batch_size``, a remote endpoint's ``concurrency``."""
    from nrp.llm.local import LocalBackend

    if isinstance(backend, LocalBackend):
        return backend.batch_size
    return max(1, int(getattr(backend, "concurrency", 4)))


def generate_records(
    backend: ChatBackend,
    label: str,
    rows: Sequence[AnswerRow],
    options: GenerationOptions,
    model: str,
    checksum: str,
    params: Mapping[str, str],
) -> Iterator[list[dict[str, Any]]]:
    """The answer records of ``rows``, one list per batch: a local model's batches of
    ``batch_size`` rows (sorted by prompt length, so similar lengths share a batch), a remote
    endpoint's ``concurrency`` requests at a time (module docstring)."""
    from nrp.llm.local import LocalBackend

    is_local = isinstance(backend, LocalBackend)
    todo = batch_order(rows, is_local)
    batch = batch_rows(backend)
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        if is_local:
            completions = _local_rows(backend, chunk, options)
        else:
            completions = _remote_rows(backend, chunk, options)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        yield [
            {
                "answer_id": row.answer_id(label),
                "llm": label,
                "prompt": row.strategy.label,
                "qid": row.qid,
                "sample": row.sample,
                "text": strip_echo(completion.text, row.text),
                "model": model,
                "checksum": checksum,
                "params": params[row.strategy.label],
                "seed": row.seed,
                "created_at": now,
                "prompt_tokens": int(completion.prompt_tokens),
                "completion_tokens": int(completion.completion_tokens),
                "finish_reason": completion.finish_reason,
            }
            for row, completion in zip(chunk, completions, strict=True)
        ]
