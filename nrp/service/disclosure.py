"""What an error may tell a caller: a 4xx names the problem but no absolute server path, and a
500 tells nothing but an error id, under which the server log keeps the detail.

Why: error messages of the library name the files they read, and a request names server files
(answer files, manifests, model folders). A caller knows them relative to a data root; the
absolute path would tell where the server keeps its data, and an unexpected error (a 500) may
quote the content of a file it could not parse. So:

- ``redact_paths(text, roots)``: every absolute path in a message becomes the part relative to
  the root it lies in (``answers.jsonl:3: ...``, as the caller named it), or ``<server path>``.
  A token such as ``/v1/score`` is a path only when its first folder exists on the server.
- ``redact_tree(value, roots)``: the same for every string of a JSON-like value (a collection's
  description names its manifest and sources).
- ``internal_error(log, what, err)``: logs the exception with its trace under a new error id and
  gives the one line the caller sees.
"""

from __future__ import annotations

import logging
import re
import traceback
import uuid
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

SERVER_PATH = "<server path>"
# slash-led segments from a slash that starts a token (not inside a word or a relative path); a
# path inside a URL (``https://host//srv/x``) is found after its double slash
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~-])(?:/[^\s'\"`,;:()\[\]{}<>|/]+)+")


def redact_paths(text: str, roots: Sequence[Path]) -> str:
    """``text`` with every absolute server path replaced (module docstring)."""
    for root in sorted({str(r) for r in roots}, key=len, reverse=True):
        inside = re.compile(re.escape(root.rstrip("/")) + r"(/|(?![\w.-]))")
        text = inside.sub(lambda m: "" if m.group(1) == "/" else ".", text)

    def replace(match: re.Match[str]) -> str:
        found = PurePosixPath(match.group(0))
        if len(found.parts) < 2 or not Path(found.parts[0], found.parts[1]).exists():
            return match.group(0)  # not a server path (a route, a fraction)
        return SERVER_PATH

    return _ABSOLUTE_PATH.sub(replace, text)


def redact_tree(value: Any, roots: Sequence[Path]) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with ``redact_paths`` applied to every
    string in it: what the library reports about a collection (its manifest, its sources)
    names the server's files."""
    if isinstance(value, str):
        return redact_paths(value, roots)
    if isinstance(value, dict):
        return {key: redact_tree(item, roots) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(item, roots) for item in value]
    return value


def trace(err: BaseException) -> str:
    """The end of the exception's traceback, for the log."""
    return "".join(traceback.format_exception(type(err), err, err.__traceback__))[-4000:]


def internal_error(
    log: logging.Logger, what: str, err: BaseException, **fields: Any
) -> tuple[str, str]:
    """Log ``err`` (message and trace, and ``fields``) under a new error id; the caller's
    message and the id."""
    error_id = uuid.uuid4().hex[:12]
    detail = {"error_id": error_id, "error": f"{type(err).__name__}: {err}", "trace": trace(err)}
    log.error(what, extra={"fields": {**fields, **detail}})
    return f"internal error (error id {error_id}); the server log has the detail", error_id
