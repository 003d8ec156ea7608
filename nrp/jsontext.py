"""JSON text as nrp reads it from anything a user or a client hands over: one bound on nesting,
and no key given twice.

Python's ``json`` parser recurses once per nested array or object. A line of an answers file
nested some thousands of brackets deep raises ``RecursionError`` in it, and deeper still, where a
library has raised the interpreter's recursion limit, overflows the C stack and kills the process
(a service's worker with it). No input nrp reads needs more than a handful of levels (a Label
Studio export about eight), so every reader of JSON input (answer files, reports, tables, exports,
model and record files, request bodies) checks the nesting first, before any parser recurses:
more than ``MAX_DEPTH`` levels is ``TooDeep``, a ``json.JSONDecodeError`` at the bracket that
went too deep, so each reader reports it as it reports any other invalid JSON (file, line,
problem; a 422 for a request body).
"""

from __future__ import annotations

import json
import re
from typing import Any

from nrp.errors import quote

#: the most arrays and objects one JSON text may nest inside each other
MAX_DEPTH = 100

#: a JSON string (skipped whole: its brackets are text) or one bracket
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_BYTE_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class TooDeep(json.JSONDecodeError):
    """JSON nested more than ``MAX_DEPTH`` levels: refused before it is parsed."""


class DuplicateKey(ValueError):
    """A JSON object that gives one key twice (``json.loads`` would keep the last silently)."""


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """``json.loads``' ``object_pairs_hook`` that refuses a key given twice (``DuplicateKey``):
    what every reader of input files and request bodies passes."""
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(f"key {quote(key)} given twice in one object")
        found[key] = value
    return found


def check_depth(text: str | bytes) -> None:
    """``TooDeep`` when ``text`` nests arrays and objects more than ``MAX_DEPTH`` levels deep
    (brackets inside strings are text, not nesting). Linear in the text, and free for a text
    with no more than ``MAX_DEPTH`` opening brackets in all."""
    binary = isinstance(text, bytes)
    opening = text.count(b"[") + text.count(b"{") if binary else text.count("[") + text.count("{")
    if opening <= MAX_DEPTH:
        return
    depth = 0
    for match in (_BYTE_TOKENS if binary else _TOKENS).finditer(text):  # type: ignore[arg-type]
        token = match.group()
        if token in ("[", "{", b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                document = text.decode("utf-8", "replace") if binary else text
                position = match.start()
                if binary:  # the character position of the byte offset
                    position = len(text[: match.start()].decode("utf-8", "replace"))
                raise TooDeep(f"nested more than {MAX_DEPTH} levels deep", document, position)
        elif token in ("]", "}", b"]", b"}"):
            depth -= 1


def loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads(text, **options)`` of a text whose nesting is checked first
    (``check_depth``)."""
    check_depth(text)
    return json.loads(text, **options)
