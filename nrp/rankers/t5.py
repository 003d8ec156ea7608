"""``monot5`` and ``duot5``: T5 re-rankers that read a prompt and answer "true" or "false".

monoT5 (Nogueira, Jiang, Pradeep & Lin 2020, "Document Ranking with a Pretrained
Sequence-to-Sequence Model") scores each document alone: the encoder reads
``Query: q Document: d Relevant:`` and the score is log P(true) from a softmax over the logits of
the tokens ``true`` and ``false`` at the first decoder step. duoT5 (Pradeep, Nogueira & Lin 2021,
"The Expando-Mono-Duo Design Pattern for Text Ranking with Pretrained Sequence-to-Sequence
Models") compares the documents of monoT5's top k two at a time
(``Query: q Document0: a Document1: b Relevant:``, P(true) = P(a more relevant than b)) and
orders them by an aggregate of those pair probabilities.

What is kept from pyterrier-t5 0.3.0 (``MonoT5ReRanker``, ``DuoT5ReRanker``), so scores are the
ones its users know: the prompts, tokenized the same way (each part without ``</s>``, the
``Relevant:`` prompt with it); the token ids ``tokenizer.encode('true')[0]`` and ``('false')``;
one decoder step from ``decoder_start_token_id``; log-softmax over (true, false); truncation that
cuts the text and keeps the prompt, at ``config.n_positions`` input tokens; duoT5 cutting both
documents of a pair by the same number of tokens; the hub defaults
(castorini/monot5-base-msmarco, castorini/duot5-base-msmarco, the t5-base tokenizer). A test
checks that our scores equal pyterrier-t5's on the same checkpoint (batch size 1).

Why we do not call pyterrier-t5 but run the same scoring in our own loop:

- its inputs depend on the batch. It pads a batch to the longest row and then chops the last
  column to drop ``</s>``; for every shorter row that column is padding, so the row keeps its
  ``</s>`` and has masked padding between the document and ``Relevant:``, which shifts T5's
  relative positions. A document's score changes with the documents that share its batch. We
  build every input alone (its batch-of-one form) and pad on the right, so any batching and
  length sorting gives the same inputs. The outputs are not bit-for-bit batch invariant: the
  padded width changes the shapes of the matrix products and fp32 rounds by ~1e-7; ties are
  therefore decided with the dtype's tolerance (``Ranker.score_tolerance``).
- it truncates silently; here every cut document is counted, logged and marked (``truncated``
  column), and ``passages=N`` scores long documents passage by passage (MaxP / FirstP).
- batch size 4, no dtype, no length sorting; here ``nrp.models.device`` does these the way all
  neural rankers do.
- its duoT5 aggregate adds a log-probability for one side and one minus that log-probability for
  the other (``scores[i] += log p; scores[j] += 1 - log p``), mixing two scales. The default here
  is the paper's and pygaggle's SYM-SUM over probabilities; ``agg=pyterrier-t5`` reproduces
  pyterrier-t5 exactly.

Models are loaded on first use, so a ranker whose scores are all cached never loads its model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from nrp import lazy_libs
from nrp.errors import ConfigError
from nrp.models.checksums import checksum_path
from nrp.models.device import resolve_device, resolve_dtype, run_length_sorted
from nrp.models.folders import load_model
from nrp.rankers.base import DEFAULT_QUERY_FIELD, Ranker, query_params
from nrp.rankers.passages import (
    neural_params,
    passage_params,
    report_cuts,
    score_counting_cuts,
)
from nrp.rankers.registry import Param, RankerInfo, register

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

    from nrp.collection.collection import Collection

log = logging.getLogger(__name__)

MONO_MODEL = "castorini/monot5-base-msmarco"
DUO_MODEL = "castorini/duot5-base-msmarco"
# The castorini checkpoints ship without a tokenizer; pyterrier-t5 pairs them with t5-base's.
HUB_TOKENIZER = "t5-base"
# T5's n_positions; used when a checkpoint's config does not carry it (mT5 configs do not).
FALLBACK_MAX_INPUT = 512
PROMPT = "Relevant:"
DUO_AGGREGATES = ("sym-sum", "sum", "pyterrier-t5")

# A pair scorer maps a frame of ordered pairs (qid, query, docno_a, text_a, docno_b, text_b) to
# log P(a more relevant than b), one value per row. ``DuoT5Ranker.pair_scorer`` is one; a cache
# replaces it with a wrapper that serves known (qid, docno_a, docno_b) and scores the rest.
PairScorer = Callable[[pd.DataFrame], np.ndarray]
PAIR_COLUMNS = ("qid", "query", "docno_a", "text_a", "docno_b", "text_b")


# -- the model: prompt in, log P(true) out ------------------------------------------------------
def default_tokenizer(model: str, tok_model: str | None) -> str:
    """The tokenizer to load: ``tok_model`` when given; else the model's own folder when the model
    is a local folder (a fine-tuned checkpoint saved with its tokenizer), else t5-base (hub ids:
    the castorini checkpoints carry no tokenizer)."""
    if tok_model:
        return tok_model
    if Path(model).is_dir():
        if not (Path(model) / "spiece.model").exists():
            raise ConfigError(
                f"model folder {model} has no tokenizer (spiece.model); pass tok_model= a folder "
                "with the T5 sentencepiece tokenizer (e.g. a copy of t5-base)"
            )
        return model
    return HUB_TOKENIZER


class T5RelevanceModel:
    """A T5 checkpoint asked ``... Relevant:`` and read at its first decoder step.

    ``score(inputs)`` gives log P(true) = log-softmax over the logits of ``true`` and ``false``
    for each input (token ids built by ``mono_inputs`` / ``duo_inputs``). Loaded lazily on first
    use: building a ranker, listing it or serving cached scores needs no model.
    """

    def __init__(
        self,
        model: str,
        tok_model: str | None,
        *,
        batch: int,
        device: str,
        dtype: str,
        verbose: bool,
        max_length: int,
        label: str,
    ):
        self.model_name = str(model)
        self.tokenizer_name = default_tokenizer(self.model_name, tok_model)
        self.batch = int(batch)
        self.device = device
        self.dtype = dtype
        self.verbose = verbose
        self.max_length = int(max_length)
        self.label = label
        self._model: Any = None
        self._tokenizer: Any = None
        self.true_id = self.false_id = -1
        self.prompt_ids: list[int] = []
        self.max_input = 0

    def checksum(self) -> str:
        """The model files' checksum, and the tokenizer's when it lives elsewhere."""
        model = checksum_path(self.model_name)
        if Path(self.tokenizer_name).resolve() == Path(self.model_name).resolve():
            return model
        return f"{model}+{checksum_path(self.tokenizer_name)}"

    # -- loading ---------------------------------------------------------------------------------
    def load(self) -> None:
        if self._model is not None:
            return
        transformers = lazy_libs.transformers()
        T5ForConditionalGeneration = transformers.T5ForConditionalGeneration
        T5Tokenizer = transformers.T5Tokenizer

        device = resolve_device(self.device)
        torch_dtype = resolve_dtype(self.dtype, device)
        tokenizer = load_model(
            T5Tokenizer.from_pretrained, self.tokenizer_name, spec=self.label, param="tok_model"
        )
        model = load_model(
            T5ForConditionalGeneration.from_pretrained,
            self.model_name,
            spec=self.label,
            dtype=torch_dtype,
        )
        # pyterrier-t5's token choice: the first id of encode('true') / encode('false'). A
        # tokenizer without them as single pieces would silently score on '▁' or <unk>.
        true_id, false_id = tokenizer.encode("true")[0], tokenizer.encode("false")[0]
        if (
            {true_id, false_id} & {tokenizer.unk_token_id}
            or true_id == false_id
            or (
                tokenizer.convert_ids_to_tokens(true_id) != "▁true"
                or tokenizer.convert_ids_to_tokens(false_id) != "▁false"
            )
        ):
            raise ConfigError(
                f"{self.label}: tokenizer {self.tokenizer_name!r} does not encode 'true' and "
                "'false' as the single pieces '▁true' and '▁false'; not a T5 tokenizer?"
            )
        self.true_id, self.false_id = true_id, false_id
        self.prompt_ids = tokenizer(PROMPT)["input_ids"]  # ends with </s>
        n_positions = getattr(model.config, "n_positions", None) or FALLBACK_MAX_INPUT
        self.max_input = self.max_length or int(n_positions)
        if self.max_input <= len(self.prompt_ids) + 1:
            raise ConfigError(f"{self.label}: max_length={self.max_input} leaves no room for text")
        self._tokenizer = tokenizer
        self._model = model.to(device).eval()

    @property
    def text_budget(self) -> int:
        """Tokens left for query and document(s) once the prompt is appended."""
        self.load()
        return self.max_input - len(self.prompt_ids)

    def _ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids without ``</s>`` (pyterrier-t5 encodes with it and chops it off). Each
        distinct text is tokenized once: duoT5 meets every document in 2(k-1) pairs. The
        tokenizer's own too-long warning is off: cut inputs are counted and reported by us."""
        self.load()
        unique = list(dict.fromkeys(texts))
        if not unique:
            return []
        by_text = dict(zip(unique, self._encode(unique), strict=True))
        return [by_text[text] for text in texts]

    def _encode(self, texts: list[str]) -> list[list[int]]:
        """The tokenizer's ids of each text. A slow, legacy T5 tokenizer (pyterrier-t5's and the
        hub checkpoints' default) tokenizes a text without added tokens (``</s>``, ``<pad>``,
        ``<extra_id_0>``...) as exactly ``sp_model.encode(text)``: the same ids, here in one
        batched C++ call, about 15 times faster than its per-text Python path (tokenizing held
        a GPU idle for half of monoT5's time). Other texts and other tokenizers take the
        tokenizer's own path."""
        tokenizer = self._tokenizer
        sp_model = getattr(tokenizer, "sp_model", None)
        if type(tokenizer).__name__ != "T5Tokenizer" or not getattr(tokenizer, "legacy", False):
            sp_model = None
        added = [t for t in getattr(tokenizer, "added_tokens_encoder", {}) or {} if t]
        starts = {token[0] for token in added}
        pattern = re.compile("|".join(map(re.escape, added))) if added else None

        def has_added(text: str) -> bool:
            return any(c in text for c in starts) and bool(pattern and pattern.search(text))

        plain = [sp_model is not None and not has_added(text) for text in texts]
        out: list[list[int]] = [[] for _ in texts]
        fast = [i for i, ok in enumerate(plain) if ok]
        slow = [i for i, ok in enumerate(plain) if not ok]
        if fast:
            for i, ids in zip(fast, sp_model.encode([texts[i] for i in fast]), strict=True):
                out[i] = list(ids)
        if slow:
            encoded = tokenizer([texts[i] for i in slow], add_special_tokens=False, verbose=False)[
                "input_ids"
            ]
            for i, ids in zip(slow, encoded, strict=True):
                out[i] = ids
        return out

    # -- inputs ----------------------------------------------------------------------------------
    def mono_inputs(
        self, queries: Sequence[str], texts: Sequence[str]
    ) -> tuple[list[list[int]], np.ndarray]:
        """``Query: q Document: d`` cut to the budget, then ``Relevant: </s>``; and which rows
        were cut."""
        budget = self.text_budget
        ids = self._ids([f"Query: {q} Document: {d}" for q, d in zip(queries, texts, strict=True)])
        truncated = np.array([len(row) > budget for row in ids], dtype=bool)
        return [row[:budget] + self.prompt_ids for row in ids], truncated

    def duo_inputs(
        self, queries: Sequence[str], texts_a: Sequence[str], texts_b: Sequence[str]
    ) -> tuple[list[list[int]], np.ndarray]:
        """``Query: q Document0: a Document1: b`` then ``Relevant: </s>``. When too long, both
        documents lose ceil(excess / 2) tokens from their ends (pyterrier-t5); where one document
        is shorter than that, the other gives the rest (pyterrier-t5 then overflows), and a query
        longer than everything is cut last."""
        budget = self.text_budget
        query_ids = self._ids([f"Query: {q}" for q in queries])
        a_ids = self._ids([f"Document0: {t}" for t in texts_a])
        b_ids = self._ids([f"Document1: {t}" for t in texts_b])
        inputs, truncated = [], []
        for q, a, b in zip(query_ids, a_ids, b_ids, strict=True):
            excess = len(q) + len(a) + len(b) - budget
            if excess > 0:
                half = math.ceil(excess / 2)
                cut_a = min(len(a), max(half, excess - len(b)))
                cut_b = min(len(b), max(half, excess - cut_a))
                a, b = a[: len(a) - cut_a], b[: len(b) - cut_b]
                q = q[: max(0, budget - len(a) - len(b))]
            inputs.append(q + a + b + self.prompt_ids)
            truncated.append(excess > 0)
        return inputs, np.array(truncated, dtype=bool)

    # -- scoring ---------------------------------------------------------------------------------
    def _forward(self, batch: list[list[int]]) -> torch.Tensor:
        """log P(true) for a batch of inputs, right-padded (the padding is masked and T5's
        relative positions of the real tokens are unchanged, so padding changes nothing)."""
        torch = lazy_libs.torch()

        model = self._model
        pad = self._tokenizer.pad_token_id
        width = max(len(row) for row in batch)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, row in enumerate(batch):
            input_ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        start = model.config.decoder_start_token_id
        decoder_input_ids = torch.full((len(batch), 1), start, dtype=torch.long)
        device = model.device
        if device.type == "cuda":  # pinned and asynchronous: the copy does not wait for the GPU
            input_ids, mask = input_ids.pin_memory(), mask.pin_memory()
        with torch.inference_mode():
            logits = model(
                input_ids=input_ids.to(device, non_blocking=True),
                attention_mask=mask.to(device, non_blocking=True),
                decoder_input_ids=decoder_input_ids.to(device),
            ).logits
            pair = logits[:, 0, [self.true_id, self.false_id]].float()
            return torch.log_softmax(pair, dim=1)[:, 0]

    def score(self, inputs: list[list[int]], desc: str) -> np.ndarray:
        """log P(true) per input, in input order; batches sorted by length."""
        self.load()
        if not inputs:
            return np.zeros(0, dtype=float)
        scores = run_length_sorted(
            inputs, self._forward, self.batch, key=len, desc=desc, verbose=self.verbose
        ).astype(float)
        if not np.isfinite(scores).all():
            raise RuntimeError(
                f"{self.label}: non-finite scores with dtype={self.dtype} (T5 overflows in fp16; "
                "use dtype=bf16 or fp32)"
            )
        return scores


# -- monoT5 ----------------------------------------------------------------------------------------
def _model_params(model: str, what: str) -> dict[str, Param]:
    return {
        "model": Param(str, model, f"{what} checkpoint: a local folder or a hub id", kind="model"),
        "tok_model": Param(
            str,
            None,
            "tokenizer folder or hub id (default: the model folder when local, else t5-base)",
            kind="model",
        ),
    }


_COMMON_PARAMS: dict[str, Param] = {
    "max_length": Param(
        int, 0, "input tokens incl. prompt (0: the config's n_positions, 512 for T5)", minimum=0
    ),
    **neural_params(batch=32),
}

MONOT5_PARAMS: dict[str, Param] = {
    **_model_params(MONO_MODEL, "monoT5"),
    **_COMMON_PARAMS,
    **passage_params(),
    **query_params(),
}


def _complete(params: Mapping[str, Any] | None, table: Mapping[str, Param], name: str) -> dict:
    """Defaults from the Param table (the one place they live), then the given values."""
    given = dict(params or {})
    unknown = sorted(set(given) - set(table))
    if unknown:
        raise ConfigError(f"ranker {name!r} has no parameter(s) {', '.join(unknown)}")
    return {key: given.get(key, param.default) for key, param in table.items()}


class MonoT5Ranker(Ranker):
    """Pointwise monoT5: score = log P(true | Query: q Document: d Relevant:) (always <= 0).

    With ``passages=N`` each document is split into N-word passages and scored by its best
    (``aggregate=max``) or first passage. Without, text past the model's input limit is cut, as
    every monoT5 implementation does, but counted: ``truncated`` (one flag per row of the last
    ``score_frame``) and a logged warning, and ``transform`` adds a ``truncated`` column.
    """

    name: ClassVar[str] = "monot5"
    injection: ClassVar[str] = "pointwise"

    def __init__(self, params: Mapping[str, Any] | None = None):
        super().__init__(_complete(params, MONOT5_PARAMS, self.name))
        p = self.params
        self.t5 = T5RelevanceModel(
            p["model"],
            p["tok_model"],
            batch=p["batch"],
            device=p["device"],
            dtype=p["dtype"],
            verbose=p["verbose"],
            max_length=p["max_length"],
            label=self.name,
        )
        self.truncated = np.zeros(0, dtype=bool)

    def model_checksum(self) -> str:
        return self.t5.checksum()

    def score_rows(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Scores of the rows as they are (no passage splitting) and which rows were cut."""
        inputs, truncated = self.t5.mono_inputs(
            frame["query"].astype(str).tolist(), frame["text"].fillna("").astype(str).tolist()
        )
        return self.t5.score(inputs, desc="monoT5"), truncated

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        length = int(self.params["passages"])
        doc_scores, self.truncated = score_counting_cuts(
            frame, self.score_rows, length, self.params["stride"], self.params["aggregate"]
        )
        report_cuts(log, self.spec(), self.truncated, self.t5.max_input, length)
        return doc_scores

    def ranked_in_order(self, inp: pd.DataFrame) -> pd.DataFrame:
        out = super().ranked_in_order(inp)
        # the base resets the index before scoring, so index labels are positions in score_frame
        truncated = self.truncated[out.index.to_numpy()] if len(out) else np.zeros(0, dtype=bool)
        return out.assign(truncated=truncated)


# -- duoT5: pair scores, aggregation, combination -----------------------------------------------
def ordered_pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """Every ordered pair (a, b), a != b, of the rows of each query: the pairs duoT5 scores.
    Columns ``PAIR_COLUMNS``. Docnos must be unique within a query (they key the pairs)."""
    parts = []
    for qid, group in frame.groupby("qid", sort=False):
        _check_unique(qid, group["docno"])
        n = len(group)
        if n < 2:
            continue
        a, b = np.nonzero(~np.eye(n, dtype=bool))
        parts.append(_pair_frame(group.iloc[a], group.iloc[b]))
    return pd.concat(parts, ignore_index=True) if parts else _pair_frame(frame[:0], frame[:0])


def pairs_against(new: pd.DataFrame, others: pd.DataFrame) -> pd.DataFrame:
    """Both orders of every (new row, other row) pair of the same query: the only pairs that
    are not yet known when one new text joins a set whose pairs are cached."""
    parts = []
    for qid, fresh in new.groupby("qid", sort=False):
        group = others[others["qid"].astype(str) == str(qid)]
        if group.empty:
            continue
        a = fresh.iloc[np.repeat(np.arange(len(fresh)), len(group))]
        b = group.iloc[np.tile(np.arange(len(group)), len(fresh))]
        parts += [_pair_frame(a, b), _pair_frame(b, a)]
    return pd.concat(parts, ignore_index=True) if parts else _pair_frame(new[:0], new[:0])


def _pair_frame(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "qid": a["qid"].astype(str).to_numpy(),
            "query": a["query"].astype(str).to_numpy(),
            "docno_a": a["docno"].astype(str).to_numpy(),
            "text_a": a["text"].fillna("").astype(str).to_numpy(),
            "docno_b": b["docno"].astype(str).to_numpy(),
            "text_b": b["text"].fillna("").astype(str).to_numpy(),
        }
    )


def _check_unique(qid: Any, docnos: pd.Series) -> None:
    duplicated = docnos[docnos.duplicated()]
    if len(duplicated):
        raise ValueError(
            f"duoT5 needs unique docnos per query; query {qid} repeats {duplicated.iloc[0]!r}"
        )


def aggregate_pairs(pairs: pd.DataFrame, log_probs: np.ndarray, how: str = "sym-sum") -> pd.Series:
    """One duoT5 score per (qid, docno) from its ordered pairs; p = P(a more relevant than b).

    - ``sym-sum`` (default; Pradeep et al. 2021's SYM-SUM, as pygaggle's DuoT5):
      s_i = sum_j p_ij + (1 - p_ji)
    - ``sum`` (the paper's SUM): s_i = sum_j p_ij
    - ``pyterrier-t5``: s_i = sum_j log p_ij + (1 - log p_ji), exactly what DuoT5ReRanker 0.3.0
      computes (it adds a log-probability and one minus a log-probability).

    Every score covers the same number of comparisons only when all ordered pairs of the set are
    given (``ordered_pairs``). Returns a Series indexed by (qid, docno).
    """
    if how not in DUO_AGGREGATES:
        raise ConfigError(
            f"unknown duoT5 aggregate {how!r} (use one of {', '.join(DUO_AGGREGATES)})"
        )
    log_p = np.asarray(log_probs, dtype=float)
    if how == "pyterrier-t5":
        for_a, for_b = log_p, 1.0 - log_p
    else:
        p = np.exp(log_p)
        for_a, for_b = p, (1.0 - p if how == "sym-sum" else np.zeros_like(p))
    parts = pd.concat(
        [
            pd.DataFrame({"qid": pairs["qid"], "docno": pairs["docno_a"], "s": for_a}),
            pd.DataFrame({"qid": pairs["qid"], "docno": pairs["docno_b"], "s": for_b}),
        ],
        ignore_index=True,
    )
    return parts.groupby(["qid", "docno"], sort=False)["s"].sum()


def top_k_mask(qids: Sequence[Any], scores: np.ndarray, k: int) -> np.ndarray:
    """True for the k highest-scored rows of each query (ties: earlier row first, as
    ``add_ranks`` orders them)."""
    ranks = (
        pd.Series(np.asarray(scores, dtype=float))
        .groupby(pd.Series(qids).astype(str).to_numpy(), sort=False)
        .rank(ascending=False, method="first")
    )
    return (ranks <= k).to_numpy()


def combine_scores(
    qids: Sequence[Any], first_stage: np.ndarray, in_duo: np.ndarray, duo: np.ndarray
) -> np.ndarray:
    """Final scores: duoT5-ranked rows above all others, the others in first-stage order.

    Rows outside the pairwise stage keep their first-stage (monoT5) score, so their order is
    monoT5's. Rows inside get ``duo + offset`` with, per query,
    ``offset = 1 + max(0, best outside score) - min(0, lowest duo score)``: the lowest of them is
    at least 1 above every outside row. monoT5 scores are log-probabilities (<= 0) and the
    probability aggregates are >= 0, so with the defaults offset = 1 and score = 1 + aggregate:
    a score >= 1 is 1 + a duoT5 aggregate, a score <= 0 a monoT5 log-probability.
    """
    first_stage = np.asarray(first_stage, dtype=float)
    in_duo = np.asarray(in_duo, dtype=bool)
    final = first_stage.copy()
    keys = pd.Series(qids).astype(str).to_numpy()
    for qid in pd.unique(keys[in_duo]):
        inside = in_duo & (keys == qid)
        outside = ~in_duo & (keys == qid)
        best_outside = first_stage[outside].max() if outside.any() else 0.0
        offset = 1.0 + max(0.0, best_outside) - min(0.0, float(duo[inside].min()))
        final[inside] = duo[inside] + offset
    return final


DUOT5_PARAMS: dict[str, Param] = {
    **_model_params(DUO_MODEL, "duoT5"),
    "mono_model": Param(
        str, MONO_MODEL, "monoT5 checkpoint of the first stage (folder or hub id)", kind="model"
    ),
    "mono_tok_model": Param(
        str,
        None,
        "first-stage tokenizer (default: mono_model's folder when local, else t5-base)",
        kind="model",
    ),
    "k": Param(
        int,
        50,
        "documents of monoT5's top k per query re-ranked pairwise (k(k-1) pairs)",
        minimum=1,
    ),
    "agg": Param(
        str,
        "sym-sum",
        "pair aggregate: sym-sum (paper, pygaggle), sum, pyterrier-t5",
        DUO_AGGREGATES,
    ),
    **_COMMON_PARAMS,
    **{
        key: replace(p, description=f"monoT5 stage: {p.description}")
        for key, p in passage_params().items()
    },
    **query_params(),
}


class DuoT5Ranker(Ranker):
    """monoT5 then duoT5 on each query's monoT5 top k; the rest keep monoT5's order below.

    Three separable steps, so the NRP step can score one new answer against cached pairs:

    1. ``self.mono`` (a ``MonoT5Ranker``) scores every row; ``top_k_mask`` picks each query's k.
    2. ``self.pair_scorer(pairs)`` gives log P(a more relevant than b) for a frame of ordered
       pairs (``PAIR_COLUMNS``); by default ``self.score_pairs``, which depends only on the duoT5
       checkpoint and the pair's texts (``pair_fingerprint()`` names that). A cache wraps it.
    3. ``aggregate_pairs`` and ``combine_scores`` turn pair scores into final scores (pure).

    ``rerank(frame, mono_scores, include=...)`` runs 2-3 on given first-stage scores.
    """

    name: ClassVar[str] = "duot5"
    # an answer is scored by monoT5, then compared with the top k when it enters them
    injection: ClassVar[str] = "pairwise"
    depends_on_candidate_set: ClassVar[bool] = True

    def __init__(self, params: Mapping[str, Any] | None = None):
        super().__init__(_complete(params, DUOT5_PARAMS, self.name))
        p = self.params
        if p["k"] < 1:
            raise ConfigError(f"ranker 'duot5': k must be at least 1, got {p['k']}")
        shared = {key: p[key] for key in ("batch", "device", "dtype", "verbose", "max_length")}
        self.mono = MonoT5Ranker(
            {
                "model": p["mono_model"],
                "tok_model": p["mono_tok_model"],
                **shared,
                **{key: p[key] for key in passage_params()},
                # the first stage reads the same field, and its cache scope says so
                "query": p["query"],
            }
        )
        self.t5 = T5RelevanceModel(p["model"], p["tok_model"], label=self.name, **shared)
        self.pair_scorer: PairScorer = self.score_pairs
        self.truncated_pairs = 0
        self.last_duo = np.zeros(0)  # per row of the last rerank: the aggregate, NaN outside
        self.last_mono = np.zeros(0)

    def bind_collection(self, collection: Collection) -> None:
        super().bind_collection(collection)
        self.mono.bind_collection(collection)  # the first stage reads the same query field

    def parts(self) -> tuple[Ranker, ...]:
        return (self.mono,)

    def model_checksum(self) -> str:
        return f"duo:{self.t5.checksum()}|mono:{self.mono.model_checksum()}"

    def pair_fingerprint(self) -> str:
        """What a pair score depends on (the duoT5 checkpoint, tokenizer, dtype, input limit, and
        the query field when it is not the query), and not k, agg or the first stage: the scope
        key of a pair-score cache."""
        payload = {
            "duo": self.t5.checksum(),
            "dtype": self.params["dtype"],
            "max_length": self.params["max_length"],
            "prompt": "pyterrier-t5 0.3.0 duo prompt",
        }
        if self.query_field != DEFAULT_QUERY_FIELD:  # the default's key stays what it was
            payload["query_field"] = self.query_field
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:20]

    def score_pairs(self, pairs: pd.DataFrame) -> np.ndarray:
        """log P(a more relevant than b) for each row (needs query, text_a, text_b)."""
        inputs, truncated = self.t5.duo_inputs(
            pairs["query"].astype(str).tolist(),
            pairs["text_a"].astype(str).tolist(),
            pairs["text_b"].astype(str).tolist(),
        )
        self.truncated_pairs += int(truncated.sum())
        if truncated.any():
            log.warning(
                "%s: %d of %d document pairs were cut to fit %d input tokens",
                self.spec(),
                int(truncated.sum()),
                len(pairs),
                self.t5.max_input,
            )
        return self.t5.score(inputs, desc="duoT5 pairs")

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        return self.rerank(frame, self.mono.score_frame(frame))

    def rerank(
        self, frame: pd.DataFrame, mono_scores: np.ndarray, include: np.ndarray | None = None
    ) -> np.ndarray:
        """Final scores from first-stage scores: each query's top k by ``mono_scores`` and the
        rows in ``include`` (e.g. one new answer compared with monoT5's top k documents; k
        counts the other rows) are ranked by duoT5 above the rest."""
        mono_scores = np.asarray(mono_scores, dtype=float)
        if len(mono_scores) != len(frame):
            raise ValueError(f"{len(mono_scores)} first-stage scores for {len(frame)} rows")
        frame = frame.reset_index(drop=True)
        forced = np.zeros(len(frame), dtype=bool) if include is None else np.asarray(include, bool)
        k = self.params["k"]
        in_duo = forced.copy()
        rest = ~forced
        in_duo[rest] = top_k_mask(frame.loc[rest, "qid"].tolist(), mono_scores[rest], k)
        chosen = frame[in_duo]
        pairs = ordered_pairs(chosen)
        duo = np.zeros(len(frame))  # a query with one row in the stage has no pairs: 0
        if len(pairs):
            log_p = np.asarray(self.pair_scorer(pairs), dtype=float)
            aggregate = aggregate_pairs(pairs, log_p, self.params["agg"])
            keys = pd.MultiIndex.from_arrays(
                [frame["qid"].astype(str), frame["docno"].astype(str)], names=["qid", "docno"]
            )
            duo = np.nan_to_num(aggregate.reindex(keys).to_numpy(dtype=float))
        final = combine_scores(frame["qid"].tolist(), mono_scores, in_duo, duo)
        self.last_duo = np.where(in_duo, duo, np.nan)
        self.last_mono = mono_scores
        return final

    def ranked_in_order(self, inp: pd.DataFrame) -> pd.DataFrame:
        """Adds ``mono_score``, ``duo_score`` (the aggregate; NaN below k) and ``truncated``
        (the monoT5 input was cut) to the base's score and rank."""
        out = super().ranked_in_order(inp)
        if not len(out):
            return out.assign(mono_score=[], duo_score=[], truncated=np.zeros(0, dtype=bool))
        rows = out.index.to_numpy()
        return out.assign(
            mono_score=self.last_mono[rows],
            duo_score=self.last_duo[rows],
            truncated=self.mono.truncated[rows],
        )


# -- registry -------------------------------------------------------------------------------------
def _available() -> tuple[bool, str]:
    missing = [
        m for m in ("torch", "transformers", "sentencepiece") if not importlib.util.find_spec(m)
    ]
    return (False, f"needs {', '.join(missing)}") if missing else (True, "")


register(
    RankerInfo(
        name="monot5",
        description=(
            "monoT5 (Nogueira et al. 2020): log P(true) for 'Query: q Document: d Relevant:'; "
            "pyterrier-t5's scoring, batch-independent, truncation counted, passages MaxP/FirstP"
        ),
        backend="transformers (T5)",
        build=lambda params: MonoT5Ranker(params),
        params=MONOT5_PARAMS,
        available=_available,
    )
)

register(
    RankerInfo(
        name="duot5",
        description=(
            "duoT5 (Pradeep et al. 2021): monoT5, then its top k re-ranked by aggregated pair "
            "probabilities P(a more relevant than b); the rest keep monoT5's order below"
        ),
        backend="transformers (T5)",
        build=lambda params: DuoT5Ranker(params),
        params=DUOT5_PARAMS,
        available=_available,
    )
)
