#!/usr/bin/env python3
"""``nrp probe`` on real judged answers: MEDIQA 2019 test and the LiveQA-Med 2017 pool.

The answers probed are the collections' own judged candidate answers (MEDIQA's 1,107 test
answers; LiveQA's judged MedQuAD pool), for a seeded sample of queries (``--queries``): each
answer and its perturbed twins are positioned among the same D_q, which holds the original
answer itself (so the original ties with its copy, and a twin that is damaged falls below it).
The judge runs on a smaller sample (``--judge-queries``): the offline SmolLM2-135M takes about
a second per prompt on a CPU.

Evaluators: BLEU, ROUGE, BERTScore (against LiveQA's reference answers; MEDIQA has none, so
against its pseudo-references, the query's top-graded judged documents, which are among the
answers probed: for those the original is its own reference), the spaCy heuristics, NRP with
tfidf, bm25 and dense, and the judge in G-Eval rubric and TRUE/FALSE/NOT GIVEN modes. Tables and
figures go to ``--out/NAME/`` (what ``nrp probe`` writes) and a compact table is printed.

    .venv/bin/python scripts/studies/probe_collections.py --out probe-out
    .venv/bin/python scripts/studies/probe_collections.py --collections mediqa-2019 --queries 20 \\
        --judge-queries 0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchkit, beside the benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other studies
from benchkit import ROOT, machine

from nrp import ingest
from nrp.collection.collection import Collection
from nrp.probes.probe import ProbeResult, probe

COLLECTIONS = ("mediqa-2019", "liveqa-med-2017")
CHEAP = "bleu,rouge,bertscore,heuristics,nrp:rankers=tfidf,label=tfidf," + (
    "nrp:rankers=bm25,label=bm25,nrp:rankers=dense,label=dense"
)
# forced choice: the probabilities of the scores / labels (the 135M model rarely writes a score)
JUDGES = "judge:mode=rubric,decoding=choice,label=geval,judge:mode=tfn,decoding=choice,label=tfn"
# the judge's perturbations: one or two of each kind (the judge reads every text it scores)
JUDGE_PERTURBATIONS = "negate,swap_numbers,first_sentence,echo_question,off_topic,copy_best"


def judged_answers(collection: Collection, n_queries: int, seed: int) -> pd.DataFrame:
    """The judged documents of ``n_queries`` seeded queries (0: all) as an answer set."""
    frame = collection.candidates()
    qids = sorted(frame["qid"].astype(str).unique())
    if 0 < n_queries < len(qids):
        rng = np.random.default_rng(seed)
        qids = sorted(rng.choice(qids, n_queries, replace=False).tolist())
    chosen = frame[frame["qid"].astype(str).isin(set(qids))]
    return pd.DataFrame(
        {
            "answer_id": "a-" + chosen["docno"].astype(str),
            "qid": chosen["qid"].astype(str),
            "text": chosen["text"].astype(str),
        }
    ).reset_index(drop=True)


def compact(result: ProbeResult) -> pd.DataFrame:
    """score x perturbation: share of pairs where the original scores higher [CI]."""
    s = result.summary
    cell = s.apply(
        lambda r: (
            f"{r['share_original_higher']:.2f}"
            + (f" t{r['share_ties']:.2f}" if r["share_ties"] > 0.005 else "")
        ),
        axis=1,
    )
    return s.assign(cell=cell).pivot(index="perturbation", columns="score", values="cell")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--queries", type=int, default=40, help="queries sampled (0: all)")
    parser.add_argument("--judge-queries", type=int, default=2, help="for the judge (0: none)")
    parser.add_argument("--evaluators", default=CHEAP)
    parser.add_argument("--judges", default=JUDGES)
    parser.add_argument("--judge-perturbations", default=JUDGE_PERTURBATIONS)
    parser.add_argument(
        "--judge-answers", type=int, default=8, help="at most this many answers for the judge"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--indexes", default=str(ROOT / "indexes"))
    parser.add_argument("--out", default="probe-out")
    args = parser.parse_args(argv)
    print(f"probe on real judged answers; {machine()}", flush=True)
    pd.set_option("display.width", 250, "display.max_columns", 40)
    for name in args.collections.split(","):
        ingest(str(ROOT / "manifests" / f"{name}.yaml"), indexes_dir=args.indexes)
        collection = Collection.load(name, args.indexes)
        runs = [(args.evaluators, args.queries, "", None, 0)] if args.evaluators else []
        if args.judge_queries > 0 and args.judges:
            runs.append(
                (
                    args.judges,
                    args.judge_queries,
                    "-judge",
                    args.judge_perturbations,
                    args.judge_answers,
                )
            )
        for evaluators, n_queries, suffix, perturbations, at_most in runs:
            answers = judged_answers(collection, n_queries, args.seed)
            if at_most:
                answers = answers.head(at_most)
            start = time.perf_counter()
            result = probe(collection, answers, evaluators, perturbations, seed=args.seed)
            took = time.perf_counter() - start
            out = Path(args.out) / f"{name}{suffix}"
            result.to_csv(out)
            result.to_json(out / "probe.json")
            result.plot(out / "probe.png")
            print(
                f"\n## {name}{suffix}: {len(answers)} answers of "
                f"{answers['qid'].nunique()} queries, {took:.0f} s; share original > twin "
                "(tNN: share of ties)",
                flush=True,
            )
            print(compact(result).to_string(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
