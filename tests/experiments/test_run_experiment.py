"""``nrp run`` end to end on a tiny experiment: the demo collection, a tiny random Llama built
here, tfidf, BLEU and ROUGE; then the same file with one more LLM must generate, position and
evaluate only that LLM's answers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "llm"))
from tiny_llm import build_tiny_llama

from nrp.cli import main
from nrp.errors import InputError
from nrp.experiments import load_experiment, run_experiment

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "nrp" / "data" / "demo" / "manifest.yaml"


def experiment_text(tmp_path: Path, llms: dict[str, str], rankers: str = "{fixed: tfidf}") -> str:
    lines = [
        "name: tiny",
        f"collection: {{manifest: {MANIFEST}, name: demo}}",
        f"indexes: {tmp_path / 'indexes'}",
        f"out: {tmp_path / 'run'}",
        "llms:",
        *[
            f"  - {{name: {name}, backend: local, model: {model}, device: cpu}}"
            for name, model in llms.items()
        ],
        "prompts: [short-qa, long-qa]",
        "samples: 1",
        "limit_queries: 2",
        "generation: {max_new_tokens: 6, seed: 3}",
        f"rankers: {rankers}",
        "evaluators: [bleu, rouge]",
    ]
    return "\n".join(lines) + "\n"


def test_run_tiny_experiment_and_add_one_llm(tmp_path, capsys):
    tiny_a = str(build_tiny_llama(tmp_path / "tiny-a", seed=0))
    tiny_b = str(build_tiny_llama(tmp_path / "tiny-b", seed=1))  # other weights, other texts
    path = tmp_path / "experiment.yaml"
    path.write_text(experiment_text(tmp_path, {"tiny-a": tiny_a}))
    assert main(["run", str(path)]) == 0
    out = tmp_path / "run"
    assert capsys.readouterr().out.strip() == str(out / "report" / "index.html")
    run = json.loads((out / "run.json").read_text())
    counts = run["counts"]
    made = counts["generate"]["tiny-a"]
    assert (made["answers"], made["generated"], made["from_store"]) == (4, 4, 0)
    kept = 4 - made["empty"]
    assert counts["score"] == {"answers": kept, "answers_positioned": kept, "answers_from_cache": 0}
    assert counts["evaluate"]["bleu"]["computed"] == kept
    assert counts["summary"] == counts["report"] == "computed"
    results = pd.read_parquet(out / "results.parquet")
    assert set(results["dimension"]) == {"relevance", "readability", "weighted"}
    assert results["nrp"].between(0, 1).all()
    assert (out / "report" / "index.html").is_file()
    evaluations = pd.read_parquet(out / "evaluations.parquet")
    assert len(evaluations) == kept

    # unchanged: nothing computed; the result holds what the files hold
    result = run_experiment(path)
    counts = json.loads((out / "run.json").read_text())["counts"]
    assert result.out == out and Path(result) == out and result / "run.json" == out / "run.json"
    assert result.results.reset_index(drop=True).equals(results.reset_index(drop=True))
    assert result.validation is None  # fixed rankers
    assert len(result.evaluations) == kept and list(result.answers.columns)[:2] == [
        "answer_id",
        "llm",
    ]
    means = result.to_frame()  # the summary's frame: the (all) rows kept apart
    assert set(means["dimension"]) == {"relevance", "readability", "weighted"}
    saved = pd.read_csv(out / "summary_means.csv")
    saved = saved[saved["prompt"] != "(all)"]
    assert means["mean"].tolist() == pytest.approx(saved["mean_nrp"].tolist())
    assert "<table" in result._repr_html_()
    assert counts["generate"]["tiny-a"]["generated"] == 0
    assert counts["score"]["answers_positioned"] == 0
    assert counts["evaluate"]["rouge"]["computed"] == 0
    assert counts["summary"] == counts["report"] == "cached"

    # one more LLM: only its answers are generated, positioned and evaluated
    path.write_text(experiment_text(tmp_path, {"tiny-a": tiny_a, "tiny-b": tiny_b}))
    run_experiment(path)
    counts = json.loads((out / "run.json").read_text())["counts"]
    assert counts["generate"]["tiny-a"]["generated"] == 0
    assert counts["generate"]["tiny-b"]["generated"] == 4
    new = 4 - counts["generate"]["tiny-b"]["empty"]
    assert counts["score"]["answers_positioned"] == new
    assert counts["score"]["answers_from_cache"] == kept
    assert counts["evaluate"]["bleu"]["computed"] == new
    assert counts["summary"] == counts["report"] == "computed"
    assert set(pd.read_parquet(out / "results.parquet")["llm"]) == {"tiny-a", "tiny-b"}


def test_a_validating_experiment_returns_its_validation(tmp_path):
    path = tmp_path / "experiment.yaml"
    llm = str(build_tiny_llama(tmp_path / "tiny-a", seed=0))
    rankers = "{validate: [tfidf, guard, random]}"  # tfidf fails validity: an echo tops it
    path.write_text(experiment_text(tmp_path, {"tiny-a": llm}, rankers))
    result = run_experiment(path)
    saved = json.loads((result.out / "validation.json").read_text())
    assert result.validation is not None and result.validation.chosen() == saved["chosen"]
    assert set(result.validation.to_frame()["name"]) == {"tfidf", "guard", "random"}
    assert set(saved["chosen"].values()) == {"guard"}
    chosen = result.results[result.results["dimension"] != "weighted"]
    # a chosen dimension of weight 0 in the weighted NRP is not scored (nrp score's default)
    weighted = {(d, r) for d, r in saved["chosen"].items() if saved["weights"].get(d)}
    assert (
        weighted
        and {(d, r) for d, r in zip(chosen["dimension"], chosen["ranker"], strict=True)} == weighted
    )
    assert set(result.results.attrs["not_scored"]) == {
        d for d in saved["chosen"] if not saved["weights"].get(d)
    }


def test_experiment_file_errors(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("collection: demo\nllms: [local]\nrankers: tfidf\nsampels: 3\n")
    with pytest.raises(InputError, match=r"bad.yaml: unknown key\(s\) sampels"):
        load_experiment(path)
    path.write_text("collection: demo\nllms: [local]\nrankers: {validate: [tfidf], fixed: x}\n")
    with pytest.raises(InputError, match="either validate or fixed"):
        load_experiment(path)
    path.write_text("collection: demo\nllms: [local]\nrankers: tfidf\ngeneration: {top_p: 2}\n")
    with pytest.raises(InputError, match="generation: top_p must be in"):
        load_experiment(path)
    path.write_text("collection: demo\nllms: [local, local]\nrankers: tfidf\n")
    with pytest.raises(InputError, match="name used twice: smollm2"):
        load_experiment(path)
    experiment = load_experiment(ROOT / "nrp" / "data" / "demo" / "experiment.yaml")
    assert (experiment.samples, experiment.limit_queries) == (2, 4)
    assert experiment.prompts == ["short-qa", "multimedqa"]
    assert experiment.options.max_new_tokens == 64 and experiment.options.top_k == 50
    assert experiment.manifest == MANIFEST
