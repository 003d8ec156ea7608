"""Effectiveness measures through ir_measures, with the qrels and the query set stated exactly.

Everything is computed by ir_measures' ``pytrec_eval`` provider (trec_eval 9 semantics), pinned
rather than left to ir_measures' provider choice, so the numbers are trec_eval's and do not change
when another back-end gets installed. What that means in the edge cases, checked in
tests/validation/test_measures.py:

- **Ties in score** are broken as trec_eval does: by docno in *descending* string order. The
  ``rank`` column of a run is ignored (trec_eval re-sorts by score).
- **Documents in the run but not in the qrels** are non-relevant for nDCG@k and AP (no gain, and
  they take a rank), and are skipped entirely by bpref, which looks only at judged documents:
  bpref = 1/R * sum over retrieved relevant r of (1 - min(n_r, R) / min(R, N)), n_r = judged
  non-relevant documents ranked above r, R = relevant and N = judged non-relevant in the qrels
  (when N = 0 every retrieved relevant document adds 1).
- **Relevant** means label >= 1 for AP and bpref (ir_measures' default ``rel=1``; write
  ``AP(rel=2)`` for another threshold). nDCG uses the label itself as the gain (linear gains,
  log2 discount), with the ideal ranking built from *all* judgments of the query in the qrels,
  retrieved or not. Negative labels earn no gain.
- **A query in the qrels with no relevant document** scores 0 on every measure (the ideal DCG is
  0; trec_eval reports 0, not undefined). **A query in the qrels that the run does not contain**
  gets ir_measures' default 0 (ir_measures fills it in, like ``trec_eval -c``). **A query in the
  run but not in the qrels** is ignored.

Because zeros from queries without any relevant document are the same for every ranker, they
carry no information about which ranker is better while shrinking means and confidence
intervals; so by default (``query_set="with_relevant"``) the averaged queries are those with at
least one relevant (label >= 1) judgment in the dimension, and the others are listed as excluded.
``query_set="judged"`` averages every query with a judgment in the dimension, as trec_eval does.

Labels: ``graded`` (default) are the manifest's gains with labels the scale excludes ("could not
judge") left out; ``raw`` are the labels as written (CLEF credibility 3, "could not judge", then
gets the highest gain, as the source study's scripts did). Raw labels must be integers (pytrec_eval
accepts nothing else).

Qrels scope: rankers rank D_q, the judged documents *with text*; a judged document without text
cannot be ranked by any ranker. ``qrels_scope="candidates"`` (the default of ``validate``) keeps
only the judgments of D_q, so a perfect re-ranking of D_q scores 1; ``"all"`` (the default of
``validate_runs``) keeps every judgment, as trec_eval on the official qrels would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import ir_measures
import numpy as np
import pandas as pd

from nrp.collection.collection import Collection, LabelMode, QrelsScope, judgments_in
from nrp.errors import ConfigError, NrpError

QuerySet = Literal["with_relevant", "judged"]

DEFAULT_MEASURES: tuple[str, ...] = ("nDCG@10", "AP", "Bpref")
#: measures that count (documents, queries) rather than lie between 0 and 1
COUNTING_MEASURES = ("NumRet", "NumRel", "NumRelRet", "NumQ")


def measure_bounds(measure: str) -> tuple[float, float] | None:
    """(0, 1) for a measure that lies between 0 and 1 (every ranking measure nrp validates
    with: nDCG, AP, Bpref, P, R, RR, ...), None for one that counts (``COUNTING_MEASURES``)."""
    name = str(measure).split("@")[0].split("(")[0]
    return None if name in COUNTING_MEASURES else (0.0, 1.0)


PROVIDER = ir_measures.pytrec_eval
RELEVANT_LABEL = 1  # label >= 1 is relevant: trec_eval's relevance_level, ir_measures' rel=1

# How the measures are headed in tables: the mean of AP over queries is MAP.
DISPLAY_NAMES = {"AP": "MAP", "Bpref": "bpref"}

Run = Mapping[str, Mapping[str, float]]  # qid -> docno -> score


def parse_measures(names: Sequence[str] | str) -> list[ir_measures.Measure]:
    """ir_measures measures from their names (``"nDCG@10"``, ``"AP"``, ``"Bpref"``); the first is
    the primary measure that selects the best ranker."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    if not names:
        raise ConfigError("no measures given")
    parsed = []
    for name in names:
        try:
            measure = ir_measures.parse_measure(str(name))
        except (ValueError, NameError, SyntaxError, TypeError) as err:
            raise ConfigError(f"unknown measure {name!r}: {err}") from None
        if not PROVIDER.supports(measure):
            raise ConfigError(f"measure {name!r} is not computed by pytrec_eval")
        if measure in parsed:
            raise ConfigError(f"measure {name!r} given twice")
        parsed.append(measure)
    return parsed


def display_name(measure: ir_measures.Measure | str) -> str:
    return DISPLAY_NAMES.get(str(measure), str(measure))


def evaluator_version() -> str:
    import pytrec_eval

    return f"ir_measures {ir_measures.__version__} / pytrec_eval {pytrec_eval.__version__}"


@dataclass(frozen=True)
class DimensionQrels:
    """The judgments one dimension is scored against, and which queries are averaged."""

    dimension: str
    labels: LabelMode
    scope: QrelsScope
    query_set: QuerySet
    frame: pd.DataFrame  # qid, docno, label (int), judgments in scope of the evaluated queries
    judged_qids: list[str]  # queries with at least one judgment in scope, topic order
    evaluated_qids: list[str]  # the queries every mean is taken over
    without_relevant: list[str]  # judged, but no judgment with label >= 1
    out_of_scope_judgments: int  # judgments left out because their document is not in D_q

    def as_dict(self) -> dict[str, dict[str, int]]:
        """qid -> docno -> label, for ir_measures (evaluated queries only)."""
        result: dict[str, dict[str, int]] = {}
        for qid, docno, label in self.frame.itertuples(index=False):
            result.setdefault(qid, {})[docno] = int(label)
        return result


def load_qrels(
    collection: Collection,
    dimension: str,
    labels: LabelMode = "graded",
    scope: QrelsScope = "candidates",
    query_set: QuerySet = "with_relevant",
    candidates: pd.DataFrame | None = None,
) -> DimensionQrels:
    """The qrels of one dimension in the given label mode and scope, with the evaluated queries.

    ``candidates`` (the collection's D_q rows) may be passed in to avoid reading them again."""
    if scope not in ("candidates", "all"):
        raise ConfigError(f"qrels scope must be 'candidates' or 'all', not {scope!r}")
    if query_set not in ("with_relevant", "judged"):
        raise ConfigError(f"query set must be 'with_relevant' or 'judged', not {query_set!r}")
    frame = collection.qrels(dimension, labels=labels)[["qid", "docno", "label"]].copy()
    frame["qid"] = frame["qid"].astype(str)
    frame["docno"] = frame["docno"].astype(str)
    values = frame["label"].astype(float).to_numpy()
    if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
        bad = frame.loc[~np.isfinite(values) | (values != np.round(values)), "label"].iloc[0]
        raise NrpError(
            f"dimension {dimension!r} has a non-integer {labels} label ({bad!r}); trec_eval "
            "measures need integer labels (use labels='graded')"
        )
    frame["label"] = values.astype(int)
    out_of_scope = 0
    if scope == "candidates":
        kept = judgments_in(frame, collection.candidates() if candidates is None else candidates)
        out_of_scope = len(frame) - len(kept)
        frame = kept
    topic_order = {qid: i for i, qid in enumerate(collection.topics["qid"].astype(str))}
    judged = sorted(set(frame["qid"]), key=lambda q: (topic_order.get(q, len(topic_order)), q))
    with_relevant = set(frame.loc[frame["label"] >= RELEVANT_LABEL, "qid"])
    without_relevant = [q for q in judged if q not in with_relevant]
    evaluated = judged if query_set == "judged" else [q for q in judged if q in with_relevant]
    frame = frame[frame["qid"].isin(set(evaluated))].reset_index(drop=True)
    return DimensionQrels(
        dimension,
        labels,
        scope,
        query_set,
        frame,
        judged,
        evaluated,
        without_relevant,
        out_of_scope,
    )


def run_from_frame(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """qid -> docno -> score from a result frame (qid, docno, score)."""
    run: dict[str, dict[str, float]] = {}
    for qid, docno, score in zip(frame["qid"], frame["docno"], frame["score"], strict=True):
        run.setdefault(str(qid), {})[str(docno)] = float(score)
    return run


class MeasureEvaluator:
    """Per-query values of the measures against one set of qrels, for any number of runs."""

    def __init__(
        self,
        measures: Iterable[ir_measures.Measure | str],
        qrels: Mapping[str, Mapping[str, int]],
        qids: Sequence[str] | None = None,
    ):
        """``qrels``: qid -> docno -> integer label; ``qids``: the queries to report, in order
        (default: the qrels' queries); each must be in the qrels."""
        self.measures = [
            ir_measures.parse_measure(m) if isinstance(m, str) else m for m in measures
        ]
        self.qids = list(qrels) if qids is None else list(qids)
        missing = [q for q in self.qids if q not in qrels]
        if missing:
            raise NrpError(f"queries without judgments cannot be evaluated: {missing[:5]}")
        wanted = set(self.qids)
        qrels_dict = {q: dict(docs) for q, docs in qrels.items() if q in wanted}
        self._evaluator = PROVIDER.evaluator(self.measures, qrels_dict) if qrels_dict else None

    @classmethod
    def for_dimension(
        cls, measures: Iterable[ir_measures.Measure | str], qrels: DimensionQrels
    ) -> MeasureEvaluator:
        return cls(measures, qrels.as_dict(), qrels.evaluated_qids)

    def per_query(self, run: Run) -> dict[str, dict[str, float]]:
        """measure name -> qid -> value, for exactly ``qids`` in their order."""
        values: dict[str, dict[str, float]] = {str(m): {} for m in self.measures}
        if self._evaluator is not None:
            wanted = set(self.qids)
            subset = {q: dict(docs) for q, docs in run.items() if q in wanted and docs}
            for metric in self._evaluator.iter_calc(subset):
                values[str(metric.measure)][metric.query_id] = float(metric.value)
        ordered: dict[str, dict[str, float]] = {}
        for name, by_qid in values.items():
            missing = [q for q in self.qids if q not in by_qid]
            if missing:  # ir_measures fills qrels queries absent from the run; guard the promise
                raise NrpError(f"{name}: no value for queries {missing[:5]}")
            ordered[name] = {q: by_qid[q] for q in self.qids}
        return ordered
