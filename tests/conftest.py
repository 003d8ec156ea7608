"""Shared fixtures: the location of ../shared/data, offline model hub, caches under tmp."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"

# No model hub here or in CI: anything that tries to download must fail fast, and caches
# must not land in the user's home.
_cache_root = Path(tempfile.mkdtemp(prefix="nrp-test-cache-"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HOME", str(_cache_root / "hf"))
os.environ.setdefault("MPLCONFIGDIR", str(_cache_root / "mpl"))
os.environ.setdefault("NRP_MODELS", str(_cache_root / "nrp-models"))
os.environ.setdefault("IR_DATASETS_HOME", str(_cache_root / "ir_datasets"))


def _absl_handler_on_the_real_stderr() -> None:
    """rouge-score imports absl, whose logging handler keeps the stream stderr was when absl
    was first imported and closes it whenever logging is configured again (uvicorn's servers in
    the service and synth tests do), unless it is the process's own stderr. Under pytest the
    first import would hand it pytest's capture file, and closing that ends the run, so absl is
    imported here and given the process's own stderr."""
    try:
        from absl import logging as absl_logging
    except ImportError:
        return
    absl_logging.get_absl_handler().python_handler.stream = sys.__stderr__


_absl_handler_on_the_real_stderr()


def shared(*parts: str) -> Path:
    """A path under ../shared/data; the test is skipped with a reason when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path} (clone with ../shared beside the repo)")
    return path


@pytest.fixture(scope="session")
def shared_data():
    """``shared`` as a fixture (any scope may use it; a test directory's own conftest.py would
    shadow ``from conftest import shared``)."""
    return shared


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread while a module's tests run: tiny models on a shared 2-core machine run
    many times faster (a module asks with ``pytestmark = pytest.mark.usefixtures(...)``)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
