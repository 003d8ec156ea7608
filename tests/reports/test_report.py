"""``nrp report`` on a real run of the demo collection: validation of three rankers, NRP of the
64 demo answers with tfidf (relevance) and bm25 (readability), leave-one-out agreement, ROUGE
evaluations, a meta-evaluation by ``nrp meta`` (graded and categorical) and model sizes.

Every table is checked against the inputs it was made from; the page is checked for its
sections, escaping and links, and rendered in headless Chromium (skipped without it)."""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from headless import find_chromium, inspect_page, screenshot
from scipy import stats

from nrp import Collection, __version__, ingest
from nrp.analysis.agreement import agreement
from nrp.cli import main
from nrp.collection.manifest import COMBINED
from nrp.errors import ConfigError, InputError
from nrp.evaluators.run import evaluate_answers
from nrp.measures import display_name
from nrp.meta.report import meta_from_files, write_meta
from nrp.positioning.scoring import score_answers
from nrp.reports import build_report
from nrp.reports.tables import LEAVE_ONE_OUT
from nrp.validation.validate import validate

DEMO = resources.files("nrp") / "data" / "demo"
# an LLM name with HTML's special characters: the page must show it escaped, never as markup
WEAK = "demo-weak <i>&"
SECTIONS = ("validation", "nrp", "sizes", "agreement", "evaluators", "ranks")
TITLE = 'Demo <report> & "friends"'
pytestmark = pytest.mark.slow  # one real run and report build (~20 s on two cores)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("report")
    ix = root / "ix"
    ingest(DEMO / "manifest.yaml", indexes_dir=ix)
    collection = Collection.load("demo", ix)
    answers = pd.read_json(DEMO / "answers.jsonl", lines=True, dtype={"qid": str})
    answers["llm"] = answers["llm"].replace({"demo-weak": WEAK})
    folder = root / "results"
    folder.mkdir()

    validation = validate(collection, "tfidf,bm25:stats=collection,random", validity=False)
    validation.to_json(folder / "validation.json")
    rankers = {"relevance": "tfidf", "readability": "bm25:stats=collection"}
    results = score_answers(collection, answers, rankers)
    results.to_parquet(folder / "results.parquet", index=False)
    loo = agreement(collection, "tfidf")
    loo.to_json(folder / "agreement.json")

    evaluations = evaluate_answers(collection, answers, "rouge", cache=False)
    weighted = results[results["dimension"] == COMBINED].set_index("answer_id")["nrp"]
    words = answers.set_index("answer_id")["text"].str.split().str.len()
    good = evaluations["llm"] == "demo-good"
    evaluations["nrp_copy"] = evaluations["answer_id"].map(weighted)  # tau with NRP: 1
    evaluations["nrp_negated"] = -evaluations["nrp_copy"]  # tau with NRP: -1
    evaluations["words"] = evaluations["answer_id"].map(words).astype(float)
    # a judge's TRUE/FALSE label (text: not a score) with its confidence; one label wrong
    wrong = evaluations["answer_id"] == "demo-weak/short-qa/d1/0"  # ids keep the old name
    evaluations["tfn.label"] = np.where(good ^ wrong, "TRUE", "FALSE")
    evaluations["tfn.confidence"] = np.where(wrong, 0.3, np.where(good, 0.9, 0.6))
    evaluations.to_parquet(folder / "evaluations.parquet", index=False)
    (folder / "sizes.yaml").write_text(f"demo-good: 70\n'{WEAK}': 1.5\n", encoding="utf-8")

    # meta-evaluations as `nrp meta --out` writes them, one run per folder
    human = evaluations[["answer_id"]].assign(
        correctness=np.where(good, np.where(evaluations["prompt"] == "multimedqa", 2, 1), 0),
        verdict=np.where(good, "TRUE", "FALSE"),
    )
    human[["answer_id", "correctness"]].to_csv(root / "human.csv", index=False)
    human[["answer_id", "verdict"]].to_csv(root / "verdicts.csv", index=False)
    graded = meta_from_files(
        folder / "evaluations.parquet", root / "human.csv", score_columns=["rouge.1", "words"]
    )
    write_meta(graded, folder / "meta" / "demo-graded")
    labels = meta_from_files(
        folder / "evaluations.parquet", root / "verdicts.csv", categorical=True,
        label_column="tfn.label", confidence_column="tfn.confidence",
    )  # fmt: skip
    write_meta(labels, folder / "meta" / "demo-tfn")
    # and a table in another program's spelling (aliases of META_COLUMNS)
    (folder / "meta" / "other.csv").write_text(
        "metric,human,kendall_tau,tau_ci_low,tau_ci_high,rho,level\n"
        "bleu,fluency,0.25,0.1,0.4,0.3,system\n",
        encoding="utf-8",
    )
    (folder / "meta" / "notes.csv").write_text("a,b\n1,2\n", encoding="utf-8")

    out = root / "report"
    index = build_report(folder, out, title=TITLE)
    return SimpleNamespace(
        root=root, folder=folder, out=out, index=index, results=results, answers=answers,
        validation=validation, agreement=loo, evaluations=evaluations, graded=graded,
        labels=labels,
    )  # fmt: skip


def table(run: SimpleNamespace, name: str) -> pd.DataFrame:
    path = run.out / "tables" / f"{name}.csv"
    return pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={"class": str})


# -- files ---------------------------------------------------------------------------------------
def test_the_report_folder_holds_the_page_figures_tables_and_manifest(run):
    assert run.index == run.out / "index.html"
    figures = {p.name for p in (run.out / "figures").iterdir()}
    stems = ["validation", "nrp_by_llm", "nrp_by_size", "human_agreement",
             "evaluators_vs_nrp", "rank_distribution", "categorical_1_review"]  # fmt: skip
    assert figures == {f"{s}.{x}" for s in stems for x in ("png", "svg")}
    for stem in stems:
        png = (run.out / "figures" / f"{stem}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
        assert "<svg" in (run.out / "figures" / f"{stem}.svg").read_text(encoding="utf-8")
    tables = {p.name for p in (run.out / "tables").iterdir()}
    main = {
        "validation", "nrp_ranking", "nrp_sizes", "human_agreement", "categorical_1_per_class",
        "evaluator_means", "evaluator_nrp",
    }  # fmt: skip
    # the page's main tables are also written as Markdown and LaTeX
    assert tables == {
        "nrp_means.csv", "nrp_comparisons.csv", "categorical_1_review.csv",
        "rank_distribution.csv", *(f"{t}.{x}" for t in main for x in ("csv", "md", "tex")),
    }  # fmt: skip
    manifest = json.loads((run.out / "report.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "nrp-report" and manifest["nrp_version"] == __version__
    assert manifest["sections"] == list(SECTIONS)
    assert manifest["collection"] == "demo" and manifest["absent"] == {}
    assert set(manifest["inputs"]) == {
        "results", "validation", "agreement", "evaluations", "meta", "sizes"
    }  # fmt: skip
    # nothing left beside the report but the inputs: the build folder was renamed into place
    assert sorted(p.name for p in run.root.iterdir()) == [
        "human.csv", "ix", "report", "results", "verdicts.csv"
    ]  # fmt: skip


# -- tables against their inputs -------------------------------------------------------------------
def test_mean_nrp_per_llm_is_the_mean_of_the_results(run):
    means = table(run, "nrp_means")
    pooled = means[means["prompt"] == "(all)"].set_index(["dimension", "llm"])
    expected = run.results.groupby(["dimension", "llm"])["nrp"].mean()
    # every query has 2 prompts x 2 samples per LLM, so the query-level mean is the plain mean
    assert len(pooled) == 6 == len(expected)
    for key, value in expected.items():
        assert pooled.loc[key, "mean_nrp"] == pytest.approx(value, abs=1e-12)
        assert pooled.loc[key, "n_answers"] == 32 and pooled.loc[key, "n_queries"] == 8
        assert pooled.loc[key, "ci_low"] <= value <= pooled.loc[key, "ci_high"]
    cells = means[means["prompt"] != "(all)"]
    assert len(cells) == 12 and (cells["n_answers"] == 16).all()
    share = run.results.groupby(["dimension", "llm"])["nrp"].apply(lambda v: (v >= 1).mean())
    assert dict(pooled["share_nrp_1"]) == pytest.approx(dict(share))


def test_the_ranked_table_orders_the_weighted_means_best_first(run):
    ranking = table(run, "nrp_ranking")
    means = table(run, "nrp_means")
    weighted = means[(means["dimension"] == COMBINED) & (means["prompt"] != "(all)")]
    assert len(ranking) == len(weighted) == 4  # 2 LLMs x 2 prompts
    assert ranking["rank"].tolist() == [1, 2, 3, 4]
    assert sorted(ranking["mean_nrp"], reverse=True) == ranking["mean_nrp"].tolist()
    expected = weighted.set_index(["llm", "prompt"])["mean_nrp"]
    for row in ranking.itertuples():
        assert row.mean_nrp == pytest.approx(expected[(row.llm, row.prompt)], abs=1e-12)
        assert 0 <= row.ci_low <= row.mean_nrp <= row.ci_high <= 1
        assert row.n_answers == 16 and row.n_queries == 8 and isinstance(row.group, str)
    first = (run.out / "tables" / "nrp_ranking.md").read_text(encoding="utf-8").splitlines()[0]
    assert first == "| rank | llm | prompt | mean NRP | 95% CI | group | queries | answers |"


def test_validation_table_repeats_the_validation_result(run):
    frame = table(run, "validation")
    v = run.validation
    assert len(frame) == 2 * 3 * 3  # dimensions x rankers x measures
    for row in frame.itertuples():
        dim = v.dimensions[row.dimension]
        measure = next(m for m in v.measures if display_name(m) == row.measure)
        summary = dim.summary[row.ranker][measure]
        assert row.mean == pytest.approx(summary.mean, abs=1e-12)
        assert row.ci_low == pytest.approx(summary.ci_low, abs=1e-12)
        assert row.n_queries == summary.n == 8
        assert row.chosen == (v.chosen()[row.dimension] == row.ranker)
        if not row.chosen:
            assert row.p_vs_best == pytest.approx(dim.p_against(dim.choice.best, row.ranker))
    # rankers best first on nDCG@10 within each dimension
    primary = frame[frame["primary"]]
    for _, group in primary.groupby("dimension"):
        assert group["mean"].is_monotonic_decreasing and group["chosen"].iloc[0]


def test_rank_distribution_counts_every_answer(run):
    frame = table(run, "rank_distribution")
    for dimension in ("relevance", "readability"):
        mine = frame[frame["dimension"] == dimension]
        assert mine["answers"].sum() == 64
        scored = run.results[run.results["dimension"] == dimension]
        expected = scored.groupby(["llm", "rank"]).size()
        assert dict(mine.set_index(["llm", "rank"])["answers"]) == dict(expected)
    assert COMBINED not in set(frame["dimension"])  # the weighted rows have no rank


def test_sizes_table_pairs_each_llm_with_its_pooled_mean(run):
    sizes = table(run, "nrp_sizes")
    means = table(run, "nrp_means")
    assert dict(zip(sizes["llm"], sizes["params_b"], strict=True)) == {"demo-good": 70.0, WEAK: 1.5}
    assert len(sizes) == 2 * 3  # LLMs x measures (relevance, readability, weighted)
    pooled = means[means["prompt"] == "(all)"].set_index(["dimension", "llm"])["mean_nrp"]
    for row in sizes.itertuples():
        assert row.mean_nrp == pytest.approx(pooled[(row.dimension, row.llm)], abs=1e-12)


def test_agreement_rows_come_from_agreement_json_and_nrp_meta(run):
    frame = table(run, "human_agreement")
    loo = frame[frame["source"] == LEAVE_ONE_OUT].set_index("dimension")
    summary = run.agreement.summary.set_index("dimension")
    assert sorted(loo.index) == ["readability", "relevance"]
    for dimension in loo.index:
        assert loo.loc[dimension, "evaluator"] == "NRP tfidf"
        assert loo.loc[dimension, "tau"] == pytest.approx(summary.loc[dimension, "tau_mean"])
        assert loo.loc[dimension, "tau_high"] == pytest.approx(
            summary.loc[dimension, "tau_ci_high"]
        )
        assert loo.loc[dimension, "n"] == summary.loc[dimension, "queries_used"]
    graded = frame[frame["source"] == "meta-evaluation demo-graded"]
    # 2 scores x 1 dimension x 3 levels (query, pooled, system)
    assert len(graded) == 6 and set(graded["level"]) == {"query", "pooled", "system"}
    for score in ("rouge.1", "words"):
        expected = run.graded.result.row(score, "correctness")
        mine = graded[graded["evaluator"] == score].set_index("level")
        assert mine.loc["query", "tau"] == pytest.approx(expected["tau_mean"])
        assert mine.loc["query", "tau_low"] == pytest.approx(expected["tau_ci_low"])
        assert mine.loc["query", "n"] == expected["queries_used"] == 8
        assert mine.loc["pooled", "spearman"] == pytest.approx(expected["rho_pooled"])
        assert mine.loc["system", "tau"] == pytest.approx(expected["tau_system"])
        assert mine.loc["system", "n"] == 2  # two LLMs
    other = frame[frame["source"] == "meta-evaluation meta"].iloc[0]
    assert (other["evaluator"], other["dimension"], other["level"]) == ("bleu", "fluency", "system")
    assert (other["tau"], other["tau_low"], other["tau_high"], other["spearman"]) == (
        0.25, 0.1, 0.4, 0.3
    )  # fmt: skip
    per_class = table(run, "categorical_1_per_class")
    expected = run.labels.result.per_class.reset_index(drop=True)
    assert per_class["accuracy"].tolist() == pytest.approx(expected["accuracy"].tolist())
    assert sorted(per_class["class"]) == ["FALSE", "TRUE"]
    # 32 TRUE all right; 32 FALSE with one labelled TRUE
    accuracy = dict(zip(per_class["class"], per_class["accuracy"], strict=True))
    assert accuracy == pytest.approx({"TRUE": 1.0, "FALSE": 31 / 32})


def test_evaluator_tables_hold_means_and_agreement_with_nrp(run):
    versus = table(run, "evaluator_nrp").set_index(["evaluator", "dimension"])
    columns = {
        "rouge.1",
        "rouge.2",
        "rouge.L",
        "nrp_copy",
        "nrp_negated",
        "words",
        "tfn.confidence",
    }
    assert set(versus.index.get_level_values(0)) == columns  # text columns are no scores
    copy = versus.loc[("nrp_copy", COMBINED)]
    assert (copy["tau"], copy["spearman"], copy["tau_pooled"]) == (1.0, 1.0, 1.0)
    assert copy["n_queries"] == 8 and copy["n_answers"] == 64
    assert versus.loc[("nrp_negated", COMBINED), "tau"] == -1.0
    # against the relevance NRP: Kendall tau-b of (weighted, relevance) per query, averaged
    nrp = run.results.pivot(index="answer_id", columns="dimension", values="nrp")
    nrp["qid"] = run.results.drop_duplicates("answer_id").set_index("answer_id")["qid"]
    taus = [
        stats.kendalltau(g[COMBINED], g["relevance"], variant="b").statistic
        for _, g in nrp.groupby("qid")
    ]
    assert versus.loc[("nrp_copy", "relevance"), "tau"] == pytest.approx(np.mean(taus))

    means = table(run, "evaluator_means")
    words = means[(means["evaluator"] == "words") & (means["prompt"] == "(all)")]
    expected = run.evaluations.groupby("llm")["words"].mean()
    assert dict(zip(words["llm"], words["mean"], strict=True)) == pytest.approx(dict(expected))
    assert (words["n_answers"] == 32).all() and (words["missing"] == 0).all()


# -- the page --------------------------------------------------------------------------------------
def test_page_has_every_section_escaped_text_and_working_links(run):
    page = run.index.read_text(encoding="utf-8")
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    titles = (
        "Ranker validation", "NRP per LLM and prompt", "Model size and NRP",
        "Agreement with human judgments", "Other evaluators", "Distribution of ranks",
    )  # fmt: skip
    for title in titles:
        assert f"<h2>{title}</h2>" in page
    assert "<title>Demo &lt;report&gt; &amp; &quot;friends&quot;</title>" in page
    assert "<report>" not in page and "<i>&" not in page
    assert "demo-weak &lt;i&gt;&amp;" in page
    assert "<dt>Collection</dt><dd>demo</dd>" in page
    assert f"<dt>nrp version</dt><dd>{__version__}</dd>" in page
    assert "relevance: tfidf; readability: bm25:stats=collection" in page
    assert "<script" not in page and "http://" not in page and "https://" not in page
    links = re.findall(r'(?:src|href)="([^"#]+)"', page)
    assert len(links) > 20
    for link in links:
        assert (run.out / link).is_file(), link
    # an input CSV that is no correlation table is named, not silently dropped
    assert "notes.csv: not an evaluator x dimension correlation table (ignored)" in page


@pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (make setup adds it)")
def test_page_renders_in_headless_chromium_without_console_errors(run, tmp_path):
    chromium = find_chromium()
    url = run.index.as_uri()
    shot = tmp_path / "screenshot.png"
    done = screenshot(chromium, url, shot, tmp_path / "profile-1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 50_000
    report = inspect_page(chromium, url, tmp_path / "full.png", tmp_path / "profile-2")
    assert report.errors() == []
    assert report.broken_images == []
    assert report.images == run.index.read_text(encoding="utf-8").count("<img ") == 7
    assert report.title == TITLE
    assert (tmp_path / "full.png").stat().st_size > 100_000
    # nothing cut off at 1,280 px: no element passes the viewport, no table overflows its box
    assert report.width["viewport"] == 1280 and report.width["page"] <= 1280
    assert report.width["wide"] == []


# -- replacing a report, refusing, failing ------------------------------------------------------
def test_cli_report_replaces_an_old_report_and_lists_missing_sections(run, tmp_path, capsys):
    folder = tmp_path / "only-results"
    folder.mkdir()
    shutil.copy(run.folder / "results.parquet", folder)
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.json").write_text('{"kind": "nrp-report"}', encoding="utf-8")
    (out / "stale.txt").write_text("from an older report", encoding="utf-8")
    assert main(["report", str(folder), "--out", str(out), "--seed", "3"]) == 0
    assert capsys.readouterr().out.strip() == str(out / "index.html")
    assert not (out / "stale.txt").exists()
    manifest = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert manifest["sections"] == ["nrp", "ranks"] and manifest["seed"] == 3
    assert set(manifest["absent"]) == {
        "Ranker validation", "Model size and NRP", "Agreement with human judgments",
        "Other evaluators",
    }  # fmt: skip
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "no validation.json (nrp validate ... --out, or --validation)" in page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["only-results", "report"]


def test_a_folder_that_is_not_a_report_is_never_replaced(run, tmp_path):
    before = sorted(p.name for p in run.folder.iterdir())
    with pytest.raises(ConfigError, match="not an nrp report"):
        build_report(run.folder, run.folder)
    assert sorted(p.name for p in run.folder.iterdir()) == before
    inside = tmp_path / "old-report"
    inside.mkdir()
    (inside / "report.json").write_text('{"kind": "nrp-report"}', encoding="utf-8")
    shutil.copy(run.folder / "results.parquet", inside)
    with pytest.raises(ConfigError, match="lies inside --out"):
        build_report(inside / "results.parquet", inside)


def test_a_bad_input_fails_in_one_line_and_keeps_the_old_report(run, tmp_path, capsys):
    folder = tmp_path / "results"
    folder.mkdir()
    shutil.copy(run.folder / "results.parquet", folder)
    (folder / "sizes.csv").write_text("llm,params_b\ndemo-good,7\ndemo-x,abc\n", encoding="utf-8")
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.json").write_text('{"kind": "nrp-report"}', encoding="utf-8")
    assert main(["report", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"nrp: error: {folder / 'sizes.csv'}:3: demo-x: size 'abc' is not a number"
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "results"]
    with pytest.raises(InputError, match=r"not_there\.json: file not found"):
        build_report(folder, out, validation=tmp_path / "not_there.json")


def test_a_categorical_meta_run_alone_is_read_as_label_accuracy(run):
    from nrp.reports.inputs import load_inputs

    alone = load_inputs(run.folder / "results.parquet", meta=run.folder / "meta" / "demo-tfn")
    assert alone.meta is None  # no correlation table in that folder
    (labels,) = alone.categorical
    assert labels.name == "demo-tfn" and set(labels.plots) == {"png", "svg"}
    assert labels.summary["accuracy"] == pytest.approx(63 / 64)
    assert len(labels.review) == len(run.labels.result.review)
