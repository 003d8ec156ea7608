#!/usr/bin/env python3
"""How a whole ``nrp score`` process scales: time in the number of answers and in |D_q|.

Issue 28's goal 6. Each point is one whole ``nrp score NAME ANSWERS --out DIR --no-cache
--ranker bm25`` process (start to exit: reading the answers, positioning with statistics over
D_q plus the answer, the flags, writing the results), timed from the parent, its peak memory the
child's own (``os.wait4``), as ``bench_score.py`` measures; the answers are generated as there
(``benchkit.write_answers``: MEDIQA 2019 sentences, deterministic).

- **answers** (``--answers``, default 1,000, 10,000, 100,000 and 1,000,000; the last takes about
  five minutes): MEDIQA 2019's 150 queries, |D_q| 2 to 11.
- **|D_q|** (``--dq``, default 10, 100, 1,000 and 10,000; ``--dq-answers`` answers, default
  2,000): synthetic collections of the first two MEDIQA questions, each with |D_q| judged
  documents of 300 to 1,700 characters of MEDIQA sentences (deterministic; the documents of a
  smaller D_q are the first ones of a larger), written as TSV files with a manifest and ingested
  by ``nrp ingest``, untimed.

Per axis: a table (x, seconds, peak MB, answers/s) and the least-squares slope of log10 time
against log10 x (1 = linear) over the points slower than the start-up floor, the same command on
10 answers (the fastest of three); printed as measured and with the floor subtracted (what the
work itself costs).
For the answers axis, the ratio of the peak RSS at the largest count to the smallest, and, over
the counts above one block of answers (``nrp score`` reads and scores a larger JSON Lines file
``BLOCK_ANSWERS`` answers at a time), the ratio of the largest to the first: whether memory is
flat in the number of answers there (below 1.5: flat).

    .venv/bin/python scripts/bench_scaling.py
    .venv/bin/python scripts/bench_scaling.py --answers 1000,10000,100000 --dq 10,100,1000
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
    MEDIQA_DATA,
    MEDIQA_MANIFEST,
    checkout_env,
    child_main,
    emit,
    loglog_slope,
    machine,
    measured,
    run_child,
    sentence_text,
    sentences_of,
    timed_process,
    write_answers,
    write_table_collection,
)

SCRIPT = Path(__file__).resolve()
ANSWERS_GRID = "1000,10000,100000,200000,1000000"
#: answers ``nrp score`` reads and scores at a time from a larger JSON Lines file
#: (``nrp.answers.BLOCK_ANSWERS``): above it, memory should not grow with the answers
BLOCK_ANSWERS = 1 << 17
DQ_GRID = "10,100,1000,10000"
DQ_QUERIES = 2
FLOOR_ANSWERS = 10
FLAT_RATIO = 1.5
RANKER = "bm25"


# -- children -------------------------------------------------------------------------------------
def _prepare_answers(payload: dict) -> None:
    """Ingest MEDIQA 2019 and write one answer file per count: answers-COUNT.jsonl."""
    from nrp.api import Collection, ingest

    name = ingest(MEDIQA_MANIFEST, indexes_dir=payload["indexes"]).name
    collection = Collection.load(name, payload["indexes"])
    for count in payload["counts"]:
        write_answers(collection, Path(payload["work"]) / f"answers-{count}.jsonl", count)
    emit({"collection": name})


def _prepare_dq(payload: dict) -> None:
    """Write each synthetic D_q collection (ingested by the parent) and its answer files."""
    from nrp.api import Collection

    mediqa = Collection.load("mediqa-2019", payload["indexes"])
    candidates = mediqa.candidates()
    sentences = sentences_of(candidates["text"].fillna("").astype(str).tolist())
    topics = mediqa.topics.head(DQ_QUERIES)
    queries = list(zip(topics["qid"].astype(str), topics["query"].astype(str), strict=True))
    made = []
    for size in payload["sizes"]:
        documents = []
        for number, (qid, _) in enumerate(queries):
            rng = random.Random(number)  # the same first documents at every size
            documents += [(qid, f"{qid}-{j}", sentence_text(rng, sentences)) for j in range(size)]
        folder = Path(payload["work"]) / f"dq-{size}"
        name = f"scaling-dq-{size}"
        manifest = write_table_collection(
            folder, name, f"MEDIQA sentences, D_q of {size}", queries, documents
        )
        made.append({"size": size, "name": name, "manifest": str(manifest)})
    emit({"collections": made})


def _write_dq_answers(payload: dict) -> None:
    """The answer files of one ingested synthetic collection."""
    from nrp.api import Collection

    collection = Collection.load(payload["name"], payload["indexes"])
    for count in payload["counts"]:
        write_answers(collection, Path(payload["folder"]) / f"answers-{count}.jsonl", count)
    emit({})


# -- parent ---------------------------------------------------------------------------------------
def start_up_floor(name: str, answers: Path, indexes: Path) -> float:
    """Seconds of the fastest of three ``nrp score`` processes on ``FLOOR_ANSWERS`` answers: the
    fixed cost of a command (start, imports, loading the collection, writing)."""
    return score_process(name, answers, indexes, 3)[0]


def score_process(name: str, answers: Path, indexes: Path, repeats: int) -> tuple[float, float]:
    """(seconds, peak MB) of the fastest of ``repeats`` whole ``nrp score`` processes."""
    best: tuple[float, float] | None = None
    for _ in range(repeats):
        out = answers.parent / "out"
        command = [sys.executable, "-m", "nrp", "score", name, str(answers), "--out", str(out),
                   "--indexes", str(indexes), "--no-cache", "--ranker", RANKER]  # fmt: skip
        seconds, peak, status = timed_process(command, checkout_env())
        shutil.rmtree(out, ignore_errors=True)
        if status:
            raise RuntimeError(f"nrp score {name} {answers.name} failed (exit {status})")
        if best is None or seconds < best[0]:
            best = (seconds, peak)
    assert best is not None
    return best


def shown(slope: float) -> str:
    """A slope to two decimals; 'n/a' when fewer than two points were above the floor."""
    return "n/a" if math.isnan(slope) else f"{slope:.2f}"


def print_axis(label: str, floor: float, rows: list[tuple[int, float, float, int]]) -> None:
    """The table of one axis (x, seconds, peak MB, answers/s) and its log-log slopes."""
    header = f"{label:>12} {'seconds':>8} {'peak MB':>8} {'answers/s':>10}"
    print(header)
    print("-" * len(header))
    for x, seconds, peak, answers in rows:
        print(f"{x:>12,} {seconds:8.2f} {peak:8.0f} {answers / seconds:10,.0f}")
    above = [(x, seconds) for x, seconds, _, _ in rows if seconds > floor]
    left = len(rows) - len(above)
    raw, net = (shown(loglog_slope(above, f)) for f in (0.0, floor))
    print(
        f"log-log slope of time vs {label}: {raw} as measured, {net} with the start-up "
        f"floor ({floor:.2f} s, {FLOOR_ANSWERS} answers) subtracted; over {len(above)} points"
        + (f" ({left} not above the floor left out)" if left else "")
        + " (1 = linear)"
    )
    if len(above) > 2:
        last = above[-2:]
        print(f"  between the last two ({last[0][0]:,} and {last[1][0]:,}): "
              f"{shown(loglog_slope(last))} as measured, {shown(loglog_slope(last, floor))} with "
              "the floor subtracted")  # fmt: skip


def run_answers_axis(args: argparse.Namespace, work: Path) -> None:
    counts = [int(c) for c in args.answers.split(",")]
    indexes = work / "indexes"
    payload = {"indexes": str(indexes), "work": str(work), "counts": [FLOOR_ANSWERS, *counts]}
    name = run_child(SCRIPT, "--_prepare_answers", payload)["collection"]
    floor = start_up_floor(name, work / f"answers-{FLOOR_ANSWERS}.jsonl", indexes)
    rows = []
    for count in counts:
        answers = work / f"answers-{count}.jsonl"
        seconds, peak = score_process(name, answers, indexes, args.repeats)
        answers.unlink()
        rows.append((count, seconds, peak, count))
        print(f"  ... {count:,} answers: {seconds:.1f} s", file=sys.stderr, flush=True)
    print(f"\nanswers (MEDIQA 2019, 150 queries, |D_q| 2-11; nrp score --ranker {RANKER})")
    print_axis("answers", floor, rows)
    if len(rows) > 1:
        whole = rows[-1][2] / rows[0][2]
        print(f"memory: peak RSS at {rows[-1][0]:,} answers / at {rows[0][0]:,} = "
              f"{rows[-1][2]:.0f} / {rows[0][2]:.0f} MB = {whole:.2f}")  # fmt: skip
    blocks = [row for row in rows if row[0] > BLOCK_ANSWERS]
    if len(blocks) > 1:  # read and scored a block at a time: the peak should not grow
        grows = blocks[-1][2] / blocks[0][2]
        verdict = "flat" if grows < FLAT_RATIO else f"not flat (at least {FLAT_RATIO} is growth)"
        print(f"memory above one block ({BLOCK_ANSWERS:,} answers): peak RSS at "
              f"{blocks[-1][0]:,} / at {blocks[0][0]:,} = {blocks[-1][2]:.0f} / "
              f"{blocks[0][2]:.0f} MB = {grows:.2f}: {verdict}")  # fmt: skip


def run_dq_axis(args: argparse.Namespace, work: Path) -> None:
    sizes = [int(s) for s in args.dq.split(",")]
    indexes = work / "indexes"
    payload = {"indexes": str(indexes), "work": str(work), "sizes": sizes}
    collections = run_child(SCRIPT, "--_prepare_dq", payload)["collections"]
    rows, floor = [], None
    for made in collections:
        ingest = [sys.executable, "-m", "nrp", "ingest", made["manifest"], "--indexes",
                  str(indexes)]  # fmt: skip
        if timed_process(ingest, checkout_env())[2]:
            raise RuntimeError(f"nrp ingest {made['manifest']} failed")
        folder = Path(made["manifest"]).parent
        counts = [args.dq_answers] + ([FLOOR_ANSWERS] if floor is None else [])
        run_child(SCRIPT, "--_dq_answers", {"indexes": str(indexes), "name": made["name"],
                                            "folder": str(folder), "counts": counts})  # fmt: skip
        if floor is None:  # the start-up floor: 10 answers on the smallest D_q
            floor_file = folder / f"answers-{FLOOR_ANSWERS}.jsonl"
            floor = start_up_floor(made["name"], floor_file, indexes)
        answers = folder / f"answers-{args.dq_answers}.jsonl"
        seconds, peak = score_process(made["name"], answers, indexes, args.repeats)
        rows.append((made["size"], seconds, peak, args.dq_answers))
        print(f"  ... |D_q| {made['size']:,}: {seconds:.1f} s", file=sys.stderr, flush=True)
    print(f"\n|D_q| ({args.dq_answers:,} answers over {DQ_QUERIES} queries, synthetic documents "
          f"of MEDIQA sentences; nrp score --ranker {RANKER})")  # fmt: skip
    print_axis("|D_q|", floor or 0.0, rows)


def main() -> int:
    modes = {"--_prepare_answers": _prepare_answers, "--_prepare_dq": _prepare_dq,
             "--_dq_answers": _write_dq_answers}  # fmt: skip
    if child_main(modes):
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--answers", default=ANSWERS_GRID, help="answer counts ('' skips)")
    parser.add_argument("--dq", default=DQ_GRID, help="sizes of D_q ('' skips)")
    parser.add_argument("--dq-answers", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=1, help="runs per point; the fastest")
    args = parser.parse_args()
    if not MEDIQA_DATA.exists():
        print(f"skipped: MEDIQA 2019 not found in {MEDIQA_DATA}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="nrp-bench-scaling-"))
    print(f"machine: {machine()}; whole `nrp score --no-cache --ranker {RANKER}` processes")
    try:
        if args.answers:
            run_answers_axis(args, work)
        if args.dq:
            if not args.answers:  # the D_q collections take their sentences from MEDIQA
                mediqa = {"indexes": str(work / "indexes"), "work": str(work), "counts": []}
                run_child(SCRIPT, "--_prepare_answers", mediqa)
            run_dq_axis(args, work)
    except RuntimeError as error:  # a child that failed: its last line
        print(f"bench_scaling: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(measured("2 CPU cores shared with other work: the slopes are what count"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
