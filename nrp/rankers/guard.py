"""``guard``: any ranker, with texts that only mirror or evade the question put below every real
answer.

Why. A ranker that scores how well a text matches its question scores the question itself
highest: an answer that echoes, restates or politely evades the question gets NRP near 1.0, above
every judged answer (docs/validity.md). Fine-tuning the ranker on such texts does not help (an
echo's embedding stays next to its question's), and adding a degeneracy score to the ranker's
score trades the ranker's agreement with the judges for validity. The guard does neither: it
decides whether a text is an answer at all, and only then lets the ranker order it.

How. A small logistic model (``GuardModel``) reads features of (question, text) that say how much
the text contributes beyond the question, and does not read any wording:

- ``novel_share``: the share of the text's distinct content terms (Terrier's tokeniser,
  stopwords and Porter stems) that are not the question's terms;
- ``log_novel``: log(1 + the number of such new terms);
- ``cos_tq``: cosine of the text's and the question's embeddings (the packaged
  all-MiniLM-L6-v2);
- ``cos_rq``: cosine of the *rest* of the text (every word whose stem is a question term
  removed) and the question: what the text says about the question once the question's own
  words are gone (0 when nothing is left);
- ``fluency``: among adjacent pairs of frequent function words (the model's reference list),
  the share that occur in ordinary text (the model's reference pairs), with a prior of four
  attested pairs (a short text's few pairs say little): low for word salad;
- ``spec_rq``: ``cos_rq`` minus the mean cosine of the rest with the other questions of the
  collection: whether what the text adds is about *this* question rather than any question;
- ``margin_rq``: ``cos_rq`` minus the rest's highest cosine with another question of the
  collection: negative when what the text adds answers another question (a question followed by
  another topic's text).
- ``spec_rd``: what the rest says compared with what the judged answers say: the mean of the
  rest's three highest cosines with the question's own judged answers (documents of a gain
  above 0 in the collection's first dimension: a pool holds systems' own deferrals too, graded
  lowest) minus the mean of the same over every other question's judged answers (documents
  contained in the text, such as the text itself, left out; 0 without a rest; unknown (NaN,
  and the detectors that read it abstain) where the question has no other judged answer or the
  guard is bound to no collection). Boilerplate of any wording ("it depends on many
  factors", "ask your doctor") is as close to every question's answers as to this one's; a real
  answer's new words are closest to its own question's answers.
- ``first_person``: the share of the text's words that are the first person singular ("I",
  "my", "I'm", ...): an answer speaks of its subject; a reply that declines speaks of itself
  ("I'm sorry, but as an AI I cannot ...").
- ``idf_new``: the mean inverse document frequency, ``log((N + 1) / (df + 1))``, of the text's
  new terms (content terms the question lacks) in the model's reference corpus of ``N``
  documents (0 without new terms): what the text adds is specific information (drugs, organs,
  doses: rare words) or words that every text has ("information", "provide", "consult").
- ``oov_new``: the share of the text's new terms that the reference corpus lacks (0 without
  new terms).
- ``answer_like``: the logit of a linear model (the model's ``answer_direction`` and
  ``answer_offset``) on the text's embedding: whether the text, taken whole, reads like an
  answer or like a reply that gives none (declines, defers, stalls, talks around the question).
  Fitted on the judged answers against non-answers a language model wrote in its own words
  (``scripts/fit_guard.py``), so it learns what saying nothing means, not any sentence; 0
  without a direction.
- ``asks_only``: 1 when every sentence of the text that holds a word ends with a question mark
  (a text that asks and states nothing: the question itself, a question back, a list of
  questions), else 0. An answer states something; a reply made only of questions gives no
  answer, in whatever wording (docs/validity.md, "Questions in place of an answer").

Detectors and the floor. One small logistic model per way of saying nothing (``GuardModel`` and
its ``also``: mirror, generic, elsewhere, off_topic, disorder, hollow, asking), each with its
threshold on the probability of a real answer. A detector below its threshold is evidence, worth
``-ln(probability / threshold)``; a text is flagged, and floored, when its evidence summed over
the detectors exceeds the model's ``floor_evidence`` (``FLOOR_EVIDENCE``, ln 2): one detector
under half its threshold, or several agreeing less far below theirs. One detector's doubt near
its threshold is not enough: each detector flags about 1% of real answers at its threshold, and
on answers written unlike the judged documents (drug labels, abstracts, terse replies) their
false alarms added up when any one of them floored a text.

Scores: the ranker's own score for an unflagged text (which must lie within
``+-FLAG_OFFSET / 2``), and for a flagged one a score in ``[-FLAG_OFFSET, -FLAG_OFFSET / 2)`` that
grows with the guard's probability, so every flagged text ranks below every unflagged one,
flagged texts rank among themselves by how likely the guard holds them to be answers, and the
ranker's order of unflagged texts, its agreement with the judges, is untouched. NRP of a flagged
answer is then the share of D_q that is flagged too (usually none: NRP 0).

The packaged model (``guard_model.json``) was fitted by ``scripts/fit_guard.py`` on the MEDIQA
2019 training and validation sets only, with the ``evasion`` family of degenerate texts held out;
``model=FILE`` reads another fitted model. What it was fitted on and how its settings were
chosen: docs/guard-study.md.

Calibrated. Bound to a collection, the guard sets each detector's threshold anew on the
collection's own judged answers (``calibrate``: the share, 0.01 by default; documents of a gain
above 0 in the first dimension, each with its own question) so that it flags that share of them,
and the floor so that at most that share of them is floored in all; calibration loosens, never
tightens (``CALIBRATION``): judged answers that all read as answers by far say nothing of how the
answers to be scored read. The thresholds and the floor are kept beside the collection
(``guard-thresholds-KEY.json``); unbound, with ``calibrate=0``, or with fewer judged answers than
``1 / calibrate``, the model's own. ``threshold=`` replaces the first detector's.

Content. ``content=W`` adds ``W * log(1 + new terms)`` (the ``log_novel`` feature) to the
guarded ranker's score: a small reward for what a text says beyond the question (judges grade
complete answers above partial ones; a ranker of similarity to the question cannot see it). 0 by
default; the default validation candidates include ``guard:content=0.06`` for dense's cosine.

Quoted. The guarded ranker scores a text without the question it repeats (``unquoted``): every
run of consecutive words the text copies from the question, of at least ``quoted`` of the
question's words (0.3 by default) and at least ``QUOTED_WORDS``, goes before scoring, unless one
of the question's judged answers says that run too (a page whose heading asks the question). A
similarity ranker scores a question it finds in a text as the best match there is; ``quoted``
takes that lift from the texts the guard lets through. A judged answer is never cut. 0: the
whole text.

Spec: ``guard:ranker=dense`` (default), ``guard:ranker=bm25;k1=0.9``: the guarded ranker's own
parameters separated by ``;`` as in ``fuse``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache, cached_property
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from nrp import jsontext
from nrp.errors import ConfigError, InputError, ModelError, NrpError
from nrp.rankers.base import Ranker
from nrp.rankers.cache import SCORE_CACHE_FILE, CachedRanker, ScoreCache
from nrp.rankers.fusion import (
    join_specs,
    judged_rows,
    judged_texts,
    scores_with_cache,
    sub_spec,
)
from nrp.rankers.registry import Param, RankerInfo, make_ranker, register
from nrp.rankers.text_pipeline import porter_stem, terrier_stopwords
from nrp.spec import format_spec
from nrp.tables import write_aside

#: a flagged text's score is the ranker's minus this: below any unflagged text of a ranker whose
#: scores span less than it (cosines, logits, BM25 over a few hundred terms)
FLAG_OFFSET = 1.0e4
#: a text whose probability is within this share of a detector's threshold is at it, not
#: below: a calibrated threshold is a real answer's own probability, and whether that answer is
#: flagged must not hang on float rounding (its features move by about 1e-7 with the batch its
#: texts were embedded in; the fp32 tie tolerance, docs/nrp.md)
THRESHOLD_TOLERANCE = 1.0e-5
#: the packaged model, beside this module
PACKAGED_MODEL = Path(__file__).with_name("guard_model.json")
FEATURES = (
    "novel_share", "log_novel", "cos_tq", "cos_rq", "fluency", "spec_rq", "margin_rq", "spec_rd",
    "first_person", "idf_new", "oov_new", "answer_like", "asks_only",
)  # fmt: skip
#: the features read from the words alone and the model's references (no encoder): cheap, and
#: computed anew by the fitting script whatever its cache holds
WORD_FEATURES = ("fluency", "first_person", "idf_new", "oov_new", "asks_only")
#: first_person: the words of the first person singular (lower case, as ``_WORD`` splits them)
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
#: spec_rd: how many of a question's judged documents (the closest) the rest is compared with
DOCUMENTS_CLOSEST = 3
#: fluency: attested pairs counted in addition to a text's own (a prior of fluent text)
FLUENCY_PRIOR = 4
#: the encoder of the cosine features (the packaged all-MiniLM-L6-v2)
ENCODER = "dense:model=minilm"
#: the features' definitions, in the fingerprint: scores cached under another (with a model
#: file of one's own, ``model=FILE``) are not reused. 2: spec_rd reads judged answers only;
#: 3: first_person, idf_new, oov_new, answer_like; 4: asks_only
FEATURE_DEFINITIONS = 4

_WORD = re.compile(r"[A-Za-z0-9']+")
_ANY_WORD = re.compile(r"\w")
_MARKS = re.compile(r"[^\w\s]*")
#: asks_only: a sentence ends at . ! or ? (closing quotes and brackets after it kept out) before
#: white space, or at a line break; it asks when it ends with a question mark
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+|\n")
_ASKS = re.compile(r"\?[\"'\u201d\u2019)\]]*$")
#: ``quoted``: a run of consecutive question words copied into a text is the question's, not the
#: text's, when it holds at least this share of the question's words (chosen on MEDIQA
#: train+val: scripts/tune_guard.py) and at least ``QUOTED_WORDS`` words
QUOTED_SHARE = 0.3
QUOTED_WORDS = 4
#: ``content``'s largest weight: the reward of a text of ten thousand new terms (log 1e4 = 9.2)
#: stays far below ``FLAG_OFFSET / 2``, so that a flagged text still ranks below every other (at
#: 1e308 every text was pushed past it and every answer came last)
MAX_CONTENT = 100.0
#: ``calibrate``: the share of a bound collection's judged answers each detector flags (the share
#: of the fitting answers each was fitted to flag: ``scripts/fit_guard.py --max-flagged``)
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
#: the definitions of ``FEATURES`` a model's weights were fitted on: raised whenever the code of
#: a feature changes what it computes, so that a model fitted on the old definitions is refused
#: (its weights would read numbers they were not fitted on) instead of scoring wrong
FEATURES_VERSION = 1
#: the evidence a text is floored on (``GuardModel.evidence``: the sum over the detectors of
#: ``-ln(probability / threshold)`` where a probability is below its threshold) unless the model
#: says otherwise: ln 2, one detector at half its threshold or several agreeing detectors less
#: far below theirs (chosen on MEDIQA train+val, docs/guard-study.md)
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
    too: one model per way of saying nothing, rather than one line through all of them."""

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
        """A hash of the whole model (weights, thresholds, references, detectors): what a
        guard's fingerprint reads, computed once (the references are tens of thousands of
        values)."""
        payload = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def to_json(self, path: str | Path) -> None:
        """The model as a file, with its ``format`` block (``model_format``): what ``from_json``
        checks before it reads a weight."""
        data = {"format": model_format(), **asdict(self)}
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
            check_format(data.get("format"))
            return cls.from_dict({k: v for k, v in data.items() if k != "format"})
        except FileNotFoundError:
            raise InputError(path, None, "file not found") from None
        except KeyError as error:
            raise InputError(path, None, f"not a guard model (missing field {error})") from None
        except (json.JSONDecodeError, TypeError, ValueError) as error:
            raise InputError(path, None, f"not a guard model ({error})") from None


def model_format() -> dict[str, int]:
    """The ``format`` block of a model file this code writes and reads."""
    return {
        "schema": MODEL_SCHEMA,
        "features_version": FEATURES_VERSION,
        "calibration": CALIBRATION,
    }


def check_format(block: Any) -> None:
    """A ``ValueError`` saying what is wrong when a model file's ``format`` block is not this
    code's (``model_format``): missing (a file of no nrp, or of one before the block), another
    schema, other feature definitions, another calibration rule."""
    if not isinstance(block, dict):
        raise ValueError(
            "no format block (schema, features_version, calibration): a guard model file "
            "GuardModel.to_json writes has one"
        )
    for key, expected in model_format().items():
        found = block.get(key)
        if found != expected:
            raise ValueError(
                f"format {key} {found!r}, where this nrp reads {expected!r}: fitted for another "
                "version of the guard; fit it again (scripts/fit_guard.py)"
            )


@cache
def packaged_model() -> GuardModel:
    return GuardModel.from_json(PACKAGED_MODEL)


# -- features -------------------------------------------------------------------------------------
def content_terms(text: str) -> list[str]:
    """The stemmed content terms of ``text`` in order (Terrier's stopwords out, 3+ letters)."""
    stop = terrier_stopwords()
    words = (w.lower() for w in _WORD.findall(text))
    return [porter_stem(w) for w in words if len(w) > 2 and w not in stop]


def rest_of(text: str, question_terms: set[str]) -> str:
    """``text`` without the words whose stem is a question term ("" when no new term is left)."""
    stop = terrier_stopwords()
    kept, new = [], False
    for word in _WORD.findall(text):
        lower = word.lower()
        if lower not in stop and len(lower) > 2 and porter_stem(lower) in question_terms:
            continue
        kept.append(word)
        new = new or (lower not in stop and len(lower) > 2)
    return " ".join(kept) if new else ""


def quoted_runs(
    question: str, share: float, answers: Sequence[str] = ()
) -> tuple[int, frozenset[tuple[str, ...]]]:
    """What ``unquoted`` cuts: the run length (at least ``share`` of the question's words and at
    least ``QUOTED_WORDS``) and the question's runs of that many consecutive words (letters and
    digits, lower case) that none of ``answers`` (its judged answers) contains. A run the judged
    answers repeat (a page's heading that asks the question) is what answers say; one they never
    say is the question's alone. No runs when ``share`` is 0 or the question is shorter."""
    words = [w.lower() for w in _WORD.findall(question)]
    run = max(QUOTED_WORDS, math.ceil(share * len(words) - 1e-9))
    if share <= 0 or len(words) < run:
        return run, frozenset()
    grams = {tuple(words[i : i + run]) for i in range(len(words) - run + 1)}
    for answer in answers:
        tokens = [w.lower() for w in _WORD.findall(answer)]
        grams.difference_update(tuple(tokens[i : i + run]) for i in range(len(tokens) - run + 1))
    return run, frozenset(grams)


def unquoted(
    question: str, text: str, share: float, answers: Sequence[str] = (),
    runs: tuple[int, frozenset[tuple[str, ...]]] | None = None,
) -> str:  # fmt: skip
    """``text`` without every run of consecutive words (letters and digits, case aside) that it
    copies from ``question`` and that holds at least ``share`` of the question's words and at
    least ``QUOTED_WORDS``, unless one of the question's judged ``answers`` says it too
    (``quoted_runs``; ``runs``: its result, when known): what the text says once the question it
    repeats is gone. ``text`` itself when it copies no such run (or ``share`` is 0); otherwise
    what is left around the runs (a run goes from its first word to its last, with the
    punctuation between them and right after it: "...?"), its white space collapsed."""
    run, grams = runs if runs is not None else quoted_runs(question, share, answers)
    if not grams:
        return text
    found = list(_WORD.finditer(text))
    tokens = [m.group().lower() for m in found]
    copied = np.zeros(len(tokens), dtype=bool)
    for i in range(len(tokens) - run + 1):
        if tuple(tokens[i : i + run]) in grams:
            copied[i : i + run] = True
    if not copied.any():
        return text
    kept, start, cutting = [], 0, False
    for match, cut in zip(found, copied, strict=True):
        if cut and not cutting:  # a run begins: keep what came before it
            kept.append(text[start : match.start()])
        if cut:  # the run goes, with the punctuation between its words and right after it
            start = _MARKS.match(text, match.end()).end()
        cutting = bool(cut)
    kept.append(text[start:])
    return " ".join("".join(kept).split())


def fluency(text: str, frequent: frozenset[str], attested: frozenset[str]) -> float:
    """The share of adjacent pairs of frequent words that are attested pairs, counted with
    ``FLUENCY_PRIOR`` attested pairs more: a short text's two or three pairs say little (an
    unusual but correct phrase is not word salad), a shuffled document's forty say a lot;
    without any pair, 1.0 (no evidence of disorder)."""
    words = [w.lower() for w in _WORD.findall(text)]
    pairs = [f"{a} {b}" for a, b in pairwise(words) if a in frequent and b in frequent]
    return (sum(p in attested for p in pairs) + FLUENCY_PRIOR) / (len(pairs) + FLUENCY_PRIOR)


def asks_only(text: str) -> float:
    """1.0 when ``text`` has a sentence with a word and every such sentence ends with a question
    mark (``_SENTENCE_BREAK``, ``_ASKS``), else 0.0."""
    sentences = (part.strip() for part in _SENTENCE_BREAK.split(text))
    said = [s for s in sentences if _ANY_WORD.search(s)]
    return float(bool(said) and all(_ASKS.search(s) for s in said))


def information_features(
    question: str, text: str, documents: int, frequency: Mapping[str, int]
) -> tuple[float, float, float]:
    """(first_person, idf_new, oov_new) of one pair, with a term reference of ``documents``
    documents and each term's ``frequency`` (its number of documents)."""
    words = [w.lower() for w in _WORD.findall(text)]
    first = sum(w in FIRST_PERSON for w in words) / len(words) if words else 0.0
    new = set(content_terms(text)) - set(content_terms(question))
    if not new:
        return first, 0.0, 0.0
    counts = [frequency.get(term, 0) for term in sorted(new)]
    idf = sum(math.log((documents + 1) / (n + 1)) for n in counts) / len(counts)
    return first, idf, sum(n == 0 for n in counts) / len(counts)


def lexical_features(question: str, text: str) -> tuple[float, float, str]:
    """(novel_share, log_novel, the rest of the text) of one pair."""
    q_terms = set(content_terms(question))
    terms = set(content_terms(text))
    novel = terms - q_terms
    share = len(novel) / len(terms) if terms else 0.0
    return share, math.log1p(len(novel)), rest_of(text, q_terms)


#: features computed in this process: (reference, questions, query, text) -> row; bounded
_MEMO: dict[tuple[int, int, str, str], np.ndarray] = {}
_MEMO_LIMIT = 1 << 18


def _mean_of_highest(sims: np.ndarray) -> np.ndarray:
    """Per row of ``sims``, the mean of its ``DOCUMENTS_CLOSEST`` highest values (all of a row
    with fewer), summed from the highest down."""
    top = -np.sort(-sims, axis=1)[:, :DOCUMENTS_CLOSEST]
    return top.sum(axis=1) / top.shape[1]


def _save_array(path: Path, array: np.ndarray) -> None:
    with path.open("wb") as handle:  # np.save(path) would add ".npy" to the name
        np.save(handle, array, allow_pickle=False)


class GuardFeatures:
    """Computes ``FEATURES`` for rows of (query, text); ``others``: the questions a text's rest
    is compared with for ``spec_rq`` (the bound collection's topics); ``documents``: each
    question's judged documents, which ``spec_rd`` compares the rest with. Rows computed before
    in this process with the same reference, questions and documents are not computed again
    (validation ranks the same texts with several guards). ``store``: a folder where the judged
    documents' embeddings are kept between processes (the bound collection's)."""

    def __init__(
        self,
        model: GuardModel,
        encoder: Any,
        others: Sequence[str] = (),
        documents: Mapping[str, Sequence[str]] | None = None,
        store: str | Path | None = None,
    ):
        self.model = model
        self.store = Path(store) if store is not None else None
        self.encoder = encoder
        self.others = list(dict.fromkeys(others))
        self.documents = {
            str(q): list(dict.fromkeys(str(d) for d in docs))
            for q, docs in (documents or {}).items()
            if len(docs)
        }
        self._frequent = frozenset(model.frequent_words)
        self._attested = frozenset(model.attested_pairs)
        self._other_emb: np.ndarray | None = None
        self._doc_emb: np.ndarray | None = None
        self._frequency = dict(model.document_frequency)
        references = (
            model.frequent_words, model.attested_pairs, model.reference_documents,
            tuple(sorted(self._frequency.items())), model.answer_direction, model.answer_offset,
        )  # fmt: skip
        self._key = (
            hash((*references, encoder.fingerprint())),
            hash((tuple(self.others), tuple((q, tuple(d)) for q, d in self.documents.items()))),
        )

    def known(self, queries: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """True for each (query, text) whose features this process has computed (``frame``
        reads them without embedding anything)."""
        return np.array(
            [(*self._key, q, t) in _MEMO for q, t in zip(queries, texts, strict=True)], dtype=bool
        )

    def frame(self, queries: Sequence[str], texts: Sequence[str]) -> pd.DataFrame:
        """One row per (query, text), one column per feature of ``FEATURES``."""
        keys = [(*self._key, q, t) for q, t in zip(queries, texts, strict=True)]
        todo = [i for i, key in enumerate(keys) if key not in _MEMO]
        if todo:
            fresh = self._compute([queries[i] for i in todo], [texts[i] for i in todo])
            if len(_MEMO) + len(todo) > _MEMO_LIMIT:
                _MEMO.clear()
            for i, row in zip(todo, fresh.to_numpy(dtype=float), strict=True):
                _MEMO[keys[i]] = row
        values = np.array([_MEMO[key] for key in keys]).reshape(len(keys), len(FEATURES))
        return pd.DataFrame(values, columns=list(FEATURES))

    def _encode(self, texts: list[str]) -> np.ndarray:
        unique, index = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
        return self.encoder.encode([str(t) for t in unique], desc="guard texts")[index]

    def _compute(self, queries: Sequence[str], texts: Sequence[str]) -> pd.DataFrame:
        lexical = [lexical_features(q, t) for q, t in zip(queries, texts, strict=True)]
        rests = [r for _, _, r in lexical]
        q_emb = self._encode(list(queries))
        t_emb = self._encode(list(texts))
        has_rest = np.array([bool(r) for r in rests])
        r_emb = self._encode([r if r else "." for r in rests])
        cos_rq = np.where(has_rest, np.einsum("ij,ij->i", q_emb, r_emb), 0.0)
        mean_other, max_other = self._other_cosines(r_emb, list(queries))
        spec = cos_rq - mean_other * has_rest
        margin = cos_rq - max_other * has_rest
        spec_rd = np.where(
            has_rest, self._document_specificity(r_emb, list(queries), list(texts)), 0.0
        )
        encoded = pd.DataFrame(
            {
                "novel_share": [s for s, _, _ in lexical],
                "log_novel": [n for _, n, _ in lexical],
                "cos_tq": np.einsum("ij,ij->i", q_emb, t_emb),
                "cos_rq": cos_rq,
                "spec_rq": spec,
                "margin_rq": margin,
                "spec_rd": spec_rd,
                "answer_like": self.answer_like(t_emb),
            }
        )
        table = pd.concat([encoded, self.word_features(queries, texts)], axis=1)
        return table[list(FEATURES)].astype(float)

    def answer_like(self, embeddings: np.ndarray) -> np.ndarray:
        """``answer_like`` of texts' embeddings (0 each without the model's direction)."""
        direction = np.asarray(self.model.answer_direction, dtype=float)
        if not len(direction):
            return np.zeros(len(embeddings))
        return np.asarray(embeddings, dtype=float) @ direction + self.model.answer_offset

    def text_embeddings(self, texts: Sequence[str]) -> np.ndarray:
        """The encoder's embeddings of ``texts`` (what ``answer_like`` reads)."""
        return self._encode(list(texts))

    def word_features(self, queries: Sequence[str], texts: Sequence[str]) -> pd.DataFrame:
        """The ``WORD_FEATURES`` of each row: read from its words and the model's references."""
        n = self.model.reference_documents
        information = [
            information_features(q, t, n, self._frequency)
            for q, t in zip(queries, texts, strict=True)
        ]
        return pd.DataFrame(
            {
                "fluency": [fluency(t, self._frequent, self._attested) for t in texts],
                "first_person": [f for f, _, _ in information],
                "idf_new": [i for _, i, _ in information],
                "oov_new": [o for _, _, o in information],
                "asks_only": [asks_only(t) for t in texts],
            },
            dtype=float,
        )

    def _document_specificity(
        self, r_emb: np.ndarray, queries: list[str], texts: list[str]
    ) -> np.ndarray:
        """``spec_rd`` of each row: the mean of the rest's ``DOCUMENTS_CLOSEST`` highest cosines
        with its question's judged documents minus the mean of the same over the other
        questions' documents; a document contained in the text (the text itself, or a judged
        answer after its question) is left out. NaN (unknown) where the question has no other
        judged document or no other question has any."""
        out = np.full(len(queries), np.nan)
        if len(self.documents) < 2:
            return out
        groups = list(self.documents)
        if self._doc_emb is None:
            flat = [d for q in groups for d in self.documents[q]]
            self._doc_emb = self._document_embeddings(flat)
        bounds = np.cumsum([0] + [len(self.documents[q]) for q in groups])
        group_of = {q: i for i, q in enumerate(groups)}
        for start in range(0, len(queries), 512):
            stop = min(start + 512, len(queries))
            sims = (r_emb[start:stop] @ self._doc_emb.T).astype(float)
            closest = np.column_stack(  # per row and question: the mean of the highest cosines
                [_mean_of_highest(sims[:, lo:hi]) for lo, hi in pairwise(bounds)]
            )
            for row in range(start, stop):
                own = group_of.get(queries[row], -1)
                if own < 0:
                    continue
                kept = [  # its own question's documents, less those the text contains
                    sims[row - start, bounds[own] + j]
                    for j, doc in enumerate(self.documents[queries[row]])
                    if doc not in texts[row]
                ]
                if kept:
                    mine = _mean_of_highest(np.array([kept]))[0]
                    out[row] = mine - np.delete(closest[row - start], own).mean()
        return out

    def _document_embeddings(self, texts: list[str]) -> np.ndarray:
        """The encoder's embeddings of ``texts``, read from ``store`` when an earlier process
        kept them there (the key: the encoder's fingerprint and every text), else computed and
        kept (written whole or not at all; a folder that cannot be written keeps nothing)."""
        digest = hashlib.sha256(self.encoder.fingerprint().encode())
        for text in texts:
            digest.update(b"\0" + text.encode("utf-8", "surrogatepass"))
        path = self.store / f"guard-documents-{digest.hexdigest()[:24]}.npy" if self.store else None
        if path is not None and path.is_file():
            try:
                kept = np.load(path, allow_pickle=False)
                if kept.shape[0] == len(texts):
                    return kept
            except (OSError, ValueError):
                pass
        embeddings = np.asarray(self.encoder.encode(texts, desc="guard documents"))
        if path is not None:
            with contextlib.suppress(OSError):  # a folder that cannot be written keeps nothing
                write_aside(path, lambda partial: _save_array(partial, embeddings))
        return embeddings

    def _other_cosines(
        self, r_emb: np.ndarray, queries: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The mean and the highest cosine of each rest with the questions other than its own
        (zeros without other questions)."""
        if self._other_emb is None:
            self._other_emb = (
                self.encoder.encode(self.others, desc="guard questions")
                if self.others
                else np.zeros((0, r_emb.shape[1]), np.float32)
            )
        position = {q: i for i, q in enumerate(self.others)}
        own = np.array([position.get(q, -1) for q in queries], dtype=int)
        count = len(self.others) - (own >= 0)
        if not len(self._other_emb) or not count.any():
            return np.zeros(len(r_emb)), np.zeros(len(r_emb))
        sims = (r_emb @ self._other_emb.T).astype(float)  # rows x questions
        rows = np.arange(len(own))
        own_sim = np.where(own >= 0, sims[rows, np.maximum(own, 0)], 0.0)
        mean = (sims.sum(axis=1) - own_sim) / np.maximum(count, 1)
        sims[rows[own >= 0], own[own >= 0]] = -np.inf
        highest = np.where(count > 0, sims.max(axis=1), 0.0)
        return mean, highest


def judged_documents(
    candidates: pd.DataFrame, qrels: pd.DataFrame | None = None
) -> dict[str, list[str]]:
    """Each question's judged answers (``query`` and ``text`` of a collection's candidates), as
    ``GuardFeatures`` reads them for ``spec_rd``. With ``qrels`` (qid, docno, label: graded
    gains), only the documents of a gain above 0: what the judges held to be answers. A pool
    holds systems' own deferrals and boilerplate too ("please see a doctor", graded lowest);
    compared with them, boilerplate would look specific to the question."""
    if qrels is not None:
        answered = qrels.loc[qrels["label"] > 0, ["qid", "docno"]].astype(str)
        keys = pd.MultiIndex.from_frame(candidates[["qid", "docno"]].astype(str))
        candidates = candidates[keys.isin(pd.MultiIndex.from_frame(answered))]
    documents: dict[str, list[str]] = {}
    for query, text in zip(candidates["query"].astype(str), candidates["text"].astype(str),
                           strict=True):  # fmt: skip
        documents.setdefault(query, []).append(text)
    return documents


def judged_answers(collection: Any, candidates: pd.DataFrame) -> dict[str, list[str]]:
    """``judged_documents`` of ``candidates`` (rows of ``collection``'s) that the judges held to
    be answers: a gain above 0 in the collection's first dimension (relevance where it has
    several). What a bound guard's ``spec_rd`` compares with, and what it is fitted with."""
    first = next(iter(collection.dimensions))
    return judged_documents(candidates, collection.qrels(first))


# -- fitting --------------------------------------------------------------------------------------
def fluency_reference(
    texts: Sequence[str], frequent: int = 150, pair_docs: int = 3
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fluency reference of ``texts``: the ``frequent`` function words (Terrier's stopwords)
    of highest document frequency (ties by the word), and the pairs of them adjacent in at least
    ``pair_docs`` texts. Function words only: the order of "of the", "it is", "can be" is
    English, whatever the topic; pairs of topic words ("blood pressure") belong to one domain."""
    words_df: Counter[str] = Counter()
    pairs_df: Counter[str] = Counter()
    for text in texts:
        words = [w.lower() for w in _WORD.findall(text)]
        words_df.update(set(words))
        pairs_df.update({f"{a} {b}" for a, b in pairwise(words)})
    stopwords = terrier_stopwords()
    function = [w for w in words_df if w in stopwords]
    top = sorted(function, key=lambda w: (-words_df[w], w))[:frequent]
    keep = set(top)
    pairs = [p for p, n in pairs_df.items() if n >= pair_docs and set(p.split()) <= keep]
    return tuple(sorted(top)), tuple(sorted(pairs))


def document_frequencies(texts: Sequence[str]) -> tuple[int, dict[str, int]]:
    """The term reference of ``texts`` (``idf_new``, ``oov_new``): the number of distinct
    texts and, per stemmed content term (``content_terms``), the number of them it occurs in."""
    distinct = list(dict.fromkeys(texts))
    counts: Counter[str] = Counter()
    for text in distinct:
        counts.update(set(content_terms(text)))
    return len(distinct), dict(sorted(counts.items()))


def balanced_weights(y: np.ndarray) -> np.ndarray:
    """Row weights that give the two classes of ``y`` (0/1) equal mass, ``len(y)`` in all."""
    n_pos, n_neg = max(1, int(y.sum())), max(1, int(len(y) - y.sum()))
    return np.where(y == 1, 0.5 / n_pos, 0.5 / n_neg) * len(y)


#: fit_logistic: a column spreading less than this over the fitted rows is constant up to float
#: rounding and gets weight 0. All-MiniLM-L6-v2 has such dimensions (answer_like's embedding:
#: one spreads 1.1e-8, values about -4e-8, where the others spread 0.026 or more); the
#: standardised fit weighed it 2.9e7, so a kernel or precision that rounds it otherwise (another
#: CPU's BLAS, a GPU) would move answer_like by up to a logit. Float32 embeddings of one text move
#: by about 1e-7 with their batch: a spread under 1e-6 is not the text's.
FLAT_COLUMN = 1.0e-6


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


def fit_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """Weights, then the intercept, of an L2-penalised logistic regression of ``y`` (0/1) on the
    columns of ``x`` with row weights, by Newton's method on standardised columns (the
    intercept not penalised; deterministic). A column that spreads less than ``FLAT_COLUMN``
    over the rows gets weight 0: standardised, its rounding would weigh as much as a feature."""
    mean, spread = x.mean(axis=0), x.std(axis=0)
    flat = spread < FLAT_COLUMN
    scale = np.where(flat, 1.0, spread)
    z = np.hstack([np.where(flat, 0.0, (x - mean) / scale), np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], float(l2))
    penalty[-1] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(z @ beta, -60, 60)))
        gradient = z.T @ (weight * (p - y)) + penalty * beta
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-10:
            break
    coef = beta[:-1] / scale
    return np.append(coef, beta[-1] - (coef * mean).sum())


def fit_guard_model(
    table: pd.DataFrame,
    is_answer: np.ndarray,
    reference: tuple[tuple[str, ...], tuple[str, ...]],
    *,
    features: Sequence[str] = FEATURES,
    l2: float = 1.0,
    max_flagged: float = 0.01,
    terms: tuple[int, Mapping[str, int]] = (0, {}),
) -> GuardModel:
    """A guard fitted on ``table`` (``GuardFeatures.frame`` rows) where ``is_answer`` says which
    rows are real answers: the two classes weighted to equal mass, the threshold the largest
    probability that flags at most ``max_flagged`` of the real answers. ``reference``: the
    fluency reference the table was computed with; ``terms``: its term reference
    (``document_frequencies``)."""
    y = np.asarray(is_answer, dtype=float)
    x = table[list(features)].to_numpy(dtype=float)
    beta = fit_logistic(x, y, balanced_weights(y), l2)
    model = GuardModel(tuple(features), tuple(float(b) for b in beta[:-1]), float(beta[-1]), 0.5,
                       reference[0], reference[1], terms[0], dict(terms[1]))  # fmt: skip
    answers = model.probability(x)[y == 1]
    threshold = flagging_threshold(answers, max_flagged) if len(answers) else 0.5
    return replace(model, threshold=threshold)


# -- the ranker -----------------------------------------------------------------------------------
PARAMS: dict[str, Param] = {
    "ranker": Param(
        str,
        "dense",
        "the ranker guarded (its own parameters separated by ;, as in fuse: bm25;k1=0.9)",
        nested=True,
    ),
    "model": Param(str, "", "a fitted guard model file (default: the packaged one)", kind="model"),
    "threshold": Param(
        float,
        -1.0,
        "the first detector flags a text whose probability of being a real answer is below "
        "this (-1: the model's threshold, calibrated where bound)",
    ),
    "calibrate": Param(
        float,
        CALIBRATED_SHARE,
        "bound to a collection, set each detector's threshold so that it flags this share of the "
        "collection's judged answers (gain above 0), as it was fitted to flag of the fitting "
        "answers, where that loosens it (never stricter than fitted); 0: the model's thresholds",
        minimum=0,
        maximum=0.5,
    ),
    "content": Param(
        float,
        0.0,
        "add this times log(1 + the text's distinct content terms beyond the question) to the "
        "guarded ranker's score (0.06 for dense's cosine, chosen on MEDIQA train+val)",
        minimum=0,
        maximum=MAX_CONTENT,
    ),
    "quoted": Param(
        float,
        QUOTED_SHARE,
        "the guarded ranker scores a text without every run of consecutive words it copies from "
        f"the question that holds at least this share of its words (and {QUOTED_WORDS} words or "
        "more; 0: the whole text)",
        minimum=0,
        maximum=1,
    ),
}


class GuardRanker(Ranker):
    """The guarded ranker's scores, flagged texts moved below (module docstring)."""

    name: ClassVar[str] = "guard"
    injection: ClassVar[str] = "pointwise"

    def __init__(self, params: Mapping[str, Any] | None = None, ranker: Ranker | None = None):
        merged = {key: p.default for key, p in PARAMS.items()}
        merged.update(params or {})
        sub = ranker if ranker is not None else make_ranker(sub_spec(str(merged["ranker"])))
        if isinstance(sub, GuardRanker):
            raise ConfigError("ranker 'guard': a guard inside a guard is not supported")
        merged["ranker"] = join_specs([sub])
        if float(merged["content"]) < 0:
            raise ConfigError(
                f"ranker 'guard': content must be at least 0, not {merged['content']}"
            )
        threshold = float(merged["threshold"])
        if threshold != -1.0 and not 0.0 <= threshold <= 1.0:
            raise ConfigError(
                f"ranker 'guard': threshold must lie in [0, 1] (or -1), not {threshold}"
            )
        super().__init__(merged)
        self.ranker = sub
        self.depends_on_candidate_set = sub.injection != "pointwise" or sub.depends_on_candidate_set
        self._features: GuardFeatures | None = None
        self._others: list[str] = []
        self._documents: dict[str, list[str]] = {}  # bound: each question's judged documents
        self._store: Path | None = None  # bound: the collection's folder (document embeddings)
        self._dq_texts: dict[str, str] = {}  # bound: row key of D_q -> its text
        self._quoted_runs: dict[str, tuple[int, frozenset[tuple[str, ...]]]] = {}  # quoted_runs
        self._cached: CachedRanker | None = None  # bound: the guarded ranker's score cache
        self._detectors: GuardModel | None = None  # bound: the model calibrated (``detectors``)

    @cached_property
    def model(self) -> GuardModel:
        """The fitted model, read once per ranker (it is read on every scoring call). A file
        that is none is a ``ModelError`` (the CLI says why; the service answers as for any model
        it does not offer, and tells nothing of the file)."""
        path = str(self.params["model"])
        if not path:
            return packaged_model()
        try:
            return GuardModel.from_json(path)
        except InputError as error:
            raise ModelError(str(error), spec="guard", param="model", value=path) from None

    def parts(self) -> tuple[Ranker, ...]:
        return (self.ranker,)

    def identity(self) -> dict[str, Any]:
        """Name and parameters, with the guarded ranker's fingerprint and the model's content."""
        identity = super().identity()
        identity["params"]["ranker"] = self.ranker.fingerprint()
        identity["params"]["model"] = self.model.digest
        identity["params"]["features"] = FEATURE_DEFINITIONS
        identity["params"]["calibration"] = CALIBRATION
        return identity

    def spec(self, complete: bool = False) -> str:
        if not complete:
            return super().spec()
        params = {**self.params, "ranker": join_specs([self.ranker], complete=True)}
        return format_spec(self.name, {k: v for k, v in sorted(params.items()) if v is not None})

    @property
    def score_tolerance(self) -> float:
        return self.ranker.score_tolerance

    def floors(self, scores: np.ndarray) -> np.ndarray:
        """The flagged texts' scores: those below ``-FLAG_OFFSET / 2``."""
        return np.asarray(scores, dtype=float) < -FLAG_OFFSET / 2

    def bind_collection(self, collection: Any) -> None:
        """Bind the guarded ranker; the collection's questions are those ``spec_rq`` compares
        with; D_q's scores by the guarded ranker come from the score cache beside it (what
        validating that ranker stores) when it is pointwise."""
        super().bind_collection(collection)
        self.ranker.bind_collection(collection)
        self._others = collection.topics["query"].astype(str).tolist()
        self._features = None
        candidates = collection.candidates()
        self._documents = judged_answers(collection, candidates)
        self._store = Path(collection.path)
        self._dq_texts = judged_texts(candidates)
        self._quoted_runs = {}  # read from this collection's judged answers
        self._detectors = None  # calibrated on this collection's judged answers
        self._cached = CachedRanker(
            self.ranker,
            ScoreCache(collection.path / SCORE_CACHE_FILE),
            str(collection.meta["fingerprint"]),
        )

    def ranker_scores(self, frame: pd.DataFrame) -> np.ndarray:
        """The guarded ranker's scores of ``frame``, each text without the runs it copies from
        its question (``unquoted``): D_q's rows of a pointwise ranker from the score cache
        (computed and stored when missing), every other row computed. A row is D_q's when its
        key (qid, docno) and the text scored are a judged document's: a text of its own under a
        judged document's docno, or a document cut, is scored and never stored under it."""
        share = float(self.params["quoted"])
        queries, texts = _queries_and_texts(frame)
        runs = self._quoted_runs
        for q in dict.fromkeys(queries):  # once per question while bound, not once per batch
            if q not in runs:
                runs[q] = quoted_runs(q, share, self._documents.get(q, ()))
        scored = [unquoted(q, t, share, runs=runs[q]) for q, t in zip(queries, texts, strict=True)]
        if scored != texts:
            frame = frame.assign(text=scored)
        rows = self.ranker.formulate(frame)
        in_dq = self._from_cache(frame)
        if not in_dq.any():
            return np.asarray(self.ranker.score_frame(rows), dtype=float)
        return scores_with_cache(self._cached, rows, in_dq)

    def _from_cache(self, frame: pd.DataFrame) -> np.ndarray:
        """True for each row whose guarded-ranker score ``ranker_scores`` reads from the score
        cache: D_q's rows (``judged_rows``) of a pointwise ranker, while bound."""
        if self._cached is None or self.depends_on_candidate_set:
            return np.zeros(len(frame), dtype=bool)
        return judged_rows(frame, self._dq_texts)

    def features(self) -> GuardFeatures:
        if self._features is None:
            self._features = GuardFeatures(
                self.model, self._encoder(), self._others, self._documents, self._store
            )
        return self._features

    def _encoder(self) -> Ranker:
        """The features' encoder (``ENCODER``): the guarded ranker itself when it is that
        encoder (the same model and parameters: the default ``guard``), so that one embedding
        stream serves both (``embedding_stream``)."""
        encoder = make_ranker(ENCODER)
        return self.ranker if self.ranker.fingerprint() == encoder.fingerprint() else encoder

    @contextlib.contextmanager
    def embedding_stream(self, texts: Sequence[str]) -> Iterator[None]:
        """While open, the features' encoder serves the embeddings of ``texts`` (the positioner's
        answers and their questions) from one length-sorted stream embedded now
        (``DenseRanker.embedding_stream``); where the guarded ranker is that encoder, its scores
        read the same vectors, so each text is embedded once, not once for the ranker and once
        for the features. Vectors move by float rounding with the stream (about 1e-7); NRP
        does not (docs/nrp.md)."""
        with self.features().encoder.embedding_stream(texts):
            yield

    def assess(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The guard's features of each row (query, text), its ``answer_share`` (the least of
        each detector's probability of a real answer over its threshold), its ``evidence`` of
        being no answer (``GuardModel.evidence``) and whether it is flagged, and floored
        (``flagged``: the evidence above the model's ``floor_evidence``, ``floored``)."""
        table = self.features().frame(*_queries_and_texts(frame))
        detectors = self.detectors()
        shares = detectors.shares(table, self._given_threshold)
        evidence = evidence_of(shares)
        return table.assign(
            answer_share=shares.min(axis=1),
            evidence=evidence,
            flagged=floored(evidence, detectors.floor_evidence),
        )

    def collection_work(self) -> str | None:
        """``Ranker.collection_work``: calibrating the detectors on the bound collection's
        judged answers (every one's features), when this ``calibrate`` has no thresholds kept
        beside the collection and none calibrated in this process; else the guarded ranker's."""
        share = float(self.params["calibrate"])
        rows = sum(len(docs) for docs in self._documents.values())
        pending = (
            self._detectors is None
            and enough_to_calibrate(rows, share)
            and not self._kept_path("thresholds", [share]).is_file()
        )
        if pending:
            return f"calibrating the guard (calibrate={share:g}) on {rows:,} judged answers"
        return super().collection_work()

    def detectors(self) -> GuardModel:
        """The model whose thresholds flag texts: bound to a collection, each detector's
        threshold calibrated on the collection's judged answers (``calibrate``; kept beside the
        collection, ``guard-thresholds-KEY.json``), else the model's own."""
        share = float(self.params["calibrate"])
        answers = sum(len(docs) for docs in self._documents.values())
        if not enough_to_calibrate(answers, share):  # no detector has enough rows to go by
            return self.model
        if self._detectors is None:
            self._detectors = self._calibrated(share)
        return self._detectors

    @property
    def _given_threshold(self) -> float | None:
        """``threshold=``: the first detector's threshold, None for the model's own (-1)."""
        given = float(self.params["threshold"])
        return None if given == -1.0 else given

    def _judged_rows(self) -> list[tuple[str, str]]:
        """(question, judged answer) of the bound collection: what calibration reads."""
        return [(q, t) for q, docs in self._documents.items() for t in docs]

    def _kept(self, kind: str, key: list[Any], compute: Callable[[], Any], read: Callable) -> Any:
        """What ``compute`` gives (JSON), kept beside the collection in
        ``guard-KIND-KEY.json`` (``KEY``: a hash of what calibration reads and ``key``) and
        read back with ``read`` by the next guard; a file that cannot be read is computed and
        written again, a folder that cannot be written keeps nothing."""
        path = self._kept_path(kind, key) if self._store is not None else None
        if path is not None and path.is_file():
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                return read(json.loads(path.read_text(encoding="utf-8")))
        found = compute()
        if path is not None:
            with contextlib.suppress(OSError):
                write_aside(path, lambda part: part.write_text(json.dumps(found) + "\n"))
        return read(found)

    def _kept_path(self, kind: str, key: list[Any]) -> Path:
        """Where ``_kept`` keeps what it computes for ``kind`` and ``key`` (bound)."""
        digest = hashlib.sha256(
            json.dumps([self.model.digest, self.features().encoder.fingerprint(),
                        FEATURE_DEFINITIONS, CALIBRATION, *key[:1], self._others,
                        self._judged_rows(), *key[1:]]).encode("utf-8", "surrogatepass")
        )  # fmt: skip
        return Path(self._store or ".") / f"guard-{kind}-{digest.hexdigest()[:24]}.json"

    def _calibrated(self, share: float) -> GuardModel:
        def compute() -> dict[str, Any]:
            rows = self._judged_rows()
            table = self.features().frame([q for q, _ in rows], [t for _, t in rows])
            calibrated = self.model.calibrated(table, share)
            return {
                "thresholds": [d.threshold for d in (calibrated, *calibrated.also)],
                "floor_evidence": calibrated.floor_evidence,
            }

        return self._kept(
            "thresholds", [share], compute, lambda kept: _with_thresholds(self.model, kept)
        )

    def guarded(self) -> Ranker:
        return self.ranker

    def cross_fitted_floors(self, folds: int, seed: int) -> tuple[int, int] | None:
        """``Ranker.cross_fitted_floors``: the judged answers calibration reads (a gain above 0
        in the first dimension, each with its question), the questions drawn into ``folds``
        parts with ``seed``; each part's answers judged by the detectors calibrated on the
        other parts' (``GuardModel.calibrated``, as ``detectors`` calibrates); kept beside the
        collection (``guard-crossfit-KEY.json``). None unbound, with ``calibrate=0`` or with
        fewer than two questions."""
        share = float(self.params["calibrate"])
        if share <= 0 or folds < 2 or len(self._documents) < 2:
            return None
        key = [share, folds, seed, float(self.params["threshold"])]
        return self._kept(
            "crossfit", key, lambda: list(self._cross_fitted(share, folds, seed)),
            lambda kept: (int(kept[0]), int(kept[1])),
        )  # fmt: skip

    def _cross_fitted(self, share: float, folds: int, seed: int) -> tuple[int, int]:
        """``cross_fitted_floors`` computed: (judged answers, of them floored)."""
        questions = list(self._documents)
        rows = self._judged_rows()
        table = self.features().frame([q for q, _ in rows], [t for _, t in rows])
        drawn = np.random.default_rng(seed).permutation(len(questions)) % folds
        part = dict(zip(questions, drawn.tolist(), strict=True))
        parts = np.array([part[q] for q, _ in rows])
        count = 0
        for k in range(folds):
            model = self.model.calibrated(table[parts != k], share)
            evidence = model.evidence(table[parts == k], self._given_threshold)
            count += int(floored(evidence, model.floor_evidence).sum())
        return len(rows), count

    def flags(self, frame: pd.DataFrame) -> np.ndarray:
        """True for each row whose text the guard takes for no real answer."""
        if frame.empty:
            return np.zeros(0, dtype=bool)
        return self.assess(frame)["flagged"].to_numpy(dtype=bool)

    def score_frame(self, frame: pd.DataFrame) -> np.ndarray:
        frame = frame.reset_index(drop=True)
        with self._shared_embeddings(frame):
            scores = self.ranker_scores(frame)
            if np.any(np.abs(scores) >= FLAG_OFFSET / 2):
                raise NrpError(
                    f"{self.spec()}: the guarded ranker scores beyond +-{FLAG_OFFSET / 2:g}; "
                    "a flagged text could not be put below every other"
                )
            if frame.empty:
                return scores
            return self.guarded_scores(scores, self.assess(frame))

    @contextlib.contextmanager
    def _shared_embeddings(self, frame: pd.DataFrame) -> Iterator[None]:
        """Where the guarded ranker is the features' encoder and no stream is open (a caller
        other than the positioner: validation's degenerate texts, the service's requests), one
        stream of the questions and texts of the rows that both would embed: rows whose
        features are not known yet and whose ranker score is not read from the score cache.
        Rows only one of them needs are embedded by that one, as before."""
        features = self.features()
        encoder = features.encoder
        if encoder is not self.ranker or frame.empty or encoder.streaming:
            yield
            return
        queries, texts = _queries_and_texts(frame)
        both = ~features.known(queries, texts) & ~self._from_cache(frame)
        if not both.any():
            yield
            return
        rows = np.flatnonzero(both)
        with encoder.embedding_stream([queries[i] for i in rows] + [texts[i] for i in rows]):
            yield

    def guarded_scores(self, scores: np.ndarray, assessed: pd.DataFrame) -> np.ndarray:
        """The guard's scores from the guarded ranker's (``ranker_scores``) and the guard's
        view of the same rows (``assess``): flagged rows moved below, ``content`` added."""
        content = float(self.params["content"])
        if content:
            scores = scores + content * assessed["log_novel"].to_numpy(dtype=float)
        flagged = assessed["flagged"].to_numpy(dtype=bool)
        # flagged: in [-FLAG_OFFSET, -FLAG_OFFSET / 2) by the guard's probability, spread so that
        # the relative tie tolerance at this magnitude never merges two distinct probabilities
        share = assessed["answer_share"].to_numpy(dtype=float)
        below = -FLAG_OFFSET + (FLAG_OFFSET / 2) * np.minimum(share, 1.0)
        return np.where(flagged, below, scores)


def _queries_and_texts(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The questions and texts of a ranker frame's rows (missing ones "")."""
    return (frame["query"].fillna("").astype(str).tolist(),
            frame["text"].fillna("").astype(str).tolist())  # fmt: skip


def _with_thresholds(model: GuardModel, kept: Mapping[str, Any]) -> GuardModel:
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


def _available() -> tuple[bool, str]:
    from nrp.rankers.registry import all_rankers

    return all_rankers()["dense"].available()


register(
    RankerInfo(
        name="guard",
        description="a ranker whose texts that only mirror or evade the question (echoes, "
        "restatements, keyword lists, evasions, word salad) rank below every real answer; "
        "docs/validity.md",
        backend="sentence-transformers",
        build=lambda params: GuardRanker(params),
        params=PARAMS,
        available=_available,
    )
)
