"""Full re-ranking, the reference and the fallback of every other strategy: as the source study's
scripts, per answer, D_q with the answer appended last re-ranked from scratch by
``ranker.transform`` (nothing cached). Exact for any ranker, and slower: chosen with
``full_rerank``, and for rankers no other strategy supports (a pointwise ranker whose scores
depend on the candidate set, a lexical ranker on the terrier or pisa back-end with recomputed
statistics)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd

from nrp.positioning.strategies.base import Strategy
from nrp.rankers.base import PairwiseScorer, Ranker, missing_members
from nrp.ranks import position


class FullTransform(Strategy):
    mode: ClassVar[str] = "full:transform"
    description: ClassVar[str] = (
        "reference: D_q plus the answer re-ranked from scratch per answer (ranker.transform)"
    )

    @classmethod
    def supports(cls, ranker: Ranker, *, frozen_stats: bool, full_rerank: bool) -> bool:
        return True

    def position(self, frame: pd.DataFrame) -> list[tuple]:
        """Per answer, D_q plus the answer re-ranked; strict = the answer's ``rank`` (exact
        rankers) or above + ties under the ranker's tolerance (neural rankers). A pairwise
        ranker's pair evaluations are counted through its ``pair_scorer``."""
        pairwise = self.ranker.injection == "pairwise" and not missing_members(
            self.ranker, PairwiseScorer
        )
        original = self.ranker.pair_scorer if pairwise else None
        if pairwise:

            def counting(pairs: pd.DataFrame) -> np.ndarray:
                self.state.counts.pair_evaluations += len(pairs)
                return original(pairs)

            self.ranker.pair_scorer = counting
        try:
            return [self._one(frame.iloc[[i]]) for i in range(len(frame))]
        finally:
            if pairwise:
                self.ranker.pair_scorer = original

    def _one(self, answer: pd.DataFrame) -> tuple:
        """D_q plus one answer (a one-row frame) re-ranked by ``ranker.ranked_in_order``
        (``transform``'s scores and ranks, rows in the order given)."""
        state = self.state
        qid, answer_id = str(answer["qid"].iloc[0]), str(answer["docno"].iloc[0])
        docs = state.dq[qid]
        ranked = self.ranker.ranked_in_order(pd.concat([docs, answer], ignore_index=True))
        state.counts.score_calls += 1
        state.counts.documents_scored += len(docs)
        state.counts.answers_scored += 1
        is_answer = (ranked["docno"].astype(str) == answer_id).to_numpy()
        score = float(ranked.loc[is_answer, "score"].iloc[0])
        doc_scores = ranked.loc[~is_answer, "score"].to_numpy(dtype=np.float64)
        above, ties = position(doc_scores, score, state.tolerance)
        docnos = ranked.loc[~is_answer, "docno"].astype(str).tolist()
        state.keep(answer_id, qid, score, doc_scores, docnos)
        # exact rankers: the rank add_ranks gave the appended answer (the tests check it equals
        # above + ties); with a tolerance, ties are not exact equalities that a sort could see,
        # and the same rule as the fast mode applies
        strict = (
            int(ranked.loc[is_answer, "rank"].iloc[0]) if state.tolerance == 0.0 else (above + ties)
        )
        return (answer_id, qid, score, above, ties, strict, len(docs))
