"""Validation: rank D_q with every ranker (or read external runs), score each against every
quality dimension, and choose the best ranker per dimension.

``validate`` runs rankers over ``collection.candidates()`` through the score cache
(``indexes/NAME/scores.sqlite``), so validating again, or adding one ranker, computes only what is
new. ``validate_runs`` evaluates external run files the same way (same measures, queries,
statistics and selection rule). Both return a ``ValidationResult``; see ``measures`` for exactly
which judgments and queries are used, ``statistics`` for the tests, ``selection`` for the rule.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from warnings import warn

import numpy as np
import pandas as pd
import pyterrier as pt

from nrp import statistics
from nrp.collection.collection import Collection
from nrp.errors import ConfigError, InputError, NrpError, NrpWarning
from nrp.executors.base import Executor, active_executor
from nrp.measures import (
    DimensionQrels,
    MeasureEvaluator,
    load_qrels,
    measure_bounds,
    parse_measures,
    run_from_frame,
)
from nrp.models.device import progress as progress_bar
from nrp.progress import Progress, reporting
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, CachedRanker, ScoreCache
from nrp.rankers.coerce import as_rankers
from nrp.rankers.dense import embedding_memo
from nrp.rankers.registry import RankerSpec, default_rankers, parse_rankers, spec_at_dtype
from nrp.settings import settings_with
from nrp.validation.degenerate import degenerate_frame, query_materials
from nrp.validation.partitions import rank_with_executor
from nrp.validation.real_answers import (
    RealAnswerTexts,
    cross_fitted,
    read_real_answers,
    real_figures,
)
from nrp.validation.result import (
    VALIDATION_FILE,
    DimensionResult,
    PairTest,
    Summary,
    SystemInfo,
    ValidationResult,
)
from nrp.validation.runs import (
    RunFile,
    RunFormat,
    RunOut,
    check_run_folder,
    check_trec_ids,
    frame_of,
    read_run,
    unique_file,
    write_runs,
)
from nrp.validation.selection import SELECTION_RULE, choose, default_weights
from nrp.validation.settings import ValidationSettings
from nrp.validation.validity import (
    RankedForValidity,
    Validity,
    answer_words,
    floored_answers,
    measure_validity,
    score_texts,
    with_fallback,
    with_real_answers,
)

#: the ranker a warning suggests when no ranker passes validity
GUARD_HINT = "dense,guard:ranker=dense"

NO_RELEVANT = "without a relevant judgment"
#: the chance ranker every choice is tested against (``ValidationSettings.random_control``)
RANDOM = "random"
#: a validated system: what the result says of it, and its run (qid -> docno -> score)
System = tuple[SystemInfo, dict[str, dict[str, float]]]


def validate(
    collection: Collection,
    ranker_specs: Sequence[str | Ranker] | Mapping[str, Any] | str | None = None,
    settings: ValidationSettings | None = None,
    *,
    cache: bool = True,
    progress: Progress | None = None,
    executor: Executor | None = None,
    save_runs: str | Path | None = None,
    save: bool | str | Path = False,
    **overrides: Any,
) -> ValidationResult:
    """Rank D_q with each ranker and choose the best ranker per dimension.

    ``ranker_specs``: spec strings (``"bm25"``, ``"monot5:batch=64"``, ``"random"``), a
    comma-separated string of them, ``Ranker`` objects or any PyTerrier transformers (wrapped
    by ``nrp.rankers.pyterrier.from_transformer``), or one of these; or a mapping of name to
    one of these, the names shown in the result's tables (as ``pt.Experiment``'s ``names``;
    otherwise a ranker's name is ``str(ranker)``, its spec); None: the default set
    (``nrp.rankers.registry.DEFAULT_RANKERS``: tfidf, dph, bm25, dense, guard, guard:content=0.06,
    random). ``save``: True writes the result where ``nrp validate`` writes it and ``nrp score``
    reads it (``collection.path / VALIDATION_FILE``), a path writes it there. ``settings`` and
    ``overrides`` (its fields: ``labels="raw"``, ``dimensions=[...]``, ...): see
    ``ValidationSettings``.
    ``cache``: serve and store scores in ``collection.path / "scores.sqlite"``. ``progress``:
    called with one line per ranker. ``executor``: where the documents are scored
    (``nrp.executors``; default: the active executor, else this process), in per-query
    partitions stored in the score cache as they arrive; the measures are computed here either
    way. ``save_runs``: a folder to write each ranker's ranking of D_q to, as a TREC run file
    (``nrp.validation.runs.write_runs``; checked before any ranking). ``real_answers=[FILE,
    ...]`` (a settings field): real answers that nobody fitted or calibrated on, read before any
    ranking; each ranker's validity then reports what it does to them and fails a ranker that
    floors more than ``validity_max_floored`` of them (``nrp.validation.real_answers``)."""
    checked = settings_with(ValidationSettings, settings, overrides).checked(collection)
    real = read_real_answers(collection, checked.real_answers)
    if real is not None and not checked.validity:
        raise ConfigError("real answers are ranked in validity: they need validity on")
    specs = default_rankers() if ranker_specs is None else ranker_specs
    names, rankers = _named_rankers(collection, _at_dtype(specs, checked.dtype))
    if checked.random_control and not any(r.name == RANDOM for r in rankers):
        control = _rankers(collection, RANDOM)[0]  # the chance control
        names, rankers = [*names, str(control)], [*rankers, control]
    _check_unique(names, "ranker name")
    executor = executor if executor is not None else active_executor()
    candidates = collection.candidates()
    if save_runs is not None:
        check_run_folder(save_runs)
        check_trec_ids(candidates["qid"].unique(), "qid")
        check_trec_ids(candidates["docno"].unique(), "docno")
    score_cache = ScoreCache(collection.path / SCORE_CACHE_FILE) if cache else None
    # without a progress callback (a notebook, a script) a bar over the rankers shows the
    # time left; with one (the CLI) its counted lines say the same (``nrp.progress``)
    bar = progress_bar(rankers, len(rankers), "validating rankers", verbose=progress is None)
    systems, scored = [], None
    # the candidates read the same texts: each embedded once; a model's batches say how far
    # they are (``reporting``: a neural ranker's D_q is minutes of embedding)
    with embedding_memo(), reporting(progress):
        for name, ranker in zip(names, bar, strict=True):
            systems.append(
                _ranker_system(
                    collection, (name, ranker), candidates, score_cache, executor, progress
                )
            )
            if progress:
                progress(f"rankers: {len(systems)}/{len(rankers)} validated")
        if checked.validity:
            scored = _degenerate_scores(
                collection, checked, (rankers, systems), candidates, score_cache, progress, real
            )
    result = _evaluate(collection, checked, systems, candidates, warnings=[], scored=scored)
    if save_runs is not None:
        _save_runs(save_runs, systems)
    if save is not False:
        result.to_json(collection.path / VALIDATION_FILE if save is True else Path(save))
    return result


def _degenerate_scores(
    collection: Collection,
    settings: ValidationSettings,
    validated: tuple[list[Ranker], list[System]],
    candidates: pd.DataFrame,
    score_cache: ScoreCache | None,
    progress: Progress | None,
    real: RealAnswerTexts | None = None,
) -> dict[str, RankedForValidity]:
    """system name -> its degenerate texts ranked among D_q, its score tolerance, the judged
    documents its run floors (``Ranker.floors``) and what it does to real answers (``real``,
    given ones; its calibration cross-fitted). The texts are built once from the collection
    (``degenerate_frame``; "best document": highest mean gain over the validated
    dimensions). ``validated``: the rankers and their systems, in the same order."""
    texts = validity_texts(collection, candidates, settings)
    if progress:
        progress(f"validity: ranking {len(texts)} degenerate texts with each ranker")
        if real is not None:
            progress(f"validity: ranking {len(real.frame)} real answers with each ranker")
    fingerprint = str(collection.meta.get("fingerprint", ""))
    return {
        info.name: RankedForValidity(
            score_texts(ranker, candidates, texts, run, score_cache, fingerprint),
            ranker.score_tolerance,
            _floored(ranker, run),
            real=(
                None if real is None
                else real_figures(ranker, candidates, real, run, score_cache, fingerprint)
            ),
            cross_fitted=cross_fitted(ranker, settings.seed),
        )
        for ranker, (info, run) in zip(*validated, strict=True)
    }  # fmt: skip


def _floored(ranker: Ranker, run: Mapping[str, Mapping[str, float]]) -> frozenset[tuple[str, str]]:
    """The (qid, docno) of ``run`` whose scores ``ranker`` floors."""
    keys = [(q, d) for q, docs in run.items() for d in docs]
    scores = np.array([run[q][d] for q, d in keys], dtype=float)
    return frozenset(key for key, low in zip(keys, ranker.floors(scores), strict=True) if low)


def validity_texts(
    collection: Collection, candidates: pd.DataFrame, settings: ValidationSettings
) -> pd.DataFrame:
    """The degenerate texts validation ranks (``nrp.validation.degenerate``), from the checked
    ``settings``: kinds, texts per kind, other queries drawn and seed."""
    gains: dict[tuple[str, str], list[float]] = {}
    for dimension in settings.dimensions or []:
        for row in collection.qrels(dimension).itertuples(index=False):
            gains.setdefault((str(row.qid), str(row.docno)), []).append(float(row.label))
    mean_gain = {key: float(np.mean(values)) for key, values in gains.items()}
    materials = query_materials(candidates, mean_gain, settings.seed, settings.validity_other_draws)
    return degenerate_frame(
        materials, settings.validity_kinds, settings.validity_per_kind, settings.seed
    )


def _save_runs(folder: str | Path, systems: list[System]) -> None:
    """Each system's run as ``NAME.run`` (its name made a file name), tagged with its name."""
    used: set[str] = set()
    runs = [
        RunOut(unique_file(info.name, used), info.name, frame_of(run),
               {"spec": info.spec, "fingerprint": info.fingerprint})
        for info, run in systems
    ]  # fmt: skip
    write_runs(folder, runs)


def _at_dtype(specs: Any, dtype: str | None) -> Any:
    """``specs`` (what ``validate`` takes) with every neural ranker at ``dtype``
    (``RankerSpec.at_dtype``; None: as given); a ranker given as an object is refused, since
    it keeps its own precision."""
    if dtype is None:
        return specs
    if isinstance(specs, Mapping):
        return {name: spec_at_dtype(one, dtype) for name, one in specs.items()}
    if isinstance(specs, str | RankerSpec):
        specs = parse_rankers(specs)
    elif isinstance(specs, Ranker | pt.Transformer):
        specs = [specs]
    return [spec_at_dtype(one, dtype) for one in specs]


def _rankers(collection: Collection, ranker_specs: Sequence[str | Ranker] | str) -> list[Ranker]:
    """The rankers of ``ranker_specs`` (``as_rankers``), bound to ``collection``, their specs
    unique."""
    rankers = as_rankers(ranker_specs)
    if not rankers:
        raise ConfigError("no rankers to validate")
    for ranker in rankers:
        ranker.bind_collection(collection)
    _check_unique([r.spec() for r in rankers], "ranker spec")
    return rankers


def _named_rankers(
    collection: Collection, ranker_specs: Sequence[str | Ranker] | Mapping[str, Any] | str
) -> tuple[list[str], list[Ranker]]:
    """(names, rankers) of ``ranker_specs`` (``_rankers``): a mapping's keys, else each
    ranker's ``str`` (its spec, or a wrapped transformer's ``name``)."""
    if not isinstance(ranker_specs, Mapping):
        rankers = _rankers(collection, ranker_specs)
        return [str(r) for r in rankers], rankers
    names = [str(name).strip() for name in ranker_specs]
    if not all(names):
        raise ConfigError("a ranker's name in the mapping is empty")
    return names, _rankers(collection, list(ranker_specs.values()))


def _ranker_system(
    collection: Collection,
    named: tuple[str, Ranker],
    candidates: pd.DataFrame,
    score_cache: ScoreCache | None,
    executor: Executor | None,
    progress: Progress | None,
) -> System:
    """``ranker``'s ranking of D_q (from the score cache where it has the scores, else computed
    here or on ``executor``) and what the result says of it, under the name of ``named``
    (name, ranker)."""
    name, ranker = named
    if progress:
        progress(f"ranking {len(candidates)} documents with {ranker.spec()}")
    if executor is not None:
        ranked, computed = rank_with_executor(
            executor, collection, ranker, candidates, score_cache, progress
        )
    elif score_cache is not None:
        transformer = CachedRanker(ranker, score_cache, collection.meta["fingerprint"])
        ranked = transformer.ranked_in_order(candidates)
        computed = transformer.computed
    else:
        ranked = ranker.ranked_in_order(candidates)
        computed = len(candidates)
    scores = ranked["score"].to_numpy(dtype=float)
    if len(ranked) != len(candidates) or not np.all(np.isfinite(scores)):
        raise NrpError(
            f"ranker {ranker.spec()} returned {len(ranked)} rows for {len(candidates)} "
            "candidates, or scores that are not finite numbers"
        )
    info = SystemInfo(
        name=name,
        spec=ranker.spec(),
        fingerprint=ranker.fingerprint(),
        kind="ranker",
        rows=len(ranked),
        computed=computed,
    )
    return info, run_from_frame(ranked)


#: ``validate_runs`` scores a run against every judgment by default, as trec_eval would
RUN_SETTINGS = ValidationSettings(qrels_scope="all", validity=False)


def validate_runs(
    collection: Collection,
    run_paths: Sequence[str | Path],
    settings: ValidationSettings | None = None,
    *,
    names: Literal["stem", "tag"] = "stem",
    run_format: RunFormat | None = None,
    **overrides: Any,
) -> ValidationResult:
    """Evaluate external run files (TREC or CSV/TSV) like rankers.

    Every row of a run is kept: its documents need no text in the store and need not be in D_q.
    ``settings`` default to ``RUN_SETTINGS``: ``qrels_scope`` is ``"all"``, so a run is scored
    against every judgment, as trec_eval would score it (``"candidates"`` scores it exactly as
    ``validate`` scores rankers); ``overrides`` replace fields of the settings.
    ``names``: a run is named by its file stem, or by its run tag (a TREC file with one tag;
    CSV/TSV files, which have no tag, keep their stem)."""
    base = settings if settings is not None else RUN_SETTINGS
    checked = settings_with(ValidationSettings, base, overrides).checked(collection)
    if names not in ("stem", "tag"):
        raise ConfigError(f"run names must come from 'stem' or 'tag', not {names!r}")
    if not run_paths:
        raise ConfigError("no run files to validate")
    known_qids = set(collection.topics["qid"].astype(str))
    judged = collection.judgments()
    judged_pairs = set(zip(judged["qid"].astype(str), judged["docno"].astype(str), strict=True))
    warnings: list[str] = []
    runs = [read_run(path, run_format) for path in run_paths]
    for run in runs:
        _check_judged(run, judged_pairs, collection.name)
    systems = [_run_system(run, names, known_qids, collection.name, warnings) for run in runs]
    _check_unique([info.name for info, _ in systems], "run name")
    candidates = collection.candidates() if checked.qrels_scope == "candidates" else None
    return _evaluate(collection, checked, systems, candidates, warnings)


def _check_judged(run: RunFile, judged: set[tuple[str, str]], collection_name: str) -> None:
    """InputError when no (qid, docno) of ``run`` is judged in the collection: every measure
    of it would be 0 (a run of another collection, or ids written differently), not a result."""
    pairs = zip(run.frame["qid"].astype(str), run.frame["docno"].astype(str), strict=True)
    if not any(pair in judged for pair in pairs):
        raise InputError(
            run.path,
            None,
            f"matches no judged document of collection {collection_name!r} (none of its "
            f"{len(run.frame):,} rows' qid and docno is judged): a run of another collection?",
        )


def _run_system(
    run: RunFile,
    names: Literal["stem", "tag"],
    known_qids: set[str],
    collection_name: str,
    warnings: list[str],
) -> System:
    """A run file as a system; its warnings (and qids unknown to the collection) added to
    ``warnings``."""
    warnings.extend(run.warnings)
    name = run.stem
    if names == "tag" and run.tags:
        if len(run.tags) > 1:
            raise InputError(
                run.path, None, f"has {len(run.tags)} run tags ({', '.join(run.tags[:5])}); "
                "name runs by file stem instead"
            )  # fmt: skip
        name = run.tags[0]
    unknown = sorted(set(run.frame["qid"]) - known_qids)
    if unknown:
        warnings.append(
            f"{run.path}: {len(unknown)} qid(s) not in collection {collection_name!r} "
            f"ignored: {', '.join(unknown[:10])}" + (" ..." if len(unknown) > 10 else "")
        )
    info = SystemInfo(
        name=name,
        spec=f"run:{run.path}",
        fingerprint=run.fingerprint,
        kind="run",
        rows=len(run.frame),
        source=str(run.path),
        tags=list(run.tags),
    )
    return info, run_from_frame(run.frame)


def _check_unique(names: list[str], what: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"{what} {name!r} given twice")
        seen.add(name)


def _evaluate(
    collection: Collection,
    settings: ValidationSettings,
    systems: list[System],
    candidates: pd.DataFrame | None,
    warnings: list[str],
    scored: dict[str, RankedForValidity] | None = None,
) -> ValidationResult:
    measures = parse_measures(settings.measures)
    words = {}  # (qid, docno) -> words of the text, for the floored answers of validity
    if scored and candidates is not None:
        keys = zip(candidates["qid"].astype(str), candidates["docno"].astype(str), strict=True)
        words = dict(zip(keys, answer_words(candidates["text"]), strict=True))
    dimensions = {}
    control = next(
        (i.name for i, _ in systems if i.kind == "ranker" and i.spec.partition(":")[0] == RANDOM),
        None,
    )
    for dimension in settings.dimensions:
        qrels = load_qrels(
            collection, dimension, settings.labels, settings.qrels_scope, settings.query_set,
            candidates,
        )  # fmt: skip
        evaluator = MeasureEvaluator.for_dimension(measures, qrels)
        per_query = {}
        for info, run in systems:
            per_query[info.name] = evaluator.per_query(run)
            absent = [q for q in qrels.evaluated_qids if not run.get(q)]
            if absent:
                warnings.append(
                    f"{info.name}: no documents for {len(absent)} evaluated queries of "
                    f"{dimension!r} (scored 0): {', '.join(absent[:10])}"
                    + (" ..." if len(absent) > 10 else "")
                )
        validity = _validity(qrels, settings, scored, words)
        dimensions[dimension] = _dimension_result(qrels, per_query, settings, validity, control)
        if not qrels.evaluated_qids:
            warnings.append(f"{dimension!r}: no query to average over; nothing chosen")
            warn(f"{warnings[-1]} (print the result for its tables)", NrpWarning, stacklevel=3)
        elif validity and dimensions[dimension].choice is None:
            warnings.append(_nothing_passed(collection.name, dimension, validity))
            warn(f"{warnings[-1]} (print the result for its tables)", NrpWarning, stacklevel=3)
        elif (fallen := dimensions[dimension].choice) and fallen.fallback_wins is not None:
            warnings.append(
                f"{dimension!r}: no ranker passed validity (judged documents above each "
                f"degenerate kind in {settings.validity_min_wins} of pairs); {fallen.best} is "
                f"chosen under the fallback ({fallen.fallback_wins}): the validity table says "
                "each ranker's worst kind"
            )
            warn(warnings[-1], NrpWarning, stacklevel=3)
    _, _, unvalidated = default_weights({d: r.choice for d, r in dimensions.items()})
    if unvalidated:
        warnings.append(unvalidated)
    return ValidationResult(
        collection=collection.name,
        collection_fingerprint=str(collection.meta.get("fingerprint", "")),
        labels=settings.labels,
        qrels_scope=settings.qrels_scope,
        query_set=settings.query_set,
        measures=settings.measures,
        settings=settings.as_json(),
        selection_rule=SELECTION_RULE,
        systems=[info for info, _ in systems],
        dimensions=dimensions,
        warnings=warnings,
    )


def _nothing_passed(collection: str, dimension: str, validity: Mapping[str, Validity]) -> str:
    """The warning of a dimension where no ranker passed validity: what to validate next, or,
    where real answers given failed rankers, how many."""
    real = [name for name, v in validity.items() if v.reason.startswith("real answers:")]
    if real:
        return (
            f"{dimension!r}: no ranker passed validity; {len(real)} of them ({', '.join(real)}) "
            "floor too many of the real answers given, the others let degenerate texts score "
            "high: nothing is chosen (the validity table says each one's reason)"
        )
    return (
        f"{dimension!r}: no ranker passed validity (degenerate texts such as the question "
        "echoed score above real answers), so nothing is chosen; validate a guarded ranker: "
        f"nrp validate {collection} --rankers {GUARD_HINT}"
    )


def _validity(
    qrels: DimensionQrels,
    settings: ValidationSettings,
    scored: dict[str, RankedForValidity] | None,
    words: Mapping[tuple[str, str], int],
) -> dict[str, Validity]:
    """system -> its validity in the dimension of ``qrels`` (empty when validity is not
    measured); relevant: the judgments the measures use with label >= 1. ``words``: (qid,
    docno) -> the number of words of D_q's texts."""
    if not scored:
        return {}
    relevant: dict[str, set[str]] = {q: set() for q in qrels.evaluated_qids}
    grades: dict[tuple[str, str], float] = {}
    frame = qrels.frame
    for row in frame[frame["label"] >= 1].itertuples(index=False):
        if str(row.qid) in relevant:
            relevant[str(row.qid)].add(str(row.docno))
            grades[(str(row.qid), str(row.docno))] = float(row.label)
    return {
        name: with_real_answers(
            with_fallback(
                measure_validity(
                    ranked.texts,
                    relevant,
                    tolerance=ranked.tolerance,
                    min_wins=settings.validity_min_wins,
                    max_nrp=settings.validity_max_nrp,
                    confidence=settings.confidence,
                    answers=floored_answers(ranked.floored, relevant, words),
                    grades=grades,
                ),
                settings.validity_fallback_wins,
            ),
            ranked.real,
            ranked.cross_fitted,
            settings.validity_max_floored,
        )
        for name, ranked in scored.items()
    }


def _dimension_result(
    qrels: DimensionQrels,
    per_query: dict[str, dict[str, dict[str, float]]],
    settings: ValidationSettings,
    validity: dict[str, Validity] | None = None,
    control: str | None = None,
) -> DimensionResult:
    """One dimension's means, tests and choice; ``control``: the random ranker's name (None:
    the choice is not tested against chance)."""
    names = list(per_query)
    qids = qrels.evaluated_qids
    summary: dict[str, dict[str, Summary]] = {}
    for name in names:
        summary[name] = {}
        for measure in settings.measures:
            values = [per_query[name][measure][q] for q in qids]
            ci = (settings.ci, settings.confidence, settings.n_resamples, settings.seed)
            bounds = measure_bounds(measure)
            interval = statistics.confidence_interval(values, *ci, bounds) if values else None
            summary[name][measure] = Summary(
                mean=float(np.mean(values)) if values else 0.0,
                ci_low=None if interval is None else interval[0],
                ci_high=None if interval is None else interval[1],
                n=len(values),
            )
    primary = settings.measures[0]
    pairs = list(itertools.combinations(names, 2))
    raw_p = []
    for a, b in pairs:
        first = [per_query[a][primary][q] for q in qids]
        second = [per_query[b][primary][q] for q in qids]
        raw_p.append(
            statistics.paired_test(
                first, second, settings.test, settings.n_resamples, settings.seed
            )
        )
    corrected = statistics.correct(raw_p, settings.correction)
    tests = [
        PairTest(
            a,
            b,
            summary[a][primary].mean - summary[b][primary].mean,
            p,
            p_corr,
        )
        for (a, b), p, p_corr in zip(pairs, raw_p, corrected, strict=True)
    ]
    choice = None
    if qids:
        means = {n: {m: summary[n][m].mean for m in settings.measures} for n in names}
        corrected_by_pair = {frozenset((t.a, t.b)): t.p_corrected for t in tests}
        failed = {n: v.reason for n, v in (validity or {}).items() if not v.passed}
        below = {n: v.fallback_reason for n, v in (validity or {}).items() if v.fallback_reason}
        fallback = (settings.validity_fallback_wins, below) if validity else None
        choice = choose(
            means, settings.measures, names, corrected_by_pair, settings.alpha, failed, control,
            fallback,
        )  # fmt: skip
    return DimensionResult(
        dimension=qrels.dimension,
        judged_queries=list(qrels.judged_qids),
        evaluated_queries=list(qids),
        excluded_queries=(
            {NO_RELEVANT: list(qrels.without_relevant)}
            if settings.query_set == "with_relevant"
            else {}
        ),
        judgments=len(qrels.frame),
        out_of_scope_judgments=qrels.out_of_scope_judgments,
        per_query=per_query,
        summary=summary,
        tests=tests,
        choice=choice,
        validity=dict(validity or {}),
    )
