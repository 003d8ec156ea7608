"""What a request may name, checked before anything is stored or sent to the worker.

- **Server paths** (a manifest to ingest, an answer file, a ranker's or evaluator's parameter
  declared ``Param(kind="path")`` or a value that looks like a path)
  are relative to a configured data root: absolute paths, ``~`` and ``..`` are refused, and the
  path must still lie inside the root after symbolic links are resolved. A manifest's own
  sources are checked the same way, so a manifest inside a data root cannot reach out of it.
  A bare name that is a file of the server's working directory is refused too: it lies outside
  every root.
- **Models** (a spec's parameters declared ``Param(kind="model")``; ``ModelPlaces``) are the
  parameter's default, a packaged model (``minilm``), a name the settings' ``models`` give, or
  a folder inside a model root. Anything else (a hub id, a folder beside the server) is a 422:
  a request must not make the server read or download a model its operator did not offer.
- **Collections** are named, never given as paths: only names ``list_collections`` knows.
- **Specs** are parsed by the registries (``nrp.spec``) in the server, so a typo is a 422 at
  submission, not a failed job later. Rankers are written in their canonical form
  (``Ranker.spec()``), the name the results carry.
- **Answers** sent inline go through the same reader as answer files (``nrp.answers``):
  the same derived ids, the same checks, the same one-line messages, with ``answers[i]`` as
  the location.
- **Units** of a job: one per (ranker, query with judged documents) and per (evaluator,
  query), with a batch key that says which units may share one model call.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from nrp import api, engine
from nrp.errors import ConfigError, InputError, ModelError, NrpError
from nrp.service.keys import EVALUATE, RANK, BatchKey
from nrp.spec import Param, parse_params

# a spec with this backend names a model of a remote server, not a file here
REMOTE_BACKENDS = ("openai",)


class RequestError(NrpError):
    """A request that cannot be served, with the HTTP status that says why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# -- server paths ----------------------------------------------------------------------------------
def resolve_in_roots(text: str, roots: Sequence[Path], what: str) -> Path:
    """The server file a request names: ``text`` relative to the first data root that has it,
    inside that root after links are resolved. RequestError 422 otherwise."""
    if not roots:
        raise RequestError(422, f"{what}: this server has no data roots; no file can be named")
    raw = str(text)
    pure = PurePosixPath(raw.replace("\\", "/"))
    if not raw.strip() or "\0" in raw:
        raise RequestError(422, f"{what}: empty or invalid path")
    if pure.is_absolute() or raw.startswith("~") or (len(raw) > 1 and raw[1] == ":"):
        raise RequestError(422, f"{what}: {raw!r} must be relative to a data root")
    if ".." in pure.parts:
        raise RequestError(422, f"{what}: {raw!r} is outside the data roots ('..' not allowed)")
    for root in roots:
        candidate = (root / pure).resolve()
        if not candidate.is_relative_to(root):
            raise RequestError(422, f"{what}: {raw!r} is outside the data roots (a link leads out)")
        if candidate.exists():
            return candidate
    raise RequestError(422, f"{what}: {raw!r} not found in the data roots")


def check_manifest(manifest_text: str, roots: Sequence[Path]) -> Path:
    """The manifest a request names, with every file its sources read (their paths and the
    files their options name, such as ``narratives``) inside the data roots: the collection
    layer's rule (``engine.first_outside``), whatever the manifest's own ``data_root`` or
    ``allow_outside_root`` say."""
    path = resolve_in_roots(manifest_text, roots, "manifest")
    manifest = api.Manifest.load(path)
    found = engine.first_outside(manifest.sources, roots)
    if found is not None:
        raise RequestError(
            422,
            f"manifest {manifest_text}: sources[{found[0].position}] reads a file outside the "
            "data roots",
        )
    return path


def check_collection_name(name: str, indexes: Path) -> str:
    if name not in api.list_collections(indexes):
        raise RequestError(404, f"unknown collection {name!r}")
    return name


def _looks_like_path(value: str) -> bool:
    return "/" in value or "\\" in value or value.startswith((".", "~"))


@dataclass(frozen=True)
class ModelPlaces:
    """Where the models a request names may come from (``check_spec_paths``): folders inside
    ``roots`` (called ``label`` in messages), the settings' ``named`` models (name -> folder or
    hub id), and the models nrp ships (``engine.PACKAGED_MODELS``)."""

    roots: tuple[Path, ...]
    named: tuple[tuple[str, str], ...] = ()
    label: str = "data roots"

    @classmethod
    def of(cls, config: Any) -> ModelPlaces:
        """The places a ``ServiceConfig`` offers."""
        label = "model roots" if config.model_roots else "data roots"
        return cls(tuple(config.model_folders), tuple(sorted(config.models.items())), label)

    def resolve(self, value: str, what: str) -> str:
        """The model ``value`` names, as the worker loads it; RequestError 422 otherwise (the
        message says nothing of what exists outside the roots)."""
        named = dict(self.named)
        if value in named:
            return named[value]
        if value in engine.PACKAGED_MODELS:
            return value
        pure = PurePosixPath(value)
        if pure.is_absolute() or value.startswith("~") or ".." in pure.parts:
            return _spec_path(value, self.roots, what, self.label)  # inside a root, or refused
        for root in self.roots:
            candidate = (root / pure).resolve()
            if candidate.is_relative_to(root) and _is_model_place(candidate):
                return str(candidate)
        raise self.refusal(what, value)

    def refusal(self, what: str, value: str) -> RequestError:
        """The one answer for a model the server does not offer, whether the name is missing,
        a file, or a folder the loader refuses (``ModelError`` in the worker): it tells nothing
        of what exists in the roots."""
        return RequestError(
            422,
            f"{what}: {value!r} is not a model this server offers (it offers: {self.offered()}; "
            f"or a folder relative to one of its {self.label})",
        )

    def refused(self, error: ModelError) -> str:
        """The caller's line for a model the library refused (``ModelError``, from the request
        checks or the worker): this refusal, nothing of what the file or folder held nor that
        it exists (the caller's log keeps the library's message)."""
        return str(self.refusal(error.what, self.as_sent(error.value)))

    def as_sent(self, resolved: str) -> str:
        """A model as a request names it: a named model's name, a folder relative to its root
        (the inverse of ``resolve``); else as given."""
        for name, target in self.named:
            if target == resolved:
                return name
        path = Path(resolved)
        for root in self.roots:
            if path.is_absolute() and path.is_relative_to(root):
                return str(path.relative_to(root))
        return resolved

    def offered(self) -> str:
        return ", ".join([*engine.PACKAGED_MODELS, *dict(self.named)])

    def offers(self, resolved: str) -> bool:
        """Whether ``resolved`` is a model as ``resolve`` writes it: packaged, a named model's
        target, or a folder inside a root."""
        if resolved in engine.PACKAGED_MODELS or resolved in dict(self.named).values():
            return True
        return Path(resolved).is_absolute() and engine.inside_roots(Path(resolved), self.roots)


def _is_model_place(path: Path) -> bool:
    """A model lives in a folder (a GGUF file for a local LLM, a JSON file for a fitted guard):
    any other file is none."""
    return path.is_dir() or (path.is_file() and path.suffix in (".gguf", ".json"))


def check_spec_paths(
    spec: str,
    declared: Mapping[str, Param],
    roots: Sequence[Path],
    indexes: Path,
    kind: str,
    models: ModelPlaces | None = None,
) -> str:
    """``spec`` with every path-valued parameter checked against the data roots (a relative
    path found in a root is rewritten to that absolute path) and every model against
    ``models`` (default: folders in the data roots and the packaged models); a ``collection``
    parameter must name a known collection."""
    name, sep, rest = spec.strip().partition(":")
    if not sep:
        return spec.strip()
    models = models or ModelPlaces(tuple(roots))
    pairs = [p.strip().partition("=") for p in rest.split(",") if p.strip()]
    remote = any(k.strip() == "backend" and v.strip() in REMOTE_BACKENDS for k, _, v in pairs)
    items = []
    for key, eq, value in pairs:
        key, value = key.strip(), value.strip()
        param = declared.get(key)
        what = f"{kind} {name!r} parameter {key}"
        if eq and param is not None and param.type is str and value != param.default:
            if key == "collection" and value:
                check_collection_name(value, indexes)
            elif param.kind == "model" and not remote:
                value = models.resolve(value, what)
            elif param.kind != "text" or _looks_like_path(value):
                value = _spec_path(value, roots, what)
        items.append(f"{key}={value}" if eq else key)
    return f"{name}:{','.join(items)}" if items else name


def _spec_path(value: str, roots: Sequence[Path], what: str, label: str = "data roots") -> str:
    """The absolute path of a file ``value`` names inside ``roots``, or ``value`` itself when
    it names no file (a packaged template's name, ``org/name``); RequestError 422 for a file
    outside the roots."""
    pure = PurePosixPath(value)
    if not _looks_like_path(value):
        if Path(value).exists():  # a file of the server's working folder
            raise RequestError(422, f"{what}: {value!r} is outside the {label}")
        return value
    if pure.is_absolute() or value.startswith("~") or ".." in pure.parts:
        resolved = Path(value).expanduser().resolve()
        if roots and engine.inside_roots(resolved, roots) and ".." not in pure.parts:
            return str(resolved)
        raise RequestError(422, f"{what}: {value!r} is outside the {label}")
    for root in roots:
        candidate = (root / pure).resolve()
        if candidate.is_relative_to(root) and candidate.exists():
            return str(candidate)
    if Path(value).exists():  # a file relative to the server's folder, outside the roots
        raise RequestError(422, f"{what}: {value!r} is outside the {label}")
    return value


def canonical_ranker(
    spec: str, roots: Sequence[Path], indexes: Path, models: ModelPlaces | None = None
) -> str:
    parsed = api.RankerSpec.parse(spec)
    if parsed.is_run:
        raise RequestError(422, f"{spec}: a run file cannot rank a new answer")
    models = models or ModelPlaces(tuple(roots))
    checked = check_spec_paths(spec, parsed.info.params, roots, indexes, "ranker", models)
    ranker = api.make_ranker(checked)
    _check_sub_rankers(ranker, models, roots)
    return ranker.spec()


def _check_sub_rankers(ranker: api.Ranker, models: ModelPlaces, roots: Sequence[Path]) -> None:
    """The rankers a ranker is made of (its ``parts``: ``fuse:rankers=bm25+dense:model=...``)
    load only models the server offers and read only files in its data roots too. Their specs
    sit inside a parameter's value, where ``check_spec_paths`` rewrites nothing, so a model
    there must be written as it resolves: a packaged name, a named model's target, or an
    absolute folder inside a model root; a file as an absolute path inside a data root."""
    for sub in ranker.parts():
        for key, param in (sub.declared_params() or {}).items():
            kind, given = param.kind, sub.params.get(key)
            if kind == "text" or given in (None, param.default):
                continue
            what = f"ranker {ranker.name!r}: its ranker {sub.name!r} parameter {key}"
            if kind == "model" and not models.offers(str(given)):
                raise RequestError(
                    422,
                    f"{what}: {given!r} is not a model this server offers (it offers: "
                    f"{models.offered()}; or an absolute folder inside its {models.label})",
                )
            if kind == "path" and not _inside(str(given), roots):
                raise RequestError(
                    422, f"{what}: {given!r} is not an absolute path inside the data roots"
                )
        _check_sub_rankers(sub, models, roots)


def _inside(value: str, roots: Sequence[Path]) -> bool:
    path = Path(value)
    return path.is_absolute() and ".." not in path.parts and engine.inside_roots(path, roots)


def canonical_evaluator(
    spec: str, roots: Sequence[Path], indexes: Path, models: ModelPlaces | None = None
) -> str:
    known = api.all_evaluators()
    name, _ = parse_params(spec, "evaluator", {n: i.params for n, i in known.items()})
    ok, reason = known[name].available()
    if not ok:
        raise ConfigError(f"evaluator {name!r} is not available here: {reason}")
    return check_spec_paths(spec, known[name].params, roots, indexes, "evaluator", models)


# -- collections (cached per build) ----------------------------------------------------------------
@dataclass
class CollectionView:
    """What request checks need of a collection, read once per build of it."""

    collection: api.Collection
    stamp: int
    qids: frozenset[str]
    dq_size: Mapping[str, int]
    docnos: Mapping[str, frozenset[str]]

    @property
    def name(self) -> str:
        return self.collection.name

    @functools.cached_property
    def store_path(self) -> str:
        """The collection's store file (its modification time is the build's ``stamp``)."""
        return str(self.collection.path / engine.STORE_FILE)


class Collections:
    """Collection views by name, reloaded when the collection's store file changes."""

    def __init__(self, indexes: Path):
        self.indexes = indexes
        self.lock = threading.Lock()
        self.views: dict[str, CollectionView] = {}

    def current(self, name: str) -> CollectionView | None:
        """The view of a name checked before, when one stat says it is current (None: it
        must be read, ``get``)."""
        with self.lock:
            view = self.views.get(name)
        if view is not None:
            with contextlib.suppress(OSError):
                if os.stat(view.store_path).st_mtime_ns == view.stamp:
                    return view
        return None

    def get(self, name: str) -> CollectionView:
        view = self.current(name)
        if view is not None:
            return view
        store = self.indexes / name / engine.STORE_FILE
        check_collection_name(name, self.indexes)
        stamp = store.stat().st_mtime_ns
        collection = api.Collection(self.indexes / name)
        candidates = collection.candidates()
        qid_column = candidates["qid"].astype(str)
        docnos = {
            str(q): frozenset(g.astype(str)) for q, g in candidates["docno"].groupby(qid_column)
        }
        view = CollectionView(
            collection,
            stamp,
            frozenset(collection.topics["qid"].astype(str)),
            {q: len(d) for q, d in docnos.items()},
            docnos,
        )
        with self.lock:
            self.views[name] = view
        return view


# -- answers ---------------------------------------------------------------------------------------
def answers_from_records(
    records: Sequence[Mapping[str, Any]], qids: frozenset[str], skip_invalid: bool
) -> tuple[pd.DataFrame, list[str]]:
    """Inline answers read as an answer file would be (``nrp.answers``); the frame and the
    reasons of answers skipped under ``skip_invalid``."""
    where_file = Path("answers")
    reader = engine.AnswerReader(set(qids), skip_invalid)
    for number, record in enumerate(records):
        where = engine.AnswerLocation(where_file, number, "row")
        missing = [k for k in ("llm", "prompt", "qid", "text") if k not in record]
        if missing:
            raise InputError(None, None, f"answers[{number}]: missing key(s) {', '.join(missing)}")
        try:
            reader.read_record(where, dict(record))
        except InputError as err:
            raise InputError(None, None, f"answers[{number}]: {_problem(err)}") from None
    if not reader.rows["answer_id"]:
        raise InputError(None, None, "answers: no valid answers")
    skipped = [f"answers[{row.line}]: {row.reason}" for row in reader.skipped]
    return reader.frame(), skipped


def _problem(err: InputError) -> str:
    problem = err.problem
    if problem.startswith("row "):
        problem = problem.split(": ", 1)[-1]
    return problem


# -- job plans -------------------------------------------------------------------------------------
def plan_units(
    view: CollectionView,
    answers: pd.DataFrame,
    rankers: Mapping[str, str],
    evaluators: Sequence[str],
    frozen_stats: bool,
    full_rerank: bool,
    references: str,
) -> list[dict[str, Any]]:
    """One unit per (distinct ranker, query with judged documents) and per (evaluator, query)."""
    per_qid = answers.groupby(answers["qid"].astype(str), sort=False).size()
    units = []
    for spec in dict.fromkeys(rankers.values()):
        key = BatchKey.rank(view.name, spec, frozen_stats, full_rerank).text
        for qid, count in per_qid.items():
            if view.dq_size.get(str(qid), 0) > 0:
                units.append(
                    {"kind": RANK, "spec": spec, "batch_key": key, "qid": qid, "n_answers": count}
                )
    for spec in evaluators:
        key = BatchKey.evaluate(view.name, spec, references).text
        for qid, count in per_qid.items():
            units.append(
                {"kind": EVALUATE, "spec": spec, "batch_key": key, "qid": qid, "n_answers": count}
            )
    return units


def request_sha(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
