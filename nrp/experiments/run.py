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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from nrp.analysis.summary import Summary, summarize
from nrp.collection.build import ingest
from nrp.collection.collection import Collection
from nrp.errors import NrpError
from nrp.evaluators.run import evaluate_answers
from nrp.executors.base import Executor, active_executor, using_executor
from nrp.experiments.schema import Experiment, load_experiment
from nrp.generation.generate import ANSWER_COLUMNS, generate_answers, write_answers
from nrp.positioning.choice import RankerChoiceLike
from nrp.positioning.scoring import score_answers
from nrp.progress import Progress
from nrp.reports.build import build_report
from nrp.tables import FrameView, write_aside, write_text
from nrp.validation.result import VALIDATION_FILE, ValidationResult
from nrp.validation.validate import validate

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


def _collection(experiment: Experiment, progress: Progress | None) -> Collection:
    if experiment.manifest is not None:
        result = ingest(experiment.manifest, experiment.collection or None, experiment.indexes)
        if progress:
            state = "built" if result.rebuilt else "up to date"
            progress(f"collection {result.name}: {state}")
        return Collection.load(result.name, experiment.indexes)
    return Collection.load(experiment.collection, experiment.indexes)


@dataclass
class ExperimentResult(FrameView):
    """What ``run_experiment`` made, in memory as on disk: ``out`` (the output folder; the
    result is path-like, so ``Path(result)`` is that folder), ``answers`` (the generated
    answers), ``results`` (NRP per answer and dimension), ``evaluations`` (the other evaluators'
    table, None without any), ``validation`` (the ``ValidationResult`` when the experiment
    validated its rankers, None with fixed rankers), ``summary`` (``nrp.analysis.summary``,
    computed from ``results`` on first use when the run found its summary files up to date);
    ``to_frame()``: the summary's frame (``Summary.to_frame``: one row per (dimension, ranker,
    llm, prompt), the rows pooled over prompts kept apart)."""

    out: Path
    answers: pd.DataFrame
    results: pd.DataFrame
    evaluations: pd.DataFrame | None
    validation: ValidationResult | None
    computed_summary: Summary | None = None

    @cached_property
    def summary(self) -> Summary:
        return self.computed_summary or summarize(self.results)

    def __fspath__(self) -> str:
        return str(self.out)

    def __truediv__(self, other: str) -> Path:
        return self.out / other

    def to_frame(self) -> pd.DataFrame:
        return self.summary.to_frame()

    def format(self) -> str:
        return self.summary.format()


def run_experiment(
    path: str | Path, progress: Progress | None = None, executor: Executor | None = None
) -> ExperimentResult:
    """Run the experiment file at ``path``; returns what it made (``ExperimentResult``; its
    files: see the module docstring). ``executor``: where generation, validation, positioning
    and evaluation run (``nrp.executors``; default: the active executor, else this process)."""
    with using_executor(executor if executor is not None else active_executor()):
        return _run(path, progress)


#: ``nrp.run(path)``: the command's name for ``run_experiment``
run = run_experiment


def _run(path: str | Path, progress: Progress | None) -> ExperimentResult:
    experiment = load_experiment(path)
    experiment.out.mkdir(parents=True, exist_ok=True)
    old_keys = _previous_keys(experiment.out)
    collection = _collection(experiment, progress)
    run = _Run(experiment, collection, progress, old_keys)
    answers = run.generate()
    rankers = run.validate()
    results = run.score(answers, rankers)
    evaluations = run.evaluate(answers)
    summary = run.summarize(results)
    run.report()
    run.finish()
    validated = experiment.validate_rankers
    validation = ValidationResult.from_json(experiment.out / VALIDATION_FILE) if validated else None
    return ExperimentResult(experiment.out, answers, results, evaluations, validation, summary)


def _previous_keys(out: Path) -> dict[str, str]:
    """The step keys of the last run into ``out`` (none when it has no readable run.json)."""
    previous: dict[str, Any] = {}
    if (out / RUN_FILE).is_file():
        try:
            previous = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            previous = {}
    return previous.get("keys", {})


@dataclass
class _Run:
    """One run of an experiment file, step by step (module docstring). ``keys``: this run's
    step keys; ``counts``: what each step computed or took from a cache (both go to run.json,
    in step order)."""

    experiment: Experiment
    collection: Collection
    progress: Progress | None
    old_keys: dict[str, str]
    keys: dict[str, str] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.experiment.out

    def say(self, line: str) -> None:
        if self.progress:
            self.progress(line)

    def unchanged(self, step: str, key: str, output: Path) -> bool:
        """Record ``step``'s key; True when the last run had the same and ``output`` is there."""
        self.keys[step] = key
        return key == self.old_keys.get(step) and output.is_file()

    def generate(self) -> pd.DataFrame:
        """Every LLM's answers (their resumable stores beside answers/LLM.jsonl), written
        together to answers.parquet; the answer columns that the later steps read."""
        experiment = self.experiment
        frames = []
        self.counts["generate"] = {}
        for llm in experiment.llms:
            self.say(f"generate: {llm.label}")
            answers = generate_answers(
                self.collection, llm, experiment.prompts, experiment.samples, experiment.options,
                self.out / "answers" / f"{llm.label}.jsonl",
                limit_queries=experiment.limit_queries, progress=self.progress,
            )  # fmt: skip
            self.counts["generate"][llm.label] = answers.attrs["counts"]
            frames.append(answers)
        answers = pd.concat(frames, ignore_index=True)
        if answers.empty:
            raise NrpError(f"{experiment.path}: every generated answer is empty; nothing to score")
        write_answers(answers, self.out / "answers.parquet")
        return answers[ANSWER_COLUMNS]

    def validate(self) -> str | dict[str, str] | None:
        """The rankers to score with: validation.json (validated again only when the collection
        or the candidate rankers changed), or the experiment's fixed rankers."""
        experiment = self.experiment
        validation = self.out / VALIDATION_FILE
        if not experiment.validate_rankers:
            validation.unlink(missing_ok=True)
            return experiment.fixed_rankers
        key = _sha(self.collection.meta.get("fingerprint"), experiment.validate_rankers)
        if self.unchanged("validate", key, validation):
            self.counts["validate"] = "cached"
        else:
            self.say(f"validate: {', '.join(experiment.validate_rankers)}")
            result = validate(self.collection, experiment.validate_rankers, progress=self.progress)
            result.to_json(validation)
            self.counts["validate"] = "computed"
        return str(validation)

    def score(self, answers: pd.DataFrame, rankers: RankerChoiceLike) -> pd.DataFrame:
        """NRP of every answer (positions from the results cache beside the collection)."""
        self.say(f"score: {len(answers):,} answers")
        results = score_answers(
            self.collection, answers, rankers, ties=self.experiment.ties, progress=self.progress
        )
        write_aside(self.out / "results.parquet", lambda p: results.to_parquet(p, index=False))
        write_aside(self.out / "results.csv", lambda p: results.to_csv(p, index=False))
        score_counts = results.attrs.get("counts", {})
        self.counts["score"] = {
            "answers": score_counts.get("answers", 0),
            "answers_positioned": score_counts.get("answers_scored", 0),
            "answers_from_cache": score_counts.get("answers_from_results_cache", 0),
        }
        return results

    def evaluate(self, answers: pd.DataFrame) -> pd.DataFrame | None:
        """The experiment's other evaluators (per-item cache beside the collection)."""
        evaluators = self.experiment.evaluators
        if not evaluators:
            (self.out / "evaluations.parquet").unlink(missing_ok=True)
            (self.out / "evaluations.csv").unlink(missing_ok=True)
            return None
        self.say(f"evaluate: {', '.join(evaluators)}")
        table = evaluate_answers(self.collection, answers, evaluators, progress=self.progress)
        write_aside(self.out / "evaluations.parquet", lambda p: table.to_parquet(p, index=False))
        write_aside(self.out / "evaluations.csv", lambda p: table.to_csv(p, index=False))
        self.counts["evaluate"] = table.attrs.get("evaluators", {})
        return table

    def summarize(self, results: pd.DataFrame) -> Summary | None:
        """The summary of ``results``, computed and written when its files are not up to date
        (None when they are)."""
        # the CSVs: the Parquet files' metadata holds this run's cache counts, which change
        key = _sha(self.out / "results.csv")
        if self.unchanged("summary", key, self.out / "summary.json"):
            self.counts["summary"] = "cached"
            return None
        self.say("summary")
        summary = summarize(results)
        summary.to_json(self.out / "summary.json")
        summary.to_csv(self.out)
        self.counts["summary"] = "computed"
        return summary

    def report(self) -> None:
        if not self.experiment.report:
            return
        report = self.out / "report"
        key = _sha(
            self.experiment.name,
            self.out / "results.csv",
            self.out / VALIDATION_FILE,
            self.out / "evaluations.csv",
        )
        if self.unchanged("report", key, report / "index.html"):
            self.counts["report"] = "cached"
            return
        self.say("report")
        title = f"NRP report: {self.experiment.name}"
        build_report(self.out, report, title=title, progress=self.progress)
        self.counts["report"] = "computed"

    def finish(self) -> None:
        """run.json: what this run computed and its step keys."""
        run = {
            "experiment": str(self.experiment.path),
            "name": self.experiment.name,
            "collection": self.collection.name,
            "collection_fingerprint": self.collection.meta.get("fingerprint"),
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "counts": self.counts,
            "keys": self.keys,
        }
        write_text(self.out / RUN_FILE, json.dumps(run, indent=2) + "\n")
