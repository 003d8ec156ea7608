#!/usr/bin/env python3
"""The weighted NRP's default before and after: the figures of the issue that asked that the
default weighted NRP not be worse than its best ranker (noise dimensions, negative idf).

For each collection (``--collections``, ingested into ``--indexes`` from ``manifests/`` when
missing), with the library's own calls:

1. ``validate`` three times: "plain", the candidates before validity existed (tfidf, dph, bm25,
   dense, random) without validity, with Terrier's formulas for bm25 and dph
   (``formula=terrier``, the old default, whose idf is negative for a term in more than half of
   D_q): what the issue saw; "before", today's default candidates with validity but Terrier's
   formulas and every dimension weighted; "after", today's defaults; per dimension: the
   chosen ranker, its nDCG@10, its test against the random ranker (mean difference, corrected
   p), and whether the dimension enters the weighted NRP (before: every dimension, equal
   weights; after: ``nrp.validation.selection.WEIGHTING_RULE``);
2. bm25 and dph nDCG@10 and validity wins under both formulas;
3. the weighted NRP's leave-one-out agreement: each judged document is positioned among the
   rest of D_q by each dimension's chosen ranker (``agreement``), its NRP combined with the
   weights, and Kendall's tau-b between that weighted NRP and each dimension's grades per query
   (queries with 3+ judged documents and 2+ grades), mean over queries with a 95% t-interval;
   before and after, and each single chosen ranker alone, for comparison.

    .venv/bin/python scripts/studies/weighting_study.py --out runs/weighting/study.md
    .venv/bin/python scripts/studies/weighting_study.py --collections clef-ehealth-2021 \
        --out /tmp/w.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchkit, beside the benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other studies
from benchkit import ROOT, load_or_ingest

COLLECTIONS = ["clef-ehealth-2021", "mediqa-2019", "liveqa-med-2017", "argquality-20", "cranfield"]
TERRIER = {"bm25": "bm25:formula=terrier", "dph": "dph:formula=terrier"}


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--indexes", type=Path, default=ROOT / "indexes")
    parser.add_argument("--collections", nargs="+", default=COLLECTIONS)
    return parser.parse_args(argv)


def validations(collection, out: Path):
    """(before, after) validation results, written beside ``out`` as JSON."""
    import nrp
    from nrp.rankers.registry import default_rankers

    after_specs = default_rankers()
    before_specs = [TERRIER.get(spec, spec) for spec in after_specs]
    plain_specs = [s for s in before_specs if not s.startswith("guard")]
    plain = nrp.validate(collection, plain_specs, validity=False)
    before = nrp.validate(collection, before_specs)
    after = nrp.validate(collection, after_specs)
    for tag, result in (("plain", plain), ("before", before), ("after", after)):
        result.to_json(out.parent / f"{collection.name}.{tag}.validation.json")
    return plain, before, after


def weights_of(result, before: bool) -> dict[str, tuple[str, float]]:
    """dimension -> (chosen spec, weight before normalising)."""
    chosen = result.chosen()
    if before:
        return {d: (spec, 1.0) for d, spec in chosen.items()}
    weights = result.weighting()[0]
    return {d: (spec, weights[d]) for d, spec in chosen.items()}


def choice_rows(plain, before, after) -> list[str]:
    rows = [
        "| dimension | | chosen | nDCG@10 | vs random (diff, p corr.) | enters weighted |",
        "|---|---|---|---|---|---|",
    ]
    for tag, result in (("plain", plain), ("before", before), ("after", after)):
        weights = weights_of(result, tag != "after")
        for dimension, found in result.dimensions.items():
            choice = found.choice
            if choice is None:
                rows.append(f"| {dimension} | {tag} | (none) | - | - | no |")
                continue
            ndcg = found.summary[choice.best][result.primary].mean
            p = "-" if choice.control_p is None else f"{choice.control_p:.3f}"
            verdict = "better" if choice.better_than_control else "NOT better"
            enters = "yes" if weights[dimension][1] else "no"
            rows.append(
                f"| {dimension} | {tag} | {choice.best} | {ndcg:.4f} | "
                f"{choice.control_difference:+.4f}, {p} ({verdict}) | {enters} |"
            )
    return rows


def formula_rows(before, after) -> list[str]:
    rows = [
        "| dimension | ranker | nDCG@10 terrier | nDCG@10 default | validity wins terrier "
        "| validity wins default |",
        "|---|---|---|---|---|---|",
    ]
    for dimension in after.dimensions:
        for name in ("bm25", "dph"):
            old, new = before.dimensions[dimension], after.dimensions[dimension]
            terrier = TERRIER[name]

            def wins(found, system):
                v = found.validity.get(system)
                return "-" if v is None or v.overall is None else f"{v.overall.wins:.3f}"

            rows.append(
                f"| {dimension} | {name} | {old.summary[terrier][before.primary].mean:.4f} | "
                f"{new.summary[name][after.primary].mean:.4f} | {wins(old, terrier)} | "
                f"{wins(new, name)} |"
            )
    return rows


def per_doc_nrp(collection, specs: list[str]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """(qid, docno) -> leave-one-out NRP per ranker spec (columns), and each dimension's
    graded judgments of D_q."""
    import nrp

    result = nrp.agreement(collection, sorted(set(specs)))
    docs = result.per_doc
    nrp_by_spec = docs.drop_duplicates(["ranker", "qid", "docno"]).pivot(
        index=["qid", "docno"], columns="ranker", values="nrp"
    )
    grades = {d: docs[(docs["dimension"] == d)] for d in collection.dimensions}
    return nrp_by_spec, grades


def agreement_of(values: pd.Series, grades: pd.DataFrame) -> tuple[float, float, int]:
    """Mean per-query tau-b of ``values`` (indexed by qid, docno) with the grades, and the
    half-width of its 95% t-interval, over usable queries."""
    from scipy import stats

    from nrp.statistics import correlations

    frame = grades[["qid", "docno", "label"]].merge(
        values.rename("value").reset_index(), on=["qid", "docno"], how="inner"
    )
    taus = []
    for _, group in frame.groupby("qid"):
        if len(group) < 3 or group["label"].nunique() < 2:
            continue
        taus.append(correlations(group["value"].to_numpy(), group["label"].to_numpy())[0])
    taus = np.asarray(taus, dtype=float)
    half = stats.t.ppf(0.975, len(taus) - 1) * taus.std(ddof=1) / np.sqrt(len(taus))
    return float(taus.mean()), float(half), len(taus)


def agreement_rows(collection, plain, before, after) -> list[str]:
    plans = {
        "plain": weights_of(plain, True),
        "before": weights_of(before, True),
        "after": weights_of(after, False),
    }
    specs = [spec for plan in plans.values() for spec, _ in plan.values()]
    nrp_by_spec, grades = per_doc_nrp(collection, specs)
    scored = {}
    for tag, plan in plans.items():
        total = sum(w for _, w in plan.values())
        if not total:  # nothing chosen: no weighted NRP
            continue
        parts = ", ".join(f"{d} {w / total:.2f}" for d, (_, w) in plan.items())
        scored[f"{tag} weighted ({parts})"] = sum(
            nrp_by_spec[spec] * (w / total) for spec, w in plan.values()
        )
    for spec in dict.fromkeys(specs):
        scored[f"{spec} alone"] = nrp_by_spec[spec]
    rows = [
        "| NRP | " + " | ".join(f"tau-b vs {d} [95% CI] (queries)" for d in grades) + " |",
        "|---|" + "---|" * len(grades),
    ]
    for name, values in scored.items():
        cells = []
        for graded in grades.values():
            mean, half, n = agreement_of(values, graded)
            cells.append(f"{mean:.3f} [±{half:.3f}] ({n})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    parts = ["# The weighted NRP's default, before and after", ""]
    for name in args.collections:
        collection = load_or_ingest(name, args.indexes)
        plain, before, after = validations(collection, args.out)
        parts += [f"## {name}", "", *choice_rows(plain, before, after), ""]
        parts += ["bm25 and dph, Terrier's formula and the default:", ""]
        parts += [*formula_rows(before, after), ""]
        parts += ["Leave-one-out agreement of the weighted NRP:", ""]
        parts += [*agreement_rows(collection, plain, before, after), ""]
        text = "\n".join(parts)
        args.out.write_text(text + "\n")
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
