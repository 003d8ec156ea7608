"""TREC 2017 LiveQA medical task: test questions with reference answers (XML), and the 2,479
MedQuAD answers judged for those questions in Ben Abacha & Demner-Fushman (BMC Bioinformatics
2019): a qrels file and a CSV of answer texts.

The two parts number questions differently: the XML names them ``TQ1``..``TQ104`` (and its
reference answers ``TQ1A1``...), the qrels file writes the bare number (``1``..``104``; 83 has no
judged answer). ``medquad-judged-qrels`` turns question N into ``TQN`` (option ``qid_prefix``), so
judgments and topics meet on the XML's ids. The mapping was checked on the data: the judged
answers of qrels question N are about the focus of TQN (1: Noonan syndrome / polycystic kidneys,
4: VDRL positive -> syphilis, 82: diabetes), and no shift of the numbering fits better.

The query of a topic is by default the consumer's own question, "SUBJECT. MESSAGE": that is what
LiveQA systems were sent and how MEDIQA 2019 (TrainingSet1, the same 104 questions) and its CHiQA
answers took it. The NIST paraphrase was written by the assessors to judge answers with (LiveQA
readme), so it becomes the topic's narrative; ``query: paraphrase`` or ``summary`` (NLM-Summary,
-w-summaries file only) give the cleaned-up forms instead. Every formulation is also kept as a
topic field (``original``, ``subject``, ``message``, ``paraphrase``, ``summary``, ``focus``,
``keywords``), so a ranker can read another one without a second collection
(``dense:query=paraphrase``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.reading import XmlNode, iter_lines, iter_table, parse_xml
from nrp.collection.records import Document, Judgment, Origin, Record, Reference, Topic
from nrp.errors import ConfigError, InputError, clip, quote

QUERY_CHOICES = ("original", "paraphrase", "summary")

# The LiveQA 2017 scale, as the qrels file spells it (same four grades as MEDIQA's 1-4).
GRADE_LABELS = ("1-Incorrect", "2-Related", "3-Incomplete", "4-Excellent")

# A MedQuAD answer in the CSV is "Question: ...\nURL: ...\nAnswer: ..." (the QA pair it came from).
_MEDQUAD_TEXT = re.compile(
    r"\AQuestion:(?P<question>.*?)\nURL:(?P<url>.*?)\nAnswer:(?P<answer>.*)\Z", re.S
)


# --- liveqa-med-xml --------------------------------------------------------------------------


def read_questions(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """A Topic per <NLM-QUESTION qid>, then its reference answers as Reference records."""
    path = Path(path)
    query_from = str(options.get("query") or "original")
    if query_from not in QUERY_CHOICES:
        raise ConfigError(
            f"liveqa-med-xml: option 'query' must be one of {', '.join(QUERY_CHOICES)}, "
            f"got {quote(query_from)}"
        )
    root = parse_xml(path)
    questions = list(root.iter("NLM-QUESTION"))
    if not questions:
        raise InputError(
            path, root.line, f"no <NLM-QUESTION> element under <{root.tag}>: not a LiveQA test file"
        )
    seen: dict[str, int] = {}
    for question in questions:
        qid = (question.attrib.get("qid") or "").strip()
        if not qid:
            raise InputError(path, question.line, "question without qid attribute")
        if qid in seen:
            raise InputError(
                path,
                question.line,
                f"question qid {quote(qid)} given twice (first at line {seen[qid]})",
            )
        seen[qid] = question.line
        yield _topic(question, qid, query_from, path, report)
        yield from _references(question, qid, path, report)


def _topic(question: XmlNode, qid: str, query_from: str, path: Path, report: ReadReport) -> Topic:
    origin = Origin(str(path), question.line)
    fields = _fields(question)
    original = fields.get("original", "")
    if not original:
        raise InputError(
            path, question.line, f"question {quote(qid)} has no SUBJECT or MESSAGE text"
        )
    paraphrase = fields.get("paraphrase", "")
    if query_from == "original":
        return Topic(qid, original, paraphrase or None, origin, fields)
    if query_from == "paraphrase":
        if paraphrase:
            return Topic(qid, paraphrase, None, origin, fields)
        report.counted_warning(
            "liveqa-med-xml: empty NIST-PARAPHRASE, original question used as query",
            1,
            f"{origin}: question {qid} has an empty NIST-PARAPHRASE; query is the original",
        )
        return Topic(qid, original, None, origin, fields)
    if question.find("NLM-Summary") is None:
        raise InputError(
            path,
            question.line,
            f"question {quote(qid)} has no <NLM-Summary>: query 'summary' needs the "
            "TREC-2017-LiveQA-Medical-Test-Questions-w-summaries.xml file",
        )
    summary = fields.get("summary", "")
    if summary:
        return Topic(qid, summary, paraphrase or None, origin, fields)
    report.counted_warning(
        "liveqa-med-xml: empty NLM-Summary, original question used as query",
        1,
        f"{origin}: question {qid} has an empty NLM-Summary; query is the original",
    )
    return Topic(qid, original, paraphrase or None, origin, fields)


def _fields(question: XmlNode) -> dict[str, str]:
    """Every text of a question by field name, the empty ones left out: ``original`` (SUBJECT.
    MESSAGE), ``subject``, ``message``, ``paraphrase`` (NIST-PARAPHRASE), ``summary``
    (NLM-Summary), ``focus`` and ``keywords`` (the annotated FOCUS and KEYWORD terms, joined by
    "; "). The names do not depend on the ``query`` option, so ``dense:query=paraphrase`` means
    the same text whichever formulation the manifest made the topic's query."""
    source = question.find("Original-Question")
    fields = {
        "original": _original_question(question),
        "subject": _text(source, "SUBJECT") if source is not None else "",
        "message": _text(source, "MESSAGE") if source is not None else "",
        "paraphrase": _text(question, "NIST-PARAPHRASE"),
        "summary": _text(question, "NLM-Summary"),
        "focus": _terms(question, "FOCUS"),
        "keywords": _terms(question, "KEYWORD"),
    }
    return {name: text for name, text in fields.items() if text}


def _terms(question: XmlNode, tag: str) -> str:
    annotations = question.find("ANNOTATIONS")
    if annotations is None:
        return ""
    return "; ".join(text for text in (t.itertext() for t in annotations.findall(tag)) if text)


def _original_question(question: XmlNode) -> str:
    """SUBJECT and MESSAGE joined as "subject. message", as MEDIQA 2019 wrote these questions, but
    without doubling a subject's own closing mark ("Nph. Nph." where MEDIQA has "Nph.. Nph.")."""
    original = question.find("Original-Question")
    if original is None:
        return ""
    subject, message = _text(original, "SUBJECT"), _text(original, "MESSAGE")
    if subject and message:
        return f"{subject} {message}" if subject[-1] in ".?!:" else f"{subject}. {message}"
    return subject or message


def _references(question: XmlNode, qid: str, path: Path, report: ReadReport) -> Iterator[Reference]:
    # The file writes both <ReferenceAnswer> and (for TQ1) <RefAnswer>.
    container = question.find("ReferenceAnswers")
    answers = [
        child
        for child in (container.children if container is not None else [])
        if child.tag in ("ReferenceAnswer", "RefAnswer")
    ]
    if not answers:
        report.count("liveqa-med-xml: questions without reference answers")
    for answer in answers:
        text = _text(answer, "ANSWER")
        if not text:
            report.count("liveqa-med-xml: empty reference answers skipped")
            continue
        ref_id = (answer.attrib.get("aid") or "").strip() or None
        yield Reference(qid, text, ref_id, Origin(str(path), answer.line))


def _text(node: XmlNode, tag: str) -> str:
    child = node.find(tag)
    return child.itertext() if child is not None else ""


# --- medquad-judged-qrels --------------------------------------------------------------------


def read_qrels(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """A Judgment per "<question number> <grade label> <AnswerID>" line; qid = prefix + number."""
    path = Path(path)
    dimension = str(options.get("dimension") or "relevance")
    prefix = str(options.get("qid_prefix", "TQ") or "")
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 3:
            raise InputError(
                path,
                number,
                f"expected 3 fields (question number, grade, AnswerID), found {len(fields)}",
            )
        qnum, label, docno = fields
        number_text = qnum.lstrip("0")  # no int(): a 5,000-digit number would not convert
        if not (qnum.isascii() and qnum.isdigit()) or not number_text:
            raise InputError(
                path, number, f"question number {quote(qnum)} is not a positive integer"
            )
        if label not in GRADE_LABELS:
            raise InputError(
                path,
                number,
                f"unknown grade label {quote(label)}; expected one of {', '.join(GRADE_LABELS)}",
            )
        yield Judgment(f"{prefix}{number_text}", docno, dimension, label, Origin(str(path), number))


# --- medquad-answers -------------------------------------------------------------------------


def read_answers(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Record]:
    """A Document per distinct AnswerID of the CSV (AnswerID,Answer; one row per judgment line,
    so answers judged more than once recur: identical rows are merged, different texts refused)."""
    path = Path(path)
    text_from = str(options.get("text") or "answer")
    if text_from not in ("answer", "full"):
        raise ConfigError(
            f"medquad-answers: option 'text' must be answer or full, got {quote(text_from)}"
        )
    seen: dict[str, tuple[int, str]] = {}
    checked_header = False
    for line, row in iter_table(path, ","):
        if not checked_header:
            if list(row) != ["AnswerID", "Answer"]:
                raise InputError(
                    path, 1, f"expected the columns AnswerID, Answer; found {clip(', '.join(row))}"
                )
            checked_header = True
        docno = row["AnswerID"].strip()
        if not docno:
            raise InputError(path, line, "AnswerID is empty")
        raw = row["Answer"].replace("\r\n", "\n")
        if docno in seen:
            first_line, first_raw = seen[docno]
            if first_raw != raw:
                raise InputError(
                    path,
                    line,
                    f"answer {quote(docno)} given again with a different text "
                    f"(first at line {first_line})",
                )
            report.count("medquad-answers: repeated rows with identical text merged")
            continue
        seen[docno] = (line, raw)
        document = _document(docno, raw, text_from, Origin(str(path), line), report)
        if document is not None:
            yield document
    if not checked_header:
        raise InputError(path, 1, "no answer rows below the header")


def _document(
    docno: str, raw: str, text_from: str, origin: Origin, report: ReadReport
) -> Document | None:
    match = _MEDQUAD_TEXT.match(raw.strip())
    if match is None:
        report.count("medquad-answers: answers without the Question/URL/Answer layout (kept whole)")
        text, url, title = raw.strip(), None, None
    else:
        answer = match["answer"].strip()
        # The export closes every answer with a ")" that opens nowhere ("... health problems.)"):
        # drop it from the answer text, but only when it is unmatched.
        if answer.endswith(")") and answer.count(")") > answer.count("("):
            answer = answer[:-1].rstrip()
            if text_from == "answer":
                report.count("medquad-answers: unmatched ')' closing the answer removed")
        text = raw.strip() if text_from == "full" else answer
        url, title = match["url"].strip() or None, match["question"].strip() or None
    if not text:
        report.count("medquad-answers: answers without text")
        return None
    return Document(docno, text, url, title, origin)


FORMATS = [
    Format(
        name="liveqa-med-xml",
        description=(
            "TREC 2017 LiveQA medical test questions (<NLM-QUESTION qid>, also the -w-summaries "
            "file): a topic per question and its <ReferenceAnswer>s as reference answers"
        ),
        provides=("topics", "references"),
        read=read_questions,
        options={
            "query": Option(
                str,
                "what the topic's query is: original (SUBJECT. MESSAGE, the consumer's own words), "
                "paraphrase (NIST-PARAPHRASE; the original where it is empty) or summary "
                "(NLM-Summary, -w-summaries file only)",
                "original",
            ),
        },
    ),
    Format(
        name="medquad-judged-qrels",
        description=(
            "qrels of the 2,479 MedQuAD answers judged for the LiveQA-Med 2017 test questions: "
            "'<question number> <grade> <AnswerID>' lines, grade 1-Incorrect .. 4-Excellent"
        ),
        provides=("judgments",),
        read=read_qrels,
        options={
            "dimension": Option(str, "quality dimension of the judgments", "relevance"),
            "qid_prefix": Option(
                str,
                "prepended to the question number to give the topic id: question 1 is TQ1 in the "
                "LiveQA test XML",
                "TQ",
            ),
        },
    ),
    Format(
        name="medquad-answers",
        description=(
            "CSV (AnswerID,Answer) of the judged MedQuAD answers; each Answer is 'Question: ... "
            "URL: ... Answer: ...': a document per AnswerID with the URL and the MedQuAD question "
            "as title"
        ),
        provides=("documents",),
        read=read_answers,
        options={
            "text": Option(
                str,
                "document text: answer (the text after 'Answer:', less the unmatched ')' the "
                "export closes every answer with) or full (question, URL and answer as written)",
                "answer",
            ),
        },
    ),
]

register(*FORMATS)
