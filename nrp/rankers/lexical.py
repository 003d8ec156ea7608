"""``tfidf``, ``bm25``, ``dph``: Terrier's lexical weighting models, re-ranking D_q.

Scores equal Terrier's (terrier-org/terrier-core, ``modules/core/src/main/java/org/terrier/``):
the same terms (``nrp.rankers.text_pipeline``), the same statistics and the same formulas,
with Terrier's ``WeightingModelLibrary.log``, the base-2 logarithm ``ln(x) * (1 / ln 2)``:

- ``matching/models/TF_IDF.java``: ``keyFrequency * k1*tf/(tf + k1*(1 - b + b*dl/avgdl))
  * log2(N/df + 1)``, k1 = 1.2 (control ``tf_idf.k_1``), b = 0.75 (``tf_idf.b``).
- ``matching/models/BM25.java``: ``log2((N - df + 0.5)/(df + 0.5)) * (k1 + 1)*tf/(K + tf)
  * (k3 + 1)*keyFrequency/(k3 + keyFrequency)`` with ``K = k1*((1 - b) + b*dl/avgdl)``;
  k1 = 1.2 (property ``bm25.k_1``), k3 = 8, b = 0.75. That idf is negative when a term is in
  more than half of the documents, so such a term lowers a document's score; with D_q as the
  statistics (5-21 documents on the shared collections) most query terms are in more than half
  of D_q. So ``bm25`` uses Lucene's idf ``log2(1 + (N - df + 0.5)/(df + 0.5))`` by default
  (``formula=nonnegative``), never negative and ordering terms as Terrier's does; Terrier's
  own formula is ``bm25:formula=terrier`` (reproduction). The base-2 logarithm is kept: a
  common factor of every score, it changes no ranking.
- ``matching/models/DPH.java``: ``f = relativeFrequency(tf, dl)`` (``tf/dl``, or 0.99999 when
  the document is the term alone, ``WeightingModelLibrary.relativeFrequency``),
  ``norm = (1 - f)^2/(tf + 1)``, score ``keyFrequency * norm * (tf*log2((tf*avgdl/dl)*(N/F))
  + 0.5*log2(2*pi*tf*(1 - f)))`` with F the term's frequency in the collection. The first log
  is negative where a document holds the term less often than D_q's average would give it
  (common with D_q as the statistics); by default (``formula=nonnegative``) a term's weight is
  floored at 0, so a query term never counts against a document; ``dph:formula=terrier`` is
  Terrier's unfloored DPH.

So no default lexical ranker scores a query term negatively (``formula=nonnegative``); TF_IDF's
idf ``log2(N/df + 1)`` is positive already and has no ``formula``.

Statistics as in ``WeightingModel.prepare``: N documents (empty ones included), avgdl = tokens
/ N, df and F of the term from the lexicon; ``keyFrequency`` is the query term's weight (how
often it occurs in the query, see ``text_pipeline.query_terms``). Only a document's postings
are scored, so a document without any query term scores 0 (Terrier would not retrieve it), and
a query term the index does not know is skipped. Terrier 5's matching ops ignore no term for
low idf (``ignore.low.idf.terms`` defaults to false in ``matching/matchops/Operator.java``).

Statistics (``stats``): ``query`` (default) counts N, avgdl, df and F over D_q alone, as the
source study did with one index per query; a score then depends on the other documents of
D_q (``depends_on_candidate_set``). ``collection`` counts them over a corpus given at build
time (the documents of the ingested collection named by ``collection=NAME``, or a frame passed
to the constructor); frame documents missing from the corpus are added to its statistics.

The NRP step ranks a generated answer among D_q with the answer added to the index. For that,
``LexicalIndex`` keeps D_q's postings (tokenised once); ``with_extra(text)`` returns the index
with one more document, sharing D_q's arrays and counting the new document in N, avgdl, df
and F, so scoring D_q plus an answer costs the answer's tokenisation and a few array
operations::

    index = ranker.build_index(d_q["text"])     # tokenise D_q once
    base = index.score(query, ranker.model)      # scores of D_q
    scores = index.with_extra(answer).score(query, ranker.model)  # D_q's scores, then the answer's

Back-ends (``backend``): ``python`` (default, the above); ``terrier``, PyTerrier's Java Terrier
(``pt.terrier.TextScorer``), when Java and the terrier-assemblies jar are on this machine;
``pisa`` (bm25 and dph, stats=query), PISA through pyterrier-pisa on the same terms. PISA's
formulas are not Terrier's: its BM25 idf is ``max(ln((N - df + 0.5)/(df + 0.5)), 1e-6)`` with
no k3 factor and it computes in 32-bit floats; its DPH is Terrier's without the 0.99999 clamp.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

import numpy as np
import pandas as pd

from nrp.errors import ConfigError
from nrp.rankers import text_pipeline
from nrp.rankers.base import Ranker, query_params
from nrp.rankers.registry import Param, RankerInfo, register
from nrp.tables import require_columns

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.collection.collection import Collection

#: ``WeightingModelLibrary.LOG_2_OF_E``: Terrier's log is ``Math.log(d) * LOG_2_OF_E``.
LOG_2_OF_E = 1.0 / math.log(2.0)
#: ``WeightingModelLibrary.relativeFrequency``: f when tf equals the document length.
DPH_FULL_DOCUMENT_F = 0.99999
#: ``formula`` of bm25 and dph: no query term scores negatively (the default), or Terrier's
#: own formula (for reproduction; see the module docstring)
NONNEGATIVE, TERRIER = "nonnegative", "terrier"


def terrier_log(x: np.ndarray | float) -> np.ndarray:
    """``WeightingModelLibrary.log``: base-2 logarithm computed as Terrier computes it."""
    return np.log(x) * LOG_2_OF_E


# -- weighting models ----------------------------------------------------------------------------
class TermStatistics(NamedTuple):
    """What ``WeightingModel.prepare`` gives a model for one query term."""

    num_docs: float  # N
    avg_doc_len: float  # avgdl = tokens / N
    df: float  # documents containing the term
    cf: float  # F: occurrences of the term in the collection
    key_frequency: float  # the query term's weight


class TermWeighting(Protocol):
    """A weighting model: the weight of a term in documents, from the term's frequency ``tf`` and
    the documents' lengths ``dl`` (arrays, one entry per posting) and the statistics ``s`` the
    documents are scored with (N, avgdl, df, F, keyFrequency). ``nrp.rankers.lexical``'s TfIdf,
    BM25 and DPH are three."""

    def weight(self, tf: np.ndarray, dl: np.ndarray, s: TermStatistics) -> np.ndarray: ...


@dataclass(frozen=True)
class TfIdf:
    """Terrier's ``TF_IDF`` (Robertson's tf times Sparck Jones' idf)."""

    k1: float = 1.2
    b: float = 0.75
    name: ClassVar[str] = "TF_IDF"

    def weight(self, tf: np.ndarray, dl: np.ndarray, s: TermStatistics) -> np.ndarray:
        robertson_tf = self.k1 * tf / (tf + self.k1 * (1 - self.b + self.b * dl / s.avg_doc_len))
        idf = terrier_log(s.num_docs / s.df + 1)
        return s.key_frequency * robertson_tf * idf


@dataclass(frozen=True)
class BM25:
    """Terrier's ``BM25`` (Okapi BM25 with the k3 query-term factor)."""

    k1: float = 1.2
    b: float = 0.75
    k3: float = 8.0
    formula: str = NONNEGATIVE  # or TERRIER: Terrier's idf, negative for common terms
    name: ClassVar[str] = "BM25"

    def weight(self, tf: np.ndarray, dl: np.ndarray, s: TermStatistics) -> np.ndarray:
        big_k = self.k1 * ((1 - self.b) + self.b * dl / s.avg_doc_len)
        odds = (s.num_docs - s.df + 0.5) / (s.df + 0.5)
        idf = terrier_log(odds if self.formula == TERRIER else 1 + odds)
        query_factor = (self.k3 + 1) * s.key_frequency / (self.k3 + s.key_frequency)
        return idf * ((self.k1 + 1) * tf / (big_k + tf)) * query_factor


@dataclass(frozen=True)
class DPH:
    """Terrier's ``DPH`` (hypergeometric DFR model with Popper's normalisation), each term's
    weight floored at 0 unless ``formula`` is ``TERRIER``."""

    formula: str = NONNEGATIVE
    name: ClassVar[str] = "DPH"

    def weight(self, tf: np.ndarray, dl: np.ndarray, s: TermStatistics) -> np.ndarray:
        f = np.where(tf < dl, tf / dl, DPH_FULL_DOCUMENT_F)
        norm = (1 - f) * (1 - f) / (tf + 1)
        weight = (
            s.key_frequency
            * norm
            * (
                tf * terrier_log((tf * s.avg_doc_len / dl) * (s.num_docs / s.cf))
                + 0.5 * terrier_log(2 * math.pi * tf * (1 - f))
            )
        )
        return weight if self.formula == TERRIER else np.maximum(weight, 0.0)


WeightingModel = TfIdf | BM25 | DPH


# -- statistics and index ------------------------------------------------------------------------
@dataclass(frozen=True)
class CorpusStatistics:
    """N, token count, df and F of a corpus: Terrier's CollectionStatistics and lexicon.

    Used as the background of ``LexicalIndex`` when statistics come from a whole collection.
    """

    num_docs: int
    num_tokens: int
    df: Mapping[str, int]
    cf: Mapping[str, int]
    docnos: frozenset[str] = frozenset()
    checksum: str = ""

    @classmethod
    def from_texts(
        cls, texts: Iterable[str], docnos: Iterable[str] | None = None
    ) -> CorpusStatistics:
        df: Counter[str] = Counter()
        cf: Counter[str] = Counter()
        num_docs = num_tokens = 0
        digest = hashlib.sha256(text_pipeline.PIPELINE_ID.encode())
        names = [str(d) for d in docnos] if docnos is not None else None
        for i, text in enumerate(texts):
            counts = text_pipeline.term_counts(text)
            df.update(counts.keys())
            cf.update(counts)
            num_docs += 1
            num_tokens += sum(counts.values())
            digest.update(f"{names[i] if names else i}\t{text}\n".encode())
        return cls(
            num_docs,
            num_tokens,
            dict(df),
            dict(cf),
            frozenset(names or ()),
            digest.hexdigest()[:20],
        )

    @classmethod
    def from_frame(cls, corpus: pd.DataFrame) -> CorpusStatistics:
        """From a documents frame with ``docno`` and ``text`` (``Collection.docs``)."""
        require_columns(corpus, ("docno", "text"), "corpus")
        unique = corpus.drop_duplicates("docno")
        return cls.from_texts(unique["text"].fillna("").astype(str), unique["docno"].astype(str))


@dataclass(frozen=True, eq=False)
class _Postings:
    """Inverted file of a document set: per term (column), the documents and term frequencies.

    Built once per D_q; ``LexicalIndex.with_extra`` shares it.
    """

    vocab: Mapping[str, int]
    pointers: np.ndarray  # term j's postings are [pointers[j], pointers[j+1])
    docs: np.ndarray
    tfs: np.ndarray
    doc_lengths: np.ndarray

    @classmethod
    def from_term_lists(cls, term_lists: Sequence[Sequence[str]]) -> _Postings:
        vocab: dict[str, int] = {}
        term_ids: list[int] = []
        doc_ids: list[int] = []
        lengths = np.zeros(len(term_lists), dtype=np.int64)
        for d, terms in enumerate(term_lists):
            lengths[d] = len(terms)
            for term in terms:
                term_ids.append(vocab.setdefault(term, len(vocab)))
            doc_ids.extend([d] * len(terms))
        n_docs = max(len(term_lists), 1)
        keys, tfs = np.unique(
            np.asarray(term_ids, dtype=np.int64) * n_docs + np.asarray(doc_ids, dtype=np.int64),
            return_counts=True,
        )
        terms_of_postings = keys // n_docs
        pointers = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms_of_postings, minlength=len(vocab)), out=pointers[1:])
        return cls(vocab, pointers, keys % n_docs, tfs.astype(np.float64), lengths)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        j = self.vocab.get(term)
        if j is None:
            return _EMPTY_INT, _EMPTY_FLOAT
        start, end = self.pointers[j], self.pointers[j + 1]
        return self.docs[start:end], self.tfs[start:end]


_EMPTY_INT = np.zeros(0, dtype=np.int64)
_EMPTY_FLOAT = np.zeros(0, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class LexicalIndex:
    """D_q as a small index: postings for scoring and the statistics Terrier would compute.

    Documents are numbered in the order given; extra documents (``with_extra``) follow them.
    Statistics are those of ``background`` (a ``CorpusStatistics``; none with stats=query) plus
    every document of this index that ``counted`` marks (all of them with stats=query; with
    stats=collection, those the corpus lacks) plus every extra document.
    """

    postings: _Postings
    counted: np.ndarray  # per base document: counted in the statistics on top of background
    background: CorpusStatistics | None = None
    extras: tuple[Counter[str], ...] = ()
    _own: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        background: CorpusStatistics | None = None,
        docnos: Iterable[str] | None = None,
    ) -> LexicalIndex:
        """Tokenise ``texts`` once. Without ``background`` the statistics are over these texts
        (stats=query); with it, over the background corpus plus those of these documents whose
        ``docnos`` the corpus does not contain."""
        term_lists = [text_pipeline.analyse("" if t is None else str(t)) for t in texts]
        postings = _Postings.from_term_lists(term_lists)
        if background is None:
            counted = np.ones(len(term_lists), dtype=bool)
        else:
            if docnos is None:
                raise ValueError("docnos are needed to tell which documents the background has")
            names = [str(d) for d in docnos]
            counted = np.array([d not in background.docnos for d in names], dtype=bool)
        return cls(postings, counted, background)

    def with_extra(self, text: str) -> LexicalIndex:
        """This index with one more document (numbered last), counted in every statistic;
        D_q is not tokenised again."""
        return self.with_extra_counts(text_pipeline.term_counts(text))

    def with_extra_counts(self, counts: Counter[str]) -> LexicalIndex:
        """``with_extra`` for a document already analysed into term counts."""
        return LexicalIndex(
            self.postings, self.counted, self.background, (*self.extras, counts), self._own
        )

    # -- statistics -------------------------------------------------------------------------------
    @property
    def num_base_docs(self) -> int:
        return len(self.postings.doc_lengths)

    def __len__(self) -> int:
        return self.num_base_docs + len(self.extras)

    def _own_statistics(self) -> tuple[np.ndarray, np.ndarray, int, int]:
        """df and F per vocabulary term over the counted base documents, their N and tokens."""
        if "df" not in self._own:
            p = self.postings
            term_of_posting = np.repeat(np.arange(len(p.vocab)), np.diff(p.pointers))
            mask = self.counted[p.docs].astype(np.float64)
            self._own["df"] = np.bincount(term_of_posting, weights=mask, minlength=len(p.vocab))
            self._own["cf"] = np.bincount(
                term_of_posting, weights=mask * p.tfs, minlength=len(p.vocab)
            )
            self._own["n"] = int(self.counted.sum())
            self._own["tokens"] = int(p.doc_lengths[self.counted].sum())
        return self._own["df"], self._own["cf"], self._own["n"], self._own["tokens"]

    def collection_size(self) -> tuple[int, int]:
        """(N, number of tokens) of the statistics this index scores with."""
        _, _, n, tokens = self._own_statistics()
        if self.background is not None:
            n += self.background.num_docs
            tokens += self.background.num_tokens
        return n + len(self.extras), tokens + sum(sum(e.values()) for e in self.extras)

    def term_frequencies(self, term: str) -> tuple[int, int]:
        """(df, F) of a term in the statistics this index scores with."""
        df_own, cf_own, _, _ = self._own_statistics()
        j = self.postings.vocab.get(term)
        df = int(df_own[j]) if j is not None else 0
        cf = int(cf_own[j]) if j is not None else 0
        if self.background is not None:
            df += self.background.df.get(term, 0)
            cf += self.background.cf.get(term, 0)
        for extra in self.extras:
            if term in extra:
                df += 1
                cf += extra[term]
        return df, cf

    # -- scoring ----------------------------------------------------------------------------------
    def score(self, query: str, model: WeightingModel) -> np.ndarray:
        """Scores of every document (base documents, then extras) for ``query``."""
        return self.score_terms(text_pipeline.query_terms(query), model)

    def score_terms(
        self, entries: Sequence[tuple[str, float]], model: WeightingModel
    ) -> np.ndarray:
        """Scores for already-parsed query terms ``(term, keyFrequency)``: each entry adds its
        model weight to the documents in its postings."""
        scores = np.zeros(len(self), dtype=np.float64)
        if not entries:
            return scores
        num_docs, num_tokens = self.collection_size()
        avg_doc_len = num_tokens / num_docs if num_docs else 0.0
        lengths = np.concatenate(
            [
                self.postings.doc_lengths.astype(np.float64),
                np.array([sum(e.values()) for e in self.extras], dtype=np.float64),
            ]
        )
        base = self.num_base_docs
        for term, key_frequency in entries:
            df, cf = self.term_frequencies(term)
            if df == 0:
                continue  # "Term Not Found": Terrier skips it
            docs, tfs = self.postings.postings(term)
            extra_docs = [i for i, e in enumerate(self.extras) if term in e]
            if extra_docs:
                docs = np.concatenate([docs, base + np.asarray(extra_docs, dtype=np.int64)])
                tfs = np.concatenate([tfs, [float(self.extras[i][term]) for i in extra_docs]])
            if len(docs) == 0:
                continue
            stats = TermStatistics(
                float(num_docs), avg_doc_len, float(df), float(cf), float(key_frequency)
            )
            scores[docs] += model.weight(tfs, lengths[docs], stats)
        return scores


class StatisticsScorer(Protocol):
    """What injecting an answer with D_q's statistics uses of a ranker that declares
    "statistics": ``build_index`` (D_q as a ``LexicalIndex`` with the ranker's statistics, the
    recomputed mode rescoring it with each answer counted), ``model`` (its term weights, also for
    an answer scored against frozen statistics) and ``background`` (corpus statistics with
    stats=collection, None when the statistics are D_q's own). The ``stats`` and ``backend``
    parameters, when declared, choose recomputed or frozen statistics (``backend`` other than
    python: no incremental index, D_q re-ranked in full per answer)."""

    model: TermWeighting

    @property
    def background(self) -> CorpusStatistics | None: ...

    def build_index(
        self, texts: Iterable[str], docnos: Iterable[str] | None = None
    ) -> LexicalIndex: ...


# -- back-ends other than python -----------------------------------------------------------------
def _pyterrier_home() -> Path:
    # like pt.io.pyterrier_home(), without creating the folder
    return Path(os.environ.get("PYTERRIER_HOME", os.path.expanduser("~/.pyterrier")))


def terrier_available() -> tuple[bool, str]:
    """Whether PyTerrier's Java Terrier can start here: Java, and the terrier-assemblies and
    terrier-python-helper jars already downloaded (Maven Central may not be reachable).
    Never raises, never starts the JVM."""
    try:
        import pyterrier as pt

        if pt.java.started():
            return True, ""
        if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
            return False, "no Java runtime (java on PATH or JAVA_HOME)"
        home = _pyterrier_home()
        if not glob(str(home / "terrier-assemblies-*jar-with-dependencies.jar")):
            return False, (
                f"no terrier-assemblies jar in {home} (PyTerrier downloads it from "
                "Maven Central on first use)"
            )
        if not glob(str(home / "terrier-python-helper-*.jar")):
            return False, f"no terrier-python-helper jar in {home}"
        return True, ""
    except Exception as error:  # an availability check reports, it does not fail
        return False, f"cannot check for Terrier: {error}"


def pisa_available() -> tuple[bool, str]:
    """Whether pyterrier-pisa is installed (without importing its native library)."""
    import importlib.util

    if importlib.util.find_spec("pyterrier_pisa") is None:
        return False, "pyterrier-pisa is not installed"
    return True, ""


def _pisa_scores(
    term_lists: Sequence[Sequence[str]], query: str, model: WeightingModel
) -> np.ndarray:
    """PISA's scores of one D_q for ``query``, on an index of our terms (no stemming or
    stopwords on PISA's side); documents PISA does not retrieve score 0."""
    import pyterrier_pisa

    weights: dict[str, float] = {}
    for term, key_frequency in text_pipeline.query_terms(query):
        weights[term] = weights.get(term, 0.0) + key_frequency
    scores = np.zeros(len(term_lists), dtype=np.float64)
    if not weights or not term_lists:
        return scores
    with tempfile.TemporaryDirectory(prefix="nrp-pisa-") as folder:
        index = pyterrier_pisa.PisaIndex(
            str(Path(folder) / "index"), stemmer="none", stops="none", text_field="text"
        )
        index.index(
            [{"docno": str(i), "text": " ".join(terms)} for i, terms in enumerate(term_lists)]
        )
        if isinstance(model, BM25):
            retriever = index.bm25(
                k1=model.k1,
                b=model.b,
                num_results=len(term_lists),
                query_weighted=True,
                toks_scale=1.0,
            )
        else:
            retriever = index.dph(num_results=len(term_lists), query_weighted=True, toks_scale=1.0)
        result = retriever(pd.DataFrame({"qid": ["q"], "query_toks": [weights]}))
    scores[result["docno"].astype(int).to_numpy()] = result["score"].to_numpy(dtype=np.float64)
    return scores


# -- rankers -------------------------------------------------------------------------------------
class LexicalRanker(Ranker):
    """Re-ranks D_q with a Terrier weighting model. Subclasses fix the model."""

    name: ClassVar[str] = "lexical"
    # an answer changes D_q's statistics (stats=query) or is scored against them (frozen)
    injection: ClassVar[str] = "statistics"
    model_class: ClassVar[type] = TfIdf
    depends_on_candidate_set: bool = True

    def __init__(
        self,
        params: Mapping[str, Any] | None = None,
        corpus: pd.DataFrame | CorpusStatistics | None = None,
    ):
        defaults = {key: p.default for key, p in _params_for(self.name).items()}
        merged = {**defaults, **dict(params or {})}
        if merged.get("collection") == "":
            merged["collection"] = None
        super().__init__(merged)
        self.model: WeightingModel = self.model_class(
            **{k: float(merged[k]) for k in ("k1", "b", "k3") if k in merged},
            **({"formula": merged["formula"]} if "formula" in merged else {}),
        )
        stats, backend = merged["stats"], merged["backend"]
        formula = merged.get("formula")
        if backend == "pisa" and formula == TERRIER:
            raise ConfigError(
                f"{self.name}: backend=pisa computes PISA's formula (never negative); "
                "formula=terrier needs backend=python"
            )
        if stats not in ("query", "collection"):
            raise ConfigError(f"{self.name}: stats must be 'query' or 'collection', not {stats!r}")
        # With statistics over a fixed corpus a score no longer depends on the rest of D_q.
        self.depends_on_candidate_set = stats == "query"
        self._corpus = corpus
        self._background: CorpusStatistics | None = (
            corpus if isinstance(corpus, CorpusStatistics) else None
        )
        if backend == "terrier":
            ok, reason = terrier_available()
            if not ok:
                raise ConfigError(f"{self.name}: backend=terrier is not available here: {reason}")
            if isinstance(self.model, BM25) and self.model.k3 != 8.0:
                raise ConfigError(f"{self.name}: Terrier's BM25 has k3 fixed at 8")
            if formula not in (None, TERRIER):
                raise ConfigError(
                    f"{self.name}: backend=terrier computes Terrier's own formula; give "
                    f"{self.name}:backend=terrier,formula=terrier"
                )
        elif backend == "pisa":
            if isinstance(self.model, TfIdf):
                raise ConfigError("tfidf has no PISA back-end (PISA offers bm25 and dph)")
            if stats != "query":
                raise ConfigError(f"{self.name}: backend=pisa supports stats=query only")
            ok, reason = pisa_available()
            if not ok:
                raise ConfigError(f"{self.name}: backend=pisa is not available here: {reason}")

    # -- statistics -------------------------------------------------------------------------------
    @property
    def background(self) -> CorpusStatistics | None:
        """Corpus statistics for stats=collection (built on first use), None for stats=query."""
        if self.params["stats"] != "collection":
            return None
        if self._background is None:
            self._background = CorpusStatistics.from_frame(self._corpus_frame())
        return self._background

    def bind_collection(self, collection: Collection) -> None:
        """stats=collection without an explicit corpus: the documents of the collection ranked."""
        super().bind_collection(collection)  # the query field
        if self.params["stats"] != "collection" or self.params.get("collection"):
            return
        if self._corpus is None or getattr(self, "_bound_to", None) is not None:
            # bound (again) to a collection: its documents, unless a corpus frame was given
            fingerprint = (
                collection.meta.get("fingerprint")
                if hasattr(collection, "meta")
                else id(collection)
            )
            if getattr(self, "_bound_to", None) != fingerprint:
                self._corpus, self._background, self._bound_to = collection.docs, None, fingerprint

    def _corpus_frame(self) -> pd.DataFrame:
        corpus = self._corpus
        if isinstance(corpus, pd.DataFrame):
            return corpus
        if not self.params.get("collection"):
            raise ConfigError(
                f"{self.name}: stats=collection needs the corpus: collection=NAME (an ingested "
                "collection), a corpus frame passed to the constructor, or bind_collection()"
            )
        from nrp.collection.collection import Collection

        return Collection.load(self.params["collection"]).docs

    def model_checksum(self) -> str:
        """The text pipeline's id, and with stats=collection the corpus' checksum: scores
        change when either does."""
        background = self.background
        return text_pipeline.PIPELINE_ID + (f"/{background.checksum}" if background else "")

    def build_index(
        self, texts: Iterable[str], docnos: Iterable[str] | None = None
    ) -> LexicalIndex:
        """The index of one D_q with this ranker's statistics (see ``LexicalIndex``)."""
        return LexicalIndex.from_texts(texts, self.background, docnos)

    # -- scoring ----------------------------------------------------------------------------------
    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        scores = np.zeros(len(frame), dtype=np.float64)
        for rows in frame.groupby("qid", sort=False).indices.values():
            group = frame.iloc[rows]
            # one document per docno, as an index holds it; repeated rows share its score
            docnos = group["docno"].astype(str)
            first = ~docnos.duplicated().to_numpy()
            unique_docnos = docnos[first].tolist()
            position = {d: i for i, d in enumerate(unique_docnos)}
            texts = group["text"].fillna("").astype(str)[first].tolist()
            query = str(group["query"].iloc[0])
            doc_scores = self._score_query(query, texts, unique_docnos)
            scores[rows] = doc_scores[[position[d] for d in docnos]]
        return scores

    def _score_query(self, query: str, texts: list[str], docnos: list[str]) -> np.ndarray:
        backend = self.params["backend"]
        if backend == "pisa":
            return _pisa_scores([text_pipeline.analyse(t) for t in texts], query, self.model)
        if backend == "terrier":
            return self._terrier_scores(query, texts, docnos)
        return self.build_index(texts, docnos).score(query, self.model)

    def _terrier_scores(self, query: str, texts: list[str], docnos: list[str]) -> np.ndarray:
        """PyTerrier's TextScorer over one D_q (untested here: needs the Terrier jar). The
        query goes in as its EnglishTokeniser tokens, which Terrier's query parser accepts."""
        import pyterrier as pt

        if not pt.java.started():
            pt.java.init()
        controls: dict[str, str] = {}
        properties: dict[str, str] = {}
        if isinstance(self.model, TfIdf):
            controls = {"tf_idf.k_1": str(self.model.k1), "tf_idf.b": str(self.model.b)}
        elif isinstance(self.model, BM25):
            controls = {"c": str(self.model.b)}
            properties = {"bm25.k_1": str(self.model.k1)}
        background_index = None
        if self.params["stats"] == "collection":
            background_index = self._terrier_background_index()
        scorer = pt.terrier.TextScorer(
            body_attr="text",
            wmodel=self.model.name,
            controls=controls,
            properties=properties,
            background_index=background_index,
        )
        frame = pd.DataFrame(
            {
                "qid": "q",
                "docno": docnos,
                "text": texts,
                "query": " ".join(text_pipeline.english_tokens(query)),
            }
        )
        result = scorer.transform(frame)
        by_docno = dict(zip(result["docno"].astype(str), result["score"], strict=True))
        return np.array([by_docno.get(d, 0.0) for d in docnos], dtype=np.float64)

    def _terrier_background_index(self) -> Any:
        if getattr(self, "_terrier_index", None) is None:
            import pyterrier as pt

            corpus = self._corpus_frame()
            self._terrier_folder = tempfile.mkdtemp(prefix="nrp-terrier-")
            indexer = pt.terrier.IterDictIndexer(self._terrier_folder, overwrite=True)
            self._terrier_index = indexer.index(
                corpus[["docno", "text"]].fillna("").astype(str).to_dict("records")
            )
        return self._terrier_index


class TfIdfRanker(LexicalRanker):
    name: ClassVar[str] = "tfidf"
    model_class: ClassVar[type] = TfIdf


class BM25Ranker(LexicalRanker):
    name: ClassVar[str] = "bm25"
    model_class: ClassVar[type] = BM25


class DPHRanker(LexicalRanker):
    name: ClassVar[str] = "dph"
    model_class: ClassVar[type] = DPH


# -- registry ------------------------------------------------------------------------------------
_STATS = Param(
    str,
    "query",
    "statistics (N, avgdl, df, F) over D_q of the query (as the source "
    "study: one index per query) or over the whole collection",
    choices=("query", "collection"),
)
_COLLECTION = Param(
    str, "", "with stats=collection: the ingested collection whose documents give the statistics"
)
_FORMULA = Param(
    str,
    NONNEGATIVE,
    "nonnegative: no query term counts against a document (bm25: Lucene's idf log2(1 + "
    "(N-df+0.5)/(df+0.5)); dph: each term's weight floored at 0); terrier: Terrier's own formula",
    choices=(NONNEGATIVE, TERRIER),
)
#: the largest k1 and k3: far past any saturation a tuning finds (0.5-3), and small enough that
#: ``tf * (k + 1)`` stays a finite number (at 1e308 it overflowed: every score NaN)
MAX_SATURATION = 1000.0
_K1 = Param(float, 1.2, "k1, term frequency saturation", minimum=0, maximum=MAX_SATURATION)
_B = Param(float, 0.75, "b, document length normalisation", minimum=0, maximum=1)


def _backend(choices: tuple[str, ...]) -> Param:
    return Param(
        str,
        "python",
        "python (Terrier's formulas, no Java), terrier (PyTerrier's Java "
        "Terrier, needs its jar), pisa (PISA's own formulas, cross-check)",
        choices=choices,
    )


_PARAMS: dict[str, dict[str, Param]] = {
    "tfidf": {
        "k1": _K1,
        "b": _B,
        "stats": _STATS,
        "collection": _COLLECTION,
        "backend": _backend(("python", "terrier")),
        **query_params(),
    },
    "bm25": {
        "k1": _K1,
        "b": _B,
        "k3": Param(
            float, 8.0, "k3, query term frequency saturation", minimum=0, maximum=MAX_SATURATION
        ),
        "formula": _FORMULA,
        "stats": _STATS,
        "collection": _COLLECTION,
        "backend": _backend(("python", "terrier", "pisa")),
        **query_params(),
    },
    "dph": {
        "formula": _FORMULA,
        "stats": _STATS,
        "collection": _COLLECTION,
        "backend": _backend(("python", "terrier", "pisa")),
        **query_params(),
    },
}


def _params_for(name: str) -> dict[str, Param]:
    return _PARAMS[name]


register(
    RankerInfo(
        name="tfidf",
        description="Terrier TF_IDF: Robertson tf x log2(N/df + 1), Terrier's English "
        "tokeniser, stopwords and Porter stemmer; statistics over D_q (stats=query) or the "
        "collection",
        backend="python (terrier optional)",
        build=lambda params: TfIdfRanker(params),
        params=_PARAMS["tfidf"],
    )
)

register(
    RankerInfo(
        name="bm25",
        description="BM25 as Terrier's (k3 query factor, Terrier's text pipeline) with Lucene's "
        "idf log2(1+(N-df+0.5)/(df+0.5)), never negative (formula=terrier: Terrier's "
        "log2((N-df+0.5)/(df+0.5))); statistics over D_q (stats=query) or the collection",
        backend="python (terrier, pisa optional)",
        build=lambda params: BM25Ranker(params),
        params=_PARAMS["bm25"],
    )
)

register(
    RankerInfo(
        name="dph",
        description="Terrier DPH: parameter-free hypergeometric DFR model, Terrier's text "
        "pipeline, each term's weight floored at 0 (formula=terrier: unfloored); statistics "
        "over D_q (stats=query) or the collection",
        backend="python (terrier, pisa optional)",
        build=lambda params: DPHRanker(params),
        params=_PARAMS["dph"],
    )
)
