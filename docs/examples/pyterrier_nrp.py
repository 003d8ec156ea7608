"""nrp in PyTerrier, end to end on the demo collection (docs/pyterrier.md).

1. nrp's rankers in pt.Experiment: re-ranking D_q gives the nDCG@10 that validation reports,
   and a ranking sorted best first, so ``% 1`` keeps each query's best document.
2. Any PyTerrier transformer as a ranker: a doc_score function, validated beside tfidf and bm25
   under a name of its own, the result saved where ``nrp score`` reads it.
3. NRP as a measure: pt.Experiment over answer pipelines (pyterrier-rag's ``qanswer``), two of
   them answering with the top document of tfidf and of bm25.

Run it with ``python docs/examples/pyterrier_nrp.py``; tests/test_pyterrier_example.py runs it.
"""

from __future__ import annotations

import sys
import tempfile
from importlib import resources

import ir_measures
import pyterrier as pt

import nrp


def word_overlap(row) -> float:
    """The share of the query's distinct words that the text contains."""
    query = set(row["query"].lower().split())
    return len(query & set(row["text"].lower().split())) / len(query)


def main(indexes_dir: str) -> dict:
    nrp.ingest(resources.files("nrp") / "data" / "demo" / "manifest.yaml", indexes_dir=indexes_dir)
    demo = nrp.Collection.load("demo", indexes_dir)

    # 1. nrp's rankers re-rank D_q (the collection's retriever gives it); the qrels of D_q are
    # the ones validation uses
    candidates = demo.retriever()
    qrels = demo.qrels("relevance", scope="candidates")
    rankers = {spec: candidates >> nrp.make_ranker(spec) for spec in ("tfidf", "bm25")}
    ndcg = pt.Experiment(
        list(rankers.values()), demo.topics, qrels, [ir_measures.nDCG @ 10],
        names=list(rankers), plan="tree", verbose=False,
    )  # fmt: skip
    # each query's rows come best first with rank 0, 1, ...: % 1 keeps the top document
    top = {spec: (ranker % 1)(demo.topics) for spec, ranker in rankers.items()}

    # 2. any transformer as a ranker: give it a fingerprint (its score-cache key)
    overlap = nrp.from_transformer(
        pt.apply.doc_score(word_overlap), fingerprint="overlap-v1", name="overlap"
    )
    # guard (dense with texts that only mirror or evade the question put below real answers):
    # validation passes over the rankers an echo of the question tops (docs/validity.md);
    # save=True writes validation.json where `nrp validate demo` writes it
    validation = nrp.validate(demo, [overlap, "tfidf", "bm25", "guard"], save=True)

    # 3. NRP as a measure of answer pipelines, with the rankers validated above
    docs = demo.qrels("relevance").merge(demo.docs[["docno", "text"]])
    best = docs.sort_values(["qid", "label", "docno"], ascending=[True, False, True])
    best = best.drop_duplicates("qid").set_index("qid")["text"]
    top_text = pt.apply.generic(lambda t: t.assign(qanswer=t["text"]))  # the top document
    pipelines = {
        "copy-best": pt.apply.generic(lambda t: t.assign(qanswer=t["qid"].map(best))),
        "off-topic": pt.apply.generic(lambda t: t.assign(qanswer="Opening hours: 9 to 5.")),
        **{f"{spec}-top": ranker % 1 >> top_text for spec, ranker in rankers.items()},
    }
    nrp_table = pt.Experiment(
        list(pipelines.values()), demo.topics, demo.qrels("relevance"),
        nrp.nrp_measures(demo), names=list(pipelines), validate="ignore",
    )  # fmt: skip
    return {"ndcg": ndcg, "top": top, "validation": validation, "nrp": nrp_table, "best": best}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        found = main(folder)
        print(found["ndcg"], found["validation"].chosen(), found["nrp"], sep="\n\n")
    sys.exit(0)
