"""Choose the guard's ``content`` reward and a graded demotion on MEDIQA train+val, cross-fitted.

    .venv/bin/python scripts/studies/tune_guard_demotion.py --features /tmp/guard-features.pkl

A study (docs/studies/guard-study.md), not a part of nrp. The rule measured: a text the guard does
not floor scores ``ranker + content x log_novel - demote x evidence`` (its evidence: the sum over
the detectors below their thresholds of ``-ln(probability / threshold)``); a floored text scores
below every other. On the fitting questions the packaged guard floors nearly every degenerate text
in-sample (it was fitted there), so nothing could show what the rule does with the texts it lets
through; here every question's texts are judged by detectors fitted without it (``--folds`` folds of
the questions, ``nrp.training.guard_train.fit_detectors``), as the guard judges the questions of
another collection.

For every combination of ``--content`` and ``--demote`` it prints the mean per-question tau-b of
the judged documents' scores with their grades, the worst and mean wins of the fitting kinds
(``tune_guard.fitting_kinds``) and a few kinds of interest. ``choose``: the criterion, fixed
before anything was measured.
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
from tune_guard import (
    FITTING_COLLECTION,
    PACKAGED_FITTING,
    fitting_kinds,
    kind_wins,
    mean_tau,
    scoring_rows,
)

#: tau-b may fall this far below the default's (content 0.06, no demotion); a worst kind's wins
#: within TIE of the best are equal
TOLERANCE = 0.005
TIE = 0.001
DEFAULT = (0.06, 0.0)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--content", type=float, nargs="+", default=[0.0, 0.03, 0.06])
    parser.add_argument("--demote", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3, 0.5])
    parser.add_argument(
        "--scaled", type=float, nargs="*", default=[],
        help="rewards of the scaled form too: content x log_novel x max(ranker's score, 0)",
    )  # fmt: skip
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--features", type=Path, help="the fit's feature table, kept")
    parser.add_argument("--indexes", type=Path, default=ROOT / "indexes")
    return parser.parse_args(argv)


def choose(table: pd.DataFrame) -> pd.Series:
    """The row of a table of form, content, demote, tau_b and worst (the worst fitting kind's wins):
    of the rows whose tau-b is within ``TOLERANCE`` of the default's, the highest ``worst``;
    rows within ``TIE`` of it are equal, and of those the least demotion wins, then the default's
    form of reward (``form``: plain, the reward alone; scaled, the reward in proportion to the
    ranker's score), then the content nearest the default's."""
    plain = table["form"] == "plain"
    base = table[plain & (table["content"] == DEFAULT[0]) & (table["demote"] == DEFAULT[1])]
    base = base.iloc[0]
    kept = table[table["tau_b"] >= base["tau_b"] - TOLERANCE]
    tied = kept[kept["worst"] >= kept["worst"].max() - TIE]
    order = tied.assign(
        distance=(tied["content"] - DEFAULT[0]).abs(),
        other_form=tied["form"] != "plain",
    )
    ranked = order.sort_values(["demote", "other_form", "distance"], kind="stable")
    return ranked.iloc[0].drop(["distance", "other_form"])


def cross_fitted(args: argparse.Namespace, collection):
    """The fitting rows, their features, and each row's evidence, floored flag and least share
    from detectors fitted without its question."""
    from nrp.training.guard_data import fitting_rows
    from nrp.training.guard_settings import GuardTrainSettings
    from nrp.training.guard_train import cross_fitted_rows, fitting_table

    settings = GuardTrainSettings(**PACKAGED_FITTING).checked()
    data = fitting_rows(collection, settings)
    fit = fitting_table(collection, data, settings, data.reference_texts, args.features)
    judged = cross_fitted_rows(fit, args.folds, by_prompt=False)
    evidence, low, share = (judged[c].to_numpy() for c in ("evidence", "floored", "share"))
    return fit.rows, fit.table, evidence, low, share, settings


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    from nrp.rankers.guard import GuardRanker
    from nrp.validation.degenerate import FAMILIES

    collection = load_or_ingest(FITTING_COLLECTION, args.indexes)
    rows, table, evidence, low, share, settings = cross_fitted(args, collection)
    rows, grades, relevant = scoring_rows(rows, collection)
    guard = GuardRanker({})
    guard.bind_collection(collection)
    ranked = np.asarray(guard.ranker_scores(rows[["qid", "query", "docno", "text"]]), dtype=float)
    held = set(FAMILIES[settings.held_out])
    novel = table["log_novel"].to_numpy()
    results = []
    rules = [("plain", c, novel) for c in args.content]
    topical = novel * np.maximum(ranked, 0.0)  # the reward in proportion to the ranker's score
    rules += [("scaled", c, topical) for c in args.scaled]
    for form, content, reward in rules:
        for demote in args.demote:
            scores = ranked + content * reward - demote * evidence
            scores = np.where(low, -1e3 + 500 * np.minimum(share, 1.0), scores)
            per_kind = kind_wins(rows, scores, relevant)
            fitting = fitting_kinds(per_kind.drop("restated_answer"), rows, held)
            results.append(
                {"form": form, "content": content, "demote": demote,
                 "tau_b": mean_tau(rows, scores, grades),
                 "worst": float(fitting.min()), "worst_kind": fitting.idxmin(),
                 "mean": float(fitting.mean()), **{k: float(per_kind[k]) for k in
                 ("shuffled", "other_best", "restated_answer")}}
            )  # fmt: skip
    table = pd.DataFrame(results)
    print(table.round(4).to_string(index=False))
    chosen = choose(table)
    print(f"chosen: {chosen['form']} content={chosen['content']:g} demote={chosen['demote']:g} "
          f"(tau-b {chosen['tau_b']:.4f}, worst fitting kind {chosen['worst']:.4f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
