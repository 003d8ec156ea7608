"""From a checked request body to what the store or the worker takes: a job's parameters,
answers and units (``POST /v1/jobs``), or a score request's payload (``POST /v1/score``).

Every check runs here, in the server, before anything is stored or sent to the worker, so a bad
request is a 4xx naming the problem and never a failed job later. What is checked, and how, is
the library's: answers are read by ``nrp.api.read_answers`` (or its ``AnswerReader`` for inline
answers), validation's choice of rankers is ``ValidationResult.chosen()``, weights are checked
by ``normalised_weights``, and specs are parsed by the registries (``nrp.service.inputs``). The
service adds only what HTTP needs: which files and models a request may name, which rankers a
read token may use (``read_rankers``), and which status a problem gets.
"""

from __future__ import annotations

import fnmatch
import functools
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from nrp import api, engine
from nrp.service import inputs
from nrp.service.config import ServiceConfig
from nrp.service.schemas import JobRequest, ScoreRequest
from nrp.spec import split_specs

VALIDATION = "validation"  # rankers: the collection's validation.json choice per dimension
CANONICAL_SPECS_KEPT = 1024  # ranker specs as sent whose canonical form the planner remembers


class RequestPlanner:
    """Checks requests against the collections and the server's settings (module docstring).

    Ranker specs are written in their canonical form once per spec as sent (a spec names no
    collection state, so the form never changes while the server runs); the last
    ``CANONICAL_SPECS_KEPT`` are remembered, so endless distinct specs cannot fill the server."""

    def __init__(self, config: ServiceConfig, collections: inputs.Collections):
        self.config = config
        self.collections = collections
        self.models = inputs.ModelPlaces.of(config)
        self.canonical_spec = functools.lru_cache(CANONICAL_SPECS_KEPT)(self._canonical_spec)

    def _canonical_spec(self, spec: str) -> str:
        """The canonical form of a ranker spec as sent (paths and models checked)."""
        return inputs.canonical_ranker(
            spec, self.config.data_roots, self.config.indexes, self.models
        )

    # -- jobs ------------------------------------------------------------------------------------
    def plan_job(self, body: JobRequest) -> tuple[dict[str, Any], pd.DataFrame, list[dict]]:
        """Parameters, answers and units of a job request (every check done here)."""
        view = self.collections.get(body.collection)
        answers, skipped = self._job_answers(body, view)
        rankers = self.rankers(body.rankers, view)
        evaluators = self.evaluators(body.evaluators)
        if not rankers and not evaluators:
            raise inputs.RequestError(422, "give rankers, evaluators or both")
        weights = None
        if rankers:
            weights = default_weights(body.rankers, body.weights, view)
            engine.normalised_weights(weights, list(rankers))  # checks them
            check_answer_ids(answers["answer_id"], answers["qid"], view)
        elif body.weights:
            raise inputs.RequestError(422, "weights combine rankers' NRP: give rankers too")
        params = {
            "rankers": rankers,
            "evaluators": evaluators,
            "references": body.references,
            "ties": body.ties,
            "frozen_stats": body.frozen_stats,
            "full_rerank": body.full_rerank,
            "weights": weights,
            "answers_skipped_on_input": skipped,
        }
        if body.answers_path is not None:
            params["answers_path"] = body.answers_path
        units = inputs.plan_units(
            view,
            answers,
            rankers,
            evaluators,
            body.frozen_stats,
            body.full_rerank,
            body.references,
        )
        return params, answers, units

    def _job_answers(
        self, body: JobRequest, view: inputs.CollectionView
    ) -> tuple[pd.DataFrame, list[str]]:
        """The job's answers, inline or read from a file in a data root, and those skipped."""
        if (body.answers is None) == (body.answers_path is None):
            raise inputs.RequestError(422, "give exactly one of answers and answers_path")
        if body.answers is not None:
            records = [a.model_dump(exclude_none=True) for a in body.answers]
            return inputs.answers_from_records(records, view.qids, body.skip_invalid)
        roots = self.config.data_roots
        path = inputs.resolve_in_roots(body.answers_path or "", roots, "answers")
        answer_set = api.read_answers(path, view.qids, skip_invalid=body.skip_invalid)
        return answer_set.answers, [str(row) for row in answer_set.skipped]

    # -- rankers and evaluators ------------------------------------------------------------------
    def rankers(
        self,
        choice: str | Mapping[str, str] | None,
        view: inputs.CollectionView,
        scope: str = "admin",
    ) -> dict[str, str]:
        """dimension -> canonical ranker spec of a request's ``rankers`` ({} for None); a read
        token's specs must match ``read_rankers`` (403 otherwise)."""
        if choice is None:
            return {}
        chosen = chosen_specs(choice, view)
        canonical = {s: self.canonical_spec(s.strip()) for s in dict.fromkeys(chosen.values())}
        if scope != "admin":
            for sent, spec in canonical.items():
                self._check_read_ranker(sent.strip(), spec)
        return {d: canonical[s] for d, s in chosen.items()}

    def _check_read_ranker(self, sent: str, spec: str) -> None:
        """403 unless the spec, as sent or canonical, matches a ``read_rankers`` pattern."""
        patterns = self.config.read_rankers
        if any(fnmatch.fnmatchcase(t, p) for p in patterns for t in (sent, spec)):
            return
        allowed = ", ".join(patterns) or "none"
        raise inputs.RequestError(
            403,
            f"ranker {sent!r}: a read token may use only rankers matching {allowed} "
            "(setting read_rankers); ask for an admin token or another ranker",
        )

    def evaluators(self, choice: str | list[str] | None) -> list[str]:
        """The checked evaluator specs of a request's ``evaluators`` ([] for none)."""
        if not choice:
            return []
        specs = split_specs(choice) if isinstance(choice, str) else [s.strip() for s in choice]
        roots, indexes = self.config.data_roots, self.config.indexes
        checked = [inputs.canonical_evaluator(s, roots, indexes, self.models) for s in specs if s]
        if len(set(checked)) != len(checked):
            raise inputs.RequestError(422, "evaluators: the same spec twice")
        return checked

    # -- synchronous scores ----------------------------------------------------------------------
    def score_payload(
        self, body: ScoreRequest, scope: str = "admin"
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """What the worker takes for a score request of a token of ``scope``, and the answers
        it cannot rank."""
        limit = self.config.score_max_answers
        if len(body.answers) > limit:
            raise inputs.RequestError(
                422,
                f"POST /v1/score takes at most {limit} answers "
                f"({len(body.answers)} given); submit a job for more",
            )
        view = self.collections.get(body.collection)
        rankers = self.rankers(body.rankers, view, scope)
        weights = default_weights(body.rankers, body.weights, view)
        engine.normalised_weights(weights, list(rankers))
        rows, skipped = score_answers_of(body, view)
        self._check_passages(rankers, rows)
        check_answer_ids([r["answer_id"] for r in rows], [r["qid"] for r in rows], view)
        payload = {
            "id": uuid.uuid4().hex,
            "collection": view.name,
            "rankers": rankers,
            "answers": rows,
            "ties": body.ties,
            "frozen_stats": body.frozen_stats,
            "full_rerank": body.full_rerank,
            "weights": weights,
        }
        return payload, skipped

    def _check_passages(self, rankers: Mapping[str, str], rows: list[dict[str, Any]]) -> None:
        """422 when the request's rankers cut its answers into more passages than
        ``score_max_passages`` (``engine.spec_passages``): a model reads each, and one answer is the
        smallest slice the worker computes between other requests."""
        texts = [str(r["text"]) for r in rows if r["ranked"]]
        limit = self.config.score_max_passages
        counts = {
            spec: engine.spec_passages(spec, texts) for spec in dict.fromkeys(rankers.values())
        }
        if sum(counts.values()) > limit:
            spec = max(counts, key=lambda s: counts[s])
            raise inputs.RequestError(
                422,
                f"POST /v1/score: ranker {spec!r} cuts these answers into {counts[spec]:,} "
                f"passages ({sum(counts.values()):,} in all), more than the {limit:,} a request "
                "may (score_max_passages); submit a job for more",
            )


def default_weights(
    choice: str | Mapping[str, str] | None,
    weights: Mapping[str, float] | None,
    view: inputs.CollectionView,
) -> Mapping[str, float] | None:
    """The weights of a request's combined NRP: as sent; else, with ``rankers: validation``,
    validation's default (``ValidationResult.weighting``: a dimension whose chosen ranker is not
    significantly better than random weighs 0); else None (equal)."""
    if weights is not None or not (isinstance(choice, str) and choice.strip() == VALIDATION):
        return weights
    validation = collection_validation(view)
    return None if validation is None else validation.weighting()[0]


def collection_validation(view: inputs.CollectionView) -> api.ValidationResult | None:
    """The collection's ``validation.json``, parsed once per version of the file (a request
    with ``rankers: validation`` reads its choice and its weights), or None without one."""
    path = view.collection.path / api.VALIDATION_FILE
    if not path.is_file():
        return None
    stat = path.stat()
    return _read_validation(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _read_validation(path: str, mtime_ns: int, size: int) -> api.ValidationResult:
    """(``mtime_ns`` and ``size`` only key the cache: a rewritten file is read again.)"""
    return api.ValidationResult.from_json(path)


def chosen_specs(choice: str | Mapping[str, str], view: inputs.CollectionView) -> dict[str, str]:
    """dimension -> ranker spec as a request names it: one spec for every dimension of the
    collection, a mapping dimension -> spec, or ``validation``: the choice of the collection's
    ``validation.json`` (``ValidationResult.chosen``)."""
    collection = view.collection
    dimensions = list(collection.dimensions)
    if isinstance(choice, str) and choice.strip() == VALIDATION:
        validation = collection_validation(view)
        if validation is None:
            raise inputs.RequestError(
                422, f"collection {view.name!r} has no validation.json (run nrp validate)"
            )
        chosen = validation.chosen()
        if not chosen:
            raise inputs.RequestError(422, "the validation chose no ranker for any dimension")
        return chosen
    if isinstance(choice, str):
        return dict.fromkeys(dimensions, choice)
    if not choice:
        raise inputs.RequestError(422, "rankers: an empty mapping")
    unknown = [d for d in choice if d not in dimensions]
    if unknown:
        raise inputs.RequestError(
            422,
            f"rankers: unknown dimension(s) {', '.join(unknown)} of collection "
            f"{view.name!r} (it has: {', '.join(dimensions)})",
        )
    return dict(choice)


def score_answers_of(
    body: ScoreRequest, view: inputs.CollectionView
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A score request's answers as records for the worker (``ranked``: its query has judged
    documents with text), and those that cannot be ranked with the reason."""
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, answer in enumerate(body.answers):
        qid = str(answer.qid)
        answer_id = answer.answer_id or f"answer{number}"
        if qid not in view.qids:
            raise inputs.RequestError(
                422, f"answers[{number}]: qid {qid!r} is not a topic of {view.name!r}"
            )
        if answer_id in seen:
            raise inputs.RequestError(422, f"answers[{number}]: duplicate id {answer_id!r}")
        seen.add(answer_id)
        ranked = view.dq_size.get(qid, 0) > 0
        if not ranked:
            skipped.append(
                {"answer_id": answer_id, "qid": qid, "reason": "no judged documents with text"}
            )
        rows.append(
            {
                "answer_id": answer_id,
                "llm": answer.llm,
                "prompt": answer.prompt,
                "qid": qid,
                "sample": answer.sample,
                "text": answer.text,
                "ranked": ranked,
            }
        )
    return rows, skipped


def check_answer_ids(
    answer_ids: Iterable[Any], qids: Iterable[Any], view: inputs.CollectionView
) -> None:
    """An answer id must differ from the docnos of its query's D_q (it names the injected row)."""
    for answer_id, qid in zip(answer_ids, qids, strict=True):
        if str(answer_id) in view.docnos.get(str(qid), ()):
            raise inputs.RequestError(
                422,
                f"answer id {answer_id!r} is also a document of query {qid}: answer ids "
                "name the injected row and must differ from the query's docnos",
            )
