#!/usr/bin/env python3
"""Validity before and after: the figures of the issue that asked for a valid NRP.

For each collection (``--collections``, ingested into ``--indexes`` from ``manifests/`` when
missing), with the library's own calls:

1. ``validate`` with the rankers of ``--before`` (the default candidates before validity:
   tfidf, dph, bm25, dense, random) and ``--after`` (the new candidates: the same plus the
   guarded dense ranker with and without the content term), validity measured for every ranker;
   "before" is the ranker nDCG@10 alone chooses among ``--before``, "after" the one the
   selection rule chooses among all of them with validity;
2. per degenerate kind and family, for the before and after rankers: the share of (graded-
   relevant judged document, degenerate text) pairs in which the document ranks above, and the
   mean NRP the texts would get, with 95% t-intervals over queries; the held-out family
   (``evasion``: the guard never saw it) apart;
3. ``agreement`` (leave-one-out NRP of the judged documents against their grades): per-query
   tau-b mean with its 95% interval for both rankers, the paired difference (after - before)
   with its t-interval and the paired randomization p, and the mean leave-one-out NRP per grade;
4. nDCG@10 with its interval for both;
5. ``nrp.score_answers`` of four answer systems written with wordings the degenerate generators
   do not have (those of the issue that asked for validity): the question itself; "Thank you
   for asking about <question>. ... please consult your doctor"; "You are asking: <question>.
   ... a common question"; the question followed by the first 300 characters of a judged
   document: the mean NRP of each under the before and after rankers.

The markdown goes to ``--out`` (and stdout); the validation JSONs beside it.

    .venv/bin/python scripts/studies/validity_study.py --out runs/validity/study.md
    .venv/bin/python scripts/studies/validity_study.py --collections mediqa-2019 --out /tmp/v.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchkit, beside the benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other studies
from benchkit import ROOT, load_or_ingest

BEFORE = "tfidf,dph,bm25,dense,random"
AFTER = BEFORE + ",guard,guard:content=0.06"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--indexes", type=Path, default=ROOT / "indexes")
    parser.add_argument("--collections", nargs="+", default=["mediqa-2019", "liveqa-med-2017"])
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--after", default=AFTER)
    return parser.parse_args(argv)


def ci(group) -> str:
    interval = group.wins_ci
    return "" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}]"


def kind_rows(name: str, dimension: str, label: str, validity) -> list[str]:
    rows = []
    groups = [*validity.kinds.values(), *validity.families.values(), validity.overall]
    for group in groups:
        held = " (held out)" if group.group == validity.held_out_family else ""
        nrp_ci = "" if group.nrp_ci is None else f" [{group.nrp_ci[0]:.3f}, {group.nrp_ci[1]:.3f}]"
        rows.append(
            f"| {name} / {dimension} | {label} | {group.group}{held} | {group.texts} | "
            f"{group.wins:.3f}{ci(group)} | {group.nrp:.3f}{nrp_ci} |"
        )
    return rows


def agreement_rows(collection, dimension: str, before: str, after: str) -> list[str]:
    import nrp
    from nrp.analysis.agreement import paired_taus

    result = nrp.agreement(collection, [before, after], dimensions=[dimension])
    summary = result.summary.set_index("ranker")
    paired = paired_taus(result.per_query, after, before, dimension)
    mean, low, high, p = (paired[key] for key in ("difference", "ci_low", "ci_high", "p"))
    grades = result.by_grade.pivot(index="label", columns="ranker", values="mean_nrp")
    lines = []
    for spec in (before, after):
        row = summary.loc[spec]
        by_grade = ", ".join(f"{g:g}: {grades.loc[g, spec]:.3f}" for g in grades.index)
        lines.append(
            f"| {collection.name} / {dimension} | {spec} | {row.tau_mean:.3f} "
            f"[{row.tau_ci_low:.3f}, {row.tau_ci_high:.3f}] | {row.tau_pooled:.3f} | "
            f"{by_grade} |"
        )
    lines.append(
        f"| {collection.name} / {dimension} | after - before | {mean:+.3f} [{low:+.3f}, "
        f"{high:+.3f}], p {p:.3f} ({paired['queries']} queries) | | |"
    )
    return lines


def outside_answers(collection):
    """The four answer systems of item 5, one answer per query each."""
    import pandas as pd

    rows = []
    first_doc = collection.candidates().groupby("qid")["text"].first()
    for qid, question in zip(collection.topics["qid"], collection.topics["query"], strict=True):
        if qid not in first_doc.index:
            continue
        q = " ".join(str(question).split())
        systems = {
            "question": q,
            "thanks": f"Thank you for asking about {q}. We understand that this matters to you. "
            "Every case is different, so please consult your doctor about it.",
            "restatement": f"You are asking: {q}. This is a common question, and many people "
            "want to know the same thing.",
            "question+300": f"{q} {first_doc[qid][:300]}",
        }
        for llm, text in systems.items():
            rows.append({"answer_id": f"{llm}-{qid}", "llm": llm, "prompt": "", "qid": qid,
                         "sample": 0, "text": text})  # fmt: skip
    return pd.DataFrame(rows)


def outside_rows(collection, before: dict, after: dict) -> list[str]:
    import nrp

    answers = outside_answers(collection)
    lines = []
    for label, rankers in (("before", before), ("after", after)):
        results = nrp.score_answers(collection, answers, rankers)
        weighted = results[results["dimension"] == "weighted"]
        means = weighted.groupby("llm")["nrp"].mean()
        lines.append(
            f"| {collection.name} | {label}: {', '.join(sorted(set(rankers.values())))} | "
            + " | ".join(
                f"{means[s]:.3f}" for s in ("question", "thanks", "restatement", "question+300")
            )
            + " |"
        )
    return lines


def study(collection, args: argparse.Namespace, out: Path) -> tuple[list, list, list, list]:
    import nrp

    before_result = nrp.validate(collection, args.before, validity=False)
    before_result.to_json(out.with_name(f"{collection.name}.before.json"))
    result = nrp.validate(collection, args.after)
    result.to_json(out.with_name(f"{collection.name}.after.json"))
    kinds, agreement, choice = [], [], []
    for dimension, found in result.dimensions.items():
        before = before_result.chosen().get(dimension)
        after = result.chosen().get(dimension)
        choice.append(
            f"| {collection.name} / {dimension} | {before} | {after or 'none passed'} | "
            + "; ".join(f"{n}: {r}" for n, r in (found.choice.passed_over if found.choice else ()))
            + " |"
        )
        for label, spec in (("before", before), ("after", after)):
            if spec is None:
                continue
            summary = found.summary[spec][result.primary]
            kinds.extend(
                kind_rows(collection.name, dimension, f"{label}: {spec}", found.validity[spec])
            )
            choice.append(
                f"| {collection.name} / {dimension} | {label}: nDCG@10 {summary.mean:.4f} "
                f"[{summary.ci_low:.4f}, {summary.ci_high:.4f}] | | |"
            )
        if before and after and before != after:
            agreement.extend(agreement_rows(collection, dimension, before, after))
    outside = []
    if set(result.chosen()) == set(before_result.chosen()):
        outside = outside_rows(collection, before_result.chosen(), result.chosen())
    return kinds, agreement, choice, outside


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    kinds, agreement, choice, outside = [], [], [], []
    for name in args.collections:
        parts = study(load_or_ingest(name, args.indexes), args, args.out)
        kinds += parts[0]
        agreement += parts[1]
        choice += parts[2]
        outside += parts[3]
    text = "\n".join(
        [
            "# Validity before and after",
            "",
            "| collection / dimension | chosen before (nDCG@10 alone) | chosen after | passed "
            "over |",
            "|---|---|---|---|",
            *choice,
            "",
            "| collection / dimension | ranker | kind or family | texts | judged documents above "
            "[95% CI] | mean NRP [95% CI] |",
            "|---|---|---|---|---|---|",
            *kinds,
            "",
            "| collection / dimension | ranker | per-query tau-b [95% CI] | pooled tau-b | mean "
            "leave-one-out NRP by grade |",
            "|---|---|---|---|---|",
            *agreement,
            "",
            "Mean NRP (weighted over dimensions) of answers in wordings no generator has:",
            "",
            "| collection | rankers | the question | thank you ... consult your doctor | you are "
            "asking ... common question | question + 300 characters of a judged document |",
            "|---|---|---|---|---|---|",
            *outside,
            "",
        ]
    )
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0 if np.isfinite(len(kinds)) else 1


if __name__ == "__main__":
    sys.exit(main())
