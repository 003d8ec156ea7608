"""A ranker plug-in: the share of the query's distinct words that a document contains.

Pointwise (a row's score depends on that row alone), so nrp positions an answer among D_q with
D_q's cached scores plus one row for the answer. Walk-through: docs/extending.md.
"""

from __future__ import annotations

import re
from typing import ClassVar

import numpy as np
import pandas as pd

from nrp.rankers.base import Ranker
from nrp.rankers.registry import Param, RankerInfo, register

WORD = re.compile(r"\w+")


class QueryCoverage(Ranker):
    name: ClassVar[str] = "coverage"
    injection: ClassVar[str] = "pointwise"

    def words(self, text: str) -> set[str]:
        return set(WORD.findall(text.lower() if self.params["lowercase"] else text))

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        scores = []
        for query, text in zip(frame["query"], frame["text"].fillna(""), strict=True):
            wanted = self.words(str(query))
            found = wanted & self.words(str(text))
            scores.append(len(found) / len(wanted) if wanted else 0.0)
        return np.array(scores, dtype=float)


register(
    RankerInfo(
        name="coverage",
        description="share of the query's distinct words that the document contains",
        backend="python",
        build=QueryCoverage,
        params={"lowercase": Param(bool, True, "compare words in lower case")},
    )
)
