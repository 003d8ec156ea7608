"""The scoring record: how a results frame's weighted NRP was made, kept beside the results.

``nrp score`` writes it as ``scoring.json`` next to ``results.parquet``; ``nrp summary`` (and the
report) read it to say which dimensions the weighted NRP averages and which were left out, and
why (``nrp.validation.selection.WEIGHTING_RULE``); ``validation``: the absolute path of the
validation JSON the rankers were read from (None when they were named otherwise), which ``nrp
report`` reads for its validation section. Light on purpose: reading it imports no ranker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

#: the scoring record's file name, beside the results
SCORING_FILE = "scoring.json"
#: the ``attrs`` of ``score_answers``' frame the record keeps, and the validation JSON's path
RECORD_KEYS = (
    "collection", "rankers", "weights", "left_out", "not_scored", "ties", "warnings", "validation",
)  # fmt: skip


def scoring_record(frame: pd.DataFrame | Mapping[str, Any]) -> dict[str, Any]:
    """The collection, rankers per dimension, normalised weights, the dimensions left out of
    the weighted NRP (and why) and those not scored, the tie rule, the warnings and the
    validation JSON the rankers came from (``ScoringRun.attrs``), from a results frame's attrs
    (or the attrs themselves: ``nrp score`` on blocks of answers has no whole frame)."""
    attrs = frame.attrs if isinstance(frame, pd.DataFrame) else frame
    return {key: attrs.get(key) for key in RECORD_KEYS}
