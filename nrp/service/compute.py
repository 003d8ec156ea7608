"""What the worker computes, each one call into the library API over the models of its pool.

- ``run_rank_units``: rank units of several jobs that share a batch key (``BatchKey``),
  positioned by the pool's ``Positioner`` (on the executor when one is configured); positions
  land in the collection's results cache and nothing else comes back.
- ``run_evaluate_units``: evaluator units, through ``evaluate`` into the evaluation cache.
- ``score_requests``: synchronous requests, positioned now without the results cache
  (``Positioner.position_rows``) and turned into rows by ``result_rows``, the arithmetic that
  builds ``score_answers``' rows, so a response has the numbers ``nrp score`` writes.
- ``job_tables``: a finished job's tables, by ``score_answers`` and ``evaluate_answers`` over
  its answers (every position and evaluation served by the caches the units filled).

The service adds no arithmetic of its own: batching (which answers share one model call) is
its only say.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import Any

import pandas as pd

from nrp import api, engine
from nrp.service.keys import BatchKey, PositionKey, RowKey
from nrp.service.pool import ModelPool
from nrp.tables import jsonable

Payload = dict[str, Any]  # a score request as the planner wrote it (``RequestPlanner``)


def _rounds(frame: pd.DataFrame, by: Sequence[str] = ("answer_id",)) -> list[pd.DataFrame]:
    """Rows split so that no answer id (by default) repeats within a part: answers of several
    jobs or requests may share an id, and one positioning call (and an executor run, which maps
    each answer id to its text hash) needs distinct ids. Rows keep their order."""
    keys = list(zip(*(frame[column].tolist() for column in by), strict=True))
    return [frame.iloc[numbers] for numbers in _distinct_rounds(keys)]


def _distinct_rounds(keys: Sequence[Hashable]) -> list[list[int]]:
    """Numbers of ``keys`` split into rounds in which no key repeats: the n-th occurrence of a
    key goes to round n, in order (``_rounds`` over a frame, or a list of answers)."""
    rounds: list[list[int]] = []
    seen: dict[Hashable, int] = {}
    for number, key in enumerate(keys):
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        if occurrence == len(rounds):
            rounds.append([])
        rounds[occurrence].append(number)
    return rounds


# -- job units -----------------------------------------------------------------------------------
def run_rank_units(
    pool: ModelPool,
    units: list[dict[str, Any]],
    answers: list[pd.DataFrame],
    executor: Any = None,
    partition_size: int = 256,
) -> None:
    """Position the answers of rank units that share a batch key and store them in the
    collection's results cache (what ``score_answers`` reads at finalisation); answers it
    already holds are skipped. ``answers``: each unit's answers. Positions are computed here
    in batches of ``partition_size``, or with an ``executor`` in per-query partitions of up to
    ``partition_size`` answers, each stored as it arrives."""
    key = BatchKey.parse(units[0]["batch_key"])
    positioner = pool.positioner(
        pool.collection(key.collection),
        key.spec,
        engine.PositionOptions(key.frozen_stats, key.full_rerank, partition_size),
    )
    frame = pd.concat(_by_job(units, answers), ignore_index=True)
    for part in _rounds(frame):
        positioner.position(part, executor)


def _by_job(units: list[dict[str, Any]], answers: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """The units' answers, grouped per job (in the order jobs first appear)."""
    by_job: dict[str, list[pd.DataFrame]] = {}
    for unit, frame in zip(units, answers, strict=True):
        by_job.setdefault(unit["job_id"], []).append(frame)
    return [pd.concat(frames, ignore_index=True) for frames in by_job.values()]


def run_evaluate_units(
    pool: ModelPool,
    units: list[dict[str, Any]],
    answers: list[pd.DataFrame],
    executor: Any = None,
) -> None:
    """Evaluate the answers of evaluator units that share a batch key in one run (on
    ``executor`` when given); rows land in the collection's evaluation cache (evaluators that
    are not cacheable run at finalisation)."""
    key = BatchKey.parse(units[0]["batch_key"])
    collection = pool.collection(key.collection)
    evaluator = pool.evaluator(key.spec)
    if not evaluator.cacheable:
        return
    frame = pd.concat(answers, ignore_index=True)
    items = engine.build_items(collection, frame, key.references)
    api.evaluate(
        items, [evaluator], pool.evaluation_cache(collection), collection, executor=executor
    )


# -- synchronous requests ------------------------------------------------------------------------
def score_requests(
    pool: ModelPool,
    requests: list[Payload],
    chunk_size: int,
    spent: dict[str, tuple[float, int]] | None = None,
) -> dict[str, dict[str, Any]]:
    """The reply to each request (by id): ``RESULT_COLUMNS`` rows of its ranked answers. The
    answers of all requests that share a ``PositionKey`` are positioned together (one
    ``Positioner.position_rows`` call per round of distinct (qid, answer id)), and the rows of
    all requests that share a ``RowKey`` come from one ``result_rows`` call (the rows
    ``result_frame`` builds, as lists: no frames, so a request of one answer costs its
    arithmetic); ``chunk_size``: the positioners' option, so these share the job units'
    positioners.

    Within a batch every ranked answer has a number of its own (its place in the batch):
    answer ids repeat across requests, so positions and rows are joined to answers by number,
    and a request's reply holds the rows of its own numbers. Every row is computed from its
    own answer's positions alone, so a request's rows do not depend on the requests batched
    with it.

    ``spent``, when given, gets each ranker spec's seconds of positioning in this call and the
    characters of the answers it positioned (what the worker sizes its turns by)."""
    ranked = {p["id"]: [a for a in p["answers"] if a["ranked"]] for p in requests}
    numbers, start = {}, 0
    for p in requests:
        numbers[p["id"]] = range(start, start + len(ranked[p["id"]]))
        start += len(ranked[p["id"]])
    positions = _positions_now(pool, requests, ranked, numbers, chunk_size, spent)
    rows_of: dict[int, list[list[Any]]] = {}  # an answer's number -> its rows
    for key, group in _row_groups(requests, ranked).items():
        answers = [a for p in group for a in ranked[p["id"]]]
        mine = [n for p in group for n in numbers[p["id"]]]
        found = {
            dimension: (spec, [positions[key.position_key(spec)][n] for n in mine])
            for dimension, spec in key.rankers
        }
        weights = None if key.weights is None else dict(key.weights)
        weight_of = engine.normalised_weights(weights, [dimension for dimension, _ in key.rankers])
        rows = engine.result_rows(answers, found, engine.check_tie_mode(key.ties), weight_of)
        rows_of.update(zip(mine, _per_answer(rows, len(answers)), strict=True))
    columns = list(engine.RESULT_COLUMNS)
    replies = {}
    for p in requests:
        rows = [row for n in numbers[p["id"]] for row in rows_of[n]]
        replies[p["id"]] = {"ok": True, "columns": columns, "rows": rows}
    return replies


def _per_answer(rows: list[list[Any]], n_answers: int) -> list[list[list[Any]]]:
    """``result_rows``' rows cut into each answer's (one per dimension, then its combined
    row: as many for every answer), in answer order."""
    width = len(rows) // n_answers
    return [rows[at : at + width] for at in range(0, len(rows), width)]


def _row_groups(
    requests: list[Payload], ranked: dict[str, list[dict[str, Any]]]
) -> dict[RowKey, list[Payload]]:
    """Requests with ranked answers grouped by what their rows depend on besides positions
    (``RowKey``)."""
    groups: dict[RowKey, list[Payload]] = {}
    for p in requests:
        if ranked[p["id"]]:
            groups.setdefault(RowKey.of(p), []).append(p)
    return groups


def _positions_now(
    pool: ModelPool,
    requests: list[Payload],
    ranked: dict[str, list[dict[str, Any]]],
    numbers: dict[str, range],
    chunk_size: int,
    spent: dict[str, tuple[float, int]] | None = None,
) -> dict[PositionKey, dict[int, tuple]]:
    """The ``POSITION_COLUMNS`` tuple of each ranked answer of the requests that share a
    ``PositionKey``, by its number in the batch; one ``position_rows`` call per round (each
    spec's seconds and characters added to ``spent``)."""
    groups: dict[PositionKey, list[Payload]] = {}
    for p in requests:
        if ranked[p["id"]]:
            for spec in dict.fromkeys(p["rankers"].values()):
                groups.setdefault(PositionKey.of(p, spec), []).append(p)
    positions: dict[PositionKey, dict[int, tuple]] = {}
    for key, group in groups.items():
        answers = [a for p in group for a in ranked[p["id"]]]
        answer_numbers = [n for p in group for n in numbers[p["id"]]]
        positioner = pool.positioner(
            pool.collection(key.collection),
            key.spec,
            engine.PositionOptions(key.frozen_stats, key.full_rerank, chunk_size),
        )
        found: dict[int, tuple] = {}
        started = time.perf_counter()
        for part in _distinct_rounds([(str(a["qid"]), str(a["answer_id"])) for a in answers]):
            rows = positioner.position_rows(
                [str(answers[n]["answer_id"]) for n in part],
                [str(answers[n]["qid"]) for n in part],
                [answers[n]["text"] for n in part],
            )
            found.update(zip([answer_numbers[n] for n in part], rows, strict=True))
        positions[key] = found
        if spent is not None:
            seconds, characters = spent.get(key.spec, (0.0, 0))
            spent[key.spec] = (
                seconds + time.perf_counter() - started,
                characters + sum(answer_characters(a) for a in answers),
            )
    return positions


def answer_characters(answer: dict[str, Any]) -> int:
    """The size of an answer's text as the worker's turns count it (characters; at least 1)."""
    text = answer.get("text")
    return max(1, len(text) if isinstance(text, str) else len(str(text)))


# -- finished jobs -------------------------------------------------------------------------------
def job_tables(
    pool: ModelPool, job: dict[str, Any], answers: pd.DataFrame, chunk_size: int
) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """A job's result tables (``nrp``, ``evaluations``) and info, by the library's own
    functions over its answers: what ``nrp score`` and ``nrp evaluate`` give for them."""
    params = job["params"]
    collection = pool.collection(job["collection"])
    tables: dict[str, pd.DataFrame] = {}
    info: dict[str, Any] = {}
    if params.get("rankers"):
        rankers = {d: pool.ranker(collection, s) for d, s in params["rankers"].items()}
        frame = api.score_answers(
            collection,
            answers,
            rankers,
            ties=params["ties"],
            frozen_stats=params["frozen_stats"],
            full_rerank=params["full_rerank"],
            weights=params.get("weights"),
            cache=True,
            chunk_size=chunk_size,
        )
        tables["nrp"] = frame
        info.update(
            {
                key: frame.attrs.get(key)
                for key in ("skipped", "warnings", "note", "counts", "injection", "weights")
            }
        )
    if params.get("evaluators"):
        evaluators = [pool.evaluator(s) for s in params["evaluators"]]
        evaluations = api.evaluate_answers(
            collection, answers, evaluators, references=params["references"], cache=True
        )
        tables["evaluations"] = evaluations
        info["evaluators"] = evaluations.attrs.get("evaluators", {})
    return tables, jsonable(info)
