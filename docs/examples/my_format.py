"""An input-format plug-in: topics written one per line as ``QID: question``.

Blank lines and ``#`` comments are skipped and counted in the report; a line without the
separator is an error naming the file and line. Walk-through: docs/extending.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from nrp.collection.formats import register
from nrp.collection.formats.base import Format, Option, ReadReport
from nrp.collection.records import Origin, Topic
from nrp.errors import InputError


def read(path: Path, options: Mapping[str, Any], report: ReadReport) -> Iterator[Topic]:
    lines = Path(path).read_text(encoding="utf-8").removesuffix("\n").split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            report.count("lines skipped: blank or comment")
            continue
        qid, sep, question = line.partition(options["separator"])
        if not sep or not qid.strip() or not question.strip():
            raise InputError(path, number, f"expected 'QID{options['separator']} question'")
        yield Topic(qid.strip(), question.strip(), None, Origin(str(path), number))


register(
    Format(
        name="question-lines",
        description="topics, one per line as 'QID: question' (# comments and blank lines skipped)",
        provides=("topics",),
        read=read,
        options={"separator": Option(str, "what separates the qid from the question", ":")},
    )
)
