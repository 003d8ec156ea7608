"""scripts/studies/tune_training.py: nDCG@10 as trec_eval computes it (hand-computed values), and a
run on the hand-made collection of tests/training (grade = one word) with a tiny BERT built here:
one row per (setting, epoch), the held-out queries of the trained fold models, the table written."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "training"))
import handmade  # noqa: E402

SCRIPT = ROOT / "scripts" / "studies" / "tune_training.py"


def load_script():
    spec = importlib.util.spec_from_file_location("tune_training", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tune = load_script()


def test_ndcg_at_10_by_hand():
    gains = np.array([0.0, 2.0, 1.0])
    # ranked by score: gain 2, gain 0, gain 1 -> DCG 2/log2(2) + 0 + 1/log2(4) = 2.5
    # ideal: 2, 1, 0 -> 2 + 1/log2(3)
    value = tune.ndcg_at(gains, np.array([0.5, 0.9, 0.1]))
    assert value == pytest.approx(2.5 / (2 + 1 / math.log2(3)))
    assert tune.ndcg_at(gains, np.array([0.0, 2.0, 1.0])) == pytest.approx(1.0)
    assert math.isnan(tune.ndcg_at(np.zeros(3), np.arange(3.0)))
    # only the top 10 count: the one relevant document at rank 11 gives 0
    assert tune.ndcg_at(np.eye(1, 11, 10)[0], -np.arange(11.0)) == 0.0


def test_a_run_writes_one_row_per_setting_and_epoch(tmp_path, capsys):
    import torch

    built = handmade.build(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        argv = [
            "--out",
            str(tmp_path / "tune"),
            "--manifest",
            str(tmp_path / "words" / "manifest.yaml"),
        ]
        argv += ["--base", str(built["base"]), "--lr", "1e-3", "3e-3", "--epochs", "2"]
        argv += ["--models", "1", "--folds", "4", "--max-length", "32"]
        assert tune.main(argv) == 0
    finally:
        torch.set_num_threads(threads)
    printed = capsys.readouterr().out
    frame = pd.read_csv(tmp_path / "tune" / "tuning.csv")
    assert frame[["lr", "epoch"]].values.tolist() == [[1e-3, 1], [1e-3, 2], [3e-3, 1], [3e-3, 2]]
    assert set(frame["held_out_queries"]) == {5}  # fold 0 of 4 holds out 5 of the 20 queries
    assert frame["held_out_ndcg10"].between(0, 1).all()
    assert (tmp_path / "tune" / "tuning.md").read_text() == printed
    assert printed.count("**best**") == 1
