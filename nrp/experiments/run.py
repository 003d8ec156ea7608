"""``run_experiment(path)``: generate -> validate -> score -> evaluate -> summary -> report.

The output folder (``out`` of the experiment file) ends up holding what ``nrp report`` reads::

    answers/LLM.jsonl (+ hidden resumable stores)  answers.parquet   validation.json
    results.parquet/.csv   evaluations.parquet/.csv   summary.json + CSVs   report/index.html
    run.json: what each step computed and what it took from a cache

Every step is cached, so adding one LLM to the file computes only what is new:

- **generate**: one resumable store per LLM (``nrp.generation``): answers already there are
  never generated again;
- **validate**: the rankers' scores come from the score cache beside the collection; the whole
  step is skipped when its inputs (collection fingerprint, ranker specs) are unchanged;
- **score**: positions come from the results cache beside the collection (per answer text and
  ranker fingerprint): only new answers are positioned;
- **evaluate**: the per-item evaluation cache beside the collection;
- **summary** and **report**: skipped when the tables they read (results.csv, validation.json,
  evaluations.csv) are byte-identical to last time.

Step keys (SHA-256 of each step's inputs) are kept in ``run.json``; a step is redone when its key
changed or its output is missing. Counts of the last run are in ``run.json["counts"]`` (the
test checks that a second run with one more LLM generates and positions only that LLM's
answers).

On an executor (``nrp run --executor ray``): generation, validation (the rankers' D_q scores),
positioning and evaluation send their partitions to it and store what comes back in the same
stores and caches, so a Ray run and a local run fill the same files and either can resume the
other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.errors import NrpError
from nrp.executors.base import Executor, active_executor, using_executor
from nrp.experiments.schema import Experiment, load_experiment
from nrp.generation.generate import ANSWER_COLUMNS, generate_answers, write_answers
from nrp.nrp.report_tables import write_aside, write_text

Progress = Callable[[str], None]
RUN_FILE = "run.json"


def _sha(*parts: Any) -> str:
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            digest.update(part.read_bytes() if part.is_file() else b"<missing>")
        else:
            digest.update(json.dumps(part, sort_keys=True, default=str).encode())
        digest.update(b"\x1f")
    return digest.hexdigest()


def _collection(experiment: Experiment, progress: Progress | None):
    from nrp.collection.build import ingest
    from nrp.collection.collection import Collection

    if experiment.manifest is not None:
        result = ingest(experiment.manifest, experiment.collection or None, experiment.indexes)
        if progress:
            state = "built" if result.rebuilt else "up to date"
            progress(f"collection {result.name}: {state}")
        return Collection.load(result.name, experiment.indexes)
    return Collection.load(experiment.collection, experiment.indexes)


def run_experiment(
    path: str | Path, progress: Progress | None = None, executor: Executor | None = None
) -> Path:
    """Run the experiment file at ``path``; returns its output folder (see the module
    docstring). ``executor``: where generation, validation, positioning and evaluation run
    (``nrp.executors``; default: the active executor, else this process)."""
    with using_executor(executor if executor is not None else active_executor()):
        return _run(path, progress)


def _run(path: str | Path, progress: Progress | None) -> Path:
    experiment = load_experiment(path)
    out = experiment.out
    out.mkdir(parents=True, exist_ok=True)
    previous: dict[str, Any] = {}
    if (out / RUN_FILE).is_file():
        try:
            previous = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            previous = {}
    old_keys: dict[str, str] = previous.get("keys", {})
    keys: dict[str, str] = {}
    counts: dict[str, Any] = {}

    def say(line: str) -> None:
        if progress:
            progress(line)

    collection = _collection(experiment, progress)
    fingerprint = collection.meta.get("fingerprint")

    # -- generate ---------------------------------------------------------------------------
    frames = []
    counts["generate"] = {}
    for llm in experiment.llms:
        say(f"generate: {llm.label}")
        answers = generate_answers(
            collection, llm, experiment.prompts, experiment.samples, experiment.options,
            out / "answers" / f"{llm.label}.jsonl", limit_queries=experiment.limit_queries,
            progress=progress,
        )  # fmt: skip
        counts["generate"][llm.label] = answers.attrs["counts"]
        frames.append(answers)
    answers = pd.concat(frames, ignore_index=True)
    if answers.empty:
        raise NrpError(f"{experiment.path}: every generated answer is empty; nothing to score")
    write_answers(answers, out / "answers.parquet")
    ranked = answers[ANSWER_COLUMNS]

    # -- validate ---------------------------------------------------------------------------
    if experiment.validate_rankers:
        from nrp.validation import validate

        validation = out / "validation.json"
        keys["validate"] = _sha(fingerprint, experiment.validate_rankers)
        if keys["validate"] == old_keys.get("validate") and validation.is_file():
            counts["validate"] = "cached"
        else:
            say(f"validate: {', '.join(experiment.validate_rankers)}")
            result = validate(collection, experiment.validate_rankers, progress=progress)
            result.to_json(validation)
            counts["validate"] = "computed"
        rankers: Any = str(validation)
    else:
        rankers = experiment.fixed_rankers
        (out / "validation.json").unlink(missing_ok=True)

    # -- score ------------------------------------------------------------------------------
    from nrp.nrp.scoring import score_answers

    say(f"score: {len(ranked):,} answers")
    results = score_answers(collection, ranked, rankers, ties=experiment.ties, progress=progress)
    write_aside(out / "results.parquet", lambda p: results.to_parquet(p, index=False))
    write_aside(out / "results.csv", lambda p: results.to_csv(p, index=False))
    score_counts = results.attrs.get("counts", {})
    counts["score"] = {
        "answers": score_counts.get("answers", 0),
        "answers_positioned": score_counts.get("answers_scored", 0),
        "answers_from_cache": score_counts.get("answers_from_results_cache", 0),
    }

    # -- evaluate ---------------------------------------------------------------------------
    if experiment.evaluators:
        from nrp.evaluators.run import evaluate_answers

        say(f"evaluate: {', '.join(experiment.evaluators)}")
        table = evaluate_answers(collection, ranked, experiment.evaluators, progress=progress)
        write_aside(out / "evaluations.parquet", lambda p: table.to_parquet(p, index=False))
        write_aside(out / "evaluations.csv", lambda p: table.to_csv(p, index=False))
        counts["evaluate"] = table.attrs.get("evaluators", {})
    else:
        (out / "evaluations.parquet").unlink(missing_ok=True)
        (out / "evaluations.csv").unlink(missing_ok=True)

    # -- summary ----------------------------------------------------------------------------
    from nrp.nrp.summary import summarize

    # the CSVs: the Parquet files' metadata holds this run's cache counts, which change
    keys["summary"] = _sha(out / "results.csv")
    if keys["summary"] == old_keys.get("summary") and (out / "summary.json").is_file():
        counts["summary"] = "cached"
    else:
        say("summary")
        summary = summarize(results)
        summary.to_json(out / "summary.json")
        summary.to_csv(out)
        counts["summary"] = "computed"

    # -- report -----------------------------------------------------------------------------
    report = out / "report"
    if experiment.report:
        from nrp.reports import build_report

        keys["report"] = _sha(
            experiment.name,
            out / "results.csv",
            out / "validation.json",
            out / "evaluations.csv",
        )
        if keys["report"] == old_keys.get("report") and (report / "index.html").is_file():
            counts["report"] = "cached"
        else:
            say("report")
            build_report(out, report, title=f"NRP report: {experiment.name}", progress=progress)
            counts["report"] = "computed"

    run = {
        "experiment": str(experiment.path),
        "name": experiment.name,
        "collection": collection.name,
        "collection_fingerprint": fingerprint,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "counts": counts,
        "keys": keys,
    }
    write_text(out / RUN_FILE, json.dumps(run, indent=2) + "\n")
    return out
