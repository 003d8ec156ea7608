"""What every ranker is: a PyTerrier transformer that scores (qid, query, docno, text) rows.

A ranker re-ranks a given candidate set (D_q): ``transform`` takes a result frame with query and
text and returns it with ``score`` and ``rank``. Rankers are built from a spec string through the
registry (``nrp.rankers.registry``); their ``fingerprint`` (name, parameters, model checksum) keys
the score cache, so a second run computes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyterrier as pt
from pyterrier.model import add_ranks

REQUIRED_COLUMNS = ("qid", "query", "docno", "text")


class Ranker(pt.Transformer):
    """Base class. Subclasses implement ``score_frame`` (scores in row order).

    ``depends_on_candidate_set``: True when a document's score depends on the other documents of
    its query (lexical models with statistics over D_q); the cache then computes whole queries.
    """

    name: ClassVar[str] = "ranker"
    depends_on_candidate_set: bool = (
        False  # an instance may set it (lexical stats=query|collection)
    )
    # parameters that change how scores are computed, not what they are: left out of the
    # fingerprint, so a new batch size or a quieter run still finds its cached scores
    SCORE_NEUTRAL_PARAMS: ClassVar[frozenset[str]] = frozenset(
        {"batch", "device", "verbose", "workers", "progress"}
    )

    def __init__(self, params: Mapping[str, Any] | None = None):
        self.params: dict[str, Any] = dict(params or {})

    # -- identity -----------------------------------------------------------------------------
    def model_checksum(self) -> str:
        """Checksum of the model files the scores depend on ('' for models without files)."""
        return ""

    def fingerprint(self) -> str:
        params = {k: v for k, v in self.params.items() if k not in self.SCORE_NEUTRAL_PARAMS}
        payload = json.dumps(
            {"name": self.name, "params": _jsonable(params), "model": self.model_checksum()},
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:20]

    def spec(self) -> str:
        """The spec string that rebuilds this ranker: its name and the parameters that differ
        from the registry's defaults (all parameters for a ranker the registry does not know),
        leaving out those that do not change scores (batch, device, ...)."""
        from nrp.rankers.registry import all_rankers

        info = all_rankers().get(self.name)
        defaults = {k: p.default for k, p in info.params.items()} if info else {}
        shown = {
            k: v
            for k, v in sorted(self.params.items())
            if v is not None
            and k not in self.SCORE_NEUTRAL_PARAMS
            and (k not in defaults or defaults[k] != v)
        }
        params = ",".join(f"{k}={v}" for k, v in shown.items())
        return f"{self.name}:{params}" if params else self.name

    def __str__(self) -> str:
        return self.spec()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec()}>"

    @property
    def score_tolerance(self) -> float:
        """Relative tolerance under which two of this ranker's scores count as tied
        (``nrp.nrp.ties``). 0, exact, for rankers without a floating-point model; a ranker that
        runs one declares a ``dtype`` parameter and gets that precision's tolerance
        (``nrp.rankers.device.SCORE_TOLERANCE``), because its scores move with the batch."""
        dtype = self.params.get("dtype")
        if dtype is None:
            return 0.0
        from nrp.rankers.device import SCORE_TOLERANCE

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


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def checksum_path(
    path: str | Path,
    patterns: tuple[str, ...] = (
        "*.json",
        "*.safetensors",
        "*.bin",
        "*.model",
        "*.txt",
        "*.pt",
        "*.gguf",
    ),
) -> str:
    """SHA-256 over a model folder's (or file's) weight and config files, names included.

    Hub ids (not a local path) are returned as given: their revision is what identifies them.
    """
    path = Path(path)
    if not path.exists():
        return f"hub:{path}"
    files = (
        [path]
        if path.is_file()
        else sorted({f for pattern in patterns for f in path.rglob(pattern) if f.is_file()})
    )
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode())
        with open(file, "rb") as handle:
            for block in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:20]
