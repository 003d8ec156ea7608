#!/usr/bin/env python3
"""Ranker benchmark: documents per second and peak memory of each ranker, side by side.

Data: the MEDIQA 2019 test set (manifests/mediqa-2019.yaml, data from ../shared/data beside the
repo), ingested into a temporary indexes folder; when that data is absent, the embedded demo
collection (nrp/data/demo), and the output says so. Every ranker re-ranks each query's D_q
(``Collection.candidates()``) with ``ranker.transform`` called directly: no score cache.

No real monoT5 / duoT5 / ColBERT checkpoint exists offline, so a ``monot5``, ``duot5`` or
``colbert`` spec without ``model=`` runs on a tiny random checkpoint built into a temporary
folder by the test suite's own builders (tests/rankers/tiny_models.py, test_colbert.py). Such
rows are marked ``*``: they measure the code path (tokenising, batching, padding, truncation,
MaxSim, pair building), not a real model's speed. Give ``model=`` (and ``mono_model=`` for
duot5) to measure a real checkpoint, e.g. on a GPU machine.

Each ranker runs in its own process, so its peak memory is its own (the process's RSS high-water
mark; on CUDA also ``torch.cuda.max_memory_allocated``). Model loading (``make_ranker``,
``bind_collection``, loading the weights, first imports of torch / transformers included) is
timed apart from scoring; documents per second are over scoring only.

    .venv/bin/python scripts/bench_rankers.py
    .venv/bin/python scripts/bench_rankers.py --limit-queries 30 --rankers tfidf,dense,monot5
    .venv/bin/python scripts/bench_rankers.py --device cuda --batch 64 \\
        --rankers "monot5:model=/models/monot5-base-msmarco,dense"
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# the measuring code shared by the benchmarks (scripts/benchkit.py); importing it imports nothing
# heavy
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
    ROOT,
    TINY_NOTE,
    child_main,
    complete_specs,
    emit,
    load_ranker,
    machine,
    measured,
    peak_rss_mib,
    ratio,
    run_child,
    sync,
    torch_stats,
)

DEFAULT_MANIFEST = ROOT / "manifests" / "mediqa-2019.yaml"
DEMO_MANIFEST = ROOT / "nrp" / "data" / "demo" / "manifest.yaml"
DEFAULT_RANKERS = "tfidf,dph,bm25,bm25:stats=collection,dense,monot5,duot5,colbert"
SCRIPT = Path(__file__).resolve()


# -- child processes ----------------------------------------------------------------------------
def _prepare(payload: dict) -> None:
    """Ingest the collection, build the tiny checkpoints the specs need, complete the specs."""
    from nrp import ingest
    from nrp.collection.collection import Collection

    source = ""
    try:
        result = ingest(payload["manifest"], indexes_dir=payload["indexes"])
    except Exception as error:  # data absent or unreadable: the demo collection instead
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        source = f"{Path(payload['manifest']).name} not ingested ({first_line[:120]}); "
        source += "FALLBACK: the embedded demo collection"
        result = ingest(str(DEMO_MANIFEST), indexes_dir=payload["indexes"])
    collection = Collection.load(result.name, payload["indexes"])
    frame = collection.candidates()
    qids = frame["qid"].drop_duplicates()
    total_queries, total_docs = len(qids), len(frame)
    if payload["limit_queries"]:
        frame = frame[frame["qid"].isin(set(qids[: payload["limit_queries"]]))]

    models = Path(payload["models"])
    specs = complete_specs(payload["rankers"], models, payload["device"], payload["batch"])
    emit(
        {
            "collection": result.name,
            "source": source,
            "queries": int(frame["qid"].nunique()),
            "docs": len(frame),
            "total_queries": total_queries,
            "total_docs": total_docs,
            "specs": specs,
        }
    )


def _measure(payload: dict) -> None:
    """One ranker: load, then score the frame ``repeat`` times; times, memory and a check."""
    import logging

    import numpy as np

    from nrp.collection.collection import Collection

    # the tiny T5's sentencepiece splits real text into many pieces: every input is cut at the
    # input limit and each call would log it
    logging.disable(logging.WARNING)
    collection = Collection.load(payload["collection"], payload["indexes"])
    frame = collection.candidates()
    if payload["limit_queries"]:
        qids = frame["qid"].drop_duplicates()[: payload["limit_queries"]]
        frame = frame[frame["qid"].isin(set(qids))].reset_index(drop=True)

    ranker, device, load_s = load_ranker(payload["spec"], collection)
    times = []
    for _ in range(payload["repeat"]):
        start = time.perf_counter()
        out = ranker.transform(frame)
        sync(device)
        times.append(time.perf_counter() - start)
    if len(out) != len(frame):
        raise RuntimeError(f"{len(out)} scored rows for {len(frame)} input rows")
    notes = []
    nonfinite = int((~np.isfinite(out["score"].to_numpy(dtype=float))).sum())
    if nonfinite:
        notes.append(f"{nonfinite} non-finite scores")
    if "truncated" in out.columns and out["truncated"].any():
        notes.append(f"{int(out['truncated'].sum())} cut")
    if ranker.params.get("stats") == "collection":
        notes.append("terms stemmed (cached) while loading")
    if "duo_score" in out.columns:
        in_duo = out.loc[out["duo_score"].notna(), "qid"].value_counts()
        notes.append(f"{int((in_duo * (in_duo - 1)).sum()):,} pairs")

    result = {
        "docs": len(frame),
        "load_s": load_s,
        "score_s": min(times),
        "first_score_s": times[0],
        "peak_rss_mib": peak_rss_mib(),
        "device": device,
        "notes": notes,
    }
    emit(result | torch_stats(device))


# -- the parent: no heavy imports, so the children's memory is theirs alone -------------------
def main() -> int:
    if child_main({"--_prepare": _prepare, "--_measure": _measure}):
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rankers",
        default=DEFAULT_RANKERS,
        help=f"comma-separated ranker specs (default: {DEFAULT_RANKERS})",
    )
    parser.add_argument("--limit-queries", type=int, default=0, help="first N queries only")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--batch", type=int, default=0, help="batch size of neural rankers")
    parser.add_argument(
        "--repeat", type=int, default=1, help="score N times, report the fastest (default 1)"
    )
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per ranker")
    args = parser.parse_args()
    if args.repeat < 1 or args.limit_queries < 0 or args.batch < 0:
        parser.error("--repeat must be >= 1, --limit-queries and --batch >= 0")

    with tempfile.TemporaryDirectory(prefix="nrp-bench-rankers-") as tmp:
        indexes, models = Path(tmp) / "indexes", Path(tmp) / "models"
        models.mkdir()
        prep = run_child(
            SCRIPT,
            "--_prepare",
            {
                "manifest": str(args.manifest),
                "indexes": str(indexes),
                "models": str(models),
                "rankers": args.rankers,
                "device": args.device,
                "batch": args.batch,
                "limit_queries": args.limit_queries,
            },
        )
        data = f"{prep['collection']}: {prep['queries']} queries, {prep['docs']:,} documents"
        if prep["queries"] < prep["total_queries"]:
            data += f" (first {prep['queries']} of {prep['total_queries']} queries)"
        print(f"data: {data}")
        if prep["source"]:
            print(f"NOTE: {prep['source']}")
        print(
            f"machine: {machine()}; --device {args.device}"
            + (f", --batch {args.batch}" if args.batch else "")
            + (f", best of {args.repeat}" if args.repeat > 1 else ""),
            flush=True,
        )
        rows = []
        for entry in prep["specs"]:
            label = entry["shown"] + (" *" if entry["tiny"] else "")
            if entry["error"]:
                rows.append((label, {"error": entry["error"]}))
                continue
            payload = {
                "spec": entry["spec"],
                "collection": prep["collection"],
                "indexes": str(indexes),
                "limit_queries": args.limit_queries,
                "repeat": args.repeat,
            }
            try:
                result = run_child(SCRIPT, "--_measure", payload, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                result = {"error": f"timed out after {args.timeout:.0f} s"}
            except RuntimeError as error:
                result = {"error": str(error)}
            rows.append((label, result))
            status = result.get("error") or f"{result['load_s'] + result['score_s']:.1f} s"
            print(f"  measured {label}: {status}", file=sys.stderr, flush=True)
    print_table(rows, any(entry["tiny"] for entry in prep["specs"]), args.repeat)
    return 0 if all("error" not in result for _, result in rows) else 1


def print_table(rows: list[tuple[str, dict]], any_tiny: bool, repeat: int) -> None:
    done = [r for _, r in rows if "error" not in r]
    fastest = max((ratio(r["docs"], r["score_s"]) for r in done), default=0.0)
    gpu = any("peak_gpu_mib" in r for r in done)
    width = max([len(label) for label, _ in rows] + [24])
    header = (
        f"{'ranker':<{width}} {'device':>6} {'docs':>6} {'load s':>7} {'score s':>8} "
        + (f"{'1st s':>7} " if repeat > 1 else "")
        + f"{'docs/s':>9} {'vs fastest':>10} {'peak RSS MiB':>12}"
        + (f" {'peak GPU MiB':>12}" if gpu else "")
        + "  notes"
    )
    print()
    print(header)
    print("-" * len(header))
    for label, r in rows:
        if "error" in r:
            print(f"{label:<{width}} failed: {r['error'][:160]}")
            continue
        rate = ratio(r["docs"], r["score_s"])
        slower = fastest / rate if rate else float("inf")
        line = (
            f"{label:<{width}} {r['device']:>6} {r['docs']:>6,} {r['load_s']:>7.2f} "
            f"{r['score_s']:>8.2f} "
            + (f"{r['first_score_s']:>7.2f} " if repeat > 1 else "")
            + f"{rate:>9,.0f} {slower:>9.1f}x {r['peak_rss_mib']:>12,.0f}"
        )
        if gpu:
            line += f" {r['peak_gpu_mib']:>12,.0f}" if "peak_gpu_mib" in r else f" {'-':>12}"
        print(line + ("  " + "; ".join(r["notes"]) if r["notes"] else ""))
    print()
    if any_tiny:
        print(f"* {TINY_NOTE}")
        print(
            "  (T5: 1 layer, d_model 16, 512 input tokens; ColBERT: 2 layers, hidden 32,\n"
            "  32 query / 64 document tokens; built by tests/rankers/tiny_models.py and\n"
            "  tests/rankers/test_colbert.py)"
        )
    threads = {r["torch_threads"] for r in done if "torch_threads" in r}
    print(
        "load s: make_ranker + bind_collection + loading the model (first imports of torch,\n"
        "  transformers, NLTK included). score s: ranker.transform over every row, no score\n"
        "  cache"
        + (", fastest of the repeats" if repeat > 1 else ", one cold call")
        + "; docs/s = docs / score s. vs fastest: times slower than the fastest.\n"
        "  peak RSS: the process's high-water mark over load and scoring, one process per ranker"
        + (f"; torch threads: {', '.join(map(str, sorted(threads)))}" if threads else "")
    )
    print(measured())


if __name__ == "__main__":
    sys.exit(main())
