"""scripts/studies/trained_rankers_study.py on the hand-made collections of tests/training (grade =
one word) with a tiny BERT built here: the tables hold the expected rows, the trained ranker's
figures are those ``nrp.api.agreement`` gives for the same spec, the transfer reports the questions
it left out, a second run reuses the trained folders, and bad arguments are one line."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "training"))
import handmade  # noqa: E402

from nrp import api  # noqa: E402
from nrp.statistics import paired_randomization_test  # noqa: E402

SCRIPT = ROOT / "scripts" / "studies" / "trained_rankers_study.py"
TRAINED = {"cross": "trained cross (fold={})", "dense": "trained dense (fold={})"}
FUSIONS = ["trained cross+dense (fit)", "trained dense+dense (fit)"]
AGREEMENT_ROLES = [*FUSIONS, "dense", "tfidf", "random"]


def trained(fold: str) -> list[str]:
    return [name.format(fold) for name in TRAINED.values()]


def load_script():
    spec = importlib.util.spec_from_file_location("trained_rankers_study", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


study = load_script()


def options_for(root: Path, built: dict, **changes) -> object:
    """The study on ``words`` (relevance) and the transfer from ``other`` (which asks two of
    words' questions) to ``words``: 3 folds, a tiny base, 2 steps per model."""
    words = study.StudyCollection("words", root / "words" / "manifest.yaml", ("narrative",))
    other = study.StudyCollection("other", root / "other" / "manifest.yaml")
    settings = {
        "out": root / "study",
        "indexes": built["indexes"],
        "only": ("words/relevance", "transfer"),
        "folds": 3,
        "max_steps": 2,
        "training": {"base": str(built["base"]), "lr": 1e-3, "batch": 16},
        "collections": (words,),
        "transfer": study.TransferPlan(other, "relevance", ("words",)),
    }
    return study.StudyOptions(**{**settings, **changes})


@pytest.fixture(scope="module")
def ran(tmp_path_factory, one_torch_thread):
    root = tmp_path_factory.mktemp("study")
    built = handmade.build(root)
    options = options_for(root, built)
    return root, built, options, study.run_study(options)


def test_agreement_rows_are_the_library_figures(ran):
    _, built, options, tables = ran
    collection = api.Collection.load("words", built["indexes"])
    rows = {(r["setting"], r["ranker"]): r for r in tables.agreement}
    cross, transfer = study.CROSS_FITTED, study.TRANSFERRED
    assert [r for s, r in rows if s == cross] == [*trained("cross"), *AGREEMENT_ROLES]
    assert [r for s, r in rows if s == transfer] == [*trained("all"), *AGREEMENT_ROLES]
    # 20 queries, 8 documents each, one labelled X (excluded): 7 judged documents per query
    assert {(r["queries_used"], r["documents"]) for r in tables.agreement} == {(20, 140)}
    folder = options.out / "models" / "dense" / "words" / "relevance"
    direct = api.agreement(collection, [f"dense:model={folder}", "random"], ["relevance"])
    expected = direct.summary.iloc[0]
    row = rows[(cross, "trained dense (fold=cross)")]
    assert row["spec"] == expected["ranker"] == f"dense:fold=cross,model={folder}"
    for column in ("tau_mean", "tau_ci_low", "tau_ci_high", "tau_pooled"):
        assert row[column] == expected[column]
    # the paired comparison with random: the library's per-query tau-b, differenced
    per_query = direct.per_query[direct.per_query["skipped"] == ""]
    mine = per_query[per_query["ranker"] == expected["ranker"]]["kendall_tau"].to_numpy()
    other = per_query[per_query["ranker"] == "random"]["kendall_tau"].to_numpy()
    paired = {(r["setting"], r["trained"], r["baseline"]): r for r in tables.paired}
    assert len(paired) == len(tables.paired) == 2 * 2 * 3  # settings x trained x baselines
    versus_random = paired[(cross, "trained dense (fold=cross)", "random")]
    assert versus_random["queries"] == 20
    assert versus_random["difference"] == pytest.approx(float(np.mean(mine - other)), abs=1e-12)
    assert versus_random["p"] == paired_randomization_test(mine, other)
    for setting, fold in ((cross, "cross"), (transfer, "all")):
        for name in trained(fold):
            family = [paired[(setting, name, b)] for b in study.COMPARED]
            smallest = min(family, key=lambda r: r["p"])  # Holm: the smallest p times 3
            assert smallest["p_holm"] == pytest.approx(min(1.0, 3 * smallest["p"]))


def test_validation_rows_hold_every_ranker(ran):
    _, _, _, tables = ran
    names = [r["ranker"] for r in tables.validation if r["setting"] == study.CROSS_FITTED]
    assert names == [
        *trained("cross"),
        *FUSIONS,
        "dense",
        "tfidf",
        "random",
        "bm25",
        "dense+bm25 (fit)",
        "dense:query=narrative",
        "bm25:query=narrative",
    ]
    for setting, fold in ((study.CROSS_FITTED, "cross"), (study.TRANSFERRED, "all")):
        rows = [r for r in tables.validation if r["setting"] == setting]
        assert sum(r["chosen"] for r in rows) == 1
        assert {r["queries"] for r in rows} == {20}  # every query has a relevant document
        assert rows[0]["p_holm_vs_trained"] is None
        assert {r["compared_with"] for r in rows} == {f"trained cross (fold={fold})"}
        assert all(0 < r["p_holm_vs_trained"] <= 1 for r in rows[1:])


def test_transfer_reports_the_questions_it_left_out(ran):
    _, _, _, tables = ran
    counts = {r["check"]: r["count"] for r in tables.overlap}
    # other asks two of words' questions (asthma, gout) in another spelling: 2 queries x 7 pairs
    assert counts["questions also asked in words (left out of training)"] == 2
    assert counts["total excluded queries"] == 2
    assert counts["total excluded pairs"] == 14
    kept = [count for check, count in counts.items() if check.startswith("questions of")]
    assert kept == [0]  # "what helps hiccups" and "what helps asthma": Jaccard 2/4
    roles = [(r["role"], r["ranker"], r["collection"]) for r in tables.trainings]
    assert roles == [
        ("cross-fitted", "cross", "words"),
        ("cross-fitted", "dense", "words"),
        ("transfer", "cross", "other"),
        ("transfer", "dense", "other"),
    ]
    assert {r["status"] for r in tables.trainings} == {"trained"}


def test_near_duplicates_are_the_library_rule(ran):
    _, built, _, _ = ran
    words = api.Collection.load("words", built["indexes"])
    other = api.Collection.load("other", built["indexes"])
    # other's q01 "What HELPS  asthma?" is words' q01 "what helps asthma" once normalised
    assert study.near_duplicates(other, ["q01", "q03"], words) == ["q01 ~ words/q01"]


def test_outputs_are_written_and_a_second_run_reuses_the_models(ran):
    root, built, options, tables = ran
    for name in study.TABLES:
        assert (options.out / "tables" / f"{name}.csv").exists()
        saved = json.loads((options.out / "tables" / f"{name}.json").read_text())
        assert len(saved) == len(getattr(tables, name))
    text = (options.out / "study.md").read_text()
    assert "Smoke run" in text and "Where the trained ranker is **not** significantly above" in text
    again = study.run_study(options)
    assert [r["status"] for r in again.trainings] == ["reused"] * 4
    assert [r["wall_seconds"] for r in again.trainings] == [
        r["wall_seconds"] for r in tables.trainings
    ]
    assert again.agreement == tables.agreement
    with pytest.raises(study.StudyError, match=r"other settings \(seed differ\)"):
        study.run_study(options_for(root, built, seed=1))


def test_a_run_of_one_part_keeps_the_rows_of_the_others(ran):
    _, _, options, tables = ran
    saved = json.loads((options.out / "tables" / "agreement.json").read_text())
    again = study.run_study(dataclasses.replace(options, only=("transfer",)))
    assert [(r["role"], r["status"]) for r in again.trainings] == [
        ("cross-fitted", "reused"),  # the earlier run's rows, kept
        ("cross-fitted", "reused"),
        ("transfer", "reused"),
        ("transfer", "reused"),
    ]
    cross = [r for r in saved if r["setting"] == study.CROSS_FITTED]
    assert cross and [r for r in again.agreement if r["setting"] == study.CROSS_FITTED] == cross
    assert len(again.agreement) == len(tables.agreement)
    assert len(again.overlap) == len(tables.overlap)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "nowhere"], "--only nowhere: no collection 'nowhere' in the study"),
        (["--folds", "1"], "training: folds must be at least 2, got 1"),
        (["--device", "gpu"], "unknown device 'gpu'"),
        (["--epochs", "x"], "argument --epochs: invalid int value: 'x'"),
        (["--also", "nowhere"], "training collection 'nowhere' is not one of"),
        (["--also-query", "summary", "summary"], "also_query names a field twice"),
        (["--lr", "0"], "training: lr must be a finite number above 0, got 0.0"),
        (["--base", "nowhere"], "base model folder nowhere does not exist"),
    ],
)
def test_bad_arguments_are_one_line(tmp_path, capsys, argv, message):
    try:
        code = study.main(["--out", str(tmp_path / "out"), *argv])
    except SystemExit as stop:  # argparse's own checks exit
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("trained_rankers_study: error: ")
    assert message in err
    assert not (tmp_path / "out").exists()


def test_the_goals_name_each_trained_ranker_compared():
    # with --guard the trained ranker is compared alone and through the guard; the goal line
    # once kept only the last row of a baseline, unnamed
    row = {"collection": "liveqa-med-2017", "dimension": "relevance", "baseline": "dense"}
    rows = [
        {**row, "trained": "trained dense (fold=cross)", "verdict": "significantly above",
         "difference": 0.0403, "p_holm": 0.030},
        {**row, "trained": "trained dense (fold=cross) guarded",
         "verdict": "not significantly different", "difference": 0.0153, "p_holm": 0.421},
        {**row, "baseline": "tfidf", "trained": "trained dense (fold=cross)",
         "verdict": "significantly above", "difference": 0.2778, "p_holm": 0.0001},
    ]  # fmt: skip
    assert study.goals_section(rows)[1].splitlines() == [
        "- trained dense (fold=cross) above dense on liveqa-med-2017 / relevance: met "
        "(difference 0.0403, p (Holm) 0.030)",
        "- trained dense (fold=cross) guarded above dense on liveqa-med-2017 / relevance: "
        "NOT met (difference 0.0153, p (Holm) 0.421)",
    ]


def test_training_options_reach_nrp_train(tmp_path):
    # --train-layers 0 (every layer) is a value, not an omission: it once fell back to 1
    options, _ = study.parse_args(
        ["--out", str(tmp_path / "out"), "--base", "minilm", "--lr", "5e-5", "--train-layers", "0"]
    )
    settings = options.train_settings("dense")
    assert (settings["base"], settings["lr"], settings["train_layers"]) == ("minilm", 5e-5, 0)
    assert "lr" not in study.parse_args(["--out", str(tmp_path / "out")])[0].train_settings()


@pytest.mark.shared_data
def test_the_mediqa_training_manifest_reads_three_files(shared_data, tmp_path):
    shared_data("mediqa-2019")  # skips with a reason when ../shared/data is absent
    api.ingest(ROOT / "manifests" / "mediqa-2019-train.yaml", indexes_dir=tmp_path)
    collection = api.Collection.load("mediqa-2019-train", tmp_path)
    qids = collection.topics["qid"].astype(str)
    # training set 1 (104 questions), training set 2 (104), validation set (25)
    assert [int(qids.str.startswith(p).sum()) for p in ("t1-", "t2-", "v-")] == [104, 104, 25]
    qrels = collection.qrels("relevance")
    assert len(qrels) == len(collection.candidates()) == 1935
    # ReferenceScore 1..4 (491/716/322/406) as gains 0..3
    assert qrels["label"].value_counts().sort_index().tolist() == [491, 716, 322, 406]


def test_a_variant_with_the_guard_and_other_query_texts_and_its_comparison(
    tmp_path, one_torch_thread
):
    root = tmp_path / "built"
    built = handmade.build(root)
    training = {"base": str(built["dense_base"]), "lr": 1e-3, "batch": 16}
    options = options_for(
        root,
        built,
        out=tmp_path / "variant",
        only=("words/relevance",),
        rankers=("dense",),
        training={**training, "also_query": ("narrative",), "train_layers": 2},
        guard=True,
    )
    tables = study.run_study(options)
    record = json.loads(
        (tmp_path / "variant/models/dense/words/relevance/training.json").read_text()
    )
    assert record["data"]["also_query"] == ["narrative"] and record["data"]["pairs"] == 280
    guarded = "trained dense (fold=cross) guarded"
    assert guarded in [r["ranker"] for r in tables.agreement]
    pairs = {(r["trained"], r["baseline"]) for r in tables.paired}
    assert (guarded, study.GUARD_ROLE) in pairs and ("trained dense (fold=cross)", "dense") in pairs
    assert all(r["validity"] in ("pass", "FAIL") for r in tables.validation)
    text = study.main(["--out", str(tmp_path / "compared"), "--compare", str(tmp_path / "variant")])
    assert text == 0
    rows = json.loads(
        study.pd.read_csv(tmp_path / "compared" / "variants.csv").to_json(orient="records")
    )
    assert [r["trained"] for r in rows] == ["trained dense (fold=cross)", guarded]
    low, high = sorted(r["p"] for r in rows)  # Holm over the two rows
    assert sorted(r["p_holm_variants"] for r in rows) == pytest.approx(
        sorted([min(1.0, 2 * low), max(min(1.0, 2 * low), high)])
    )
    # a trained folder of other settings is refused, naming what differs
    again = dataclasses.replace(options, training={**training, "train_layers": 2})
    with pytest.raises(study.StudyError, match="also_query differ"):
        study.run_study(again)
