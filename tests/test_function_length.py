"""scripts/check_function_length.py: no function of nrp over 80 lines (``make lint`` runs it; this
test makes ``make test`` enforce it too), and what it counts on a hand-made package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_function_length.py"


def load_script():
    spec = importlib.util.spec_from_file_location("check_function_length", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_no_function_of_nrp_over_80_lines(capsys):
    check = load_script()
    assert check.main([]) == 0, capsys.readouterr().out
    assert check.MAX_LINES == 80


def test_counts_def_to_last_line_in_classes_and_nested_functions(tmp_path):
    check = load_script()
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(79))  # def + 79 lines: 80, allowed
    (pkg / "a.py").write_text(
        f"def fits():\n{body}\n\n\n"
        f"class K:\n    def over(self):\n        y = 0\n{body.replace('    ', '        ')}\n\n\n"
        "if True:\n    def outer():\n        def inner():\n"
        + "\n".join(f"            z{i} = {i}" for i in range(80))
        + "\n"
    )
    found = dict(check.long_functions(pkg))
    assert found == {"pkg/a.py::K.over": 81, "pkg/a.py::outer": 82, "pkg/a.py::outer.inner": 81}
    assert check.main([str(pkg)]) == 1
