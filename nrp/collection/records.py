"""The records a judged collection is made of, as readers yield them.

Records are namedtuples (as in ir_datasets). Every record carries its ``origin`` (file, line), so
that checks made after reading (unknown qid, conflicting repeated judgments, grade outside the
label map) can still name the file and line of the offending input.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import NamedTuple

#: a topic field's name, what a ranker spec writes after ``query=``: lower-case letters, digits
#: and _, starting with a letter (``paraphrase``, ``desc``); not one of the topic's own columns
FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
TOPIC_COLUMNS = ("qid", "query", "narrative")


class Origin(NamedTuple):
    path: str
    line: int | None = None

    def __str__(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


class Topic(NamedTuple):
    """A query of the collection. ``query`` is the text rankers read by default and
    ``narrative`` the longer description where the source has one; ``fields`` holds every other
    text the source gives the topic (LiveQA-Med: ``original``, ``subject``, ``message``,
    ``paraphrase``, ``summary``; ArgQuality: ``long``, ``short``), by field name, so a ranker can
    read another formulation (``dense:query=paraphrase``). Empty texts are left out."""

    qid: str
    query: str
    narrative: str | None = None
    origin: Origin | None = None
    fields: Mapping[str, str] | None = None


class Document(NamedTuple):
    docno: str
    text: str
    url: str | None = None
    title: str | None = None
    origin: Origin | None = None


class Judgment(NamedTuple):
    """One human grade of one document for one topic in one quality dimension.

    ``grade`` is the raw label exactly as the file writes it ("2", "1-Incorrect", "-0.63"); the
    dimension's label map in the manifest turns it into a graded gain.
    """

    qid: str
    docno: str
    dimension: str
    grade: str
    origin: Origin | None = None


class Reference(NamedTuple):
    """A reference (gold) answer for a topic, used by reference-based evaluators."""

    qid: str
    text: str
    ref_id: str | None = None
    origin: Origin | None = None


Record = Topic | Document | Judgment | Reference


#: the identifier fields of the records: normalised to Unicode NFC on read
ID_FIELDS = ("qid", "docno", "ref_id")


def nfc(text: str) -> str:
    """``text`` in Unicode normal form C: an id typed as "é" (one code point) and one written
    as "e" + combining accent (NFD, as macOS file names are) are the same id."""
    return unicodedata.normalize("NFC", text)


def with_nfc_ids(record: Record) -> Record:
    """``record`` with its ids (qid, docno, ref_id) in NFC, so topics, judgments, documents
    and answers written by different tools still meet on the same ids."""
    changes = {
        name: nfc(value)
        for name in ID_FIELDS
        if isinstance(value := getattr(record, name, None), str)
        and not unicodedata.is_normalized("NFC", value)
    }
    return record._replace(**changes) if changes else record
