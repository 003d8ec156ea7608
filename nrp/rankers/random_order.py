"""``random``: the chance baseline of validation, a ranker that orders D_q at random.

Why a hash and not a random number generator: a document's score must not depend on which other
rows are scored with it, in which order or in which process, so that it can be cached per
(qid, docno) like any other ranker and the same seed gives the same order on every machine. The
score is the first 8 bytes of SHA-256 over ``"{seed}\\t{qid}\\t{docno}"`` read as a big-endian
integer and divided by 2**64: uniform in [0, 1), ties practically impossible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from nrp.rankers.base import Ranker
from nrp.rankers.registry import Param, RankerInfo, register


def random_score(seed: int, qid: str, docno: str) -> float:
    """The score of one document: a deterministic hash of (seed, qid, docno) in [0, 1)."""
    digest = hashlib.sha256(f"{seed}\t{qid}\t{docno}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class RandomOrder(Ranker):
    """Scores every document by ``random_score(seed, qid, docno)``; ignores query and text."""

    name: ClassVar[str] = "random"
    injection: ClassVar[str] = "pointwise"

    def __init__(self, params: Mapping[str, Any] | None = None):
        params = {"seed": 0, **dict(params or {})}
        params["seed"] = int(params["seed"])
        super().__init__(params)

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        seed = self.params["seed"]
        return np.array(
            [
                random_score(seed, str(qid), str(docno))
                for qid, docno in zip(frame["qid"], frame["docno"], strict=True)
            ],
            dtype=float,
        )


register(
    RankerInfo(
        name="random",
        description="random order of D_q (chance baseline): score = hash of (seed, qid, docno)",
        backend="python",
        build=lambda params: RandomOrder(params),
        params={"seed": Param(int, 0, "seed of the hash; another seed gives another order")},
    )
)
