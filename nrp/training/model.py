"""The model under training: a sequence-classification checkpoint with one output (the score the
``cross`` ranker reads), split into a frozen bottom and a trained top.

Why the split: on 2 CPU cores a training step of all six MiniLM layers costs about four forward
passes, and cross-fitting trains k + 1 models on the same pairs. With ``train_layers=N`` the
embeddings and all but the top N layers stay as the base model has them; their output for each
(query, document) pair is the same for every fold model and every epoch, so it is computed once
(``Features``) and each step runs only the top N layers, the pooler and the head, forward and
back. ``train_layers=0`` trains everything from the token ids (full fine-tuning).

The bottom's output is fed to the top by running the model itself with its embedding module
replaced by one that returns the stored states and its layer list cut to the top: the pooler,
head and attention masks are the model's own. The split needs a BERT-style encoder
(``base_model.embeddings`` and ``base_model.encoder.layer``; BERT, MiniLM, RoBERTa, XLM-R,
ELECTRA without an embedding projection, MPNet); ``Features.check`` compares both paths on the
first pairs and refuses a model where they differ.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nrp import lazy_libs
from nrp.errors import ConfigError
from nrp.models.device import length_sorted_batches
from nrp.models.folders import resolve_model
from nrp.rankers.cross import encode_pairs, input_limit, pad_pairs

if TYPE_CHECKING:
    import pandas as pd

#: the two paths of ``Features.check`` may differ by float rounding only
CHECK_TOLERANCE = 1e-4
#: pairs per forward pass in training on a CPU (``Features.scores``)
SUB_BATCH = 4


def resolve_base(base: str) -> Path:
    """The base checkpoint's folder (``minilm``: the packaged all-MiniLM-L6-v2)."""
    path = Path(resolve_model(base))
    if not path.is_dir():
        raise ConfigError(f"base model folder {base} does not exist (give a local checkpoint)")
    if not (path / "config.json").is_file():
        raise ConfigError(f"base model folder {path} has no config.json (not a checkpoint)")
    return path


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """transformers' load-time notices ("newly initialized: classifier") off: the new head is
    what training is for."""
    hf_logging = lazy_libs.module("transformers.utils.logging")

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def load_tokenizer(base: Path) -> Any:
    AutoTokenizer = lazy_libs.transformers().AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(base))
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"base model {base}: no usable tokenizer ({_first_line(error)})"
        ) from None


def load_model(base: Path, seed: int, device: str) -> Any:
    """The base checkpoint with a one-output head, on ``device``. A head the base lacks (or
    with another number of labels) is new, drawn after ``torch.manual_seed(seed)``."""
    torch = lazy_libs.torch()
    AutoModelForSequenceClassification = lazy_libs.transformers().AutoModelForSequenceClassification

    torch.manual_seed(seed)
    try:
        with _quiet():
            model = AutoModelForSequenceClassification.from_pretrained(
                str(base), num_labels=1, ignore_mismatched_sizes=True
            )
    except (OSError, ValueError) as error:
        raise ConfigError(f"base model {base}: cannot load it ({_first_line(error)})") from None
    return model.to(device)


def _first_line(error: Exception) -> str:
    """transformers' errors run over several lines; ours are one."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def encoder_layers(model: Any) -> Any:
    """The model's transformer layers (a ModuleList), or None when it has no BERT-style
    ``embeddings`` + ``encoder.layer``."""
    torch = lazy_libs.torch()

    base = model.base_model
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if not hasattr(base, "embeddings") or not isinstance(layers, torch.nn.ModuleList):
        return None
    return layers


def frozen_layers(model: Any, train_layers: int) -> int:
    """How many bottom layers stay frozen (0: full fine-tuning, nothing cached)."""
    if train_layers == 0:
        return 0
    layers = encoder_layers(model)
    if layers is None:
        raise ConfigError(
            f"train_layers={train_layers} needs a BERT-style encoder (embeddings and "
            f"encoder.layer); {type(model).__name__} is not: use train_layers=0"
        )
    if train_layers > len(layers):
        raise ConfigError(
            f"train_layers={train_layers} is more than the model's {len(layers)} layers (0 trains "
            "them all, and the embeddings)"
        )
    return len(layers) - train_layers


def freeze(model: Any, frozen: int) -> list[Any]:
    """Freeze the embeddings and the bottom ``frozen`` layers; the parameters left to train."""
    if frozen:
        base = model.base_model
        for module in [base.embeddings, *list(base.encoder.layer)[:frozen]]:
            for parameter in module.parameters():
                parameter.requires_grad_(False)
    return [p for p in model.parameters() if p.requires_grad]


def _returning(states: Any) -> Any:
    """A module that stands in for the embeddings: it returns ``states`` whatever it is given."""
    torch = lazy_libs.torch()

    class GivenStates(torch.nn.Module):
        def __init__(self, held: Any):
            super().__init__()
            self.held = held

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self.held

    return GivenStates(states)


@contextlib.contextmanager
def _swapped(model: Any, layers: slice, states: Any = None) -> Iterator[None]:
    """The model with only ``layers`` of its encoder (and, given ``states``, an embedding module
    that returns them), restored on exit."""
    torch = lazy_libs.torch()

    base = model.base_model
    encoder, embeddings = base.encoder, base.embeddings
    full = encoder.layer
    encoder.layer = torch.nn.ModuleList(list(full)[layers])
    if states is not None:
        base.embeddings = _returning(states)
    try:
        yield
    finally:
        encoder.layer = full
        base.embeddings = embeddings


def full_scores(model: Any, rows: Sequence[dict], pad_id: int | None) -> Any:
    """One score per pair encoding, through the whole model."""
    inputs = pad_pairs(rows, pad_id, model.device)
    return model(**inputs).logits[:, 0]


def top_output(model: Any, states: Sequence[Any], frozen: int) -> tuple[Any, Any]:
    """The model's output for inputs whose bottom ``frozen`` layers' states are ``states``
    (one tensor per input, its own length), run through the top layers only; and the attention
    mask of the padded batch. Cross-encoders read the logits, bi-encoders pool the states."""
    torch = lazy_libs.torch()

    width = max(len(s) for s in states)
    hidden = torch.zeros((len(states), width, states[0].shape[-1]), dtype=states[0].dtype)
    mask = torch.zeros((len(states), width), dtype=torch.long)
    for i, s in enumerate(states):
        hidden[i, : len(s)] = s
        mask[i, : len(s)] = 1
    device = model.device
    mask = mask.to(device)
    with _swapped(model, slice(frozen, None), hidden.to(device)):
        return model(input_ids=torch.zeros_like(mask), attention_mask=mask), mask


def top_scores(model: Any, states: Sequence[Any], frozen: int) -> Any:
    """One score per pair from its stored bottom states, through the top layers and head."""
    return top_output(model, states, frozen)[0].logits[:, 0]


def in_length_order(lengths: Sequence[int], size: int, run: Callable[[Any], Any]) -> Any:
    """``run`` over sub-batches of at most ``size`` items of similar length (positions into
    ``lengths``), its outputs put back in the items' order: one tensor row per item."""
    torch = lazy_libs.torch()

    parts = length_sorted_batches(lengths, size)
    outputs = [run(part) for part in parts]
    order = torch.as_tensor(np.concatenate(parts), device=outputs[0].device)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order), device=order.device)
    return torch.cat(outputs)[inverse]


class Features:
    """What each training step reads for a pair: its encoding (full fine-tuning) or its bottom
    states, computed once for every pair that will train (``frozen`` > 0).

    ``scores(model, indices)`` runs the trained part on those pairs, with gradients."""

    def __init__(self, rows: Sequence[dict], pad_id: int | None, frozen: int):
        self.rows, self.pad_id, self.frozen = list(rows), pad_id, frozen
        self.states: dict[int, Any] = {}

    def compute(self, model: Any, indices: Sequence[int], batch: int) -> None:
        """The bottom states of the pairs ``indices`` (length-sorted batches, no dropout)."""
        torch = lazy_libs.torch()

        if not self.frozen:
            return
        wanted = [i for i in sorted(set(indices)) if i not in self.states]
        lengths = [len(self.rows[i]["input_ids"]) for i in wanted]
        model.eval()
        with torch.inference_mode(), _swapped(model, slice(0, self.frozen)):
            for part in length_sorted_batches(lengths, batch):
                chosen = [wanted[j] for j in part]
                inputs = pad_pairs([self.rows[i] for i in chosen], self.pad_id, model.device)
                out = model.base_model(**inputs, output_hidden_states=True).hidden_states[-1]
                for k, i in enumerate(chosen):
                    n = len(self.rows[i]["input_ids"])
                    self.states[i] = out[k, :n].detach().to("cpu", torch.float32).clone()

    def check(self, model: Any, indices: Sequence[int]) -> None:
        """Refuse a model whose top, fed the stored states, does not give the whole model's
        scores (an architecture the split does not fit)."""
        torch = lazy_libs.torch()

        if not self.frozen or not indices:
            return
        model.eval()
        with torch.inference_mode():
            whole = full_scores(model, [self.rows[i] for i in indices], self.pad_id).float()
            split = top_scores(model, [self.states[i] for i in indices], self.frozen).float()
        gap = float((whole - split).abs().max())
        if not np.isfinite(gap) or gap > CHECK_TOLERANCE * max(1.0, float(whole.abs().max())):
            raise ConfigError(
                f"{type(model).__name__}: its top layers fed stored states give other scores "
                f"than the whole model (difference {gap:.3g}); use train_layers=0"
            )

    def scores(self, model: Any, indices: Sequence[int]) -> Any:
        """Scores of the pairs ``indices``, in that order, with gradients where enabled. The
        pairs run in sub-batches of similar length (``sub_batch``): a step holds one query's
        documents in random order, and padding them all to the longest would spend a third of
        the work on padding."""
        lengths = [len(self.rows[i]["input_ids"]) for i in indices]
        return in_length_order(
            lengths,
            self.sub_batch(model),
            lambda part: self._scores(model, [indices[j] for j in part]),
        )

    @staticmethod
    def sub_batch(model: Any) -> int:
        """Pairs per forward pass: few on a CPU, where padding costs its full share, all of a
        step on a GPU, where it is nearly free."""
        return SUB_BATCH if str(model.device).startswith("cpu") else 1 << 20

    def _scores(self, model: Any, indices: Sequence[int]) -> Any:
        if self.frozen:
            return top_scores(model, [self.states[i] for i in indices], self.frozen)
        return full_scores(model, [self.rows[i] for i in indices], self.pad_id)


class CrossTraining:
    """``nrp train --ranker cross``: the base with a new one-output head reads ``[CLS] query
    [SEP] text [SEP]`` (``encode_pairs``, as the ``cross`` ranker encodes); each checkpoint is a
    sequence-classification folder with its tokenizer.

    ``fresh(seed)``: a new model to train (the base, head drawn after the seed);
    ``features(examples, max_length, train_layers)``: (features, pairs cut, input limit);
    ``check(features, indices)``: the split path gives the whole model's scores;
    ``save(folder)``: the model last made fresh, as trained. ``fresh`` comes first."""

    ranker = "cross"
    label = "cross-encoder"
    score = "one logit of a new head on [CLS] query [SEP] text [SEP]"

    def __init__(self, base: Path, device: str):
        self.base, self.device = base, device
        self.tokenizer = load_tokenizer(base)
        self.model: Any = None

    def fresh(self, seed: int) -> Any:
        self.model = load_model(self.base, seed, self.device)
        return self.model

    def features(
        self, examples: pd.DataFrame, max_length: int, train_layers: int
    ) -> tuple[Features, int, int]:
        model = self.model
        # max_length is at most what the model reads (a small base reads less)
        limit = input_limit(self.tokenizer, model.config, 0, "nrp train")
        max_input = min(max_length, limit)
        rows, cut = encode_pairs(
            self.tokenizer, examples["query"].tolist(), examples["text"].tolist(), max_input
        )
        self.tokenizer.model_max_length = max_input  # the saved models read what they learnt
        frozen = frozen_layers(model, train_layers)
        return Features(rows, self.tokenizer.pad_token_id, frozen), int(cut.sum()), max_input

    def check(self, features: Features, indices: Sequence[int]) -> None:
        features.check(self.model, indices)

    def save(self, folder: Path) -> None:
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
