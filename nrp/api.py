"""The library API: the names a user calls, one verb per command of the command line.

``nrp.ingest`` (``nrp ingest``), ``nrp.validate`` (``nrp validate``), ``nrp.score`` (``nrp
score``), ``nrp.summarize`` (``nrp summary``), ``nrp.evaluate_answers`` (``nrp evaluate``),
``nrp.run`` (``nrp run``) ... with the values they take and give (``Collection``,
``RankerSpec``, ``RankerChoice``, ``ValidationResult``, the settings of each step). Every name
here is reachable as ``nrp.NAME``; ``CLI_VERBS`` maps each command to its verb.

The CLI (``nrp.cli``) and the service (``nrp.service``) are shells over this module and
``nrp.engine`` (the parts they compose beside the verbs: file names, readers and writers of
intermediate files, the positioning engine): they import no domain package directly (an
import-linter contract checks it), so each step of the pipeline has one implementation that every
shell calls. The package's data flow: collection -> rankers -> validation -> positioning ->
analysis -> evaluators -> meta -> generation -> training -> review -> experiments -> reports, and
the executors they run on (``__all__`` is sorted).

The names are plain imports, so import-linter, type checkers and drawings of the import graph see
an edge from this module to each module it exports from. The heavy libraries stay lazy inside
those modules: torch, transformers, sentence-transformers, spaCy, matplotlib and the LLM
back-ends load only when a model is built, a figure drawn or an answer generated. PyTerrier
(whose ``Transformer`` is the base class of ``Ranker``), pandas, SciPy and ir_measures load here.
"""

from __future__ import annotations

from nrp.analysis.agreement import agreement
from nrp.analysis.check import CheckResult, assert_nrp, check_gate, check_results
from nrp.analysis.citations import cite_answers
from nrp.analysis.flags import flag_answers
from nrp.analysis.leaderboard import leaderboard
from nrp.analysis.score_files import score
from nrp.analysis.summary import summarize
from nrp.answers import read_answers
from nrp.collection.build import ingest
from nrp.collection.collection import Collection, list_collections
from nrp.collection.formats import all_formats
from nrp.collection.info import collection_info
from nrp.collection.manifest import Manifest
from nrp.evaluators.autojudge import NrpJudge, judge_reports
from nrp.evaluators.base import all_evaluators, make_evaluator
from nrp.evaluators.pt_measures import NRPMeasure, nrp_measures
from nrp.evaluators.run import EvaluationSettings, evaluate, evaluate_answers
from nrp.executors import make_executor, using_executor
from nrp.experiments.run import ExperimentResult, run, run_experiment
from nrp.generation.generate import GenerationSettings, generate_answers
from nrp.meta.annotators import annotator_agreement
from nrp.meta.report import meta_from_files
from nrp.positioning.choice import RankerChoice
from nrp.positioning.scoring import NRPScorer, ScoreSettings, score_answers
from nrp.probes.probe import ProbeResult, probe
from nrp.rankers.base import Ranker
from nrp.rankers.pyterrier import from_transformer
from nrp.rankers.registry import RankerSpec, all_rankers, make_ranker
from nrp.reports.build import ReportSettings, build_report
from nrp.review.create import ReviewSettings, create_review_project
from nrp.synth.synth import SynthSettings, synthesize
from nrp.training.guard_settings import GuardTrainSettings
from nrp.training.guard_train import train_guard
from nrp.training.settings import TrainSettings
from nrp.training.train import TrainingResult, train_ranker
from nrp.validation.result import VALIDATION_FILE, ValidationResult
from nrp.validation.settings import ValidationSettings
from nrp.validation.validate import validate, validate_runs

__all__ = [
    "CLI_VERBS",
    "VALIDATION_FILE",
    "CheckResult",
    "Collection",
    "EvaluationSettings",
    "ExperimentResult",
    "GenerationSettings",
    "GuardTrainSettings",
    "Manifest",
    "NRPMeasure",
    "NRPScorer",
    "NrpJudge",
    "ProbeResult",
    "Ranker",
    "RankerChoice",
    "RankerSpec",
    "ReportSettings",
    "ReviewSettings",
    "ScoreSettings",
    "SynthSettings",
    "TrainSettings",
    "TrainingResult",
    "ValidationResult",
    "ValidationSettings",
    "agreement",
    "all_evaluators",
    "all_formats",
    "all_rankers",
    "annotator_agreement",
    "assert_nrp",
    "build_report",
    "check_gate",
    "check_results",
    "cite_answers",
    "collection_info",
    "create_review_project",
    "evaluate",
    "evaluate_answers",
    "flag_answers",
    "from_transformer",
    "generate_answers",
    "ingest",
    "judge_reports",
    "leaderboard",
    "list_collections",
    "make_evaluator",
    "make_executor",
    "make_ranker",
    "meta_from_files",
    "nrp_measures",
    "probe",
    "read_answers",
    "run",
    "run_experiment",
    "score",
    "score_answers",
    "summarize",
    "synthesize",
    "train_guard",
    "train_ranker",
    "using_executor",
    "validate",
    "validate_runs",
]


#: each command of the command line -> the library verb that does what it does (``nrp serve``
#: is the service, a shell of its own)
CLI_VERBS = {
    "ingest": "ingest",
    "collections": "list_collections",
    "info": "collection_info",
    "formats": "all_formats",
    "rankers": "all_rankers",
    "validate": "validate",
    "score": "score",
    "summary": "summarize",
    "leaderboard": "leaderboard",
    "judge": "judge_reports",
    "check": "check_gate",
    "agreement": "agreement",
    "evaluators": "all_evaluators",
    "evaluate": "evaluate_answers",
    "meta": "meta_from_files",
    "annotators": "annotator_agreement",
    "probe": "probe",
    "review": "create_review_project",
    "report": "build_report",
    "generate": "generate_answers",
    "synth": "synthesize",
    "run": "run",
    "train": "train_ranker",
    "train-guard": "train_guard",
}
