#!/usr/bin/env python3
"""Positioning throughput against its limit, peak memory and scaling, side by side in one run.

Each section runs in a child process of its own (its peak memory is its own) and times nrp and
the limit of the same work in that process, so the fraction printed is a ratio of two
measurements taken together, on whatever else the machine is doing.

- **lexical** (``--rankers``, default bm25 and tfidf, statistics over D_q): ``score_answers``
  (``cache=False``: no results cache, what ``nrp score --no-cache`` does) on ``--answers``
  MEDIQA 2019 answers (default 100,000), against the limit: every answer tokenised by the
  ranker's own pipeline (``text_pipeline.analyse``: Terrier's tokeniser, stopwords and Porter
  stemmer, memoised) and D_q plus the answer scored by the weighting model's formula in a tight
  numpy loop over queries, with D_q's term frequencies, lengths, df and F precomputed
  (untimed). Printed: answers/s of each, the fraction nrp / limit (goal >= 0.5) and nrp's rate
  against the goal of 20,000 answers/s; the peak RSS while nrp positions the answers (the high
  water mark reset after the answers are built; goal < 500 MiB) and of the whole process; and
  how many answers the limit puts where nrp does (r from its own floats: a few may differ by
  an ulp-level tie).
- **dense** (``--dense-answers``, default 2,000 over the first ``--dense-queries`` 40 queries,
  each answer a text of its own; 0 skips; ``--dense-repeats`` timed runs of each, in turn):
  ``score_answers`` with the packaged MiniLM bi-encoder (cold: D_q embedded inside the call,
  ``cache=False``) against the bare forward pass, ``SentenceTransformer.encode`` on the same
  distinct texts (D_q's documents, the answers, the queries) with the ranker's batch size;
  goal >= 0.9.
- **scaling** (``--scaling``, default on): bm25's ``score_answers`` time for 1,000, 10,000 and
  100,000 answers, and for 2,000 answers over 20 queries whose D_q has 10, 100 and 1,000
  documents (synthetic collections built from MEDIQA texts); the slope of log time against
  log size (1 = linear). With recomputed statistics each answer rescores its D_q, so time is
  a + b |D_q| per answer: the slope approaches 1 from below as |D_q| grows.

Data: MEDIQA 2019 (manifests/mediqa-2019.yaml, ../shared/data beside the repo: 150 questions,
1,107 judged answers as D_q), ingested into a temporary folder. Answers: MEDIQA has no generated
answers, so answer i of query q (queries in turn, as answer files interleave them) is a judged
document of another query cut to 1,500 characters (mean about 1,000).

The cold fast-vs-full ratio of the dense ranker on the CLEF eHealth answer set is printed by
``scripts/bench_nrp.py`` (see ``make bench``).

    .venv/bin/python scripts/bench_positioning.py
    .venv/bin/python scripts/bench_positioning.py --answers 20000 --dense-answers 0 --no-scaling
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import (
    MEDIQA_DATA,
    MEDIQA_MANIFEST,
    child_main,
    emit,
    loglog_slope,
    machine,
    measured,
    peak_rss_mib,
    ratio,
    run_child,
    write_table_collection,
)

SCRIPT = Path(__file__).resolve()
LEXICAL_GOAL_RATE = 20_000
LEXICAL_GOAL_FRACTION = 0.5
DENSE_GOAL_FRACTION = 0.9
MEMORY_GOAL_MIB = 500
SCALING_ANSWERS = (1_000, 10_000, 100_000)
SCALING_DQ = (10, 100, 1_000)
SCALING_DQ_QUERIES = 20
SCALING_DQ_ANSWERS = 2_000


# -- shared by the children ----------------------------------------------------------------------
def build_answers(candidates, count: int, cut: int = 1500):
    """``count`` answers (answer_id, qid, text): answer i goes to query i mod |Q| and is a
    judged document of another query, cut to ``cut`` characters."""
    import pandas as pd

    texts = candidates["text"].fillna("").astype(str).str[:cut].tolist()
    qids = list(dict.fromkeys(candidates["qid"].astype(str)))
    step = 10_000  # built in slices: converting all texts at once doubles the input's memory
    parts = [
        pd.DataFrame(
            {
                "answer_id": [f"a{i}" for i in range(start, min(start + step, count))],
                "qid": [qids[i % len(qids)] for i in range(start, min(start + step, count))],
                "text": [
                    texts[(i * 7 + 3) % len(texts)] for i in range(start, min(start + step, count))
                ],
            }
        )
        for start in range(0, count, step)
    ]
    return pd.concat(parts, ignore_index=True)


# -- the lexical limit ----------------------------------------------------------------------------
class LexicalLimit:
    """Tokenise + score with precomputed D_q statistics: the least work of the NRP step of a
    lexical ranker with statistics over D_q plus the answer (Terrier's BM25 or TF_IDF, as
    ``nrp.rankers.lexical``; written out here as plain numpy over dense matrices)."""

    def __init__(self, candidates, model):
        from nrp.rankers import text_pipeline
        from nrp.rankers.lexical import BM25

        self.model, self.bm25 = model, isinstance(model, BM25)
        self.analyse = text_pipeline.analyse
        self.queries = {}
        for qid, group in candidates.groupby(candidates["qid"].astype(str), sort=False):
            entries = text_pipeline.query_terms(str(group["query"].iloc[0]))
            terms = [t for t, _ in entries]
            docs = [self.analyse(t) for t in group["text"].fillna("").astype(str)]
            tf = np.array([[d.count(t) for t in terms] for d in docs], dtype=np.float64)
            self.queries[qid] = {
                "terms": terms,
                "wanted": frozenset(terms),
                "kf": np.array([k for _, k in entries], dtype=np.float64),
                "tf": tf.reshape(len(docs), len(terms)),
                "dl": np.array([len(d) for d in docs], dtype=np.float64),
                "df": (tf > 0).sum(axis=0).reshape(len(terms)),
                "cf": tf.sum(axis=0).reshape(len(terms)),
                "tokens": float(sum(len(d) for d in docs)),
            }

    def run(self, qids: list[str], texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(above, ties) of every answer."""
        by_query: dict[str, list[int]] = {}
        for i, qid in enumerate(qids):
            by_query.setdefault(qid, []).append(i)
        above = np.zeros(len(qids), dtype=np.int64)
        ties = np.zeros(len(qids), dtype=np.int64)
        for qid, rows in by_query.items():
            q = self.queries[qid]
            wanted, terms = q["wanted"], q["terms"]
            a_tf = np.zeros((len(rows), len(terms)))
            a_dl = np.zeros(len(rows))
            for j, i in enumerate(rows):
                analysed = self.analyse(texts[i])
                a_dl[j] = len(analysed)
                hits = [t for t in analysed if t in wanted]
                if hits:
                    a_tf[j] = [hits.count(t) for t in terms]
            a_above, a_ties = self._position(q, a_tf, a_dl)
            above[rows], ties[rows] = a_above, a_ties
        return above, ties

    def _position(self, q: dict, a_tf: np.ndarray, a_dl: np.ndarray):
        m = self.model
        n = len(q["dl"])
        big_n = n + 1.0
        avgdl = (q["tokens"] + a_dl) / big_n  # (A,)
        df = q["df"] + (a_tf > 0)  # (A, E)
        tf_all = np.concatenate([np.broadcast_to(q["tf"], (len(a_dl), *q["tf"].shape)),
                                 a_tf[:, None, :]], axis=1)  # (A, n+1, E)  # fmt: skip
        dl_all = np.concatenate([np.broadcast_to(q["dl"], (len(a_dl), n)), a_dl[:, None]], axis=1)
        norm = dl_all / avgdl[:, None]  # (A, n+1)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.bm25:
                idf = np.log2((big_n - df + 0.5) / (df + 0.5))[:, None, :]
                big_k = m.k1 * ((1 - m.b) + m.b * norm)[:, :, None]
                qf = (m.k3 + 1) * q["kf"] / (m.k3 + q["kf"])
                w = idf * ((m.k1 + 1) * tf_all / (big_k + tf_all)) * qf
            else:
                idf = np.log2(big_n / df + 1)[:, None, :]
                rtf = m.k1 * tf_all / (tf_all + m.k1 * (1 - m.b + m.b * norm)[:, :, None])
                w = q["kf"] * rtf * idf
        scores = np.where(tf_all > 0, w, 0.0).sum(axis=2)  # (A, n+1)
        answer = scores[:, -1:]
        return (scores[:, :-1] > answer).sum(axis=1), (scores[:, :-1] == answer).sum(axis=1)


# -- child: lexical -------------------------------------------------------------------------------
def _lexical(payload: dict) -> None:
    import logging

    from nrp.collection.collection import Collection
    from nrp.positioning.scoring import score_answers
    from nrp.rankers.registry import make_ranker

    logging.disable(logging.WARNING)
    collection = Collection.load("mediqa-2019", payload["indexes"])
    candidates = collection.candidates()
    answers = build_answers(candidates, payload["answers"])
    ranker = make_ranker(payload["spec"])
    ranker.bind_collection(collection)
    score_answers(collection, answers.head(64), ranker, cache=False)  # stemmer, imports
    limit = LexicalLimit(candidates, ranker.model)
    qids, texts = answers["qid"].tolist(), answers["text"].tolist()
    nrp_times, limit_times = [], []
    frame = None
    for _ in range(payload["repeats"]):  # in turn: both see the same machine
        start = time.perf_counter()
        above, ties = limit.run(qids, texts)
        limit_times.append(time.perf_counter() - start)
        frame = None  # the previous result is not part of the next run's memory
        start = time.perf_counter()
        frame = score_answers(collection, answers, ranker, cache=False)
        nrp_times.append(time.perf_counter() - start)
    dimension = frame[frame["dimension"] == frame["dimension"].iloc[0]]
    same = (dimension["ties"].to_numpy() == ties) & (
        dimension["rank"].to_numpy() == above + ties / 2.0
    )
    emit(
        {
            "answers": len(answers),
            "queries": int(answers["qid"].nunique()),
            "mean_chars": float(answers["text"].str.len().mean()),
            "nrp_s": min(nrp_times),
            "limit_s": min(limit_times),
            "same_r": int(same.sum()),
        }
    )


# -- child: memory ------------------------------------------------------------------------------
def _memory(payload: dict) -> None:
    """A process that does what a user's does: load, build the answers, position them once."""
    import logging

    from nrp.collection.collection import Collection
    from nrp.positioning.scoring import score_answers

    logging.disable(logging.WARNING)
    collection = Collection.load("mediqa-2019", payload["indexes"])
    answers = build_answers(collection.candidates(), payload["answers"])
    before = peak_rss_mib()
    frame = score_answers(collection, answers, payload["spec"], cache=False)
    emit({"rows": len(frame), "answers_mib": before, "peak_mib": peak_rss_mib()})


# -- child: dense ---------------------------------------------------------------------------------
def _dense(payload: dict) -> None:
    import logging

    from nrp.collection.collection import Collection
    from nrp.positioning.scoring import score_answers

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from benchkit import load_ranker

    logging.disable(logging.WARNING)
    collection = Collection.load("mediqa-2019", payload["indexes"])
    candidates = collection.candidates()
    first = list(dict.fromkeys(candidates["qid"].astype(str)))[: payload["queries"]]
    candidates = candidates[candidates["qid"].astype(str).isin(set(first))]
    answers = build_answers(candidates, payload["answers"])
    # every answer a text of its own (build_answers reuses the documents' texts)
    answers = answers.assign(text=[f"{t} ({i})" for i, t in enumerate(answers["text"])])
    ranker, _, load_s = load_ranker(payload["spec"], collection)
    score_answers(collection, answers.head(8), ranker, cache=False)  # first-call set-up
    model, batch = ranker.model, int(ranker.params["batch"])
    touched = candidates[candidates["qid"].astype(str).isin(set(answers["qid"]))]
    texts = [  # the distinct texts: the least a forward pass must embed
        *dict.fromkeys(
            [
                *touched["text"].fillna("").astype(str),
                *answers["text"],
                *touched.drop_duplicates("qid")["query"].astype(str),
            ]
        )
    ]
    normalize = ranker.params["similarity"] == "cosine"
    nrp_times, bare_times = [], []
    for _ in range(payload["repeats"]):  # in turn: both see the same machine
        start = time.perf_counter()
        model.encode(texts, batch_size=batch, normalize_embeddings=normalize)
        bare_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        score_answers(collection, answers, ranker, cache=False)
        nrp_times.append(time.perf_counter() - start)
    import torch

    emit(
        {
            "answers": len(answers),
            "queries": int(answers["qid"].nunique()),
            "documents": len(touched),
            "texts": len(texts),
            "batch": batch,
            "nrp_s": min(nrp_times),
            "bare_s": min(bare_times),
            "load_s": load_s,
            "torch_threads": torch.get_num_threads(),
        }
    )


# -- child: scaling -------------------------------------------------------------------------------
def _scaling(payload: dict) -> None:
    import logging

    from nrp.collection.collection import Collection
    from nrp.positioning.scoring import score_answers
    from nrp.rankers.registry import make_ranker

    logging.disable(logging.WARNING)
    ranker = make_ranker(payload["spec"])
    mediqa = Collection.load("mediqa-2019", payload["indexes"])
    score_answers(mediqa, build_answers(mediqa.candidates(), 64), ranker, cache=False)
    by_answers = []
    for count in payload["answers"]:
        answers = build_answers(mediqa.candidates(), count)
        start = time.perf_counter()
        score_answers(mediqa, answers, ranker, cache=False)
        by_answers.append((count, time.perf_counter() - start))
    by_dq = []
    for size, name in payload["dq_collections"]:
        collection = Collection.load(name, payload["indexes"])
        answers = build_answers(collection.candidates(), payload["dq_answers"])
        start = time.perf_counter()
        score_answers(collection, answers, ranker, cache=False)
        by_dq.append((size, time.perf_counter() - start))
    emit({"by_answers": by_answers, "by_dq": by_dq})


def synthetic_collection(indexes: Path, folder: Path, size: int, queries: int) -> Path:
    """A collection of ``queries`` MEDIQA questions, each with ``size`` judged documents taken in
    turn from the MEDIQA texts; returns its manifest."""

    from nrp.collection.collection import Collection

    mediqa = Collection.load("mediqa-2019", indexes)
    candidates = mediqa.candidates()
    topics = candidates.drop_duplicates("qid").head(queries)
    texts = [" ".join(t.split()) for t in candidates["text"].fillna("").astype(str)]
    documents = [
        (str(q), f"{q}-{j}", texts[(i * size + j) % len(texts)])
        for i, q in enumerate(topics["qid"])
        for j in range(size)
    ]
    queries_of = list(zip(topics["qid"].astype(str), topics["query"].astype(str), strict=True))
    return write_table_collection(
        folder, f"dq-{size}", f"MEDIQA texts, D_q of {size}", queries_of, documents
    )


def _prepare(payload: dict) -> None:
    from nrp import ingest

    indexes = Path(payload["indexes"])
    ingest(MEDIQA_MANIFEST, indexes_dir=indexes)
    made = []
    for size in payload["dq_sizes"]:
        folder = indexes.parent / "sources" / f"dq-{size}"
        manifest = synthetic_collection(indexes, folder, size, payload["queries"])
        made.append((size, ingest(manifest, indexes_dir=indexes).name))
    emit({"dq_collections": made})


# -- parent ---------------------------------------------------------------------------------------
def main() -> int:
    if child_main({"--_prepare": _prepare, "--_lexical": _lexical, "--_memory": _memory,
                   "--_dense": _dense, "--_scaling": _scaling}):  # fmt: skip
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rankers", default="bm25,tfidf", help="lexical rankers (stats=query)")
    parser.add_argument("--answers", type=int, default=100_000, help="lexical answers")
    parser.add_argument("--dense-answers", type=int, default=2000, help="0: skip dense")
    parser.add_argument("--dense-repeats", type=int, default=1, help="dense: timed runs each")
    parser.add_argument("--dense-queries", type=int, default=40, help="dense: first N queries")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs each (best kept)")
    parser.add_argument("--no-scaling", action="store_true", help="skip the scaling curve")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per child")
    args = parser.parse_args()
    if not MEDIQA_DATA.exists():
        print(f"MEDIQA 2019 not found in {MEDIQA_DATA}: nothing to benchmark", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="nrp-bench-positioning-"))
    try:
        indexes = str(work / "indexes")
        prep = run_child(
            SCRIPT,
            "--_prepare",
            {
                "indexes": indexes,
                "dq_sizes": [] if args.no_scaling else list(SCALING_DQ),
                "queries": SCALING_DQ_QUERIES,
            },
        )
        print(f"machine: {machine()}; each section in its own process, nrp and its limit timed "
              f"in turn in that process, best of {args.repeats}\n")  # fmt: skip
        _print_lexical(args, indexes)
        if args.dense_answers > 0:
            _print_dense(args, indexes)
        if not args.no_scaling:
            _print_scaling(args, indexes, prep["dq_collections"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(measured("2 CPU cores shared with other work: ratios are what count"))
    return 0


def _print_lexical(args: argparse.Namespace, indexes: str) -> None:
    header = (
        f"{'lexical':<8} {'answers':>8} {'nrp/s':>8} {'limit/s':>8} {'nrp/limit':>9} "
        f"{'goal 0.5':>8} {'nrp/20k':>7} {'same r':>7}"
    )
    print(header)
    print("-" * len(header))
    specs = [s.strip() for s in args.rankers.split(",") if s.strip()]
    for spec in specs:
        payload = {"indexes": indexes, "spec": spec, "answers": args.answers,
                   "repeats": args.repeats}  # fmt: skip
        r = run_child(SCRIPT, "--_lexical", payload, timeout=args.timeout)
        nrp_rate, limit_rate = ratio(r["answers"], r["nrp_s"]), ratio(r["answers"], r["limit_s"])
        fraction = nrp_rate / limit_rate
        print(
            f"{spec:<8} {r['answers']:>8,} {nrp_rate:>8,.0f} {limit_rate:>8,.0f} "
            f"{fraction:>9.2f} {'met' if fraction >= LEXICAL_GOAL_FRACTION else 'not met':>8} "
            f"{nrp_rate / LEXICAL_GOAL_RATE:>7.2f} {r['same_r'] / r['answers']:>6.1%}"
        )
    memory = run_child(SCRIPT, "--_memory", {"indexes": indexes, "spec": specs[0],
                       "answers": args.answers}, timeout=args.timeout)  # fmt: skip
    print(
        f"  {r['queries']} queries, answers of {r['mean_chars']:,.0f} characters on average; "
        f"nrp: score_answers (cache=False), D_q indexed inside the call. goal: nrp/limit >= "
        f"{LEXICAL_GOAL_FRACTION}, and {LEXICAL_GOAL_RATE:,} answers/s (nrp/20k >= 1).\n"
        "  same r: answers the limit puts at nrp's mid-rank with nrp's ties (its own floats).\n"
        f"  memory: a process positioning {args.answers:,} answers with {specs[0]} peaks at "
        f"{memory['peak_mib']:,.0f} MiB RSS (goal < {MEMORY_GOAL_MIB}: "
        f"{'met' if memory['peak_mib'] < MEMORY_GOAL_MIB else 'not met'}), "
        f"{memory['answers_mib']:,.0f} MiB (high-water mark) with the answers built, before "
        "positioning.\n"
    )


def _print_dense(args: argparse.Namespace, indexes: str) -> None:
    payload = {"indexes": indexes, "spec": "dense:device=cpu,verbose=False",
               "answers": args.dense_answers, "queries": args.dense_queries,
               "repeats": args.dense_repeats}  # fmt: skip
    r = run_child(SCRIPT, "--_dense", payload, timeout=args.timeout * 2 * args.dense_repeats)
    fraction = ratio(r["bare_s"], r["nrp_s"])
    header = f"{'dense':<8} {'answers':>8} {'texts':>6} {'nrp s':>7} {'bare s':>7} {'bare/nrp':>8}"
    print(header)
    print("-" * len(header))
    print(
        f"{'MiniLM':<8} {r['answers']:>8,} {r['texts']:>6,} {r['nrp_s']:>7.2f} "
        f"{r['bare_s']:>7.2f} {fraction:>8.2f}  goal >= {DENSE_GOAL_FRACTION}: "
        f"{'met' if fraction >= DENSE_GOAL_FRACTION else 'not met'}"
    )
    print(
        f"  cold score_answers (cache=False: D_q of the {r['queries']} queries embedded in the "
        f"call, {r['documents']:,} documents) against SentenceTransformer.encode of the same "
        f"{r['texts']:,} distinct texts (documents, answers, queries), batch {r['batch']}, "
        f"{r['torch_threads']} torch threads; model load {r['load_s']:.1f} s, untimed.\n"
    )


def _print_scaling(args: argparse.Namespace, indexes: str, dq_collections: list) -> None:
    payload = {"indexes": indexes, "spec": "bm25", "answers": list(SCALING_ANSWERS),
               "dq_collections": dq_collections, "dq_answers": SCALING_DQ_ANSWERS}  # fmt: skip
    r = run_child(SCRIPT, "--_scaling", payload, timeout=args.timeout)
    print("scaling (bm25, stats=query; score_answers, cache=False)")
    for label, points in (
        ("answers (MEDIQA, 150 queries)", r["by_answers"]),
        (f"|D_q| ({SCALING_DQ_ANSWERS:,} answers, {SCALING_DQ_QUERIES} queries)", r["by_dq"]),
    ):
        line = ", ".join(f"{n:,}: {s:.2f} s" for n, s in points)
        print(f"  {label}: {line}; log-log slope {loglog_slope(points):.2f}, "
              f"{loglog_slope(points[-2:]):.2f} over the last two (1 = linear)")  # fmt: skip
        (x1, y1), (x2, y2) = points[-2:]
        if label.startswith("answers"):
            print(f"    marginal cost {(y2 - y1) / (x2 - x1) * 1e6:,.1f} us per answer")
        else:
            per = (y2 - y1) / (x2 - x1) / SCALING_DQ_ANSWERS
            print(f"    marginal cost {per * 1e9:,.0f} ns per (answer, document of D_q)")
    print(
        "  time = fixed cost + a per answer + b per answer and document of D_q (each answer\n"
        "  rescores its D_q: statistics over D_q plus the answer); slopes below 1 come from the\n"
        "  fixed and per-answer parts, above 1 would mean worse than linear.\n"
    )


if __name__ == "__main__":
    sys.exit(main())
