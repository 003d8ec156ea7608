#!/usr/bin/env python3
"""Training benchmark: ``nrp train`` on one dimension of the LiveQA-Med pool, timed.

Data: the TREC 2017 LiveQA medical questions and their 2,311 judged MedQuAD answers
(manifests/liveqa-med-2017.yaml, data from ../shared/data beside the repo), ingested into a
temporary indexes folder; dimension ``relevance``; 5 query-disjoint folds plus the all-queries
model, the default settings of ``nrp train`` (base: the packaged all-MiniLM-L6-v2). The limit
the issue sets, beside the figures: the whole run within 15 minutes on 2 CPU cores.

Printed: training pairs per second ((query, document) pairs through training steps, all models
and epochs, per second of training), wall time (model loading, frozen features, training and
saving), peak memory (the child process's RSS high-water mark; on CUDA also the peak GPU
memory). Training runs in a child process of its own, so the peak is its own.

``--max-steps N`` stops every model after N steps: a check that the run works, and a projection
of the full run's time from its rate (frozen features + planned pairs / pairs per second + the
held-out loss once per epoch + the rest as measured).

    .venv/bin/python scripts/bench_train.py                  # the full run (15-minute limit)
    .venv/bin/python scripts/bench_train.py --max-steps 2    # a quick check and a projection
    .venv/bin/python scripts/bench_train.py --device cuda
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

# the measuring code shared by the benchmarks (scripts/benchkit.py); importing it imports nothing
# heavy
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import ROOT, child_main, emit, machine, measured, peak_rss_mib, run_child, torch_stats

DEFAULT_MANIFEST = ROOT / "manifests" / "liveqa-med-2017.yaml"
LIMIT_SECONDS = 15 * 60
LIMIT = "15 minutes on 2 CPU cores"
SCRIPT = Path(__file__).resolve()


def train_child(payload: dict) -> None:
    """In the child: ingest, train, report."""
    sys.path.insert(0, str(ROOT))
    import torch

    from nrp import api

    if payload["threads"]:
        torch.set_num_threads(payload["threads"])
    root = Path(payload["root"])
    built = api.ingest(payload["manifest"], indexes_dir=root / "indexes")
    start = time.perf_counter()
    result = api.train_ranker(
        built.name,
        payload["dimension"],
        root / "trained",
        indexes_dir=root / "indexes",
        verbose=False,
        **payload["settings"],
    )
    wall = time.perf_counter() - start
    device = result.record["environment"]["device"]
    emit(
        {
            "collection": built.name,
            "pairs": result.record["data"]["pairs"],
            "queries": result.record["data"]["queries"],
            "folds": result.record["folds"]["k"],
            "hyper": result.record["hyper_parameters"],
            "ranker": result.record["ranker"],
            "device": device,
            "wall": wall,
            "features": result.feature_seconds,
            "training": result.training_seconds,
            "held_out": result.held_out_seconds,
            "trained": result.documents_trained,
            "planned": result.documents_planned,
            "rate": result.pairs_per_second,
            "peak_rss_mib": peak_rss_mib(),
            **torch_stats(device),
        }
    )


def projected(result: dict) -> float:
    """The full run's wall time from a shortened one (each model cut within its first epoch):
    the same frozen features and loading, training at the measured rate, the held-out loss
    once per epoch instead of once."""
    held_out = result["held_out"] * result["hyper"]["epochs"]
    other = result["wall"] - result["features"] - result["training"] - result["held_out"]
    return result["features"] + other + held_out + result["planned"] / max(result["rate"], 1e-9)


def report(result: dict, limited: bool) -> str:
    hyper = result["hyper"]
    lines = [
        f"nrp train {result['collection']} (relevance, --ranker {result['ranker']}): "
        f"{result['pairs']} judged pairs, "
        f"{result['queries']} queries, {result['folds']} folds + all; epochs {hyper['epochs']}, "
        f"batch {hyper['batch']}, max_length {hyper['max_length']}, train_layers "
        f"{hyper['train_layers']}, device {result['device']}",
        f"  training pairs/s   {result['rate']:10.1f}",
        f"  wall time          {result['wall']:10.1f} s  (frozen features "
        f"{result['features']:.1f} s, training {result['training']:.1f} s, held-out loss "
        f"{result['held_out']:.1f} s)   limit: {LIMIT}",
        f"  peak memory        {result['peak_rss_mib']:10.0f} MiB RSS"
        + (f", {result['peak_gpu_mib']:.0f} MiB GPU" if "peak_gpu_mib" in result else ""),
    ]
    if limited:
        full = projected(result)
        verdict = "within" if full <= LIMIT_SECONDS else "OVER"
        lines.append(
            f"  shortened run: {result['trained']} of {result['planned']} planned pairs; the full "
            f"run projects to {full:.0f} s ({verdict} the limit on this machine)"
        )
    else:
        verdict = "within" if result["wall"] <= LIMIT_SECONDS else "OVER"
        lines.append(f"  {verdict} the limit ({LIMIT_SECONDS} s) on this machine")
    lines.append(f"{machine()}, torch threads {result.get('torch_threads', '?')}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--dimension", default="relevance")
    parser.add_argument("--ranker", default="cross", help="cross (default) or dense")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")
    parser.add_argument("--max-steps", type=int, default=0, help="steps per model (0: all)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's)")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--train-layers", type=int)
    parser.add_argument("--max-length", type=int)
    parser.add_argument("--batch", type=int)
    args = parser.parse_args()
    if not args.manifest.exists():
        print(f"no manifest {args.manifest}", file=sys.stderr)
        return 2
    settings = {"ranker": args.ranker, "device": args.device, "max_steps": args.max_steps}
    for name in ("epochs", "train_layers", "max_length", "batch"):
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    with tempfile.TemporaryDirectory(prefix="nrp-bench-train-") as root:
        payload = {
            "root": root,
            "manifest": str(args.manifest),
            "dimension": args.dimension,
            "threads": args.threads,
            "settings": settings,
        }
        result = run_child(SCRIPT, "train", payload)
    print(report(result, limited=args.max_steps > 0))
    print(measured())
    return 0


if __name__ == "__main__":
    if not child_main({"train": train_child}):
        sys.exit(main())
