"""Read side of an ingested collection, with PyTerrier's column names (qid, query, docno, text,
label), so frames go straight into PyTerrier transformers and ir_measures."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from nrp.collection.build import default_indexes_dir
from nrp.collection.labels import LabelScale
from nrp.collection.store import STORE_FILE, read_meta, store_path
from nrp.errors import ConfigError, NrpError, quote

LabelMode = Literal["graded", "raw"]
#: the judgments ``Collection.qrels`` gives: every one, or those of D_q's documents
QrelsScope = Literal["all", "candidates"]
#: the topic field rankers read unless their spec names another (``dense:query=paraphrase``)
DEFAULT_QUERY_FIELD = "query"


def judgments_in(qrels: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``qrels`` whose (qid, docno) is a row of ``candidates`` (D_q), in order
    (index reset): what ``qrels(DIM, scope="candidates")`` and validation's qrels keep."""
    in_dq = set(zip(candidates["qid"].astype(str), candidates["docno"].astype(str), strict=True))
    keep = [(str(q), str(d)) in in_dq for q, d in zip(qrels["qid"], qrels["docno"], strict=True)]
    return qrels[keep].reset_index(drop=True)


class Collection:
    """A judged collection: topics, documents, graded judgments per dimension, references.

    D_q, the candidate set of topic q for validation and NRP, is the set of documents judged for q
    (in any dimension, "could not judge" labels included) that have text.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self._db_path = store_path(self.path)
        if not self._db_path.is_file():
            raise NrpError(f"no collection at {self.path} (run `nrp ingest MANIFEST --name NAME`)")
        self.meta: dict[str, Any] = read_meta(self._db_path)
        self.name: str = self.meta.get("name", self.path.name)

    @classmethod
    def load(cls, name: str, indexes_dir: str | Path | None = None) -> Collection:
        directory = Path(indexes_dir or default_indexes_dir()) / name
        if not store_path(directory).is_file():
            known = ", ".join(list_collections(indexes_dir)) or "none"
            raise NrpError(f"unknown collection {name!r} in {directory.parent} (known: {known})")
        return cls(directory)

    def __repr__(self) -> str:
        return f"Collection({self.name!r}, path={str(self.path)!r})"

    def _query(self, sql: str, params: tuple = ()) -> pd.DataFrame:
        with sqlite3.connect(f"file:{self._db_path}?mode=ro", uri=True) as db:
            return pd.read_sql_query(sql, db, params=params)

    @cached_property
    def dimensions(self) -> dict[str, LabelScale]:
        frame = self._query("SELECT name, scale FROM dimensions ORDER BY position")
        return {row.name: LabelScale.from_json(json.loads(row.scale)) for row in frame.itertuples()}

    @property
    def answer_dimension(self) -> str:
        """The dimension whose grades tell real answers from the rest: relevance where the
        collection has it, else its first."""
        return "relevance" if "relevance" in self.dimensions else next(iter(self.dimensions))

    @property
    def topics(self) -> pd.DataFrame:
        """qid, query, narrative."""
        return self._query("SELECT qid, query, narrative FROM topics ORDER BY rowid")

    # -- query formulations -------------------------------------------------------------------
    @cached_property
    def _extra_fields(self) -> pd.DataFrame:
        """qid, field, text of every topic text besides query and narrative (none in a store
        of schema 1, which predates topic fields)."""
        with sqlite3.connect(f"file:{self._db_path}?mode=ro", uri=True) as db:
            has_table = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'topic_fields'"
            ).fetchone()
        if not has_table:
            return pd.DataFrame({"qid": [], "field": [], "text": []}, dtype=object)
        return self._query("SELECT qid, field, text FROM topic_fields ORDER BY rowid")

    @cached_property
    def query_fields(self) -> list[str]:
        """The topic fields a ranker may read as its query: ``query``, ``narrative`` where any
        topic has one, then the other fields the input gave, in the order first given."""
        narrative = self._query(
            "SELECT COUNT(*) AS n FROM topics WHERE narrative IS NOT NULL AND narrative != ''"
        )["n"].iloc[0]
        extra = list(dict.fromkeys(self._extra_fields["field"]))
        return [DEFAULT_QUERY_FIELD, *(["narrative"] if narrative else []), *extra]

    @property
    def topic_fields(self) -> pd.DataFrame:
        """qid and one column per topic text besides query and narrative (LiveQA-Med:
        original, subject, message, paraphrase, summary), None where a topic lacks it."""
        wide = self._extra_fields.pivot(index="qid", columns="field", values="text")
        fields = [f for f in self.query_fields if f not in ("query", "narrative")]
        wide = wide.reindex(columns=fields)
        frame = self.topics[["qid"]].join(wide, on="qid")
        return frame.astype(object).where(frame.notna(), None)

    def topic_texts(self, field: str = DEFAULT_QUERY_FIELD) -> dict[str, str]:
        """qid -> the text of ``field`` for every topic; a topic without that field (an empty
        LiveQA paraphrase) keeps its query, so every topic is ranked. An unknown field is an
        error naming the known ones."""
        if field not in self.query_fields:
            raise ConfigError(
                f"collection {self.name!r} has no topic field {field!r} "
                f"(it has: {', '.join(self.query_fields)})"
            )
        topics = self.topics
        texts = dict(zip(topics["qid"].astype(str), topics["query"].astype(str), strict=True))
        if field == "narrative":
            given = topics[topics["narrative"].notna() & (topics["narrative"] != "")]
            texts.update(zip(given["qid"].astype(str), given["narrative"], strict=True))
        elif field != DEFAULT_QUERY_FIELD:
            given = self._extra_fields[self._extra_fields["field"] == field]
            texts.update(zip(given["qid"].astype(str), given["text"], strict=True))
        return texts

    @property
    def docs(self) -> pd.DataFrame:
        """docno, text, url, title: every document with text, judged or not."""
        return self._query("SELECT docno, text, url, title FROM documents ORDER BY rowid")

    @property
    def references(self) -> pd.DataFrame:
        """qid, ref_id, text: reference answers, where the collection has them."""
        return self._query("SELECT qid, ref_id, text FROM reference_answers ORDER BY rowid")

    def qrels(
        self, dimension: str, labels: LabelMode = "graded", scope: QrelsScope = "all"
    ) -> pd.DataFrame:
        """qid, docno, label in one dimension. ``graded``: the label scale's gains, with labels the
        scale excludes ("could not judge") left out. ``raw``: every judgment with its label as
        written, as a number (what the source study's scripts used): integers when every label
        of the dimension is a whole number, else floats. ``scope="candidates"``: only the
        judgments of D_q's documents (judged documents with text), the qrels validation scores
        rankers with, to pair with ``retriever()``; ``"all"``: every judgment, as trec_eval
        reads the official qrels."""
        if scope not in ("all", "candidates"):
            raise NrpError(f"scope must be 'all' or 'candidates', not {scope!r}")
        frame = self._qrels(dimension, labels)
        return frame if scope == "all" else judgments_in(frame, self.candidates())

    def retriever(self, query_field: str = DEFAULT_QUERY_FIELD) -> Any:
        """D_q as a PyTerrier retriever: for each query of its input, the query's judged
        documents with text (qid, query, docno, text; score 0.0 and rank in D_q's order), the
        candidate set nrp's rankers re-rank (they score the rows they are given, they do not
        retrieve). ``c.retriever() >> ranker`` with ``c.qrels(DIM, scope="candidates")`` in
        ``pt.Experiment`` gives the nDCG validation gives; the official qrels (``scope="all"``)
        also count judged documents that have no text, which no ranker here can return."""
        import pyterrier as pt

        frame = self.candidates(query_field=query_field)
        frame = frame.assign(score=0.0, rank=frame.groupby("qid", sort=False).cumcount())
        return pt.Transformer.from_df(frame)

    def _qrels(self, dimension: str, labels: LabelMode) -> pd.DataFrame:
        self._check_dimension(dimension)
        if labels == "graded":
            frame = self._query(
                "SELECT qid, docno, grade AS label FROM judgments "
                "WHERE dimension = ? AND grade IS NOT NULL ORDER BY rowid",
                (dimension,),
            )
            frame["label"] = frame["label"].astype(int)
            return frame
        if labels == "raw":
            frame = self._query(
                "SELECT qid, docno, raw_value AS label, raw_label FROM judgments "
                "WHERE dimension = ? ORDER BY rowid",
                (dimension,),
            )
            if frame["label"].isna().any():
                bad = frame.loc[frame["label"].isna(), "raw_label"].iloc[0]
                raise NrpError(
                    f"dimension {dimension!r} has non-numeric raw labels ({bad!r}); "
                    "use labels='graded'"
                )
            # whole numbers stay integers ("2", not "2.0"): TREC qrels written from them must
            # read back in trec_eval and ir_datasets, which parse the label as an int
            if (frame["label"] % 1 == 0).all():
                frame["label"] = frame["label"].astype(int)
            return frame.drop(columns="raw_label")
        raise NrpError(f"labels must be 'graded' or 'raw', not {labels!r}")

    def judgments(self, dimension: str | None = None) -> pd.DataFrame:
        """Every stored judgment with raw label, gain (None when excluded) and line count."""
        sql = "SELECT dimension, qid, docno, raw_label, raw_value, grade, lines FROM judgments"
        if dimension is None:
            return self._query(sql + " ORDER BY rowid")
        self._check_dimension(dimension)
        return self._query(sql + " WHERE dimension = ? ORDER BY rowid", (dimension,))

    def candidates(
        self, qid: str | None = None, query_field: str = DEFAULT_QUERY_FIELD
    ) -> pd.DataFrame:
        """D_q as rows (qid, query, docno, text): judged documents with text (one topic or all).
        ``query_field``: the topic field in the ``query`` column (``topic_texts``)."""
        sql = (
            "SELECT t.qid, t.query, d.docno, d.text FROM topics t "
            "JOIN (SELECT DISTINCT qid, docno FROM judgments) j ON j.qid = t.qid "
            "JOIN documents d ON d.docno = j.docno"
        )
        if qid is None:
            frame = self._query(sql + " ORDER BY t.rowid, d.rowid")
        else:
            frame = self._query(sql + " WHERE t.qid = ? ORDER BY d.rowid", (qid,))
        if query_field != DEFAULT_QUERY_FIELD:
            frame["query"] = frame["qid"].astype(str).map(self.topic_texts(query_field))
        return frame

    def judged_docs_for(self, qid: str) -> pd.DataFrame:
        """D_q of one topic: docno, text."""
        return self.candidates(qid)[["docno", "text"]]

    def _check_dimension(self, dimension: str) -> None:
        self.check_dimensions([dimension])

    def check_dimensions(self, names: Iterable[object]) -> None:
        """ConfigError naming the first of ``names`` that is not a dimension of this collection
        (a ranker, weight or setting for it would be silently ignored)."""
        for name in names:
            if name not in self.dimensions:
                raise ConfigError(
                    f"collection {self.name!r} has no dimension {quote(name)} "
                    f"(it has: {', '.join(self.dimensions)})"
                )


def list_collections(indexes_dir: str | Path | None = None) -> list[str]:
    root = Path(indexes_dir or default_indexes_dir())
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / STORE_FILE).is_file())
