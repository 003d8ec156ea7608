# %% [markdown]
# # nrp in a notebook
#
# A notebook in the percent format (`# %%` cells): Jupyter opens it with jupytext, VS Code runs
# its cells, and `python docs/examples/notebook.py [MEDIQA_FOLDER]` runs it whole;
# tests/test_notebook_example.py runs it on the shared data. Every result shows itself as a
# table in a notebook (`_repr_html_`) and gives it as a DataFrame (`to_frame()`).
#
# 1. Ingest MEDIQA 2019 (its manifest, with the data folder as `--data-root`) and validate the
#    default rankers per dimension.
# 2. Score the demo collection's generated answers with the rankers validation chose there.
# 3. A PyTerrier transformer that is not nrp's (pyterrier_t5's `MonoT5ReRanker`, given a local
#    monoT5 folder) validated beside the built-in rankers and used for NRP.

# %%
from __future__ import annotations

import hashlib
import sys
import tempfile
from importlib import resources
from pathlib import Path

import pandas as pd

import nrp

ROOT = Path(__file__).resolve().parents[2]


def mediqa(indexes_dir: str, data_root: str | Path) -> dict[str, pd.DataFrame]:
    """MEDIQA 2019: ingest, collection facts, validation of the default rankers."""
    built = nrp.ingest(ROOT / "manifests" / "mediqa-2019.yaml", indexes_dir=indexes_dir,
                       data_root=data_root)  # fmt: skip
    collection = nrp.Collection.load(built.name, indexes_dir)
    # tfidf, dph, bm25, dense, guard (x2), random; save=True: where `nrp score` reads it
    validation = nrp.validate(collection, save=True)
    table = validation.to_frame()
    return {
        "mediqa_topics": collection.topics.head(),
        "mediqa_validation": table[table["measure"] == "nDCG@10"],
        "mediqa_chosen": pd.DataFrame(
            sorted(validation.chosen().items()), columns=["dimension", "ranker"]
        ),
    }


# %% [markdown]
# ## The demo answers: validate, then score with the chosen rankers


# %%
def demo(indexes_dir: str) -> tuple[nrp.Collection, dict[str, pd.DataFrame]]:
    folder = resources.files("nrp") / "data" / "demo"
    nrp.ingest(folder / "manifest.yaml", indexes_dir=indexes_dir)
    collection = nrp.Collection.load("demo", indexes_dir)
    # guard: dense with texts that only mirror or evade the question put below real answers;
    # tfidf and bm25 fail validity (an echo of the question tops them) and are passed over
    validation = nrp.validate(collection, ["tfidf", "bm25", "guard", "random"])
    answers = pd.read_json(folder / "answers.jsonl", lines=True, dtype={"qid": str})
    results = nrp.score_answers(collection, answers, validation)
    means = (
        results[results["dimension"] == "weighted"]
        .groupby(["llm", "prompt"], as_index=False)["nrp"]
        .mean()
        .sort_values("nrp", ascending=False, ignore_index=True)
    )
    return collection, {"demo_validation": validation.to_frame(), "demo_mean_nrp": means}


# %% [markdown]
# ## Any PyTerrier transformer as a ranker: pyterrier_t5's monoT5


# %%
def folder_hash(folder: str) -> str:
    """A short hash of every file of ``folder`` (names and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def monot5(collection: nrp.Collection, model: str) -> dict[str, pd.DataFrame]:
    """``MonoT5ReRanker`` on the local folder ``model``: validated beside tfidf, then NRP of
    the demo answers with it. ``batch_size=1``: pyterrier_t5 pads a batch before its prompt,
    so only one row per batch scores each row on its own."""
    import pyterrier_t5

    t5 = pyterrier_t5.MonoT5ReRanker(model, model, batch_size=1, verbose=False)
    # the fingerprint keys the score cache: name the weights, so other weights get new scores
    ranker = nrp.from_transformer(t5, fingerprint=f"monot5-{folder_hash(model)}", tolerance=1e-5)
    # a tiny random model: the flow is the point, so validity (which refuses it) is off
    validation = nrp.validate(
        collection, [ranker, "tfidf"], dimensions=["relevance"], validity=False
    )
    folder = resources.files("nrp") / "data" / "demo"
    answers = pd.read_json(folder / "answers.jsonl", lines=True, dtype={"qid": str})
    results = nrp.score_answers(collection, answers, {"relevance": ranker, "readability": "tfidf"})
    relevance = results[results["dimension"] == "relevance"]
    return {
        "monot5_validation": validation.to_frame(),
        "monot5_nrp": relevance.groupby("llm", as_index=False)["nrp"].mean(),
    }


# %%
def main(
    indexes_dir: str, mediqa_data: str | Path | None = None, monot5_model: str | None = None
) -> dict[str, pd.DataFrame]:
    tables: dict[str, pd.DataFrame] = {}
    if mediqa_data is not None:
        tables |= mediqa(indexes_dir, mediqa_data)
    collection, found = demo(indexes_dir)
    tables |= found
    if monot5_model is not None:
        tables |= monot5(collection, monot5_model)
    return tables


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        given = sys.argv[1] if len(sys.argv) > 1 else None
        model = sys.argv[2] if len(sys.argv) > 2 else None
        for name, frame in main(folder, given, model).items():
            print(f"\n{name}\n{frame.to_string(index=False)}")
