"""What every ranker is: a PyTerrier transformer that scores (qid, query, docno, text) rows.

A ranker re-ranks a given candidate set (D_q): ``transform`` takes a result frame with query and
text and returns it with ``score`` and ``rank``. Rankers are built from a spec string through the
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
  incrementally, frozen, or the set re-ranked in full.
- ``"pairwise"``: a pointwise first stage, then pairs of its top k compared (duoT5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyterrier as pt
from pyterrier.model import add_ranks

from nrp.components import Component
from nrp.spec import Param

REQUIRED_COLUMNS = ("qid", "query", "docno", "text")
#: how a ranker's answers are injected among D_q (see the module docstring)
INJECTION_KINDS = ("pointwise", "statistics", "pairwise")


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
        (``nrp.positioning.ties``). 0, exact, for rankers without a floating-point model; a
        ranker that runs one declares a ``dtype`` parameter and gets that precision's tolerance
        (``nrp.models.device.SCORE_TOLERANCE``), because its scores move with the batch."""
        dtype = self.params.get("dtype")
        if dtype is None:
            return 0.0
        from nrp.models.device import SCORE_TOLERANCE

        return SCORE_TOLERANCE.get(str(dtype).lower(), SCORE_TOLERANCE["fp32"])

    def bind_collection(self, collection: Any) -> None:
        """Called with the collection whose D_q this ranker will rank, before any scoring.
        Rankers that need collection-wide data (lexical stats=collection) take it here."""

    # -- scoring ------------------------------------------------------------------------------
    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        raise NotImplementedError

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        missing = [c for c in REQUIRED_COLUMNS if c not in inp.columns]
        if missing:
            raise ValueError(
                f"{self.spec()} needs columns {list(REQUIRED_COLUMNS)}; missing {missing}"
            )
        if inp.empty:
            return inp.assign(score=pd.Series(dtype=float), rank=pd.Series(dtype=int))
        frame = inp.reset_index(drop=True)
        scores = np.asarray(self.score_frame(frame), dtype=float)
        out = frame.drop(columns=["score", "rank"], errors="ignore").assign(score=scores)
        return add_ranks(out)
