"""Meta-evaluation: how far an automatic score agrees with human judgments.

``nrp.meta.correlation`` (Kendall tau-b and Spearman per query, pooled and per system, with
intervals), ``nrp.meta.human`` (reading human labels: graded per item, or rankings per query),
``nrp.meta.labelstudio`` (Label Studio exports of ranking projects, as rankings),
``nrp.meta.categorical`` (accuracy of a label-producing judge, and what reviewing its
low-confidence labels catches), ``nrp.meta.datasets`` (the public meta-evaluation sets as items
for ``nrp.evaluators`` and human labels). ``nrp meta`` is the command line over them; as a call
it is ``nrp.meta_from_files(scores, human, ...)`` (``nrp.meta.report``, exported by ``nrp.api``).
"""

from nrp.meta.categorical import CategoricalResult, categorical_evaluate
from nrp.meta.correlation import MetaResult, MetaSettings, meta_evaluate
from nrp.meta.human import read_human
from nrp.meta.readers import read_table
from nrp.statistics import kendall_tau_b, spearman_rho

__all__ = [
    "CategoricalResult",
    "MetaResult",
    "MetaSettings",
    "categorical_evaluate",
    "kendall_tau_b",
    "meta_evaluate",
    "read_human",
    "read_table",
    "spearman_rho",
]
