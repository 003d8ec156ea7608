"""``cross``: a cross-encoder, a sequence-classification model that reads a query and a text
together and gives their pair one score.

Why a cross-encoder beside ``dense``: a bi-encoder embeds query and text apart, so no word of the
text ever attends to a word of the query; a cross-encoder reads them as one input and can learn
what a collection's judges reward. It is the model ``nrp train`` fine-tunes on a collection's own
judgments (``nrp.training``; docs/training.md).

What ``model=`` may be:

- any local sequence-classification checkpoint: a sentence-transformers ``CrossEncoder`` folder or
  a transformers ``AutoModelForSequenceClassification`` folder (with its tokenizer); where a model
  hub is reachable, a hub id such as ``cross-encoder/ms-marco-MiniLM-L-6-v2``;
- a folder written by ``nrp train`` for this ranker (``training.json``, ``folds/0..k-1/``,
  ``all/``): ``fold=cross`` (default) scores each query with the fold model that held it out,
  ``fold=all`` with the model trained on all queries (``nrp.rankers.trained``).

The score is the model's output for the pair as it is: its one logit when the head has one
label (what sentence-transformers' CrossEncoder and ``nrp train`` models have; CrossEncoder's
default sigmoid is monotone and left out, so ties and order are the logit's), else the
log-softmax of its last label (the positive class of two-label relevance heads).

The input is ``[CLS] query [SEP] text [SEP]`` (the tokenizer's pair form), cut at the model's
limit (``max_length``, default the tokenizer's ``model_max_length`` within the position
embeddings) the way CrossEncoder cuts it (``longest_first``: the longer of the two loses tokens
first). Every cut row is counted and reported (a warning and the ``truncated`` column of
``transform``); ``passages=N`` scores long documents passage by passage instead. Batches are
sorted by length (``nrp.models.device``); padding is on the right and masked, so a score moves
with its batch by float rounding only, and ties are judged with the dtype's tolerance.

Models load on first use, each fold model once: a ranker whose scores are all cached loads none.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.errors import ConfigError
from nrp.models.checksums import checksum_path
from nrp.models.device import resolve_device, resolve_dtype, run_length_sorted
from nrp.models.folders import load_model
from nrp.rankers.base import Ranker, query_params
from nrp.rankers.passages import (
    neural_params,
    passage_params,
    report_cuts,
    score_counting_cuts,
)
from nrp.rankers.registry import Param, RankerInfo, register
from nrp.rankers.trained import TrainedFolds, fold_param

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

log = logging.getLogger(__name__)

#: a tokenizer's ``model_max_length`` above this is transformers' "no limit" placeholder
NO_LIMIT = 1_000_000

PARAMS: dict[str, Param] = {
    "model": Param(
        str,
        None,
        "sequence-classification checkpoint (CrossEncoder or transformers folder, a folder "
        "written by nrp train, or a hub id where a hub is reachable)",
        kind="model",
    ),
    "fold": fold_param(),
    "max_length": Param(
        int, 0, "input tokens of query and text together (0: the model's limit)", minimum=0
    ),
    **neural_params(batch=32),
    **passage_params(),
    **query_params(),
}


# -- one checkpoint: (query, text) pairs in, scores out -------------------------------------------
class PairClassifier:
    """A sequence-classification checkpoint that scores (query, text) pairs, loaded on first use.

    ``score(queries, texts)`` -> (scores, cut): see the module docstring for the score and the
    input. Each distinct (query, text) pair is tokenized and scored once.
    """

    def __init__(self, path: str, *, params: Mapping[str, Any], label: str):
        self.path = str(path)
        self.batch = int(params["batch"])
        self.device = str(params["device"])
        self.dtype = str(params["dtype"])
        self.verbose = bool(params["verbose"])
        self.max_length = int(params["max_length"])
        self.label = label
        self._model: Any = None
        self._tokenizer: Any = None
        self.max_input = 0

    def load(self) -> None:
        if self._model is not None:
            return
        transformers = lazy_libs.transformers()
        AutoModelForSequenceClassification = transformers.AutoModelForSequenceClassification
        AutoTokenizer = transformers.AutoTokenizer

        device = resolve_device(self.device)
        torch_dtype = resolve_dtype(self.dtype, device)
        tokenizer = load_model(AutoTokenizer.from_pretrained, self.path, spec=self.label)
        model = load_model(
            AutoModelForSequenceClassification.from_pretrained,
            self.path,
            spec=self.label,
            dtype=torch_dtype,
        )
        self.max_input = input_limit(tokenizer, model.config, self.max_length, self.label)
        self._tokenizer = tokenizer
        self._model = model.to(device).eval()

    def inputs(
        self, queries: Sequence[str], texts: Sequence[str]
    ) -> tuple[list[dict[str, list[int]]], np.ndarray]:
        """The pair encodings of (query, text), cut at ``max_input`` (``encode_pairs``)."""
        self.load()
        return encode_pairs(self._tokenizer, queries, texts, self.max_input)

    def _forward(self, batch: list[dict[str, list[int]]]) -> torch.Tensor:
        """Scores of a batch of encodings, right-padded and masked."""
        torch = lazy_libs.torch()

        inputs = pad_pairs(batch, self._tokenizer.pad_token_id, self._model.device)
        with torch.inference_mode():
            return pair_scores(self._model(**inputs).logits.float())

    def score(
        self, queries: Sequence[str], texts: Sequence[str], desc: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Scores and cut flags of the pairs, in order; each distinct pair scored once."""
        if not len(queries):
            return np.zeros(0, dtype=float), np.zeros(0, dtype=bool)
        pairs = list(zip(map(str, queries), map(str, texts), strict=True))
        unique = list(dict.fromkeys(pairs))
        rows, cut = self.inputs([q for q, _ in unique], [t for _, t in unique])
        scores = run_length_sorted(
            rows,
            self._forward,
            self.batch,
            key=lambda row: len(row["input_ids"]),
            desc=desc,
            verbose=self.verbose,
        ).astype(float)
        if not np.isfinite(scores).all():
            raise RuntimeError(
                f"{self.label}: non-finite scores with dtype={self.dtype} (use dtype=fp32)"
            )
        index = {pair: i for i, pair in enumerate(unique)}
        at = np.array([index[pair] for pair in pairs], dtype=np.int64)
        return scores[at], cut[at]


def encode_pairs(
    tokenizer: Any, queries: Sequence[str], texts: Sequence[str], max_input: int
) -> tuple[list[dict[str, list[int]]], np.ndarray]:
    """The tokenizer's pair encoding (``input_ids``, and ``token_type_ids`` where the model
    has them) of each (query, text), cut at ``max_input`` tokens the way CrossEncoder cuts
    (``longest_first``), and which pairs were cut. Only the pairs over the limit are encoded a
    second time, with truncation. The cross ranker and ``nrp train`` both encode with this."""
    full = tokenizer(list(queries), list(texts), truncation=False, verbose=False)
    keys = [k for k in ("input_ids", "token_type_ids") if k in full]
    rows = [{k: full[k][i] for k in keys} for i in range(len(queries))]
    cut = np.array([len(row["input_ids"]) > max_input for row in rows], dtype=bool)
    long = np.flatnonzero(cut)
    if len(long):
        short = tokenizer(
            [queries[i] for i in long],
            [texts[i] for i in long],
            truncation="longest_first",
            max_length=max_input,
        )
        for j, i in enumerate(long):
            rows[i] = {k: short[k][j] for k in keys}
    return rows, cut


def pad_pairs(rows: Sequence[Mapping[str, list[int]]], pad_id: int | None, device: Any) -> dict:
    """Model inputs of a batch of pair encodings: right-padded (``pad_id``; token type 0) with
    the attention mask, on ``device``."""
    torch = lazy_libs.torch()

    width = max(len(row["input_ids"]) for row in rows)
    pads = {"input_ids": pad_id or 0, "token_type_ids": 0}
    tensors = {key: torch.full((len(rows), width), pads[key], dtype=torch.long) for key in rows[0]}
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        n = len(row["input_ids"])
        for key, values in row.items():
            tensors[key][i, :n] = torch.tensor(values, dtype=torch.long)
        mask[i, :n] = 1
    tensors["attention_mask"] = mask
    return {key: tensor.to(device) for key, tensor in tensors.items()}


def pair_scores(logits: torch.Tensor) -> torch.Tensor:
    """One score per row of a classification head's logits: the logit itself for one label,
    else the log-softmax of the last (positive) label."""
    torch = lazy_libs.torch()

    if logits.shape[-1] == 1:
        return logits[:, 0]
    return torch.log_softmax(logits, dim=-1)[:, -1]


def input_limit(tokenizer: Any, config: Any, asked: int, label: str) -> int:
    """Input tokens the model reads: the tokenizer's ``model_max_length`` within the position
    embeddings (``max_length=`` when given, never above them)."""
    positions = getattr(config, "max_position_embeddings", None) or NO_LIMIT
    declared = getattr(tokenizer, "model_max_length", None) or NO_LIMIT
    limit = min(int(positions), int(declared) if declared < NO_LIMIT else NO_LIMIT)
    if limit >= NO_LIMIT:
        raise ConfigError(f"{label}: the model declares no input limit; give max_length=N")
    if asked > limit:
        raise ConfigError(f"{label}: max_length={asked} is above the model's limit of {limit}")
    budget = asked or limit
    if budget < 4:
        raise ConfigError(f"{label}: max_length={budget} leaves no room for query and text")
    return budget


# -- the ranker -----------------------------------------------------------------------------------
class CrossEncoderRanker(TrainedFolds, Ranker):
    """Pointwise cross-encoder: each (query, text) row scored alone by a classification head.

    With a folder written by ``nrp train``, ``fold`` picks the checkpoint of each row (module
    docstring). ``truncated``: one flag per row of the last ``score_frame``, True where the text
    was cut at the model's limit; ``transform`` adds it as a column.
    """

    name: ClassVar[str] = "cross"
    injection: ClassVar[str] = "pointwise"

    def __init__(self, params: Mapping[str, Any] | None = None):
        given = dict(params or {})
        unknown = sorted(set(given) - set(PARAMS))
        if unknown:
            raise ConfigError(f"ranker 'cross' has no parameter(s) {', '.join(unknown)}")
        super().__init__({key: given.get(key, p.default) for key, p in PARAMS.items()})
        if not self.params["model"]:
            raise ConfigError(
                "cross needs model=DIR: a sequence-classification checkpoint or a folder "
                "written by nrp train"
            )
        self.check_fold()
        self._models: dict[str, PairClassifier] = {}
        self.truncated = np.zeros(0, dtype=bool)

    @cached_property
    def _checksum(self) -> str:
        trained = self.trained
        if trained is None:
            return checksum_path(str(self.params["model"]))
        return self.trained_checksum(trained)

    def model_checksum(self) -> str:
        """Plain checkpoint: its files. Trained folder: the hash of ``training.json`` and the
        files of every checkpoint this ``fold`` reads."""
        return self._checksum

    # -- scoring ------------------------------------------------------------------------------
    def classifier(self, key: str) -> PairClassifier:
        """The checkpoint ``key`` names (``model`` for a plain folder, ``all`` or a fold number
        for a trained one), built once and loaded on first use."""
        if key not in self._models:
            trained = self.trained
            path = str(self.params["model"]) if trained is None else str(trained.checkpoint(key))
            label = self.name if trained is None else f"{self.name} ({key})"
            self._models[key] = PairClassifier(path, params=self.params, label=label)
        return self._models[key]

    def score_rows(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Scores of the rows as they are (no passage splitting) and which rows were cut."""
        queries = frame["query"].fillna("").astype(str).to_numpy(dtype=object)
        texts = frame["text"].fillna("").astype(str).to_numpy(dtype=object)
        scores = np.zeros(len(frame), dtype=float)
        cut = np.zeros(len(frame), dtype=bool)
        for key, rows in self.checkpoint_rows(frame["qid"].astype(str).tolist()):
            desc = "cross-encoder" if key == "model" else f"cross-encoder {key}"
            scores[rows], cut[rows] = self.classifier(key).score(
                queries[rows].tolist(), texts[rows].tolist(), desc=desc
            )
        return scores, cut

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        length = int(self.params["passages"])
        scores, self.truncated = score_counting_cuts(
            frame, self.score_rows, length, self.params["stride"], self.params["aggregate"]
        )
        limits = [m.max_input for m in self._models.values() if m.max_input]
        report_cuts(log, self.spec(), self.truncated, max(limits, default=0), length)
        return scores

    def ranked_in_order(self, inp: pd.DataFrame) -> pd.DataFrame:
        out = super().ranked_in_order(inp)
        # the base resets the index before scoring, so index labels are positions in score_frame
        truncated = self.truncated[out.index.to_numpy()] if len(out) else np.zeros(0, dtype=bool)
        return out.assign(truncated=truncated)


def _available() -> tuple[bool, str]:
    if importlib.util.find_spec("transformers") is None:
        return False, "needs transformers (pip install transformers)"
    return True, ""


register(
    RankerInfo(
        name="cross",
        description="cross-encoder: a sequence-classification checkpoint scores each (query, "
        "text) pair (its one logit; two or more labels: log-softmax of the last); folders "
        "written by nrp train score each query with the fold model that held it out "
        "(fold=cross) or the all-queries model (fold=all)",
        backend="transformers",
        build=lambda params: CrossEncoderRanker(params),
        params=PARAMS,
        available=_available,
    )
)
