"""What the worker computes, each one call into the library API over the models of its pool.

- ``run_rank_units``: rank units of several jobs that share a batch key, positioned by the
  pool's ``Positioner`` (on the executor when one is configured); positions land in the
  collection's results cache and nothing else comes back.
- ``run_evaluate_units``: evaluator units, through ``evaluate`` into the evaluation cache.
- ``score_requests``: synchronous requests, positioned now without the results cache
  (``Positioner.position_now``) and turned into rows by ``result_frame``, the code that builds
  ``score_answers``' rows, so a response has the numbers ``nrp score`` writes.
- ``job_tables``: a finished job's tables, by ``score_answers`` and ``evaluate_answers`` over
  its answers (every position and evaluation served by the caches the units filled).

The service adds no arithmetic of its own: batching (which answers share one model call) is
its only say.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any

import pandas as pd

from nrp import api
from nrp.service.pool import ModelPool
from nrp.service.store import json_value
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
    _, name, spec, options = json.loads(units[0]["batch_key"])
    collection = pool.collection(name)
    positioner = pool.positioner(
        collection,
        spec,
        api.PositionOptions(
            bool(options["frozen_stats"]), bool(options["full_rerank"]), partition_size
        ),
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
    _, name, spec, options = json.loads(units[0]["batch_key"])
    collection = pool.collection(name)
    evaluator = pool.evaluator(spec)
    if not evaluator.cacheable:
        return
    frame = pd.concat(answers, ignore_index=True)
    items = api.build_items(collection, frame, options.get("references", "auto"))
    api.evaluate(
        items, [evaluator], pool.evaluation_cache(collection), collection, executor=executor
    )


# -- synchronous requests ------------------------------------------------------------------------
def score_requests(
    pool: ModelPool, requests: list[Payload], chunk_size: int
) -> dict[str, dict[str, Any]]:
    """The reply to each request (by id): ``RESULT_COLUMNS`` rows of its ranked answers. The
    answers of all requests that share a ranker and options are positioned together (one call
    per round of distinct (qid, answer id)), and the rows of all requests that share rankers,
    options, tie rule and weights come from one ``result_frame`` call; ``chunk_size``: the
    positioners' option, so these share the job units' positioners.

    Within a batch every ranked answer has a key of its own (its number in the batch): answer
    ids repeat across requests, and ``result_frame`` finds an answer's positions by id, so it
    gets the keys and each row its answer id back. Every row is computed from its own answer's
    positions alone, so a request's rows do not depend on the requests batched with it."""
    ranked = {p["id"]: [a for a in p["answers"] if a["ranked"]] for p in requests}
    keys, start = {}, 0
    for p in requests:
        keys[p["id"]] = [str(n) for n in range(start, start + len(ranked[p["id"]]))]
        start += len(ranked[p["id"]])
    positions = _positions_now(pool, requests, ranked, keys, chunk_size)
    columns = list(api.RESULT_COLUMNS)
    replies = {p["id"]: {"ok": True, "columns": columns, "rows": []} for p in requests}
    for group in _row_groups(requests, ranked).values():
        first = group[0]
        found = {
            dimension: (spec, positions[_position_key(first, spec)])
            for dimension, spec in first["rankers"].items()
        }
        weight_of = api.normalised_weights(first.get("weights"), list(first["rankers"]))
        tie_mode = api.check_tie_mode(first["ties"])
        answers = [a for p in group for a in ranked[p["id"]]]
        base = pd.DataFrame(
            {
                "answer_id": [k for p in group for k in keys[p["id"]]],
                **{c: [a[c] for a in answers] for c in ("llm", "prompt", "qid", "sample")},
            }
        )
        frame = api.result_frame(base, found, tie_mode, weight_of)
        rows = [[json_value(v) for v in r] for r in frame.itertuples(index=False, name=None)]
        per_answer = len(rows) // len(answers)  # one row per dimension and the combined row
        at = 0
        for p in group:
            mine = rows[at : at + per_answer * len(ranked[p["id"]])]
            at += len(mine)
            for number, answer in enumerate(ranked[p["id"]]):
                for row in mine[number * per_answer : (number + 1) * per_answer]:
                    row[0] = answer["answer_id"]
            replies[p["id"]]["rows"] = mine
    return replies


def _position_key(p: Payload, spec: str) -> tuple[str, str, bool, bool]:
    """What positions are shared by: collection, ranker spec and positioning options."""
    return (p["collection"], spec, bool(p["frozen_stats"]), bool(p["full_rerank"]))


def _row_groups(
    requests: list[Payload], ranked: dict[str, list[dict[str, Any]]]
) -> dict[str, list[Payload]]:
    """Requests with ranked answers grouped by what their rows depend on besides positions:
    collection, options, rankers per dimension, tie rule and weights."""
    groups: dict[str, list[Payload]] = {}
    for p in requests:
        if not ranked[p["id"]]:
            continue
        settings = [p["collection"], p["frozen_stats"], p["full_rerank"], p["ties"]]
        key = json.dumps([*settings, list(p["rankers"].items()), p.get("weights")])
        groups.setdefault(key, []).append(p)
    return groups


def _positions_now(
    pool: ModelPool,
    requests: list[Payload],
    ranked: dict[str, list[dict[str, Any]]],
    keys: dict[str, list[str]],
    chunk_size: int,
) -> dict[tuple[str, str, bool, bool], pd.DataFrame]:
    """(collection, ranker spec, options) -> positions of the ranked answers of the requests
    that use it, indexed by their keys; one ``position_now`` call per round."""
    groups: dict[tuple[str, str, bool, bool], list[Payload]] = {}
    for p in requests:
        if ranked[p["id"]]:
            for spec in dict.fromkeys(p["rankers"].values()):
                groups.setdefault(_position_key(p, spec), []).append(p)
    positions: dict[tuple[str, str, bool, bool], pd.DataFrame] = {}
    for key, group in groups.items():
        name, spec, frozen, full = key
        answers = [a for p in group for a in ranked[p["id"]]]
        answer_keys = [k for p in group for k in keys[p["id"]]]
        positioner = pool.positioner(
            pool.collection(name), spec, api.PositionOptions(frozen, full, chunk_size)
        )
        parts = []
        for numbers in _distinct_rounds([(str(a["qid"]), str(a["answer_id"])) for a in answers]):
            part = pd.DataFrame(
                {
                    "answer_id": [str(answers[n]["answer_id"]) for n in numbers],
                    "qid": [str(answers[n]["qid"]) for n in numbers],
                    "text": [answers[n]["text"] for n in numbers],
                }
            )
            found = positioner.position_now(part)
            parts.append(found.set_axis([answer_keys[n] for n in numbers]))
        positions[key] = parts[0] if len(parts) == 1 else pd.concat(parts)
    return positions


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
