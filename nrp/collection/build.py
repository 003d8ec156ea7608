"""Ingest: read a manifest's sources, check them as a whole, and write the collection's store.

Checks that need more than one record live here, each naming the file and line of the input at
fault: a judgment for an unknown qid, a label outside its dimension's scale, the same (qid, docno)
judged twice with different labels (unless the manifest declares a policy), duplicate ids.
Usable oddities (judged documents without text, documents nobody judged, labels excluded as
"could not judge") are counted and reported by ``nrp info``, never errors.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nrp.collection.formats import ReadReport, get_format
from nrp.collection.formats.irds import irds_manifest
from nrp.collection.labels import LabelScale, normalize_label, numeric_value
from nrp.collection.manifest import DATASET_PREFIX, Manifest, SourceSpec
from nrp.collection.reading import folder_files
from nrp.collection.records import (
    FIELD_NAME,
    TOPIC_COLUMNS,
    Document,
    Judgment,
    Origin,
    Reference,
    Topic,
    with_nfc_ids,
)
from nrp.collection.store import (
    SCHEMA_VERSION,
    read_meta,
    remove_stale_builds,
    store_path,
    write_store,
)
from nrp.errors import ConfigError, InputError, clip, quote
from nrp.version import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only
    from nrp.collection.labels import Grade

#: what the fingerprint hashes besides the inputs. It names the inputs' meaning, not the store's
#: layout: schema 2 of the store (topic fields) holds the same topics, documents and judgments as
#: schema 1, so a collection keeps its fingerprint, and its score and results caches stay valid,
#: when ``nrp ingest`` rebuilds it in the new layout.
FINGERPRINT_VERSION = 1


def default_indexes_dir() -> Path:
    """``$NRP_INDEXES`` or ``./indexes``: where collections and caches live."""
    import os

    return Path(os.environ.get("NRP_INDEXES", "indexes"))


@dataclass
class IngestResult:
    name: str
    path: Path
    rebuilt: bool
    fingerprint: str
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def ingest(
    manifest_path: str | Path | Manifest,
    name: str | None = None,
    indexes_dir: str | Path | None = None,
    data_root: str | Path | None = None,
    force: bool = False,
) -> IngestResult:
    """Build ``indexes/NAME/collection.sqlite`` from a manifest (a file, ``irds:DATASET_ID``,
    or a ``Manifest`` built in memory). Does nothing when the manifest and every input are
    unchanged since the last build (unless ``force``)."""
    manifest = _manifest(manifest_path, data_root)
    name = name or manifest.name
    check_name(name)
    collection_dir = Path(indexes_dir or default_indexes_dir()) / name
    target = store_path(collection_dir)
    remove_stale_builds(collection_dir)  # first: an ingest that fails later still cleans up
    # inputs that are not files (ir_datasets) are fingerprinted by their records: read them now
    files_only = all(get_format(s.format).reads_files for s in manifest.sources)
    contents = None if files_only else read_sources(manifest)
    fingerprint = fingerprint_of(manifest, contents)
    if target.exists() and not force:
        meta = read_meta(target)
        if meta.get("fingerprint") == fingerprint and meta.get("schema_version") == SCHEMA_VERSION:
            return IngestResult(name, collection_dir, False, fingerprint, meta.get("counts", {}))

    contents = contents or read_sources(manifest)
    tables, counts, warnings = check_and_resolve(manifest, contents)
    meta = {
        "name": name,
        "description": manifest.description,
        "citation": manifest.citation,
        "manifest_path": manifest.location,
        "manifest": manifest.text,
        "data_root": str(manifest.data_root.resolve()),
        "fingerprint": fingerprint,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nrp_version": __version__,
        "repeated_judgments": {
            "policy": manifest.repeated_policy,
            "reason": manifest.repeated_reason,
        },
        "counts": counts,
        "warnings": warnings,
        "warned_counts": sorted(contents.report.warned),
    }
    write_store(target, meta, **tables)
    return IngestResult(name, collection_dir, True, fingerprint, counts, warnings)


def _manifest(source: str | Path | Manifest, data_root: str | Path | None) -> Manifest:
    """The manifest ``ingest`` builds from: given, an ir_datasets collection's (``irds:ID``,
    dimension ``relevance``), or read from its file."""
    if isinstance(source, Manifest):
        return source
    if str(source).startswith(DATASET_PREFIX):
        if data_root is not None:
            raise ConfigError(f"{source}: --data-root does not apply to an ir_datasets id")
        return irds_manifest(str(source))
    return Manifest.load(source, data_root)


def check_name(name: str) -> None:
    """A collection (or synth output) folder name: not empty, no leading dot, no path separator
    or NUL, no surrounding spaces; an ``InputError`` otherwise."""
    if not name or name.startswith(".") or any(c in name for c in "/\\\0") or name != name.strip():
        raise InputError(None, None, f"invalid collection name {quote(name)}")


def fingerprint_of(manifest: Manifest, contents: SourceContents | None = None) -> str:
    """SHA-256 over the manifest text, the data root and every input file's bytes; an input
    that is not a file (ir_datasets) counts by the records read from it (``contents``, read
    here when not given). The data root counts only when some input is a file under it."""
    digest = hashlib.sha256()
    digest.update(f"nrp-store-{FINGERPRINT_VERSION}\0".encode())
    digest.update(manifest.text.encode())
    if any(get_format(s.format).reads_files for s in manifest.sources):
        digest.update(str(manifest.data_root.resolve()).encode())
    for source in manifest.sources:
        if not get_format(source.format).reads_files:
            contents = contents or read_sources(manifest)
            digest.update(contents.digests[source.position].encode())
            continue
        for file in _files_of(source):
            digest.update(
                str(file.relative_to(source.path) if source.path.is_dir() else file.name).encode()
            )
            with open(file, "rb") as handle:
                for block in iter(lambda h=handle: h.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def _files_of(source: SourceSpec) -> list[Path]:
    try:
        if not source.path.exists():
            raise InputError(source.path, None, f"file not found ({source.describe()})")
        if source.path.is_dir():
            return folder_files(source.path)  # a link out of the folder is an error
    except OSError as err:  # a name too long, a folder that cannot be listed
        raise InputError(source.path, None, f"cannot read: {err.strerror or err}") from None
    return [source.path]


@dataclass
class SourceContents:
    topics: list[Topic] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)
    judgments: list[Judgment] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    report: ReadReport = field(default_factory=ReadReport)
    #: SHA-256 of the records of each input that is not a file, by source position
    digests: dict[int, str] = field(default_factory=dict)


def read_sources(manifest: Manifest) -> SourceContents:
    contents = SourceContents()
    lists = {
        Topic: contents.topics,
        Document: contents.documents,
        Judgment: contents.judgments,
        Reference: contents.references,
    }
    for source in manifest.sources:
        fmt = get_format(source.format)
        if fmt.reads_files and not source.path.exists():
            raise InputError(source.path, None, f"file not found ({source.describe()})")
        digest = None if fmt.reads_files else hashlib.sha256()
        try:
            for record in fmt.read(source.path, source.options, contents.report):
                record = with_nfc_ids(record)
                lists[type(record)].append(record)
                if digest is not None:
                    digest.update(repr(record).encode())
        except ConfigError as err:  # an option value the reader refuses: name the manifest
            raise ConfigError(f"{manifest.path}: {source.describe()}: {err}") from None
        if digest is not None:
            contents.digests[source.position] = digest.hexdigest()
    return contents


def check_and_resolve(
    manifest: Manifest, contents: SourceContents
) -> tuple[dict[str, list[tuple]], dict[str, int], list[str]]:
    """Cross-record checks, label mapping and repeated-judgment resolution; rows for the store."""
    topics = _unique(contents.topics, "qid", "topic")
    documents = _unique_documents(contents.documents, contents.report)
    counts: dict[str, int] = {}
    warnings = list(contents.report.warnings)

    grouped: dict[tuple[str, str, str], list[tuple[Judgment, Grade]]] = defaultdict(list)
    for judgment in contents.judgments:
        scale = manifest.dimensions.get(judgment.dimension)
        if scale is None:
            raise _at(
                judgment.origin,
                f"judgment in dimension {quote(judgment.dimension)} that the manifest does not "
                f"declare (declared: {', '.join(manifest.dimensions)})",
            )
        if judgment.qid not in topics:
            raise _at(
                judgment.origin,
                f"judgment for unknown qid {quote(judgment.qid)} (no topic declares it)",
            )
        grade = scale.grade_of(judgment.grade)
        if grade is None:
            raise _at(
                judgment.origin,
                f"label {quote(judgment.grade)} is outside the label scale of "
                f"{quote(judgment.dimension)} "
                f"(declared: {scale.declared()})",
            )
        grouped[(judgment.dimension, judgment.qid, judgment.docno)].append((judgment, grade))

    judgment_rows = []
    repeats: Counter = Counter()
    for (dimension, qid, docno), entries in grouped.items():
        row = _resolve(manifest, manifest.dimensions[dimension], entries, repeats)
        judgment_rows.append((dimension, qid, docno, *row, len(entries)))

    for reference in contents.references:
        if reference.qid not in topics:
            raise _at(reference.origin, f"reference answer for unknown qid {quote(reference.qid)}")

    for what, n in sorted(contents.report.counts.items()):
        counts[what] = n
    for what, n in sorted(repeats.items()):
        counts[what] = n
    tables = {
        "topics": [(t.qid, t.query, t.narrative) for t in topics.values()],
        "topic_fields": _topic_field_rows(topics.values()),
        "documents": [(d.docno, d.text, d.url, d.title) for d in documents.values()],
        "dimensions": [
            (name, position, json.dumps(scale.to_json()))
            for position, (name, scale) in enumerate(manifest.dimensions.items())
        ],
        "judgments": judgment_rows,
        "references": [(r.qid, r.ref_id, r.text) for r in contents.references],
    }
    counts["judgment lines read"] = len(contents.judgments)
    return tables, counts, warnings


def _topic_field_rows(topics: Iterable[Topic]) -> list[tuple[str, str, str]]:
    """(qid, field, text) of every non-empty extra text of every topic; names are checked, as a
    ranker spec must be able to write them (``dense:query=NAME``)."""
    rows = []
    for topic in topics:
        for name, text in (topic.fields or {}).items():
            if name in TOPIC_COLUMNS or not FIELD_NAME.match(name):
                raise _at(
                    topic.origin,
                    f"topic {quote(topic.qid)}: field name {quote(name)} must be lower-case "
                    "letters, digits "
                    f"and _ (starting with a letter) and not one of {', '.join(TOPIC_COLUMNS)}",
                )
            if text is not None and str(text).strip():
                rows.append((topic.qid, name, str(text)))
    return rows


def _at(origin: Origin | None, problem: str) -> InputError:
    return InputError(origin.path if origin else None, origin.line if origin else None, problem)


def _unique(records: list[Topic], key: str, what: str) -> dict[str, Topic]:
    found: dict[str, Topic] = {}
    for record in records:
        ident = getattr(record, key)
        if ident in found:
            raise _at(
                record.origin,
                f"{what} {quote(ident)} declared twice (first at {found[ident].origin})",
            )
        found[ident] = record
    return found


def _unique_documents(records: list[Document], report: ReadReport) -> dict[str, Document]:
    """Identical copies of a document (same docno and text) are merged and counted; a docno with
    two different texts is an error."""
    found: dict[str, Document] = {}
    for doc in records:
        first = found.get(doc.docno)
        if first is None:
            found[doc.docno] = doc
        elif first.text != doc.text:
            raise _at(
                doc.origin,
                f"document {quote(doc.docno)} given twice with different text "
                f"(first at {first.origin})",
            )
        else:
            report.count("identical duplicate documents merged")
    return found


def _resolve(
    manifest: Manifest, scale: LabelScale, entries: list[tuple[Judgment, Grade]], repeats: Counter
) -> tuple[str, float | None, int | None]:
    """(raw label, raw numeric value, gain) of one (dimension, qid, docno) after repeats."""
    labels = {normalize_label(j.grade) for j, _ in entries}
    first_judgment, first_grade = entries[0]
    if len(entries) > 1 and len(labels) == 1:
        repeats["repeated judgments with the same label merged"] += len(entries) - 1
    if len(labels) == 1:
        raw = first_judgment.grade.strip()
        return raw, numeric_value(raw), first_grade.gain
    policy = manifest.repeated_policy
    if policy == "error":
        other = next(
            j
            for j, _ in entries
            if normalize_label(j.grade) != normalize_label(first_judgment.grade)
        )
        raise _at(
            other.origin,
            f"({clip(other.qid)}, {clip(other.docno)}) judged twice in {quote(other.dimension)} "
            "with different "
            f"labels: {quote(other.grade)} here, {quote(first_judgment.grade)} at "
            f"{first_judgment.origin}; "
            "declare repeated_judgments.policy (max, min, mean, first, last) in the manifest",
        )
    repeats[f"conflicting repeated judgments resolved by policy {policy!r}"] += 1
    # Labels a scale excludes ("could not judge") give way to any graded label of the same pair.
    graded = [(j, g) for j, g in entries if g.gain is not None] or entries
    if policy in ("first", "last"):
        judgment, grade = graded[0] if policy == "first" else graded[-1]
        return judgment.grade.strip(), numeric_value(judgment.grade), grade.gain
    if graded[0][1].gain is None:  # every label excluded
        return first_judgment.grade.strip(), numeric_value(first_judgment.grade), None
    gains = [g.gain for _, g in graded]
    if policy in ("max", "min"):
        pick = max if policy == "max" else min
        judgment, grade = pick(graded, key=lambda pair: pair[1].gain)
        return judgment.grade.strip(), numeric_value(judgment.grade), grade.gain
    # mean: graded qrels take integer gains, so the mean is rounded half up; the raw labels are
    # all kept, joined by "|", with the mean of their numeric values where they have them.
    mean_gain = math.floor(sum(gains) / len(gains) + 0.5)
    values = [numeric_value(j.grade) for j, _ in graded]
    raw_value = None if None in values else sum(values) / len(values)
    return "|".join(j.grade.strip() for j, _ in graded), raw_value, mean_gain
