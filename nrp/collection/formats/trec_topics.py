"""TREC/CLEF topic files: the XML layout (``<topics><topic><id/><query/></topic>``, with its
many variants) and the classic TREC SGML layout (``<top><num> Number: 301 <title> ...</top>``),
which is not well-formed XML and so is read line by line.

Besides the query and the narrative, every other text element of a topic (``<desc>`` of a TREC
topic, ``<description>`` beside ``<narrative>``) is kept as a topic field named by its tag, so a
ranker can read it as its query (``bm25:query=desc``)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.reading import XmlNode, iter_lines, parse_xml, read_text
from nrp.collection.records import FIELD_NAME, Origin, Topic
from nrp.errors import InputError, quote

# Where topic files put the id: a child element or an attribute of <topic>, first match wins.
ID_ELEMENTS = ("id", "num", "number", "qid", "topic_id")
ID_ATTRIBUTES = ("number", "id", "num", "qid")
QUERY_ELEMENTS = ("query", "title")
NARRATIVE_ELEMENTS = ("narrative", "description")
SGML_QUERY_ELEMENTS = ("title",)
SGML_NARRATIVE_ELEMENTS = ("narr", "desc")

# The labels TREC writes at the start of a field ("<num> Number: 301", "<desc> Description:").
FIELD_LABEL = re.compile(
    r"^\s*(?:Number|Topic|Title|Description|Narrative|Summary|Domain|Concept\(s\)|"
    r"Factor\(s\)|Definition\(s\))\s*:\s*",
    re.IGNORECASE,
)
# A "&" that starts no entity reference: not XML, but CLEF's topics_narrative.txt has two.
BARE_AMPERSAND = re.compile(r"&(?!#?\w+;)")
SGML_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z]+)\s*>")


def _extra_fields(elements: list[tuple[str, str]], used: set[str]) -> dict[str, str] | None:
    """Every other text element of a topic (``<desc>`` beside ``<title>`` and ``<narr>``) as a
    topic field named by its tag, lower-cased: the first of a tag, non-empty texts only, and
    only tags a ranker spec can write as a field name (``FIELD_NAME``; not ``fact-1``)."""
    fields: dict[str, str] = {}
    for tag, text in elements:
        name = tag.lower()
        if name in used or name in fields or not FIELD_NAME.match(name) or not text:
            continue
        fields[name] = text
    return fields or None


def _normalise(text: str) -> str:
    return " ".join(text.split())


def _strip_label(text: str) -> str:
    return FIELD_LABEL.sub("", _normalise(text), count=1).strip()


def _elements(option: str | None, fallbacks: tuple[str, ...]) -> tuple[str, ...]:
    """The element names to try: the one the option names, else the format's fallbacks."""
    return (option.lower(),) if option else fallbacks


# --- XML ----------------------------------------------------------------------------------------


def _child(node: XmlNode, names: tuple[str, ...]) -> XmlNode | None:
    """The first direct child whose tag (case-insensitive) is one of ``names``, in their order."""
    for name in names:
        for child in node.children:
            if child.tag.lower() == name:
                return child
    return None


def _descendants(node: XmlNode, tag: str) -> list[XmlNode]:
    """``node`` and every element below it whose tag is ``tag`` (case-insensitive), in order."""
    found = [node] if node.tag.lower() == tag else []
    for child in node.children:
        found.extend(_descendants(child, tag))
    return found


def _xml_topic_id(node: XmlNode) -> str | None:
    attributes = {key.lower(): value for key, value in node.attrib.items()}
    for name in ID_ATTRIBUTES:
        if attributes.get(name, "").strip():
            return _strip_label(attributes[name])
    element = _child(node, ID_ELEMENTS)
    if element is not None and _strip_label(element.itertext()):
        return _strip_label(element.itertext())
    return None


def _parse_topics_xml(path: Path, report: ReadReport) -> XmlNode:
    """The parsed file, with bare ``&`` escaped first (counted and warned, lines unchanged)."""
    text = read_text(path)
    bare = [text.count("\n", 0, match.start()) + 1 for match in BARE_AMPERSAND.finditer(text)]
    if bare:
        text = BARE_AMPERSAND.sub("&amp;", text)
        lines = ", ".join(str(line) for line in sorted(set(bare)))
        report.counted_warning(
            "bare '&' read as text",
            len(bare),
            f"{path}: {len(bare)} bare '&' (not valid XML) read as text, line(s) {lines}",
        )
    return parse_xml(path, text)


def _read_topics_xml(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Topic]:
    """Topics of one XML file, each checked (id, non-empty query) and no qid twice."""
    query_elements = _elements(options["query_element"], QUERY_ELEMENTS)
    narrative_elements = _elements(options["narrative_element"], NARRATIVE_ELEMENTS)
    root = _parse_topics_xml(path, report)
    nodes = _descendants(root, "topic") or _descendants(root, "top")  # a few files say <top>
    if not nodes:
        raise InputError(path, root.line, f"no <topic> element under <{root.tag}>")
    first_line: dict[str, int] = {}
    for node in nodes:
        qid = _xml_topic_id(node)
        if qid is None:
            tried = ", ".join(f"<{name}>" for name in ID_ELEMENTS)
            raise InputError(path, node.line, f"topic has no id (no {tried} or id attribute)")
        if qid in first_line:
            raise InputError(
                path,
                node.line,
                f"topic id {quote(qid)} appears twice: first at {path}:{first_line[qid]}",
            )
        first_line[qid] = node.line
        query_node = _child(node, query_elements)
        if query_node is None:
            tried = " or ".join(f"<{name}>" for name in query_elements)
            raise InputError(path, node.line, f"topic {quote(qid)} has no query ({tried})")
        query = _normalise(query_node.itertext())
        if not query:
            raise InputError(
                path, query_node.line, f"topic {quote(qid)}: <{query_node.tag}> is empty"
            )
        narrative_node = _child(node, narrative_elements)
        narrative = _normalise(narrative_node.itertext()) if narrative_node is not None else ""
        used = {*ID_ELEMENTS, "query", "narrative", query_node.tag.lower()}
        if narrative_node is not None:
            used.add(narrative_node.tag.lower())
        fields = _extra_fields(
            [(child.tag, _normalise(child.itertext())) for child in node.children], used
        )
        yield Topic(qid, query, narrative or None, Origin(str(path), node.line), fields)


def read_xml(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Topic]:
    """Topics of a TREC/CLEF XML file; narratives may come from a second file of the same layout
    (CLEF ships queries and narratives as two files), whose queries must then agree."""
    topics = list(_read_topics_xml(path, options, report))
    if options["narratives"]:
        topics = _add_narratives(path, topics, options, report)
    yield from topics


def _add_narratives(
    path: Path, topics: list[Topic], options: Mapping[str, Any], report: ReadReport
) -> list[Topic]:
    narratives_path = Path(path).parent / options["narratives"]
    others = {topic.qid: topic for topic in _read_topics_xml(narratives_path, options, report)}
    merged: list[Topic] = []
    without: list[str] = []
    for topic in topics:
        other = others.get(topic.qid)
        if other is not None and other.query != topic.query:
            raise InputError(
                narratives_path,
                other.origin.line,
                f"topic {quote(topic.qid)}: query {quote(other.query)} differs from "
                f"{quote(topic.query)} "
                f"at {topic.origin}",
            )
        narrative = topic.narrative or (other.narrative if other is not None else None)
        if narrative is None:
            without.append(topic.qid)
        fields = {**(other.fields or {}), **(topic.fields or {})} if other else topic.fields
        fields = fields or None
        merged.append(topic._replace(narrative=narrative, fields=fields))
    if without:
        report.counted_warning(
            "topics without narrative",
            len(without),
            f"{narratives_path}: no narrative for topic(s) {', '.join(without)}",
        )
    extra = [qid for qid in others if qid not in {topic.qid for topic in topics}]
    if extra:
        report.counted_warning(
            "narrative-file topics not in the topic file",
            len(extra),
            f"{narratives_path}: topic(s) {', '.join(extra)} are not in {path}; ignored",
        )
    return merged


# --- SGML ---------------------------------------------------------------------------------------


class _SgmlTopic:
    """One <top> block being read: where it starts and each field's first line and text."""

    def __init__(self, line: int):
        self.line = line
        self.fields: dict[str, tuple[int, list[str]]] = {}
        self.current: str | None = None

    def open_field(self, path: Path, tag: str, line: int) -> None:
        if tag in self.fields:
            first = self.fields[tag][0]
            raise InputError(
                path, line, f"<{tag}> appears twice in one topic: first at line {first}"
            )
        self.fields[tag] = (line, [])
        self.current = tag

    def add_text(self, text: str) -> None:
        if self.current is not None:
            self.fields[self.current][1].append(text)

    def tag_of(self, names: tuple[str, ...]) -> str:
        """The first of ``names`` this topic has ("" for none): the tag ``field`` reads."""
        return next((name for name in names if name in self.fields), "")

    def field(self, names: tuple[str, ...]) -> tuple[int, str] | None:
        for name in names:
            if name in self.fields:
                line, parts = self.fields[name]
                return line, _strip_label(" ".join(parts))
        return None


def _sgml_blocks(path: Path) -> Iterator[_SgmlTopic]:
    """Every <top>...</top> block, fields split at each tag; closing field tags are optional."""
    block: _SgmlTopic | None = None
    for number, line in iter_lines(path):
        position = 0
        for match in SGML_TAG.finditer(line):
            before = line[position : match.start()]
            position = match.end()
            if block is not None:
                block.add_text(before)
            elif before.strip():
                raise InputError(
                    path, number, f"text outside <top>...</top>: {quote(before.strip())}"
                )
            closing, tag = match.group(1) == "/", match.group(2).lower()
            if tag == "top" and not closing:
                if block is not None:
                    raise InputError(
                        path, number, f"<top> at line {block.line} is not closed before this <top>"
                    )
                block = _SgmlTopic(number)
            elif tag == "top":
                if block is None:
                    raise InputError(path, number, "</top> without a <top>")
                yield block
                block = None
            elif block is None:
                raise InputError(path, number, f"<{tag}> outside <top>...</top>")
            elif closing:
                block.current = None
            else:
                block.open_field(path, tag, number)
        rest = line[position:]
        if block is not None:
            block.add_text(rest)
        elif rest.strip():
            raise InputError(path, number, f"text outside <top>...</top>: {quote(rest.strip())}")
    if block is not None:
        raise InputError(path, block.line, "<top> is not closed by </top>")


def read_sgml(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Topic]:
    """Topics of a classic TREC topic file (``<top><num><title><desc><narr></top>``)."""
    query_elements = _elements(options["query_element"], SGML_QUERY_ELEMENTS)
    narrative_elements = _elements(options["narrative_element"], SGML_NARRATIVE_ELEMENTS)
    first_line: dict[str, int] = {}
    for block in _sgml_blocks(path):
        number = block.field(("num",))
        if number is None or not number[1]:
            raise InputError(path, block.line, "topic has no <num>")
        qid = number[1]
        if qid in first_line:
            raise InputError(
                path,
                block.line,
                f"topic id {quote(qid)} appears twice: first at {path}:{first_line[qid]}",
            )
        first_line[qid] = block.line
        query = block.field(query_elements)
        if query is None:
            tried = " or ".join(f"<{name}>" for name in query_elements)
            raise InputError(path, block.line, f"topic {quote(qid)} has no query ({tried})")
        if not query[1]:
            raise InputError(path, query[0], f"topic {quote(qid)}: its query is empty")
        narrative = block.field(narrative_elements)
        used = {"num", "query", "narrative", block.tag_of(query_elements)}
        used.add(block.tag_of(narrative_elements))
        fields = _extra_fields(
            [(tag, _strip_label(" ".join(parts))) for tag, (_, parts) in block.fields.items()],
            used,
        )
        yield Topic(
            qid,
            query[1],
            (narrative and narrative[1]) or None,
            Origin(str(path), block.line),
            fields,
        )


_QUERY_OPTION = "element that holds the query"
FORMATS = (
    Format(
        name="trec-topics-xml",
        description="TREC/CLEF topic XML: <topics><topic><id/><query/><narrative/></topic>; the id "
        'may be <id>/<num>/<number> or an attribute (<topic number="3">)',
        provides=("topics",),
        read=read_xml,
        options={
            "query_element": Option(str, f"{_QUERY_OPTION} (default: <query>, else <title>)"),
            "narrative_element": Option(
                str,
                "element that holds the narrative (default: <narrative>, else <description>)",
            ),
            "narratives": Option(
                str,
                "a second topic file (path relative to this one's folder) whose narratives fill in "
                "those this file lacks; its queries must agree, topics only it has are ignored",
                path=True,
            ),
        },
    ),
    Format(
        name="trec-topics-sgml",
        description="classic TREC topics: <top><num> Number: 301 <title> ... <desc> Description: "
        "... <narr> Narrative: ... </top> (not XML; read line by line)",
        provides=("topics",),
        read=read_sgml,
        options={
            "query_element": Option(str, f"{_QUERY_OPTION} (default: <title>)"),
            "narrative_element": Option(
                str, "element that holds the narrative (default: <narr>, else <desc>)"
            ),
        },
    ),
)

register(*FORMATS)
