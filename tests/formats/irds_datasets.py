"""Small ir_datasets datasets registered from local files, for tests/formats/test_irds.py.

ir_datasets cannot download here, so the tests register their own datasets the way a user
registers a private one: ``ir_datasets.registry.register(ID, Dataset(TsvDocs(...), ...))`` over
files the test writes. Imported by the test and by the ``nrp`` processes the test starts (which
register the same datasets in their own registry before running the command).
"""

from __future__ import annotations

import codecs
import socket
import sys
from pathlib import Path
from typing import NamedTuple

import ir_datasets
from ir_datasets.formats import BaseQrels, TrecQrels, TrecQuery, TsvDocs, TsvQueries
from ir_datasets.util import Download, LocalDownload, RequestsDownload

DOCS = (
    "d1\tVitamin C does not prevent colds in most people.\n"
    "d2\tColds are caused by viruses.\n"
    "d3\tIbuprofen can raise blood pressure.\n"
    "d4\tA page nobody judged.\n"
    "d5\t\n"
)
QUERIES = (
    "q1\tvitamin c colds\tDoes vitamin C prevent colds?\tSay whether it prevents colds.\n"
    "q2\tibuprofen blood pressure\tDoes ibuprofen raise blood pressure?\t\n"
)
QRELS = "q1 0 d1 2\nq1 0 d2 1\nq1 0 d5 0\nq2 0 d3 2\nq2 0 d1 0\n"
QRELS_DEFS = {0: "not relevant", 1: "relevant", 2: "highly relevant"}
# qid iteration docno relevance trustworthiness
GRADED = "q1 0 d1 2 1\nq1 0 d2 1 0\nq2 0 d3 2 1\n"
CREDIBILITY = "q1 0 d1 1\nq2 0 d3 0\nq2 0 d2 -1\n"


class GradedQrel(NamedTuple):
    query_id: str
    doc_id: str
    relevance: int
    trustworthiness: int
    iteration: str


class GradedQrels(BaseQrels):
    """Qrels with two grade fields, as ir_datasets' CLEF eHealth qrels have."""

    def __init__(self, path: Path):
        self._dlc = LocalDownload(path)

    def qrels_iter(self):
        with self._dlc.stream() as stream:
            for line in codecs.getreader("utf8")(stream):
                qid, iteration, docno, rel, trust = line.split()
                yield GradedQrel(qid, docno, int(rel), int(trust), iteration)

    def qrels_cls(self):
        return GradedQrel

    def qrels_defs(self):
        return QRELS_DEFS


def write_files(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {
        "docs.tsv": DOCS,
        "queries.tsv": QUERIES,
        "qrels": QRELS,
        "graded": GRADED,
        "credibility": CREDIBILITY,
    }.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def closed_port() -> int:
    """A loopback port nothing listens on: a download from it fails at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def register(prefix: str, folder: Path) -> None:
    """Register ``PREFIX/tiny`` (docs, queries, TREC qrels with qrels_defs), ``PREFIX/graded``
    (two grade fields), ``PREFIX/credibility`` (qrels only, no qrels_defs), ``PREFIX/no-qrels``
    and ``PREFIX/remote`` (its docs must be downloaded) over the files in ``folder``."""
    docs = TsvDocs(LocalDownload(folder / "docs.tsv"))
    queries = TsvQueries(LocalDownload(folder / "queries.tsv"), query_cls=TrecQuery)
    remote = Download(
        [RequestsDownload(f"http://127.0.0.1:{closed_port()}/docs.tsv", tries=1)],
        cache_path=str(folder / "not-downloaded" / "docs.tsv"),
    )
    datasets = {
        "tiny": (docs, queries, TrecQrels(LocalDownload(folder / "qrels"), QRELS_DEFS)),
        "graded": (docs, queries, GradedQrels(folder / "graded")),
        "credibility": (TrecQrels(LocalDownload(folder / "credibility"), {}),),
        "no-qrels": (docs, queries),
        "remote": (TsvDocs(remote), queries, TrecQrels(LocalDownload(folder / "qrels"), {})),
    }
    for name, parts in datasets.items():
        ir_datasets.registry.register(f"{prefix}/{name}", ir_datasets.Dataset(*parts))


if __name__ == "__main__":  # python irds_datasets.py PREFIX FOLDER nrp-arguments...
    register(sys.argv[1], Path(sys.argv[2]))
    from nrp.cli import main

    sys.exit(main(sys.argv[3:]))
