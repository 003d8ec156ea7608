"""What ``nrp info`` reports about a collection: counts per dimension, label histograms, the
documents and judgments that do not meet (judged without text, text never judged), and the
distribution of |D_q|."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from nrp.collection.collection import Collection


def collection_info(collection: Collection) -> dict[str, Any]:
    with sqlite3.connect(f"file:{collection.path / 'collection.sqlite'}?mode=ro", uri=True) as db:
        one = lambda sql, *p: db.execute(sql, p).fetchone()[0]  # noqa: E731
        info: dict[str, Any] = {
            "name": collection.name,
            "description": collection.meta.get("description", ""),
            "built_at": collection.meta.get("built_at"),
            "manifest": collection.meta.get("manifest_path"),
            "topics": one("SELECT COUNT(*) FROM topics"),
            "documents_with_text": one("SELECT COUNT(*) FROM documents"),
            "reference_answers": one("SELECT COUNT(*) FROM reference_answers"),
            "judged_docnos": one("SELECT COUNT(DISTINCT docno) FROM judgments"),
            "judged_docnos_without_text": one(
                "SELECT COUNT(DISTINCT docno) FROM judgments "
                "WHERE docno NOT IN (SELECT docno FROM documents)"
            ),
            "documents_without_judgments": one(
                "SELECT COUNT(*) FROM documents WHERE docno NOT IN (SELECT docno FROM judgments)"
            ),
            "topics_without_judgments": one(
                "SELECT COUNT(*) FROM topics WHERE qid NOT IN (SELECT qid FROM judgments)"
            ),
        }
        dimensions = []
        for name, scale in collection.dimensions.items():
            rows = db.execute(
                "SELECT raw_label, grade, COUNT(*), SUM(lines) FROM judgments WHERE dimension = ? "
                "GROUP BY raw_label, grade ORDER BY grade IS NULL, grade, raw_label",
                (name,),
            ).fetchall()
            histogram = []
            for raw_label, grade, count, _lines in rows:
                # a label like "2-Related|4-Excellent" is a pair resolved by the mean policy
                meanings = [g.meaning for g in map(scale.grade_of, raw_label.split("|")) if g]
                meaning = meanings[0] if len(meanings) == 1 else "mean of " + " / ".join(meanings)
                histogram.append(
                    {
                        "label": raw_label,
                        "gain": grade,
                        "meaning": meaning,
                        "excluded": grade is None,
                        "count": count,
                    }
                )
            dimensions.append(
                {
                    "dimension": name,
                    "description": scale.description,
                    "judgments": sum(r[2] for r in rows),
                    "judgment_lines": sum(r[3] for r in rows),
                    "excluded": sum(r[2] for r in rows if r[1] is None),
                    "topics_judged": one(
                        "SELECT COUNT(DISTINCT qid) FROM judgments WHERE dimension = ?", name
                    ),
                    "judged_without_text": one(
                        "SELECT COUNT(*) FROM judgments WHERE dimension = ? "
                        "AND docno NOT IN (SELECT docno FROM documents)",
                        name,
                    ),
                    "histogram": histogram,
                }
            )
        info["dimensions"] = dimensions
        sizes = [
            n
            for (n,) in db.execute(
                "SELECT COUNT(d.docno) FROM topics t "
                "LEFT JOIN (SELECT DISTINCT qid, docno FROM judgments) j ON j.qid = t.qid "
                "LEFT JOIN documents d ON d.docno = j.docno GROUP BY t.qid ORDER BY t.rowid"
            )
        ]
    info["candidate_set_sizes"] = _distribution(sizes)
    info["topic_fields"] = _topic_fields(collection)
    info["ingest"] = {
        "repeated_judgments": collection.meta.get("repeated_judgments"),
        "counts": collection.meta.get("counts", {}),
        "warned_counts": collection.meta.get("warned_counts", []),
        "warnings": collection.meta.get("warnings", []),
    }
    return info


def _topic_fields(collection: Collection) -> list[dict[str, Any]]:
    """Each query formulation a ranker may read (``query=FIELD``) and how many topics have it
    (the others are ranked with their query)."""
    topics = collection.topics
    extra = collection.topic_fields
    counts = {
        "query": len(topics),
        "narrative": int((topics["narrative"].fillna("") != "").sum()),
        **{field: int(extra[field].notna().sum()) for field in extra.columns if field != "qid"},
    }
    return [{"field": field, "topics": counts[field]} for field in collection.query_fields]


def _distribution(sizes: list[int]) -> dict[str, Any]:
    if not sizes:
        return {"topics": 0}
    array = np.array(sizes)
    return {
        "topics": len(sizes),
        "topics_with_empty_D_q": int((array == 0).sum()),
        "total": int(array.sum()),
        "min": int(array.min()),
        "p25": float(np.percentile(array, 25)),
        "median": float(np.median(array)),
        "mean": round(float(array.mean()), 3),
        "p75": float(np.percentile(array, 75)),
        "max": int(array.max()),
    }


def render_info(info: dict[str, Any]) -> str:
    lines = [
        f"collection {info['name']}" + (f": {info['description']}" if info["description"] else "")
    ]
    lines.append(f"  built {info['built_at']} from {info['manifest']}")
    for key in (
        "topics",
        "documents_with_text",
        "reference_answers",
        "judged_docnos",
        "judged_docnos_without_text",
        "documents_without_judgments",
        "topics_without_judgments",
    ):
        lines.append(f"  {key.replace('_', ' '):<30} {info[key]:>8,}")
    for dim in info["dimensions"]:
        lines.append("")
        title = f"dimension {dim['dimension']}" + (
            f" ({dim['description']})" if dim["description"] else ""
        )
        lines.append(title)
        lines.append(
            f"  judgments {dim['judgments']:,} ({dim['judgment_lines']:,} lines), "
            f"topics judged {dim['topics_judged']:,}, excluded labels {dim['excluded']:,}, "
            f"judged without text {dim['judged_without_text']:,}"
        )
        width = max([5] + [len(row["label"]) for row in dim["histogram"]])
        lines.append(f"  {'label':<{width}} {'gain':>5} {'count':>8}  meaning")
        for row in dim["histogram"]:
            gain = "excl." if row["excluded"] else str(row["gain"])
            lines.append(
                f"  {row['label']:<{width}} {gain:>5} {row['count']:>8,}  {row['meaning']}"
            )
    lines.append("")
    lines.append("topic fields (a ranker reads one as its query with query=FIELD)")
    for row in info["topic_fields"]:
        lines.append(f"  {row['field']:<20} {row['topics']:>8,} topics")
    sizes = info["candidate_set_sizes"]
    lines.append("")
    lines.append("|D_q| (judged documents with text per topic)")
    if sizes.get("topics"):
        lines.append(
            f"  min {sizes['min']}, p25 {sizes['p25']:g}, median {sizes['median']:g}, "
            f"mean {sizes['mean']:g}, p75 {sizes['p75']:g}, max {sizes['max']}; "
            f"total {sizes['total']:,}; topics with empty D_q {sizes['topics_with_empty_D_q']}"
        )
    ingest = info["ingest"]
    policy = ingest.get("repeated_judgments") or {}
    if ingest["counts"] or ingest["warnings"] or policy.get("policy", "error") != "error":
        lines.append("")
        lines.append("ingest")
        if policy.get("policy", "error") != "error":
            lines.append(f"  repeated judgments: policy {policy['policy']} ({policy['reason']})")
        warned = set(ingest.get("warned_counts", []))
        for what, n in ingest["counts"].items():
            if what not in warned:  # else its warning below says it in detail
                lines.append(f"  {what}: {n:,}")
        for warning in ingest["warnings"]:
            lines.append(f"  warning: {warning}")
    return "\n".join(lines)
