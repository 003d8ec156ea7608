"""Validity: does a ranker keep degenerate texts below the real answers of a query?

nDCG on the judged documents measures how a ranker orders real answers. It says nothing about a
text that only echoes, restates or evades the question: no judged document is like that, and a
ranker that scores similarity to the question puts such a text above every real answer, so NRP
would crown it. Validation therefore also ranks, for every query, the degenerate texts built
from the collection itself (``nrp.validation.degenerate``: the question echoed, restated, as
keywords, padded with politeness, evasive, refusing, the best document shuffled or cut to one
sentence, another query's best document) among D_q, exactly as NRP ranks an answer, and reports
per ranker and dimension:

- **wins**: per degenerate text, the share of the query's graded-relevant judged documents
  (grade >= 1) the ranker puts above it (a tie counts half); the mean over queries of each
  query's mean, with its t-interval over queries, per kind, per family and over all texts (a
  query's draws of another query's best document count as one text, their mean, in a family's
  and all texts' figures: ``DRAWN_KINDS``).
- **NRP**: the NRP the degenerate text would get, ``1 - r/|D_q|`` with ``r`` the documents above
  it plus half the tied ones (the ``mid`` tie rule of ``nrp.ranks``), averaged the same way.

A text is ranked as NRP ranks an answer: a pointwise ranker scores it alone beside D_q's
validated scores (through the score cache, so validating again scores nothing); a ranker whose
scores depend on the candidate set (lexical statistics over D_q, duoT5's pairs) ranks D_q plus
that one text, once per text.

**The rule** (``VALIDITY_RULE``): a ranker passes in a dimension when, for every kind but
``first_sentence`` (``REPORTED_ONLY``: an incomplete answer is still an answer), judged documents
win at least ``min_wins`` of the pairs and the kind's mean NRP is at most ``max_nrp``. Defaults:
``max_nrp`` 0.30, below the NRP of an average incorrect human answer (0.495 on the LiveQA-Med
pool); ``min_wins`` 0.95: a text that says nothing loses to nineteen relevant answers in
twenty. ``other_best`` (a real, well-written answer to another question) is the hardest kind to
pass, since it is the ranker's to place. Where no ranker of a dimension passes, the rankers that
pass with ``fallback_wins`` (0.90) in its place are chosen from, and the choice says so; where
none passes that either, nothing is chosen and validation says what to validate next (a guarded
ranker) or which rankers floor too many real answers. The rule and its figures per collection
are in docs/validity.md. The selection rule (``nrp.validation.selection``) never chooses a
ranker that fails, and names the rankers it passed over with the first kind that failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from nrp import statistics
from nrp.rankers.base import REQUIRED_COLUMNS, Ranker
from nrp.rankers.cache import CachedRanker, ScoreCache
from nrp.rankers.lexical_batch import scores_with_each_text
from nrp.ranks import compare, nrp_value, rank_from_counts
from nrp.validation.degenerate import DRAWN_KINDS, FAMILY_OF, HELD_OUT_FAMILY, KINDS

#: judged answers of at most this many words are counted apart among those a ranker floors
#: (``FlooredAnswers``): about a short paragraph, the length of a terse LLM's answer; the guard
#: floors them several times as often as longer ones (docs/validity.md)
SHORT_ANSWER_WORDS = 60


def answer_words(texts: pd.Series) -> pd.Series:
    """Each text's number of words (runs of non-space), the length ``SHORT_ANSWER_WORDS`` is
    measured in."""
    return texts.astype(str).str.split().str.len().astype(int)


DEFAULT_MIN_WINS = 0.95
#: where no ranker of a dimension reaches ``DEFAULT_MIN_WINS`` in every kind, the rankers that
#: reach this share (the rest of the rule unchanged) are chosen from, and the choice says so: a
#: collection whose best guard misses the goal by a little still gets a ranker, marked as such
DEFAULT_FALLBACK_WINS = 0.90
DEFAULT_MAX_NRP = 0.30
#: a ranker that floors more than this share of the real answers given to validation fails
#: validity, as one whose degenerate texts score high does: a gate that sends one real answer in
#: fifty to the floor costs the answers of another style their place
DEFAULT_MAX_FLOORED = 0.02
#: a real answer "lost its place" when its NRP is more than this below the NRP that the ranker
#: under a guard gives it alone (``RealAnswers.lost``)
LOST_PLACE = 0.5
#: kinds measured and reported but not part of the rule: a document cut to its first sentence
#: is an answer, if an incomplete one (judges grade incomplete answers relevant), so where it
#: ranks is a question of agreement, not of validity
REPORTED_ONLY = frozenset({"first_sentence"})
VALIDITY_RULE = (
    "A ranker passes validity in a dimension when, for every degenerate kind but first_sentence "
    "(reported only), the graded-"
    "relevant judged documents of a query rank above the kind's texts in at least {min_wins} "
    "of the pairs (ties count half; mean over queries) and the texts' mean NRP is at most "
    "{max_nrp}, and, where real answers are given, it floors at most {max_floored} of them. "
    "The selection rule chooses among the rankers that pass; where none passes, among those "
    "that pass with {fallback_wins} in place of {min_wins} (the fallback), and says so."
)


@dataclass(frozen=True)
class ScoredText:
    """One degenerate text ranked among D_q: its score and the scores D_q's documents had in
    the same ranking (docno -> score)."""

    qid: str
    kind: str
    score: float
    documents: Mapping[str, float]


@dataclass
class GroupValidity:
    """Wins and NRP of one kind, one family, or all texts: means over queries with their
    t-intervals (None with fewer than two queries). ``texts``: how many were ranked (a
    family's or all texts' figures count a query's draws of a drawn kind as one text,
    ``DRAWN_KINDS``)."""

    group: str
    texts: int
    queries: int
    wins: float
    wins_ci: tuple[float, float] | None
    nrp: float
    nrp_ci: tuple[float, float] | None


@dataclass(frozen=True)
class FlooredAnswers:
    """The graded-relevant judged documents (grade >= 1) of a dimension's evaluated queries
    that a ranker puts on its floor (``Ranker.floors``: a guard's flag), all of them and those
    of at most ``short_words`` words apart: what its gate costs real answers, and short ones
    above all (a short text adds few words to its question, which is what the guard reads)."""

    relevant: int
    floored: int
    short: int
    short_floored: int
    short_words: int = SHORT_ANSWER_WORDS


@dataclass(frozen=True)
class RealAnswers:
    """Answers that nobody fitted or calibrated on (``nrp validate --real-answers``), ranked
    among their query's D_q as NRP ranks an answer: how many were positioned (their query has
    D_q), how many the ranker floors (``Ranker.floors``) and flags (a gate's own verdict,
    ``Ranker.flags``; a ranker without a gate flags none), and their mean NRP (ties mid).
    ``base``: for a ranker that keeps another's order for the texts it lets through
    (``Ranker.guarded``: a guard's ranker), that ranker's spec, the same answers' mean NRP
    under it alone, and ``lost``: the answers whose NRP is more than ``LOST_PLACE`` below the
    NRP that ranker alone gives them (a real answer that lost its place)."""

    answers: int
    floored: int
    flagged: int
    nrp: float
    base: str | None = None
    base_nrp: float | None = None
    lost: int | None = None
    sources: tuple[str, ...] = ()
    #: answers read from the sources (``answers`` of them have a query with D_q)
    read: int = 0

    @property
    def floored_share(self) -> float:
        return self.floored / self.answers if self.answers else 0.0


@dataclass(frozen=True)
class CrossFitted:
    """A gate calibrated on a collection's own judged answers (a guard's ``calibrate``), checked
    on judged answers it was not calibrated on: the questions split into ``folds`` parts, each
    part's judged answers (a gain above 0) judged with the thresholds calibrated on the other
    parts. ``floored`` of ``answers``: an honest share of real answers of the collection's kind
    that the gate floors (in-sample, calibration makes it about the calibrated share per
    detector by construction)."""

    answers: int
    floored: int
    folds: int

    @property
    def floored_share(self) -> float:
        return self.floored / self.answers if self.answers else 0.0


@dataclass(frozen=True)
class RankedForValidity:
    """What validity reads of one ranker: its degenerate texts ranked among D_q, its score
    tolerance, the judged documents (qid, docno) its validated run puts on its floor, and what
    it does to real answers (``RealAnswers``: given ones; ``CrossFitted``: its calibration
    checked on held-out judged answers)."""

    texts: list[ScoredText]
    tolerance: float
    floored: frozenset[tuple[str, str]]
    real: RealAnswers | None = None
    cross_fitted: CrossFitted | None = None


@dataclass
class Validity:
    """A ranker's validity in one dimension: per kind, per family, over all texts; the verdict
    and, when it failed, the first failing kind as a sentence."""

    kinds: dict[str, GroupValidity]
    families: dict[str, GroupValidity]
    overall: GroupValidity | None
    passed: bool
    reason: str = ""
    #: why the ranker fails the rule with ``rule["fallback_wins"]`` in place of its
    #: ``min_wins`` ("" when it passes so: chosen from where no ranker of the dimension passes)
    fallback_reason: str = ""
    held_out_family: str = HELD_OUT_FAMILY
    rule: dict[str, float] = field(default_factory=dict)
    answers: FlooredAnswers | None = None
    #: kind -> the judged document's grade ("1", "2", ...) -> {"pairs": n, "wins": share}: the
    #: pairs of each grade pooled over queries (not a mean over queries: few queries hold every
    #: grade), so that a shortfall can be read as the judges would (answers they graded merely
    #: related, or correct ones); empty without grades
    by_grade: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    #: the real answers given to validation (``RealAnswers``), in the rule: a ranker that floors
    #: more than ``rule["max_floored"]`` of them fails; None when none were given
    real: RealAnswers | None = None
    #: the ranker's calibration checked on judged answers it was not calibrated on
    #: (``CrossFitted``), reported; None for a ranker without a calibrated gate
    cross_fitted: CrossFitted | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Validity:
        def group(item: Mapping[str, Any] | None) -> GroupValidity | None:
            if item is None:
                return None
            values = dict(item)
            for key in ("wins_ci", "nrp_ci"):
                values[key] = None if values[key] is None else tuple(values[key])
            return GroupValidity(**values)

        return cls(
            kinds={k: group(v) for k, v in data["kinds"].items()},  # type: ignore[misc]
            families={k: group(v) for k, v in data["families"].items()},  # type: ignore[misc]
            overall=group(data["overall"]),
            passed=bool(data["passed"]),
            reason=str(data.get("reason", "")),
            # results written before the fallback: a ranker that failed fails it too
            fallback_reason=str(
                data.get("fallback_reason", "" if data["passed"] else data.get("reason", ""))
            ),
            held_out_family=str(data.get("held_out_family", HELD_OUT_FAMILY)),
            rule=dict(data.get("rule", {})),
            answers=FlooredAnswers(**data["answers"]) if data.get("answers") else None,
            by_grade={
                kind: {grade: dict(pairs) for grade, pairs in grades.items()}
                for kind, grades in data.get("by_grade", {}).items()
            },
            real=_real_answers(data.get("real")),
            cross_fitted=CrossFitted(**data["cross_fitted"]) if data.get("cross_fitted") else None,
        )


def _real_answers(data: Mapping[str, Any] | None) -> RealAnswers | None:
    if not data:
        return None
    return RealAnswers(**{**data, "sources": tuple(data.get("sources", ()))})


# -- ranking the texts ---------------------------------------------------------------------------
def injects_alone(ranker: Ranker) -> bool:
    """True when a text's score does not depend on the other rows (a pointwise ranker)."""
    return ranker.injection == "pointwise" and not ranker.depends_on_candidate_set


def score_texts(
    ranker: Ranker,
    candidates: pd.DataFrame,
    texts: pd.DataFrame,
    run: Mapping[str, Mapping[str, float]],
    score_cache: ScoreCache | None = None,
    collection_fingerprint: str = "",
) -> list[ScoredText]:
    """Every degenerate text of ``texts`` (qid, query, docno, text, kind) ranked among its
    query's D_q. ``run``: D_q's validated scores (qid -> docno -> score), used as they are for a
    pointwise ranker; other rankers rank D_q plus each text anew."""
    texts = texts[texts["qid"].isin(run)].reset_index(drop=True)
    if texts.empty:
        return []
    if injects_alone(ranker):
        transformer = (
            CachedRanker(ranker, score_cache, collection_fingerprint)
            if score_cache is not None
            else ranker
        )
        ranked = transformer.ranked_in_order(texts[list(REQUIRED_COLUMNS)])
        # by (qid, docno): another query's best document is the same text, and docno, for two
        # queries whose draws fall on it, and its score differs with the query
        keys = zip(ranked["qid"].astype(str), ranked["docno"].astype(str), strict=True)
        scores = dict(zip(keys, ranked["score"].astype(float), strict=True))
        return [
            ScoredText(row.qid, row.kind, scores[(row.qid, row.docno)], run[row.qid])
            for row in texts.itertuples(index=False)
        ]
    by_query = {str(q): rows for q, rows in candidates.groupby("qid", sort=False)}
    if rescores_in_batches(ranker):
        return _rescored_in_batches(ranker, by_query, texts)
    scored = []
    for row in texts.itertuples(index=False):
        dq = by_query[row.qid][list(REQUIRED_COLUMNS)]
        one = pd.DataFrame([[row.qid, row.query, row.docno, row.text]], columns=dq.columns)
        ranked = ranker.ranked_in_order(pd.concat([dq, one], ignore_index=True))
        scores = dict(zip(ranked["docno"].astype(str), ranked["score"].astype(float), strict=True))
        own = scores.pop(row.docno)
        scored.append(ScoredText(row.qid, row.kind, own, scores))
    return scored


def rescores_in_batches(ranker: Ranker) -> bool:
    """True for a ranker whose statistics count the text and are computed in Python (tfidf,
    dph, bm25 by default): D_q plus each text scored in one vectorised pass
    (``nrp.rankers.lexical_batch.scores_with_each_text``), the floats a fresh ranking of D_q
    plus the text gives."""
    return (
        ranker.injection == "statistics"
        and ranker.params.get("backend", "python") == "python"
        and hasattr(ranker, "build_index")
    )


def _rescored_in_batches(
    ranker: Ranker, by_query: Mapping[str, pd.DataFrame], texts: pd.DataFrame
) -> list[ScoredText]:
    """``score_texts`` for a ranker ``rescores_in_batches`` accepts: per query, D_q (one
    document per docno, as an index holds it) tokenised once and scored with each text counted
    in the statistics. A degenerate text's docno is never a judged document's, so it joins
    the statistics as it does in a ranking of D_q plus the text."""
    scored: dict[int, ScoredText] = {}
    for qid, rows in texts.groupby("qid", sort=False):
        dq = ranker.formulate(by_query[str(qid)][list(REQUIRED_COLUMNS)].reset_index(drop=True))
        docnos = dq["docno"].astype(str)
        first = ~docnos.duplicated().to_numpy()
        unique = docnos[first].tolist()
        documents = dq["text"].fillna("").astype(str)[first].tolist()
        doc_scores, own = scores_with_each_text(
            ranker, str(dq["query"].iloc[0]), documents, unique, rows["text"].astype(str).tolist()
        )
        for i, (position, row) in enumerate(
            zip(rows.index, rows.itertuples(index=False), strict=True)
        ):
            scores = dict(zip(unique, doc_scores[i].tolist(), strict=True))
            scored[position] = ScoredText(row.qid, row.kind, float(own[i]), scores)
    return [scored[position] for position in range(len(texts))]


# -- the measures -------------------------------------------------------------------------------
def _pair_values(
    text: ScoredText, relevant: set[str], tolerance: float
) -> tuple[float | None, float, dict[str, float]]:
    """(share of relevant documents above the text, the text's NRP among D_q, each relevant
    document's outcome: 1 above, 0.5 tied, 0 below), ties half."""
    scores = np.fromiter(text.documents.values(), dtype=float, count=len(text.documents))
    above, tied = compare(scores, text.score, tolerance)
    nrp = nrp_value(rank_from_counts(above.sum(), tied.sum(), "mid"), len(scores))
    rel = [docno for docno in text.documents if docno in relevant]
    if not rel:
        return None, float(nrp), {}
    higher, even = compare(np.array([text.documents[d] for d in rel]), text.score, tolerance)
    won = higher + 0.5 * even  # halves and wholes: their sum is exact whatever the order
    return float(won.sum() / len(rel)), float(nrp), dict(zip(rel, won.tolist(), strict=True))


def _group(
    name: str, rows: pd.DataFrame, confidence: float, texts: int | None = None
) -> GroupValidity:  # rows: qid, wins, nrp
    per_query = rows.groupby("qid").agg(wins=("wins", "mean"), nrp=("nrp", "mean"))
    wins = per_query["wins"].dropna()

    def interval(values: pd.Series) -> tuple[float, float] | None:
        # shares and NRP lie between 0 and 1: so does their interval
        found = statistics.confidence_interval(
            values.to_numpy(), "t", confidence, bounds=(0.0, 1.0)
        )
        return None if found is None else (float(found[0]), float(found[1]))

    return GroupValidity(
        group=name,
        texts=len(rows) if texts is None else texts,
        queries=len(per_query),
        wins=float(wins.mean()) if len(wins) else float("nan"),
        wins_ci=interval(wins) if len(wins) > 1 else None,
        nrp=float(per_query["nrp"].mean()),
        nrp_ci=interval(per_query["nrp"]) if len(per_query) > 1 else None,
    )


def measure_validity(
    scored: Sequence[ScoredText],
    relevant: Mapping[str, set[str]],
    *,
    tolerance: float = 0.0,
    min_wins: float = DEFAULT_MIN_WINS,
    max_nrp: float = DEFAULT_MAX_NRP,
    confidence: float = 0.95,
    answers: FlooredAnswers | None = None,
    grades: Mapping[tuple[str, str], float] | None = None,
) -> Validity:
    """Validity in one dimension from the ranked texts. ``relevant``: qid -> the docnos of its
    graded-relevant judged documents (grade >= 1) in the dimension; only the queries it names
    (the dimension's evaluated queries) count. ``answers``: the judged answers the ranker
    floors (``floored_answers``), reported beside. ``grades``: (qid, docno) -> the grade of
    each relevant document, for ``Validity.by_grade``. The fallback: ``with_fallback``; real
    answers: ``with_real_answers``."""
    rows, pairs = [], []
    for text in scored:
        if text.qid not in relevant:
            continue
        wins, nrp, outcomes = _pair_values(text, relevant[text.qid], tolerance)
        rows.append((text.qid, text.kind, FAMILY_OF.get(text.kind, text.kind), wins, nrp))
        if grades is not None:
            pairs.extend(
                (text.kind, grades[(text.qid, d)], won)
                for d, won in outcomes.items()
                if (text.qid, d) in grades
            )
    frame = pd.DataFrame(rows, columns=["qid", "kind", "family", "wins", "nrp"])
    frame["wins"] = frame["wins"].astype(float)
    rule = {"min_wins": min_wins, "fallback_wins": min_wins, "max_nrp": max_nrp}
    if frame.empty:
        reason = "no degenerate text could be built"
        return Validity({}, {}, None, True, reason, rule=rule, answers=answers)
    order = [k for k in KINDS if k in set(frame["kind"])] + sorted(set(frame["kind"]) - set(KINDS))
    kinds = {k: _group(k, frame[frame["kind"] == k], confidence) for k in order}
    one_per_draw = _draws_as_one(frame)
    texts = frame["family"].value_counts()
    families = {
        f: _group(f, one_per_draw[one_per_draw["family"] == f], confidence, int(texts[f]))
        for f in dict.fromkeys(FAMILY_OF.get(k, k) for k in order)
    }
    reason = _first_failure(kinds, min_wins, max_nrp)
    overall = _group("all", one_per_draw, confidence, len(frame))
    return Validity(
        kinds, families, overall, not reason, reason,
        fallback_reason=reason, rule=rule, answers=answers, by_grade=_by_grade(pairs, order),
    )  # fmt: skip


def _first_failure(kinds: Mapping[str, GroupValidity], min_wins: float, max_nrp: float) -> str:
    """The first kind (in ``kinds``' order) that fails the rule at ``min_wins`` and ``max_nrp``,
    as a sentence; "" when every kind passes."""
    for kind, found in kinds.items():
        if kind in REPORTED_ONLY:
            continue
        if found.wins < min_wins - 1e-12:
            return f"{kind}: judged documents above it in {found.wins:.3f} of pairs (< {min_wins})"
        if found.nrp > max_nrp + 1e-12:
            return f"{kind}: mean NRP {found.nrp:.3f} (> {max_nrp})"
    return ""


def with_fallback(validity: Validity, fallback_wins: float) -> Validity:
    """``validity`` with its verdict under the fallback: the rule with ``fallback_wins`` (at most
    the rule's ``min_wins``) in place of ``min_wins``, chosen from where no ranker passes."""
    fallback = min(fallback_wins, validity.rule["min_wins"])
    rule = {**validity.rule, "fallback_wins": fallback}
    reason = "" if validity.passed else _first_failure(validity.kinds, fallback, rule["max_nrp"])
    return replace(validity, fallback_reason=reason, rule=rule)


def with_real_answers(
    validity: Validity,
    real: RealAnswers | None,
    cross_fitted: CrossFitted | None,
    max_floored: float = DEFAULT_MAX_FLOORED,
) -> Validity:
    """``validity`` with what the ranker does to real answers: ``real``, the answers given to
    validation, in the rule (a ranker that passed fails when it floors more than
    ``max_floored`` of them; its first failing kind stays the reason where it failed already),
    and ``cross_fitted``, its calibration on held-out judged answers, reported."""
    rule = {**validity.rule, "max_floored": max_floored}
    reason, passed = validity.reason, validity.passed
    fallback_reason = validity.fallback_reason
    if real is not None and real.answers and real.floored_share > max_floored + 1e-12:
        too_many = (
            f"real answers: {real.floored} of {real.answers} floored ({real.floored_share:.1%} "
            f"> {max_floored:.1%})"
        )
        reason = too_many if passed else reason
        passed, fallback_reason = False, fallback_reason or too_many
    return replace(
        validity, passed=passed, reason=reason, fallback_reason=fallback_reason, rule=rule,
        real=real, cross_fitted=cross_fitted,
    )  # fmt: skip


def real_answer_figures(
    scored: Sequence[ScoredText],
    tolerance: float,
    floored: np.ndarray,
    flagged: np.ndarray,
    base: tuple[str, Sequence[ScoredText], float] | None = None,
    sources: Sequence[str] = (),
    read: int = 0,
) -> RealAnswers:
    """``RealAnswers`` of real answers ranked among their D_q (``score_texts``): ``floored``
    and ``flagged`` per answer; ``base``: (spec, the same answers ranked by the guarded ranker
    alone, its tolerance), in the same order."""
    nrp = np.array([_pair_values(text, set(), tolerance)[1] for text in scored], dtype=float)
    figures: dict[str, Any] = {}
    if base is not None:
        spec, base_scored, base_tolerance = base
        alone = np.array(
            [_pair_values(text, set(), base_tolerance)[1] for text in base_scored], dtype=float
        )
        figures = {
            "base": spec,
            "base_nrp": float(alone.mean()) if len(alone) else 0.0,
            "lost": int(np.sum(nrp < alone - LOST_PLACE - 1e-12)),
        }
    return RealAnswers(
        answers=len(scored),
        floored=int(np.sum(floored)),
        flagged=int(np.sum(flagged)),
        nrp=float(nrp.mean()) if len(nrp) else 0.0,
        sources=tuple(str(s) for s in sources),
        read=read,
        **figures,
    )


def _draws_as_one(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (qid, kind, family, wins, nrp; one row per text) with each query's texts of a
    drawn kind (``DRAWN_KINDS``) made one row, their mean, where the first of them stood."""
    drawn = frame["kind"].isin(DRAWN_KINDS)
    if not drawn.any():
        return frame
    first = ~frame.duplicated(["qid", "kind"])
    means = frame[drawn].groupby(["qid", "kind"])[["wins", "nrp"]].transform("mean")
    out = frame[~drawn | first].copy()
    at = out.index[out["kind"].isin(DRAWN_KINDS)]
    out.loc[at, ["wins", "nrp"]] = means.loc[at, ["wins", "nrp"]]
    return out


def _by_grade(
    pairs: list[tuple[str, float, float]], order: list[str]
) -> dict[str, dict[str, dict[str, float]]]:
    """kind -> grade -> pairs and the share won, from (kind, grade, outcome) pairs; kinds in
    ``order``, grades ascending."""
    if not pairs:
        return {}
    frame = pd.DataFrame(pairs, columns=["kind", "grade", "won"])
    out: dict[str, dict[str, dict[str, float]]] = {}
    for kind in order:
        rows = frame[frame["kind"] == kind]
        out[kind] = {
            f"{grade:g}": {"pairs": len(group), "wins": float(group["won"].mean())}
            for grade, group in rows.groupby("grade", sort=True)
        }
    return out


def floored_answers(
    floored: frozenset[tuple[str, str]],
    relevant: Mapping[str, set[str]],
    words: Mapping[tuple[str, str], int],
) -> FlooredAnswers:
    """Of the ``relevant`` judged documents (qid -> docnos) that have a text (``words``:
    (qid, docno) -> its number of words), how many are ``floored``, all and the short ones."""
    judged = [(q, d) for q, docnos in relevant.items() for d in docnos if (q, d) in words]
    short = [key for key in judged if words[key] <= SHORT_ANSWER_WORDS]
    return FlooredAnswers(
        relevant=len(judged),
        floored=sum(key in floored for key in judged),
        short=len(short),
        short_floored=sum(key in floored for key in short),
    )
