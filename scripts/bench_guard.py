#!/usr/bin/env python3
"""The default flow as a user runs it: whole ``nrp validate``, then whole ``nrp score`` with the
guard it chooses against the same command with the ranker the guard guards, and the service's
one-answer calls, in one run.

``nrp validate`` chooses ``guard:content=0.06`` on MEDIQA 2019 and the LiveQA-Med pool (issue
25), so it is what ``nrp score NAME ANSWERS`` positions with next. Measured:

- **validation**: ``nrp validate NAME`` (the default candidates) on the collection as ingested,
  start to exit, peak RSS; with ``--before DIR`` the same from that tree, on a copy of its own.
- **scoring, whole processes**: ``nrp score NAME ANSWERS --ranker SPEC --out DIR``, start to
  exit, peak RSS of the process (``os.wait4``), D_q's scores in the score cache and the guard's
  thresholds calibrated as the validation above left them, against ``dense``, the ranker under
  the guard, which a user would otherwise get. Each round's answers are new (``write_answers``
  with a seed of its own) and every run scores them in a fresh copy of the validated folder, so
  no answer's score comes from the cache (the guard would read its ranker's). dense and the
  guard alternate within a round; with ``--before DIR`` the guard from that tree runs too.
- **several rankers of one model, one process**: on CLEF eHealth 2021 (skipped with a reason
  where ../shared lacks it), whose validation chooses ``guard`` for relevance and
  ``guard:content=0.06`` for readability and credibility, whole ``nrp score`` of ChatGPT's 500
  answers to the ``question`` prompt (``answers/chatgpt/question.csv``) with both, by dimension,
  against each alone, on fresh copies of a folder ``nrp validate --rankers`` of the two left. The
  run embeds each text once between the two rankers (``embedding_memo``), so it should take about
  as long as the slower alone; without the memo it took 1.51x of it
  (docs/studies/performance-study.md).
- **in-process calls**: the calls ``POST /v1/score`` makes (``Positioner.position_rows``, one
  answer per call), in a child of their own on a fresh copy of the folder, with the ranker, the
  thresholds and the documents' embeddings loaded, then the file's other answers in one call;
  both rankers on the same answers.

The goals: the guard's whole ``nrp score`` at most 2x dense's (beside the question and the text
the guard embeds each text's rest, the text without the question's words and nearly as long:
about twice dense's embedding; the start, about 5 s of imports and the model, is the same); in
a call, 0.9 of a bare encode of what the answers need embedded (texts, questions, rests); the two
rankers in one process at most 1.15x the slower alone.
Answers: ``--answers`` (default 500) generated from MEDIQA 2019's judged documents
(``write_answers``: one in 50 a judged document, one in 50 the question).

    .venv/bin/python scripts/bench_guard.py
    git worktree add ../before REV && .venv/bin/python scripts/bench_guard.py --before ../before
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
    MEDIQA_DATA,
    MEDIQA_MANIFEST,
    before_option,
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
GUARD, DENSE = "guard:content=0.06", "dense"
GOAL_RATIO = 2.0
GOAL_BARE = 0.9
GOAL_SEVERAL = 1.15
CLEF = "clef-ehealth-2021"
CLEF_MANIFEST = MEDIQA_MANIFEST.with_name(f"{CLEF}.yaml")
CLEF_ANSWERS = MEDIQA_DATA.parent / CLEF / "answers" / "chatgpt" / "question.csv"
#: CLEF's validated choice per dimension: two rankers over one MiniLM
BY_DIMENSION = {"relevance": "guard", "readability": GUARD, "credibility": GUARD}
#: the distinct rankers among them, in order: each runs alone beside the run of all
SINGLES = tuple(dict.fromkeys(BY_DIMENSION.values()))


# -- children -------------------------------------------------------------------------------------
def _prepare(payload: dict) -> None:
    """Ingest MEDIQA 2019; write the answer files (seeds 0, 1, ...)."""
    from nrp.api import Collection, ingest

    name = ingest(MEDIQA_MANIFEST, indexes_dir=payload["indexes"]).name
    collection = Collection.load(name, payload["indexes"])
    for seed, path in enumerate(payload["answer_files"]):
        write_answers(collection, path, payload["count"], seed=seed)
    emit({"collection": name})


def _calls(payload: dict) -> None:
    """ms per one-answer ``position_rows`` call and per answer in one call, of one ranker."""
    import json

    from nrp import api, engine

    collection = api.Collection.load(payload["collection"], payload["indexes"])
    ranker = api.make_ranker(payload["spec"])
    ranker.bind_collection(collection)
    caches = engine.PositionCaches.beside(collection)
    job = engine.PositionJob(collection, ranker, ranker.fingerprint(), engine.PositionOptions(),
                             caches, collection.candidates())  # fmt: skip
    positioner = engine.Positioner(job)
    with open(payload["answers"], encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    ids = [f"call-{n}" for n in range(len(rows))]
    qids, texts = [r["qid"] for r in rows], [r["text"] for r in rows]
    positioner.position_rows(ids[:1], qids[:1], texts[:1])  # model, thresholds, documents
    calls = payload["calls"]
    started = time.perf_counter()
    for n in range(1, calls + 1):
        positioner.position_rows(ids[n : n + 1], qids[n : n + 1], texts[n : n + 1])
    one = (time.perf_counter() - started) / calls
    rest = slice(calls + 1, None)
    # the least a forward pass must embed for these answers (a bare encode, no nrp around it):
    # their texts and questions, and for the guard each text's rest too
    questions = dict(zip(collection.topics["qid"].astype(str),
                         collection.topics["query"].astype(str), strict=True))  # fmt: skip
    needed = [*texts[rest], *(questions[q] for q in qids[rest])]
    if payload["spec"] != DENSE:
        from nrp.rankers.guard_features import lexical_features

        cut = ranker.model.rest_words  # as the guard's model reads the rest
        pairs = zip(qids[rest], texts[rest], strict=True)
        needed += [r for r in (lexical_features(questions[q], t, cut)[2] for q, t in pairs) if r]
    needed = list(dict.fromkeys(needed))
    bare = api.make_ranker(DENSE)
    bare.model.encode(needed[:8], batch_size=int(bare.params["batch"]))
    started = time.perf_counter()
    bare.model.encode(needed, batch_size=int(bare.params["batch"]), normalize_embeddings=True)
    bare_s = time.perf_counter() - started
    started = time.perf_counter()
    positioner.position_rows(ids[rest], qids[rest], texts[rest])
    nrp_s = time.perf_counter() - started
    emit({"one_ms": one * 1000, "each_ms": nrp_s * 1000 / max(len(ids[rest]), 1),
          "bare_share": bare_s / nrp_s, "embedded": len(needed)})  # fmt: skip


# -- parent ---------------------------------------------------------------------------------------
def main() -> int:
    if child_main({"--_prepare": _prepare, "--_calls": _calls}):
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--answers", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=30, help="one-answer calls per ranker")
    parser.add_argument("--timeout", type=float, default=1800)
    before_option(parser, "nrp validate and the guard from this source tree in each round")
    args = parser.parse_args()
    return on_mediqa("nrp-bench-guard-", lambda work: _run(args, work),
                     "2 CPU cores shared with other work: the ratios are what count")  # fmt: skip


def _run(args: argparse.Namespace, work: Path) -> None:
    indexes = work / "indexes"
    trees = [("", checkout_env())]
    if args.before:
        trees.append((" (before)", {**trees[0][1], "PYTHONPATH": str(args.before.resolve())}))
    runs = [(DENSE, "", trees[0][1]), *((GUARD, tree, tree_env) for tree, tree_env in trees)]
    # the answers of each round, of the in-process calls
    files = [work / f"answers-{seed}.jsonl" for seed in range(args.rounds + 1)]
    payload = {"indexes": str(indexes), "answer_files": [str(f) for f in files],
               "count": args.answers}  # fmt: skip
    name = run_child(SCRIPT, "--_prepare", payload, args.timeout)["collection"]

    def fresh() -> Path:
        """A copy of the warm collection folder: nothing cached but what validation leaves."""
        shutil.rmtree(work / "run", ignore_errors=True)
        return Path(shutil.copytree(indexes, work / "run"))

    def score(spec: str, tree_env: dict, answers: Path, folder: Path) -> tuple[float, float, int]:
        out = work / "out"
        command = [sys.executable, "-m", "nrp", "score", name, str(answers), "--indexes",
                   str(folder), "--ranker", spec, "--out", str(out)]  # fmt: skip
        measured_run = timed_process(command, tree_env)
        shutil.rmtree(out, ignore_errors=True)
        return measured_run

    print(f"machine: {machine()}; MEDIQA 2019, {args.answers:,} new answers a round; whole "
          "processes\n")  # fmt: skip
    bare = Path(shutil.copytree(indexes, work / "bare"))  # the collection as ingested
    for tree, tree_env in trees:  # the checkout's leaves D_q scored, thresholds calibrated
        folder = indexes if not tree else Path(shutil.copytree(bare, work / "validated"))
        command = [sys.executable, "-m", "nrp", "validate", name, "--indexes", str(folder)]
        seconds, peak, status = timed_process(command, tree_env)
        shown = f"{seconds:.1f} s, peak {peak:,.0f} MB" if not status else f"failed ({status})"
        print(f"nrp validate {name}{tree}: {shown}")
    header = (f"\n{'round':<6} {'nrp score --ranker':<30} {'s':>6} {'answers/s':>9} "
              f"{'peak MB':>7} {'x dense':>7} {'goal':>5}")  # fmt: skip
    print(header)
    print("-" * (len(header) - 1))
    for number in range(1, args.rounds + 1):
        dense_seconds = 0.0
        for spec, tree, tree_env in runs:
            seconds, peak, status = score(spec, tree_env, files[number - 1], fresh())
            if status:
                print(f"{number:<6} {spec + tree:<30} failed (exit {status})")
                continue
            dense_seconds = seconds if spec == DENSE else dense_seconds
            shown = ""  # the ratio, where dense ran in this round
            if spec != DENSE and dense_seconds:
                shown = f"{seconds / dense_seconds:7.2f} {GOAL_RATIO:5.1f}"
            print(f"{number:<6} {spec + tree:<30} {seconds:6.1f} {args.answers / seconds:9,.0f} "
                  f"{peak:7.0f} {shown}", flush=True)  # fmt: skip
    print(f"\nin-process: {args.calls} one-answer calls (as POST /v1/score makes them), then "
          f"the file's other answers in one call")  # fmt: skip
    print(f"{'ranker':<20} {'ms/call':>8} {'ms/answer in one call':>22} {'bare / nrp':>10} "
          f"{'goal':>5}")  # fmt: skip
    for spec in (DENSE, GUARD):
        calls = {"collection": name, "indexes": str(fresh()), "spec": spec, "calls": args.calls,
                 "answers": str(files[-1])}  # fmt: skip
        found = run_child(SCRIPT, "--_calls", calls, args.timeout)
        print(
            f"{spec:<20} {found['one_ms']:8.1f} {found['each_ms']:22.2f} "
            f"{found['bare_share']:10.2f} {GOAL_BARE:5.1f}"
        )
    print("\nwhole processes: start to exit, D_q's scores cached, no answer cached; x dense: "
          "the guard's seconds over dense's in the same round")  # fmt: skip
    _several_rankers(args, work, trees)


def _several_rankers(args: argparse.Namespace, work: Path, trees: list) -> None:
    """CLEF eHealth: the two rankers its validation chooses, in one ``nrp score`` and each
    alone, whole processes on fresh copies of a folder validated with the two."""
    print(f"\nseveral rankers of one model in one nrp score: {CLEF}, ChatGPT's "
          f"{CLEF_ANSWERS.stem} prompt; by dimension: "
          + ", ".join(f"{d}={s}" for d, s in BY_DIMENSION.items()))  # fmt: skip
    if not CLEF_ANSWERS.exists():
        print(f"  skipped: {CLEF_ANSWERS} not found")
        return
    bare = work / "clef"
    command = [sys.executable, "-m", "nrp", "ingest", str(CLEF_MANIFEST), "--indexes", str(bare)]
    if timed_process(command, trees[0][1])[2]:
        print("  skipped: the ingest failed")
        return
    answers = work / "clef-answers"
    (answers / "chatgpt").mkdir(parents=True)
    shutil.copy(CLEF_ANSWERS, answers / "chatgpt" / CLEF_ANSWERS.name)
    header = (f"{'round':<6} {'nrp score --ranker':<50} {'s':>6} {'peak MB':>7} "
              f"{'x slower alone':>14} {'goal':>5}")  # fmt: skip
    print(header)
    print("-" * len(header))
    for tree, tree_env in trees:
        validated = work / "clef-validated"
        shutil.copytree(bare, validated)
        command = [sys.executable, "-m", "nrp", "validate", CLEF, "--indexes", str(validated),
                   "--rankers", ",".join(SINGLES)]  # fmt: skip
        if timed_process(command, tree_env)[2]:
            print(f"  nrp validate{tree} failed")
        else:
            for number in range(1, args.rounds + 1):
                _several_round(number, tree, tree_env, work, validated, answers)
        shutil.rmtree(validated)
    print("x slower alone: the rankers in one process over the slower of them alone, same "
          "round; without the memo it was 1.51 (docs/studies/performance-study.md)")  # fmt: skip


def _several_round(
    number: int, tree: str, tree_env: dict, work: Path, validated: Path, answers: Path
) -> None:
    """One round: each ranker alone, then all by dimension, on fresh copies of ``validated``."""
    singles = [["--ranker", spec] for spec in SINGLES]
    together = [a for d, s in BY_DIMENSION.items() for a in ("--ranker", f"{d}={s}")]
    alone = 0.0
    for run in [*singles, together]:
        folder, out = work / "clef-run", work / "clef-out"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(validated, folder)
        command = [sys.executable, "-m", "nrp", "score", CLEF, str(answers), "--indexes",
                   str(folder), "--out", str(out), *run]  # fmt: skip
        seconds, peak, status = timed_process(command, tree_env)
        shutil.rmtree(out, ignore_errors=True)
        label = (run[1] if run is not together else "each dimension's (both)") + tree
        if status:
            print(f"{number:<6} {label:<50} failed (exit {status})")
            continue
        shown = ""
        if run is together and alone:
            shown = f"{seconds / alone:14.2f} {GOAL_SEVERAL:5.2f}"
        elif run is not together:
            alone = max(alone, seconds)
        print(f"{number:<6} {label:<50} {seconds:6.1f} {peak:7.0f} {shown}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
