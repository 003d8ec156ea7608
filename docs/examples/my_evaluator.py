"""An evaluator plug-in: the share of a reference answer's words that the answer repeats.

Reference-based: an answer without references gets NaN (missing), never 0. Deterministic, so
the per-item cache may serve it. Walk-through: docs/extending.md.
"""

from __future__ import annotations

import math
import re
from typing import ClassVar

import pandas as pd

from nrp.evaluators.base import Evaluator, EvaluatorInfo, Param, register

WORD = re.compile(r"\w+")


class ReferenceRecall(Evaluator):
    name: ClassVar[str] = "ref_recall"
    needs_references: ClassVar[bool] = True

    def score_columns(self) -> list[str]:
        return ["ref_recall"]

    def words(self, text: str) -> set[str]:
        return {w for w in WORD.findall(text.lower()) if len(w) >= self.params["min_length"]}

    def recall(self, answer: str, references: tuple[str, ...]) -> float:
        """The best recall over the references (NaN without a usable reference)."""
        said = self.words(answer)
        kept = [words for words in map(self.words, references) if words]
        return max((len(words & said) / len(words) for words in kept), default=math.nan)

    def evaluate(self, items: pd.DataFrame) -> pd.DataFrame:
        pairs = zip(items["text"], items["references"], strict=True)
        return pd.DataFrame({"ref_recall": [self.recall(a, refs) for a, refs in pairs]})


register(
    EvaluatorInfo(
        name="ref_recall",
        description="share of the best reference's distinct words that the answer repeats",
        build=ReferenceRecall,
        params={"min_length": Param(int, 3, "ignore words shorter than this")},
        family="reference-based",
    )
)
