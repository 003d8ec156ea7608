"""Shared fixtures: the location of ../shared/data, offline model hub, caches under tmp."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
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
# Under pytest-xdist (``make test``: two workers on two cores) each worker and the processes it
# starts compute on one thread: two workers of two threads each would share two cores by
# preemption. The variables are set before any test imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_threads, "1")


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


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name``, built by ``build(folder)`` once per test run: under pytest-xdist the
    workers share it (the first to ask builds it under a lock, the others wait and read it).
    A fixture hands tests copies of it, never the folder itself."""
    from filelock import FileLock

    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    folder = root / "built-once" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder.parent / f"{name}.lock")):
        done = folder / ".built"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def mediqa_validated(tmp_path_factory) -> Callable[[Path], Path]:
    """``copy_to(dest)``: a copy at ``dest`` of an indexes folder with MEDIQA 2019 ingested and
    validated with the default rankers as docs/examples/notebook.py does it (validation.json
    saved; the scores and the guard's calibration kept beside the collection), built once per
    test run. Skipped with a reason when ../shared/data is absent."""
    data = shared("mediqa-2019")

    def build(folder: Path) -> None:
        import nrp

        nrp.ingest(ROOT / "manifests" / "mediqa-2019.yaml", indexes_dir=folder, data_root=data)
        nrp.validate(nrp.Collection.load("mediqa-2019", folder), save=True)

    folder = built_once(tmp_path_factory, "mediqa-validated", build)

    def copy_to(dest: Path) -> Path:
        shutil.copytree(folder, dest, ignore=shutil.ignore_patterns(".built"))
        return dest

    return copy_to


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread while a module's tests run: tiny models on a shared 2-core machine run
    many times faster (a module asks with ``pytestmark = pytest.mark.usefixtures(...)``)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


#: the tests (or whole files, where a module fixture is what costs) that take more than about two
#: seconds on 2 cores beside those marked ``slow`` in their own file (``pytest --durations``):
#: ``make test-quick`` (``pytest -m "not slow"``) leaves them out, ``make test`` runs them all
SLOW = (
    "tests/test_notebook_example.py",  # validates MEDIQA with every default ranker
    "tests/validation/test_validation_mediqa.py",
    "tests/validation/test_guard_outside_forms.py",  # reads the MEDIQA validation built once
    "tests/validation/test_guard_calibration_clef.py",
    "tests/experiments/test_run_experiment.py",
    "tests/test_trained_rankers_study.py",
    "tests/test_cli_nrp.py::test_a_reader_that_stops_reading_ends_the_command_quietly_with_141",
    "tests/test_cli_nrp.py::test_a_damaged_validation_json_is_a_one_line_error_naming_it",
    "tests/test_cli_nrp.py::test_score_summary_agreement_on_the_demo",
    "tests/test_cli_nrp.py::test_a_ranker_spec_ending_in_json_is_a_ranker_and_a_missing_",
    "tests/test_cli_nrp.py::test_score_rejects_an_unknown_qid_in_one_line",
    "tests/test_cli_validate.py",
    "tests/validation/test_validity_selection.py::test_the_cli_prints_who_was_passed_over_and_why",
    "tests/rankers/test_term_arrays.py::test_every_line_of_the_shared_files_equals_analyse",
    "tests/test_pyterrier_example.py",
    "tests/validation/test_validation_statistics.py::test_holm_and_bonferroni_equal_statsmodels_",
    "tests/test_score_blocks.py::test_parquet_from_blocks_keeps_the_row_groups_and_bytes_of_to_",
    "tests/training/",
    "tests/probes/",
    "tests/review/test_review_browser.py",
    "tests/review/test_review_server.py",
    "tests/evaluators/test_reference_based.py",
    "tests/evaluators/test_rouge.py",
    "tests/test_ingest.py::test_cli_ingest_collections_info",
    "tests/validation/test_real_answers.py::test_the_cli_reports_real_answers_and_refuses_a_bad_",
    "tests/rankers/test_lexical.py::test_porter_port_equals_nltk_on_every_distinct_token",
    "tests/test_plugins.py",
    "tests/formats/test_irds.py",
    "tests/test_trec_runs_out.py",
    "tests/test_progress.py",
    "tests/rankers/test_fusion.py::test_fitted_fusion_",
    "tests/test_hostile_input_round3_readers.py",  # each reader in a child process
    "tests/test_flags.py::test_flags_aside_shares_the_slices_and_gives_the_bytes_of_flag_answers",
    "tests/service/",
    "tests/rankers/test_t5.py::test_batched_sentencepiece_ids_equal_the_tokenizers_own",
    "tests/positioning/test_injection.py::test_monot5_fast_equals_full",
    "tests/meta/test_cli_meta.py::test_meta_writes_tables_with_hand_values",
    "tests/test_guard_training.py::test_nrp_train_guard_fits_a_model_that_guard_model_reads_back",
    "tests/test_guard_training.py::test_a_bad_option_is_one_line_exit_2_and_nothing_generated_",
)


#: the files that take longest (``pytest --durations``), run first and in this order: under
#: pytest-xdist (``--dist loadfile``: a file's tests on one worker) the long ones start while the
#: many short files fill the other worker, instead of one of them ending the run alone
FIRST = (
    "tests/test_notebook_example.py",
    "tests/rankers/test_colbert.py",
    "tests/validation/test_validation_mediqa.py",
    "tests/executors/test_ray_executor.py",
    "tests/validation/test_guard_calibration_clef.py",
    "tests/evaluators/test_judge.py",
    "tests/llm/test_local_backend.py",
    "tests/test_trained_rankers_study.py",
    "tests/service/test_service_recovery.py",
    # reads the MEDIQA validation the notebook's test builds (``mediqa_validated``): late
    "tests/validation/test_guard_outside_forms.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of ``SLOW`` (a file, a folder, or a test id's start) ``slow``; move the
    files of ``FIRST`` to the front (each file's tests keep their order)."""
    for item in items:
        node = item.nodeid
        if any(node == s or node.startswith(s) for s in SLOW):
            item.add_marker(pytest.mark.slow)
    first = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::")[0], len(FIRST)))
