"""Pointwise injection (dense, monoT5, ColBERT, random: any ranker whose score of a row does not
depend on the other rows): D_q's scores come from the score cache (``CachedRanker``: computed
once, then served); the answers are scored as extra rows (docno = answer_id), all answers of a
batch in one ``score_frame`` call across queries: one model row per answer."""

from __future__ import annotations

from typing import ClassVar

import pandas as pd

from nrp.positioning.strategies.base import Strategy, own_score_scope
from nrp.rankers.base import Ranker


class Pointwise(Strategy):
    mode: ClassVar[str] = "fast:pointwise"
    description: ClassVar[str] = (
        "D_q scored once (score cache), each answer scored once as an extra row"
    )

    @classmethod
    def supports(cls, ranker: Ranker, *, frozen_stats: bool, full_rerank: bool) -> bool:
        # a ranker whose scores depend on the set in a way not declared: re-ranked in full
        return (
            ranker.injection == "pointwise"
            and not ranker.depends_on_candidate_set
            and not full_rerank
        )

    @classmethod
    def cache_scopes(
        cls, ranker: Ranker, collection_fingerprint: str
    ) -> tuple[dict[str, str], str | None]:
        return own_score_scope(ranker, collection_fingerprint), None

    def position(self, frame: pd.DataFrame) -> list[tuple]:
        state = self.state
        qids = frame["qid"].tolist()
        doc_scores = state.scores_of_docs(qids, self.ranker)
        answer_scores = state.score_answers(frame, self.ranker)
        return state.rows_against(frame["docno"].tolist(), qids, answer_scores, doc_scores)
