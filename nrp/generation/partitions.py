"""Generation on an executor: "answer these (query, prompt, sample) rows with this LLM", one
partition (whole batches of the in-process run) at a time.

``generate_with_executor`` is what ``nrp.generation.generate_answers`` calls for the answers its
resumable store does not have when it is given an executor (or one is active). Each partition's
answer records come back to the driver, which appends them to the store (the JSONL file beside
the output) the moment they arrive: the driver stays the store's single writer, a killed run
keeps every finished partition, and a re-run sends only the missing answers.

What travels: per task, the parsed LLM spec, the decoding options, the prompt strategies'
parameter records and the model checksum the driver computed; the worker builds the backend and
loads the model once (a local model; a remote endpoint needs nothing loaded, the worker just
sends the requests), and refuses to generate when its model file has another checksum (another
model on that node would make answers that claim the driver's model). Per partition: the rows
(qid, rendered prompt, strategy, sample, seed). Back: the answer records, exactly what the
in-process path writes (``GenerationTask.records``, over ``nrp.generation.records``, is the code
both run).

**Partitions are whole batches of the in-process run**, not whole queries. Every answer has its
own seed (``derive_seed``) and a local model draws each row from its own generator, but the rows
that share a forward pass still matter: padding changes the logits by float rounding, and where
two tokens' probabilities are that close (often, in a small model's flat distributions) the
order top-k/top-p sorts them in flips, and with it the sampled token. So the driver orders the
missing rows exactly as the in-process path does (``batch_order``: by prompt length) and cuts
that order into partitions of a whole number of its batches (``batch_rows``); a worker batches
its partition the same way, so every batch, and every answer, is the one a local run makes
(tested against it text for text). Generation needs no D_q, so nothing asks for whole queries.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nrp.errors import NrpError
from nrp.executors.base import Executor, balanced_size
from nrp.generation.records import AnswerRow, generate_records
from nrp.progress import Progress

if TYPE_CHECKING:
    from nrp.llm.backends import ChatBackend, GenerationOptions

#: answers per partition at most, fewer when that gives each worker about four partitions
PARTITION_ANSWERS = 256


@dataclass
class GenerationState:
    backend: ChatBackend | None

    def close(self) -> None:
        self.backend = None  # the model goes with the last reference (a GPU's memory too)


@dataclass(frozen=True)
class GenerationTask:
    """Generate answers with one LLM (module docstring): what every answer records of how it
    was made, in this process as on a worker."""

    llm: Any  # nrp.generation.generate.LlmSpec
    options: GenerationOptions
    checksum: str
    model: str
    params: tuple[tuple[str, str], ...]  # prompt label -> the answers' params record

    def key(self) -> str:
        payload = json.dumps(
            [self.llm.backend, dict(self.llm.params), self.checksum], sort_keys=True, default=str
        )
        return "generation:" + hashlib.sha256(payload.encode()).hexdigest()[:24]

    def describe(self) -> str:
        return f"generate {self.llm.label}"

    def size(self, partition: Sequence[AnswerRow]) -> int:
        return len(partition)

    def num_gpus(self, cluster_has_gpus: bool) -> float:
        from nrp.models.device import device_needs_gpu

        if self.llm.backend != "local":
            return 0.0
        return 1.0 if device_needs_gpu(self.llm.params.get("device"), cluster_has_gpus) else 0.0

    def setup(self) -> GenerationState:
        from nrp.llm.local import LocalBackend

        backend = self.llm.build()
        found = backend.checksum()
        if found != self.checksum:
            raise NrpError(
                f"LLM {self.llm.label}: the model on this worker has checksum {found}, the "
                f"driver's {self.checksum} (another model file on this node): refusing to generate"
            )
        if isinstance(backend, LocalBackend):
            backend.load()
        return GenerationState(backend)

    def records(
        self, backend: ChatBackend, rows: Sequence[AnswerRow]
    ) -> Iterator[list[dict[str, Any]]]:
        """The answer records of ``rows``, one list per batch (``generate_records``)."""
        return generate_records(
            backend, self.llm.label, rows, self.options, self.model, self.checksum,
            dict(self.params),
        )  # fmt: skip

    def run(self, state: GenerationState, partition: Sequence[AnswerRow]) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for batch in self.records(state.backend, partition):
            records.extend(batch)
        return records


def generate_with_executor(
    executor: Executor,
    task: GenerationTask,
    rows: Sequence[AnswerRow],
    batch: int,
    keep: Callable[[list[dict[str, Any]]], None],
    progress: Progress | None = None,
) -> None:
    """Answer ``rows`` (in ``batch_order``) with ``task`` on ``executor`` in partitions of whole
    batches of ``batch`` rows (module docstring); ``keep(records)`` runs on the driver as each
    partition arrives."""
    rows = list(rows)
    batches = balanced_size(
        math.ceil(len(rows) / batch), max(1, PARTITION_ANSWERS // batch), executor.parallelism()
    )
    size = batches * batch
    partitions = [rows[start : start + size] for start in range(0, len(rows), size)]
    done = [0]

    def store(index: int, records: list[dict[str, Any]]) -> None:
        keep(records)
        done[0] += len(records)
        if progress is not None:
            progress(
                f"{task.llm.label}: generated {done[0]}/{len(rows)} answers ({executor.describe()})"
            )

    executor.run_partitions(task, partitions, on_result=store, progress=progress)
