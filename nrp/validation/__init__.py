"""Validation of rankers: which ranker orders each quality dimension's judged documents best.

Every ranker ranks D_q (the judged documents with text of each topic); its ranking is scored by
nDCG@10 (primary), MAP and bpref against each dimension's judgments; paired tests with a
multiple-testing correction say whether the best ranker is distinguishable from the others; the
best ranker per dimension is chosen by a stated rule. External run files are evaluated the same
way. Modules: ``measures`` (qrels, query set, ir_measures), ``statistics`` (intervals, tests,
corrections), ``selection`` (the rule), ``runs`` (run files), ``validate`` (the driver),
``result`` (JSON), ``report`` (text tables).
"""

from nrp.validation.result import ValidationResult, chosen_rankers
from nrp.validation.runs import read_run
from nrp.validation.validate import validate, validate_runs

__all__ = ["ValidationResult", "chosen_rankers", "read_run", "validate", "validate_runs"]
