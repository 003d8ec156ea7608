"""What every ranker is: a PyTerrier transformer that scores (qid, query, docno, text) rows.

A ranker re-ranks a given candidate set (D_q): ``transform`` takes a result frame with query and
text and returns it with ``score`` and ``rank`` (0-based), sorted as PyTerrier's retrievers sort
a ranking: each query's rows best first, queries in the order they first appear, tied scores in
the order given (``sort_ranked``). ``ranked_in_order`` gives the same rows in the order given,
which is what nrp's own engines read by position. Rankers are built from a spec string through the
registry (``nrp.rankers.registry``); their ``fingerprint`` (name, parameters, model checksum) keys
the score cache, so a second run computes nothing. Parameters, fingerprint and spec string are
those of every component (``nrp.components.Component``, shared with the evaluators).

Each ranker declares how an answer is injected among D_q (``injection``), so that the positioning
code (``nrp.positioning.injection``) never asks which class a ranker is:

- ``"pointwise"``: a row's score does not depend on the other rows (dense, monoT5, ColBERT,
  random). D_q's cached scores stand; an answer is one more row. A ranker that declares it but
  sets ``depends_on_candidate_set`` is re-ranked in full for every answer (exact, slower).
- ``"statistics"``: scores use statistics of the rows ranked together (lexical models: N, avgdl,
  df over D_q with ``stats=query``, or over a corpus with ``stats=collection``). The ranker's
  ``stats`` and ``backend`` parameters say whether an answer's statistics are recomputed
  incrementally, frozen, or the set re-ranked in full. Such a ranker is a ``StatisticsScorer``
  (``build_index``, ``model``, ``background``), whatever its class.
- ``"pairwise"``: a pointwise first stage, then pairs of its top k compared (duoT5). Such a
  ranker is a ``PairwiseScorer`` (``mono``, ``pair_scorer``, ``score_pairs``, ``rerank``,
  ``pair_fingerprint``, and ``k`` in its parameters).

A ranker that declares "statistics" or "pairwise" without what its Protocol names is refused
with a ``ConfigError`` naming the missing members (``missing_members``), before any answer is
positioned.

Query formulations. A topic may have several query texts (LiveQA-Med: the consumer's message,
the NIST paraphrase, the summary; CLEF: query and narrative; ``Collection.query_fields``). A
ranker that declares the shared ``query`` parameter (``query_params()``) reads the field it names
(``dense:query=paraphrase``) instead of the topic's query. It happens in one place:
``bind_collection`` looks the field's texts up (an unknown field is an error naming the known
ones), and ``formulate(frame)`` puts them in the ``query`` column of any rows of the collection's
topics. ``transform`` and ``CachedRanker`` formulate what they are given; the engines that call
``score_frame`` themselves (validation's executor partitions, NRP's injection) formulate D_q once,
and an injected answer takes its query from D_q's rows, so it is ranked with the same field as
D_q. The default, ``query=query``, changes nothing: it is left out of the spec and of the
fingerprint, so rankers keep their names and cached scores.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import pandas as pd
import pyterrier as pt
from pyterrier.model import add_ranks

from nrp.collection.collection import DEFAULT_QUERY_FIELD
from nrp.components import Component
from nrp.errors import ConfigError, NrpError
from nrp.spec import Param
from nrp.tables import require_columns

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.collection.collection import Collection

REQUIRED_COLUMNS = ("qid", "query", "docno", "text")
#: how a ranker's answers are injected among D_q (see the module docstring)
INJECTION_KINDS = ("pointwise", "statistics", "pairwise")
#: the one declaration of the shared ``query`` parameter (``query_params``)
QUERY_PARAM = Param(
    str,
    DEFAULT_QUERY_FIELD,
    "topic field read as the query: query, narrative, or another field of the collection "
    "(nrp info lists them; a topic without it keeps its query)",
)


def query_params() -> dict[str, Param]:
    """``query``: the topic field a ranker reads as its query, as every text ranker declares it
    (``**query_params()`` in its RankerInfo's params)."""
    return {"query": QUERY_PARAM}


class Ranker(Component, pt.Transformer):
    """Base class. Subclasses implement ``score_frame`` (scores in row order).

    ``depends_on_candidate_set``: True when a document's score depends on the other documents of
    its query (lexical models with statistics over D_q); the cache then computes whole queries.
    ``injection``: one of ``INJECTION_KINDS``, checked when the class is defined.
    """

    name: ClassVar[str] = "ranker"
    injection: ClassVar[str] = "pointwise"
    depends_on_candidate_set: bool = False  # an instance may set it (lexical stats=query)
    # parameters that change how scores are computed, not what they are: left out of the
    # fingerprint and of the spec, so a new batch size or a quieter run still finds its cached
    # scores and shows the same name in result tables
    SCORE_NEUTRAL_PARAMS: ClassVar[frozenset[str]] = frozenset(
        {"batch", "device", "verbose", "workers", "progress"}
    )
    SHORT_SPEC_OMITS: ClassVar[frozenset[str]] = SCORE_NEUTRAL_PARAMS

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.injection not in INJECTION_KINDS:
            raise TypeError(
                f"{cls.__name__}.injection is {cls.injection!r}; "
                f"declare one of {', '.join(INJECTION_KINDS)}"
            )

    def declared_params(self) -> Mapping[str, Param] | None:
        from nrp.rankers.registry import all_rankers

        info = all_rankers().get(self.name)
        return info.params if info is not None else None

    @property
    def score_tolerance(self) -> float:
        """Relative tolerance under which two of this ranker's scores count as tied
        (``nrp.ranks``). 0, exact, for rankers without a floating-point model; a
        ranker that runs one declares a ``dtype`` parameter and gets that precision's tolerance
        (``nrp.models.device.SCORE_TOLERANCE``), because its scores move with the batch."""
        dtype = self.params.get("dtype")
        if dtype is None:
            return 0.0
        from nrp.models.device import SCORE_TOLERANCE

        return SCORE_TOLERANCE.get(str(dtype).lower(), SCORE_TOLERANCE["fp32"])

    def floors(self, scores: np.ndarray) -> np.ndarray:
        """Which of ``scores`` (this ranker's) put their text on its floor, below every text it
        lets through whatever the text says: a guard's flag (``nrp.rankers.guard``). A ranker
        that only orders texts floors none. Validation counts the judged answers a ranker
        floors: what its gate costs real answers."""
        return np.zeros(np.shape(scores), dtype=bool)

    def flags(self, frame: pd.DataFrame) -> np.ndarray:
        """Which rows of ``frame`` (qid, query, docno, text) this ranker's gate takes for no
        real answer (a guard's detectors); a ranker without a gate flags none. A flag that costs
        a text its place shows in ``floors``; validation reports both for real answers."""
        return np.zeros(len(frame), dtype=bool)

    def guarded(self) -> Ranker | None:
        """The ranker whose order this one keeps for the texts it lets through (a guard's
        ranker), or None: validation sets real answers' NRP under it alone beside their NRP
        under this one."""
        return None

    def cross_fitted_floors(self, folds: int, seed: int) -> tuple[int, int] | None:
        """For a gate calibrated on the bound collection's judged answers: (judged answers, of
        them floored) when each of ``folds`` parts of the questions (drawn with ``seed``) is
        judged with the thresholds calibrated on the other parts; None for a ranker without
        such a gate."""
        return None

    # -- the query field -----------------------------------------------------------------------
    @property
    def query_field(self) -> str:
        """The topic field this ranker reads as its query (``query`` unless its spec names
        another through the shared ``query`` parameter)."""
        return str(self.params.get("query") or DEFAULT_QUERY_FIELD)

    def identity(self) -> dict[str, Any]:
        """The component's identity, less ``query=query``: a ranker that reads the topic's
        query keeps the fingerprint (and the cached scores) it had before fields existed."""
        identity = super().identity()
        if self.query_field == DEFAULT_QUERY_FIELD:
            identity["params"].pop("query", None)
        return identity

    def formulate(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with the ``query`` column holding this ranker's query field for the rows
        of the bound collection's topics (other rows, and every row for ``query=query``, as
        given). Idempotent, so each caller may apply it."""
        if self.query_field == DEFAULT_QUERY_FIELD or frame.empty:
            return frame
        texts = getattr(self, "_query_texts", None)
        if texts is None:
            raise NrpError(
                f"ranker {self.spec()} reads topic field {self.query_field!r}: bind it to a "
                "collection first (bind_collection)"
            )
        mapped = frame["qid"].astype(str).map(texts)
        return frame.assign(query=mapped.where(mapped.notna(), frame["query"]))

    def bind_collection(self, collection: Collection) -> None:
        """Called with the collection whose D_q this ranker will rank, before any scoring: the
        base looks up the texts of the query field. Rankers that need more collection-wide data
        (lexical stats=collection) take it here too, and call ``super().bind_collection``."""
        if self.query_field == DEFAULT_QUERY_FIELD:
            return
        try:  # an unknown field: the collection's error, which names the known ones
            self._query_texts = collection.topic_texts(self.query_field)
        except ConfigError as error:
            raise ConfigError(f"ranker {self.spec()}: {error}") from None

    # -- parts --------------------------------------------------------------------------------
    def parts(self) -> tuple[Ranker, ...]:
        """The rankers this one is made of, in the order its spec names them (a fusion's
        rankers, the ranker a guard guards, duoT5's monoT5 first stage); none for a ranker
        that scores by itself. A composite ranker declares them, so whoever checks a ranker
        through and through (the service's checks of the models and files a spec may load)
        reads them here instead of searching the ranker's attributes."""
        return ()

    def collection_work(self) -> str | None:
        """What scoring with this bound ranker would first compute over the whole collection,
        once, before the first answer (a guard's calibration on every judged answer): a short
        description, or None when nothing of the kind is pending. The service does not make a
        synchronous request wait for it. A composite ranker answers for its parts."""
        for part in self.parts():
            found = part.collection_work()
            if found is not None:
                return found
        return None

    # -- scoring ------------------------------------------------------------------------------
    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        raise NotImplementedError

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        """``inp`` scored and ranked, sorted as PyTerrier's retrievers return a ranking
        (``sort_ranked``), so a ``% k`` cut or a step that reads each query's first row sees
        the best documents."""
        return sort_ranked(self.ranked_in_order(inp))

    def ranked_in_order(self, inp: pd.DataFrame) -> pd.DataFrame:
        """``inp`` (index reset) with ``score`` and ``rank``, rows in the order given: what
        nrp's own engines read by position. A subclass that adds columns overrides this."""
        require_columns(inp, REQUIRED_COLUMNS, f"ranker {self.spec()}: input")
        if inp.empty:
            return inp.assign(score=pd.Series(dtype=float), rank=pd.Series(dtype=int))
        frame = self.formulate(inp.reset_index(drop=True))
        scores = np.asarray(self.score_frame(frame), dtype=float)
        return ranked_rows(frame, scores)


def ranked_rows(frame: pd.DataFrame, scores: np.ndarray) -> pd.DataFrame:
    """``frame`` with ``score`` and a 0-based ``rank`` per query (PyTerrier's ``add_ranks``:
    best score first, tied scores in the order given), rows in the order given."""
    out = frame.drop(columns=["score", "rank"], errors="ignore").assign(score=scores)
    return add_ranks(out)


def sort_ranked(frame: pd.DataFrame) -> pd.DataFrame:
    """A frame with ``qid`` and ``rank`` sorted as a PyTerrier ranking: queries in the order
    they first appear, each by rank (score descending, ties in the order given). Index labels
    stay with their rows (as PyTerrier's ``add_ranks`` sorts), so for a frame from
    ``ranked_in_order`` ``sort_index()`` gives the order given back."""
    if frame.empty:
        return frame
    query_order = pd.factorize(frame["qid"].astype(str))[0]
    return frame.iloc[np.lexsort((frame["rank"].to_numpy(), query_order))]


# -- what an injection strategy needs of a ranker (nrp.positioning.strategies) --------------------
class PairwiseScorer(Protocol):
    """What the pairwise injection uses of a ranker that declares "pairwise" (duoT5): ``mono``,
    the pointwise first stage (its scores of D_q are cached like any ranker's); ``params["k"]``,
    the size of the pairwise stage; ``score_pairs`` (log P(a more relevant than b) per row of
    ordered pairs); ``pair_scorer``, the callable ``rerank`` asks for pair scores (replaced
    while positioning by one that serves cached pairs); ``rerank(frame, first_stage_scores)``,
    the final scores; and ``pair_fingerprint()``, the scope of the pair cache."""

    mono: Ranker
    pair_scorer: Callable[[pd.DataFrame], np.ndarray]

    def score_pairs(self, pairs: pd.DataFrame) -> np.ndarray: ...

    def rerank(
        self, frame: pd.DataFrame, mono_scores: np.ndarray, include: np.ndarray | None = None
    ) -> np.ndarray: ...

    def pair_fingerprint(self) -> str: ...


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The attributes and methods a Protocol declares (its annotations and its own public
    names), in declaration order."""
    names = [*vars(protocol).get("__annotations__", {}), *vars(protocol)]
    return tuple(dict.fromkeys(n for n in names if not n.startswith("_")))


def missing_members(obj: object, protocol: type) -> list[str]:
    """The members of ``protocol`` that ``obj`` lacks. Looked up without running them
    (``inspect.getattr_static``): a property such as a lexical ranker's ``background`` may
    build corpus statistics when read."""
    absent = object()
    return [
        name
        for name in protocol_members(protocol)
        if inspect.getattr_static(obj, name, absent) is absent
    ]
