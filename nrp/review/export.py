"""The human files ``nrp meta`` reads, made from a project's saved reviews.

Per reviewer (so each person's labels can be checked against a judge and against each other):

- ``rankings.REVIEWER.jsonl``: ``{"qid": ..., "ranking": [id, [tied, ids], ...]}`` best first,
  with the candidates' real ids (answer ids, docnos) in place of c1..ck; a tie is a nested list
  (``nrp.meta.human`` reads it).
- ``grades.REVIEWER.csv``: answer_id, qid and one column per dimension (the label).
- ``verify.REVIEWER.csv``: answer_id, qid, label (TRUE / FALSE / NOT GIVEN or a score).

Over reviewers: ``grades.csv`` (the mean of the numeric labels given to each answer),
``verify.csv`` (the label most reviewers gave; empty on a tie, which ``nrp meta`` leaves out),
``corrected.csv`` (every answer of the judge's evaluations with its label corrected where
reviewed: ``label`` the reviewed label when there is one, else the judge's, and ``source``
human or judge), and ``agreement.json`` (Krippendorff's alpha per grade dimension, ordinal
and nominal, and of the verdicts, nominal; the pairwise Kendall tau of the rankings:
``nrp.meta.annotators``). Every file is written aside and renamed.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.meta.annotators import krippendorff_alpha, pairwise_kendall_tau
from nrp.meta.readers import read_table
from nrp.review.project import ReviewProject
from nrp.review.store import Review
from nrp.tables import write_aside, write_text


def ranking_with_ids(project: ReviewProject, review: Review) -> list[Any]:
    """A ranking of c1..ck as real ids, a tied group as a list (a group of one as the id)."""
    item = project.item(review.item_id)
    assert item is not None
    sources = item.hidden["sources"]
    groups = [[sources[c]["id"] for c in group] for group in review.value["ranking"]]
    return [group[0] if len(group) == 1 else group for group in groups]


def _number(label: Any) -> float:
    try:
        return float(label)
    except (TypeError, ValueError):
        return math.nan


def _by_kind(project: ReviewProject, reviews: list[Review], kind: str) -> list[Review]:
    order = {item.id: i for i, item in enumerate(project.items)}
    chosen = [r for r in reviews if (item := project.item(r.item_id)) and item.kind == kind]
    return sorted(chosen, key=lambda r: (order[r.item_id], r.reviewer))


def human_tables(project: ReviewProject, reviews: list[Review]) -> dict[str, Any]:
    """File name -> content (a frame, a list of JSON Lines rows, or a JSON object)."""
    out: dict[str, Any] = {}
    ranks = _by_kind(project, reviews, "rank")
    for reviewer in project.reviewers:
        rows = [
            {"qid": project.item(r.item_id).qid, "ranking": ranking_with_ids(project, r)}
            for r in ranks
            if r.reviewer == reviewer
        ]
        if rows:
            out[f"rankings.{reviewer}.jsonl"] = rows

    grades = _by_kind(project, reviews, "grade")
    dimensions = list(project.scales)
    grade_rows = [
        {
            "reviewer": r.reviewer,
            "answer_id": project.item(r.item_id).hidden["answer_id"],
            "qid": project.item(r.item_id).qid,
            **{d: r.value["labels"].get(d) for d in dimensions},
        }
        for r in grades
    ]
    if grade_rows:
        frame = pd.DataFrame(grade_rows)
        for reviewer, mine in frame.groupby("reviewer", sort=False):
            out[f"grades.{reviewer}.csv"] = mine.drop(columns="reviewer").reset_index(drop=True)
        numeric = frame.assign(**{d: frame[d].map(_number) for d in dimensions})
        out["grades.csv"] = (
            numeric.groupby(["answer_id", "qid"], sort=False)[dimensions].mean().reset_index()
        )

    verdicts = _by_kind(project, reviews, "verify")
    verify_rows = [
        {
            "reviewer": r.reviewer,
            "answer_id": project.item(r.item_id).hidden["answer_id"],
            "qid": project.item(r.item_id).qid,
            "label": r.value["label"],
        }
        for r in verdicts
    ]
    if verify_rows:
        frame = pd.DataFrame(verify_rows)
        for reviewer, mine in frame.groupby("reviewer", sort=False):
            out[f"verify.{reviewer}.csv"] = mine.drop(columns="reviewer").reset_index(drop=True)
        majority = (
            frame.groupby(["answer_id", "qid"], sort=False)["label"].agg(_majority).reset_index()
        )
        out["verify.csv"] = majority
        if project.origin.get("evaluations"):
            out["corrected.csv"] = corrected_labels(project, majority)
    out["agreement.json"] = agreement(project, reviews)
    return out


def _majority(labels: pd.Series) -> str | None:
    counts = Counter(labels).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def corrected_labels(project: ReviewProject, verdicts: pd.DataFrame) -> pd.DataFrame:
    """The judge's evaluations with each reviewed label replaced by the reviewers' one."""
    origin = project.origin
    table = read_table(origin["evaluations"], text_columns=["answer_id", "qid"])
    label_column = origin.get("label_column", "judge.label")
    human = verdicts.dropna(subset=["label"]).set_index("answer_id")["label"]
    judge = table[label_column].map(lambda v: None if pd.isna(v) else str(v))
    reviewed = table["answer_id"].isin(human.index)
    out = pd.DataFrame(
        {
            "answer_id": table["answer_id"],
            "qid": table.get("qid", ""),
            "label": judge.where(~reviewed, table["answer_id"].map(human)),
            "source": ["human" if r else "judge" for r in reviewed],
        }
    )
    return out


def agreement(project: ReviewProject, reviews: list[Review]) -> dict[str, Any]:
    """Krippendorff's alpha of the grades (per dimension) and verdicts; pairwise tau of the
    rankings (``nrp.meta.annotators``). NaN (null) where nothing is pairable."""
    out: dict[str, Any] = {"grades": {}, "verify": None, "rankings": {}}
    grades = _by_kind(project, reviews, "grade")
    for dimension in project.scales:
        units: dict[str, list[Any]] = {}
        for r in grades:
            label = r.value["labels"].get(dimension)
            if label is not None:
                units.setdefault(r.item_id, []).append(label)
        numeric = [[_number(v) for v in unit] for unit in units.values()]
        out["grades"][dimension] = {
            "ordinal": _finite(krippendorff_alpha(numeric, "ordinal")),
            "nominal": _finite(krippendorff_alpha(list(units.values()), "nominal")),
            "units": sum(len(u) >= 2 for u in units.values()),
        }
    verdict_units: dict[str, list[Any]] = {}
    for r in _by_kind(project, reviews, "verify"):
        verdict_units.setdefault(r.item_id, []).append(r.value["label"])
    out["verify"] = {
        "nominal": _finite(krippendorff_alpha(list(verdict_units.values()), "nominal")),
        "units": sum(len(u) >= 2 for u in verdict_units.values()),
    }
    positions: dict[str, dict[str, dict[str, float]]] = {}
    for r in _by_kind(project, reviews, "rank"):
        labels = positions.setdefault(r.reviewer, {}).setdefault(r.item_id, {})
        below = sum(len(g) for g in r.value["ranking"])
        for group in r.value["ranking"]:
            below -= len(group)
            for cid in group:
                labels[cid] = float(below)
    out["rankings"] = {
        f"{a}~{b}": _finite(tau) for (a, b), tau in pairwise_kendall_tau(positions).items()
    }
    return out


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else round(float(value), 6)


def write_review_human_files(
    project: ReviewProject, reviews: list[Review], out: str | Path
) -> list[Path]:
    """Write ``human_tables`` into the folder ``out``; the paths written."""
    out = Path(out)
    written = []
    for name, content in human_tables(project, reviews).items():
        path = out / name
        if isinstance(content, pd.DataFrame):
            write_aside(path, lambda partial, c=content: c.to_csv(partial, index=False))
        elif name.endswith(".jsonl"):
            text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in content)
            write_text(path, text)
        else:
            write_text(path, json.dumps(content, indent=1, ensure_ascii=False) + "\n")
        written.append(path)
    return written
