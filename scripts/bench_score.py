#!/usr/bin/env python3
"""Whole ``nrp score`` commands against a plain loop and the floor of the process, in one run.

Issue 28's goal 1 is the speed a user sees: a whole ``nrp score NAME ANSWERS --out DIR
--no-cache`` process (start, reading and checking the answers, positioning, the flags,
writing results.parquet, results.csv, flags.csv and scoring.json), not only its inner loop.
Each ranker and statistics mode runs as its own process (``subprocess``), timed from start to
exit, its peak memory the process's own (``os.wait4``: ru_maxrss of that child). Beside them,
in the same run and alternated with them:

- **the plain loop**: what a person would write in pure Python (written out here, run in a
  child of its own on the same answers, already in memory): per answer, Terrier's tokens
  (``[A-Za-z0-9]+``, the tokeniser's checks), stopwords, a memoised Porter stemmer, BM25
  against D_q's statistics, and the documents of D_q scored above the answer counted. The
  goal: nrp at least 3x its rate.
- **the floor**: the least work of the whole command, in a child of its own: start Python,
  read the JSON Lines file with pyarrow, tokenise every answer once with nrp's own memoised
  pipeline (``text_pipeline.analyse``), write a Parquet and a CSV file of the results' size
  with pyarrow. nrp's time / the floor's says how close the command gets to it.

Printed per run: answers/s (goal 20,000), the ratio to the plain loop (goal 3), peak RSS
(goal 600 MB), each beside its goal, and the floor. Answers: ``--answers`` (default 100,000)
generated from MEDIQA 2019 (its judged documents' sentences, deterministic: answer i goes to
query i mod 150; one in 50 a judged document of its own query, one in 50 the question, the
rest 300 to 1,700 characters of sentences drawn with a fixed seed). D_q's scores are not
cached (``--no-cache``), as the issue measured.

    .venv/bin/python scripts/bench_score.py
    .venv/bin/python scripts/bench_score.py --answers 20000 --runs bm25,bm25:stats=collection
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
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
GOAL_RATE = 20_000
GOAL_LOOP_RATIO = 3.0
GOAL_RSS_MB = 600
#: (label, nrp score options): every lexical ranker, every statistics mode
RUNS = {
    "bm25": ["--ranker", "bm25"],
    "tfidf": ["--ranker", "tfidf"],
    "dph": ["--ranker", "dph"],
    "bm25 --frozen-stats": ["--ranker", "bm25", "--frozen-stats"],
    "tfidf --frozen-stats": ["--ranker", "tfidf", "--frozen-stats"],
    "dph --frozen-stats": ["--ranker", "dph", "--frozen-stats"],
    "bm25:stats=collection": ["--ranker", "bm25:stats=collection"],
    "tfidf:stats=collection": ["--ranker", "tfidf:stats=collection"],
    "dph:stats=collection": ["--ranker", "dph:stats=collection"],
}


# -- children -------------------------------------------------------------------------------------
def _prepare(payload: dict) -> None:
    """Ingest MEDIQA 2019 and write the answer set (JSON Lines)."""
    from nrp.api import Collection, ingest

    result = ingest(MEDIQA_MANIFEST, indexes_dir=payload["indexes"])
    write_answers(Collection.load(result.name, payload["indexes"]), payload["answers"],
                  payload["count"])  # fmt: skip
    emit({"collection": result.name})


def _plain_loop(payload: dict) -> None:
    """The plain pure-Python loop (module docstring), timed over answers already in memory."""
    import json

    from nrp.api import Collection
    from nrp.rankers.text_pipeline import porter_stem, terrier_stopwords

    collection = Collection.load(payload["collection"], payload["indexes"])
    candidates = collection.candidates()
    with open(payload["answers"], encoding="utf-8") as lines:
        answers = [(r["qid"], r["text"]) for r in map(json.loads, lines)]
    token = re.compile(r"[A-Za-z0-9]+")
    digit, same = re.compile(r"[0-9]"), re.compile(r"(.)\1{3}")
    stop, stems = terrier_stopwords(), {}

    def terms(text: str) -> list[str]:
        out = []
        for raw in token.findall(text):
            if len(raw) > 20 or len(digit.findall(raw)) > 4 or same.search(raw):
                continue
            word = raw.lower()
            if word in stop:
                continue
            stem = stems.get(word)
            if stem is None:
                stem = stems[word] = porter_stem(word)
            out.append(stem)
        return out

    started = time.perf_counter()
    queries = {}  # D_q's statistics and BM25 scores, as a plain script would compute them
    for qid, group in candidates.groupby(candidates["qid"].astype(str), sort=False):
        doc_terms = [terms(t) for t in group["text"].fillna("").astype(str)]
        df: dict[str, int] = {}
        for d in doc_terms:
            for t in set(d):
                df[t] = df.get(t, 0) + 1
        q = {
            "terms": terms(str(group["query"].iloc[0])),
            "df": df,
            "n": len(doc_terms),
            "avgdl": sum(map(len, doc_terms)) / max(len(doc_terms), 1),
        }
        q["scores"] = [_bm25(q, d) for d in doc_terms]
        queries[qid] = q
    above = 0
    for qid, text in answers:
        q = queries[qid]
        score = _bm25(q, terms(text))
        above += sum(1 for s in q["scores"] if s > score)
    seconds = time.perf_counter() - started
    emit({"seconds": seconds, "answers": len(answers), "above": above})


def _bm25(q: dict, doc: list[str]) -> float:
    """BM25 (k1 1.2, b 0.75; Lucene's idf) of one document for the query's terms, plain."""
    import math

    score, length = 0.0, len(doc)
    for term in q["terms"]:
        tf = doc.count(term)
        df = q["df"].get(term, 0)
        if tf == 0 or df == 0:
            continue
        idf = math.log2(1 + (q["n"] - df + 0.5) / (df + 0.5))
        score += idf * 2.2 * tf / (tf + 1.2 * (0.25 + 0.75 * length / q["avgdl"]))
    return score


def _floor(payload: dict) -> None:
    """The floor of the whole command (module docstring); timed from the child's start by the
    parent, like nrp."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    from nrp.rankers.text_pipeline import analyse

    table = pj.read_json(payload["answers"])
    lengths = [len(analyse(text)) for text in table.column("text").to_pylist()]
    rows = pa.table({"answer_id": pa.array(range(2 * len(lengths))).cast(pa.string()),
                     "score": pa.array([float(n) for n in lengths] * 2)})  # fmt: skip
    pq.write_table(rows, os.path.join(payload["out"], "floor.parquet"))
    pacsv.write_csv(rows, os.path.join(payload["out"], "floor.csv"))
    emit({"answers": len(lengths)})


# -- parent ---------------------------------------------------------------------------------------
def main() -> int:
    if child_main({"--_prepare": _prepare, "--_loop": _plain_loop, "--_floor": _floor}):
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--runs", default=",".join(RUNS), help=f"of: {', '.join(RUNS)}")
    parser.add_argument("--timeout", type=float, default=1800)
    before_option(parser, "nrp from this source tree after each run of this one")
    args = parser.parse_args()
    return on_mediqa("nrp-bench-score-", lambda work: _run(args, work),
                     "2 CPU cores shared with other work: the ratios are what count")  # fmt: skip


def _run(args: argparse.Namespace, work: Path) -> None:
    indexes, answers = work / "indexes", work / "answers.jsonl"
    payload = {"indexes": str(indexes), "answers": str(answers), "count": args.answers}
    name = run_child(SCRIPT, "--_prepare", payload)["collection"]
    env = checkout_env()
    nrp = [sys.executable, "-m", "nrp", "score", name, str(answers), "--indexes", str(indexes),
           "--no-cache"]  # fmt: skip
    child = [sys.executable, str(SCRIPT)]
    print(f"machine: {machine()}; {args.answers:,} MEDIQA answers; whole processes, each "
          "nrp run between a plain-loop and a floor run\n")  # fmt: skip
    header = (f"{'nrp score':<32} {'s':>6} {'answers/s':>9} {'goal':>6} {'loop/s':>7} "
              f"{'x loop':>6} {'goal':>4} {'peak MB':>7} {'goal':>4} {'floor s':>7} "
              f"{'nrp/floor':>9}")  # fmt: skip
    print(header)
    print("-" * len(header))
    import json

    trees = [("", env)]
    if args.before:
        trees.append((" (before)", {**env, "PYTHONPATH": str(args.before.resolve())}))
    for number, label in enumerate(args.runs.split(",")):
        loop = run_child(SCRIPT, "--_loop", {**payload, "collection": name}, args.timeout)
        floor_out = work / f"floor-{number}"
        floor_out.mkdir()
        floor_payload = json.dumps({"answers": str(answers), "out": str(floor_out)})
        floor, _, _ = timed_process([*child, "--_floor", floor_payload], env)
        loop_rate = loop["answers"] / loop["seconds"]
        for tree, tree_env in trees:
            out = work / f"out-{number}{tree.strip()}"
            seconds, peak, status = timed_process([*nrp, "--out", str(out), *RUNS[label]], tree_env)
            shutil.rmtree(out, ignore_errors=True)
            if status:
                print(f"{label + tree:<32} failed (exit {status})")
                continue
            rate = args.answers / seconds
            print(f"{label + tree:<32} {seconds:6.1f} {rate:9,.0f} {GOAL_RATE:6,} "
                  f"{loop_rate:7,.0f} "
                  f"{rate / loop_rate:6.2f} {GOAL_LOOP_RATIO:4.0f} {peak:7.0f} {GOAL_RSS_MB:4} "
                  f"{floor:7.1f} {seconds / floor:9.2f}", flush=True)  # fmt: skip
    print("\nnrp: the whole process (start to exit); loop: the plain loop's answers/s over "
          "answers in memory (its reading not timed); floor: start, pyarrow read, each answer "
          "tokenised once, a Parquet and a CSV file written")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
