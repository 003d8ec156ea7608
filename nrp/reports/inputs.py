"""What a report is built from: the results of ``nrp score`` and whatever else the run left.

``load_inputs(results, ...)`` reads, from a RESULTS folder (or explicit paths, which win):

- ``results.parquet`` (else ``results.csv``): required, the per-answer frame of ``nrp score``
  (read with ``nrp.analysis.summary.read_results``; the Parquet file keeps the scoring settings in
  its attrs: collection, rankers, ties, weights, the single-ranker note);
- the ranker validation (``nrp validate``), found in this order: ``--validation``, a
  ``validation.json`` in RESULTS, the file ``scoring.json`` (``nrp score``'s record beside the
  results) names, the collection's own ``validation.json`` (the record's collection in the
  default indexes folder, ``$NRP_INDEXES`` or ``./indexes``); ``validation_from`` says which,
  and a recorded file that no longer exists is a note, not an error;
- ``agreement.json`` (``nrp agreement --out``): leave-one-out agreement of NRP with the grades;
- ``evaluations.parquet`` (else ``.csv``; ``nrp evaluate --out``): one row per answer, one
  float column per evaluator score;
- meta-evaluation results (``--meta DIR``, repeatable, or a ``meta/`` folder in RESULTS):
  evaluator x human dimension correlations, and a judge's label accuracy;
- model sizes (``--sizes FILE`` or ``sizes.csv`` / ``sizes.yaml`` in RESULTS): LLM -> number of
  parameters in billions;
- ``flags.csv`` beside the results (``nrp score`` writes it; ``nrp.analysis.flags``): the flags
  of degenerate answers, shown as the share of flagged answers per LLM x prompt.

Meta-evaluation. A meta folder is read as itself and its subfolders, one run each (named by the
folder: ``meta/dstc7``, ``meta/summeval``):

- ``meta_summary.csv`` written by ``nrp meta --out``: each row (score column x human dimension
  x subset) gives up to three rows of the report, one per level: ``query`` (mean per-query
  Kendall tau-b with its t-interval, over ``queries_used`` queries), ``pooled`` (over every
  item, bootstrap interval) and ``system`` (systems ranked by mean score vs by mean human
  label); ``meta_per_query.csv`` and ``meta_systems.csv`` beside it are not repeated.
- ``categorical_per_class.csv`` (``nrp meta --categorical``): per-class accuracy, with
  ``categorical.json``'s overall and macro accuracy, and the review curve
  (``categorical_review.csv``, ``review.png``/``.svg``) when confidences were given.
- any other CSV, in a folder or given as a file, whose columns name an evaluator, a human
  dimension and a Kendall tau: the generic table. Expected columns (``META_COLUMNS``):
  ``evaluator``, ``dimension``, ``tau``, and optionally ``tau_low``, ``tau_high`` (its
  interval), ``spearman``, ``spearman_low``, ``spearman_high``, ``n`` (the queries, items or
  systems the value is over), ``level`` (``query``, ``pooled``, ``system``...), ``subset`` and
  ``dataset`` (default: the folder or file name). Common other spellings are accepted
  (``META_ALIASES``: ``score``/``metric`` for evaluator, ``human`` for dimension, ``tau_mean``,
  ``tau_ci_low``, ``rho``...). CSVs with none of these shapes are listed in the report's notes.

Why read everything up front: a bad file fails the report before anything is written, with one
line naming the file (and line) that is wrong.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from nrp import jsontext
from nrp.analysis.flags import flags_path, read_flags
from nrp.analysis.summary import read_results, scoring_beside
from nrp.collection.build import default_indexes_dir
from nrp.collection.mapping_files import compose_yaml, yaml_error
from nrp.collection.reading import folder_files
from nrp.errors import InputError
from nrp.positioning.record import SCORING_FILE
from nrp.tables import require_columns
from nrp.validation.result import VALIDATION_FILE, ValidationResult

AGREEMENT_FILE = "agreement.json"
EVALUATION_FILES = ("evaluations.parquet", "evaluations.csv")
SIZE_FILES = ("sizes.csv", "sizes.tsv", "sizes.yaml", "sizes.yml")
META_FOLDER = "meta"
#: columns of an evaluator x human dimension correlation table (the first three required)
META_COLUMNS = (
    "evaluator",
    "dimension",
    "tau",
    "tau_low",
    "tau_high",
    "spearman",
    "spearman_low",
    "spearman_high",
    "n",
    "level",
    "subset",
    "dataset",
)
META_TEXT_COLUMNS = ("evaluator", "dimension", "level", "subset", "dataset")
META_ALIASES = {
    "evaluator": ("score", "metric", "score_column", "system"),
    "dimension": ("human", "human_dimension", "label", "aspect"),
    "tau": ("tau_mean", "kendall_tau", "kendall", "tau_b"),
    "tau_low": ("tau_ci_low", "kendall_low", "tau_lo"),
    "tau_high": ("tau_ci_high", "kendall_high", "tau_hi"),
    "spearman": ("rho", "rho_mean", "spearman_rho", "spearman_mean"),
    "spearman_low": ("rho_ci_low", "rho_low", "spearman_ci_low"),
    "spearman_high": ("rho_ci_high", "rho_high", "spearman_ci_high"),
    "n": ("n_queries", "queries_used", "n_items", "n_systems", "count"),
}
#: size columns accepted in a sizes CSV, besides ``llm``
SIZE_COLUMNS = ("params_b", "parameters_b", "size_b", "params", "parameters", "size")


@dataclass
class ReportInputs:
    """Everything a report shows, read and checked. ``sources``: input kind -> file read."""

    results: pd.DataFrame
    validation: ValidationResult | None = None
    agreement: dict[str, Any] | None = None  # the agreement.json content
    evaluations: pd.DataFrame | None = None
    meta: pd.DataFrame | None = None  # META_COLUMNS
    categorical: list[CategoricalMeta] = field(default_factory=list)
    sizes: dict[str, float] | None = None  # llm -> parameters in billions
    flags: pd.DataFrame | None = None  # flags.csv beside the results (nrp.analysis.flags)
    scoring: dict[str, Any] | None = None  # scoring.json beside the results (nrp score)
    validation_from: str = ""  # how the validation file was found
    validation_note: str = ""  # why a recorded validation file was not used
    sources: dict[str, str] = field(default_factory=dict)  # input kind -> what was read
    paths: list[Path] = field(default_factory=list)  # every input file or folder read
    notes: list[str] = field(default_factory=list)


def load_inputs(
    results: str | Path,
    validation: str | Path | None = None,
    agreement: str | Path | None = None,
    evaluations: str | Path | None = None,
    meta: str | Path | list[str | Path] | None = None,
    sizes: str | Path | None = None,
) -> ReportInputs:
    """Read a run's files (see the module docstring); explicit paths win over RESULTS's files."""
    results = Path(results)
    folder = results if results.is_dir() else None
    frame = read_results(results)
    sources = {"results": str(_results_file(results))}

    def found(given: str | Path | None, names: tuple[str, ...]) -> Path | None:
        if given is not None:
            path = Path(given)
            if not path.exists():
                raise InputError(path, None, "file not found")
            return path
        if folder is None:
            return None
        return next((folder / n for n in names if (folder / n).exists()), None)

    inputs = ReportInputs(results=frame, sources=sources, paths=[_results_file(results)])
    inputs.scoring = scoring_beside(results)
    path = found(validation, ())
    if path is not None:
        inputs.validation_from = "given with --validation"
    else:
        path = _validation_path(folder, inputs)
    if path is not None:
        from nrp.validation.result import ValidationResult

        inputs.validation = ValidationResult.from_json(path)
        sources["validation"] = str(path)
        inputs.paths.append(path)
        if inputs.validation_note:
            inputs.notes.append(inputs.validation_note)
    path = found(agreement, (AGREEMENT_FILE,))
    if path is not None:
        inputs.agreement = read_agreement(path)
        sources["agreement"] = str(path)
        inputs.paths.append(path)
    path = found(evaluations, EVALUATION_FILES)
    if path is not None:
        inputs.evaluations = read_evaluations(path)
        sources["evaluations"] = str(path)
        inputs.paths.append(path)
    if meta is not None:
        meta_paths = [Path(p) for p in (meta if isinstance(meta, list) else [meta])]
    elif folder is not None and (folder / META_FOLDER).is_dir():
        meta_paths = [folder / META_FOLDER]
    else:
        meta_paths = []
    if meta_paths:
        read = read_meta(list(meta_paths))
        inputs.meta, inputs.categorical = read.correlations, read.categorical
        sources["meta"] = ", ".join(map(str, meta_paths))
        inputs.paths.extend(meta_paths)
        inputs.notes.extend(
            f"{p}: not an evaluator x dimension correlation table (ignored)" for p in read.ignored
        )
    path = found(sizes, SIZE_FILES)
    if path is not None:
        inputs.sizes = read_sizes(path)
        sources["sizes"] = str(path)
        inputs.paths.append(path)
    path = flags_path(_results_file(results))
    if path.is_file():
        inputs.flags = read_flags(path)
        sources["flags"] = str(path)
        inputs.paths.append(path)
    return inputs


def _validation_path(folder: Path | None, inputs: ReportInputs) -> Path | None:
    """The validation file of a run given none (module docstring); sets ``validation_from``,
    and ``validation_note`` when scoring.json names a file that is gone."""
    if folder is not None and (folder / VALIDATION_FILE).is_file():
        inputs.validation_from = "in the results folder"
        return folder / VALIDATION_FILE
    record = inputs.scoring or {}
    recorded = record.get("validation")
    if recorded:
        path = Path(str(recorded))
        if path.is_file():
            inputs.validation_from = f"recorded in {SCORING_FILE}"
            return path
        inputs.validation_note = f"{SCORING_FILE} records validation {path}, which no longer exists"
    collection = record.get("collection")
    if collection:
        path = (default_indexes_dir() / str(collection) / VALIDATION_FILE).resolve()
        if path.is_file():
            inputs.validation_from = f"collection {collection}'s, in the indexes folder"
            return path
    return None


def _results_file(path: Path) -> Path:
    if path.is_dir():
        for name in ("results.parquet", "results.csv"):
            if (path / name).is_file():
                return path / name
    return path


# -- agreement -----------------------------------------------------------------------------------
AGREEMENT_SUMMARY_COLUMNS = ("dimension", "ranker", "tau_mean", "tau_ci_low", "tau_ci_high")


def read_agreement(path: str | Path) -> dict[str, Any]:
    """The JSON ``nrp agreement --out`` writes (``AgreementResult.to_dict``), checked."""
    data = _json(path)
    summary = data.get("summary") if isinstance(data, dict) else None
    if not isinstance(summary, list) or not all(isinstance(r, dict) for r in summary):
        raise InputError(path, None, "not an agreement result: no 'summary' list of rows")
    for row in summary:
        require_columns(row, AGREEMENT_SUMMARY_COLUMNS, path, hint="an agreement summary row")
    return data


def _json(path: str | Path) -> Any:
    path = Path(path)
    try:
        return jsontext.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, None, "file not found") from None
    except UnicodeDecodeError:
        raise InputError(path, None, "not valid UTF-8") from None
    except json.JSONDecodeError as err:
        raise InputError(path, err.lineno, f"invalid JSON: {err.msg}") from None


# -- evaluations ---------------------------------------------------------------------------------
EVALUATION_ID_COLUMNS = ("answer_id", "llm", "prompt", "qid", "sample", "reference_kind")


def read_evaluations(path: str | Path) -> pd.DataFrame:
    """The table ``nrp evaluate`` writes: identity columns and one column per evaluator output.
    ``answer_id`` is required (it joins the evaluations to the NRP results)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        try:
            frame = pd.read_parquet(path)
        except Exception as error:  # pyarrow's errors have no common base class
            raise InputError(path, None, f"not a readable Parquet file: {error}") from None
    elif path.suffix.lower() in (".csv", ".tsv"):
        try:
            frame = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",")
        except (pd.errors.ParserError, UnicodeDecodeError) as error:
            raise InputError(path, None, f"not a readable table: {error}") from None
    else:
        raise InputError(path, None, "evaluations must be .parquet, .csv or .tsv")
    require_columns(frame, ["answer_id"], path, hint="evaluations have an answer_id column")
    for column in ("answer_id", "llm", "prompt", "qid"):
        if column in frame.columns:
            frame[column] = frame[column].astype(object).where(frame[column].notna(), "")
            frame[column] = frame[column].astype(str)
    repeated = frame["answer_id"].duplicated()
    if repeated.any():
        line = int(repeated.to_numpy().nonzero()[0][0]) + 2
        raise InputError(
            path, line, f"answer_id {frame['answer_id'][repeated].iloc[0]!r} occurs twice"
        )
    return frame


def evaluation_score_columns(evaluations: pd.DataFrame) -> list[str]:
    """The evaluator score columns: numeric (not boolean) columns other than the identity."""
    return [
        c
        for c in evaluations.columns
        if c not in EVALUATION_ID_COLUMNS
        and pd.api.types.is_numeric_dtype(evaluations[c])
        and not pd.api.types.is_bool_dtype(evaluations[c])
    ]


# -- meta-evaluation -------------------------------------------------------------------------------
#: what ``nrp meta --out DIR`` writes (``nrp.meta.report.write_meta``)
META_SUMMARY = "meta_summary.csv"
META_OTHER = ("meta_per_query.csv", "meta_systems.csv")
CATEGORICAL_SUMMARY = "categorical.json"
CATEGORICAL_PER_CLASS = "categorical_per_class.csv"
CATEGORICAL_REVIEW = "categorical_review.csv"
CATEGORICAL_PLOT = "review"  # review.png, review.svg
#: the three levels of an ``nrp meta`` summary row: level -> (tau, rho, n) column prefixes
META_LEVELS = {
    "query": ("tau_mean", "tau_ci", "rho_mean", "rho_ci", "queries_used"),
    "pooled": ("tau_pooled", "tau_pooled_ci", "rho_pooled", "rho_pooled_ci", "n_items"),
    "system": ("tau_system", "tau_system_ci", "rho_system", "rho_system_ci", "n_systems"),
}


@dataclass
class CategoricalMeta:
    """A categorical meta-evaluation (``nrp meta --categorical``): a judge's labels against
    the human labels. ``review``: the review curve table; ``plots``: its PNG and SVG."""

    name: str
    summary: dict[str, Any]
    per_class: pd.DataFrame
    review: pd.DataFrame | None = None
    plots: dict[str, Path] = field(default_factory=dict)


@dataclass
class MetaInputs:
    correlations: pd.DataFrame | None  # META_COLUMNS
    categorical: list[CategoricalMeta]
    ignored: list[str]


def read_meta(paths: str | Path | list[str | Path]) -> MetaInputs:
    """Meta-evaluation results from folders written by ``nrp meta --out`` (the folder itself
    and its subfolders, one run each, named by the folder) and from CSV tables (see the module
    docstring); ``ignored``: CSVs that are neither."""
    if not isinstance(paths, list):
        paths = [paths]
    frames: list[pd.DataFrame] = []
    categorical: list[CategoricalMeta] = []
    ignored: list[str] = []
    for given in map(Path, paths):
        if not given.exists():
            raise InputError(given, None, "file or folder not found")
        if given.is_file():
            frame = _meta_table(given, given.stem)
            if frame is None:
                raise InputError(
                    given, 1, "needs columns evaluator, dimension and tau (nrp.reports.inputs)"
                )
            frames.append(frame)
            continue
        folders = [given, *sorted(p for p in given.iterdir() if p.is_dir())]
        for folder in folders:
            name = folder.name
            if (folder / CATEGORICAL_PER_CLASS).is_file():
                categorical.append(_categorical(folder))
            known = {CATEGORICAL_PER_CLASS, CATEGORICAL_REVIEW, "categorical_confusion.csv"}
            if (folder / META_SUMMARY).is_file():
                known |= {META_SUMMARY, *META_OTHER}
                frame = _meta_table(folder / META_SUMMARY, name)
                if frame is None:
                    raise InputError(folder / META_SUMMARY, 1, "not an nrp meta summary table")
                frames.append(frame)
            for csv in folder_files(folder, _is_csv, recursive=False, within=given):
                if csv.name in known:
                    continue
                frame = _meta_table(csv, name)
                if frame is None:
                    ignored.append(str(csv))
                else:
                    frames.append(frame)
    correlations = pd.concat(frames, ignore_index=True) if frames else None
    return MetaInputs(correlations, categorical, ignored)


def _read_csv(path: Path, **options: Any) -> pd.DataFrame:
    try:
        return pd.read_csv(path, **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise InputError(path, None, f"not a readable CSV: {error}") from None


def _meta_table(path: Path, dataset: str) -> pd.DataFrame | None:
    """META_COLUMNS rows from an ``nrp meta`` summary (one row per level that has a tau) or a
    generic table (columns or their aliases); None when the columns are not there."""
    frame = _read_csv(path)
    names = {c.lower(): c for c in frame.columns}
    if {"score", "dimension", "tau_mean"} <= set(names):
        return _check_meta(path, _meta_levels(frame.rename(columns=str.lower), dataset))
    renamed: dict[str, str] = {}
    for column in META_COLUMNS:
        for spelling in (column, *META_ALIASES.get(column, ())):
            if spelling in names and names[spelling] not in renamed:
                renamed[names[spelling]] = column
                break
    if not {"evaluator", "dimension", "tau"} <= set(renamed.values()):
        return None
    frame = frame.rename(columns=renamed)[list(renamed.values())]
    if "dataset" not in frame.columns:
        frame["dataset"] = dataset
    return _check_meta(path, frame)


def _meta_levels(frame: pd.DataFrame, dataset: str) -> pd.DataFrame:
    rows = []
    for record in frame.to_dict("records"):
        for level, (tau, tau_ci, rho, rho_ci, n) in META_LEVELS.items():
            if tau not in record:
                continue
            rows.append(
                {
                    "evaluator": record["score"],
                    "dimension": record["dimension"],
                    "tau": record.get(tau),
                    "tau_low": record.get(f"{tau_ci}_low"),
                    "tau_high": record.get(f"{tau_ci}_high"),
                    "spearman": record.get(rho),
                    "spearman_low": record.get(f"{rho_ci}_low"),
                    "spearman_high": record.get(f"{rho_ci}_high"),
                    "n": record.get(n),
                    "level": level,
                    "subset": record.get("subset", ""),
                    "dataset": dataset,
                }
            )
    return pd.DataFrame(rows, columns=list(META_COLUMNS))


def _check_meta(path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    for column in META_COLUMNS:
        if column not in frame.columns:
            frame[column] = math.nan if column not in META_TEXT_COLUMNS else ""
    for column in META_TEXT_COLUMNS:
        frame[column] = frame[column].astype(object).where(frame[column].notna(), "").astype(str)
    for column in META_COLUMNS:
        if column in META_TEXT_COLUMNS:
            continue
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() & frame[column].notna() & (frame[column].astype(str).str.strip() != "")
        if bad.any():
            line = int(bad.to_numpy().nonzero()[0][0]) + 2
            raise InputError(path, line, f"{column} {frame[column][bad].iloc[0]!r} is not a number")
        frame[column] = values.astype(float)
    return frame[list(META_COLUMNS)].reset_index(drop=True)


def _categorical(folder: Path) -> CategoricalMeta:
    summary: dict[str, Any] = {}
    if (folder / CATEGORICAL_SUMMARY).is_file():
        data = _json(folder / CATEGORICAL_SUMMARY)
        summary = dict(data.get("summary", {})) if isinstance(data, dict) else {}
    per_class = _read_csv(folder / CATEGORICAL_PER_CLASS, dtype={"class": str})  # TRUE stays text
    review = (
        _read_csv(folder / CATEGORICAL_REVIEW) if (folder / CATEGORICAL_REVIEW).is_file() else None
    )
    plots = {
        suffix: folder / f"{CATEGORICAL_PLOT}.{suffix}"
        for suffix in ("png", "svg")
        if (folder / f"{CATEGORICAL_PLOT}.{suffix}").is_file()
    }
    return CategoricalMeta(folder.name, summary, per_class, review, plots)


# -- model sizes ---------------------------------------------------------------------------------
def read_sizes(path: str | Path) -> dict[str, float]:
    """LLM -> parameters in billions, from a CSV/TSV (``llm`` and one of ``SIZE_COLUMNS``) or a
    YAML mapping ``llm: billions`` (also under a top-level ``sizes:`` key)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _sizes_yaml(path)
    if suffix not in (".csv", ".tsv"):
        raise InputError(path, None, "model sizes must be .csv, .tsv, .yaml or .yml")
    try:
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise InputError(path, None, f"not a readable table: {error}") from None
    names = {c.strip().lower(): c for c in frame.columns}
    size_column = next((names[c] for c in SIZE_COLUMNS if c in names), None)
    if "llm" not in names or size_column is None:
        raise InputError(
            path, 1, f"needs columns llm and one of {', '.join(SIZE_COLUMNS)} (billions)"
        )
    sizes: dict[str, float] = {}
    for i, (llm, value) in enumerate(zip(frame[names["llm"]], frame[size_column], strict=True)):
        sizes.update(_size_entry(path, i + 2, llm, value, sizes))
    if not sizes:
        raise InputError(path, None, "no model sizes in this file")
    return sizes


def _is_csv(path: Path) -> bool:
    return path.name.endswith(".csv")


def _sizes_yaml(path: Path) -> dict[str, float]:
    try:
        node = compose_yaml(path.read_text(encoding="utf-8"))  # nrp's one YAML loader
    except yaml.YAMLError as error:
        raise yaml_error(path, error, "invalid YAML") from None
    except UnicodeDecodeError:
        raise InputError(path, None, "not valid UTF-8") from None
    if isinstance(node, yaml.MappingNode) and len(node.value) == 1:
        key, value = node.value[0]
        if key.value == "sizes" and isinstance(value, yaml.MappingNode):
            node = value
    if not isinstance(node, yaml.MappingNode) or not node.value:
        raise InputError(path, None, "expected a mapping llm: parameters in billions")
    sizes: dict[str, float] = {}
    for key, value in node.value:
        if not isinstance(value, yaml.ScalarNode):
            raise InputError(path, value.start_mark.line + 1, f"{key.value}: not a number")
        sizes.update(_size_entry(path, key.start_mark.line + 1, key.value, value.value, sizes))
    return sizes


def _size_entry(
    path: Path, line: int, llm: Any, value: Any, seen: dict[str, float]
) -> dict[str, float]:
    name = "" if llm is None or (isinstance(llm, float) and math.isnan(llm)) else str(llm).strip()
    if not name:
        raise InputError(path, line, "empty llm name")
    if name in seen:
        raise InputError(path, line, f"llm {name!r} is given twice")
    try:
        number = float(str(value).strip())
    except ValueError:
        raise InputError(path, line, f"{name}: size {value!r} is not a number") from None
    if not math.isfinite(number) or number <= 0:
        raise InputError(path, line, f"{name}: size must be a positive number of billions")
    return {name: number}


def describe_missing(inputs: ReportInputs) -> dict[str, str]:
    """Section -> why it is not in the report (which file or option would add it)."""
    missing = {}
    if inputs.validation is None:
        missing["validation"] = (
            f"{inputs.validation_note}; " if inputs.validation_note else ""
        ) + "no validation.json (nrp validate ... --out, or --validation)"
    if inputs.sizes is None:
        missing["sizes"] = "no model sizes (sizes.csv in RESULTS, or --sizes FILE)"
    if inputs.agreement is None and inputs.meta is None and not inputs.categorical:
        missing["agreement"] = (
            "no agreement.json (nrp agreement --out) and no meta-evaluation table (--meta DIR)"
        )
    if inputs.evaluations is None:
        missing["evaluators"] = "no evaluations.parquet (nrp evaluate --out, or --evaluations)"
    return missing


def check_results(frame: pd.DataFrame) -> None:
    """The columns every section needs."""
    needed = ("answer_id", "llm", "prompt", "qid", "dimension", "nrp")
    require_columns(frame, needed, "results", hint="not the output of nrp score?")
