#!/usr/bin/env python3
"""Choose ``nrp train``'s defaults on a tuning collection, never on an evaluated one.

The defaults of ``nrp train`` (learning rate, epochs, trained layers) are chosen here, on the MEDIQA
2019 training and validation sets (``manifests/mediqa-2019-train.yaml``): labelled data that no
figure of the study (``scripts/studies/trained_rankers_study.py``) evaluates on, so choosing on it
leaks nothing into those figures. For each learning rate and number of trained layers, the first
``--models`` fold models of ``--folds`` query-disjoint folds are trained for ``--epochs`` epochs
(the schedule of an ``--epochs`` run), and after every epoch each model's held-out queries are
scored: held-out RankNet loss and nDCG@10 (mean over the held-out queries of all trained fold
models) per (setting, epoch). The frozen bottom layers' features are computed once per number of
trained layers and shared by every learning rate.

    .venv/bin/python scripts/studies/tune_training.py --out runs/tune --lr 2e-4 1e-3 --epochs 4

Prints a markdown table (and writes it to OUT/tuning.md, the rows to OUT/tuning.csv), the best
setting marked; wall time per setting beside it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchkit, beside the benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other studies
from benchkit import ROOT, machine

from nrp import api
from nrp.collection.collection import Collection
from nrp.errors import NrpError
from nrp.tables import write_text
from nrp.training.data import gather
from nrp.training.fit import fit, held_out_loss
from nrp.training.model import resolve_base
from nrp.training.settings import TrainSettings
from nrp.training.train import TrainingRun, training_kind

PROG = "tune_training"
MANIFEST = ROOT / "manifests" / "mediqa-2019-train.yaml"
CUTOFF = 10


def ndcg_at(gains: np.ndarray, scores: np.ndarray, k: int = CUTOFF) -> float:
    """nDCG@k with linear gains (trec_eval's, as ``nrp validate`` reports it); ties broken by
    position (the scores of a trained model have none in practice)."""
    order = np.argsort(-scores, kind="stable")[:k]
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = float((gains[order] * discounts[: len(order)]).sum())
    ideal = np.sort(gains)[::-1][:k]
    idcg = float((ideal * discounts[: len(ideal)]).sum())
    return dcg / idcg if idcg > 0 else float("nan")


def held_out_ndcg(model: Any, features: Any, run: TrainingRun, plan: Any) -> list[float]:
    """nDCG@10 of each held-out query of ``plan`` under ``model`` (queries with one grade have
    none)."""
    import torch

    values = []
    model.eval()
    with torch.inference_mode():
        for key in sorted(plan.held_out):
            indices = list(plan.held_out[key])
            scores = features.scores(model, indices).float().cpu().numpy()
            gains = run.arrays.gains[indices].astype(float)
            if len(np.unique(gains)) > 1:
                values.append(ndcg_at(gains, scores))
    return values


def tune(args: argparse.Namespace) -> pd.DataFrame:
    """Every setting's rows; the table is written after each setting, so a long run shows its
    figures as they come."""
    indexes = args.out / "indexes"
    built = api.ingest(args.manifest, indexes_dir=indexes)
    collection = Collection.load(built.name, indexes)
    data = gather(collection, args.dimension, [], [], args.folds, args.seed, "query")
    base = resolve_base(args.base)
    rows = []
    for layers in args.train_layers:
        probe = TrainSettings(
            ranker=args.ranker, train_layers=layers, folds=args.folds, seed=args.seed
        ).checked()
        run = TrainingRun(data, base, "cpu", probe, None)
        kind = training_kind(args.ranker, base, "cpu")
        model = kind.fresh(args.seed)
        features, _, limit = kind.features(data.examples, args.max_length, layers)
        plans = run.plans()[: args.models]
        groups = [g for plan in plans for g in (plan.train, plan.held_out)]
        used = sorted({i for g in groups for v in g.values() for i in v})
        started = time.perf_counter()
        features.compute(model, used, 16)
        print(
            f"layers {layers}: features of {len(used)} pairs in "
            f"{time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
        for lr in args.lr:
            settings = TrainSettings(
                ranker=args.ranker,
                epochs=args.epochs,
                lr=lr,
                train_layers=layers,
                folds=args.folds,
                seed=args.seed,
                max_length=limit,
                verbose=False,
            ).checked()
            rows += tune_setting(run, kind, features, plans, settings)
            write_tables(pd.DataFrame(rows), args)
    return pd.DataFrame(rows)


def tune_setting(
    run: TrainingRun, kind: Any, features: Any, plans: Sequence[Any], settings: TrainSettings
) -> list[dict[str, Any]]:
    per_epoch: dict[int, dict[str, list[float]]] = {}
    started = time.perf_counter()
    for plan in plans:
        model = kind.fresh(settings.seed)
        epoch = [0]

        def report(line: str, model: Any = model, plan: Any = plan, epoch: list = epoch) -> None:
            epoch[0] += 1
            entry = per_epoch.setdefault(epoch[0], {"ndcg": [], "loss": []})
            ndcg = held_out_ndcg(model, features, run, plan)
            entry["ndcg"] += ndcg
            loss = held_out_loss(model, features, run.arrays, plan, settings.batch)
            entry["loss"].append(float(loss))
            model.train()
            print(
                f"lr {settings.lr:g}, layers {settings.train_layers}: {line}; held-out nDCG@10 "
                f"{np.nanmean(ndcg):.4f} ({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
            )

        fit(model, features, run.arrays, plan, settings, report)
    seconds = time.perf_counter() - started
    return [
        {
            "ranker": settings.ranker,
            "train_layers": settings.train_layers,
            "lr": settings.lr,
            "epoch": epoch,
            "held_out_loss": float(np.mean(values["loss"])),
            "held_out_ndcg10": float(np.nanmean(values["ndcg"])),
            "held_out_queries": len(values["ndcg"]),
            "seconds_all_epochs": round(seconds, 1),
        }
        for epoch, values in sorted(per_epoch.items())
    ]


def markdown(frame: pd.DataFrame, args: argparse.Namespace) -> str:
    best = frame["held_out_ndcg10"].idxmax()
    lines = [
        f"# Tuning nrp train on {args.manifest.name} / {args.dimension}",
        "",
        f"ranker {args.ranker}, {args.models} of {args.folds} fold models, seed {args.seed}, "
        f"max length "
        f"{args.max_length}, base {args.base}; {machine()}",
        "",
        "| train layers | lr | epoch | held-out loss | held-out nDCG@10 | queries "
        "| s (all epochs) |",
        "|---|---|---|---|---|---|---|",
    ]
    for index, row in frame.iterrows():
        mark = " **best**" if index == best else ""
        lines.append(
            f"| {int(row.train_layers)} | {row.lr:g} | {int(row.epoch)} | "
            f"{row.held_out_loss:.4f} | {row.held_out_ndcg10:.4f}{mark} | "
            f"{int(row.held_out_queries)} | "
            f"{row.seconds_all_epochs} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--dimension", default="relevance")
    parser.add_argument("--ranker", default="cross", help="cross or dense (nrp train --ranker)")
    parser.add_argument("--base", default="minilm")
    parser.add_argument("--lr", type=float, nargs="+", default=[2e-4])
    parser.add_argument("--train-layers", type=int, nargs="+", default=[1])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--models", type=int, default=2, help="fold models trained per setting")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-length", type=int, default=256)
    args = parser.parse_args(argv)
    try:
        frame = tune(args)
    except NrpError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    print(write_tables(frame, args), end="")
    return 0


def write_tables(frame: pd.DataFrame, args: argparse.Namespace) -> str:
    """OUT/tuning.md (returned) and OUT/tuning.csv."""
    text = markdown(frame, args)
    write_text(args.out / "tuning.md", text)
    frame.to_csv(args.out / "tuning.csv", index=False)
    return text


if __name__ == "__main__":
    sys.exit(main())
