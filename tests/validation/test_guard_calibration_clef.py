"""Calibration loosens a detector and never tightens it, on real data: CLEF eHealth 2021's judged
passages are web pages that read as answers by far, and thresholds set at their edge flag
9 of 50 of ChatGPT's answers to the same topics (skipped with a reason when ../shared is
absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nrp import Collection, ingest
from nrp.rankers.guard_features import judged_answers
from nrp.rankers.guard_model import (
    THRESHOLD_TOLERANCE,
    flagging_threshold,
    packaged_model,
    with_thresholds,
)
from nrp.rankers.registry import make_ranker

MANIFEST = Path(__file__).resolve().parents[2] / "manifests" / "clef-ehealth-2021.yaml"


@pytest.fixture(scope="module")
def clef(tmp_path_factory, shared_data) -> tuple[Collection, pd.DataFrame]:
    data = shared_data("clef-ehealth-2021")  # skips with a reason when ../shared/data is absent
    indexes = tmp_path_factory.mktemp("indexes")
    ingest(MANIFEST, indexes_dir=indexes)
    collection = Collection.load("clef-ehealth-2021", indexes)
    wide = pd.read_csv(data / "answers" / "chatgpt" / "question.csv", dtype={"qid": str})
    answers = pd.DataFrame({"qid": wide["qid"], "query": wide["query"], "text": wide["answer1"]})
    return collection, answers


def test_thresholds_calibrated_on_clef_are_never_stricter_than_fitted(clef):
    collection, answers = clef
    guard = make_ranker("guard")
    guard.bind_collection(collection)
    calibrated = guard.detectors()
    fitted = packaged_model()
    judged = judged_answers(collection, collection.candidates())
    relevant = [(q, t) for q, docs in judged.items() for t in docs]
    assert len(relevant) == 365  # CLEF's passages of a relevance grade above 0, with their topic
    table = guard.features().frame([q for q, _ in relevant], [t for _, t in relevant])
    names, looser, edges = [], [], []
    pairs = zip((calibrated, *calibrated.also), (fitted, *fitted.also), strict=True)
    for detector, before in pairs:
        values = table[list(detector.features)].to_numpy(dtype=float)
        p = detector.probability(values[~np.isnan(values).any(axis=1)])
        edge = flagging_threshold(p, 0.01)  # what calibration alone would set: 1% of them
        assert detector.threshold == min(edge, before.threshold)
        names.append(detector.fitted_on["name"])
        looser.append(edge < before.threshold)
        edges.append(edge)
    # mirror, generic and elsewhere would have been tightened by CLEF's passages (generic from
    # 0.029 to 0.912): they keep their fitted thresholds; off_topic, disorder and hollow are
    # loosened; no passage only asks, so asking's edge is its fitted threshold
    assert dict(zip(names, looser, strict=True)) == {
        "mirror": False, "generic": False, "elsewhere": False,
        "off_topic": True, "disorder": True, "hollow": True, "asking": False,
    }  # fmt: skip

    # ChatGPT's first answer to each of the 50 topics under the "Question: ... Answer:" prompt.
    # Two are floored (evidence above ln 2): a refusal ("I'm sorry, but as an AI language
    # model, I don't have access to personal data ...") and one plain answer; the thresholds at
    # the passages' edge (the rule before: any detector below its threshold) flag 9 (14, nearly
    # all of them plain answers, with the guard fitted without terse answers)
    assessed = guard.assess(answers)  # the features of each answer, and its verdict
    flagged = assessed["flagged"].to_numpy()
    assert [t[:39] for t in answers.loc[flagged, "text"]] == [
        "I'm sorry, but as an AI language model,",
        "The reaction of colleagues to disclosin",
    ]
    at_the_edge = with_thresholds(
        fitted, {"thresholds": edges, "floor_evidence": fitted.floor_evidence}
    )
    assert int((at_the_edge.answer_share(assessed) < 1.0 - THRESHOLD_TOLERANCE).sum()) == 9
