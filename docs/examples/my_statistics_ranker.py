"""A ranker plug-in whose scores use statistics of the rows ranked together: Okapi BM25 with N,
avgdl and df counted over D_q, on nrp's ``LexicalIndex``.

It declares injection "statistics" and subclasses none of nrp's lexical rankers: it has what
``StatisticsScorer`` (``nrp.rankers.lexical``) names, ``build_index`` (D_q as an index),
``model`` (term weights: nrp's BM25 formula here, or any object with ``weight(tf, dl, stats)``)
and ``background`` (None: no corpus, the statistics are D_q's own). nrp then positions an
answer by rescoring D_q with the answer counted in the statistics, D_q tokenised once, or, with
frozen statistics, scores the answer against D_q's. Walk-through: docs/extending.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import numpy as np
import pandas as pd

from nrp.rankers import text_pipeline
from nrp.rankers.base import Ranker
from nrp.rankers.lexical import BM25, LexicalIndex
from nrp.rankers.registry import Param, RankerInfo, register


class OkapiBM25(Ranker):
    name: ClassVar[str] = "okapi"
    injection: ClassVar[str] = "statistics"
    depends_on_candidate_set: ClassVar[bool] = True  # D_q's statistics: a score needs the others

    def __init__(self, params: dict):
        super().__init__(params)
        self.model = BM25(k1=params["k1"], b=params["b"])
        self.background = None  # statistics over D_q alone

    def build_index(
        self, texts: Iterable[str], docnos: Iterable[str] | None = None
    ) -> LexicalIndex:
        return LexicalIndex.from_texts(texts)

    def model_checksum(self) -> str:
        return text_pipeline.PIPELINE_ID  # scores change when the terms do

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        scores = np.zeros(len(frame), dtype=np.float64)
        for rows in frame.groupby("qid", sort=False).indices.values():
            group = frame.iloc[rows]
            index = self.build_index(group["text"].fillna("").astype(str))
            scores[rows] = index.score(str(group["query"].iloc[0]), self.model)
        return scores


register(
    RankerInfo(
        name="okapi",
        description="Okapi BM25 with statistics over D_q (nrp's BM25 formula on LexicalIndex)",
        backend="python",
        build=OkapiBM25,
        params={
            "k1": Param(float, 1.2, "k1, term frequency saturation", minimum=0),
            "b": Param(float, 0.75, "b, document length normalisation", minimum=0, maximum=1),
        },
    )
)
