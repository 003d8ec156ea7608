"""The parts the command line and the HTTP service compose beside the library's verbs
(``nrp.api``): the names of the files each step writes, the readers and writers of those files,
the positioning engine the service schedules (``PositionJob``, ``Positioner``,
``PositionCaches``, ``result_rows``), option constants and checks.

Not the user's API (that is ``nrp.api``, reachable as ``nrp.NAME``): these names follow what the
shells need, and each one lives in its own module, where a script may import it. Plain imports,
as in ``nrp.api``, so the import graph sees an edge from here to each module.
"""

from __future__ import annotations

from nrp.analysis.check import check_flagged, check_floored
from nrp.analysis.citations import CITATIONS_FILE, has_citations, read_citations
from nrp.analysis.flags import (
    FLAG_NAMES,
    FLAGS_FILE,
    FlagsFile,
    flag_shares,
    flags_aside,
    read_flags,
)
from nrp.analysis.leaderboard import write_leaderboard
from nrp.analysis.score_files import ScoredFiles, write_score_files
from nrp.answers import (
    AnswerBlocks,
    AnswerLocation,
    AnswerReader,
    InvalidAnswer,
    read_answer_blocks,
    report_citations,
)
from nrp.collection.build import default_indexes_dir
from nrp.collection.formats.irds import irds_manifest
from nrp.collection.info import render_info
from nrp.collection.manifest import COMBINED, DATASET_PREFIX, first_outside, inside_roots
from nrp.collection.mapping_files import read_mapping_text
from nrp.collection.store import STORE_FILE
from nrp.evaluators.autojudge import LEADERBOARD_FILE, autojudge_module, report_answers
from nrp.evaluators.cache import EVALUATION_CACHE_FILE, EvaluationCache
from nrp.evaluators.items import build_items
from nrp.executors import EXECUTOR_KINDS
from nrp.executors.base import Executor
from nrp.generation.generate import parse_llm
from nrp.jsontext import DuplicateKey, unique_keys
from nrp.llm.backends import GenerationOptions
from nrp.meta.labelstudio import QueryMap, is_label_studio_export, read_label_studio_scores
from nrp.meta.report import write_meta
from nrp.models.folders import PACKAGED_MODELS, close_hub_unless_allowed
from nrp.positioning.job import PositionCaches, PositionJob, PositionOptions
from nrp.positioning.positioner import Positioner
from nrp.positioning.record import SCORING_FILE, scoring_record
from nrp.positioning.result_rows import result_rows
from nrp.positioning.results_cache import RESULTS_FILE, ResultsCache
from nrp.positioning.scoring import RESULT_COLUMNS, ScoringRun, normalised_weights, result_frame
from nrp.probes.perturbations import PERTURBATIONS, PerturbationContext, perturb
from nrp.progress import ProgressLines
from nrp.rankers.cache import SCORE_CACHE_FILE, ScoreCache
from nrp.rankers.coerce import as_ranker
from nrp.rankers.passages import spec_passages
from nrp.rankers.pyterrier import TransformerRanker
from nrp.rankers.registry import DEFAULT_RANKERS, parse_rankers, parse_spec, split_specs
from nrp.ranks import DEFAULT_TIE_MODE, TIE_MODES, TieMode, check_tie_mode
from nrp.review.desk import NotAssigned, ReviewDesk
from nrp.review.export import write_review_human_files
from nrp.review.labelstudio import import_reviews, read_label_studio, write_label_studio
from nrp.review.project import ReviewProject, review_store_path
from nrp.review.store import SaveIdReused, StaleVersion
from nrp.synth.documents import TableColumns
from nrp.synth.kinds import KIND_NAMES
from nrp.synth.output import format_report
from nrp.validation.degenerate import degenerate_frame, query_materials
from nrp.validation.runs import RunOut, read_run, write_runs
from nrp.validation.validate import validity_texts
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
    "AnswerBlocks",
    "AnswerLocation",
    "AnswerReader",
    "DuplicateKey",
    "EvaluationCache",
    "Executor",
    "FlagsFile",
    "GenerationOptions",
    "InvalidAnswer",
    "NotAssigned",
    "PerturbationContext",
    "PositionCaches",
    "PositionJob",
    "PositionOptions",
    "Positioner",
    "ProgressLines",
    "QueryMap",
    "ResultsCache",
    "ReviewDesk",
    "ReviewProject",
    "RunOut",
    "SaveIdReused",
    "ScoreCache",
    "ScoredFiles",
    "ScoringRun",
    "StaleVersion",
    "TableColumns",
    "TieMode",
    "TransformerRanker",
    "Validity",
    "as_ranker",
    "autojudge_module",
    "build_items",
    "check_flagged",
    "check_floored",
    "check_tie_mode",
    "close_hub_unless_allowed",
    "default_indexes_dir",
    "degenerate_frame",
    "first_outside",
    "flag_shares",
    "flags_aside",
    "format_report",
    "has_citations",
    "import_reviews",
    "inside_roots",
    "irds_manifest",
    "is_label_studio_export",
    "normalised_weights",
    "parse_llm",
    "parse_rankers",
    "parse_spec",
    "perturb",
    "query_materials",
    "read_answer_blocks",
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
    "scoring_record",
    "spec_passages",
    "split_specs",
    "unique_keys",
    "validity_texts",
    "write_label_studio",
    "write_leaderboard",
    "write_meta",
    "write_review_human_files",
    "write_runs",
    "write_score_files",
]
