#!/usr/bin/env python3
"""Ray executor benchmark: local vs Ray wall time and per-worker throughput on the same input.

For each ranker the same answers are positioned three ways, each on a fresh copy of the
collection (empty score and results caches), and the NRP tables are compared:

- **local**: ``score_answers`` in this process, the default path of ``nrp score``;
- **local executor**: ``LocalExecutor``, the partition protocol a Ray actor runs, in this
  process: the cost of partitioning, of the worker-local score cache and of the driver writing
  every partition;
- **ray**: ``RayExecutor`` on a Ray instance started on this machine (``--ray-cpus`` CPUs, one
  actor per CPU), or on ``--ray-address``. Ray's start and the actors' start are timed apart
  (the pool is warmed before the timed runs). Each ranker is run once untimed on 64 answers
  first, here and on the actors, so imports and lazy set-up (a stemmer, a model, the actor's
  state: collection, ranker, D_q) are not charged to the first mode; ``setup`` shows what a
  timed run still spent building worker state.

Printed per ranker and mode: whether the table is identical to the local one (``yes``: every
column exactly; ``r``: r, ties and NRP exactly and scores within the fp32 tie tolerance, 1e-5
relative, since a neural score moves by ~1e-7 with its batch and the worker's thread count),
wall time, answers/s, partitions, and per worker the answers and answers/s over the time the
worker spent computing (busy time: without Ray's transport and the driver's writes). On a
2-core machine expect no gain: Ray adds processes that compete for the same cores; the point is
that the results are the same and the path to a cluster is the same code.

Generation (``--generate N``, default 6; 0 skips it): SmolLM2-135M-Instruct (the offline
GGUF) answers the first N topics under the short-qa prompt, ``--samples`` each, at most
``--new-tokens`` tokens, in this process and on the actors (partitions of whole batches of the
local run); printed: whether every answer's text is the local one, wall time, answers/s, and
per worker the answers and answers/s busy (the model's load is the actor's setup, shown apart).

Data: MEDIQA 2019 (manifests/mediqa-2019.yaml, ../shared/data beside the repo: 150 questions,
1,107 judged answers as D_q), ingested into a temporary indexes folder. Answers: MEDIQA has no
generated answers, so each topic gets the first ``--per-query`` documents of the next topic (cut
to 1,500 characters) and one short text of our own; ``--answers FILE`` ranks any answer file
``nrp.answers.read_answers`` reads instead.

    .venv/bin/python scripts/bench_ray.py
    .venv/bin/python scripts/bench_ray.py --rankers dense --limit-queries 30
    .venv/bin/python scripts/bench_ray.py --ray-address 10.0.0.5:6379
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pandas as pd

from nrp import Collection, ingest
from nrp.executors import LocalExecutor, RayExecutor
from nrp.positioning.scoring import score_answers

# the measuring code shared by the benchmarks (scripts/benchkit.py)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import ROOT, machine, ratio

MANIFEST = ROOT / "manifests" / "mediqa-2019.yaml"
MODES = ("local", "local executor", "ray")


def build_answers(collection: Collection, per_query: int, cut: int = 1500) -> pd.DataFrame:
    candidates = collection.candidates()
    qids = list(dict.fromkeys(candidates["qid"].astype(str)))
    rows = []
    for i, qid in enumerate(qids):
        other = candidates[candidates["qid"].astype(str) == qids[(i + 1) % len(qids)]]
        for j, text in enumerate(other["text"].head(per_query)):
            rows.append((f"{qid}/other/{j}", "other-docs", "p", qid, j, str(text)[:cut]))
        rows.append((f"{qid}/short", "short", "p", qid, 0, "Ask your doctor about the treatment."))
    return pd.DataFrame(rows, columns=["answer_id", "llm", "prompt", "qid", "sample", "text"])


def fresh_copy(collection: Collection, folder: Path) -> Collection:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(collection.path / "collection.sqlite", folder / "collection.sqlite")
    return Collection(folder)


def compare(table: pd.DataFrame, local: pd.DataFrame) -> str:
    """ "yes": every column identical; "r": r, ties and NRP identical and scores within the tie
    tolerance (neural rankers: a score moves by ~1e-7 with its batch and thread count); "NO"."""
    try:
        pd.testing.assert_frame_equal(table, local)
        return "yes"
    except AssertionError:
        pass
    exact = ["answer_id", "dimension", "rank", "ties", "n_docs", "nrp"]
    try:
        pd.testing.assert_frame_equal(table[exact], local[exact])
    except AssertionError:
        return "NO"
    found, want = table["score"].to_numpy(float), local["score"].to_numpy(float)
    both = ~(np.isnan(found) | np.isnan(want))
    relative = np.abs(found[both] - want[both]) / np.maximum(1.0, np.abs(want[both]))
    return "r" if (np.isnan(found) == np.isnan(want)).all() and (relative <= 1e-5).all() else "NO"


def workers_line(stats) -> str:
    if stats is None:
        return "this process"
    return "; ".join(
        f"{name}: {w.items} at {w.items_per_second:,.0f}/s (setup {w.setup_seconds:.1f} s)"
        for name, w in sorted(stats.workers.items())
    )


def bench_generation(collection: Collection, ray_executor, args, work: Path) -> None:
    from nrp.generation import generate_answers
    from nrp.llm.backends import GenerationOptions

    topics = collection.topics.head(args.generate)
    options = GenerationOptions(
        max_new_tokens=args.new_tokens, temperature=0.75, top_k=50, top_p=0.95,
        repetition_penalty=1.2, seed=0,
    )  # fmt: skip
    llm = "local:name=smollm2,device=cpu,batch=4"
    answers = len(topics) * args.samples
    print(f"generation: SmolLM2-135M-Instruct, {len(topics)} topics x short-qa x "
          f"{args.samples} samples = {answers} answers, at most {args.new_tokens} new tokens, "
          "batches of 4")  # fmt: skip
    header = f"{'mode':<10} {'same':<5} {'wall s':>7} {'answers/s':>10} {'parts':>5}  per worker"
    print(header)
    print("-" * len(header))
    texts = {}
    for mode, executor in (("local", None), ("ray", ray_executor)):
        started = time.perf_counter()
        found = generate_answers(
            topics, llm, ["short-qa"], args.samples, options, work / "gen" / f"{mode}.jsonl",
            executor=executor,
        )  # fmt: skip
        wall = time.perf_counter() - started
        texts[mode] = dict(zip(found["answer_id"], found["text"], strict=True))
        same = "-" if mode == "local" else ("yes" if texts[mode] == texts["local"] else "NO")
        stats = executor.stats if executor is not None else None
        parts = stats.partitions if stats is not None else "-"
        print(f"{mode:<10} {same:<5} {wall:>7.2f} {ratio(answers, wall):>10,.2f} {parts!s:>5}  "
              f"{workers_line(stats)}")  # fmt: skip
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rankers", default="tfidf,bm25", help="comma-separated specs")
    parser.add_argument("--answers", type=Path, help="answer file (default: built from MEDIQA)")
    parser.add_argument("--per-query", type=int, default=3, help="other-topic docs per topic")
    parser.add_argument("--chunk-size", type=int, default=32, help="answers per partition")
    parser.add_argument("--limit-queries", type=int, help="answers of the first N topics only")
    parser.add_argument("--ray-address", help="Ray cluster (default: start Ray here)")
    parser.add_argument(
        "--ray-cpus", type=int, default=os.cpu_count() or 1, help="actors when Ray starts here"
    )
    parser.add_argument("--generate", type=int, default=6, help="topics to generate for (0: skip)")
    parser.add_argument("--samples", type=int, default=2, help="answers per topic")
    parser.add_argument("--new-tokens", type=int, default=32, help="new tokens per answer")
    args = parser.parse_args()
    if not (ROOT.parent / "shared" / "data" / "mediqa-2019").exists():
        print("MEDIQA 2019 not found in ../shared/data: nothing to benchmark", file=sys.stderr)
        return 1

    work = Path(tempfile.mkdtemp(prefix="nrp-bench-ray-"))
    try:
        ingest(MANIFEST, indexes_dir=work / "indexes")
        collection = Collection.load("mediqa-2019", work / "indexes")
        if args.answers:
            from nrp.answers import read_answers

            answers = read_answers(args.answers, collection).answers
        else:
            answers = build_answers(collection, args.per_query)
        if args.limit_queries:
            keep = list(dict.fromkeys(answers["qid"].astype(str)))[: args.limit_queries]
            answers = answers[answers["qid"].astype(str).isin(keep)].reset_index(drop=True)
        specs = [s.strip() for s in args.rankers.split(",") if s.strip()]

        started = time.perf_counter()
        ray_executor = RayExecutor(args.ray_address, actors=args.ray_cpus)
        workers = ray_executor.start()
        ray_start = time.perf_counter() - started
        print(f"machine: {machine()}; {ray_executor.describe()}: {len(workers)} "
              f"actor(s) ready in {ray_start:.1f} s (Ray start + actor start)")  # fmt: skip
        print(f"input: MEDIQA 2019, {len(answers):,} answers over "
              f"{answers['qid'].nunique()} queries; partitions of up to {args.chunk_size} "
              "answers (whole queries)\n")  # fmt: skip

        header = f"{'ranker':<10} {'mode':<15} {'same':<5} {'wall s':>7} {'answers/s':>10} "
        header += f"{'parts':>5}  per worker (answers, answers/s busy)"
        print(header)
        print("-" * len(header))
        for spec in specs:
            # untimed, here and on the actors: imports and lazy set-up (stemmer, model load) are
            # not charged to the first mode that runs
            for warm in (None, ray_executor):
                warm_copy = fresh_copy(collection, work / "warm" / spec.replace(":", "_"))
                score_answers(warm_copy, answers.head(64), spec, executor=warm, chunk_size=8)
                shutil.rmtree(warm_copy.path)
            tables: dict[str, pd.DataFrame] = {}
            for mode in MODES:
                copy = fresh_copy(collection, work / "runs" / spec.replace(":", "_") / mode)
                executor = {"local": None, "local executor": LocalExecutor(),
                            "ray": ray_executor}[mode]  # fmt: skip
                started = time.perf_counter()
                table = score_answers(
                    copy, answers, spec, executor=executor, chunk_size=args.chunk_size
                )
                wall = time.perf_counter() - started
                tables[mode] = table
                same = "-" if mode == "local" else compare(table, tables["local"])
                stats = executor.stats if executor is not None else None
                parts = stats.partitions if stats is not None else "-"
                rate = ratio(len(answers), wall)
                print(f"{spec:<10} {mode:<15} {same:<5} {wall:>7.2f} {rate:>10,.0f} "
                      f"{parts!s:>5}  {workers_line(stats)}")  # fmt: skip
            print()
        if args.generate > 0:
            bench_generation(collection, ray_executor, args, work)
        ray_executor.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
