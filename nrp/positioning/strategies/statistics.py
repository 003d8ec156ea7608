"""What the declaration "statistics" and a ranker's parameters say about its injection: whether
the statistics an answer is scored with are frozen, and whether the ranker computes them in
Python (``StatisticsScorer``: an index to rescore incrementally) or on another back-end
(terrier, pisa: no incremental index)."""

from __future__ import annotations

from nrp.errors import NrpError
from nrp.rankers.base import Ranker


def declares_statistics(ranker: Ranker) -> bool:
    return ranker.injection == "statistics"


def frozen(ranker: Ranker, frozen_stats: bool) -> bool:
    """Frozen statistics: asked for, or always with ``stats=collection`` (an answer does not
    join the corpus the collection's statistics describe)."""
    return frozen_stats or ranker.params.get("stats") == "collection"


def python_backend(ranker: Ranker) -> bool:
    """The ranker computes its statistics in Python (the default when it declares no
    ``backend``)."""
    return ranker.params.get("backend", "python") == "python"


def require_python_backend(ranker: Ranker) -> None:
    """Frozen statistics are computed with the python back-end only."""
    if not python_backend(ranker):
        raise NrpError(
            f"{ranker.spec()}: frozen statistics (frozen_stats, or stats=collection) are "
            "computed with the python back-end only; use backend=python"
        )
