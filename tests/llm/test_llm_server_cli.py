"""``python -m nrp.llm.server``: its command line, without starting a model (fast)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("fastapi")

from nrp.llm.server import build_parser, default_model_id


def test_a_missing_model_is_one_error_line_and_exit_2(tmp_path):
    missing = tmp_path / "nothing.gguf"
    result = subprocess.run(
        [sys.executable, "-m", "nrp.llm.server", "--model", str(missing), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"nrp: error: model {str(missing)!r} does not exist"


def test_served_model_ids_and_defaults(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "weights.gguf").write_bytes(b"GGUF")
    assert default_model_id("") == "smollm2"
    assert default_model_id(str(folder) + "/") == "my-model"
    assert default_model_id(str(folder / "weights.gguf")) == "weights"
    assert default_model_id("HuggingFaceTB/SmolLM2-135M-Instruct") == (
        "HuggingFaceTB/SmolLM2-135M-Instruct"
    )
    args = build_parser().parse_args([])
    assert (args.host, args.port, args.fail_first, args.fail_status, args.delay) == (
        "127.0.0.1",
        8000,
        0,
        503,
        0.0,
    )
