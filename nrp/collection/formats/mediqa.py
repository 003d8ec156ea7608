"""MEDIQA 2019 Task 3 (question answering) XML: consumer questions, each with its own list of
CHiQA-retrieved candidate answers (full text) graded 1-4 in ``ReferenceScore``.

One file gives all three kinds of record: a Topic per ``<Question QID>``, a Document per
``<Answer AID>`` (AIDs are "<QID>_AnswerN", unique within a file) and a Judgment per answer whose
grade is the raw ``ReferenceScore`` (4 Excellent, 3 Correct but incomplete, 2 Related,
1 Incorrect; the manifest's label map turns it into a gain). ``ReferenceRank`` (gold order) and
``SystemRank`` (CHiQA's order) are not read: the score is the judgment, the ranks follow from it.

The four released files (test with labels, validation, two training sets) all number questions
from 1 and answers "1_Answer1"..., so the same ids recur across files: ``id_prefix`` keeps them
apart when one collection reads more than one file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.reading import XmlNode, parse_xml
from nrp.collection.records import Document, Judgment, Origin, Record, Topic
from nrp.errors import InputError, quote


def read(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """Topics, documents and judgments of one MEDIQA Task 3 XML file, in file order."""
    path = Path(path)
    dimension = str(options.get("dimension") or "relevance")
    allow_unjudged = bool(options.get("allow_unjudged", False))
    prefix = str(options.get("id_prefix") or "")
    root = parse_xml(path)
    questions = list(root.iter("Question"))
    if not questions:
        raise InputError(
            path, root.line, f"no <Question> element under <{root.tag}>: not a MEDIQA Task 3 file"
        )
    seen_qids: dict[str, int] = {}
    seen_aids: dict[str, int] = {}
    for question in questions:
        qid = _attribute(question, "QID", path, "question")
        if qid in seen_qids:
            raise InputError(
                path,
                question.line,
                f"question QID {quote(qid)} given twice (first at line {seen_qids[qid]})",
            )
        seen_qids[qid] = question.line
        query = _text_of(question, "QuestionText")
        if not query:
            raise InputError(path, question.line, f"question {quote(qid)} has no <QuestionText>")
        yield Topic(prefix + qid, query, None, Origin(str(path), question.line))
        answers = list(question.iter("Answer"))
        if not answers:
            report.count("mediqa-xml: questions without candidate answers")
        for answer in answers:
            yield from _answer(
                answer, prefix + qid, path, dimension, allow_unjudged, prefix, seen_aids, report
            )


def _answer(
    answer: XmlNode,
    qid: str,
    path: Path,
    dimension: str,
    allow_unjudged: bool,
    prefix: str,
    seen_aids: dict[str, int],
    report: ReadReport,
) -> Iterator[Record]:
    aid = _attribute(answer, "AID", path, f"answer of question {quote(qid)}")
    if aid in seen_aids:
        raise InputError(
            path,
            answer.line,
            f"answer AID {quote(aid)} given twice (first at line {seen_aids[aid]})",
        )
    seen_aids[aid] = answer.line
    origin = Origin(str(path), answer.line)
    docno = prefix + aid
    text = _text_of(answer, "AnswerText")
    if text:
        yield Document(docno, text, _text_of(answer, "AnswerURL") or None, None, origin)
    else:  # a judged docno without text is usable (the store counts it), not an error
        report.count("mediqa-xml: answers without text")
    score = (answer.attrib.get("ReferenceScore") or "").strip()
    if score:
        yield Judgment(qid, docno, dimension, score, origin)
    elif allow_unjudged:
        report.count("mediqa-xml: answers without ReferenceScore (no judgment)")
    else:
        raise InputError(
            path,
            answer.line,
            f"answer {quote(aid)} has no ReferenceScore (an unlabeled file? "
            "set allow_unjudged: true to read its answers without judgments)",
        )


def _attribute(node: XmlNode, name: str, path: Path, what: str) -> str:
    value = (node.attrib.get(name) or "").strip()
    if not value:
        raise InputError(path, node.line, f"{what} without {name} attribute")
    return value


def _text_of(node: XmlNode, tag: str) -> str:
    """All text of the child ``tag`` (whitespace-normalised), or "" when there is none."""
    child = node.find(tag)
    return child.itertext() if child is not None else ""


FORMAT = Format(
    name="mediqa-xml",
    description=(
        "MEDIQA 2019 Task 3 QA XML (<Question QID><QuestionText><AnswerList><Answer AID "
        "ReferenceScore><AnswerURL><AnswerText>): a topic per question, a document per answer "
        "(docno = AID), a judgment per answer with grade = ReferenceScore (1-4)"
    ),
    provides=("topics", "documents", "judgments"),
    read=read,
    options={
        "dimension": Option(str, "quality dimension of the ReferenceScore judgments", "relevance"),
        "allow_unjudged": Option(
            bool,
            "read answers without ReferenceScore (the unlabeled test file) as documents with no "
            "judgment instead of stopping with an error",
            False,
        ),
        "id_prefix": Option(
            str,
            "prepended to every QID and AID (the four MEDIQA files reuse ids '1', "
            "'1_Answer1', ...)",
            "",
        ),
    },
)

register(FORMAT)
