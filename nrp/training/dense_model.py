"""The bi-encoder under training (``nrp train --ranker dense``): a sentence-transformers model
(a transformer and mean pooling, as all-MiniLM-L6-v2 and all-mpnet-base-v2 are) fine-tuned so
that the cosine of query and document embeddings orders a query's documents by grade.

Why beside the cross-encoder: a cross-encoder trained from a bi-encoder's weights starts with a
new head and no cross-attention training, and a hundred or so training questions do not teach it
what the bi-encoder learnt from a billion pairs. Fine-tuning the bi-encoder itself starts from the
``dense`` ranker's own scores (before the first step the model *is* ``dense:model=BASE``) and
moves them only as far as the collection's judgments pull; the saved checkpoints are ordinary
sentence-transformers folders the ``dense`` ranker reads.

The score a step trains is ``SCALE`` x cosine(query, document): the RankNet loss
(``nrp.training.loss``) compares score differences, and cosines differ by hundredths, so
unscaled they would give nearly flat gradients (20 is sentence-transformers' scale for
in-batch-negative losses on cosines).

Queries and documents are embedded apart, so the frozen bottom's states (``train_layers=N``) are
stored per distinct query text and per distinct document text, not per pair: a query's states
are computed once for all its documents. ``DenseFeatures.check`` compares the split path with the
whole sentence-transformers model on the first texts and refuses a model whose pipeline is not
transformer + mean pooling (+ normalisation).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.errors import ConfigError
from nrp.models.device import length_sorted_batches
from nrp.training.model import (
    CHECK_TOLERANCE,
    SUB_BATCH,
    _first_line,
    _quiet,
    _swapped,
    frozen_layers,
    in_length_order,
    pad_pairs,
    top_output,
)

#: scores trained are SCALE x cosine (module docstring)
SCALE = 20.0


def load_sentence_model(base: Path, seed: int, device: str) -> Any:
    """The base as a sentence-transformers model on ``device`` (a plain transformers folder gets
    mean pooling, as sentence-transformers gives it)."""
    torch = lazy_libs.torch()
    SentenceTransformer = lazy_libs.sentence_transformers().SentenceTransformer

    torch.manual_seed(seed)
    try:
        with _quiet():
            return SentenceTransformer(str(base), device=device)
    except (OSError, ValueError) as error:
        raise ConfigError(f"base model {base}: cannot load it ({_first_line(error)})") from None


def transformer_of(model: Any) -> Any:
    """The transformers model inside a sentence-transformers model (its first module)."""
    first = model[0]
    inner = getattr(first, "auto_model", None) or getattr(first, "model", None)
    if inner is None:
        raise ConfigError(
            f"dense training needs a sentence-transformers model whose first module is a "
            f"transformer; {type(first).__name__} is not"
        )
    return inner


def tokenize(tokenizer: Any, texts: Sequence[str], max_input: int) -> tuple[list[list[int]], int]:
    """Token ids of each text cut at ``max_input`` (sentence-transformers' truncation), and how
    many texts were cut."""
    full = tokenizer(list(texts), truncation=False, verbose=False)["input_ids"]
    cut = sum(len(ids) > max_input for ids in full)
    if not cut:
        return list(full), 0
    short = tokenizer(list(texts), truncation=True, max_length=max_input)["input_ids"]
    return list(short), cut


def mean_pooled(states: Any, mask: Any) -> Any:
    """Unit-length mean of the token states under the mask (sentence-transformers' mean pooling
    and normalisation)."""
    torch = lazy_libs.torch()

    weights = mask.unsqueeze(-1).to(states.dtype)
    summed = (states * weights).sum(dim=1)
    pooled = summed / weights.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


class DenseFeatures:
    """What each step reads for a pair (``Features``' interface, for a bi-encoder): the token ids
    of each distinct query and document text, or (``frozen`` > 0) their bottom states, computed
    once. ``scores(model, indices)``: ``SCALE`` x cosine of each pair, with gradients where
    enabled. ``model`` is the transformer inside the sentence-transformers model."""

    def __init__(
        self,
        query_ids: Sequence[list[int]],
        text_ids: Sequence[list[int]],
        pair_query: np.ndarray,
        pair_text: np.ndarray,
        pad_id: int | None,
        frozen: int,
    ):
        # one list of texts: queries first, then documents; a pair names one of each
        self.ids = [*query_ids, *text_ids]
        self.pair_query = np.asarray(pair_query, dtype=np.int64)
        self.pair_text = np.asarray(pair_text, dtype=np.int64) + len(query_ids)
        self.pad_id, self.frozen = pad_id, frozen
        self.states: dict[int, Any] = {}

    def texts_of(self, indices: Sequence[int]) -> list[int]:
        """The distinct texts (queries and documents) of the pairs ``indices``."""
        at = np.asarray(indices, dtype=np.int64)
        return sorted({*self.pair_query[at].tolist(), *self.pair_text[at].tolist()})

    def _inputs(self, texts: Sequence[int], device: Any) -> tuple[Any, Any]:
        """Token ids and attention mask of ``texts``, right-padded (``pad_pairs``)."""
        inputs = pad_pairs([{"input_ids": self.ids[t]} for t in texts], self.pad_id, device)
        return inputs["input_ids"], inputs["attention_mask"]

    def compute(self, model: Any, indices: Sequence[int], batch: int) -> None:
        """The bottom states of the texts of the pairs ``indices`` (no dropout)."""
        torch = lazy_libs.torch()

        if not self.frozen:
            return
        wanted = [t for t in self.texts_of(indices) if t not in self.states]
        model.eval()
        with torch.inference_mode(), _swapped(model, slice(0, self.frozen)):
            for part in length_sorted_batches([len(self.ids[t]) for t in wanted], batch):
                chosen = [wanted[j] for j in part]
                ids, mask = self._inputs(chosen, model.device)
                out = model(input_ids=ids, attention_mask=mask).last_hidden_state
                for k, t in enumerate(chosen):
                    n = len(self.ids[t])
                    self.states[t] = out[k, :n].detach().to("cpu", torch.float32).clone()

    def embed(self, model: Any, texts: Sequence[int]) -> Any:
        """Unit embeddings of ``texts`` (in that order) through the trained part."""

        device = model.device
        if not self.frozen:
            ids, mask = self._inputs(texts, device)
            return mean_pooled(model(input_ids=ids, attention_mask=mask).last_hidden_state, mask)
        out, mask = top_output(model, [self.states[t] for t in texts], self.frozen)
        return mean_pooled(out.last_hidden_state, mask)

    def embeddings(self, model: Any, texts: Sequence[int]) -> Any:
        """``embed`` in length-sorted sub-batches, in the order of ``texts``."""
        lengths = [len(self.ids[t]) for t in texts]
        return in_length_order(
            lengths, self.sub_batch(model), lambda part: self.embed(model, [texts[j] for j in part])
        )

    def scores(self, model: Any, indices: Sequence[int]) -> Any:
        """``SCALE`` x cosine of each pair ``indices``, in that order; each distinct text is
        embedded once per call."""
        torch = lazy_libs.torch()

        texts = self.texts_of(indices)
        where = {t: i for i, t in enumerate(texts)}
        vectors = self.embeddings(model, texts)
        at = np.asarray(indices, dtype=np.int64)
        queries = torch.as_tensor([where[t] for t in self.pair_query[at]], device=vectors.device)
        docs = torch.as_tensor([where[t] for t in self.pair_text[at]], device=vectors.device)
        return SCALE * (vectors[queries] * vectors[docs]).sum(dim=-1)

    def check(self, model: Any, indices: Sequence[int], whole: Any = None) -> None:
        """Refuse a model whose sentence-transformers pipeline (``whole``) embeds the first
        texts otherwise than the path training takes (bottom states, top layers, mean pooling,
        normalisation): a pooling or module the trainer does not reproduce."""
        torch = lazy_libs.torch()

        if whole is None or not len(indices):
            return
        texts = self.texts_of(indices)
        model.eval()
        with torch.inference_mode():
            ours = self.embeddings(model, texts).float().cpu()
            ids, mask = self._inputs(texts, model.device)
            out = whole({"input_ids": ids, "attention_mask": mask})["sentence_embedding"]
            theirs = torch.nn.functional.normalize(out.float(), dim=-1).cpu()
        gap = float((ours - theirs).abs().max()) if ours.shape == theirs.shape else float("inf")
        if not np.isfinite(gap) or gap > CHECK_TOLERANCE * 10:
            raise ConfigError(
                f"{type(model).__name__}: the sentence-transformers model embeds otherwise than "
                f"a transformer with mean pooling (difference {gap:.3g}); dense training needs "
                "a transformer and mean pooling"
            )

    @staticmethod
    def sub_batch(model: Any) -> int:
        """Texts per forward pass (as ``Features.sub_batch``: few on a CPU, all on a GPU)."""
        return 2 * SUB_BATCH if str(model.device).startswith("cpu") else 1 << 20


def dense_features(
    model: Any, examples: pd.DataFrame, max_length: int, frozen: int
) -> tuple[DenseFeatures, int, int]:
    """The features of ``examples`` (columns ``query`` and ``text``) for the sentence-transformers
    ``model``: (features, texts cut at the input limit, the input limit)."""
    max_input = min(int(max_length), int(model.max_seq_length or max_length))
    model.max_seq_length = max_input  # the saved models read what they learnt from
    tokenizer = model.tokenizer
    queries, pair_query = np.unique(examples["query"].astype(str).to_numpy(), return_inverse=True)
    texts, pair_text = np.unique(examples["text"].astype(str).to_numpy(), return_inverse=True)
    query_ids, query_cut = tokenize(tokenizer, queries.tolist(), max_input)
    text_ids, text_cut = tokenize(tokenizer, texts.tolist(), max_input)
    features = DenseFeatures(
        query_ids, text_ids, pair_query, pair_text, tokenizer.pad_token_id, frozen
    )
    return features, query_cut + text_cut, max_input


class DenseTraining:
    """``nrp train --ranker dense``: the base bi-encoder itself is trained (``CrossTraining``'s
    interface); each checkpoint is a sentence-transformers folder the ``dense`` ranker reads."""

    ranker = "dense"
    label = "sentence-transformers bi-encoder"
    score = f"{SCALE:g} x cosine of the mean-pooled, normalised query and text embeddings"

    def __init__(self, base: Path, device: str):
        self.base, self.device = base, device
        self.whole: Any = None
        self.max_input = 0

    def fresh(self, seed: int) -> Any:
        self.whole = load_sentence_model(self.base, seed, self.device)
        if self.max_input:
            self.whole.max_seq_length = self.max_input
        return transformer_of(self.whole)

    def features(
        self, examples: pd.DataFrame, max_length: int, train_layers: int
    ) -> tuple[DenseFeatures, int, int]:
        frozen = frozen_layers(transformer_of(self.whole), train_layers)
        features, cut, self.max_input = dense_features(self.whole, examples, max_length, frozen)
        return features, cut, self.max_input

    def check(self, features: DenseFeatures, indices: Sequence[int]) -> None:
        features.check(transformer_of(self.whole), indices, self.whole)

    def save(self, folder: Path) -> None:
        self.whole.save(str(folder))
