"""Raw labels stay integers where the source file had integers, so TREC qrels written from
``Collection.qrels(..., labels="raw")`` read back in ir_datasets (whose TREC qrels parser takes
the label with ``int()``: "2.0" fails) with the file's values."""

from __future__ import annotations

import csv
from importlib import resources

from ir_datasets.formats import TrecQrels
from ir_datasets.util import LocalDownload

from nrp import Collection, ingest

DEMO = resources.files("nrp") / "data" / "demo"


def test_trec_qrels_from_raw_labels_read_back_in_ir_datasets(tmp_path):
    ingest(DEMO / "manifest.yaml", indexes_dir=tmp_path / "ix")
    demo = Collection.load("demo", tmp_path / "ix")
    with open(DEMO / "qrels.tsv", newline="") as source:
        rows = list(csv.DictReader(source, delimiter="\t"))
    for dimension in ("relevance", "readability"):
        raw = demo.qrels(dimension, labels="raw")
        assert raw["label"].dtype.kind == "i"
        path = tmp_path / f"{dimension}.qrels"
        raw.assign(iteration=0)[["qid", "iteration", "docno", "label"]].to_csv(
            path, sep=" ", header=False, index=False
        )
        # the first line as written: d1 0 d1-01 0 (the file's first row), not "0.0"
        assert path.read_text().splitlines()[0] == f"d1 0 d1-01 {rows[0][dimension]}"
        read = [(q.query_id, q.doc_id, q.relevance) for q in
                TrecQrels(LocalDownload(path), {}).qrels_iter()]  # fmt: skip
        expected = [(r["qid"], r["docno"], int(r[dimension])) for r in rows]
        assert read == expected and len(read) == 122
