"""Leave-one-out agreement: would NRP grade the human-judged documents as their judges did?

Each judged document d of D_q (a document with a label in the dimension) is taken out of D_q in
turn and graded as if it were a generated answer: ranked among the rest of D_q (|D_q| - 1
documents), r = documents of the rest scored above it (plus the ties rule), and
NRP = 1 - r / (|D_q| - 1). If NRP measures answer quality, these NRP values should order the
documents as their grades do: Kendall's tau-b and Spearman's rho between NRP and grade say how
far they do, per dimension and ranker.

Scores. An answer is ranked among D_q by scoring D_q together with the answer. With d as the
answer and the rest of D_q as the documents, the scored set is the rest plus d, which is D_q
itself, so every score is d's and its competitors' score in the full D_q:

- a pointwise ranker (monoT5, dense, lexical with ``stats=collection``) scores d from the query
  and d's text alone: its score as an answer is its cached score in D_q;
- a lexical ranker with ``stats=query`` counts N, avgdl, df and F over the documents it scores.
  Leave-one-out scoring is ``LexicalIndex.from_texts(rest).with_extra(d)``: the rest's counts
  plus d's, i.e. exactly D_q's counts (integer sums, so the scores are bit-identical), and the
  competitors' scores are their scores in D_q too. The same holds for any ranker whose scores
  depend on the query, the texts and the candidate set only. (This is the scoring step's
  default, the answer counted in the statistics; with its ``frozen_stats`` the held-out
  document would be scored with the statistics of the rest alone, which is not done here.)

So one scoring of D_q per ranker (through the score cache) gives every leave-one-out NRP, and
r for all documents of a query comes from one sort of its scores (O(|D_q| log |D_q|)).
``tests/nrp/test_agreement.py`` checks the stats=query equality by scoring each ``rest + d``
explicitly. (The ``random`` ranker scores by docno: d keeps its draw, as good as any other.)

Statistics (and why):

- **Per query**: tau-b (which corrects for ties on both sides: grades are few and tie often) and
  Spearman's rho between the judged documents' NRP and grades. A query is skipped, and counted,
  when it has fewer than 3 judged documents (2 points always correlate perfectly) or a single
  grade (no order to agree with). When a ranker ties every judged document of a used query its
  NRP values are constant and both coefficients are undefined; they count as 0 (the ranker
  orders nothing) rather than being dropped, which would reward a ranker for giving up.
  Reported: the mean over used queries with a 95% Student t-interval over queries
  (``nrp.statistics.mean_with_interval``, as validation reports means over queries). The
  coefficients, and the rule for constant values, are ``nrp.statistics.correlations``.
- **Pooled**: one tau-b and rho over every (query, document) pair with a defined NRP
  (|D_q| >= 2), skipped queries included. It compares documents across queries through NRP's
  normalisation to [0, 1] (a grade-3 document of one query should get a higher NRP than a
  grade-0 document of another), which is how NRP means over queries are read. No interval or
  p-value: pairs within a query are not independent.
- **Ties rule** (``ties``): the scoring step's rules and code (``nrp.ranks``): ``mid``
  (default) counts each document scored equal to d as half above it, ``pessimistic`` (and
  ``strict``, d appended after the rest) as above, ``optimistic`` as below. Scores compare
  as there: exactly for lexical rankers, within the dtype's tolerance for neural ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from nrp.collection.collection import Collection, LabelMode
from nrp.errors import ConfigError, NrpError
from nrp.models.device import progress as progress_bar
from nrp.progress import Progress
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, CachedRanker, ScoreCache
from nrp.rankers.dense import embedding_memo
from nrp.rankers.registry import RankerSpec, make_ranker, parse_rankers
from nrp.ranks import (
    DEFAULT_TIE_MODE,
    check_tie_mode,
    nrp_value,
    rank_from_counts,
    tie_margin,
)
from nrp.statistics import correct, correlations, mean_with_interval, paired_test
from nrp.tables import (
    FrameView,
    TableExports,
    format_interval,
    format_number,
    format_p,
    one_row,
    text_table,
)

MIN_JUDGED = 3
FEW_DOCS = f"fewer than {MIN_JUDGED} judged documents"
SINGLE_GRADE = "a single grade"
RankerLike = str | RankerSpec | Ranker


def leave_one_out(
    scores: Sequence[float], ties: str = DEFAULT_TIE_MODE, tolerance: float = 0.0
) -> pd.DataFrame:
    """Each document of one D_q held out in turn against the others: columns ``above`` (others
    scored higher by more than the tie margin), ``tied`` (others within it; equal when
    ``tolerance`` is 0, see ``nrp.ranks``), ``r`` and ``nrp`` = 1 - r / (n - 1).
    With fewer than two documents there is nothing to rank against: NaN."""
    check_tie_mode(ties)
    values = np.asarray(scores, dtype=float)
    if not np.all(np.isfinite(values)):
        raise NrpError("scores must be finite numbers")
    n = len(values)
    ordered = np.sort(values)
    margin = tie_margin(values, tolerance)
    right = np.searchsorted(ordered, values + margin, side="right")
    left = np.searchsorted(ordered, values - margin, side="left")
    above = n - right
    tied = right - left - 1  # minus the document itself
    r = np.asarray(rank_from_counts(above, tied, ties), dtype=float).reshape(n)
    nrp = np.asarray(nrp_value(r, n - 1), dtype=float).reshape(n) if n >= 2 else np.full(n, np.nan)
    return pd.DataFrame({"above": above, "tied": tied, "r": r, "nrp": nrp})


def query_taus(per_query: pd.DataFrame, ranker: str, dimension: str | None = None) -> pd.Series:
    """qid -> the per-query tau-b of ``ranker`` over the queries it used (in ``dimension``
    when given)."""
    used = (per_query["ranker"] == ranker) & (per_query["skipped"] == "")
    if dimension is not None:
        used &= per_query["dimension"] == dimension
    return per_query[used].set_index("qid")["kendall_tau"].astype(float)


def paired_taus(
    per_query: pd.DataFrame,
    ranker: str,
    against: str,
    dimension: str | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """``ranker``'s per-query tau-b against ``against``'s over the queries both used: queries,
    both means, the mean difference with its t-interval over queries, and the two-sided p of
    the paired randomization test (exact up to 2**n sign vectors, as validation tests)."""
    joined = pd.concat(
        [query_taus(per_query, ranker, dimension), query_taus(per_query, against, dimension)],
        axis=1,
        join="inner",
    )
    first, second = (joined.iloc[:, i].to_numpy(dtype=float) for i in (0, 1))
    mean, low, high = mean_with_interval(first - second, confidence)
    return {
        "queries": len(joined),
        "tau": float(first.mean()) if len(first) else float("nan"),
        "against_tau": float(second.mean()) if len(second) else float("nan"),
        "difference": mean,
        "ci_low": low,
        "ci_high": high,
        "p": paired_test(first, second),
    }


# -- result ----------------------------------------------------------------------------------------
@dataclass
class AgreementResult(TableExports, FrameView):
    """Leave-one-out NRP of every judged document and its agreement with the grades.

    ``per_doc``: dimension, ranker, qid, docno, label, score, n_docs (|D_q|), above, tied, r,
    nrp. ``per_query``: dimension, ranker, qid, n_docs, n_judged, n_grades, kendall_tau,
    spearman_rho, skipped (the reason, '' when used), constant_nrp. ``summary``: one row per
    (dimension, ranker). ``by_grade``: mean leave-one-out NRP of the documents of each grade.
    (``summary.mean_nrp`` is 0.5 by construction when every document of D_q is judged and ties
    count half: the held-out documents of a query share the n(n-1)/2 pairs between them.)
    """

    collection: str
    settings: dict[str, Any]
    per_doc: pd.DataFrame
    per_query: pd.DataFrame
    summary: pd.DataFrame
    by_grade: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """The summary: one row per (dimension, ranker)."""
        return self.summary.copy()

    def row(self, dimension: str, ranker: str) -> pd.Series:
        return one_row(self.summary, dimension=dimension, ranker=ranker)

    # -- export: to_dict, to_json, to_csv (agreement_{summary,by_grade,per_query,per_doc}.csv)
    JSON_FIELDS: ClassVar[tuple[str, ...]] = (
        "collection", "settings", "summary", "by_grade", "per_query", "per_doc", "warnings",
    )  # fmt: skip
    CSV_TABLES: ClassVar[tuple[str, ...]] = ("summary", "by_grade", "per_query", "per_doc")
    CSV_PREFIX: ClassVar[str] = "agreement"

    # -- text -----------------------------------------------------------------------------------
    def tables(self) -> dict[str, str]:
        """dimension -> its text table (every ranker of the dimension)."""
        return {d: self._table(d) for d in dict.fromkeys(self.summary["dimension"])}

    def format(self) -> str:
        parts = list(self.tables().values())
        if self.warnings:
            parts.append("warnings:\n" + "\n".join(f"  {w}" for w in self.warnings))
        return "\n\n".join(parts)

    def __str__(self) -> str:
        return self.format()

    def compare(self, against: str | Ranker) -> pd.DataFrame:
        """Every other ranker against ``against`` (a spec, as given to ``agreement``, or a
        ranker), per dimension (``paired_taus``), with the p-values Holm-adjusted over all the
        comparisons (``p_holm``): columns dimension, ranker, against, queries, tau,
        against_tau, difference, ci_low, ci_high, p, p_holm."""
        names = set(self.summary["ranker"])
        if isinstance(against, Ranker):
            name = against.spec()
        else:  # as reported, or a spec written otherwise (tfidf:k=v order, defaults spelled)
            name = against if against in names else make_ranker(against).spec()
        rows = []
        confidence = float(self.settings["confidence"])
        for dimension in dict.fromkeys(self.summary["dimension"]):
            here = self.summary[self.summary["dimension"] == dimension]["ranker"].tolist()
            if name not in here:
                raise ConfigError(
                    f"{name!r} is not one of the rankers of dimension {dimension!r} "
                    f"({', '.join(here)})"
                )
            for ranker in (r for r in here if r != name):
                paired = paired_taus(self.per_query, ranker, name, dimension, confidence)
                rows.append({"dimension": dimension, "ranker": ranker, "against": name, **paired})
        columns = ["dimension", "ranker", "against", "queries", "tau", "against_tau",
                   "difference", "ci_low", "ci_high", "p"]  # fmt: skip
        frame = pd.DataFrame(rows, columns=columns)
        frame["p_holm"] = correct(frame["p"].tolist(), "holm") if len(frame) else []
        return frame

    def format_comparison(self, frame: pd.DataFrame) -> str:
        """A table of ``compare`` as text, one table per dimension."""
        ci = f"{round(float(self.settings['confidence']) * 100)}% CI"
        parts = []
        for dimension, rows in frame.groupby("dimension", sort=False):
            header = ["ranker", "queries", f"tau-b minus {rows['against'].iloc[0]} [{ci}]",
                      "p", "p (Holm)"]  # fmt: skip
            table = [
                [str(r.ranker), str(int(r.queries)),
                 f"{r.difference:+.4f} {_signed_interval(r.ci_low, r.ci_high)}",
                 format_p(r.p), format_p(r.p_holm)]
                for r in rows.itertuples()
            ]  # fmt: skip
            parts.append(
                f"{self.collection} / {dimension}: per-query tau-b against "
                f"{rows['against'].iloc[0]} over the queries both used (paired randomization "
                "test, Holm over every comparison)\n" + text_table(header, table)
            )
        return "\n\n".join(parts)

    def _table(self, dimension: str) -> str:
        s = self.settings
        rows = self.summary[self.summary["dimension"] == dimension]
        first = rows.iloc[0]
        reasons = (("skipped_few_docs", FEW_DOCS), ("skipped_single_grade", SINGLE_GRADE))
        skipped = [f"{int(first[c])} {reason}" for c, reason in reasons if first[c]]
        ci = f"{round(s['confidence'] * 100)}% CI"
        lines = [
            f"{self.collection} / {dimension}: leave-one-out NRP of {int(first['docs'])} judged "
            f"documents in {int(first['queries_judged'])} queries (labels {s['labels']}, ties "
            f"{s['ties']})",
            f"  per query: Kendall tau-b and Spearman rho of NRP and grade, mean over "
            f"{int(first['queries_used'])} queries with {ci} (t-interval)"
            + (f"; skipped: {', '.join(skipped)}" if skipped else ""),
            "  pooled: one coefficient over every (query, document) pair",
        ]
        header = ["ranker", f"tau-b [{ci}]", f"rho [{ci}]", "tau-b pooled", "rho pooled"]
        header += ["ties all"]
        table = [
            [
                str(r.ranker),
                f"{format_number(r.tau_mean)} {format_interval(r.tau_ci_low, r.tau_ci_high)}",
                f"{format_number(r.rho_mean)} {format_interval(r.rho_ci_low, r.rho_ci_high)}",
                format_number(r.tau_pooled),
                format_number(r.rho_pooled),
                str(int(r.constant_nrp_queries)),
            ]
            for r in rows.itertuples()
        ]
        lines.append(text_table(header, table))
        lines.append(
            "  ties all: used queries where the ranker tied every judged document (counted as 0)"
        )
        grades = self.by_grade[self.by_grade["dimension"] == dimension]
        labels = sorted(grades["label"].unique())
        grade_rows = []
        for ranker in rows["ranker"]:
            mine = grades[grades["ranker"] == ranker].set_index("label")
            grade_rows.append(
                [str(ranker)]
                + [
                    format_number(mine.loc[g, "mean_nrp"]) if g in mine.index else "-"
                    for g in labels
                ]
            )
        counts = grades.drop_duplicates("label").set_index("label")["n_docs"]
        header = ["mean NRP by grade"] + [f"{_label(g)} (n={int(counts[g])})" for g in labels]
        lines.append(text_table(header, grade_rows))
        return "\n".join(lines)


def _signed_interval(low: float | None, high: float | None) -> str:
    """A difference's interval with its signs (``[-0.0063, +0.0456]``), as ``format_interval``
    without one."""
    missing = format_interval(low, high)
    return missing if missing == "[-]" else f"[{low:+.4f}, {high:+.4f}]"


def _label(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


# -- computation -----------------------------------------------------------------------------------
def agreement(
    collection: Collection,
    rankers: Sequence[RankerLike] | str | Mapping[str, RankerLike | Sequence[RankerLike]],
    dimensions: Sequence[str] | None = None,
    labels: LabelMode = "graded",
    ties: str = DEFAULT_TIE_MODE,
    cache: bool = True,
    *,
    confidence: float = 0.95,
    progress: Progress | None = None,
) -> AgreementResult:
    """Leave-one-out NRP of each judged document and its Kendall tau-b and Spearman rho with the
    grades, per dimension and ranker.

    ``rankers``: specs or ``Ranker`` objects (a comma-separated string too), each used in every
    dimension; or ``{dimension: spec or list of specs}`` (validation's ``chosen()``), each used
    in its dimension only. ``dimensions``: the dimensions to report (default: all, or the
    mapping's). ``cache``: scores served from and stored in the collection's score cache."""
    check_tie_mode(ties)
    if not 0 < confidence < 1:
        raise ConfigError("confidence must lie strictly between 0 and 1")
    built, names = _build(_plan(collection, rankers, dimensions))
    candidates = collection.candidates()
    candidates["qid"] = candidates["qid"].astype(str)
    candidates["docno"] = candidates["docno"].astype(str)
    bar = progress_bar(built.items(), len(built), "scoring rankers", verbose=progress is None)
    with embedding_memo():  # rankers of one model (dense, the guard over it) embed a text once
        scored = {n: _score(collection, ranker, candidates, cache, progress) for n, ranker in bar}
    loo = {
        name: _leave_one_out_all(frame, ties, built[name].score_tolerance)
        for name, frame in scored.items()
    }
    tables = _Tables(confidence)
    for dimension, rankers_here in names.items():
        qrels = collection.qrels(dimension, labels)
        qrels = qrels.assign(qid=qrels["qid"].astype(str), docno=qrels["docno"].astype(str))
        in_scope = qrels.merge(candidates[["qid", "docno"]], on=["qid", "docno"], how="inner")
        if len(in_scope) < len(qrels):
            tables.warnings.append(
                f"{dimension}: {len(qrels) - len(in_scope)} judgments of documents without text "
                "(not in D_q) left out"
            )
        for name in dict.fromkeys(rankers_here):
            tables.add(dimension, name, in_scope.merge(loo[name], on=["qid", "docno"], how="left"))
    settings = {
        "labels": labels,
        "ties": ties,
        "confidence": confidence,
        "ci": "Student t-interval over queries",
        "min_judged_documents": MIN_JUDGED,
        "kendall": "tau-b",
        "constant_nrp": "a used query whose judged documents all tie counts as 0",
        "pooled": "over every (query, judged document) pair with |D_q| >= 2",
        "scores": "one scoring of D_q per ranker: rest of D_q + held-out document = D_q",
    }
    return tables.result(collection.name, settings)


@dataclass
class _Tables:
    """The result's tables, one part per (dimension, ranker), gathered in report order;
    ``confidence``: of the per-query intervals."""

    confidence: float
    per_doc: list[pd.DataFrame] = field(default_factory=list)
    per_query: list[pd.DataFrame] = field(default_factory=list)
    summary: list[dict[str, Any]] = field(default_factory=list)
    by_grade: list[pd.DataFrame] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, dimension: str, ranker: str, docs: pd.DataFrame) -> None:
        """One (dimension, ranker): ``docs`` are its judged documents with their leave-one-out
        columns."""
        docs.insert(0, "ranker", ranker)
        docs.insert(0, "dimension", dimension)
        per_query = _per_query(docs)
        self.per_doc.append(docs)
        self.per_query.append(per_query)
        self.summary.append(_summary_row(dimension, ranker, docs, per_query, self.confidence))
        self.by_grade.append(_by_grade(dimension, ranker, docs))

    def result(self, collection: str, settings: dict[str, Any]) -> AgreementResult:
        return AgreementResult(
            collection=collection,
            settings=settings,
            per_doc=pd.concat(self.per_doc, ignore_index=True),
            per_query=pd.concat(self.per_query, ignore_index=True),
            summary=pd.DataFrame(self.summary),
            by_grade=pd.concat(self.by_grade, ignore_index=True),
            warnings=self.warnings,
        )


def _build(
    plan: dict[str, list[RankerLike]],
) -> tuple[dict[str, Ranker], dict[str, list[str]]]:
    """The rankers by spec (a ranker named for two dimensions is built and scored once) and
    each dimension's ranker specs."""
    built: dict[str, Ranker] = {}
    from_spec: dict[str, Ranker] = {}
    names: dict[str, list[str]] = {}
    for dimension, specs in plan.items():
        names[dimension] = []
        for spec in specs:
            if isinstance(spec, str | RankerSpec):
                parsed = RankerSpec.parse(spec)
                if str(parsed) not in from_spec:
                    from_spec[str(parsed)] = make_ranker(parsed)
                spec = from_spec[str(parsed)]
            built.setdefault(spec.spec(), spec)
            names[dimension].append(spec.spec())
    return built, names


def _listed(rankers: RankerLike | Sequence[RankerLike]) -> list[RankerLike]:
    """One ranker or spec, a comma-separated text of specs, or a sequence of them, as a list."""
    if isinstance(rankers, str):
        return list(parse_rankers(rankers))
    return [rankers] if isinstance(rankers, Ranker | RankerSpec) else list(rankers)


def _plan(
    collection: Collection,
    rankers: Sequence[RankerLike] | str | Mapping[str, RankerLike | Sequence[RankerLike]],
    dimensions: Sequence[str] | None,
) -> dict[str, list[RankerLike]]:
    """dimension -> the rankers to use there, every name checked before anything is scored."""
    if isinstance(rankers, Mapping):
        plan = {str(d): _listed(s) for d, s in rankers.items()}
        if dimensions is not None:
            unknown = [d for d in dimensions if d not in plan]
            if unknown:
                raise ConfigError(f"no ranker given for dimension(s) {unknown}")
            plan = {d: plan[d] for d in dimensions}
    else:
        specs = _listed(rankers)
        chosen = list(dimensions) if dimensions else list(collection.dimensions)
        plan = {d: list(specs) for d in chosen}
    if not plan or not any(plan.values()):
        raise ConfigError("no rankers to compute agreement for")
    for dimension in plan:
        if dimension not in collection.dimensions:
            raise ConfigError(
                f"collection {collection.name!r} has no dimension {dimension!r} "
                f"(it has: {', '.join(collection.dimensions)})"
            )
    return plan


def _score(
    collection: Collection,
    ranker: Ranker,
    candidates: pd.DataFrame,
    cache: bool,
    progress: Progress | None,
) -> pd.DataFrame:
    """qid, docno, score of every document of every D_q (through the score cache)."""
    ranker.bind_collection(collection)
    if progress:
        progress(f"scoring {len(candidates)} documents with {ranker.spec()}")
    if cache:
        score_cache = ScoreCache(collection.path / SCORE_CACHE_FILE)
        ranked = CachedRanker(ranker, score_cache, collection.meta["fingerprint"]).ranked_in_order(
            candidates
        )
    else:
        ranked = ranker.ranked_in_order(candidates)
    scores = ranked["score"].to_numpy(dtype=float)
    if len(ranked) != len(candidates) or not np.all(np.isfinite(scores)):
        raise NrpError(
            f"ranker {ranker.spec()} returned {len(ranked)} rows for {len(candidates)} "
            "candidates, or scores that are not finite numbers"
        )
    return pd.DataFrame(
        {
            "qid": ranked["qid"].astype(str).to_numpy(),
            "docno": ranked["docno"].astype(str).to_numpy(),
            "score": scores,
        }
    )


def _leave_one_out_all(scored: pd.DataFrame, ties: str, tolerance: float) -> pd.DataFrame:
    """``leave_one_out`` for every query: qid, docno, score, n_docs, above, tied, r, nrp."""
    parts = []
    for qid, group in scored.groupby("qid", sort=False):
        values = leave_one_out(group["score"].to_numpy(), ties, tolerance)
        values.insert(0, "n_docs", len(group))
        values.insert(0, "score", group["score"].to_numpy())
        values.insert(0, "docno", group["docno"].to_numpy())
        values.insert(0, "qid", qid)
        parts.append(values)
    return pd.concat(parts, ignore_index=True)


def _per_query(docs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for qid, group in docs.groupby("qid", sort=False):
        n_grades = group["label"].nunique()
        skipped = FEW_DOCS if len(group) < MIN_JUDGED else SINGLE_GRADE if n_grades < 2 else ""
        tau = rho = np.nan
        constant = False
        if not skipped:
            tau, rho = correlations(group["nrp"], group["label"])
            constant = bool(np.ptp(group["nrp"].to_numpy(dtype=float)) == 0)
        rows.append(
            {
                "dimension": group["dimension"].iloc[0],
                "ranker": group["ranker"].iloc[0],
                "qid": qid,
                "n_docs": int(group["n_docs"].iloc[0]),
                "n_judged": len(group),
                "n_grades": int(n_grades),
                "kendall_tau": tau,
                "spearman_rho": rho,
                "skipped": skipped,
                "constant_nrp": constant,
            }
        )
    return pd.DataFrame(rows)


def _summary_row(
    dimension: str,
    ranker: str,
    docs: pd.DataFrame,
    per_query: pd.DataFrame,
    confidence: float,
) -> dict[str, Any]:
    used = per_query[per_query["skipped"] == ""]
    row: dict[str, Any] = {
        "dimension": dimension,
        "ranker": ranker,
        "queries_judged": len(per_query),
        "queries_used": len(used),
        "skipped_few_docs": int((per_query["skipped"] == FEW_DOCS).sum()),
        "skipped_single_grade": int((per_query["skipped"] == SINGLE_GRADE).sum()),
        "constant_nrp_queries": int(used["constant_nrp"].sum()),
    }
    for short, column in (("tau", "kendall_tau"), ("rho", "spearman_rho")):
        mean, low, high = mean_with_interval(used[column].to_numpy(dtype=float), confidence)
        row.update({f"{short}_mean": mean, f"{short}_ci_low": low, f"{short}_ci_high": high})
    defined = docs[docs["nrp"].notna()]
    tau, rho = correlations(defined["nrp"], defined["label"])
    row.update(
        tau_pooled=tau,
        rho_pooled=rho,
        docs=len(defined),
        mean_nrp=float(defined["nrp"].mean()) if len(defined) else np.nan,
    )
    return row


def _by_grade(dimension: str, ranker: str, docs: pd.DataFrame) -> pd.DataFrame:
    defined = docs[docs["nrp"].notna()]
    grouped = defined.groupby("label")["nrp"].agg(n_docs="size", mean_nrp="mean").reset_index()
    return grouped.assign(dimension=dimension, ranker=ranker)[
        ["dimension", "ranker", "label", "n_docs", "mean_nrp"]
    ]
