"""Heavy libraries are imported in one place (``nrp.lazy_libs``), on first use: no module of
nrp imports one itself outside ``TYPE_CHECKING``, and the functions give the real modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nrp import lazy_libs

PACKAGE = Path(lazy_libs.__file__).parent


def _under_type_checking(tree: ast.Module) -> set[int]:
    """Line numbers of the statements inside ``if TYPE_CHECKING:`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def test_no_module_imports_a_heavy_library_itself():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "lazy_libs.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = _under_type_checking(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            heavy = [n for n in names if n.partition(".")[0] in lazy_libs.HEAVY]
            if heavy and node.lineno not in guarded:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {heavy[0]}")
    assert found == []


def test_the_functions_give_the_real_modules():
    torch = lazy_libs.torch()
    assert torch.__name__ == "torch" and lazy_libs.module("torch.nn").__name__ == "torch.nn"
    assert lazy_libs.installed("torch") and not lazy_libs.installed("no_such_library_here")
    with pytest.raises(ValueError, match="numpy: not one of the heavy libraries"):
        lazy_libs.module("numpy")
