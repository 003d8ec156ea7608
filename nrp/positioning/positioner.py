"""The positioning engine: where one ranker puts answers among D_q, served from the results cache
when it can, computed (here or on an executor) and stored when it cannot.

``Positioner`` is the one implementation behind every caller: ``score_answers`` (the CLI's
``nrp score``, ``nrp run``, the NRP evaluator) uses one per distinct ranker, and the service's
worker keeps one per (collection, ranker, options) for its jobs and its synchronous requests.
A positioner keeps its ``AnswerInjector`` (D_q's scores, lexical indexes, duoT5 pairs) across
calls, so positioning in batches costs what one call would.

- ``position(answers)``: positions of answers (answer_id, qid, text; text_sha optional, computed
  when missing and a results cache is used), the results cache first; the rest in batches of
  ``chunk_size`` answers here, or in per-query partitions on an executor, each batch stored as
  soon as it is done. Here, a neural ranker embeds the texts of up to ``STREAM_ANSWERS``
  answers (their queries, and D_q when no score cache holds it) in one stream first
  (``AnswerInjector.embedding_stream``), so its batches cost what one bare ``encode`` of the
  same texts costs; a vectorised strategy (``Strategy.whole_windows``: the lexical ones)
  positions those answers in one call, then they are stored and reported by batch as any
  other. Answer ids must be distinct within a call.
- ``position_now(answers)``: the same numbers computed here without the results cache (the
  service's synchronous path: a request's answers are not kept); ``position_rows`` takes and
  gives them as lists (no frames: a request of one answer costs its arithmetic).
"""

from __future__ import annotations

import pandas as pd

from nrp.executors.base import Executor
from nrp.positioning.injection import AnswerInjector, InjectionCounts
from nrp.positioning.job import PositionJob
from nrp.positioning.partitions import position_with_executor
from nrp.positioning.results_cache import POSITION_COLUMNS, text_sha
from nrp.progress import Progress, reporting

#: answers whose texts (with their queries and new D_q) a neural ranker embeds in one stream
#: (``AnswerInjector.embedding_stream``), in whole batches of ``chunk_size``: a few MiB of
#: vectors, and the length sort of a bare ``encode`` over thousands of texts
STREAM_ANSWERS = 8192


class Positioner:
    """One ranker positioning answers of one collection (module docstring)."""

    def __init__(self, job: PositionJob):
        self.job = job
        self.counts = InjectionCounts()
        self._injector: AnswerInjector | None = None

    @property
    def injector(self) -> AnswerInjector:
        """The in-process injector, built on first use (an executor run needs none here)."""
        if self._injector is None:
            job = self.job
            self._injector = AnswerInjector(
                job.collection,
                job.ranker,
                frozen_stats=job.options.frozen_stats,
                full_rerank=job.options.full_rerank,
                score_cache=job.caches.scores,
                pair_cache=job.caches.pairs,
                candidates=job.candidates,
            )
        return self._injector

    def position(
        self,
        answers: pd.DataFrame,
        executor: Executor | None = None,
        progress: Progress | None = None,
    ) -> tuple[pd.DataFrame, InjectionCounts]:
        """Positions of ``answers`` indexed by answer_id (``POSITION_COLUMNS`` less the id),
        and what this call computed (module docstring)."""
        job = self.job
        spec = job.ranker.spec()
        results = job.caches.results
        if results is not None:
            answers = _with_text_sha(answers)
        stored = (
            results.lookup(job.scope, answers)
            if results is not None
            else pd.DataFrame(columns=list(POSITION_COLUMNS))
        )
        counts = InjectionCounts(answers_from_results_cache=len(stored))
        todo = answers[~answers["answer_id"].isin(stored["answer_id"].astype(str))]
        if progress:
            progress(f"{spec}: {len(answers)} answers, {len(stored)} from the results cache")
        parts = [stored]
        if len(todo) and executor is not None:  # partitions computed elsewhere, stored here
            found_parts, found_counts = position_with_executor(job, todo, executor, progress)
            parts.extend(found_parts)
            counts.add(found_counts)
        elif len(todo):
            with reporting(progress):  # a model's batches say how far they are, too
                parts.extend(self._position_here(todo, progress, counts))
        self.counts.add(counts)
        out = pd.concat([p for p in parts if len(p)], ignore_index=True) if len(answers) else stored
        return out.drop_duplicates("answer_id").set_index("answer_id"), counts

    def position_now(self, answers: pd.DataFrame) -> pd.DataFrame:
        """Positions of ``answers`` (answer_id, qid, text) computed here, in their order, with
        nothing read from or stored in the results cache."""
        return self.injector.position(answers[["answer_id", "qid", "text"]])

    def position_rows(self, answer_ids: list[str], qids: list[str], texts: list) -> list[tuple]:
        """``position_now`` for answers given as lists (ids and qids as text): one
        ``POSITION_COLUMNS`` tuple per answer, in their order, without frames."""
        return self.injector.position_rows(answer_ids, qids, texts)

    def _position_here(
        self, todo: pd.DataFrame, progress: Progress | None, counts: InjectionCounts
    ) -> list[pd.DataFrame]:
        """``todo`` in batches of ``chunk_size``, each stored in the results cache when done."""
        injector, results = self.injector, self.job.caches.results
        size, spec = self.job.options.chunk_size, self.job.ranker.spec()
        before = injector.counts.as_dict()
        found_parts = []
        window = max(size, STREAM_ANSWERS // size * size)  # whole batches per stream
        for first in range(0, len(todo), window):
            part = todo.iloc[first : first + window]
            with injector.window(part["qid"].astype(str).tolist(), part["text"].tolist()):
                whole = injector.position(part) if injector.strategy.whole_windows else None
                for start in range(first, first + len(part), size):
                    chunk = todo.iloc[start : start + size]
                    found = (
                        injector.position(chunk)
                        if whole is None
                        else whole.iloc[start - first : start - first + size].reset_index(drop=True)
                    )
                    if results is not None:
                        results.store(self.job.scope, found, chunk["text_sha"].tolist())
                    found_parts.append(found)
                    if progress:
                        progress(f"{spec}: {min(start + size, len(todo))}/{len(todo)} positioned")
        after = injector.counts.as_dict()
        counts.add(InjectionCounts(**{k: after[k] - before[k] for k in after}))
        return found_parts


def _with_text_sha(answers: pd.DataFrame) -> pd.DataFrame:
    """``answers`` with a text_sha column (the results cache keys positions by it)."""
    if "text_sha" in answers.columns:
        return answers
    answers = answers.reset_index(drop=True)
    return answers.assign(text_sha=[text_sha(t) for t in answers["text"]])
