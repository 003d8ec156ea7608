"""``colbert``: late interaction (ColBERT); score = sum over query token embeddings of the best
cosine with any document token embedding (MaxSim).

Why re-ranking by our own MaxSim: colbert-ai's ``Checkpoint`` encoder (``queryFromText``,
``docFromText``) runs on plain PyTorch, while its scoring and PLAID index need C++ extensions
compiled on first use (minutes, a compiler). Re-ranking D_q only needs the encoder; MaxSim is a
few lines of torch. The token embeddings are colbert's own: query [Q] marker and [MASK]
augmentation to ``query_maxlen``; document [D] marker, punctuation and padding left out of the
max (``mask_punctuation``), as in colbert's ``colbert_score``.

Checkpoints: ``model=colbert-ir/colbertv2.0`` (default; a hub id, so it needs the model hub or a
filled HF cache) or any local checkpoint folder (HF_ColBERT weights, ``config.json``, tokenizer
files, and ``artifact.metadata`` with ColBERT's own settings: dim, query_maxlen, doc_maxlen).

Whole-collection search with a PLAID index is ``ColBERTIndex`` (optional: compiles colbert's C++
extensions on first use; ``TORCH_EXTENSIONS_DIR`` caches them).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd
import pyterrier as pt

from nrp import lazy_libs
from nrp.models.checksums import checksum_path
from nrp.models.device import resolve_device, resolve_dtype, run_length_sorted
from nrp.models.folders import load_model, local_model
from nrp.rankers.base import Ranker, query_params
from nrp.rankers.passages import neural_params, passage_params, score_with_passages
from nrp.rankers.registry import Param, RankerInfo, register

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch
    from colbert.modeling.checkpoint import Checkpoint

DEFAULT_CHECKPOINT = "colbert-ir/colbertv2.0"

PARAMS: dict[str, Param] = {
    "model": Param(
        str, DEFAULT_CHECKPOINT, "ColBERT checkpoint: a local folder or hub id", kind="model"
    ),
    "query_maxlen": Param(
        int, 0, "query tokens incl. [MASK] padding (0: the checkpoint's)", minimum=0
    ),
    "doc_maxlen": Param(
        int, 0, "document tokens read (0: the checkpoint's, 180 for v2)", minimum=0
    ),
    **neural_params(batch=32),
    **passage_params(),
    **query_params(),
}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """colbert's Checkpoint always creates CUDA AMP objects, which warn on a CPU machine; and
    prints through warnings about deprecated torch.cuda.amp. None of it is the user's concern."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"colbert|torch")
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.cuda|torch\.amp")
        yield


@contextlib.contextmanager
def _without_cpu_extension() -> Iterator[None]:
    """On a CPU, ``ColBERT.__init__`` compiles the segmented_maxsim C++ extension (minutes, needs
    a compiler) that only its own ``colbert_score`` uses. We score with torch, so mark it loaded
    while the encoder is built and undo that afterwards: a later PLAID search still compiles it."""
    ColBERT = lazy_libs.module("colbert.modeling.colbert").ColBERT

    if hasattr(ColBERT, "loaded_extensions"):
        yield
        return
    ColBERT.loaded_extensions = True
    try:
        yield
    finally:
        del ColBERT.loaded_extensions


def load_checkpoint(
    name: str, device: str, dtype: torch.dtype, query_maxlen: int = 0, doc_maxlen: int = 0
) -> Checkpoint:
    """colbert's ``Checkpoint`` on ``device`` in ``dtype``, without C++ extensions.

    colbert decides precision by itself (AMP autocast and fp16 document embeddings whenever a GPU
    is visible); we switch that off and cast the weights instead, so ``dtype=fp32`` means fp32."""
    ColBERTConfig = lazy_libs.module("colbert.infra").ColBERTConfig
    Checkpoint = lazy_libs.module("colbert.modeling.checkpoint").Checkpoint

    overrides: dict[str, Any] = {"checkpoint": name}
    if query_maxlen > 0:
        overrides["query_maxlen"] = query_maxlen
    if doc_maxlen > 0:
        overrides["doc_maxlen"] = doc_maxlen
    path = local_model(name, spec="colbert")
    overrides["checkpoint"] = path
    with _quiet(), _without_cpu_extension():
        checkpoint = load_model(
            Checkpoint, path, spec="colbert", colbert_config=ColBERTConfig(**overrides), verbose=0
        )
    checkpoint.amp_manager.activated = False
    checkpoint.use_gpu = False  # colbert would cast document embeddings to fp16 otherwise
    checkpoint.to(device=device, dtype=dtype)
    checkpoint.eval()
    return checkpoint


def maxsim_padded(query: torch.Tensor, docs: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """MaxSim of ``query`` (batch, q_tokens, dim) against padded documents (batch, d_tokens,
    dim) whose kept tokens are marked by ``kept`` (batch, d_tokens, 1): sum over query tokens
    of the maximum dot product with any kept document token, in float32 whatever the model's
    dtype."""
    torch = lazy_libs.torch()

    docs = docs.to(query.device)
    sims = torch.einsum("bqd,bld->bql", query.float(), docs.float())
    sims = sims.masked_fill(~kept.to(query.device).bool().squeeze(-1)[:, None, :], float("-inf"))
    return sims.max(dim=2).values.sum(dim=1)


class ColBERTRanker(Ranker):
    """Re-ranks D_q by ColBERT MaxSim over the checkpoint's token embeddings.

    Each distinct query is encoded once per ``score_frame``; documents are encoded in
    length-sorted batches (colbert pads a batch to its longest text)."""

    name: ClassVar[str] = "colbert"
    injection: ClassVar[str] = "pointwise"

    def __init__(self, params: Mapping[str, Any] | None = None):
        super().__init__({**{k: p.default for k, p in PARAMS.items()}, **dict(params or {})})
        self._checkpoint: Checkpoint | None = None

    @cached_property
    def _checksum(self) -> str:
        return checksum_path(
            str(self.params["model"]),
            patterns=("*.json", "*.safetensors", "*.bin", "*.txt", "*.metadata", "*.model", "*.pt"),
        )

    def model_checksum(self) -> str:
        return self._checksum

    @property
    def checkpoint(self) -> Checkpoint:
        if self._checkpoint is None:
            device = resolve_device(self.params["device"])
            dtype = resolve_dtype(self.params["dtype"], device)
            self._checkpoint = load_checkpoint(
                str(self.params["model"]),
                device,
                dtype,
                int(self.params["query_maxlen"]),
                int(self.params["doc_maxlen"]),
            )
        return self._checkpoint

    def encode_queries(self, queries: Sequence[str]) -> torch.Tensor:
        """(n, query_maxlen, dim) query token embeddings (normalized, [MASK]-augmented)."""
        torch = lazy_libs.torch()

        checkpoint = self.checkpoint
        with _quiet(), torch.inference_mode():
            return checkpoint.queryFromText(list(queries), bsize=int(self.params["batch"]))

    def encode_docs(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, tokens, dim) normalized document embeddings, zero at removed tokens (punctuation
        and padding), and the (n, tokens, 1) mask of kept tokens. Padded, not split into one
        tensor per document: colbert's split copies every batch to the CPU and back (on a GPU
        most of ColBERT's time)."""
        torch = lazy_libs.torch()

        checkpoint = self.checkpoint
        with _quiet(), torch.inference_mode():
            ids, mask = checkpoint.doc_tokenizer.tensorize(list(texts))
            return checkpoint.doc(ids, mask, keep_dims="return_mask")

    def _score_rows(self, frame: pd.DataFrame) -> np.ndarray:
        torch = lazy_libs.torch()

        queries = frame["query"].fillna("").astype(str).to_numpy()
        unique_q, q_index = np.unique(queries, return_inverse=True)
        q_emb = self.encode_queries(unique_q.tolist())
        items = list(zip(frame["text"].fillna("").astype(str), q_index.tolist(), strict=True))

        def batch(rows: list[tuple[str, int]]) -> torch.Tensor:
            docs, kept = self.encode_docs([text for text, _ in rows])
            index = torch.tensor([qi for _, qi in rows], device=q_emb.device)
            with torch.inference_mode():
                return maxsim_padded(q_emb[index], docs, kept)

        return run_length_sorted(
            items,
            batch,
            int(self.params["batch"]),
            key=lambda row: len(row[0]),
            desc="colbert",
            verbose=bool(self.params["verbose"]),
        ).astype(float)

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        return score_with_passages(
            frame,
            self._score_rows,
            int(self.params["passages"]),
            int(self.params["stride"]),
            str(self.params["aggregate"]),
        )


class ColBERTIndex(pt.Transformer):
    """Whole-collection ColBERT search with colbert-ai's PLAID index (optional, heavy).

    ``ColBERTIndex(checkpoint, folder).build(corpus)`` indexes a (docno, text) frame with
    ``colbert.Indexer`` into ``folder``; ``transform(topics)`` searches it with
    ``colbert.Searcher`` and returns a PyTerrier result frame (qid, query, docno, score, rank).
    The first use compiles colbert's C++ extensions (decompression, segmented MaxSim): minutes,
    a C++ compiler and ninja needed; set ``TORCH_EXTENSIONS_DIR`` to keep them between runs.
    PLAID scores are approximate (residual compression, ``nbits`` per dimension) and not equal to
    ``ColBERTRanker``'s exact MaxSim; re-rank its top k with ``ColBERTRanker`` when that matters.
    colbert-ai reports every step on stdout/stderr; ``verbose=False`` (default) hides that (faiss's
    own C++ messages still show).
    """

    def __init__(
        self,
        checkpoint: str,
        folder: str | Path,
        k: int = 100,
        nbits: int = 2,
        doc_maxlen: int = 0,
        kmeans_niters: int = 4,
        verbose: bool = False,
    ):
        self.checkpoint = str(checkpoint)
        self.folder = Path(folder)
        self.k = int(k)
        self.nbits = int(nbits)
        self.doc_maxlen = int(doc_maxlen)
        self.kmeans_niters = int(kmeans_niters)
        self.verbose = verbose
        self._searcher: Any = None
        self._docnos: list[str] | None = None

    def __str__(self) -> str:
        return f"ColBERTIndex({self.checkpoint}, {self.folder})"

    def _silence(self) -> contextlib.AbstractContextManager[Any]:
        if self.verbose:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        sink = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115 - closed by the stack
        stack.enter_context(contextlib.redirect_stdout(sink))
        stack.enter_context(contextlib.redirect_stderr(sink))
        return stack

    def _run_config(self) -> Any:
        RunConfig = lazy_libs.module("colbert.infra").RunConfig

        return RunConfig(
            nranks=1,
            experiment="nrp",
            root=str(self.folder),
            index_root=str(self.folder),
            avoid_fork_if_possible=True,
        )

    def build(self, corpus: pd.DataFrame, overwrite: bool = True) -> ColBERTIndex:
        """Index ``corpus`` (docno, text); colbert's passage ids are the row positions."""
        Indexer = lazy_libs.module("colbert").Indexer
        infra = lazy_libs.module("colbert.infra")
        ColBERTConfig, Run = infra.ColBERTConfig, infra.Run

        self.folder.mkdir(parents=True, exist_ok=True)
        docnos = corpus["docno"].astype(str).tolist()
        (self.folder / "docnos.txt").write_text("\n".join(docnos) + "\n")
        texts = [" ".join(t.split()) for t in corpus["text"].fillna("").astype(str)]
        settings: dict[str, Any] = {"nbits": self.nbits, "kmeans_niters": self.kmeans_niters}
        if self.doc_maxlen > 0:
            settings["doc_maxlen"] = self.doc_maxlen
        with _quiet(), self._silence(), Run().context(self._run_config()):
            indexer = Indexer(
                checkpoint=self.checkpoint, config=ColBERTConfig(**settings), verbose=0
            )
            indexer.index(
                name="index",
                collection=texts,
                overwrite="force_silent_overwrite" if overwrite else "reuse",
            )
        self._searcher = None
        return self

    @property
    def docnos(self) -> list[str]:
        if self._docnos is None:
            self._docnos = (self.folder / "docnos.txt").read_text().splitlines()
        return self._docnos

    @property
    def searcher(self) -> Any:
        if self._searcher is None:
            Searcher = lazy_libs.module("colbert").Searcher
            Run = lazy_libs.module("colbert.infra").Run

            with _quiet(), self._silence(), Run().context(self._run_config()):
                self._searcher = Searcher(
                    index="index",
                    checkpoint=self.checkpoint,
                    index_root=str(self.folder),
                    verbose=0,
                )
        return self._searcher

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        from pyterrier.model import add_ranks

        rows = []
        for qid, query in zip(topics["qid"].astype(str), topics["query"].astype(str), strict=True):
            with _quiet(), self._silence():
                pids, _, scores = self.searcher.search(query, k=self.k)
            rows.extend(
                {"qid": qid, "query": query, "docno": self.docnos[pid], "score": float(score)}
                for pid, score in zip(pids, scores, strict=True)
            )
        return add_ranks(pd.DataFrame(rows, columns=["qid", "query", "docno", "score"]))


def _available() -> tuple[bool, str]:
    if importlib.util.find_spec("colbert") is None:
        return False, "needs colbert-ai (pip install colbert-ai)"
    return True, ""


register(
    RankerInfo(
        name="colbert",
        description="ColBERT late interaction: MaxSim of query and document token embeddings "
        f"(default checkpoint {DEFAULT_CHECKPOINT}, or a local folder)",
        backend="colbert-ai",
        build=lambda params: ColBERTRanker(params),
        params=PARAMS,
        available=_available,
    )
)
