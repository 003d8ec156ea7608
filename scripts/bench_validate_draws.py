#!/usr/bin/env python3
"""What drawing other queries' best documents costs validation when queries share them, in one run.

Validation ranks, for every query, the best judged documents of five other queries
(``other_best``, ``--validity-other-draws``; ``nrp.validation.degenerate.query_materials``). Pools
share documents, and where the other queries' best documents are a few shared ones there are
fewer than five texts to find. Until 2026-11-29 the draw then tried every other query before it
gave up (a coupon collector's n log n draws per query, quadratic in a collection's queries); it
now stops once no text is left. Measured on synthetic collections of ``--queries`` queries (two
judged documents each, both relevant), in two shapes:

- **distinct**: every query's best document is its own;
- **shared**: every query's best document is one of two shared ones (the other is its own).

For each: the whole ``nrp validate NAME --rankers tfidf --validity-kinds off_topic`` (start to
exit, peak RSS; ``off_topic`` alone, so that ranking the other kinds' texts, the same in both
shapes, does not hide the draw; on a fresh copy of the ingested folder each run, ``--rounds``
runs, the fastest shown), and the inner call, ``validity_texts`` (the texts validation ranks), in
a child of its own. With ``--before DIR`` both also run from that source tree, in the same run,
and the script says whether the two trees' validation.json give the same figures.

The goal: ``validity_texts`` linear in queries in both shapes, a log-log slope of at most 1.2
(the draw before the fix: 2.0 where best documents are shared). Printed beside it: a shared
collection's whole ``nrp validate`` against a distinct one's of the same size (sharing leaves
fewer texts to rank, so it should cost less), and with ``--before`` each whole run against the
same from that tree.

    .venv/bin/python scripts/bench_validate_draws.py
    git worktree add ../before 6826f25 && \\
        .venv/bin/python scripts/bench_validate_draws.py --before ../before
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
    before_option,
    checkout_env,
    child_main,
    emit,
    loglog_slope,
    machine,
    measured,
    ratio,
    run_child,
    timed_process,
    write_table_collection,
)

SHAPES = ("distinct", "shared")
SLOPE_GOAL = 1.2
VALIDATE = ["validate", "--rankers", "tfidf", "--validity-kinds", "off_topic"]


def _collection(folder: Path, shape: str, queries: int) -> Path:
    """The manifest of a synthetic collection of ``shape`` with ``queries`` queries."""
    shared = (
        "Rest, fluids and time help most people recover within a week.",
        "A doctor can prescribe medication when the symptoms persist.",
    )
    topics = [(f"q{i:05d}", f"What helps with condition {i}?") for i in range(queries)]
    documents = []
    for i, (qid, _) in enumerate(topics):
        if shape == "shared":  # "a-" sorts first: the best of two documents of one grade
            documents.append((qid, f"a-shared-{i % 2}", shared[i % 2]))
        else:
            documents.append((qid, f"a-{i:05d}", f"Treatment {i} is rest and medicine {i}."))
        documents.append((qid, f"d-{i:05d}", f"Condition {i} improves with follow up {i}."))
    name = f"{shape}-{queries}"
    return write_table_collection(folder / name, name, "bench_validate_draws", topics, documents)


def _texts(payload: dict) -> None:
    """Child: ``validity_texts`` of the collection, timed."""
    import nrp
    from nrp.validation.settings import ValidationSettings
    from nrp.validation.validate import validity_texts

    collection = nrp.Collection.load(payload["name"], payload["indexes"])
    settings = ValidationSettings(validity_kinds="off_topic").checked(collection)
    candidates = collection.candidates()
    started = time.perf_counter()
    texts = validity_texts(collection, candidates, settings)
    emit({"seconds": time.perf_counter() - started, "texts": len(texts)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", default="1000,2000,4000", help="collection sizes")
    parser.add_argument("--rounds", type=int, default=2, help="whole runs each; the fastest shown")
    parser.add_argument("--timeout", type=float, default=1800, help="per child, seconds")
    before_option(parser, "nrp validate and validity_texts from that source tree")
    args = parser.parse_args()
    trees = [("", checkout_env())]
    if args.before:
        trees.append((" (before)", {**trees[0][1], "PYTHONPATH": str(args.before.resolve())}))
    work = Path(tempfile.mkdtemp(prefix="nrp-bench-draws-"))
    try:
        _run(args, trees, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(measured(f"{machine()}; whole runs: the fastest of {args.rounds}"))
    return 0


def _run(args: argparse.Namespace, trees: list[tuple[str, dict]], work: Path) -> None:
    sizes = [int(n) for n in args.queries.split(",")]
    print("queries  shape     tree       nrp validate  peak RSS   validity_texts   texts")
    whole: dict[tuple[int, str, str], float] = {}
    inner: dict[tuple[int, str, str], float] = {}
    for queries in sizes:
        for shape in SHAPES:
            manifest = _collection(work / "data", shape, queries)
            ingested = work / f"ingested-{shape}-{queries}"
            command = [sys.executable, "-m", "nrp", "ingest", str(manifest), "--indexes"]
            if timed_process([*command, str(ingested)], trees[0][1])[2]:
                raise SystemExit(f"ingesting {manifest} failed")
            figures = []
            for label, env in trees:
                name = f"{shape}-{queries}"
                seconds, rss, output = _validate(
                    args.rounds, name, ingested, work / (label.strip(" ()") or "this"), env
                )
                child = run_child(
                    __file__, "texts", {"name": name, "indexes": str(ingested)},
                    timeout=args.timeout, env=env,
                )  # fmt: skip
                whole[queries, shape, label] = seconds
                inner[queries, shape, label] = child["seconds"]
                figures.append(json.loads(output.read_text())["dimensions"])
                print(f"{queries:7,}  {shape:8}  {'before' if label else 'this':9}  "
                      f"{seconds:10.1f} s  {rss:6.0f} MB  {child['seconds']:12.2f} s  "
                      f"{child['texts']:6,}")  # fmt: skip
            if len(figures) > 1:
                same = "the same" if figures[0] == figures[1] else "DIFFERENT"
                print(f"{'':7}  {shape:8}  validation.json's figures of the two trees: {same}")
    _summary(sizes, trees, whole, inner)


def _validate(
    rounds: int, name: str, ingested: Path, work: Path, env: dict
) -> tuple[float, float, Path]:
    """The fastest of ``rounds`` whole ``nrp validate`` runs of ``name``, each on a fresh copy
    of ``ingested``: (seconds, peak RSS in MB, its validation.json)."""
    runs = []
    for round_ in range(rounds):
        copy = work / f"{name}-{round_}"
        shutil.copytree(ingested, copy)
        seconds, rss, status = timed_process(
            [sys.executable, "-m", "nrp", *VALIDATE, name, "--indexes", str(copy)], env
        )
        if status:
            raise SystemExit(f"nrp validate {name} exited {status}")
        runs.append((seconds, rss, copy / name / "validation.json"))
    return min(runs)


def _summary(
    sizes: list[int], trees: list[tuple[str, dict]],
    whole: dict[tuple[int, str, str], float], inner: dict[tuple[int, str, str], float],
) -> None:  # fmt: skip
    print()
    for label, _ in trees:
        tree = "before" if label else "this tree"
        for queries in sizes:
            share = ratio(whole[queries, "shared", label], whole[queries, "distinct", label])
            print(
                f"{tree}, {queries:,} queries: whole nrp validate, shared / distinct {share:.2f}x"
            )
        for shape in SHAPES:
            slope = loglog_slope([(n, inner[n, shape, label]) for n in sizes])
            verdict = "met" if slope <= SLOPE_GOAL else "NOT met"
            print(f"{tree}, {shape}: validity_texts log-log slope in queries {slope:.2f} "
                  f"(1 = linear; goal <= {SLOPE_GOAL}: {verdict})")  # fmt: skip
    if len(trees) > 1:
        for queries in sizes:
            for shape in SHAPES:
                speedup = ratio(whole[queries, shape, " (before)"], whole[queries, shape, ""])
                print(
                    f"{queries:,} queries, {shape}: whole nrp validate before / this tree "
                    f"{speedup:.2f}x"
                )


if __name__ == "__main__" and not child_main({"texts": _texts}):
    sys.exit(main())
