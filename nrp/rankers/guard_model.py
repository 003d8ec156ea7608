"""The guard's model (``GuardModel``): what a model file holds and how its detectors' evidence
adds up; the ranker that reads it is ``nrp.rankers.guard``, the features it reads
``nrp.rankers.guard_features``, its fitting ``nrp.training.guard_fit``.

Detectors and the floor. One small logistic model per way of saying nothing (``GuardModel`` and
its ``also``: mirror, generic, elsewhere, off_topic, disorder, hollow, asking), each with its
threshold on the probability of a real answer. A detector below its threshold is evidence, worth
``-ln(probability / threshold)``; a text is flagged, and floored, when its evidence summed over
the detectors exceeds the model's ``floor_evidence`` (``FLOOR_EVIDENCE``, ln 2): one detector
under half its threshold, or several agreeing less far below theirs. One detector's doubt near
its threshold is not enough: a detector flags a share of real answers at its threshold, and on
answers written unlike the judged documents the detectors' false alarms add up when any one of
them floors a text.

Calibration (``GuardModel.calibrated``, ``CALIBRATION``) sets each detector's threshold, and the
floor, on real answers: it loosens, never tightens.

A model file (``GuardModel.to_json``) opens with its ``format`` block (``model_format``: the
schema, the feature definitions and the calibration rule it was fitted for); ``from_json``
refuses a file of others. The packaged model (``guard_model.json``, ``packaged_model``) was
fitted by ``nrp train guard`` (``nrp.training.guard_train``); what it was fitted on and how its
settings were chosen: docs/studies/guard-study.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nrp import jsontext
from nrp.errors import InputError

#: a text whose probability is within this share of a detector's threshold is at it, not
#: below: a calibrated threshold is a real answer's own probability, and whether that answer is
#: flagged must not hang on float rounding (its features move by about 1e-7 with the batch its
#: texts were embedded in; the fp32 tie tolerance, docs/nrp.md)
THRESHOLD_TOLERANCE = 1.0e-5
#: the packaged model, beside this module
PACKAGED_MODEL = Path(__file__).with_name("guard_model.json")
FEATURES = (
    "novel_share", "log_novel", "cos_tq", "cos_rq", "fluency", "spec_rq", "margin_rq", "spec_rd",
    "first_person", "idf_new", "oov_new", "answer_like", "asks_only", "order",
)  # fmt: skip
#: ``calibrate``: the share of a bound collection's judged answers each detector flags (the share
#: of the fitting answers each was fitted to flag: ``nrp train guard --max-flagged``)
CALIBRATED_SHARE = 0.01
#: how calibration sets a threshold, in the fingerprint and the thresholds file's key: 3, each
#: detector's threshold the lesser of the fitted one and the one that flags ``calibrate`` of the
#: collection's judged answers, and the floor's evidence the greater of the fitted one and the
#: one that floors ``calibrate`` of them in all (2: the thresholds alone, any detector below its
#: threshold floored; 1: the thresholds also where stricter than the fitted ones)
CALIBRATION = 3
#: the layout of a guard model file (``GuardModel.to_json``'s ``format`` block): what fields it
#: has and what they mean; a file of another schema is refused, not half read
MODEL_SCHEMA = 1
#: the definitions of ``FEATURES`` (what each feature computes), in a model file's format block
#: and the guard's fingerprint: raised whenever the code of a feature changes what it computes,
#: so that a model fitted on the old definitions is refused (its weights would read numbers they
#: were not fitted on) and scores cached under the old ones are not reused. 2: spec_rd reads
#: judged answers only; 3: first_person, idf_new, oov_new, answer_like; 4: asks_only; 5: order
FEATURE_DEFINITIONS = 5
#: the definitions a model whose rest is cut (``GuardModel.rest_words`` above 0) is written with:
#: those of ``FEATURE_DEFINITIONS`` with the rest's features read from the rest's first
#: ``rest_words`` words. A reader of definitions 5 alone refuses such a file rather than compute
#: whole rests the model was not fitted on; a file of definitions 5 is a model of whole rests.
CUT_REST_DEFINITIONS = 6
#: the evidence a text is floored on (``GuardModel.evidence``: the sum over the detectors of
#: ``-ln(probability / threshold)`` where a probability is below its threshold) unless the model
#: says otherwise: ln 2, one detector at half its threshold or several agreeing detectors less
#: far below theirs (chosen on MEDIQA train+val, docs/studies/guard-study.md)
FLOOR_EVIDENCE = math.log(2.0)


@dataclass(frozen=True)
class GuardModel:
    """A fitted guard: feature names, logistic weights and intercept, the flag threshold on the
    probability of a real answer, the fluency reference (frequent words and the attested pairs
    among them), the term reference of ``idf_new`` and ``oov_new`` (``reference_documents``: N,
    ``document_frequency``: each stemmed content term's number of documents), the linear model of
    ``answer_like`` on a text's embedding (``answer_direction``, ``answer_offset``), where it was
    fitted (``fitted_on``: free text and figures), and ``also``:
    further detectors (logistic models of their own, each with its threshold) that flag a text
    too: one model per way of saying nothing, rather than one line through all of them.
    ``rest_words``: the rest's features (``cos_rq`` and those read from the rest's embedding)
    read the rest's first ``rest_words`` words, 0 the whole rest; a property of the model's
    features, fitted with it (``nrp train guard --rest-words``), like its references."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    intercept: float
    threshold: float
    frequent_words: tuple[str, ...] = ()
    attested_pairs: tuple[str, ...] = ()  # "first second"
    reference_documents: int = 0
    document_frequency: Mapping[str, int] = field(default_factory=dict)
    answer_direction: tuple[float, ...] = ()
    answer_offset: float = 0.0
    fitted_on: Mapping[str, Any] = field(default_factory=dict)
    also: tuple[GuardModel, ...] = ()
    floor_evidence: float = FLOOR_EVIDENCE
    rest_words: int = 0

    def probability(self, features: np.ndarray) -> np.ndarray:
        """P(real answer) of each row of ``features`` (columns in ``self.features``' order)."""
        z = features @ np.asarray(self.weights, dtype=float) + self.intercept
        return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))

    def shares(self, table: pd.DataFrame, threshold: float | None = None) -> np.ndarray:
        """Per row of a feature table (rows) and detector (columns: this model, then ``also``),
        the detector's probability divided by its threshold (``threshold`` replaces this
        model's own); ``inf`` where a detector abstains (a feature it cannot know: spec_rd
        without judged documents to compare with)."""
        own = threshold if threshold is not None else self.threshold
        values = table[list(self.features)].to_numpy(dtype=float)
        share = self.probability(values) / max(own, 1e-12)
        share = np.where(np.isnan(values).any(axis=1), np.inf, share)
        return np.column_stack([share, *(d.shares(table) for d in self.also)])

    def answer_share(self, table: pd.DataFrame, threshold: float | None = None) -> np.ndarray:
        """Per row of a feature table, the least of each detector's probability divided by its
        threshold (``shares``): below 1, some detector's probability is under its threshold."""
        return self.shares(table, threshold).min(axis=1)

    def evidence(self, table: pd.DataFrame, threshold: float | None = None) -> np.ndarray:
        """Per row of a feature table, the evidence that it is no answer: the sum over the
        detectors whose probability is under their threshold (by more than
        ``THRESHOLD_TOLERANCE``) of ``-ln(probability / threshold)``; 0 where none is. One
        detector far below its threshold, or several agreeing less far below, add up to the
        same: ``GuardRanker.assess`` floors a row whose evidence exceeds ``floor_evidence``."""
        return evidence_of(self.shares(table, threshold))

    def calibrated(self, table: pd.DataFrame, share: float, root: bool = True) -> GuardModel:
        """This model with each detector's threshold set as it was fitted, on the rows of
        ``table`` (``GuardFeatures.frame`` of real answers): the largest probability at which it
        flags at most ``share`` of them (the rows where it abstains left out), where that is
        below the fitted threshold; calibration loosens a detector, never tightens it
        (``CALIBRATION``). A detector with fewer than ``1 / share`` rows to go by keeps its
        threshold. Then, for the model whose detectors these are (``root``), the floor the same
        way: ``floor_evidence`` the least evidence at which at most ``share`` of the rows in all
        are floored, where that is above the fitted one."""
        values = table[list(self.features)].to_numpy(dtype=float)
        known = self.probability(values[~np.isnan(values).any(axis=1)])
        threshold = self.threshold
        if enough_to_calibrate(len(known), share):
            threshold = min(threshold, flagging_threshold(known, share))
        also = tuple(detector.calibrated(table, share, root=False) for detector in self.also)
        calibrated = replace(self, threshold=threshold, also=also)
        if not root or not enough_to_calibrate(len(table), share):
            return calibrated
        evidence = calibrated.evidence(table)
        return replace(calibrated, floor_evidence=max(
            self.floor_evidence, flooring_evidence(evidence, share)))  # fmt: skip

    @cached_property
    def digest(self) -> str:
        """A hash of what the model computes (weights, thresholds, references, detectors and
        their names), not of the record of its fitting (``fitted_on`` beyond each detector's
        name): what a guard's fingerprint reads, so that a refit to the same weights keeps every
        cached score. Computed once (the references are tens of thousands of values)."""
        payload = json.dumps(_computing(asdict(self)), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def to_json(self, path: str | Path) -> None:
        """The model as a file, with its ``format`` block (``model_format``): what ``from_json``
        checks before it reads a weight."""
        data = {"format": model_format(self.rest_words), **asdict(self)}
        Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], root: bool = True) -> GuardModel:
        """The model of ``data`` (``to_json``'s); ``root``: the model whose references (fluency,
        terms, answer direction) the features are computed with, not one of its ``also``."""
        model = cls(
            features=tuple(data["features"]),
            weights=tuple(float(w) for w in data["weights"]),
            intercept=float(data["intercept"]),
            threshold=float(data["threshold"]),
            frequent_words=tuple(data.get("frequent_words", ())),
            attested_pairs=tuple(data.get("attested_pairs", ())),
            reference_documents=int(data.get("reference_documents", 0)),
            document_frequency={
                str(t): int(n) for t, n in data.get("document_frequency", {}).items()
            },
            answer_direction=tuple(float(w) for w in data.get("answer_direction", ())),
            answer_offset=float(data.get("answer_offset", 0.0)),
            fitted_on=dict(data.get("fitted_on", {})),
            also=tuple(cls.from_dict(d, root=False) for d in data.get("also", ())),
            floor_evidence=float(data.get("floor_evidence", FLOOR_EVIDENCE)),
            rest_words=_whole_number(data.get("rest_words", 0), "rest_words") if root else 0,
        )
        unknown = [f for f in model.features if f not in FEATURES]
        if unknown or len(model.weights) != len(model.features):
            raise ValueError(f"unknown features {unknown} or weights of another length")
        numbers = [*model.weights, model.intercept, *model.answer_direction, model.answer_offset]
        if not all(math.isfinite(x) for x in numbers):
            raise ValueError("a weight, intercept or offset that is not a finite number")
        if not 0 < model.threshold <= 1 or not 0 <= model.floor_evidence < math.inf:
            raise ValueError(
                f"threshold {model.threshold} (must lie in (0, 1]) or floor_evidence "
                f"{model.floor_evidence} (must be a finite number >= 0)"
            )
        if root:
            read = {f for detector in (model, *model.also) for f in detector.features}
            if read & {"idf_new", "oov_new"} and not model.reference_documents:
                raise ValueError("idf_new and oov_new need reference_documents")
            if "answer_like" in read and not model.answer_direction:
                raise ValueError("answer_like needs an answer_direction")
        return model

    @classmethod
    def from_json(cls, path: str | Path) -> GuardModel:
        """The model of a file ``to_json`` wrote: its ``format`` block checked first (a file of
        another schema, of other feature definitions or calibration rule, or none at all, is
        refused), then every field; an ``InputError`` naming the file and what is wrong."""
        path = Path(path)
        try:
            data = jsontext.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            version = check_format(data.get("format"))
            model = cls.from_dict({k: v for k, v in data.items() if k != "format"})
            if model.rest_words and version != CUT_REST_DEFINITIONS:
                raise ValueError(
                    f"rest_words {model.rest_words} in a file of features_version {version}; "
                    f"a model that cuts its rest is written with {CUT_REST_DEFINITIONS}"
                )
            return model
        except FileNotFoundError:
            raise InputError(path, None, "file not found") from None
        except KeyError as error:
            raise InputError(path, None, f"not a guard model (missing field {error})") from None
        except (json.JSONDecodeError, TypeError, ValueError) as error:
            raise InputError(path, None, f"not a guard model ({error})") from None


def _computing(data: dict[str, Any]) -> dict[str, Any]:
    """``asdict`` of a model with ``fitted_on`` kept to the detector's name, in it and its
    ``also``, and ``rest_words`` only where it cuts the rest (a model of whole rests hashes as
    it did before the field)."""
    name = data["fitted_on"].get("name")
    also = [_computing(d) for d in data["also"]]
    kept = {k: v for k, v in data.items() if k != "rest_words" or v}
    return {**kept, "fitted_on": {"name": name} if name is not None else {}, "also": also}


def _whole_number(value: Any, name: str) -> int:
    """``value`` as a whole number of at least 0, else a ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} {value!r} (must be a whole number >= 0)")
    return value


def model_format(rest_words: int = 0) -> dict[str, int]:
    """The ``format`` block of a model file this code writes: the feature definitions of a model
    that cuts its rest to ``rest_words`` words are ``CUT_REST_DEFINITIONS``."""
    return {
        "schema": MODEL_SCHEMA,
        "features_version": CUT_REST_DEFINITIONS if rest_words else FEATURE_DEFINITIONS,
        "calibration": CALIBRATION,
    }


def check_format(block: Any) -> int:
    """The feature definitions of a model file's ``format`` block, or a ``ValueError`` saying
    what is wrong when the block is not one this code reads (``model_format``'s, of either
    definitions): missing (a file of no nrp, or of one before the block), another schema, other
    feature definitions, another calibration rule."""
    if not isinstance(block, dict):
        raise ValueError(
            "no format block (schema, features_version, calibration): a guard model file "
            "GuardModel.to_json writes has one"
        )
    versions = (FEATURE_DEFINITIONS, CUT_REST_DEFINITIONS)
    for key, expected in model_format().items():
        found = block.get(key)
        readable = versions if key == "features_version" else (expected,)
        if found not in readable:
            wanted = " or ".join(repr(v) for v in readable)
            raise ValueError(
                f"format {key} {found!r}, where this nrp reads {wanted}: fitted for another "
                "version of the guard; fit it again (nrp train guard)"
            )
    return int(block["features_version"])


@cache
def packaged_model() -> GuardModel:
    return GuardModel.from_json(PACKAGED_MODEL)


def flagging_threshold(probabilities: np.ndarray, share: float) -> float:
    """The largest threshold at which at most ``share`` of ``probabilities`` (real answers')
    lie below it: the one at ``floor(share * n)`` in order."""
    ordered = np.sort(probabilities)
    return float(ordered[int(np.floor(share * len(ordered)))])


def evidence_of(shares: np.ndarray) -> np.ndarray:
    """``GuardModel.evidence`` of a matrix of shares (rows x detectors, ``GuardModel.shares``)."""
    below = shares < 1.0 - THRESHOLD_TOLERANCE
    with np.errstate(divide="ignore"):
        cost = -np.log(np.where(below, np.maximum(shares, 1e-300), 1.0))
    return cost.sum(axis=1)


def flooring_evidence(evidence: np.ndarray, share: float) -> float:
    """The least floor of evidence at which at most ``share`` of ``evidence`` (real answers')
    lies above it: the ``floor(share * n) + 1``-th largest (``flagging_threshold`` of the
    evidence turned round)."""
    return -flagging_threshold(-np.asarray(evidence, dtype=float), share)


def floored(evidence: np.ndarray, floor: float) -> np.ndarray:
    """Whether each row's evidence exceeds ``floor`` by more than ``THRESHOLD_TOLERANCE`` of it:
    a calibrated floor is a real answer's own evidence, and whether that answer is floored must
    not hang on float rounding."""
    return np.asarray(evidence, dtype=float) > floor * (1.0 + THRESHOLD_TOLERANCE) + 1e-12


def enough_to_calibrate(rows: int, share: float) -> bool:
    """Whether ``rows`` real answers are enough to set a threshold flagging ``share`` of them:
    at least ``1 / share``."""
    return share > 0 and rows >= math.ceil(1.0 / share)


def with_thresholds(model: GuardModel, kept: Mapping[str, Any]) -> GuardModel:
    """``model`` with the thresholds of its detectors (``kept["thresholds"]``: itself first,
    then ``also``) and the evidence it floors on (``kept["floor_evidence"]``), as the
    thresholds file keeps them."""
    thresholds = list(kept["thresholds"])
    if len(thresholds) != 1 + len(model.also):
        raise ValueError(f"{len(thresholds)} thresholds for {1 + len(model.also)} detectors")
    pairs = zip(model.also, thresholds[1:], strict=True)
    also = tuple(replace(d, threshold=float(t)) for d, t in pairs)
    return replace(
        model, threshold=float(thresholds[0]), also=also,
        floor_evidence=float(kept["floor_evidence"]),
    )  # fmt: skip
