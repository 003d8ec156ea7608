"""Pairwise injection (duoT5; any ranker declaring "pairwise" that is a ``PairwiseScorer``).

The first stage's (monoT5's) scores of D_q come from the score cache (its own scope, shared with
a ``monot5`` ranker of the same checkpoint); each answer's first-stage score is computed once.
As the ranker's ``transform`` would, the answer enters the pairwise stage only when its
first-stage score puts it into the top k of D_q plus the answer; it is then compared with the top
k-1 documents: 2(k-1) pair evaluations, all answers' pairs in one batch. Document-document pair
scores of each query's top k are scored once and kept in the pair cache
(``nrp.positioning.results_cache.PairCache``). Final scores come from the ranker's ``rerank``
itself, with its pair scorer serving the cached and batched pairs, so aggregation and
combination are the ranker's own code. Comparing every answer with the top k regardless of its
first-stage score (as ``rerank(include=...)`` allows) would be a different ranker from the one
validated: an answer in the pairwise stage always lands above every document outside it, so
r <= k for any answer, however poor."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd

from nrp.errors import ConfigError
from nrp.positioning.results_cache import PairCache
from nrp.positioning.strategies.base import InjectionState, Strategy, own_score_scope
from nrp.rankers.base import PairwiseScorer, Ranker
from nrp.rankers.t5 import ordered_pairs, pairs_against, top_k_mask

PairKey = tuple[str, str, str]  # qid, docno_a, docno_b


class PairwiseTopK(Strategy):
    mode: ClassVar[str] = "fast:duot5-top-k"
    description: ClassVar[str] = (
        "monoT5 of D_q cached; answer's monoT5 once; duoT5 pairs with the top k-1 documents "
        "when the answer reaches monoT5's top k; document pairs cached"
    )
    needs: ClassVar[type] = PairwiseScorer

    @classmethod
    def supports(cls, ranker: Ranker, *, frozen_stats: bool, full_rerank: bool) -> bool:
        return ranker.injection == "pairwise" and not full_rerank

    @classmethod
    def check(cls, ranker: Ranker) -> None:
        super().check(ranker)
        if "k" not in ranker.params:
            raise ConfigError(
                f"ranker {ranker.spec()} declares injection 'pairwise' but has no parameter k "
                "(the size of its pairwise stage; PairwiseScorer, nrp.rankers.base)"
            )

    @classmethod
    def cache_scopes(
        cls, ranker: Ranker, collection_fingerprint: str
    ) -> tuple[dict[str, str], str | None]:
        mono = ranker.mono  # type: ignore[attr-defined]
        pair_scope = PairCache.scope(collection_fingerprint, ranker.pair_fingerprint())  # type: ignore[attr-defined]
        return own_score_scope(mono, collection_fingerprint), pair_scope

    def __init__(self, state: InjectionState):
        super().__init__(state)
        self._pairs: dict[PairKey, float] = {}  # document-document pairs
        self._pairs_ready: set[str] = set()
        self._pair_scope_key: str | None = None

    def _pair_scope(self) -> str:
        if self._pair_scope_key is None:
            self._pair_scope_key = PairCache.scope(
                self.state.fingerprint, self.ranker.pair_fingerprint()
            )
        return self._pair_scope_key

    def _ensure_document_pairs(self, qids: list[str], mono: dict[str, np.ndarray]) -> None:
        """Pair scores among each query's first-stage top k documents: from the pair cache, the
        missing ones scored in one call and stored. Any top-k stage of D_q plus one answer
        needs only these (the top k, or the top k-1 and the answer)."""
        state, duo = self.state, self.ranker
        todo = [q for q in dict.fromkeys(qids) if q not in self._pairs_ready]
        if not todo:
            return
        if state.pair_cache is not None:
            self._pairs.update(state.pair_cache.lookup(self._pair_scope(), todo))
        needed = []
        for qid in todo:
            docs = state.dq[qid]
            top = docs[top_k_mask([qid] * len(docs), mono[qid], duo.params["k"])]
            needed.append(ordered_pairs(top))
        pairs = pd.concat(needed, ignore_index=True)
        keys = list(zip(pairs["qid"], pairs["docno_a"], pairs["docno_b"], strict=True))
        known = np.array([k in self._pairs for k in keys], dtype=bool)
        state.counts.pairs_from_cache += int(known.sum())
        missing = pairs[~known].reset_index(drop=True)
        if len(missing):
            fresh = [(*key, p) for key, p in self._score_pairs(missing).items()]
            self._pairs.update({(q, a, b): p for q, a, b, p in fresh})
            if state.pair_cache is not None:
                state.pair_cache.store(self._pair_scope(), fresh)
        self._pairs_ready.update(todo)

    def _score_pairs(self, pairs: pd.DataFrame) -> dict[PairKey, float]:
        """The pairs' log P(a more relevant than b), in one call, by pair key."""
        log_p = np.asarray(self.ranker.score_pairs(pairs), dtype=np.float64)
        self.state.counts.pair_evaluations += len(pairs)
        self.state.counts.score_calls += 1
        keys = zip(pairs["qid"], pairs["docno_a"], pairs["docno_b"], strict=True)
        return dict(zip(keys, log_p, strict=True))

    def position(self, frame: pd.DataFrame) -> list[tuple]:
        state, duo = self.state, self.ranker
        k = duo.params["k"]
        qids = frame["qid"].tolist()
        mono = state.scores_of_docs(qids, duo.mono)
        answer_mono = state.score_answers(frame, duo.mono)
        self._ensure_document_pairs(qids, mono)
        # which answers reach the pairwise stage, and the pairs they need: one batch for all
        stages, needed = [], []
        for i, qid in enumerate(qids):
            docs = state.dq[qid]
            both = pd.concat([docs, frame.iloc[[i]]], ignore_index=True)
            scores = np.append(mono[qid], answer_mono[i])
            in_stage = top_k_mask([qid] * len(both), scores, k)
            stages.append((both, scores))
            if in_stage[-1] and in_stage[:-1].any():
                needed.append(pairs_against(frame.iloc[[i]], docs[in_stage[:-1]]))
        answer_pairs = self._score_pairs(pd.concat(needed, ignore_index=True)) if needed else {}

        def serve(pairs: pd.DataFrame) -> np.ndarray:
            out = np.empty(len(pairs), dtype=np.float64)
            for j, key in enumerate(
                zip(
                    pairs["qid"].astype(str),
                    pairs["docno_a"].astype(str),
                    pairs["docno_b"].astype(str),
                    strict=True,
                )
            ):
                found = self._pairs.get(key, answer_pairs.get(key))
                if found is None:  # never expected: the stage is the one computed above
                    raise RuntimeError(f"duoT5 pair {key} was not prepared")
                out[j] = found
            return out

        original = duo.pair_scorer
        duo.pair_scorer = serve
        rows = []
        try:
            for (both, scores), answer_id, qid in zip(stages, frame["docno"], qids, strict=True):
                final = duo.rerank(both, scores)
                rows.append(state.row(answer_id, qid, final[-1], final[:-1]))
        finally:
            duo.pair_scorer = original
        return rows
