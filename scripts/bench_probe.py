#!/usr/bin/env python3
"""Whole ``nrp probe`` commands as a user runs them, beside their goals (issue 28, goal 2).

Each run is one whole ``nrp probe NAME ANSWERS --evaluators SPECS --out DIR`` process (start,
reading the answers, the judged documents' named entities, the perturbations, the evaluators,
the bootstrap, the tables and the figure), timed from the parent with its peak RSS
(``benchkit.timed_process``), on answers generated from MEDIQA 2019 as ``bench_score.py``
makes them (``benchkit.write_answers``):

- **30 answers, BLEU, cold**: a collection store just built (no ``entities.json``, no
  evaluation cache): spaCy's NER runs over the judged documents of the 30 probed queries.
  Goal: under 10 s.
- **30 answers, BLEU, warm**: the same command again (entities read back; ``--no-cache``, so
  the scores are computed again).
- **1,000 answers, BLEU, ROUGE and NRP tfidf, cold**: all 150 queries, 1,107 documents through
  NER. Goal: under 120 s.

    .venv/bin/python scripts/bench_probe.py
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
    MEDIQA_MANIFEST,
    checkout_env,
    child_main,
    emit,
    machine,
    on_mediqa,
    run_child,
    timed_process,
    write_answers,
)

SCRIPT = Path(__file__).resolve()
#: (label, answers, evaluators, a fresh collection store, goal in seconds or None)
RUNS = (
    ("30 answers, bleu, cold", 30, "bleu", True, 10.0),
    ("30 answers, bleu, warm", 30, "bleu", False, None),
    ("1,000 answers, bleu,rouge,nrp tfidf, cold", 1000, "bleu,rouge,nrp:rankers=tfidf", True, 120),
)


def _prepare(payload: dict) -> None:
    """Ingest MEDIQA 2019 and write the two answer sets (JSON Lines)."""
    from nrp.api import Collection, ingest

    result = ingest(MEDIQA_MANIFEST, indexes_dir=payload["indexes"])
    collection = Collection.load(result.name, payload["indexes"])
    for count in {count for _, count, *_ in RUNS}:
        write_answers(collection, Path(payload["work"]) / f"answers-{count}.jsonl", count)
    emit({"collection": result.name})


def main() -> int:
    if child_main({"--_prepare": _prepare}):
        return 0
    return on_mediqa("nrp-bench-probe-", _run, "2 CPU cores; a whole process each")


def _run(work: Path) -> None:
    built = work / "built"
    name = run_child(SCRIPT, "--_prepare", {"indexes": str(built), "work": str(work)})["collection"]
    store = work / "indexes"
    env = checkout_env()
    print(f"machine: {machine()}; nrp probe on MEDIQA 2019 answers, whole processes\n")
    header = f"{'nrp probe':<44} {'s':>7} {'goal s':>7} {'met':>4} {'peak MB':>8}"
    print(header)
    print("-" * len(header))
    for number, (label, count, evaluators, fresh, goal) in enumerate(RUNS):
        if fresh:  # the collection as just built: no entities.json, no evaluation cache
            shutil.rmtree(store, ignore_errors=True)
            shutil.copytree(built, store)
            for leftover in store.rglob("*"):
                if leftover.name in {"entities.json", "evaluations.sqlite"}:
                    leftover.unlink()
        out = work / f"out-{number}"
        command = [sys.executable, "-m", "nrp", "-q", "probe", name,
                   str(work / f"answers-{count}.jsonl"), "--evaluators", evaluators,
                   "--indexes", str(store), "--out", str(out), "--no-cache"]  # fmt: skip
        seconds, peak, status = timed_process(command, env)
        if status:
            print(f"{label:<44} failed (exit {status})")
            continue
        met = "" if goal is None else ("yes" if seconds < goal else "no")
        shown = "" if goal is None else f"{goal:.0f}"
        print(f"{label:<44} {seconds:7.1f} {shown:>7} {met:>4} {peak:8.0f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
