"""ir_datasets collections: the ``irds`` input format, and the manifest ``nrp ingest irds:ID``
builds in memory.

Why: many judged collections are already described by ir_datasets (docs, queries, qrels and
what each relevance level means, ``qrels_defs``), so they need no hand-written file layout.
A manifest source ``{format: irds, dataset: ID, dimension: relevance}`` reads them like any file;
``nrp ingest irds:ID`` writes that manifest itself, taking each dimension's label scale from the
dataset's ``qrels_defs()`` (or, where the dataset declares none, from the labels its qrels use).

ir_datasets, not nrp, fetches the data: a real id downloads once into ir_datasets' own cache
(``$IR_DATASETS_HOME``, default ``~/.ir_datasets``) and is read from there afterwards. Without a
network, an id whose data is not cached fails with one line saying so; nothing is written. A
record's origin is ``irds:ID queries|docs|qrels`` and its 1-based position there, so ingest's
checks (unknown qid, label outside the scale) name the record at fault.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from nrp import lazy_libs
from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.manifest import DATASET_PREFIX, Manifest
from nrp.collection.records import FIELD_NAME, TOPIC_COLUMNS, Document, Judgment, Origin, Topic
from nrp.errors import ConfigError, InputError, NrpError

HOLDS = ("topics", "documents", "judgments")
#: what ir_datasets calls each kind of record nrp reads
ENTITY = {"topics": "queries", "documents": "docs", "judgments": "qrels"}
#: the qrels field that holds the grade in every ir_datasets qrels class
GRADE_FIELD = "relevance"


def _where(dataset_id: str, part: str | None = None) -> str:
    return f"{DATASET_PREFIX}{dataset_id}" + (f" {part}" if part else "")


def load_dataset(dataset_id: str, holds: tuple[str, ...] | list[str] = HOLDS) -> Any:
    """The ir_datasets dataset of ``dataset_id``, checked to provide what ``holds`` names.
    An unknown id is an error naming close matches."""
    ir_datasets = lazy_libs.ir_datasets()

    try:
        dataset = ir_datasets.load(dataset_id)
    except KeyError:
        close = difflib.get_close_matches(dataset_id, list(ir_datasets.registry), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InputError(
            _where(dataset_id), None, f"unknown ir_datasets id {dataset_id!r}{hint}"
        ) from None
    provided = [kind for kind in HOLDS if dataset.has(ENTITY[kind])]
    lacking = [kind for kind in holds if kind not in provided]
    if lacking:
        raise InputError(
            _where(dataset_id),
            None,
            f"the dataset has no {' or '.join(ENTITY[k] for k in lacking)} (it provides: "
            f"{', '.join(ENTITY[k] for k in provided) or 'nothing nrp reads'})",
        )
    return dataset


def _is_download_failure(err: BaseException) -> bool:
    """A network error anywhere in the chain, or ir_datasets' 'All download sources failed'."""
    seen: BaseException | None = err
    while seen is not None:
        module = type(seen).__module__
        if (
            module.startswith(("requests", "urllib3", "urllib", "http", "socket"))
            or isinstance(seen, ConnectionError | TimeoutError)
            or (isinstance(seen, RuntimeError) and "download" in str(seen.args[:1]).lower())
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextmanager
def _reading(dataset_id: str, part: str) -> Iterator[None]:
    """ir_datasets' failures (a download without network, a missing local file) as one line."""
    try:
        yield
    except NrpError:
        raise
    except Exception as err:
        detail = f"{type(err).__name__}: {err.args[0] if err.args else ''}"
        detail = detail if len(detail) <= 160 else detail[:157] + "..."
        if _is_download_failure(err):
            problem = (
                f"ir_datasets could not download the {part} ({detail}); a real dataset needs "
                "the network once, then ir_datasets reads it from its cache "
                "($IR_DATASETS_HOME, default ~/.ir_datasets)"
            )
        else:
            problem = f"ir_datasets could not read the {part} ({detail})"
        raise InputError(_where(dataset_id), None, problem) from None


def _text(record: Any, names: tuple[str, ...]) -> str:
    """ir_datasets' ``default_text()`` of a record, else its first field of ``names``."""
    if hasattr(record, "default_text"):
        return str(record.default_text() or "")
    for name in names:
        value = getattr(record, name, None)
        if isinstance(value, str):
            return value
    return ""


def _topics(dataset: Any, dataset_id: str) -> Iterator[Topic]:
    """A Topic per query: its ``default_text()`` as the query, ``narrative`` where it has one,
    every other text field (lower-cased name) as a topic field, unless it repeats the query."""
    where = _where(dataset_id, "queries")
    with _reading(dataset_id, "queries"):
        for number, query in enumerate(dataset.queries_iter(), start=1):
            origin = Origin(where, number)
            text = _text(query, ("text", "title", "query")).strip()
            if not text:
                raise InputError(where, number, f"query {query.query_id!r} has no text")
            values = query._asdict()
            narrative = values.get("narrative")
            fields = {
                name.lower(): value
                for name, value in values.items()
                if isinstance(value, str)
                and value.strip()
                and value.strip() != text
                and FIELD_NAME.match(name.lower())
                and name.lower() not in (*TOPIC_COLUMNS, "query_id")
            }
            yield Topic(str(query.query_id), text, narrative or None, origin, fields or None)


def grade_fields(options: Mapping[str, Any]) -> dict[str, str]:
    """qrels field -> dimension, from the source's ``dimension`` or ``dimensions`` option."""
    dimension, dimensions = options.get("dimension"), options.get("dimensions")
    if (dimension is None) == (dimensions is None):
        raise ConfigError(
            "irds: give exactly one of 'dimension' (the dimension of the qrels' relevance "
            "grades) and 'dimensions' (a mapping qrels field -> dimension)"
        )
    if dimension is not None:
        return {GRADE_FIELD: str(dimension)}
    if not dimensions:
        raise ConfigError("irds: option 'dimensions' must map at least one qrels field")
    return {str(field): str(name) for field, name in dimensions.items()}


def _check_fields(dataset: Any, dataset_id: str, fields: Mapping[str, str]) -> None:
    known = list(dataset.qrels_cls()._fields)
    unknown = [f for f in fields if f not in known]
    if unknown:
        raise InputError(
            _where(dataset_id, "qrels"),
            None,
            f"no qrels field {', '.join(unknown)} (the fields: {', '.join(known)})",
        )


def _judgments(dataset: Any, dataset_id: str, fields: Mapping[str, str]) -> Iterator[Judgment]:
    """A Judgment per qrel and mapped field: the grade as written (an integer, as text)."""
    _check_fields(dataset, dataset_id, fields)
    where = _where(dataset_id, "qrels")
    with _reading(dataset_id, "qrels"):
        for number, qrel in enumerate(dataset.qrels_iter(), start=1):
            origin = Origin(where, number)
            for field, dimension in fields.items():
                grade = getattr(qrel, field)
                yield Judgment(str(qrel.query_id), str(qrel.doc_id), dimension, str(grade), origin)


def _documents(
    dataset: Any, dataset_id: str, judged: set[str] | None, report: ReadReport
) -> Iterator[Document]:
    """A Document per doc (``default_text()``, its title and url where it has them); with
    ``judged``, only those docnos. Documents without text are skipped and counted."""
    where = _where(dataset_id, "docs")
    with _reading(dataset_id, "docs"):
        for number, doc in enumerate(dataset.docs_iter(), start=1):
            docno = str(doc.doc_id)
            if judged is not None and docno not in judged:
                report.count("ir_datasets documents not judged, left out")
                continue
            text = _text(doc, ("text", "body"))
            if not text.strip():
                report.count("ir_datasets documents without text skipped")
                continue
            title, url = getattr(doc, "title", None), getattr(doc, "url", None)
            url = url if isinstance(url, str) else None
            title = title if isinstance(title, str) else None
            yield Document(docno, text, url, title, Origin(where, number))


def read(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator:
    """Topics, judgments and documents of the dataset (those ``holds`` names), in that order."""
    dataset_id = str(options["dataset"])
    holds = [str(kind) for kind in options["holds"]]
    if not holds or any(kind not in HOLDS for kind in holds):
        raise ConfigError(f"irds: option 'holds' lists some of {', '.join(HOLDS)}, not {holds}")
    if options["documents"] not in ("all", "judged"):
        raise ConfigError(f"irds: option 'documents' is all or judged, not {options['documents']}")
    fields = grade_fields(options) if "judgments" in holds else {}
    judged_only = "documents" in holds and options["documents"] == "judged"
    dataset = load_dataset(dataset_id, holds + (["judgments"] if judged_only else []))
    if "topics" in holds:
        yield from _topics(dataset, dataset_id)
    judged: set[str] | None = set() if judged_only else None
    if "judgments" in holds:
        for judgment in _judgments(dataset, dataset_id, fields):
            if judged is not None:
                judged.add(judgment.docno)
            yield judgment
    elif judged is not None:
        with _reading(dataset_id, "qrels"):
            judged.update(str(qrel.doc_id) for qrel in dataset.qrels_iter())
    if "documents" in holds:
        yield from _documents(dataset, dataset_id, judged, report)


# -- the manifest of `nrp ingest irds:ID` --------------------------------------------------------
def collection_name(dataset_id: str) -> str:
    """The default collection name of an id: ``vaswani``; ``/`` becomes ``-``
    (``msmarco-passage/trec-dl-2019`` -> ``msmarco-passage-trec-dl-2019``)."""
    return dataset_id.strip("/").replace("/", "-")


def _grades(labels: Mapping[int, str]) -> dict[int, Any]:
    """A manifest ``grades`` mapping: a label >= 0 is its own gain; a negative label (junk,
    spam) gains 0, as trec_eval treats it."""
    return {
        label: (str(meaning) if label >= 0 else {"grade": 0, "meaning": str(meaning)})
        for label, meaning in sorted(labels.items())
    }


def _labels(dataset: Any, dataset_id: str, field: str) -> dict[int, str]:
    """Every label of a qrels field: ``qrels_defs()`` for the relevance grades where the dataset
    declares them, else the labels its qrels use (meaning unknown)."""
    if field == GRADE_FIELD:
        defs = dataset.qrels_defs() or {}
        if defs:
            return {int(label): str(meaning) for label, meaning in defs.items()}
    found: dict[int, str] = {}
    where = _where(dataset_id, "qrels")
    with _reading(dataset_id, "qrels"):
        for number, qrel in enumerate(dataset.qrels_iter(), start=1):
            value = getattr(qrel, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
                raise InputError(
                    where,
                    number,
                    f"{field} {value!r} is not an integer label; write a manifest with a label "
                    "scale (docs/manifests.md, `bins`) for it",
                )
            found.setdefault(int(value), "")
    return found


def irds_manifest(
    source: str,
    dimensions: str | Mapping[str, str] = GRADE_FIELD,
    name: str | None = None,
) -> Manifest:
    """The manifest of an ir_datasets collection (``irds:ID`` or the bare ID): its docs, queries
    and qrels in one ``irds`` source. ``dimensions``: the dimension of the qrels' relevance
    grades, or a mapping qrels field -> dimension (qrels with several grade fields); each
    dimension's labels from ``qrels_defs()`` where the dataset declares them, else those its
    qrels use. ``name``: the collection's name (default: from the id, ``collection_name``)."""
    dataset_id = source.removeprefix(DATASET_PREFIX)
    if not dataset_id.strip():
        raise ConfigError(f"{source!r}: name an ir_datasets id after {DATASET_PREFIX}")
    fields = grade_fields(
        {"dimension": dimensions} if isinstance(dimensions, str) else {"dimensions": dimensions}
    )
    dataset = load_dataset(dataset_id)
    _check_fields(dataset, dataset_id, fields)
    ir_datasets = lazy_libs.ir_datasets()

    raw = {
        "name": name or collection_name(dataset_id),
        "description": f"ir_datasets {dataset_id}",
        "dimensions": {
            dimension: {
                "description": f"qrels field {field} of ir_datasets {dataset_id}",
                "grades": _grades(_labels(dataset, dataset_id, field)),
            }
            for field, dimension in fields.items()
        },
        "sources": [{"format": "irds", "dataset": dataset_id, "dimensions": fields}],
    }
    text = (
        f"# built by nrp ingest for {DATASET_PREFIX}{dataset_id} (ir_datasets "
        f"{ir_datasets.__version__})\n" + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    )
    return Manifest.from_mapping(raw, text, Path(_where(dataset_id)), generated=True)


FORMAT = Format(
    name="irds",
    description="an ir_datasets collection by id: its queries, docs and qrels (downloaded by "
    "ir_datasets into its own cache the first time; needs the network once)",
    provides=HOLDS,
    read=read,
    options={
        "dataset": Option(
            str, "the ir_datasets id (vaswani, msmarco-passage/trec-dl-2019)", required=True
        ),
        "holds": Option(
            list, "what to read: some of topics, documents, judgments", default=list(HOLDS)
        ),
        "dimension": Option(str, "the dimension of the qrels' relevance grades"),
        "dimensions": Option(
            dict,
            "a mapping qrels field -> dimension, for qrels with several "
            "grade fields (relevance, trustworthiness, ...)",
        ),
        "documents": Option(
            str,
            "all (default), or judged: only documents the dataset's qrels judge (a large corpus)",
            default="all",
        ),
    },
    locator=lambda options: _where(str(options["dataset"])),
)

register(FORMAT)
