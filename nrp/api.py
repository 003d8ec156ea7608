"""The library API: every name the command line, the HTTP service and a notebook use.

The CLI (``nrp.cli``) and the service (``nrp.service``) are shells over this module: they import
no domain package directly (an import-linter contract checks it), so each step of the pipeline
has one implementation that every shell calls. The package's data flow: collection -> rankers ->
validation -> positioning -> analysis -> evaluators -> meta -> generation -> training (rankers and
the guard fitted on a collection, with answers an LLM writes) -> review -> experiments -> reports,
and the executors they run on (``__all__`` is sorted).

The names are plain imports, so import-linter, type checkers and drawings of the import graph see
an edge from this module to each module it exports from. The heavy libraries stay lazy inside
those modules: torch, transformers, sentence-transformers, spaCy, matplotlib and the LLM
back-ends load only when a model is built, a figure drawn or an answer generated. PyTerrier
(whose ``Transformer`` is the base class of ``Ranker``), pandas, SciPy and ir_measures load here.
"""

from __future__ import annotations

from nrp.analysis.agreement import agreement
from nrp.analysis.check import (
    CheckResult,
    assert_nrp,
    check_flagged,
    check_floored,
    check_gate,
    check_results,
)
from nrp.analysis.citations import CITATIONS_FILE, cite_answers, has_citations, read_citations
from nrp.analysis.flags import (
    FLAG_NAMES,
    FLAGS_FILE,
    FlagsFile,
    flag_answers,
    flag_shares,
    flags_aside,
    read_flags,
)
from nrp.analysis.leaderboard import leaderboard, write_leaderboard
from nrp.analysis.score_files import ScoredFiles, write_score_files
from nrp.analysis.summary import summarize
from nrp.answers import (
    AnswerBlocks,
    AnswerLocation,
    AnswerReader,
    InvalidAnswer,
    read_answer_blocks,
    read_answers,
    report_citations,
)
from nrp.collection.build import default_indexes_dir, ingest
from nrp.collection.collection import Collection, list_collections
from nrp.collection.formats import all_formats
from nrp.collection.formats.irds import irds_manifest
from nrp.collection.info import collection_info, render_info
from nrp.collection.manifest import COMBINED, DATASET_PREFIX, Manifest, first_outside, inside_roots
from nrp.collection.mapping_files import read_mapping_text
from nrp.collection.store import STORE_FILE
from nrp.evaluators.autojudge import (
    LEADERBOARD_FILE,
    NrpJudge,
    autojudge_module,
    judge_reports,
    report_answers,
)
from nrp.evaluators.base import all_evaluators, make_evaluator
from nrp.evaluators.cache import EVALUATION_CACHE_FILE, EvaluationCache
from nrp.evaluators.items import build_items
from nrp.evaluators.pt_measures import NRPMeasure, nrp_measures
from nrp.evaluators.run import EvaluationSettings, evaluate, evaluate_answers
from nrp.executors import EXECUTOR_KINDS, make_executor, using_executor
from nrp.executors.base import Executor
from nrp.experiments.run import ExperimentResult, run, run_experiment
from nrp.generation.generate import GenerationSettings, generate_answers, parse_llm
from nrp.jsontext import DuplicateKey, unique_keys
from nrp.llm.backends import GenerationOptions
from nrp.meta.annotators import annotator_agreement
from nrp.meta.labelstudio import QueryMap, is_label_studio_export, read_label_studio_scores
from nrp.meta.report import meta_from_files, write_meta
from nrp.models.folders import PACKAGED_MODELS, close_hub_unless_allowed
from nrp.positioning.choice import RankerChoice
from nrp.positioning.job import PositionCaches, PositionJob, PositionOptions
from nrp.positioning.positioner import Positioner
from nrp.positioning.record import SCORING_FILE, scoring_record
from nrp.positioning.result_rows import result_rows
from nrp.positioning.results_cache import RESULTS_FILE, ResultsCache
from nrp.positioning.scoring import (
    RESULT_COLUMNS,
    NRPScorer,
    ScoreSettings,
    ScoringRun,
    normalised_weights,
    result_frame,
    score,
    score_answers,
)
from nrp.probes.perturbations import PERTURBATIONS, PerturbationContext, perturb
from nrp.probes.probe import ProbeResult, probe
from nrp.progress import ProgressLines
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, ScoreCache
from nrp.rankers.coerce import as_ranker
from nrp.rankers.passages import spec_passages
from nrp.rankers.pyterrier import TransformerRanker, from_transformer
from nrp.rankers.registry import (
    DEFAULT_RANKERS,
    RankerSpec,
    all_rankers,
    make_ranker,
    parse_rankers,
    parse_spec,
    split_specs,
)
from nrp.ranks import DEFAULT_TIE_MODE, TIE_MODES, TieMode, check_tie_mode
from nrp.reports.build import ReportSettings, build_report
from nrp.review.create import ReviewSettings, create_review_project
from nrp.review.desk import NotAssigned, ReviewDesk
from nrp.review.export import write_review_human_files
from nrp.review.labelstudio import import_reviews, read_label_studio, write_label_studio
from nrp.review.project import ReviewProject, review_store_path
from nrp.review.store import SaveIdReused, StaleVersion
from nrp.synth.documents import TableColumns
from nrp.synth.kinds import KIND_NAMES
from nrp.synth.output import format_report
from nrp.synth.synth import SynthSettings, synthesize
from nrp.training.guard_settings import GuardTrainSettings
from nrp.training.guard_train import train_guard
from nrp.training.settings import TrainSettings
from nrp.training.train import TrainingResult, train_ranker
from nrp.validation.degenerate import degenerate_frame, query_materials
from nrp.validation.result import VALIDATION_FILE, ValidationResult
from nrp.validation.runs import RunOut, read_run, write_runs
from nrp.validation.settings import ValidationSettings
from nrp.validation.validate import validate, validate_runs, validity_texts
from nrp.validation.validity import (
    DEFAULT_FALLBACK_WINS,
    DEFAULT_MAX_FLOORED,
    DEFAULT_MAX_NRP,
    DEFAULT_MIN_WINS,
    Validity,
)

__all__ = [
    "CITATIONS_FILE",
    "COMBINED",
    "DATASET_PREFIX",
    "DEFAULT_FALLBACK_WINS",
    "DEFAULT_MAX_FLOORED",
    "DEFAULT_MAX_NRP",
    "DEFAULT_MIN_WINS",
    "DEFAULT_RANKERS",
    "DEFAULT_TIE_MODE",
    "EVALUATION_CACHE_FILE",
    "EXECUTOR_KINDS",
    "FLAGS_FILE",
    "FLAG_NAMES",
    "KIND_NAMES",
    "LEADERBOARD_FILE",
    "PACKAGED_MODELS",
    "PERTURBATIONS",
    "RESULTS_FILE",
    "RESULT_COLUMNS",
    "SCORE_CACHE_FILE",
    "SCORING_FILE",
    "STORE_FILE",
    "TIE_MODES",
    "VALIDATION_FILE",
    "AnswerBlocks",
    "AnswerLocation",
    "AnswerReader",
    "CheckResult",
    "Collection",
    "DuplicateKey",
    "EvaluationCache",
    "EvaluationSettings",
    "Executor",
    "ExperimentResult",
    "FlagsFile",
    "GenerationOptions",
    "GenerationSettings",
    "GuardTrainSettings",
    "InvalidAnswer",
    "Manifest",
    "NRPMeasure",
    "NRPScorer",
    "NotAssigned",
    "NrpJudge",
    "PerturbationContext",
    "PositionCaches",
    "PositionJob",
    "PositionOptions",
    "Positioner",
    "ProbeResult",
    "ProgressLines",
    "QueryMap",
    "Ranker",
    "RankerChoice",
    "RankerSpec",
    "ReportSettings",
    "ResultsCache",
    "ReviewDesk",
    "ReviewProject",
    "ReviewSettings",
    "RunOut",
    "SaveIdReused",
    "ScoreCache",
    "ScoreSettings",
    "ScoredFiles",
    "ScoringRun",
    "StaleVersion",
    "SynthSettings",
    "TableColumns",
    "TieMode",
    "TrainSettings",
    "TrainingResult",
    "TransformerRanker",
    "ValidationResult",
    "ValidationSettings",
    "Validity",
    "agreement",
    "all_evaluators",
    "all_formats",
    "all_rankers",
    "annotator_agreement",
    "as_ranker",
    "assert_nrp",
    "autojudge_module",
    "build_items",
    "build_report",
    "check_flagged",
    "check_floored",
    "check_gate",
    "check_results",
    "check_tie_mode",
    "cite_answers",
    "close_hub_unless_allowed",
    "collection_info",
    "create_review_project",
    "default_indexes_dir",
    "degenerate_frame",
    "evaluate",
    "evaluate_answers",
    "first_outside",
    "flag_answers",
    "flag_shares",
    "flags_aside",
    "format_report",
    "from_transformer",
    "generate_answers",
    "has_citations",
    "import_reviews",
    "ingest",
    "inside_roots",
    "irds_manifest",
    "is_label_studio_export",
    "judge_reports",
    "leaderboard",
    "list_collections",
    "make_evaluator",
    "make_executor",
    "make_ranker",
    "meta_from_files",
    "normalised_weights",
    "nrp_measures",
    "parse_llm",
    "parse_rankers",
    "parse_spec",
    "perturb",
    "probe",
    "query_materials",
    "read_answer_blocks",
    "read_answers",
    "read_citations",
    "read_flags",
    "read_label_studio",
    "read_label_studio_scores",
    "read_mapping_text",
    "read_run",
    "render_info",
    "report_answers",
    "report_citations",
    "result_frame",
    "result_rows",
    "review_store_path",
    "run",
    "run_experiment",
    "score",
    "score_answers",
    "scoring_record",
    "spec_passages",
    "split_specs",
    "summarize",
    "synthesize",
    "train_guard",
    "train_ranker",
    "unique_keys",
    "using_executor",
    "validate",
    "validate_runs",
    "validity_texts",
    "write_label_studio",
    "write_leaderboard",
    "write_meta",
    "write_review_human_files",
    "write_runs",
    "write_score_files",
]
