"""Writing a synthetic test set: an nrp collection folder, every candidate, and the report.

``OUT/`` (the collection's name is the folder's name; its parent is the ``--indexes`` folder
of ``nrp info``, ``nrp generate``, ``nrp evaluate``):

- ``source/``: ``manifest.yaml`` and the ``table``-format inputs it names (``topics.jsonl``,
  ``documents.jsonl``, ``judgments.jsonl``, ``references.jsonl``);
- ``collection.sqlite``: built from ``source/manifest.yaml`` by ``nrp.collection.build.ingest``
  itself, so the collection passes every check an ingested one does and can be rebuilt with
  ``nrp ingest OUT/source/manifest.yaml --name NAME``;
- ``items.jsonl``: every candidate pair, kept or dropped (``stage``, ``reason``), with its
  provenance (model, checksum, prompt template and SHA-256, seed) and the judge's label and
  confidence;
- ``report.json`` / ``report.md``: counts per stage and per kind, examples, settings;
- ``.synth/``: the resumable generation stores and the judge's cache.

Every file is written aside and renamed (``nrp.tables.write_aside``); the store is written whole
by ingest. Topic ids are the items' ids (``KIND-P0001-0``: kind, passage number, sample), stable
between runs over the same input and settings. Judgments: the generating passage(s) of each kept
question, label 1 in the dimension ``relevance`` (graded by construction, not by a person: the
manifest says so).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nrp.collection.build import check_name
from nrp.errors import NrpError
from nrp.synth.documents import Passage

SOURCE_DIR = "source"
ITEMS_FILE = "items.jsonl"
REPORT_JSON = "report.json"
REPORT_TEXT = "report.md"
DIMENSION = "relevance"
#: what marks a folder as a synth output (a re-run may write into it)
MARKERS = (SOURCE_DIR, ITEMS_FILE, REPORT_JSON, ".synth")
ITEM_COLUMNS = [
    "item_id",
    "kind",
    "kept",
    "stage",
    "reason",
    "detail",
    "question",
    "answer",
    "passages",
    "llm",
    "model",
    "checksum",
    "prompt",
    "prompt_sha256",
    "seed",
    "support_label",
    "support_confidence",
    "raw",
]


def check_out_folder(out: Path) -> None:
    """``out`` is a new folder, an empty one, or an earlier synth output (resumed); a file or
    a folder holding something else is an error before any work."""
    if out.exists() and not out.is_dir():
        raise NrpError(f"{out}: exists and is not a folder")
    check_name(out.resolve().name)
    ours = any((out / marker).exists() for marker in MARKERS)
    if out.is_dir() and any(out.iterdir()) and not ours:
        raise NrpError(f"{out}: folder is not empty and holds no nrp synth output")


def _jsonl(path: Path, rows: list[Mapping[str, Any]]) -> None:
    from nrp.tables import write_text

    write_text(path, "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows))


def _manifest(name: str, report: Mapping[str, Any]) -> str:
    import yaml

    kinds = ", ".join(report["settings"]["kinds"])
    manifest = {
        "name": name,
        "description": (
            f"Synthetic question/answer test set written by {report['llm']} "
            f"({report['checksum']}) from {report['docs']} (nrp synth; kinds: {kinds}); "
            f"{report['kept']} questions kept of {report['candidates']} candidates"
        ),
        "data_root": ".",
        "dimensions": {
            DIMENSION: {
                "description": (
                    "the passage(s) a question and its reference answer were generated from: "
                    "graded by construction, not by a person"
                ),
                "grades": {1: {"grade": 1, "meaning": "generating passage"}},
            }
        },
        "sources": [
            {"format": "table", "path": "topics.jsonl", "holds": "topics"},
            {"format": "table", "path": "documents.jsonl", "holds": "documents"},
            {
                "format": "table",
                "path": "judgments.jsonl",
                "holds": "judgments",
                "dimension": DIMENSION,
            },
            {"format": "table", "path": "references.jsonl", "holds": "references"},
        ],
    }
    header = "# Written by nrp synth (see items.jsonl beside the collection for provenance).\n"
    return header + yaml.safe_dump(manifest, allow_unicode=True, sort_keys=False, width=100)


def write_outputs(
    out: Path, records: list[dict[str, Any]], passages: list[Passage], report: dict[str, Any]
) -> Path | None:
    """Items and report always; the collection when at least one item was kept (its path),
    else None."""
    from nrp.collection.build import ingest
    from nrp.tables import write_text

    out.mkdir(parents=True, exist_ok=True)
    _jsonl(out / ITEMS_FILE, [{k: r.get(k) for k in ITEM_COLUMNS} for r in records])
    write_text(out / REPORT_JSON, json.dumps(report, ensure_ascii=False, indent=2) + "\n")
    write_text(out / REPORT_TEXT, format_report(report) + "\n")
    kept = [r for r in records if r["kept"]]
    if not kept:  # no collection; none left from an earlier run either
        import shutil

        from nrp.collection.store import store_path

        store_path(out).unlink(missing_ok=True)
        shutil.rmtree(out / SOURCE_DIR, ignore_errors=True)
        return None
    source = out / SOURCE_DIR
    _jsonl(source / "topics.jsonl", [{"qid": r["item_id"], "query": r["question"]} for r in kept])
    _jsonl(
        source / "documents.jsonl",
        [{"docno": p.docno, "text": p.text, "title": p.title or ""} for p in passages],
    )
    _jsonl(
        source / "judgments.jsonl",
        [
            {"qid": r["item_id"], "docno": docno, "grade": 1}
            for r in kept
            for docno in r["passages"]
        ],
    )
    _jsonl(
        source / "references.jsonl",
        [{"qid": r["item_id"], "text": r["answer"], "ref_id": r["item_id"]} for r in kept],
    )
    write_text(source / "manifest.yaml", _manifest(out.resolve().name, report))
    result = ingest(source / "manifest.yaml", out.resolve().name, out.resolve().parent)
    return result.path


def format_report(report: Mapping[str, Any]) -> str:
    """The report as text (what the CLI prints and ``report.md`` holds)."""
    lines = [
        f"nrp synth: {report['docs']} with {report['llm']} ({report['checksum']})",
        f"documents read: {report['documents']['read']}"
        + "".join(f"; skipped {n} ({why})" for why, n in report["documents"]["skipped"].items()),
        f"passages: {report['passages']}; prompts: {report['prompts']}; "
        f"candidates: {report['candidates']}",
        "",
        f"{'stage':<16}{'dropped':>8}{'remaining':>10}  reasons",
    ]
    for stage in report["stages"]:
        reasons = "; ".join(f"{why}: {n}" for why, n in stage["reasons"].items())
        lines.append(
            f"{stage['stage']:<16}{stage['dropped']:>8}{stage['remaining']:>10}  {reasons}"
        )
    lines += ["", f"kept: {report['kept']}", ""]
    stages = [stage["stage"] for stage in report["stages"]]
    header = f"{'kind':<12}{'candidates':>11}" + "".join(f"{s[:9]:>10}" for s in stages)
    lines.append(header + f"{'kept':>6}")
    for kind, counts in report["kinds"].items():
        row = f"{kind:<12}{counts['candidates']:>11}" + "".join(f"{counts[s]:>10}" for s in stages)
        lines.append(row + f"{counts['kept']:>6}")
    calls = report["llm_calls"]
    lines += [
        "",
        f"LLM calls: generation {calls['generation']} "
        f"(from store {calls['generation_from_store']}), "
        f"support {calls['support']} (from cache {calls['support_from_cache']})",
        "",
        "examples:",
    ]
    for stage, examples in report["examples"].items():
        for example in examples:
            lines.append(f"- [{stage}] {example['item_id']}: Q: {example['question']!s}")
            lines.append(f"  A: {example['answer']!s}")
            if example.get("reason"):
                detail = f" ({example['detail']})" if example.get("detail") else ""
                lines.append(f"  dropped: {example['reason']}{detail}")
            if example.get("raw") is not None:
                lines.append(f"  reply: {' '.join(str(example['raw']).split())[:200]}")
    return "\n".join(lines)
