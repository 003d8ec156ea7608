"""No function of nrp longer than ``MAX_LINES`` lines (ruff has no line-count rule).

    .venv/bin/python scripts/check_function_length.py          # checks nrp/; exit 1 on any
    .venv/bin/python scripts/check_function_length.py DIR ...

A function's length is the lines from its ``def`` to its last line (docstring, comments and
blank lines included; decorators not). Run by ``make lint`` and by tests/test_function_length.py,
so ``make test`` enforces it too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_LINES = 80

#: "path::qualified name" -> why it may stay longer for now. Empty it: split the function and
#: remove its line.
ALLOWED: dict[str, str] = {}


def long_functions(root: Path, max_lines: int = MAX_LINES) -> list[tuple[str, int]]:
    """("path::qualified name", lines) of every function under ``root`` over ``max_lines``; the
    path from ``root``'s parent (``nrp/cli/validate.py``)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        shown = path.relative_to(root.parent).as_posix()
        found.extend((f"{shown}::{name}", n) for name, n in _lengths(tree.body, ""))
    return [(where, n) for where, n in found if n > max_lines]


def _lengths(body: list[ast.stmt], prefix: str):
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, node.end_lineno - node.lineno + 1
            yield from _lengths(node.body, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _lengths(node.body, f"{prefix}{node.name}.")
        elif hasattr(node, "body") and isinstance(node.body, list):  # if/try/with blocks
            yield from _lengths(node.body, prefix)
            yield from _lengths(getattr(node, "orelse", []), prefix)


def main(argv: list[str]) -> int:
    roots = [Path(a).resolve() for a in argv] or [Path(__file__).resolve().parents[1] / "nrp"]
    offenders = [
        f"{where}: {n} lines (at most {MAX_LINES})"
        for root in roots
        for where, n in long_functions(root)
        if where not in ALLOWED
    ]
    for line in offenders:
        print(line)
    return 1 if offenders else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
