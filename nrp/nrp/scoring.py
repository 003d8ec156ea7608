"""Scoring: the NRP of every generated answer, per dimension and combined.

``score_answers(collection, answers, rankers)`` positions each answer among the judged documents
D_q of its query with the ranker chosen for each dimension (``nrp.nrp.injection``) and returns
one row per (answer, dimension) with the answer's score, r, |D_q|, ties and
``NRP = 1 - r / |D_q|``, plus a ``combined`` row per answer: the weighted mean of its dimensions'
NRP (weights normalised to sum 1; equal by default).

Choices, and why:

- **One ranker, scored once.** Rankers are grouped by fingerprint, so a ranker chosen for several
  dimensions positions each answer once. When one ranker serves every dimension (the source
  study's situation: monoT5 won every dimension), the frame's ``attrs["single_ranker"]`` names it
  and ``attrs["note"]`` says that each dimension's NRP, and the combined NRP, are that one NRP.
- **Empty D_q: skipped and reported.** An answer to a query without judged documents that have
  text cannot be ranked (NRP = 1 - r/0 is undefined). Such answers get no rows;
  ``attrs["skipped"]`` lists them with the reason and a warning is logged, so one topic without
  documents does not stop a run over thousands of answers. A qid the collection does not know
  is an error: the answers were generated for another collection.
- **Resumable.** Positions are stored per (collection, ranker fingerprint, injection mode, qid,
  answer_id, text hash) in ``indexes/NAME/nrp.sqlite`` after every batch (``chunk_size``
  answers), so an interrupted run continues where it stopped and an unchanged re-run computes
  nothing (``attrs["counts"]`` shows it). The tie rule is applied when the frame is built from
  the stored counts, so changing it recomputes nothing either.
- **Counts for the benchmark.** ``attrs["counts"]`` sums ``InjectionCounts`` over the rankers:
  answers scored, documents scored, documents rescored (lexical stats=query), pair evaluations
  (duoT5), answers served by the results cache; ``attrs["counts_by_ranker"]`` has them per
  ranker spec, ``attrs["injection"]`` the mode each ranker ran in.

``NRPScorer`` is the same as a PyTerrier transformer: (qid, docno = answer id, text) rows in,
the same rows with ``score``, ``rank`` (r), ``ties``, ``n_docs`` and ``nrp`` out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyterrier as pt

from nrp.collection.collection import Collection
from nrp.errors import ConfigError, NrpError
from nrp.executors.base import Executor, active_executor
from nrp.nrp import COMBINED
from nrp.nrp.injection import (
    AnswerInjector,
    InjectionCounts,
    describe_mode,
    injection_mode,
)
from nrp.nrp.results_cache import (
    POSITION_COLUMNS,
    RESULTS_FILE,
    PairCache,
    PositionScope,
    ResultsCache,
    text_sha,
)
from nrp.nrp.ties import check_tie_mode, nrp_value, rank_from_counts
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, ScoreCache
from nrp.rankers.registry import make_ranker

log = logging.getLogger(__name__)


RESULT_COLUMNS = (
    "answer_id",
    "llm",
    "prompt",
    "qid",
    "sample",
    "dimension",
    "ranker",
    "score",
    "rank",
    "n_docs",
    "ties",
    "nrp",
)
Progress = Callable[[str], None]
RankerChoice = Mapping[str, "str | Ranker"] | str | Path | Ranker


# -- inputs ------------------------------------------------------------------------------------
def _collection(collection: Collection | str) -> Collection:
    return collection if isinstance(collection, Collection) else Collection.load(str(collection))


def _check_answers(answers_df: pd.DataFrame) -> pd.DataFrame:
    """A copy with answer_id, llm, prompt, qid, sample, text (llm, prompt, sample optional:
    filled with '' / 0), ids as text; answer ids must be unique."""
    missing = [c for c in ("answer_id", "qid", "text") if c not in answers_df.columns]
    if missing:
        raise NrpError(f"answers need columns answer_id, qid and text; missing {missing}")
    answers = answers_df.reset_index(drop=True).copy()
    for column, default in (("llm", ""), ("prompt", ""), ("sample", 0)):
        if column not in answers.columns:
            answers[column] = default
    answers["answer_id"] = answers["answer_id"].astype(str)
    answers["qid"] = answers["qid"].astype(str)
    answers["text"] = answers["text"].where(answers["text"].notna(), "").astype(str)
    repeated = answers["answer_id"][answers["answer_id"].duplicated()]
    if len(repeated):
        raise NrpError(
            f"answer ids must be unique; {repeated.iloc[0]!r} occurs more than once "
            f"({repeated.nunique()} ids repeated)"
        )
    return answers


def resolve_rankers(
    rankers: RankerChoice, collection: Collection
) -> tuple[dict[str, Ranker], list[str]]:
    """dimension -> ranker (built, bound to the collection), and warnings.

    ``rankers``: a mapping dimension -> spec or ``Ranker``; a path to a validation JSON (its
    chosen ranker per dimension); a single spec or ``Ranker`` for every dimension of the
    collection. The same spec string builds one ranker object."""
    warnings: list[str] = []
    if isinstance(rankers, Ranker):
        chosen: Mapping[str, str | Ranker] = dict.fromkeys(collection.dimensions, rankers)
    elif isinstance(rankers, str | Path):
        text = str(rankers)
        if text.endswith(".json") or Path(text).is_file():
            chosen, warnings = _from_validation(Path(text), collection)
        else:
            chosen = dict.fromkeys(collection.dimensions, text)
    else:
        chosen = dict(rankers)
    if not chosen:
        raise ConfigError("no rankers: nothing to score answers with")
    built: dict[str, Ranker] = {}
    by_spec: dict[str, Ranker] = {}
    for dimension, choice in chosen.items():
        if isinstance(choice, str):
            if choice.startswith("run:"):
                raise ConfigError(
                    f"dimension {dimension!r}: {choice} is a run file; a run ranks only its "
                    "own documents and cannot rank a new answer (validate a ranker for it)"
                )
            if choice not in by_spec:
                by_spec[choice] = make_ranker(choice)
            built[str(dimension)] = by_spec[choice]
        elif isinstance(choice, Ranker):
            built[str(dimension)] = choice
        else:
            raise ConfigError(f"dimension {dimension!r}: not a ranker spec or Ranker: {choice!r}")
    for ranker in {id(r): r for r in built.values()}.values():
        ranker.bind_collection(collection)
    return built, warnings


def _from_validation(path: Path, collection: Collection) -> tuple[dict[str, str], list[str]]:
    from nrp.validation.result import ValidationResult

    result = ValidationResult.from_json(path)
    warnings = []
    if result.collection_fingerprint != collection.meta.get("fingerprint"):
        warnings.append(
            f"{path}: validated on collection {result.collection!r} with fingerprint "
            f"{result.collection_fingerprint[:12]}, not on {collection.name!r} "
            f"({str(collection.meta.get('fingerprint'))[:12]}): the choice may not apply"
        )
    chosen = result.chosen()
    if not chosen:
        raise ConfigError(f"{path}: validation chose no ranker for any dimension")
    return chosen, warnings


def normalised_weights(
    weights: Mapping[str, float] | None, dimensions: list[str]
) -> dict[str, float]:
    """Weights per dimension summing to 1 (equal when None). Every dimension needs a weight
    (none silently left out); negative weights and an all-zero sum are errors."""
    if weights is None:
        return {d: 1.0 / len(dimensions) for d in dimensions}
    unknown = sorted(set(weights) - set(dimensions))
    lacking = [d for d in dimensions if d not in weights]
    if unknown or lacking:
        raise ConfigError(
            f"weights must name exactly the scored dimensions {dimensions}"
            + (f"; unknown {unknown}" if unknown else "")
            + (f"; missing {lacking}" if lacking else "")
        )
    values = {d: float(weights[d]) for d in dimensions}
    if any(v < 0 or not np.isfinite(v) for v in values.values()) or sum(values.values()) <= 0:
        raise ConfigError(f"weights must be finite, >= 0 and not all 0: {values}")
    total = sum(values.values())
    return {d: v / total for d, v in values.items()}


# -- scoring -----------------------------------------------------------------------------------
def score_answers(
    collection: Collection | str,
    answers_df: pd.DataFrame,
    rankers: RankerChoice,
    ties: str = "mid",
    frozen_stats: bool = False,
    full_rerank: bool = False,
    weights: Mapping[str, float] | None = None,
    cache: bool = True,
    progress: Progress | None = None,
    *,
    chunk_size: int = 256,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """NRP of every answer per dimension, and combined (see the module docstring).

    ``answers_df``: answer_id, qid, text (llm, prompt, sample optional). ``rankers``: dimension
    -> spec or Ranker, a validation JSON path, or one spec / Ranker for every dimension.
    ``ties``: mid, optimistic, pessimistic or strict (``nrp.nrp.ties``). ``frozen_stats``:
    lexical rankers keep D_q's statistics instead of counting the answer in them.
    ``full_rerank``: the reference mode, D_q re-ranked from scratch for every answer.
    ``cache``: use the score cache, pair cache and results cache beside the collection.
    ``progress``: called with one line per ranker and batch. ``executor``: where the answers
    missing from the results cache are positioned (``nrp.executors``; default: the active
    executor, else this process), in per-query partitions of up to ``chunk_size`` answers.
    """
    executor = executor if executor is not None else active_executor()
    collection = _collection(collection)
    tie_mode = check_tie_mode(ties)
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be at least 1, got {chunk_size}")
    answers = _check_answers(answers_df)
    by_dimension, warnings = resolve_rankers(rankers, collection)
    dimensions = list(by_dimension)
    weight_of = normalised_weights(weights, dimensions)

    candidates = collection.candidates()
    sizes = candidates.groupby(candidates["qid"].astype(str)).size()
    known = set(collection.topics["qid"].astype(str))
    unknown = sorted(set(answers["qid"]) - known)
    if unknown:
        raise NrpError(
            f"{len(unknown)} answer qid(s) are not topics of collection {collection.name!r}: "
            f"{', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}"
        )
    empty = ~answers["qid"].isin(sizes.index)
    skipped = [
        {"answer_id": a, "qid": q, "reason": "no judged documents with text (empty D_q)"}
        for a, q in zip(answers.loc[empty, "answer_id"], answers.loc[empty, "qid"], strict=True)
    ]
    if skipped:
        qids = sorted({s["qid"] for s in skipped})
        message = (
            f"{len(skipped)} answer(s) of {len(qids)} query(ies) without judged documents with "
            f"text cannot be ranked and are skipped: {', '.join(qids[:5])}"
        )
        log.warning(message)
        warnings.append(message)
    ranked = answers[~empty].reset_index(drop=True)
    ranked["text_sha"] = [text_sha(t) for t in ranked["text"]]

    results = ResultsCache(collection.path / RESULTS_FILE) if cache else None
    score_cache = ScoreCache(collection.path / SCORE_CACHE_FILE) if cache else None
    pair_cache = PairCache(collection.path / SCORE_CACHE_FILE) if cache else None

    # one positioning per distinct ranker (fingerprint), shared by its dimensions; computed
    # once per ranker object (a fingerprint hashes the model files)
    fingerprint_of: dict[int, str] = {}
    for ranker in by_dimension.values():
        if id(ranker) not in fingerprint_of:
            fingerprint_of[id(ranker)] = ranker.fingerprint()
    fingerprints = {d: fingerprint_of[id(r)] for d, r in by_dimension.items()}
    groups: dict[str, list[str]] = {}
    for dimension, fingerprint in fingerprints.items():
        groups.setdefault(fingerprint, []).append(dimension)
    positions: dict[str, pd.DataFrame] = {}
    counts_by_ranker: dict[str, dict[str, int]] = {}
    modes: dict[str, str] = {}
    total = InjectionCounts()
    for fingerprint, dims in groups.items():
        ranker = by_dimension[dims[0]]
        spec = ranker.spec()
        mode = injection_mode(ranker, frozen_stats, full_rerank)
        modes[spec] = describe_mode(mode, ranker)
        found, counts = _position_with(
            collection,
            ranker,
            fingerprint,
            ranked,
            mode,
            frozen_stats,
            full_rerank,
            results,
            score_cache,
            pair_cache,
            candidates,
            chunk_size,
            progress,
            executor,
        )
        positions[fingerprint] = found
        counts_by_ranker[spec] = counts.as_dict()
        total.add(counts)

    frame = _result_frame(ranked, by_dimension, fingerprints, positions, tie_mode, weight_of)
    specs = {d: r.spec() for d, r in by_dimension.items()}
    single = next(iter(specs.values())) if len(groups) == 1 else None
    frame.attrs.update(
        {
            "collection": collection.name,
            "collection_fingerprint": collection.meta.get("fingerprint"),
            "ties": tie_mode,
            "full_rerank": bool(full_rerank),
            "frozen_stats": bool(frozen_stats),
            "rankers": specs,
            "weights": weight_of,
            "injection": modes,
            "single_ranker": single,
            "note": _note(single, dimensions),
            "counts": {
                "answers": len(answers),
                "answers_skipped": len(skipped),
                "rankers_scored": len(groups),
                **total.as_dict(),
            },
            "counts_by_ranker": counts_by_ranker,
            "skipped": skipped,
            "warnings": warnings,
        }
    )
    return frame


def _note(single: str | None, dimensions: list[str]) -> str:
    if single is None:
        return ""
    if len(dimensions) == 1:
        return f"one dimension ({dimensions[0]}), ranked by {single}"
    return (
        f"one ranker ({single}) was chosen for every dimension ({', '.join(dimensions)}): each "
        "answer was positioned once, and each dimension's NRP and the combined NRP are that "
        "one NRP (the source study reported a single NRP)"
    )


def _position_with(
    collection: Collection,
    ranker: Ranker,
    fingerprint: str,
    answers: pd.DataFrame,
    mode: str,
    frozen_stats: bool,
    full_rerank: bool,
    results: ResultsCache | None,
    score_cache: ScoreCache | None,
    pair_cache: PairCache | None,
    candidates: pd.DataFrame,
    chunk_size: int,
    progress: Progress | None,
    executor: Executor | None = None,
) -> tuple[pd.DataFrame, InjectionCounts]:
    """Positions of every answer by one ranker: from the results cache, the rest computed in
    batches of ``chunk_size`` answers, each batch stored as soon as it is done."""
    spec = ranker.spec()
    scope = PositionScope(
        str(collection.meta["fingerprint"]),
        fingerprint,
        mode,
        spec,
        collection.name,
        float(ranker.score_tolerance),
    )
    counts = InjectionCounts()
    stored = (
        results.lookup(scope, answers)
        if results is not None
        else pd.DataFrame(columns=list(POSITION_COLUMNS))
    )
    counts.answers_from_results_cache = len(stored)
    todo = answers[~answers["answer_id"].isin(stored["answer_id"].astype(str))]
    if progress:
        progress(f"{spec}: {len(answers)} answers, {len(stored)} from the results cache")
    parts = [stored]
    if len(todo) and executor is not None:  # partitions computed elsewhere, stored here
        from nrp.executors.scoring import position_with_executor

        found_parts, found_counts = position_with_executor(
            executor, collection, ranker, fingerprint, mode, scope, todo, frozen_stats,
            full_rerank, results, score_cache, pair_cache, candidates, chunk_size, progress,
        )  # fmt: skip
        parts.extend(found_parts)
        counts.add(found_counts)
    elif len(todo):
        injector = AnswerInjector(
            collection,
            ranker,
            frozen_stats=frozen_stats,
            full_rerank=full_rerank,
            score_cache=score_cache,
            pair_cache=pair_cache,
            candidates=candidates,
        )
        for start in range(0, len(todo), chunk_size):
            chunk = todo.iloc[start : start + chunk_size]
            found = injector.position(chunk)
            if results is not None:
                results.store(scope, found, chunk["text_sha"].tolist())
            parts.append(found)
            if progress:
                progress(f"{spec}: {min(start + chunk_size, len(todo))}/{len(todo)} positioned")
        counts.add(injector.counts)
    out = pd.concat([p for p in parts if len(p)], ignore_index=True) if len(answers) else parts[0]
    return out.drop_duplicates("answer_id").set_index("answer_id"), counts


def _result_frame(
    answers: pd.DataFrame,
    by_dimension: Mapping[str, Ranker],
    fingerprints: Mapping[str, str],
    positions: Mapping[str, pd.DataFrame],
    tie_mode: str,
    weight_of: Mapping[str, float],
) -> pd.DataFrame:
    """Rows per (answer, dimension), then a combined row per answer, in answer order."""
    base = answers[["answer_id", "llm", "prompt", "qid", "sample"]]
    if base.empty:
        return pd.DataFrame(columns=list(RESULT_COLUMNS))
    parts = []
    for order, (dimension, ranker) in enumerate(by_dimension.items()):
        found = positions[fingerprints[dimension]].reindex(base["answer_id"])
        if tie_mode == "strict":
            rank = found["strict"].to_numpy(dtype=np.float64)
        else:
            rank = rank_from_counts(
                found["above"].to_numpy(dtype=np.float64),
                found["ties"].to_numpy(dtype=np.float64),
                tie_mode,
            )
        n_docs = found["n_docs"].to_numpy(dtype=np.int64)
        part = base.assign(
            dimension=dimension,
            ranker=ranker.spec(),
            score=found["score"].to_numpy(dtype=np.float64),
            rank=np.asarray(rank, dtype=np.float64),
            n_docs=n_docs,
            ties=found["ties"].to_numpy(dtype=np.int64),
            nrp=nrp_value(rank, n_docs) if len(n_docs) else np.zeros(0),
            _answer=np.arange(len(base)),
            _order=order,
        )
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True)
    combined = (
        frame.assign(weighted=frame["nrp"] * frame["dimension"].map(weight_of))
        .groupby("_answer", sort=True)
        .agg(nrp=("weighted", "sum"), n_docs=("n_docs", "first"))
    )
    combined_rows = base.iloc[combined.index].assign(
        dimension=COMBINED,
        ranker="",
        score=np.nan,
        rank=np.nan,
        n_docs=combined["n_docs"].to_numpy(dtype=np.int64),
        ties=pd.NA,
        nrp=combined["nrp"].to_numpy(dtype=np.float64),
        _answer=combined.index.to_numpy(),
        _order=len(by_dimension),
    )
    frame = pd.concat([frame, combined_rows], ignore_index=True)
    frame = frame.sort_values(["_answer", "_order"], kind="stable").reset_index(drop=True)
    frame["ties"] = frame["ties"].astype("Int64")
    return frame[list(RESULT_COLUMNS)]


def score(
    collection: Collection | str,
    answers: pd.DataFrame | str | Path | Any,
    rankers: RankerChoice,
    **options: Any,
) -> pd.DataFrame:
    """``nrp.score``: the library entry point, ``score_answers`` with its options.

    ``answers``: a frame (answer_id, llm, prompt, qid, sample, text), an answer file or folder
    (read with ``nrp.nrp.answers.read_answers``, checked against the collection's topics), or
    what ``read_answers`` returned (an object with an ``answers`` frame)."""
    collection = _collection(collection)
    if isinstance(answers, str | Path):
        from nrp.nrp.answers import read_answers

        answers = read_answers(answers, collection)
    if not isinstance(answers, pd.DataFrame):
        answers = answers.answers
    return score_answers(collection, answers, rankers, **options)


# -- PyTerrier ---------------------------------------------------------------------------------
class NRPScorer(pt.Transformer):
    """NRP as a PyTerrier transformer, for pipelines.

    Input rows: ``qid``, ``docno`` (the answer's id; it must not be a docno of D_q), ``text``
    (and any other columns, kept; ``query`` is not used: an answer is ranked for the
    collection's own topic, the query D_q is scored with). Output: the same rows with
    ``score`` (the ranker's score of the answer), ``rank`` (r, zero-based; a half-integer under
    the mid rule), ``ties``, ``n_docs`` (|D_q|) and ``nrp``. Rows of queries without judged
    documents get NaN (and a logged warning). Caching and options as ``score_answers``.
    """

    def __init__(
        self,
        collection: Collection | str,
        ranker_spec: str | Ranker,
        *,
        ties: str = "mid",
        frozen_stats: bool = False,
        full_rerank: bool = False,
        cache: bool = True,
    ):
        self.collection = _collection(collection)
        self.ranker = make_ranker(ranker_spec) if isinstance(ranker_spec, str) else ranker_spec
        self.ranker.bind_collection(self.collection)
        self.ties = check_tie_mode(ties)
        self.frozen_stats = frozen_stats
        self.full_rerank = full_rerank
        self.cache = cache

    def __str__(self) -> str:
        return f"NRP({self.ranker.spec()}, ties={self.ties})"

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        missing = [c for c in ("qid", "docno", "text") if c not in inp.columns]
        if missing:
            raise ValueError(f"NRPScorer needs columns qid, docno, text; missing {missing}")
        out = inp.drop(
            columns=["score", "rank", "ties", "n_docs", "nrp"], errors="ignore"
        ).reset_index(drop=True)
        if out.empty:
            return out.assign(score=[], rank=[], ties=[], n_docs=[], nrp=[])
        answers = pd.DataFrame(
            {
                "answer_id": out["docno"].astype(str),
                "qid": out["qid"].astype(str),
                "text": out["text"],
            }
        )
        result = score_answers(
            self.collection,
            answers,
            {"nrp": self.ranker},
            ties=self.ties,
            frozen_stats=self.frozen_stats,
            full_rerank=self.full_rerank,
            cache=self.cache,
        )
        rows = result[result["dimension"] == "nrp"].set_index("answer_id")
        rows = rows.reindex(out["docno"].astype(str))
        return out.assign(
            **{
                column: rows[column].astype(float).to_numpy()
                for column in ("score", "rank", "ties", "n_docs", "nrp")
            }
        )
