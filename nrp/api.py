"""The library API: every name the command line, the HTTP service and a notebook use.

The CLI (``nrp.cli``) and the service (``nrp.service``) are shells over this module: they import
no domain package directly (an import-linter contract checks it), so each step of the pipeline
has one implementation that every shell calls. Names are grouped in the data-flow order of the
package: collection -> rankers -> validation -> training -> positioning -> analysis ->
evaluators -> meta -> review -> generation -> experiments -> reports, and the executors they run on.

Names are resolved on first use, so ``import nrp.api`` (and the CLI's start) stays quick: the
scoring stack (PyTerrier, torch) loads only when a name that needs it is used.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it (one place per name)
_EXPORTS: dict[str, str] = {
    # collections
    "Collection": "nrp.collection.collection",
    "list_collections": "nrp.collection.collection",
    "ingest": "nrp.collection.build",
    "default_indexes_dir": "nrp.collection.build",
    "collection_info": "nrp.collection.info",
    "render_info": "nrp.collection.info",
    "all_formats": "nrp.collection.formats",
    "irds_manifest": "nrp.collection.formats.irds",
    "Manifest": "nrp.collection.manifest",
    "DATASET_PREFIX": "nrp.collection.manifest",
    "COMBINED": "nrp.collection.manifest",
    "inside_roots": "nrp.collection.manifest",
    "first_outside": "nrp.collection.manifest",
    "read_mapping_text": "nrp.collection.mapping_files",
    "STORE_FILE": "nrp.collection.store",
    # answers
    "read_answers": "nrp.answers",
    "AnswerReader": "nrp.answers",
    "AnswerLocation": "nrp.answers",
    "report_citations": "nrp.answers",
    # rankers
    "all_rankers": "nrp.rankers.registry",
    "make_ranker": "nrp.rankers.registry",
    "parse_spec": "nrp.rankers.registry",
    "as_ranker": "nrp.rankers.registry",
    "DEFAULT_RANKERS": "nrp.rankers.registry",
    "from_transformer": "nrp.rankers.pyterrier",
    "TransformerRanker": "nrp.rankers.pyterrier",
    "Ranker": "nrp.rankers.base",
    "ScoreCache": "nrp.rankers.cache",
    "PACKAGED_MODELS": "nrp.models.folders",
    "close_hub_unless_allowed": "nrp.models.folders",
    "SCORE_CACHE_FILE": "nrp.rankers.cache",
    # validation
    "validate": "nrp.validation.validate",
    "validate_runs": "nrp.validation.validate",
    "validity_texts": "nrp.validation.validate",
    "DEFAULT_MIN_WINS": "nrp.validation.validity",
    "DEFAULT_MAX_NRP": "nrp.validation.validity",
    "Validity": "nrp.validation.validity",
    "degenerate_frame": "nrp.validation.degenerate",
    "query_materials": "nrp.validation.degenerate",
    "ValidationSettings": "nrp.validation.settings",
    "ValidationResult": "nrp.validation.result",
    "VALIDATION_FILE": "nrp.validation.result",
    "read_run": "nrp.validation.runs",
    "write_runs": "nrp.validation.runs",
    "RunOut": "nrp.validation.runs",
    # training (rankers fitted on a collection's judgments)
    "train_ranker": "nrp.training.train",
    "TrainSettings": "nrp.training.settings",
    "TrainingResult": "nrp.training.train",
    # positioning
    "score": "nrp.positioning.scoring",
    "score_answers": "nrp.positioning.scoring",
    "NRPScorer": "nrp.positioning.scoring",
    "normalised_weights": "nrp.positioning.scoring",
    "RESULT_COLUMNS": "nrp.positioning.scoring",
    "ScoreSettings": "nrp.positioning.scoring",
    "result_frame": "nrp.positioning.scoring",
    "result_rows": "nrp.positioning.result_rows",
    "scoring_record": "nrp.positioning.record",
    "SCORING_FILE": "nrp.positioning.record",
    "Positioner": "nrp.positioning.positioner",
    "PositionJob": "nrp.positioning.job",
    "PositionOptions": "nrp.positioning.job",
    "PositionCaches": "nrp.positioning.job",
    "check_tie_mode": "nrp.positioning.ties",
    "ResultsCache": "nrp.positioning.results_cache",
    "RESULTS_FILE": "nrp.positioning.results_cache",
    # analysis
    "summarize": "nrp.analysis.summary",
    "agreement": "nrp.analysis.agreement",
    "check_results": "nrp.analysis.check",
    "check_flagged": "nrp.analysis.check",
    "check_gate": "nrp.analysis.check",
    "flag_answers": "nrp.analysis.flags",
    "flag_shares": "nrp.analysis.flags",
    "read_flags": "nrp.analysis.flags",
    "FLAGS_FILE": "nrp.analysis.flags",
    "FLAG_NAMES": "nrp.analysis.flags",
    "assert_nrp": "nrp.analysis.check",
    "CheckResult": "nrp.analysis.check",
    "cite_answers": "nrp.analysis.citations",
    "has_citations": "nrp.analysis.citations",
    "read_citations": "nrp.analysis.citations",
    "CITATIONS_FILE": "nrp.analysis.citations",
    "leaderboard": "nrp.analysis.leaderboard",
    "write_leaderboard": "nrp.analysis.leaderboard",
    # evaluators
    "all_evaluators": "nrp.evaluators.base",
    "make_evaluator": "nrp.evaluators.base",
    "build_items": "nrp.evaluators.items",
    "evaluate": "nrp.evaluators.run",
    "evaluate_answers": "nrp.evaluators.run",
    "EvaluationSettings": "nrp.evaluators.run",
    "EvaluationCache": "nrp.evaluators.cache",
    "EVALUATION_CACHE_FILE": "nrp.evaluators.cache",
    "nrp_measures": "nrp.evaluators.pt_measures",
    "NRPMeasure": "nrp.evaluators.pt_measures",
    "NrpJudge": "nrp.evaluators.autojudge",
    "report_answers": "nrp.evaluators.autojudge",
    # meta-evaluation
    "meta_from_files": "nrp.meta.report",
    "write_meta": "nrp.meta.report",
    "annotator_agreement": "nrp.meta.annotators",
    "QueryMap": "nrp.meta.labelstudio",
    # human review (projects, saved reviews, the human files of nrp meta, Label Studio)
    "ReviewProject": "nrp.review.project",
    "review_store_path": "nrp.review.project",
    "ReviewDesk": "nrp.review.desk",
    "NotAssigned": "nrp.review.desk",
    "StaleVersion": "nrp.review.store",
    "SaveIdReused": "nrp.review.store",
    "create_review_project": "nrp.review.create",
    "write_review_human_files": "nrp.review.export",
    "write_label_studio": "nrp.review.labelstudio",
    "read_label_studio": "nrp.review.labelstudio",
    "import_reviews": "nrp.review.labelstudio",
    # generation
    "generate_answers": "nrp.generation.generate",
    "parse_llm": "nrp.generation.generate",
    "GenerationSettings": "nrp.generation.generate",
    "GenerationOptions": "nrp.llm.backends",
    # experiments and reports
    "run_experiment": "nrp.experiments.run",
    "ExperimentResult": "nrp.experiments.run",
    "run": "nrp.experiments.run",
    # probes (perturbed answers, how each evaluator moves)
    "probe": "nrp.probes.probe",
    "ProbeResult": "nrp.probes.probe",
    "PERTURBATIONS": "nrp.probes.perturbations",
    "perturb": "nrp.probes.perturbations",
    "PerturbationContext": "nrp.probes.perturbations",
    # synthetic test sets (Q&A written by an LLM from documents)
    "synthesize": "nrp.synth.synth",
    "SynthSettings": "nrp.synth.synth",
    "format_report": "nrp.synth.synth",
    "TableColumns": "nrp.synth.documents",
    "KIND_NAMES": "nrp.synth.kinds",
    "build_report": "nrp.reports.build",
    "ReportSettings": "nrp.reports.build",
    # executors
    "Executor": "nrp.executors.base",
    "EXECUTOR_KINDS": "nrp.executors",
    "make_executor": "nrp.executors",
    "using_executor": "nrp.executors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nrp.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return __all__
